//! What a run reports, in Blade's vocabulary and order: per model turn `turn_start`, `content`
//! deltas, the turn's `tool_use`s, `tool_progress` as it comes, its `tool_result`s in call
//! order, `turn_end`; then `usage` and `result`, or a final `error`.

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{Map, Value};

use crate::error::SdkError;
use crate::hooks::observer::HookNotice;
use crate::model::{FinishReason, Usage};
pub use crate::store::PendingReason;

/// Blade's `StreamMessage` variants and fields, in Blade's order; fields after Blade's are
/// ours. `sessionId` is added to each as it is published ([`Published`]).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum StreamEvent {
    /// A model call begins; `turn` is 1 for the first call of the run.
    TurnStart {
        turn: u32,
    },
    /// The turn's text, tool calls and results are all published.
    TurnEnd {
        turn: u32,
        /// Why the model's answer ended (`'length'`: the output limit cut it).
        #[serde(rename = "finishReason")]
        finish_reason: FinishReason,
    },
    /// Blade's steering: a `now` input interrupted the model step of `turn` (its partial
    /// answer is not kept).
    #[serde(rename_all = "camelCase")]
    TurnInterrupted {
        input_id: String,
        request_id: String,
        turn: u32,
    },
    /// A steering input became a user message; `turn` is the model turn that first sees it.
    #[serde(rename_all = "camelCase")]
    InputApplied {
        input_id: String,
        request_id: String,
        priority: crate::agent::inputs::Priority,
        turn: u32,
    },
    Content {
        delta: String,
    },
    Thinking {
        delta: String,
    },
    /// The model's arguments, before any hook.
    ToolUse(Box<ToolUseEvent>),
    /// `advanced.includeHookEvents`: a hook of a dispatch starts.
    #[serde(rename_all = "camelCase")]
    HookStarted {
        hook_id: String,
        event: &'static str,
    },
    /// `advanced.includeHookEvents`: how that hook ended, and what it decided.
    HookResponse(Box<HookResponseEvent>),
    /// A generator tool's yield.
    ToolProgress(Box<ToolProgressEvent>),
    ToolResult(Box<ToolResultEvent>),
    Usage {
        usage: TokenUsage,
    },
    /// A run that ended: `subtype` is always `success` (a failed run ends with `Error`).
    Result {
        subtype: &'static str,
        content: String,
        result: Box<PromptResult>,
    },
    Error {
        message: String,
        #[serde(skip_serializing_if = "Option::is_none")]
        code: Option<&'static str>,
        error: Box<SdkError>,
    },
}

// The larger events' fields are boxed: a run keeps every event it published until it is read,
// and an unboxed event would be as large as the largest (a tool's result, ~200 bytes), turn
// starts and ends included. Boxed, an event is 64 bytes.

/// `tool_use`'s fields.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolUseEvent {
    pub id: String,
    pub name: String,
    pub input: JsonText,
    /// A sub-agent's call, as the parent's stream shows it.
    #[serde(rename = "agentPath", skip_serializing_if = "Option::is_none")]
    pub agent_path: Option<Vec<String>>,
}

/// A JSON value kept as its compact text: what an event only publishes costs its bytes, not a
/// parsed tree's (a one-key object is ~360 bytes as a `Map`, and a run keeps every event until
/// it is read). Serialized as the value itself.
#[derive(Debug, Clone, Serialize)]
#[serde(transparent)]
pub struct JsonText(Box<RawValue>);

impl JsonText {
    /// `value`'s text, as `serde_json` writes it.
    pub fn of(value: &impl Serialize) -> Self {
        match serde_json::value::to_raw_value(value) {
            Ok(raw) => JsonText(raw),
            // Only a map with non-string keys fails; nothing here writes one.
            Err(_) => JsonText(RawValue::from_string("null".into()).expect("null is JSON")),
        }
    }

    pub fn get(&self) -> &str {
        self.0.get()
    }
}

/// Read as any JSON value, from any format (a stored paused turn is read from a `Value`).
impl<'de> Deserialize<'de> for JsonText {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Value::deserialize(deserializer).map(|value| JsonText::of(&value))
    }
}

/// The same text: unlike two `Map`s, the same keys in another order differ.
impl PartialEq for JsonText {
    fn eq(&self, other: &Self) -> bool {
        self.get() == other.get()
    }
}

/// `hook_response`'s fields.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HookResponseEvent {
    pub hook_id: String,
    pub event: &'static str,
    pub outcome: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub decision: Option<&'static str>,
    pub duration_ms: u64,
}

