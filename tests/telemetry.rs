//! OpenTelemetry export without Node: a run's spans reach an OTLP/HTTP endpoint on 127.0.0.1 as
//! one trace (run → model calls and tool calls → dispatches → hooks), with their fields.

mod common;

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::sync::{mpsc, Arc};

use agent_runtime_hooks::agent::{SendOptions, Session, StreamEvent};
use agent_runtime_hooks::model::Secrets;
use agent_runtime_hooks::telemetry::{Settings, Telemetry};
use common::{audited_tool_call, f, one_call, run, scripted, session as new_session, tool, FakeHost};
use opentelemetry_otlp::Protocol;
use serde_json::{json, Value};

/// One POST the collector received: its path, content type and body.
struct Received {
    path: String,
    content_type: String,
    body: Vec<u8>,
}

/// A minimal OTLP/HTTP collector on 127.0.0.1 that answers every request with 200 `{}`.
fn collector() -> (String, mpsc::Receiver<Received>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = listener.local_addr().unwrap();
    let (sender, received) = mpsc::channel();
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            let sender = sender.clone();
            std::thread::spawn(move || {
                let mut reader = BufReader::new(stream.try_clone().unwrap());
                loop {
                    let mut request_line = String::new();
                    if reader.read_line(&mut request_line).unwrap_or(0) == 0 {
                        return;
                    }
                    let mut headers = HashMap::new();
                    loop {
                        let mut line = String::new();
                        reader.read_line(&mut line).unwrap();
                        let line = line.trim_end();
                        if line.is_empty() {
                            break;
                        }
                        let (name, value) = line.split_once(':').unwrap();
                        headers.insert(name.to_ascii_lowercase(), value.trim().to_string());
                    }
                    let length: usize = headers.get("content-length").map_or(0, |value| value.parse().unwrap());
                    let mut body = vec![0; length];
                    reader.read_exact(&mut body).unwrap();
                    let path = request_line.split(' ').nth(1).unwrap_or_default().to_string();
                    let content_type = headers.remove("content-type").unwrap_or_default();
                    let _ = sender.send(Received {
                        path,
                        content_type,
                        body,
                    });
                    let _ = stream
                        .write_all(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 2\r\n\r\n{}");
                }
            });
        }
    });
    (format!("http://{address}/v1/traces"), received)
}

fn settings(endpoint: &str, protocol: Protocol) -> Settings {
    Settings {
        endpoint: endpoint.to_string(),
        protocol,
        service_name: "checkout-agent".into(),
        secrets: Secrets::new(Some(endpoint), []),
    }
}

/// Everything received so far: after a flush, every export (the collector queues a request
/// before it answers, and the flush waits for the answer).
fn drain(received: &mpsc::Receiver<Received>) -> Vec<Received> {
    received.try_iter().collect()
}

/// A span of an OTLP/JSON export: its name, ids, string attributes and status.
#[derive(Debug, Clone)]
struct Span {
    name: String,
    trace: String,
    id: String,
    parent: String,
    attributes: HashMap<String, String>,
    /// Each attribute's OTLP value kind (`stringValue`, `intValue`, `doubleValue`, `boolValue`).
    kinds: HashMap<String, String>,
    status: Value,
}

