//! User tools: their definitions, calling `execute` through the host, and turning whatever it
//! returned into the text the model is sent.

use std::sync::Arc;

use serde_json::{json, Map, Value};

use crate::host::{Callable, Host, HostCall, SignalSlot};
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

/// How a call ended, before any hook had its say.
#[derive(Debug, Clone, PartialEq)]
pub enum ToolOutcome {
    /// The model-facing output.
    Success(String),
    /// Why it failed; the model is sent `Tool execution failed: <message>`.
    Failure(String),
}

impl ToolOutcome {
    pub fn failed(message: impl Into<String>) -> Self {
        ToolOutcome::Failure(message.into())
    }
}

/// What `execute` receives as its second argument (the host adds `signal`).
pub struct ToolContext<'a> {
    pub tool_call_id: &'a str,
    pub session_id: &'a str,
    pub scope: u32,
}

pub async fn execute(
    host: &Arc<dyn Host>,
    tool: &ToolSpec,
    input: Map<String, Value>,
    context: ToolContext<'_>,
) -> ToolOutcome {
    let call = HostCall {
        function: tool.execute,
        args: vec![
            Value::Object(input),
            json!({"toolCallId": context.tool_call_id, "sessionId": context.session_id}),
        ],
        scope: context.scope,
        signal: Some(SignalSlot {
            arg: 1,
            key: "signal",
        }),
    };
    match host.call(call).await {
        Ok(returned) => model_output(returned),
        Err(error) => ToolOutcome::Failure(error.message),
    }
}

/// Strings pass through; `{ status: 'success', model }` and `{ status: 'error', error: { message } }`
/// are tool results; any other JSON is stringified as `JSON.stringify` would.
pub fn model_output(returned: Option<Value>) -> ToolOutcome {
    let Some(value) = returned else {
        // `undefined`: JSON.stringify has no text for it.
        return ToolOutcome::Success(String::new());
    };
    if let Some(result) = value.as_object() {
        match result.get("status").and_then(Value::as_str) {
            Some("success") if result.contains_key("model") => {
                return ToolOutcome::Success(stringify(&result["model"]))
            }
            Some("error") => {
                if let Some(message) = result
                    .get("error")
                    .and_then(|error| error.get("message"))
                    .and_then(Value::as_str)
                {
                    return ToolOutcome::Failure(message.to_string());
                }
            }
            _ => {}
        }
    }
    ToolOutcome::Success(stringify(&value))
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

    #[test]
    fn outputs_become_model_text() {
        assert_eq!(
            model_output(Some(json!("plain"))),
            ToolOutcome::Success("plain".into())
        );
        assert_eq!(
            model_output(Some(json!({"b": 1, "a": [true, null]}))),
            ToolOutcome::Success("{\"b\":1,\"a\":[true,null]}".into())
        );
        assert_eq!(
            model_output(Some(json!(42))),
            ToolOutcome::Success("42".into())
        );
        assert_eq!(
            model_output(Some(Value::Null)),
            ToolOutcome::Success("null".into())
        );
        assert_eq!(model_output(None), ToolOutcome::Success(String::new()));
    }

    #[test]
    fn tool_results_are_unwrapped() {
        assert_eq!(
            model_output(Some(json!({"status": "success", "model": {"n": 1}}))),
            ToolOutcome::Success("{\"n\":1}".into())
        );
        assert_eq!(
            model_output(Some(json!({"status": "success", "model": "ok"}))),
            ToolOutcome::Success("ok".into())
        );
        assert_eq!(
            model_output(Some(
                json!({"status": "error", "error": {"message": "disk full"}})
            )),
            ToolOutcome::Failure("disk full".into())
        );
        // Not a tool result: no `model`, so it is plain JSON.
        assert_eq!(
            model_output(Some(json!({"status": "success"}))),
            ToolOutcome::Success("{\"status\":\"success\"}".into())
        );
    }
}
