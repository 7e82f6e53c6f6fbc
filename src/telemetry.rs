//! Opt-in OpenTelemetry export of the runtime's `tracing` spans (runs, model calls, tool calls,
//! hook dispatches and the hooks in them) over OTLP/HTTP. It is configured the way every
//! OpenTelemetry SDK is, by the standard `OTEL_*` variables, and stays off unless an OTLP
//! endpoint is set: without it no subscriber is installed and the spans cost next to nothing.

use opentelemetry::trace::TracerProvider as _;
use opentelemetry_otlp::{Protocol, WithExportConfig};
use opentelemetry_sdk::trace::SdkTracerProvider;
use opentelemetry_sdk::Resource;
use tracing_subscriber::filter::filter_fn;
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::Layer;

use crate::model::{display_url, Secrets};

/// The service name when `OTEL_SERVICE_NAME` is not set.
pub const DEFAULT_SERVICE_NAME: &str = "agent-runtime-hooks";
/// The instrumentation scope the spans are reported under.
const SCOPE: &str = "agent-runtime-hooks";
/// Spans of this crate (targets start with it) are exported; the HTTP stack's are not.
const TARGET: &str = "agent_runtime_hooks";

/// What the `OTEL_*` variables ask for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// The traces endpoint itself (spans are POSTed here).
    pub endpoint: String,
    /// How spans are encoded: `http/protobuf` (the OTLP default) or `http/json`.
    pub protocol: Protocol,
    pub service_name: String,
    /// What errors about the export must not show: the endpoint's user-info and query values,
    /// and the values of the OTLP headers variables.
    pub secrets: Secrets,
}

impl Settings {
    /// Reads the standard variables through `get`. `Ok(None)`: export was not asked for (no
    /// endpoint, `OTEL_SDK_DISABLED=true` or `OTEL_TRACES_EXPORTER=none`). `Err`: it was asked
    /// for in a way this runtime cannot export (the message says which variable and why).
    pub fn from_env(get: impl Fn(&str) -> Option<String>) -> Result<Option<Settings>, String> {
        let get = |name: &str| {
            get(name)
                .map(|value| value.trim().to_string())
                .filter(|value| !value.is_empty())
        };
        // Enumerated values are case-insensitive.
        let lower = |name: &str| get(name).map(|value| value.to_ascii_lowercase());
        if lower("OTEL_SDK_DISABLED").as_deref() == Some("true") {
            return Ok(None);
        }
        if let Some(exporters) = lower("OTEL_TRACES_EXPORTER") {
            // A list: this runtime exports to "otlp" and leaves the others to the process.
            let listed: Vec<&str> = exporters.split(',').map(str::trim).collect();
            if !listed.contains(&"otlp") {
                if listed == ["none"] {
                    return Ok(None);
                }
                return Err(format!(
                    "OTEL_TRACES_EXPORTER \"{exporters}\" names no exporter this runtime has (use \"otlp\" or \"none\")"
                ));
            }
        }
        // The signal's own endpoint is used as it is; the general one gets the traces path.
        let (variable, given) = match (
            get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"),
            get("OTEL_EXPORTER_OTLP_ENDPOINT"),
        ) {
            (Some(traces), _) => ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", traces),
            (None, Some(base)) => ("OTEL_EXPORTER_OTLP_ENDPOINT", base),
            (None, None) => return Ok(None),
        };
        if !(given.starts_with("http://") || given.starts_with("https://")) {
            return Err(format!(
                "{variable} must be an http:// or https:// URL (got \"{}\")",
                display_url(&given)
            ));
        }
        let mut secrets = Secrets::new(Some(&given), []);
        for variable in ["OTEL_EXPORTER_OTLP_HEADERS", "OTEL_EXPORTER_OTLP_TRACES_HEADERS"] {
            for pair in get(variable).unwrap_or_default().split(',') {
                secrets.add(pair.split_once('=').map_or(pair, |(_, value)| value));
            }
        }
        let endpoint = match variable {
            "OTEL_EXPORTER_OTLP_ENDPOINT" => format!("{}/v1/traces", given.trim_end_matches('/')),
            _ => given,
        };
        let (variable, protocol) = match lower("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL") {
            Some(protocol) => ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", Some(protocol)),
            None => ("OTEL_EXPORTER_OTLP_PROTOCOL", lower("OTEL_EXPORTER_OTLP_PROTOCOL")),
        };
        let protocol = match protocol.as_deref() {
            None | Some("http/protobuf") => Protocol::HttpBinary,
            Some("http/json") => Protocol::HttpJson,
            Some(other) => {
                return Err(format!(
                    "{variable} \"{other}\" is not supported (use \"http/protobuf\" or \"http/json\")"
                ))
            }
        };
        // OTEL_SERVICE_NAME wins over a service.name in OTEL_RESOURCE_ATTRIBUTES.
        let from_attributes = get("OTEL_RESOURCE_ATTRIBUTES").and_then(|attributes| {
            attributes.split(',').find_map(|pair| {
                let (key, value) = pair.split_once('=')?;
                (key.trim() == "service.name" && !value.trim().is_empty()).then(|| value.trim().to_string())
            })
        });
        Ok(Some(Settings {
            endpoint,
            protocol,
            service_name: get("OTEL_SERVICE_NAME")
                .or(from_attributes)
                .unwrap_or_else(|| DEFAULT_SERVICE_NAME.to_string()),
            secrets,
        }))
    }
}