/// `tool_progress`'s fields.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct ToolProgressEvent {
    pub progress: Value,
    pub id: String,
    pub name: String,
    #[serde(rename = "agentPath", skip_serializing_if = "Option::is_none")]
    pub agent_path: Option<Vec<String>>,
}

/// `tool_result`'s fields.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolResultEvent {
    pub id: String,
    pub name: String,
    pub output: String,
    pub is_error: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub display: Option<Value>,
    pub status: CallStatus,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub classification: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub agent_path: Option<Vec<String>>,
}

impl StreamEvent {
    /// A hook's start or end, as the stream tells it.
    pub fn of_hook(notice: HookNotice<'_>) -> Self {
        match notice {
            HookNotice::Started { hook_id, event } => StreamEvent::HookStarted {
                hook_id: hook_id.to_string(),
                event,
            },
            HookNotice::Responded {
                hook_id,
                event,
                outcome,
                decision,
                duration_ms,
            } => StreamEvent::HookResponse(Box::new(HookResponseEvent {
                hook_id: hook_id.to_string(),
                event,
                outcome,
                decision,
                duration_ms,
            })),
        }
    }
}

impl StreamEvent {
    /// The run's successful end.
    pub fn result(result: PromptResult) -> Self {
        StreamEvent::Result {
            subtype: "success",
            content: result.content.clone(),
            result: Box::new(result),
        }
    }

    /// The run's failure: Blade's `message` and `code`, and the error the caller rebuilds.
    pub fn error(error: SdkError) -> Self {
        StreamEvent::Error {
            message: error.message.clone(),
            code: Some(error.code.code()).filter(|code| !code.is_empty()),
            error: Box::new(error),
        }
    }
}

/// An event as its reader receives it: the event's fields, then `sessionId`.
#[derive(Serialize)]
pub struct Published<'a> {
    #[serde(flatten)]
    pub event: &'a StreamEvent,
    #[serde(rename = "sessionId")]
    pub session_id: &'a str,
}

/// Blade's `TokenUsage`: the run's totals, and the context window they are measured against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TokenUsage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub total_tokens: u64,
    pub max_context_tokens: u64,
}

impl TokenUsage {
    pub fn of(usage: Usage, max_context_tokens: u64) -> Self {
        TokenUsage {
            input_tokens: usage.input_tokens,
            output_tokens: usage.output_tokens,
            total_tokens: usage.total_tokens,
            max_context_tokens,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallStatus {
    Success,
    Error,
}

impl CallStatus {
    pub fn name(self) -> &'static str {
        match self {
            CallStatus::Success => "success",
            CallStatus::Error => "error",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    Done,
    /// The last answer was cut by the output limit (`maxOutputTokens` or the model's own).
    MaxTokens,
    MaxTurns,
    Aborted,
    Interrupted,
    Error,
}

impl StopReason {
    /// As it is serialized (`stopReason`), for TaskCompleted's reason and the run's span.
    pub fn name(self) -> &'static str {
        match self {
            StopReason::Done => "done",
            StopReason::MaxTokens => "max_tokens",
            StopReason::MaxTurns => "max_turns",
            StopReason::Aborted => "aborted",
            StopReason::Interrupted => "interrupted",
            StopReason::Error => "error",
        }
    }
}

/// One tool call of a run: Blade's `ToolCallRecord` fields, then ours.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallRecord {
    pub id: String,
    pub name: String,
    /// The final input, as the tool got it (a run keeps every record).
    pub input: JsonText,
    /// What the model was sent as the tool's result.
    pub output: String,
    /// Milliseconds from the call's first hook to its result.
    pub duration: u64,
    pub is_error: bool,
    pub status: CallStatus,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mocked: Option<bool>,
    /// `hook_denied` or `hook_control_error` when a result control blocked the call.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub classification: Option<String>,
    /// `ToolResult.display`, for the stream's `tool_result`; never sent to the model.
    #[serde(skip)]
    pub display: Option<Value>,
}

impl ToolCallRecord {
    /// A call whose result was kept in the store (recovered after a crash, published later, or
    /// answered before a pause): its timing, mock and display were not kept.
    pub fn stored(id: &str, name: &str, input: &Map<String, Value>, output: String, is_error: bool) -> Self {
        ToolCallRecord {
            id: id.to_string(),
            name: name.to_string(),
            input: JsonText::of(input),
            output,
            duration: 0,
            is_error,
            status: if is_error {
                CallStatus::Error
            } else {
                CallStatus::Success
            },
            mocked: None,
            classification: None,
            display: None,
        }
    }
}

/// How a run ended: Blade's `PromptResult` fields, then ours.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PromptResult {
    /// The final assistant text (Blade's name).
    pub result: String,
    pub tool_calls: Vec<ToolCallRecord>,
    pub usage: TokenUsage,
    /// Milliseconds from `send` to the end of the run.
    pub duration: u64,
    /// Model calls made in this run (Blade's name).
    pub turns_count: u32,
    /// = `result`.
    pub content: String,
    /// = `turnsCount`.
    pub turns: u32,
    pub stop_reason: StopReason,
    /// The calls the run paused on (`stopReason: 'interrupted'` by an `'ask'`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pending_approvals: Option<Vec<PendingApproval>>,
}

/// What the caller sees of a waiting call (`pendingApprovals`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingApproval {
    pub tool_call_id: String,
    pub tool_name: String,
    pub input: Map<String, Value>,
    pub fingerprint: String,
    pub reason: PendingReason,
    /// With `advanced.approvalSecret`: what `approve` must be given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    /// The sub-agents from the root's child down to the agent whose call waits (`[]`: the root's).
    pub agent_path: Vec<String>,
    /// The `Task` call that started that agent (absent for the root's calls).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent_tool_call_id: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_text_is_written_and_read_as_the_value_it_holds() {
        let input = serde_json::json!({"path": "a.txt", "lines": [1, 2], "opts": {"z": true, "a": null}});
        let text = JsonText::of(&input);
        // Compact, in the value's own key order.
        assert_eq!(
            text.get(),
            r#"{"path":"a.txt","lines":[1,2],"opts":{"z":true,"a":null}}"#
        );
        assert_eq!(serde_json::to_value(&text).unwrap(), input);
        // Read back from text and from a parsed value (a stored paused turn is read from one).
        let from_text: JsonText =
            serde_json::from_str(r#"{ "path" : "a.txt", "lines": [1,2], "opts": {"z": true, "a": null} }"#).unwrap();
        let from_value: JsonText = serde_json::from_value(input.clone()).unwrap();
        assert_eq!(from_text, text);
        assert_eq!(from_value, text);
        assert_ne!(JsonText::of(&serde_json::json!({"path": "b.txt"})), text);
    }

