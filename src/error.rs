//! The one error type of the core. Each code maps to a JS error class in `index.js`.

use std::fmt;

use serde::ser::{Serialize, SerializeMap, Serializer};

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
}

impl ErrorCode {
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
            ErrorCode::CriticalHookDelivery => "CRITICAL_HOOK_DELIVERY",
            ErrorCode::ApprovalsPending => "APPROVALS_PENDING",
            ErrorCode::NothingToResume => "NOTHING_TO_RESUME",
            ErrorCode::ApprovalNotPending => "APPROVAL_NOT_PENDING",
            ErrorCode::ApprovalTokenInvalid => "APPROVAL_TOKEN_INVALID",
            ErrorCode::SessionNotFound => "SESSION_NOT_FOUND",
            ErrorCode::Store => "STORE_ERROR",
        }
    }
}

/// An error raised by the core, or one thrown by a user function and carried back unchanged.
#[derive(Debug, Clone, PartialEq)]
pub struct SdkError {
    pub code: ErrorCode,
    pub message: String,
    /// HTTP status of a failed model request.
    pub status: Option<u16>,
    /// Set when the error was thrown by a user function: the host's handle for the original
    /// value, so the caller receives the very same instance.
    pub thrown: Option<u32>,
    /// For `HOOK_TIMEOUT`: which event ran out of time, its budget, and the dispatch whose
    /// signal was aborted with the matching `HookTimeoutError` (so the caller gets that instance).
    pub timeout: Option<HookTimeout>,
    /// For `CRITICAL_HOOK_DELIVERY`: the hook's id and why delivery failed.
    pub critical: Option<(String, String)>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct HookTimeout {
    pub event: &'static str,
    pub timeout_ms: u32,
    pub dispatch: u32,
}

impl SdkError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        SdkError {
            code,
            message: message.into(),
            status: None,
            thrown: None,
            timeout: None,
            critical: None,
        }
    }

    pub fn config(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Config, message)
    }

    pub fn model(message: impl Into<String>) -> Self {
        Self::new(ErrorCode::Model, message)
    }

    pub fn with_status(mut self, status: u16) -> Self {
        self.status = Some(status);
        self
    }
}

impl fmt::Display for SdkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.code.code(), self.message)
    }
}

impl std::error::Error for SdkError {}

/// `{ code, message, status?, thrown? }`: what the binding hands to `index.js`.
impl Serialize for SdkError {
    fn serialize<S: Serializer>(&self, serializer: S) -> std::result::Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(None)?;
        map.serialize_entry("code", self.code.code())?;
        map.serialize_entry("message", &self.message)?;
        if let Some(status) = self.status {
            map.serialize_entry("status", &status)?;
        }
        if let Some(thrown) = self.thrown {
            map.serialize_entry("thrown", &thrown)?;
        }
        if let Some(timeout) = &self.timeout {
            map.serialize_entry("event", timeout.event)?;
            map.serialize_entry("timeoutMs", &timeout.timeout_ms)?;
            map.serialize_entry("dispatch", &timeout.dispatch)?;
        }
        if let Some((hook_id, cause)) = &self.critical {
            map.serialize_entry("hookId", hook_id)?;
            map.serialize_entry("cause", cause)?;
        }
        map.end()
    }
}

pub type Result<T, E = SdkError> = std::result::Result<T, E>;
