//! User tools: their definitions, calling `execute` through the host, and turning whatever it
//! returned into the text the model is sent.

use std::sync::Arc;

use serde::Serialize;
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use super::events::CallStatus;
use crate::host::{Args, Callable, Host, HostCall, SignalSlot};
use crate::model::ToolSchema;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolKind {
    Readonly,
    Write,
    Execute,
}

impl ToolKind {
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "readonly" => Some(ToolKind::Readonly),
            "write" => Some(ToolKind::Write),
            "execute" => Some(ToolKind::Execute),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ToolKind::Readonly => "readonly",
            ToolKind::Write => "write",
            ToolKind::Execute => "execute",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SideEffect {
    Pure,
    Idempotent,
    NonIdempotent,
}

impl SideEffect {
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "pure" => Some(SideEffect::Pure),
            "idempotent" => Some(SideEffect::Idempotent),
            "non_idempotent" => Some(SideEffect::NonIdempotent),
            _ => None,
        }
    }
}

#[derive(Debug, Clone)]
pub struct ToolSpec {
    pub schema: ToolSchema,
    pub kind: ToolKind,
    pub side_effect: SideEffect,
    pub execute: Callable,
}

/// Where a call stands: its status, the text the model is sent, and (for a failure) what
/// failed, so PostToolUseFailure hooks can be given an `Error`.
#[derive(Debug, Clone, PartialEq)]
pub struct CallResult {
    pub status: CallStatus,
    pub output: String,
    pub failure: Option<Failure>,
    /// `hook_denied` or `hook_control_error` when a result control blocked the call.
    pub classification: Option<&'static str>,
    /// The result came from a PreToolUse `mock()`.
    pub mocked: bool,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    pub message: String,
    /// The thrown value's handle, when a user function threw.
    pub thrown: Option<u32>,
}

impl CallResult {
    pub fn success(output: impl Into<String>) -> Self {
        CallResult {
            status: CallStatus::Success,
            output: output.into(),
            failure: None,
            classification: None,
            mocked: false,
        }
    }

    /// `Tool execution failed: <message>`.
    pub fn failed(message: impl Into<String>, thrown: Option<u32>) -> Self {
        let message = message.into();
        CallResult {
            status: CallStatus::Error,
            output: format!("Tool execution failed: {message}"),
            failure: Some(Failure { message, thrown }),
            classification: None,
            mocked: false,
        }
    }

    /// `Tool execution aborted: <message>` (a hook or the permission policy stopped it).
    pub fn aborted(message: impl Into<String>) -> Self {
        let message = message.into();
        CallResult {
            status: CallStatus::Error,
            output: format!("Tool execution aborted: {message}"),
            failure: Some(Failure { message, thrown: None }),
            classification: None,
            mocked: false,
        }
    }

    /// A failed call whose output is exactly `output` (a control's denial, a failed mock).
    pub fn failed_as(output: impl Into<String>, classification: Option<&'static str>) -> Self {
        let output = output.into();
        CallResult {
            status: CallStatus::Error,
            failure: Some(Failure {
                message: output.clone(),
                thrown: None,
            }),
            output,
            classification,
            mocked: false,
        }
    }

    pub fn is_success(&self) -> bool {
        self.status == CallStatus::Success
    }
}

/// What `execute` receives as its second argument (the host adds `signal`).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolContext<'a> {
    pub tool_call_id: &'a str,
    pub session_id: &'a str,
    /// The host scope the call belongs to; not part of the argument.
    #[serde(skip)]
    pub scope: u32,
}

/// The run was aborted before the tool could start; it did not run.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NotStarted;

/// Runs `execute`, unless the run was aborted: this is the one place a tool starts, so an
/// abort made by synchronous code (a permission function, a sibling tool, a hook that never
/// yielded) is seen here even though nothing was awaited since. The run, which checks its
/// control as soon as the turn's calls return, then ends with the abort.
pub async fn execute(
    host: &Arc<dyn Host>,
    tool: &ToolSpec,
    input: &Map<String, Value>,
    context: ToolContext<'_>,
    cancel: Option<&CancellationToken>,
) -> Result<CallResult, NotStarted> {
    if cancel.is_some_and(CancellationToken::is_cancelled) {
        return Err(NotStarted);
    }
    let mut call = HostCall::new(tool.execute, Args::of(&(input, &context)), context.scope);
    call.signal = Some(SignalSlot {
        arg: 1,
        key: "signal",
        dispatch: None,
    });
    Ok(match host.call(call).await {
        Ok(returned) => model_output(returned),
        Err(error) => CallResult::failed(error.message, error.thrown),
    })
}

/// Strings pass through; `{ status: 'success', model }` and `{ status: 'error', error: { message } }`
/// are tool results; any other JSON is stringified as `JSON.stringify` would.
pub fn model_output(returned: Option<Value>) -> CallResult {
    let Some(value) = returned else {
        // `undefined`: JSON.stringify has no text for it.
        return CallResult::success(String::new());
    };
    if let Some(result) = value.as_object() {
        match result.get("status").and_then(Value::as_str) {
            Some("success") if result.contains_key("model") => return CallResult::success(stringify(&result["model"])),
            Some("error") => {
                if let Some(message) = result
                    .get("error")
                    .and_then(|error| error.get("message"))
                    .and_then(Value::as_str)
                {
                    return CallResult::failed(message, None);
                }
            }
            _ => {}
        }
    }
    CallResult::success(stringify(&value))
}

/// `JSON.stringify` for a value that came from JS: strings as they are, everything else compact JSON.
pub fn stringify(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn outputs_become_model_text() {
        assert_eq!(model_output(Some(json!("plain"))), CallResult::success("plain"));
        assert_eq!(
            model_output(Some(json!({"b": 1, "a": [true, null]}))),
            CallResult::success("{\"b\":1,\"a\":[true,null]}")
        );
        assert_eq!(model_output(Some(json!(42))), CallResult::success("42"));
        assert_eq!(model_output(Some(Value::Null)), CallResult::success("null"));
        assert_eq!(model_output(None), CallResult::success(String::new()));
    }

    #[test]
    fn tool_results_are_unwrapped() {
        assert_eq!(
            model_output(Some(json!({"status": "success", "model": {"n": 1}}))),
            CallResult::success("{\"n\":1}")
        );
        assert_eq!(
            model_output(Some(json!({"status": "success", "model": "ok"}))),
            CallResult::success("ok")
        );
        assert_eq!(
            model_output(Some(json!({"status": "error", "error": {"message": "disk full"}}))),
            CallResult::failed("disk full", None)
        );
        // Not a tool result: no `model`, so it is plain JSON.
        assert_eq!(
            model_output(Some(json!({"status": "success"}))),
            CallResult::success("{\"status\":\"success\"}")
        );
    }
}
