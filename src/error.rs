//! The one error type of the core. It crosses to JS as its `Serialize` JSON, which `toError`
//! (`lib/errors.js`) turns into the error the caller gets: a plain `Error` for no code, the
//! class of its code where it has one (`ConfigError`, `AbortError`, `HookTimeoutError`,
//! `CriticalHookDeliveryError`), else an `SdkError` carrying the code.

use std::fmt;

use serde::ser::{Serialize, SerializeMap, Serializer};

use crate::host::{DispatchId, ThrownId};

/// What kind of failure this is; `code()` gives the stable string users match on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorCode {
    /// Bad options: the message names the field.
    Config,
    /// The run was aborted by the caller's signal or `agent.abort()`.
    Abort,
    /// The model could not be reached or answered badly.
    Model,
    /// `send` while the previous response is still running.
    SessionBusy,
    /// `send` after `close`.
    SessionClosed,
    /// A `send` argument that is not a message.
    InvalidInput,
    /// A hook callback returned something that is not a hook output.
    InvalidHookOutput,
    /// A hook returned `action: 'abort'` where that ends the operation.
    HookAborted,
    /// A hook event's budget ran out; `detail` names the event.
    HookTimeout,
    /// A tool ran past `toolTimeoutMs` (the call fails; the code is its signal's reason's).
    ToolTimeout,
    /// A plain JS `Error` (no code), as the contract words some failures.
    Plain,
    /// `flushTelemetry()`: the collector did not take the spans.
    TelemetryExport,
    /// A callback abandoned at its deadline is still running: dispatches and `close()` refuse
    /// until it settles (the message names it).
    CleanupPending,
    /// A failure of the runtime itself, not of the caller's input (the binding could not do
    /// what it was asked): a bug to report.
    Internal,
    /// A webhook with `fallback: 'none'` could not be delivered; `critical` names it.
    CriticalHookDelivery,
    /// `send` or `resume` while paused calls wait for a decision (the message names them).
    ApprovalsPending,
    /// `resume` with nothing paused.
    NothingToResume,
    /// `approve` / `reject` of a call that is not waiting (or was decided already).
    ApprovalNotPending,
    /// `approve` without the token `approvalSecret` asks for, or with another call's.
    ApprovalTokenInvalid,
    /// `resumeAgent` of a session the store does not have.
    SessionNotFound,
    /// The store could not be read or written.
    Store,
    /// `send` / `resume` while another agent (another process, usually) drives the session, or
    /// a run that lost its claim on the session.
    SessionLeased,
    /// `send` with an `expectedRequestId` that is not the active request's (Blade's code).
    SessionRequestMismatch,
    /// `send` while the session's inbox holds 32 inputs or 1 MiB (Blade's bounds and code).
    SessionInputQueueFull,
    /// `send` with `signal`, `maxTurns` or `context` while a request runs (Blade's code).
    SessionInputOptionsUnsupported,
}

impl ErrorCode {
    /// The `code` the JS error carries: none for a plain `Error`.
    pub fn js_code(self) -> Option<&'static str> {
        match self {
            ErrorCode::Plain => None,
            code => Some(code.code()),
        }
    }

    /// The code's string; `""` for [`ErrorCode::Plain`], which has none ([`ErrorCode::js_code`]).
    pub fn code(self) -> &'static str {
        match self {
            ErrorCode::Config => "CONFIG_ERROR",
            ErrorCode::Abort => "ABORT",
            ErrorCode::Model => "MODEL_ERROR",
            ErrorCode::ToolTimeout => "TOOL_TIMEOUT",
            ErrorCode::SessionBusy => "SESSION_BUSY",
            ErrorCode::SessionClosed => "SESSION_CLOSED",
            ErrorCode::InvalidInput => "INVALID_INPUT",
            ErrorCode::InvalidHookOutput => "INVALID_HOOK_OUTPUT",
            ErrorCode::HookAborted => "HOOK_ABORTED",
            ErrorCode::HookTimeout => "HOOK_TIMEOUT",
            ErrorCode::Plain => "",
            ErrorCode::CleanupPending => "CLEANUP_PENDING",
            ErrorCode::TelemetryExport => "TELEMETRY_EXPORT",
            ErrorCode::Internal => "INTERNAL",
            ErrorCode::CriticalHookDelivery => "CRITICAL_HOOK_DELIVERY",
            ErrorCode::ApprovalsPending => "APPROVALS_PENDING",
            ErrorCode::NothingToResume => "NOTHING_TO_RESUME",
            ErrorCode::ApprovalNotPending => "APPROVAL_NOT_PENDING",
            ErrorCode::ApprovalTokenInvalid => "APPROVAL_TOKEN_INVALID",
            ErrorCode::SessionNotFound => "SESSION_NOT_FOUND",
            ErrorCode::Store => "STORE_ERROR",
            ErrorCode::SessionLeased => "SESSION_LEASED",
            ErrorCode::SessionRequestMismatch => "SESSION_REQUEST_MISMATCH",
            ErrorCode::SessionInputQueueFull => "SESSION_INPUT_QUEUE_FULL",
            ErrorCode::SessionInputOptionsUnsupported => "SESSION_INPUT_OPTIONS_UNSUPPORTED",
        }
    }
}