/// A running export: its spans are batched and sent from a thread of its own.
pub struct Telemetry {
    provider: SdkTracerProvider,
    secrets: Secrets,
    /// Where spans go, as an error may show it (no user-info, no query).
    endpoint: String,
}

impl Telemetry {
    /// Starts exporting as `settings` say. Headers (`OTEL_EXPORTER_OTLP_HEADERS`), the request
    /// timeout and the batch schedule (`OTEL_BSP_*`) are read by the exporter itself.
    pub fn start(settings: &Settings) -> Result<Telemetry, String> {
        let exporter = opentelemetry_otlp::SpanExporter::builder()
            .with_http()
            .with_protocol(settings.protocol)
            .with_endpoint(settings.endpoint.clone())
            .build()
            .map_err(|error| {
                let error = error.to_string();
                format!("the OTLP exporter could not be made: {}", settings.secrets.mask(&error))
            })?;
        let resource = Resource::builder()
            .with_service_name(settings.service_name.clone())
            .build();
        let provider = SdkTracerProvider::builder()
            .with_batch_exporter(exporter)
            .with_resource(resource)
            .build();
        Ok(Telemetry {
            provider,
            secrets: settings.secrets.clone(),
            endpoint: display_url(&settings.endpoint),
        })
    }

    /// A subscriber that sends this crate's spans to the export. Only spans: the crate's log
    /// events carry what hooks threw and what deliveries failed with, which a trace must not.
    pub fn subscriber(&self) -> impl tracing::Subscriber + Send + Sync {
        // Only the spans' own fields: no source locations, thread ids or busy/idle counters.
        let layer = tracing_opentelemetry::layer()
            .with_tracer(self.provider.tracer(SCOPE))
            .with_location(false)
            .with_threads(false)
            .with_target(false)
            .with_tracked_inactivity(false)
            .with_filter(filter_fn(|metadata| {
                metadata.is_span() && metadata.target().starts_with(TARGET)
            }));
        tracing_subscriber::registry().with(layer)
    }

    /// Sends every finished span now, waiting for the endpoint's answer (5 s at most: the
    /// batch processor's own limit).
    pub fn flush(&self) -> Result<(), String> {
        // The exporter's error may quote the endpoint, query and user-info included.
        self.provider.force_flush().map_err(|error| {
            let why = export_failure(&self.secrets.mask(&error.to_string()));
            format!("spans could not be exported to {}: {why}", self.endpoint)
        })
    }
}

