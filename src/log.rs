//! What the runtime reports without failing anything (a hook that failed where failures are
//! only logged, a webhook that could not be delivered): always through `tracing`, and to
//! `advanced.logger` — by default warnings and errors to stderr, one line each; `logger: false`
//! keeps them to `tracing`. Entries never carry header values or secrets.

use std::sync::Arc;

use serde_json::{json, Map, Value};

use crate::error::{Result, SdkError};
use crate::host::{Args, Callable, Host, HostCall, Reply, ScopeId};
use crate::js_value::{callable, describe};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Debug,
    Info,
    Warn,
    Error,
}

impl Level {
    pub fn name(self) -> &'static str {
        match self {
            Level::Debug => "debug",
            Level::Info => "info",
            Level::Warn => "warn",
            Level::Error => "error",
        }
    }
}

/// `advanced.logger`: a function given `{ level, message, ...fields }`, or an object with
/// console-like methods given `(message, fields)`; without one, stderr.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Sink {
    /// Warnings and errors as `[agent-runtime-hooks] warn: <message> <fields>` lines, written
    /// from Rust (a busy JS thread does not hold them back).
    Stderr,
    Function(Callable),
    Methods {
        debug: Option<Callable>,
        info: Option<Callable>,
        warn: Option<Callable>,
        error: Option<Callable>,
    },
}

impl Sink {
    /// Reads `advanced.logger` (functions already replaced by `{ "$function": n }`): absent,
    /// stderr; `false`, none.
    pub fn parse(value: Option<&Value>) -> Result<Option<Self>> {
        match value {
            None => Ok(Some(Sink::Stderr)),
            Some(Value::Bool(false)) => Ok(None),
            Some(value) => Sink::parse_given(value).map(Some),
        }
    }

    fn parse_given(value: &Value) -> Result<Self> {
        if let Some(function) = callable(value) {
            return Ok(Sink::Function(function));
        }
        let problem = || {
            SdkError::config(format!(
                "advanced.logger must be a function, an object with debug, info, warn or error methods, or false (got {})",
                describe(value)
            )).at("advanced.logger")
        };
        let object = value.as_object().ok_or_else(problem)?;
        let method = |name: &str| object.get(name).and_then(callable);
        let sink = Sink::Methods {
            debug: method("debug"),
            info: method("info"),
            warn: method("warn"),
            error: method("error"),
        };
        match sink {
            Sink::Methods {
                debug: None,
                info: None,
                warn: None,
                error: None,
            } => Err(problem()),
            sink => Ok(sink),
        }
    }
}

#[derive(Clone)]
pub struct Log {
    host: Arc<dyn Host>,
    sink: Option<Sink>,
}

impl Log {
    pub fn new(host: Arc<dyn Host>, sink: Option<Sink>) -> Self {
        Log { host, sink }
    }

    pub fn warn(&self, message: &str, fields: Value) {
        self.emit(Level::Warn, message, fields);
    }

    pub fn error(&self, message: &str, fields: Value) {
        self.emit(Level::Error, message, fields);
    }

    /// Logs through `tracing`, and hands the entry to the user's logger without waiting for it.
    pub fn emit(&self, level: Level, message: &str, fields: Value) {
        match level {
            Level::Debug => tracing::debug!(%fields, "{message}"),
            Level::Info => tracing::info!(%fields, "{message}"),
            Level::Warn => tracing::warn!(%fields, "{message}"),
            Level::Error => tracing::error!(%fields, "{message}"),
        }
        let call = match &self.sink {
            None => return,
            Some(Sink::Stderr) => {
                if matches!(level, Level::Warn | Level::Error) {
                    write_line(level, message, &fields);
                }
                return;
            }
            Some(Sink::Function(function)) => {
                let mut entry = Map::new();
                entry.insert("level".into(), json!(level.name()));
                entry.insert("message".into(), json!(message));
                if let Value::Object(fields) = fields {
                    entry.extend(fields);
                }
                HostCall {
                    reply: Reply::Json,
                    ..HostCall::new(*function, Args::of(&[entry]), ScopeId::NONE)
                }
            }
            Some(Sink::Methods {
                debug,
                info,
                warn,
                error,
            }) => {
                let method = match level {
                    Level::Debug => debug,
                    Level::Info => info,
                    Level::Warn => warn,
                    Level::Error => error,
                };
                let Some(function) = method.or(*warn).or(*error).or(*info) else {
                    return;
                };
                HostCall {
                    reply: Reply::Json,
                    ..HostCall::new(function, Args::of(&(message, fields)), ScopeId::NONE)
                }
            }
        };
        // A logger that throws must not turn a log line into a failure.
        self.host.call_detached(call);
    }
}

/// One stderr line: `[agent-runtime-hooks] warn: <message>`, then the fields as JSON when
/// there are any.
fn write_line(level: Level, message: &str, fields: &Value) {
    use std::io::Write;
    let line = line(level, message, fields);
    // Nowhere to report a failed write to stderr.
    let _ = writeln!(std::io::stderr().lock(), "{line}");
}

fn line(level: Level, message: &str, fields: &Value) -> String {
    let fields = match fields {
        Value::Object(map) if map.is_empty() => String::new(),
        Value::Null => String::new(),
        other => format!(" {other}"),
    };
    format!("[agent-runtime-hooks] {}: {message}{fields}", level.name())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loggers_are_functions_console_like_objects_stderr_or_none() {
        let parse = |value: Value| Sink::parse(Some(&value));
        assert_eq!(Sink::parse(None), Ok(Some(Sink::Stderr)));
        assert_eq!(parse(json!(false)), Ok(None));
        assert_eq!(parse(json!({"$function": 2})), Ok(Some(Sink::Function(Callable(2)))));
        assert_eq!(
            parse(json!({"warn": {"$function": 1}, "log": {"$function": 3}, "label": "x"})),
            Ok(Some(Sink::Methods {
                debug: None,
                info: None,
                warn: Some(Callable(1)),
                error: None
            }))
        );
        let error = parse(json!("console")).unwrap_err();
        assert_eq!(
            error.message,
            "advanced.logger must be a function, an object with debug, info, warn or error methods, or false (got \"console\")"
        );
        assert_eq!(error.field(), Some("advanced.logger"));
        assert!(parse(json!({"log": {"$function": 3}})).is_err());
        assert!(parse(json!(true)).is_err());
    }

    #[test]
    fn a_stderr_line_says_who_what_and_the_fields() {
        assert_eq!(
            line(
                Level::Warn,
                "webhook not delivered",
                &json!({"hookId": "audit", "status": 502})
            ),
            r#"[agent-runtime-hooks] warn: webhook not delivered {"hookId":"audit","status":502}"#
        );
        assert_eq!(
            line(Level::Error, "observer threw", &json!({})),
            "[agent-runtime-hooks] error: observer threw"
        );
    }
}
