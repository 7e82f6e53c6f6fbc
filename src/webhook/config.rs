//! `WebhookConfig`, validated strictly: unknown keys, bad URLs, templates naming variables that
//! are not allowed, and contradictory options are all configuration errors.

use std::time::Duration;

use serde_json::{Map, Value};

use crate::error::{Result, SdkError};
use crate::hook_event::HookEvent;
use crate::js_value::describe;
use crate::options::{Nulls, OptionsObject};

#[derive(Debug, Clone, PartialEq)]
pub struct WebhookConfig {
    pub url: reqwest::Url,
    pub timeout: Duration,
    /// Header names (lowercased) and value templates, resolved at send time.
    pub headers: Vec<(String, String)>,
    pub allowed_env_vars: Vec<String>,
    pub body: Option<Map<String, Value>>,
    pub event_fields: Option<Vec<String>>,
    pub handling: Handling,
}

/// What the answer is for, which decides how the webhook may be sent: a notification now or
/// through the outbox; a result control always now, since it answers the call it runs in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Handling {
    /// `responseHandling: 'ignore'` (the default): any 2xx delivers it; its body is not read.
    Notify {
        delivery: Delivery,
        /// `fallback: 'none'`: a failed delivery is a `CriticalHookDeliveryError`.
        critical: bool,
    },
    /// `responseHandling: 'toolCall'`: the answer may allow or deny the tool call.
    Control { on_error: OnError },
}

/// How a notification is sent.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// `delivery: 'fetch'` (the default): within the event's dispatch.
    Direct,
    /// `delivery: 'queue'`: written to the store's outbox and delivered by any process attached
    /// to it, at most `max_attempts` times (`maxAttempts`, default 8).
    Queue { max_attempts: u32 },
}

/// What a failed result control does (`onError`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnError {
    /// `'continue'` (the default): the next control decides.
    Continue,
    /// `'block'`: the call is denied with `hook_control_error`.
    Block,
}

/// `maxAttempts` when a queued webhook does not say (SPEC §8.3).
pub const DEFAULT_MAX_ATTEMPTS: u32 = 8;
/// The most attempts a queued webhook may ask for (with the 60 s cap on backoff, over a week).
const MAX_ATTEMPTS: u64 = 10_000;

const KEYS: &[&str] = &[
    "url",
    "delivery",
    "maxAttempts",
    "timeout",
    "headers",
    "allowedEnvVars",
    "body",
    "eventFields",
    "responseHandling",
    "onError",
    "fallback",
];

/// Headers a webhook may not set: they belong to the transport.
fn forbidden_header(name: &str) -> bool {
    matches!(
        name,
        "host" | "content-length" | "connection" | "transfer-encoding" | "trailer" | "upgrade"
    ) || name.starts_with("proxy-")
        || name.starts_with("sec-")
}

/// The `${NAME}` templates of a header value, in order.
pub fn template_names(value: &str) -> std::result::Result<Vec<String>, String> {
    let mut names = Vec::new();
    let mut rest = value;
    while let Some(start) = rest.find("${") {
        let after = &rest[start + 2..];
        let end = after.find('}').ok_or("has an unterminated ${ template")?;
        let name = &after[..end];
        if !valid_env_name(name) {
            return Err(format!("has a template ${{{name}}} that is not a variable name"));
        }
        names.push(name.to_string());
        rest = &after[end + 1..];
    }
    Ok(names)
}

/// `HOOK_TOKEN`-like: letters, digits and `_`, not starting with a digit.
pub(crate) fn valid_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Parses an absolute http(s) URL without credentials.
pub fn parse_url(text: &str) -> std::result::Result<reqwest::Url, String> {
    if text.is_empty() || text.contains('\\') {
        return Err("must be an absolute http(s) URL".into());
    }
    let url = reqwest::Url::parse(text).map_err(|_| "must be an absolute http(s) URL".to_string())?;
    if !matches!(url.scheme(), "http" | "https") {
        return Err("must be an absolute http(s) URL".into());
    }
    if !url.username().is_empty() || url.password().is_some() {
        return Err("must not carry credentials".into());
    }
    Ok(url)
}

