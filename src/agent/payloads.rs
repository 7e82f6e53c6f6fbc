//! What each hook event carries: one struct per event (the inputs callbacks get, without
//! `abortSignal`, and the payloads webhooks are sent), serialized straight to text in
//! declaration order. `docs/hooks.md` and `docs/webhooks.md` describe the same fields; the
//! `HookInput` union of `index.d.ts` is their JS side.

use serde::Serialize;
use serde_json::{Map, Value};

use super::approvals::Leaf;
use super::events::ToolCallRecord;
use crate::error::SdkError;
use crate::hooks::HookEvent;
use crate::model::ToolCallRequest;

/// SessionStart, inside `createAgent`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionStart<'a> {
    pub event: &'static str,
    pub session_id: &'a str,
    pub is_resume: bool,
}

/// SessionEnd, inside `close()`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SessionEnd<'a> {
    pub event: &'static str,
    pub session_id: &'a str,
    /// Always `other`, as Blade passes it.
    pub reason: &'static str,
}

/// UserPromptSubmit, before a prompt enters the loop.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UserPromptSubmit<'a> {
    pub event: &'static str,
    pub session_id: &'a str,
    pub user_prompt: &'a str,
    pub has_images: bool,
    pub image_count: usize,
    pub operation_id: &'a str,
}

/// The run's totals so far, which the step and end events carry.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Totals {
    pub steps: u32,
    pub total_input_tokens: u64,
    pub total_output_tokens: u64,
    pub total_tokens: u64,
    pub total_tool_calls: usize,
}

/// StepStart (`beforeStep`), before each model call.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StepStart<'a> {
    pub event: &'static str,
    pub session_id: &'a str,
    pub operation_id: &'a str,
    /// Counts model calls from 0.
    pub step_index: u32,
    /// Steps finished before this one.
    pub steps: u32,
}

/// A tool call as StepEnd shows it: what the model asked for.
#[derive(Serialize)]
pub struct StepToolCall<'a> {
    pub id: &'a str,
    pub name: &'a str,
    pub arguments: &'a str,
}

impl<'a> StepToolCall<'a> {
    pub fn of(call: &'a ToolCallRequest) -> Self {
        StepToolCall {
            id: &call.id,
            name: &call.name,
            arguments: &call.arguments,
        }
    }
}

/// StepEnd (`afterStep`): the step's text, tool calls and results, and the run's totals.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StepEnd<'a> {
    pub event: &'static str,
    pub session_id: &'a str,
    pub operation_id: &'a str,
    pub step_index: u32,
    /// `call_llm` for a turn without tool calls, else `call_tool`.
    pub step_type: &'static str,
    pub content: &'a str,
    pub tool_calls: Vec<StepToolCall<'a>>,
    pub tools_result: &'a [ToolCallRecord],
    /// Another model call follows.
    pub should_continue: bool,
    #[serde(flatten)]
    pub totals: Totals,
}

/// TaskCompleted (`onComplete`), when a run ends, whatever its outcome.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct TaskCompleted<'a> {
    pub event: &'static str,
    pub session_id: &'a str,
    pub task_id: &'a str,
    /// The prompt's text.
    pub task_description: &'a str,
    /// The final text, or the error's message.
    pub result_summary: &'a str,
    pub success: bool,
    /// `done`, `max_turns`, `interrupted`, `aborted` or `error`.
    pub reason: &'static str,
    pub operation_id: &'a str,
    pub last_assistant_content: &'a str,
    #[serde(flatten)]
    pub totals: Totals,
    /// Only when set: this end follows a command hook's `decision: 'block'` (Claude Code's
    /// `stop_hook_active`).
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub stop_hook_active: bool,
}

/// StopFailure (`onError`), when a run failed.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StopFailure<'a> {
    pub event: &'static str,
    pub session_id: &'a str,
    pub operation_id: &'a str,
    pub reason: &'static str,
    pub error_message: &'a str,
    pub error_type: &'static str,
    pub error_detail: &'a SdkError,
    pub last_assistant_content: &'a str,
    #[serde(flatten)]
    pub totals: Totals,
}

