//! What a run reports, in order: `turn`, `content`, `tool_use`, `tool_result`, …, then `usage`
//! and `result`, or a final `error`.

use serde::Serialize;
use serde_json::Value;

use crate::error::SdkError;
use crate::model::Usage;

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum StreamEvent {
    /// A model call begins; `index` is 1 for the first call of the run.
    Turn {
        index: u32,
    },
    Content {
        delta: String,
    },
    ToolUse {
        id: String,
        name: String,
        input: Value,
    },
    ToolResult {
        id: String,
        name: String,
        output: String,
        status: CallStatus,
        #[serde(skip_serializing_if = "Option::is_none")]
        classification: Option<String>,
    },
    Usage {
        usage: Usage,
    },
    Result {
        result: PromptResult,
    },
    Error {
        error: SdkError,
    },
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
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
            StopReason::MaxTurns => "max_turns",
            StopReason::Aborted => "aborted",
            StopReason::Interrupted => "interrupted",
            StopReason::Error => "error",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallRecord {
    pub id: String,
    pub name: String,
    pub input: Value,
    /// What the model was sent as the tool's result.
    pub output: String,
    pub status: CallStatus,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mocked: Option<bool>,
    /// `hook_denied` or `hook_control_error` when a result control blocked the call.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub classification: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PromptResult {
    pub content: String,
    pub tool_calls: Vec<ToolCallRecord>,
    pub usage: Usage,
    /// Model calls made in this run.
    pub turns: u32,
    pub stop_reason: StopReason,
}