/// `headers` (lowercased names, `${NAME}` value templates) and the `allowedEnvVars` they may
/// name, read from `object`: webhooks and MCP servers take them alike. `who` names the sender.
pub fn header_templates(object: &OptionsObject, who: &str) -> Result<HeaderTemplates> {
    let allowed_env_vars = match object.get("allowedEnvVars") {
        None => Vec::new(),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| match item.as_str() {
                Some(name) if valid_env_name(name) => Ok(name.to_string()),
                _ => Err(object.error(
                    "allowedEnvVars",
                    format_args!("must list variable names like HOOK_TOKEN (got {})", describe(item)),
                )),
            })
            .collect::<Result<_>>()?,
        Some(other) => return Err(object.invalid("allowedEnvVars", "an array of names", other)),
    };
    let headers = match object.get("headers") {
        None => Vec::new(),
        Some(Value::Object(given)) => {
            let headers = OptionsObject::new(given, &object.field("headers")).nulls(Nulls::Invalid);
            let mut pairs = Vec::new();
            for (name, value) in given {
                let lower = name.to_ascii_lowercase();
                if reqwest::header::HeaderName::from_bytes(lower.as_bytes()).is_err() {
                    return Err(object.error(
                        "headers",
                        format_args!("has \"{name}\", which is not a valid header name"),
                    ));
                }
                if forbidden_header(&lower) {
                    return Err(headers.error(name, format_args!("may not be set by {who}")));
                }
                let Value::String(template) = value else {
                    return Err(headers.invalid(name, "a string", value));
                };
                for variable in template_names(template).map_err(|problem| headers.error(name, problem))? {
                    if !allowed_env_vars.contains(&variable) {
                        return Err(headers.error(
                            name,
                            format_args!(
                                "uses ${{{variable}}}, which is not in {}",
                                object.field("allowedEnvVars")
                            ),
                        ));
                    }
                }
                if template.contains(['\r', '\n', '\0']) {
                    return Err(headers.error(name, "must not contain line breaks"));
                }
                pairs.retain(|(existing, _): &(String, String)| existing != &lower);
                pairs.push((lower, template.clone()));
            }
            pairs
        }
        Some(other) => return Err(object.invalid("headers", "an object of strings", other)),
    };
    Ok(HeaderTemplates {
        headers,
        allowed_env_vars,
    })
}

/// What `header_templates` reads.
pub struct HeaderTemplates {
    /// Lowercased names and value templates.
    pub headers: Vec<(String, String)>,
    pub allowed_env_vars: Vec<String>,
}