/// The fields every tool event carries, in both vocabularies (PreToolUse, PermissionRequest,
/// PostToolUse, PostToolUseFailure), then what some of them add.
#[derive(Serialize, Clone)]
#[serde(rename_all = "camelCase")]
pub struct ToolEvent<'a> {
    pub event: &'static str,
    pub session_id: &'a str,
    /// Sub-agent names from the root's child down to the calling agent; `[]` in the root.
    pub agent_path: &'a [String],
    /// The `Task` call that started the calling sub-agent.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent_tool_call_id: Option<&'a str>,
    pub tool_name: &'a str,
    pub tool_input: &'a Map<String, Value>,
    pub tool_call_id: &'a str,
    pub step_index: u32,
    pub call_index: usize,
    pub operation_id: &'a str,
    pub api_name: &'a str,
    /// The MCP server's name; else the part of the name before the first `/`, else empty.
    pub identifier: &'a str,
    /// `mcp` for an MCP server's tool; absent for the agent's own tools.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_source: Option<&'static str>,
    pub args: &'a Map<String, Value>,
    /// PermissionRequest's.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_kind: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub affected_paths: Option<Vec<String>>,
    /// After the call: the model-facing output, the structured result, and `mocked`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_output: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub result: Option<ResultField<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub mocked: Option<bool>,
}

/// A tool call as every tool event names it.
pub struct CallOf<'a> {
    pub session_id: &'a str,
    /// Sub-agent names down to the calling agent, and the `Task` call that started it.
    pub lineage: (&'a [String], Option<&'a str>),
    pub tool_name: &'a str,
    pub tool_call_id: &'a str,
    pub step_index: u32,
    pub call_index: usize,
    pub operation_id: &'a str,
    /// An MCP tool's server and the server's own name for it; `None` for the agent's own tools.
    pub mcp: Option<(&'a str, &'a str)>,
}

impl<'a> ToolEvent<'a> {
    /// The fields every tool event carries for `call` with `input`, in both vocabularies.
    pub fn new(event: HookEvent, call: CallOf<'a>, input: &'a Map<String, Value>) -> Self {
        let (api_name, identifier, tool_source) = match call.mcp {
            Some((server, api_name)) => (api_name, server, Some("mcp")),
            None => (
                call.tool_name,
                call.tool_name.split_once('/').map_or("", |(identifier, _)| identifier),
                None,
            ),
        };
        ToolEvent {
            event: event.name(),
            session_id: call.session_id,
            agent_path: call.lineage.0,
            parent_tool_call_id: call.lineage.1,
            tool_name: call.tool_name,
            tool_input: input,
            tool_call_id: call.tool_call_id,
            step_index: call.step_index,
            call_index: call.call_index,
            operation_id: call.operation_id,
            api_name,
            identifier,
            tool_source,
            args: input,
            tool_kind: None,
            affected_paths: None,
            tool_output: None,
            result: None,
            mocked: None,
        }
    }
}

impl ToolEvent<'_> {
    /// As a map, for result controls' webhooks, which reshape it.
    pub fn to_map(&self) -> Map<String, Value> {
        match serde_json::to_value(self) {
            Ok(Value::Object(map)) => map,
            _ => Map::new(),
        }
    }
}

/// A finished call's result, as tool events after the call show it.
#[derive(Serialize, Clone, Copy)]
pub struct ResultField<'a> {
    pub content: &'a str,
    pub success: bool,
}

/// A call waiting for a person, as HumanInterventionRequest lists it, with its place in the tree.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingTool<'a> {
    pub tool_call_id: &'a str,
    pub tool_name: &'a str,
    pub api_name: &'a str,
    pub identifier: &'a str,
    pub input: &'a Map<String, Value>,
    pub agent_path: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent_tool_call_id: Option<&'a str>,
}

impl<'a> PendingTool<'a> {
    pub fn of(leaf: Leaf<'a>) -> Self {
        let call = leaf.call;
        let name = call.tool_name.as_str();
        PendingTool {
            tool_call_id: &call.tool_call_id,
            tool_name: name,
            api_name: name,
            identifier: name.split_once('/').map_or("", |(identifier, _)| identifier),
            input: &call.input,
            agent_path: leaf.agent_path,
            parent_tool_call_id: leaf.parent_tool_call_id(),
        }
    }
}

/// HumanInterventionRequest (`beforeHumanIntervention`): a run paused for approvals.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HumanInterventionRequest<'a> {
    pub event: &'static str,
    pub session_id: &'a str,
    pub operation_id: &'a str,
    pub step_index: u32,
    pub pending_tools: Vec<PendingTool<'a>>,
}

/// HumanInterventionResult (`afterHumanIntervention`) just before a decided call goes on, or
/// HumanInterventionStop (`onStopByHumanIntervention`) for a rejection that ends the run.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct HumanInterventionResult<'a> {
    pub event: &'static str,
    pub session_id: &'a str,
    pub operation_id: &'a str,
    pub step_index: u32,
    /// `approve` or `reject`.
    pub action: &'static str,
    pub tool_call_id: &'a str,
    pub tool_name: &'a str,
    /// Where the decided call sits in the tree (`[]` in the root).
    pub agent_path: &'a [String],
    #[serde(skip_serializing_if = "Option::is_none")]
    pub parent_tool_call_id: Option<&'a str>,
}