fn spans_of(requests: &[Received]) -> (Vec<Value>, Vec<Span>) {
    let mut resources = Vec::new();
    let mut spans = Vec::new();
    for request in requests {
        let export: Value = serde_json::from_slice(&request.body).unwrap();
        for resource_spans in export["resourceSpans"].as_array().unwrap() {
            resources.push(resource_spans["resource"].clone());
            for scope in resource_spans["scopeSpans"].as_array().unwrap() {
                assert_eq!(scope["scope"]["name"], "agent-runtime-hooks");
                for span in scope["spans"].as_array().unwrap() {
                    let kinds = span["attributes"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|attribute| {
                            let kind = attribute["value"]
                                .as_object()
                                .and_then(|value| value.keys().next().cloned());
                            (attribute["key"].as_str().unwrap().to_string(), kind.unwrap_or_default())
                        })
                        .collect();
                    let attributes = span["attributes"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .map(|attribute| {
                            let value = &attribute["value"];
                            let text = value["stringValue"]
                                .as_str()
                                .map(str::to_string)
                                .unwrap_or_else(|| value["intValue"].to_string().trim_matches('"').to_string());
                            (attribute["key"].as_str().unwrap().to_string(), text)
                        })
                        .collect();
                    spans.push(Span {
                        name: span["name"].as_str().unwrap().into(),
                        trace: span["traceId"].as_str().unwrap().into(),
                        id: span["spanId"].as_str().unwrap().into(),
                        parent: span["parentSpanId"].as_str().unwrap_or_default().into(),
                        attributes,
                        kinds,
                        status: span["status"].clone(),
                    });
                }
            }
        }
    }
    (resources, spans)
}

/// Runs a session made from `options` once, with export on, and returns it with what the
/// collector received.
async fn traced_run(options: Value, host: FakeHost, protocol: Protocol) -> (Arc<Session>, Vec<Received>) {
    let (endpoint, received) = collector();
    let telemetry = Telemetry::start(&settings(&endpoint, protocol)).unwrap();
    let (session, _host) = new_session(options, host);
    {
        let _guard = tracing::subscriber::set_default(telemetry.subscriber());
        run(&session, "go").await;
    }
    telemetry.flush().unwrap();
    (session, drain(&received))
}

#[tokio::test]
async fn a_run_is_one_trace_of_model_calls_tool_calls_dispatches_and_hooks() {
    let (options, host) = audited_tool_call();
    let (session, requests) = traced_run(options, host, Protocol::HttpJson).await;
    assert!(!requests.is_empty(), "nothing was exported");
    for request in &requests {
        assert_eq!(request.path, "/v1/traces");
        assert_eq!(request.content_type, "application/json");
    }
    let (resources, spans) = spans_of(&requests);
    let service = resources[0]["attributes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|attribute| attribute["key"] == "service.name")
        .unwrap();
    assert_eq!(service["value"]["stringValue"], "checkout-agent");

    let mut names: Vec<&str> = spans.iter().map(|span| span.name.as_str()).collect();
    names.sort_unstable();
    assert_eq!(
        names,
        [
            "agent_run",
            "hook",
            "hook",
            "hook_dispatch",
            "hook_dispatch",
            "model_call",
            "model_call",
            "tool_call"
        ]
    );
    assert!(
        spans.iter().all(|span| span.trace == spans[0].trace),
        "one trace per run"
    );
    let find = |name: &str, key: &str, value: &str| {
        spans
            .iter()
            .find(|span| span.name == name && span.attributes.get(key).map(String::as_str) == Some(value))
            .unwrap_or_else(|| panic!("no {name} span with {key}={value}: {spans:#?}"))
    };
    // A dispatch or hook span: where it nests and how it ended.
    let nested = |name: &str, key: &str, value: &str, parent: &Span, outcome: &str| {
        let span = find(name, key, value);
        assert_eq!(
            (span.parent.as_str(), span.attributes["outcome"].as_str()),
            (parent.id.as_str(), outcome)
        );
        span
    };
    let root = spans.iter().find(|span| span.name == "agent_run").unwrap();
    assert_eq!(root.parent, "");
    assert_eq!(root.attributes["session_id"], session.id);
    assert_eq!(root.attributes["stop_reason"], "done");
    assert_eq!(root.attributes["turns"], "2");
    let tool_call = find("tool_call", "tool", "t");
    assert_eq!(tool_call.parent, root.id);
    assert_eq!(tool_call.attributes["tool_call_id"], "c1");
    // A PostToolUse hook that throws fails the call (fail-closed), and the span says so.
    assert_eq!(tool_call.attributes["status"], "error");
    assert_eq!(find("model_call", "turn", "1").parent, root.id);
    assert_eq!(find("model_call", "turn", "2").parent, root.id);
    let pre = nested("hook_dispatch", "event", "PreToolUse", tool_call, "ok");
    let post = nested("hook_dispatch", "event", "PostToolUse", tool_call, "threw");
    nested("hook", "hook", "advanced.hooks.PreToolUse[0]", pre, "ok");
    nested("hook", "hook", "audit", post, "threw");
    for span in spans.iter().filter(|span| span.name.starts_with("hook")) {
        let elapsed: u64 = span.attributes["elapsed_us"].parse().unwrap();
        assert!(elapsed < 10_000_000, "{span:?}");
        assert_eq!(span.kinds["elapsed_us"], "intValue", "{span:?}");
    }
    // Numbers arrive as numbers, text as text.
    assert_eq!(root.kinds["turns"], "intValue");
    assert_eq!(find("model_call", "turn", "1").kinds["turn"], "intValue");
    assert_eq!(root.kinds["stop_reason"], "stringValue");
}

#[tokio::test]
async fn a_failed_run_is_an_error_span_with_the_failure() {
    let (_, requests) = traced_run(
        json!({"model": scripted(json!([]))}),
        FakeHost::default(),
        Protocol::HttpJson,
    )
    .await;
    let (_, spans) = spans_of(&requests);
    let root = spans.iter().find(|span| span.name == "agent_run").unwrap();
    assert_eq!(root.attributes["stop_reason"], "error");
    assert_eq!(root.status["code"], 2, "{:?}", root.status);
    assert_eq!(
        root.status["message"],
        "scriptedModel ran out of turns: it has 0, and this is model call 1"
    );
}

#[tokio::test]
async fn protobuf_bodies_carry_the_spans() {
    let (session, requests) = traced_run(
        json!({"model": scripted(json!([{"text": "hi"}]))}),
        FakeHost::default(),
        Protocol::HttpBinary,
    )
    .await;
    assert_eq!(requests[0].path, "/v1/traces");
    assert_eq!(requests[0].content_type, "application/x-protobuf");
    // Protobuf keeps strings as they are: the span names and the session id are in the body.
    let body = &requests[0].body;
    let contains = |needle: &[u8]| body.windows(needle.len()).any(|window| window == needle);
    assert!(contains(b"agent_run") && contains(b"model_call"));
    assert!(contains(session.id.as_bytes()));
}

#[test]
fn a_collector_that_is_down_fails_the_flush_with_its_reason() {
    // A port of ours that drops every connection (a freed port could be taken meanwhile).
    let down = TcpListener::bind("127.0.0.1:0").unwrap();
    let endpoint = format!("http://{}/v1/traces", down.local_addr().unwrap());
    std::thread::spawn(move || down.incoming().for_each(drop));
    let telemetry = Telemetry::start(&settings(&endpoint, Protocol::HttpJson)).unwrap();
    {
        let _guard = tracing::subscriber::set_default(telemetry.subscriber());
        tracing::info_span!(target: "agent_runtime_hooks::agent::run", "agent_run").in_scope(|| {});
    }
    let problem = telemetry.flush().unwrap_err();
    assert!(
        problem.starts_with("spans could not be exported to http://127.0.0.1:"),
        "{problem}"
    );
    assert!(
        !problem.contains('(') && problem.len() < 160,
        "one short line: {problem}"
    );
}

#[test]
fn a_failed_flush_shows_no_user_info_query_or_header_value_of_the_endpoint() {
    let down = TcpListener::bind("127.0.0.1:0").unwrap();
    let address = down.local_addr().unwrap();
    std::thread::spawn(move || down.incoming().for_each(drop));
    let endpoint = format!("http://otel:MARK-pass@{address}/v1/traces?token=MARK-token");
    let env = |name: &str| match name {
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT" => Some(endpoint.clone()),
        "OTEL_EXPORTER_OTLP_HEADERS" => Some("x-tenant=MARK-header".into()),
        _ => None,
    };
    let settings = Settings::from_env(env).unwrap().unwrap();
    let telemetry = Telemetry::start(&settings).unwrap();
    {
        let _guard = tracing::subscriber::set_default(telemetry.subscriber());
        tracing::info_span!(target: "agent_runtime_hooks::agent::run", "agent_run").in_scope(|| {});
    }
    let problem = telemetry.flush().unwrap_err();
    println!("{problem}");
    assert!(
        problem.starts_with("spans could not be exported to http://127.0.0.1:"),
        "{problem}"
    );
    assert!(
        !problem.contains('(') && problem.len() < 160,
        "one short line: {problem}"
    );
    assert!(!problem.contains("MARK"), "{problem}");
}

#[tokio::test]
async fn what_is_logged_stays_out_of_the_trace() {
    // An observer that throws is logged ("… the run goes on") with what it threw.
    let (_, requests) = traced_run(
        json!({"model": scripted(json!([{"text": "hi"}])),
               "advanced": {"hooks": [{"id": "steps", "type": "afterStep", "handler": f(3)}]}}),
        FakeHost::default().throwing(3, "token sk-12345 leaked"),
        Protocol::HttpJson,
    )
    .await;
    let (_, spans) = spans_of(&requests);
    assert!(spans
        .iter()
        .any(|span| span.name == "hook" && span.attributes["hook"] == "steps"));
    for request in &requests {
        let body = String::from_utf8_lossy(&request.body);
        assert!(!body.contains("sk-12345"), "{body}");
        let export: Value = serde_json::from_slice(&request.body).unwrap();
        for span in export["resourceSpans"][0]["scopeSpans"][0]["spans"].as_array().unwrap() {
            assert_eq!(span["events"].as_array().map_or(0, Vec::len), 0, "{span}");
        }
    }
    // The run did not fail for it.
    let root = spans.iter().find(|span| span.name == "agent_run").unwrap();
    assert_eq!(root.attributes["stop_reason"], "done");
    assert_ne!(root.status["code"], 2);
}

#[tokio::test]
async fn a_hook_span_keeps_its_first_failure_and_hooks_that_do_not_run_have_none() {
    // "steps" throws in its handler, then its webhook cannot be delivered either (nothing
    // listens on port 9): the handler's failure names the span. After "fixture" mocks the
    // call, "never" does not run and gets no span.
    let host = FakeHost::default()
        .throwing(3, "steps broke")
        .returning(1, json!({"$mock": "canned", "$returned": {"action": "continue"}}))
        .returning(2, json!({"action": "continue"}))
        .returning(0, json!("ran"));
    let (_, requests) = traced_run(
        json!({"model": one_call("t", json!({})), "tools": [tool("t", 0)],
               "advanced": {"hooks": [
                   {"id": "steps", "type": "afterStep", "handler": f(3), "webhook": {"url": "http://127.0.0.1:9/hooks"}},
                   {"id": "fixture", "type": "beforeToolCall", "handler": f(1)},
                   {"id": "never", "type": "beforeToolCall", "handler": f(2)}]}}),
        host,
        Protocol::HttpJson,
    )
    .await;
    let (_, spans) = spans_of(&requests);
    let outcomes = |id: &str| -> Vec<String> {
        spans
            .iter()
            .filter(|span| span.name == "hook" && span.attributes["hook"] == id)
            .map(|span| span.attributes["outcome"].clone())
            .collect()
    };
    // One StepEnd per model turn: two turns.
    assert_eq!(outcomes("steps"), ["threw", "threw"]);
    assert_eq!(outcomes("fixture"), ["ok"]);
    assert!(outcomes("never").is_empty(), "{spans:#?}");
}

#[tokio::test]
async fn an_aborted_run_says_so_and_is_not_an_error() {
    let (endpoint, received) = collector();
    let telemetry = Telemetry::start(&settings(&endpoint, Protocol::HttpJson)).unwrap();
    let host = FakeHost::default().with(0, |_| Box::pin(futures::future::pending()));
    let (session, _host) = new_session(
        json!({"model": one_call("hang", json!({})), "tools": [tool("hang", 0)]}),
        host,
    );
    {
        let _guard = tracing::subscriber::set_default(telemetry.subscriber());
        let (handle, drive) = session.send(&json!("go"), SendOptions::default()).unwrap();
        tokio::spawn(drive);
        while !matches!(handle.events.recv().await, Some(StreamEvent::ToolUse(_)) | None) {}
        handle.control.abort("stop".into());
        while handle.events.recv().await.is_some() {}
    }
    telemetry.flush().unwrap();
    let (_, spans) = spans_of(&drain(&received));
    let root = spans.iter().find(|span| span.name == "agent_run").unwrap();
    assert_eq!(root.attributes["stop_reason"], "aborted");
    assert_ne!(root.status["code"], 2, "{:?}", root.status);
}