    /// A run keeps every event until it is read: an event stays small whatever it carries.
    #[test]
    fn an_event_is_64_bytes_at_most() {
        assert!(
            std::mem::size_of::<StreamEvent>() <= 64,
            "{} bytes",
            std::mem::size_of::<StreamEvent>()
        );
    }

    /// Boxed fields serialize as they did inline: the type tag, then the event's own fields.
    #[test]
    fn a_boxed_event_keeps_its_fields_at_the_top() {
        let published = |event: StreamEvent| {
            serde_json::to_string(&Published {
                event: &event,
                session_id: "s",
            })
            .unwrap()
        };
        assert_eq!(
            published(StreamEvent::ToolResult(Box::new(ToolResultEvent {
                id: "c1".into(),
                name: "noop".into(),
                output: "ok".into(),
                is_error: false,
                display: None,
                status: CallStatus::Success,
                classification: None,
                agent_path: Some(vec!["child".into()]),
            }))),
            r#"{"type":"tool_result","id":"c1","name":"noop","output":"ok","isError":false,"status":"success","agentPath":["child"],"sessionId":"s"}"#
        );
        assert_eq!(
            published(StreamEvent::ToolUse(Box::new(ToolUseEvent {
                id: "c1".into(),
                name: "noop".into(),
                input: JsonText::of(&serde_json::json!({ "i": 1 })),
                agent_path: None,
            }))),
            r#"{"type":"tool_use","id":"c1","name":"noop","input":{"i":1},"sessionId":"s"}"#
        );
        assert_eq!(
            published(StreamEvent::ToolProgress(Box::new(ToolProgressEvent {
                progress: serde_json::json!(50),
                id: "c1".into(),
                name: "noop".into(),
                agent_path: Some(vec!["child".into()]),
            }))),
            r#"{"type":"tool_progress","progress":50,"id":"c1","name":"noop","agentPath":["child"],"sessionId":"s"}"#
        );
        assert_eq!(
            published(StreamEvent::HookResponse(Box::new(HookResponseEvent {
                hook_id: "h".into(),
                event: "PreToolUse",
                outcome: "success",
                decision: None,
                duration_ms: 3,
            }))),
            r#"{"type":"hook_response","hookId":"h","event":"PreToolUse","outcome":"success","durationMs":3,"sessionId":"s"}"#
        );
    }
}