/// An error raised by the core, or one thrown by a user function and carried back unchanged.
#[derive(Debug, Clone, PartialEq)]
pub struct SdkError {
    pub code: ErrorCode,
    pub message: String,
    /// What else the caller needs to rebuild this error; at most one thing.
    pub detail: Detail,
}

/// What an error carries besides its code and message.
#[derive(Debug, Clone, PartialEq, Default)]
pub enum Detail {
    #[default]
    None,
    /// HTTP status of a failed model request (any error once an answer started, 2xx included).
    Status(u16),
    /// The error was thrown by a user function: the host's handle for the original value, so
    /// the caller receives the very same instance.
    Thrown(ThrownId),
    /// For `HOOK_TIMEOUT`: which event ran out of time, its budget, and the dispatch whose
    /// signal was aborted with the matching `HookTimeoutError` (so the caller gets that instance).
    Timeout(HookTimeout),
    /// For `CRITICAL_HOOK_DELIVERY`: the hook's id and why delivery failed.
    Critical { hook_id: String, cause: String },
    /// For `CLEANUP_PENDING`: the callback still running (`hook "audit"`, `tool "deploy"`,
    /// `the permission function`): the error's `callback`.
    Callback(String),
    /// For `CONFIG_ERROR`: the option at fault, as its message names it (`advanced.hookTimeoutMs`,
    /// `tools[2].name`): `ConfigError.field`.
    Field(String),
}

#[derive(Debug, Clone, PartialEq)]
pub struct HookTimeout {
    pub event: &'static str,
    pub timeout_ms: u32,
    pub dispatch: DispatchId,
}

impl SdkError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        SdkError {
            code,
            message: message.into(),
            detail: Detail::None,
        }
    }

    pub fn config(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Config, message)
    }

    pub fn model(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Model, message)
    }

    pub fn with_detail(mut self, detail: Detail) -> Self {
        self.detail = detail;
        self
    }

    /// Names the option at fault (`ConfigError.field`): its path, without the labels messages
    /// add to it (`advanced.hooks[1] (hook "audit").webhook` is `advanced.hooks[1].webhook`).
    pub fn at(self, field: &str) -> Self {
        let mut path = String::with_capacity(field.len());
        let mut rest = field;
        while let Some(start) = rest.find(" (") {
            path.push_str(&rest[..start]);
            rest = rest[start..].find(')').map_or("", |end| &rest[start + end + 1..]);
        }
        path.push_str(rest);
        self.with_detail(Detail::Field(path))
    }

    /// The option a `CONFIG_ERROR` is about.
    pub fn field(&self) -> Option<&str> {
        match &self.detail {
            Detail::Field(field) => Some(field),
            _ => None,
        }
    }

    pub fn with_status(self, status: u16) -> Self {
        self.with_detail(Detail::Status(status))
    }

    /// Carries the value a user function threw, when there is one.
    pub fn with_thrown(self, thrown: Option<ThrownId>) -> Self {
        match thrown {
            Some(thrown) => self.with_detail(Detail::Thrown(thrown)),
            None => self,
        }
    }

    /// HTTP status of a failed model request.
    pub fn status(&self) -> Option<u16> {
        match self.detail {
            Detail::Status(status) => Some(status),
            _ => None,
        }
    }

    /// The host's handle for the value a user function threw, when this is one.
    pub fn thrown(&self) -> Option<ThrownId> {
        match self.detail {
            Detail::Thrown(thrown) => Some(thrown),
            _ => None,
        }
    }

    /// For `HOOK_TIMEOUT`: the event, its budget and the dispatch whose signal was aborted.
    pub fn timeout(&self) -> Option<&HookTimeout> {
        match &self.detail {
            Detail::Timeout(timeout) => Some(timeout),
            _ => None,
        }
    }
}