/// The exporter's error, which nests the HTTP stack's `Debug` text several levels deep, as one
/// short phrase: what a person needs to fix it.
fn export_failure(text: &str) -> String {
    if text.contains("ConnectionRefused") {
        return "connection refused".into();
    }
    if let Some(at) = text.find("Status Code: ") {
        let status: String = text[at + 13..].chars().take_while(char::is_ascii_digit).collect();
        return format!("the collector answered HTTP {status}");
    }
    // A collector (or a proxy) that accepts and drops the connection: hyper reports the request
    // unsent or its answer cut short, without a `message` to quote.
    let dropped = [
        "IncompleteMessage",
        "ConnectionReset",
        "ConnectionAborted",
        "connection closed",
        "BrokenPipe",
    ];
    if dropped.iter().any(|sign| text.contains(sign)) {
        return "the collector closed the connection".into();
    }
    if text.contains("TimedOut") || text.contains("timed out") || text.contains("Timeout") {
        return "timed out".into();
    }
    if text.contains("dns error") || text.contains("failed to lookup address") {
        return "the collector's host name could not be resolved".into();
    }
    // The innermost `message: "…"` of the chain, else the text without its quoting.
    let innermost = text
        .rsplit("message: ")
        .next()
        .filter(|_| text.contains("message: "))
        .or_else(|| text.rsplit("Failure(\"").next().filter(|_| text.contains("Failure(\"")));
    let phrase = innermost.unwrap_or(text).trim_start_matches(['\\', '"']);
    let phrase: String = phrase
        .chars()
        .take_while(|c| !matches!(c, '\\' | '"'))
        .take(200)
        .collect();
    // What is left is still the HTTP stack's `Debug` text: no phrase a person could act on.
    if phrase.trim().is_empty() || phrase.contains(['{', '(']) {
        "the export failed".into()
    } else {
        phrase.trim().to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn settings(pairs: &[(&str, &str)]) -> Result<Option<Settings>, String> {
        let env: HashMap<String, String> = pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
        Settings::from_env(|name| env.get(name).cloned())
    }

    #[test]
    fn an_export_failure_is_one_short_phrase() {
        // As opentelemetry-otlp 0.31 reports a collector that is down.
        let refused = r#"Operation failed: errs: [Err(InternalFailure("reqwest::Error { kind: Request, url: \"http://127.0.0.1:9/v1/traces\", source: hyper_util::client::legacy::Error(Connect, ConnectError(\"tcp connect error\", 127.0.0.1:9, Os { code: 111, kind: ConnectionRefused, message: \"Connection refused\" })) }"))]"#;
        assert_eq!(export_failure(refused), "connection refused");
        let status = r#"Operation failed: errs: [Err(InternalFailure("OpenTelemetry trace export failed. Url: http://c/v1/traces, Status Code: 503, Response: b\"busy\""))]"#;
        assert_eq!(export_failure(status), "the collector answered HTTP 503");
        let other = r#"Operation failed: errs: [Err(InternalFailure("x, message: \"Network is unreachable\" })"))]"#;
        assert_eq!(export_failure(other), "Network is unreachable");
        // A port that accepts and drops every connection (seen under load).
        let dropped = r#"Operation failed: errs: [Err(InternalFailure("reqwest::Error { kind: Request, url: \"http://127.0.0.1:37001/v1/traces\", source: hyper_util::client::legacy::Error(SendRequest, hyper::Error(IncompleteMessage)) }"))]"#;
        assert_eq!(export_failure(dropped), "the collector closed the connection");
        let unknown = r#"Operation failed: errs: [Err(InternalFailure("reqwest::Error { kind: Request, url: \"http://c/v1/traces\", source: Something(New) }"))]"#;
        assert_eq!(export_failure(unknown), "the export failed");
        assert_eq!(
            export_failure("Operation failed: BatchSpanProcessor is shut down"),
            "Operation failed: BatchSpanProcessor is shut down"
        );
    }

    #[test]
    fn off_unless_an_endpoint_is_set() {
        assert_eq!(settings(&[]), Ok(None));
        assert_eq!(
            settings(&[("OTEL_SERVICE_NAME", "svc"), ("OTEL_EXPORTER_OTLP_ENDPOINT", " ")]),
            Ok(None)
        );
    }

    #[test]
    fn the_general_endpoint_gets_the_traces_path_and_the_signal_endpoint_is_kept() {
        let general = settings(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318/")])
            .unwrap()
            .unwrap();
        assert_eq!(general.endpoint, "http://127.0.0.1:4318/v1/traces");
        assert_eq!(general.protocol, Protocol::HttpBinary);
        assert_eq!(general.service_name, DEFAULT_SERVICE_NAME);
        let own = settings(&[
            ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://a:4318"),
            ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "https://b/custom"),
            ("OTEL_SERVICE_NAME", "checkout"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(own.endpoint, "https://b/custom");
        assert_eq!(own.service_name, "checkout");
    }

    #[test]
    fn disabled_by_the_standard_switches() {
        let endpoint = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://a:4318");
        assert_eq!(settings(&[endpoint, ("OTEL_SDK_DISABLED", "TRUE")]), Ok(None));
        assert_eq!(settings(&[endpoint, ("OTEL_TRACES_EXPORTER", "none")]), Ok(None));
        assert!(settings(&[endpoint, ("OTEL_SDK_DISABLED", "false")]).unwrap().is_some());
        assert!(settings(&[endpoint, ("OTEL_TRACES_EXPORTER", "otlp")])
            .unwrap()
            .is_some());
        assert!(settings(&[endpoint, ("OTEL_TRACES_EXPORTER", "console, OTLP")])
            .unwrap()
            .is_some());
        assert_eq!(settings(&[endpoint, ("OTEL_TRACES_EXPORTER", "None")]), Ok(None));
        // An exporter named with no endpoint stays off: export is opted into by the endpoint.
        assert_eq!(settings(&[("OTEL_TRACES_EXPORTER", "otlp")]), Ok(None));
    }

    #[test]
    fn the_service_name_comes_from_otel_service_name_then_the_resource_attributes() {
        let endpoint = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://a:4318");
        let attributes = (
            "OTEL_RESOURCE_ATTRIBUTES",
            "deployment.environment=prod, service.name = billing",
        );
        let name = |pairs: &[(&str, &str)]| settings(pairs).unwrap().unwrap().service_name;
        assert_eq!(name(&[endpoint, attributes]), "billing");
        assert_eq!(
            name(&[endpoint, attributes, ("OTEL_SERVICE_NAME", "checkout")]),
            "checkout"
        );
        assert_eq!(
            name(&[endpoint, ("OTEL_RESOURCE_ATTRIBUTES", "team=a")]),
            DEFAULT_SERVICE_NAME
        );
    }

    #[test]
    fn protocol_per_signal_wins_and_unsupported_ones_are_named() {
        let endpoint = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://a:4318");
        let json = settings(&[endpoint, ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")])
            .unwrap()
            .unwrap();
        assert_eq!(json.protocol, Protocol::HttpJson);
        let own = settings(&[
            endpoint,
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json"),
            ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf"),
        ])
        .unwrap()
        .unwrap();
        assert_eq!(own.protocol, Protocol::HttpBinary);
        assert_eq!(
            settings(&[endpoint, ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")]),
            Err(
                "OTEL_EXPORTER_OTLP_PROTOCOL \"grpc\" is not supported (use \"http/protobuf\" or \"http/json\")".into()
            )
        );
        assert_eq!(
            settings(&[endpoint, ("OTEL_TRACES_EXPORTER", "zipkin")]),
            Err("OTEL_TRACES_EXPORTER \"zipkin\" names no exporter this runtime has (use \"otlp\" or \"none\")".into())
        );
        let upper = settings(&[endpoint, ("OTEL_EXPORTER_OTLP_PROTOCOL", "HTTP/JSON")])
            .unwrap()
            .unwrap();
        assert_eq!(upper.protocol, Protocol::HttpJson);
        assert_eq!(
            settings(&[("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "collector:4318")]),
            Err(
                "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT must be an http:// or https:// URL (got \"collector:4318\")".into()
            )
        );
        // The value as it was given, not with the traces path added.
        assert_eq!(
            settings(&[("OTEL_EXPORTER_OTLP_ENDPOINT", "collector:4318")]),
            Err("OTEL_EXPORTER_OTLP_ENDPOINT must be an http:// or https:// URL (got \"collector:4318\")".into())
        );
        // But never its user-info or query.
        assert_eq!(
            settings(&[(
                "OTEL_EXPORTER_OTLP_ENDPOINT",
                "tcp://me:MARK-pw@collector:4318/x?key=MARK-q"
            )]),
            Err(
                "OTEL_EXPORTER_OTLP_ENDPOINT must be an http:// or https:// URL (got \"tcp://collector:4318/x\")"
                    .into()
            )
        );
    }
}