impl WebhookConfig {
    /// Reads `value` (at `path`, for a hook of `event`). Messages name the field, never a value
    /// that could be a secret. Strict: a `null` field is a wrong value.
    pub fn parse(value: &Value, path: &str, event: HookEvent) -> Result<Self> {
        let Some(object) = value.as_object() else {
            return Err(SdkError::config(format!("{path} must be an object (got {})", describe(value))).at(path));
        };
        let webhook = OptionsObject::new(object, path).nulls(Nulls::Invalid);
        for key in object.keys() {
            if !KEYS.contains(&key.as_str()) {
                return Err(webhook.error(
                    key,
                    format_args!("is not a webhook option (known: {})", KEYS.join(", ")),
                ));
            }
        }
        let url = webhook.str("url")?.ok_or_else(|| webhook.error("url", "is required"))?;
        let url = parse_url(url).map_err(|problem| webhook.error("url", problem))?;
        let queued = match webhook.str("delivery")? {
            None | Some("fetch") => false,
            Some("queue") => true,
            Some(other) => {
                return Err(webhook.error("delivery", format_args!("must be 'fetch' or 'queue' (got \"{other}\")")))
            }
        };
        let delivery = match (queued, webhook.get("maxAttempts")) {
            (false, None) => Delivery::Direct,
            (false, Some(_)) => return Err(webhook.error("maxAttempts", "is only for delivery: 'queue'")),
            (true, None) => Delivery::Queue {
                max_attempts: DEFAULT_MAX_ATTEMPTS,
            },
            (true, Some(value)) => Delivery::Queue {
                max_attempts: crate::js_value::whole_number(value)
                    .filter(|n| (1..=MAX_ATTEMPTS).contains(n))
                    .map(|n| n as u32)
                    .ok_or_else(|| {
                        webhook.invalid(
                            "maxAttempts",
                            &format!("a positive integer no greater than {MAX_ATTEMPTS}"),
                            value,
                        )
                    })?,
            },
        };
        let timeout = match webhook.get("timeout") {
            None => Duration::from_secs(30),
            Some(value) => match value.as_f64() {
                Some(seconds) if seconds > 0.0 && seconds <= 2_147_483.647 => {
                    Duration::from_millis((seconds * 1000.0).ceil() as u64)
                }
                _ => {
                    return Err(webhook.invalid(
                        "timeout",
                        "a number of seconds above 0 and at most 2147483.647",
                        value,
                    ))
                }
            },
        };
        let HeaderTemplates {
            headers,
            allowed_env_vars,
        } = header_templates(&webhook, "a webhook")?;
        let body = match webhook.get("body") {
            None => None,
            Some(Value::Object(body)) => Some(body.clone()),
            Some(other) => return Err(webhook.invalid("body", "an object", other)),
        };
        let event_fields = match webhook.get("eventFields") {
            None => None,
            Some(Value::Array(items)) => Some(
                items
                    .iter()
                    .enumerate()
                    .map(|(index, item)| {
                        item.as_str()
                            .map(str::to_string)
                            .ok_or_else(|| webhook.invalid(&format!("eventFields[{index}]"), "a field name", item))
                    })
                    .collect::<Result<_>>()?,
            ),
            Some(other) => return Err(webhook.invalid("eventFields", "an array of field names", other)),
        };
        // A two-valued option: absent or the default is false, the other value true.
        let switch = |key: &str, default: &str, other: &str| -> Result<bool> {
            match webhook.str(key)? {
                None => Ok(false),
                Some(value) if value == default => Ok(false),
                Some(value) if value == other => Ok(true),
                Some(value) => {
                    Err(webhook.error(key, format_args!("must be '{default}' or '{other}' (got \"{value}\")")))
                }
            }
        };
        let control = switch("responseHandling", "ignore", "toolCall")?;
        let block_on_error = switch("onError", "continue", "block")?;
        let critical = switch("fallback", "fetch", "none")?;
        if control && !event.allows_control() {
            return Err(webhook.error(
                "responseHandling",
                "'toolCall' is only for PreToolUse (beforeToolCall) and PostToolUse (afterToolCall) hooks",
            ));
        }
        if control && delivery != Delivery::Direct {
            return Err(webhook.error(
                "delivery",
                "'queue' is only for notifications: a result control (responseHandling 'toolCall') answers the call it runs in and cannot be queued",
            ));
        }
        if block_on_error && !control {
            return Err(webhook.error("onError", "'block' needs responseHandling 'toolCall'"));
        }
        if control && (body.is_some() || event_fields.is_some()) {
            return Err(SdkError::config(format!(
                "{path}: control hooks cannot filter or override the event payload (remove body and eventFields)"
            ))
            .at(path));
        }
        // `fallback` is about deliveries that fail unanswered: a control's failure follows its
        // `onError` instead.
        let handling = match (control, block_on_error) {
            (true, true) => Handling::Control {
                on_error: OnError::Block,
            },
            (true, false) => Handling::Control {
                on_error: OnError::Continue,
            },
            (false, _) => Handling::Notify { delivery, critical },
        };
        Ok(WebhookConfig {
            url,
            timeout,
            headers,
            allowed_env_vars,
            body,
            event_fields,
            handling,
        })
    }

