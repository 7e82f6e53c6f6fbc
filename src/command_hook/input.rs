//! The JSON a command hook reads on stdin (and an HTTP hook receives): Claude Code's shape,
//! built from the event's fields. Events Claude Code has under another name are sent under
//! that name (TaskCompleted as `Stop`, the end of a sub-agent call as `SubagentStop`); events
//! it does not have are sent under ours, with our fields.

use serde_json::{json, Map, Value};

use crate::hook_event::HookEvent;

/// The name a Claude Code script knows the event by.
pub fn claude_name(event: HookEvent) -> &'static str {
    match event {
        HookEvent::TaskCompleted => "Stop",
        HookEvent::SubagentStarted => "SubagentStop",
        other => other.name(),
    }
}

/// Where the run is: the session, and the directory the hook is told it runs in.
pub struct Session<'a> {
    pub cwd: &'a str,
    /// `Stop` only: whether this stop already follows a hook's `decision: 'block'`.
    pub stop_hook_active: bool,
}

/// The stdin object for `event` with our `fields` (the callbacks' input, camelCase).
pub fn build(event: HookEvent, fields: &Map<String, Value>, session: &Session<'_>) -> Value {
    let text = |name: &str| fields.get(name).cloned().unwrap_or(Value::String(String::new()));
    let mut input = Map::new();
    input.insert("session_id".into(), text("sessionId"));
    // No transcript file is written: the path is empty, never a file of someone else's.
    input.insert("transcript_path".into(), Value::String(String::new()));
    input.insert("cwd".into(), Value::String(session.cwd.to_string()));
    input.insert("hook_event_name".into(), Value::String(claude_name(event).into()));
    let mut add = |key: &str, value: Value| {
        input.insert(key.into(), value);
    };
    if let Some(Value::Array(path)) = fields.get("agentPath") {
        if let Some(agent) = path.last() {
            add("agent_id", agent.clone());
            add("agent_type", agent.clone());
        }
    }
    match event {
        HookEvent::PreToolUse
        | HookEvent::PermissionRequest
        | HookEvent::PostToolUse
        | HookEvent::PostToolUseFailure => {
            add("tool_name", text("toolName"));
            add(
                "tool_input",
                fields.get("toolInput").cloned().unwrap_or_else(|| json!({})),
            );
            add("tool_use_id", text("toolCallId"));
            if event == HookEvent::PostToolUse {
                add("tool_response", text("toolOutput"));
            }
            if event == HookEvent::PostToolUseFailure {
                add("error", text("toolOutput"));
                add("is_interrupt", Value::Bool(false));
            }
            if event == HookEvent::PermissionRequest {
                add("permission_suggestions", json!([]));
            }
        }
        HookEvent::UserPromptSubmit => add("prompt", text("userPrompt")),
        HookEvent::SessionStart => {
            let resumed = fields.get("isResume") == Some(&Value::Bool(true));
            add(
                "source",
                Value::String(if resumed { "resume" } else { "startup" }.into()),
            );
        }
        HookEvent::SessionEnd => add("reason", text("reason")),
        HookEvent::TaskCompleted => {
            add("stop_hook_active", Value::Bool(session.stop_hook_active));
            add("last_assistant_message", text("lastAssistantContent"));
        }
        HookEvent::PreCompact => {
            add("trigger", Value::String("auto".into()));
            add("custom_instructions", Value::String(String::new()));
        }
        _ => {
            // No Claude Code counterpart: our own fields, as our callbacks get them.
            for (key, value) in fields {
                if key != "event" && key != "sessionId" {
                    add(key, value.clone());
                }
            }
        }
    }
    Value::Object(input)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(value: Value) -> Map<String, Value> {
        value.as_object().unwrap().clone()
    }

    const SESSION: Session<'static> = Session {
        cwd: "/work/project",
        stop_hook_active: false,
    };

    #[test]
    fn a_tool_event_in_claude_codes_shape() {
        let pre = build(
            HookEvent::PreToolUse,
            &fields(
                json!({"event": "PreToolUse", "sessionId": "s1", "agentPath": [], "toolName": "Bash", "toolInput": {"command": "grep x"}, "toolCallId": "call_1", "stepIndex": 0}),
            ),
            &SESSION,
        );
        assert_eq!(
            pre,
            json!({"session_id": "s1", "transcript_path": "", "cwd": "/work/project", "hook_event_name": "PreToolUse",
                   "tool_name": "Bash", "tool_input": {"command": "grep x"}, "tool_use_id": "call_1"})
        );
        let post = build(
            HookEvent::PostToolUse,
            &fields(
                json!({"sessionId": "s1", "agentPath": ["researcher"], "toolName": "Read", "toolInput": {}, "toolCallId": "c", "toolOutput": "file text"}),
            ),
            &SESSION,
        );
        assert_eq!(post["tool_response"], "file text");
        assert_eq!(
            (post["agent_id"].as_str(), post["agent_type"].as_str()),
            (Some("researcher"), Some("researcher"))
        );
    }

    #[test]
    fn renamed_and_unnamed_events() {
        let stop = build(
            HookEvent::TaskCompleted,
            &fields(json!({"sessionId": "s", "lastAssistantContent": "done"})),
            &Session {
                stop_hook_active: true,
                ..SESSION
            },
        );
        assert_eq!(
            (stop["hook_event_name"].as_str(), &stop["stop_hook_active"]),
            (Some("Stop"), &json!(true))
        );
        assert_eq!(stop["last_assistant_message"], "done");
        assert_eq!(claude_name(HookEvent::SubagentStarted), "SubagentStop");
        assert_eq!(claude_name(HookEvent::SubagentStart), "SubagentStart");
        assert_eq!(claude_name(HookEvent::PreCompact), "PreCompact");
        let prompt = build(
            HookEvent::UserPromptSubmit,
            &fields(json!({"sessionId": "s", "userPrompt": "hi"})),
            &SESSION,
        );
        assert_eq!(prompt["prompt"], "hi");
        let start = build(
            HookEvent::SessionStart,
            &fields(json!({"sessionId": "s", "isResume": true})),
            &SESSION,
        );
        assert_eq!(start["source"], "resume");
        let step = build(
            HookEvent::StepEnd,
            &fields(json!({"event": "StepEnd", "sessionId": "s", "stepIndex": 2})),
            &SESSION,
        );
        assert_eq!(
            (step["hook_event_name"].as_str(), &step["stepIndex"]),
            (Some("StepEnd"), &json!(2))
        );
    }
}