/// What the permission function is asked (the host adds `signal`).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PermissionAsk<'a> {
    pub tool_name: &'a str,
    pub input: &'a Map<String, Value>,
    pub kind: &'static str,
    pub affected_paths: Vec<String>,
    pub session_id: &'a str,
    pub tool_call_id: &'a str,
}

/// The third argument of Blade's `canUseTool(toolName, input, options)` (its `signal` is added
/// by the host).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CanUseToolOptions<'a> {
    pub tool_kind: &'static str,
    pub side_effect: &'static str,
    pub affected_paths: &'a [String],
}

/// PreCompact (`beforeCompact`), before older messages are replaced by a summary.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PreCompact<'a> {
    pub event: &'static str,
    pub session_id: &'a str,
    pub operation_id: &'a str,
    pub step_index: u32,
    /// Messages in the conversation now.
    pub message_count: usize,
    /// The count that passed the threshold.
    pub token_count: u64,
}

/// PostCompact (`afterCompact`), once the summary replaced the older messages.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PostCompact<'a> {
    pub event: &'static str,
    pub session_id: &'a str,
    pub operation_id: &'a str,
    pub step_index: u32,
    /// One id per compaction.
    pub group_id: &'a str,
    pub messages_before: usize,
    pub messages_after: usize,
    pub summary: &'a str,
}

/// CompactFailure (`onCompactError`): the summary could not be written; the run goes on
/// uncompacted.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CompactFailure<'a> {
    pub event: &'static str,
    pub session_id: &'a str,
    pub operation_id: &'a str,
    pub step_index: u32,
    pub error: &'a str,
    pub token_count: u64,
}

/// SubagentStart (`beforeCallAgent`), on the parent before a `Task` call starts its sub-agent.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SubagentStart<'a> {
    pub event: &'static str,
    pub session_id: &'a str,
    pub operation_id: &'a str,
    /// The sub-agent's key in `advanced.agents`.
    pub agent_id: &'a str,
    /// The `Task` call's `prompt`.
    pub instruction: &'a str,
    pub tool_call_id: &'a str,
    /// The parent's place in the tree.
    pub agent_path: &'a [String],
}

/// SubagentStarted (`afterCallAgent`), once the sub-agent started (`success: false` when it
/// could not).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SubagentStarted<'a> {
    pub event: &'static str,
    pub session_id: &'a str,
    pub operation_id: &'a str,
    pub agent_id: &'a str,
    /// The sub-agent's run id.
    pub sub_operation_id: String,
    pub success: bool,
    pub agent_path: &'a [String],
}

/// SubagentFailure (`onCallAgentError`): the sub-agent failed; its `Task` call fails too.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SubagentFailure<'a> {
    pub event: &'static str,
    pub session_id: &'a str,
    pub operation_id: &'a str,
    pub agent_id: &'a str,
    pub error: &'a str,
    pub agent_path: &'a [String],
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hooks::EventFields;

    #[test]
    fn payloads_keep_their_declared_order() {
        let fields = EventFields::of(&UserPromptSubmit {
            event: "UserPromptSubmit",
            session_id: "s",
            user_prompt: "hi",
            has_images: false,
            image_count: 0,
            operation_id: "o",
        });
        assert_eq!(
            fields.json(),
            r#"{"event":"UserPromptSubmit","sessionId":"s","userPrompt":"hi","hasImages":false,"imageCount":0,"operationId":"o"}"#
        );
        let totals = Totals {
            steps: 1,
            total_input_tokens: 2,
            total_output_tokens: 3,
            total_tokens: 5,
            total_tool_calls: 0,
        };
        let fields = EventFields::of(&StepEnd {
            event: "StepEnd",
            session_id: "s",
            operation_id: "o",
            step_index: 0,
            step_type: "call_llm",
            content: "done",
            tool_calls: Vec::new(),
            tools_result: &[],
            should_continue: false,
            totals,
        });
        assert_eq!(
            fields.json(),
            r#"{"event":"StepEnd","sessionId":"s","operationId":"o","stepIndex":0,"stepType":"call_llm","content":"done","toolCalls":[],"toolsResult":[],"shouldContinue":false,"steps":1,"totalInputTokens":2,"totalOutputTokens":3,"totalTokens":5,"totalToolCalls":0}"#
        );
    }
}