    /// A result control (`responseHandling: 'toolCall'`): it runs around the tool call, never
    /// in a dispatch.
    pub fn is_control(&self) -> bool {
        matches!(self.handling, Handling::Control { .. })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn parse(value: Value, event: HookEvent) -> std::result::Result<WebhookConfig, String> {
        WebhookConfig::parse(&value, "hooks[0].webhook", event).map_err(|error| error.message)
    }

    #[test]
    fn a_full_config_is_read() {
        let config = parse(
            json!({"url": "https://example.test/hooks", "timeout": 1.5, "headers": {"Authorization": "Bearer ${HOOK_TOKEN}", "X-A": "1"},
                   "allowedEnvVars": ["HOOK_TOKEN"], "responseHandling": "toolCall", "onError": "block", "fallback": "none"}),
            HookEvent::PreToolUse,
        )
        .unwrap();
        assert_eq!(config.timeout, Duration::from_millis(1500));
        assert_eq!(
            config.headers[0],
            ("authorization".into(), "Bearer ${HOOK_TOKEN}".into())
        );
        assert_eq!(
            config.handling,
            Handling::Control {
                on_error: OnError::Block
            }
        );
    }

    #[test]
    fn a_url_alone_gets_the_defaults() {
        let config = parse(json!({"url": "https://example.test/hooks"}), HookEvent::PostToolUse).unwrap();
        assert_eq!(config.timeout, Duration::from_secs(30));
        assert!(config.headers.is_empty());
        // A notification that fails is logged; the run goes on.
        assert_eq!(
            config.handling,
            Handling::Notify {
                delivery: Delivery::Direct,
                critical: false
            }
        );
    }

    #[test]
    fn every_bad_config_is_named() {
        let cases = [
            (json!({}), "hooks[0].webhook.url is required"),
            (json!({"url": "ftp://x"}), "hooks[0].webhook.url must be an absolute http(s) URL"),
            (json!({"url": "/relative"}), "hooks[0].webhook.url must be an absolute http(s) URL"),
            (json!({"url": "https://user:pw@x.test"}), "hooks[0].webhook.url must not carry credentials"),
            (json!({"url": "https://x.test", "secret": 1}), "hooks[0].webhook.secret is not a webhook option (known: url, delivery, maxAttempts, timeout, headers, allowedEnvVars, body, eventFields, responseHandling, onError, fallback)"),
            (json!({"url": "https://x.test", "delivery": "qstash"}), "hooks[0].webhook.delivery must be 'fetch' or 'queue' (got \"qstash\")"),
            (json!({"url": "https://x.test", "maxAttempts": 3}), "hooks[0].webhook.maxAttempts is only for delivery: 'queue'"),
            (json!({"url": "https://x.test", "delivery": "fetch", "maxAttempts": 3}), "hooks[0].webhook.maxAttempts is only for delivery: 'queue'"),
            (json!({"url": "https://x.test", "delivery": "queue", "maxAttempts": 0}), "hooks[0].webhook.maxAttempts must be a positive integer no greater than 10000 (got 0)"),
            (json!({"url": "https://x.test", "delivery": "queue", "maxAttempts": 2.5}), "hooks[0].webhook.maxAttempts must be a positive integer no greater than 10000 (got 2.5)"),
            (json!({"url": "https://x.test", "delivery": "queue", "maxAttempts": "3"}), "hooks[0].webhook.maxAttempts must be a positive integer no greater than 10000 (got \"3\")"),
            (json!({"url": "https://x.test", "delivery": "queue", "responseHandling": "toolCall"}), "hooks[0].webhook.delivery 'queue' is only for notifications: a result control (responseHandling 'toolCall') answers the call it runs in and cannot be queued"),
            (json!({"url": "https://x.test", "timeout": 0}), "hooks[0].webhook.timeout must be a number of seconds above 0 and at most 2147483.647 (got 0)"),
            (json!({"url": "https://x.test", "headers": {"Authorization": "Bearer ${SECRET}"}}), "hooks[0].webhook.headers.Authorization uses ${SECRET}, which is not in hooks[0].webhook.allowedEnvVars"),
            (json!({"url": "https://x.test", "headers": {"Host": "x"}}), "hooks[0].webhook.headers.Host may not be set by a webhook"),
            (json!({"url": "https://x.test", "headers": {"a": "${broken"}}), "hooks[0].webhook.headers.a has an unterminated ${ template"),
            (json!({"url": "https://x.test", "allowedEnvVars": ["1BAD"]}), "hooks[0].webhook.allowedEnvVars must list variable names like HOOK_TOKEN (got \"1BAD\")"),
            (json!({"url": "https://x.test", "onError": "block"}), "hooks[0].webhook.onError 'block' needs responseHandling 'toolCall'"),
            (json!({"url": "https://x.test", "onError": "panic"}), "hooks[0].webhook.onError must be 'continue' or 'block' (got \"panic\")"),
            (json!({"url": "https://x.test", "fallback": "qstash"}), "hooks[0].webhook.fallback must be 'fetch' or 'none' (got \"qstash\")"),
            (json!({"url": "https://x.test", "responseHandling": "toolResult"}), "hooks[0].webhook.responseHandling must be 'ignore' or 'toolCall' (got \"toolResult\")"),
            (json!({"url": "https://x.test", "eventFields": ["toolName", 3]}), "hooks[0].webhook.eventFields[1] must be a field name (got 3)"),
            (json!({"url": "https://x.test", "headers": {"x-k": 1}}), "hooks[0].webhook.headers.x-k must be a string (got 1)"),
            (json!({"url": "https://x.test", "responseHandling": "toolCall", "body": {}}), "hooks[0].webhook: control hooks cannot filter or override the event payload (remove body and eventFields)"),
        ];
        for (value, expected) in cases {
            assert_eq!(parse(value, HookEvent::PreToolUse).unwrap_err(), expected);
        }
        assert_eq!(
            parse(json!({"url": "https://x.test", "responseHandling": "toolCall"}), HookEvent::StepEnd).unwrap_err(),
            "hooks[0].webhook.responseHandling 'toolCall' is only for PreToolUse (beforeToolCall) and PostToolUse (afterToolCall) hooks"
        );
    }

    #[test]
    fn queued_delivery_takes_max_attempts() {
        let queued = parse(
            json!({"url": "https://x.test", "delivery": "queue"}),
            HookEvent::PostToolUse,
        )
        .unwrap();
        let queue = |max_attempts| Delivery::Queue { max_attempts };
        assert_eq!(
            queued.handling,
            Handling::Notify {
                delivery: queue(DEFAULT_MAX_ATTEMPTS),
                critical: false
            }
        );
        let queued = parse(
            json!({"url": "https://x.test", "delivery": "queue", "maxAttempts": 3, "fallback": "none"}),
            HookEvent::StepEnd,
        )
        .unwrap();
        assert_eq!(
            queued.handling,
            Handling::Notify {
                delivery: queue(3),
                critical: true
            }
        );
        assert_eq!(
            parse(json!({"url": "https://x.test", "fallback": "none"}), HookEvent::StepEnd)
                .unwrap()
                .handling,
            Handling::Notify {
                delivery: Delivery::Direct,
                critical: true
            }
        );
    }

    #[test]
    fn templates_are_found_in_order() {
        assert_eq!(template_names("a ${X} b ${Y_2}").unwrap(), ["X", "Y_2"]);
        assert!(template_names("${}").is_err());
        assert_eq!(template_names("plain").unwrap(), Vec::<String>::new());
    }
}