impl fmt::Display for SdkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code.code(), self.message)
    }
}

impl std::error::Error for SdkError {}

/// `{ code, message }` (no `code` for a plain `Error`) and the detail's keys: `status`,
/// `thrown`, `event` + `timeoutMs` + `dispatch`, `hookId` + `cause`, `field` or `callback`. What the binding hands
/// to `toError` in `lib/errors.js`.
impl Serialize for SdkError {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        if let Some(code) = self.code.js_code() {
            map.serialize_entry("code", code)?;
        }
        map.serialize_entry("message", &self.message)?;
        match &self.detail {
            Detail::None => {}
            Detail::Status(status) => map.serialize_entry("status", status)?,
            Detail::Thrown(thrown) => map.serialize_entry("thrown", &thrown.0)?,
            Detail::Timeout(timeout) => {
                map.serialize_entry("event", timeout.event)?;
                map.serialize_entry("timeoutMs", &timeout.timeout_ms)?;
                map.serialize_entry("dispatch", &timeout.dispatch.0)?;
            }
            Detail::Critical { hook_id, cause } => {
                map.serialize_entry("hookId", hook_id)?;
                map.serialize_entry("cause", cause)?;
            }
            Detail::Field(field) => map.serialize_entry("field", field)?,
            Detail::Callback(callback) => map.serialize_entry("callback", callback)?,
        }
        map.end()
    }
}

pub type Result<T, E = SdkError> = std::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// The JSON `toError` in `lib/errors.js` reads: the detail's keys beside `code` and `message`.
    #[test]
    fn a_field_is_the_options_path_without_labels() {
        let field = |given: &str| SdkError::config("m").at(given).field().map(str::to_string);
        assert_eq!(
            field("advanced.hookTimeoutMs").as_deref(),
            Some("advanced.hookTimeoutMs")
        );
        assert_eq!(
            field("advanced.hooks[1] (hook \"notice\").webhook.timeout").as_deref(),
            Some("advanced.hooks[1].webhook.timeout")
        );
        assert_eq!(field("tools[0] (read_file).name").as_deref(), Some("tools[0].name"));
    }

    #[test]
    fn each_detail_crosses_as_the_keys_to_error_reads() {
        let error = |detail| serde_json::to_value(SdkError::new(ErrorCode::Model, "m").with_detail(detail)).unwrap();
        assert_eq!(error(Detail::None), json!({"code": "MODEL_ERROR", "message": "m"}));
        assert_eq!(
            error(Detail::Status(502)),
            json!({"code": "MODEL_ERROR", "message": "m", "status": 502})
        );
        assert_eq!(
            error(Detail::Thrown(ThrownId(3))),
            json!({"code": "MODEL_ERROR", "message": "m", "thrown": 3})
        );
        assert_eq!(
            error(Detail::Timeout(HookTimeout {
                event: "Stop",
                timeout_ms: 100,
                dispatch: DispatchId(7)
            })),
            json!({"code": "MODEL_ERROR", "message": "m", "event": "Stop", "timeoutMs": 100, "dispatch": 7})
        );
        assert_eq!(
            error(Detail::Critical {
                hook_id: "h".into(),
                cause: "c".into()
            }),
            json!({"code": "MODEL_ERROR", "message": "m", "hookId": "h", "cause": "c"})
        );
        // A plain `Error` crosses without a code.
        assert_eq!(
            serde_json::to_value(SdkError::new(ErrorCode::Plain, "p")).unwrap(),
            json!({"message": "p"})
        );
    }

    #[test]
    fn a_status_is_kept_in_the_detail_and_read_back() {
        let error = SdkError::model("timed out").with_status(200);
        assert_eq!(
            (error.status(), error.thrown(), error.timeout()),
            (Some(200), None, None)
        );
        assert_eq!(SdkError::model("x").with_thrown(None).detail, Detail::None);
    }
}
