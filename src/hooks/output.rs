//! What a callback returns: `{ action, modifiedInput?, modifiedOutput?, reason? }`, and what a
//! command hook's answer adds to it (`Directives`).

use serde_json::{Map, Value};

use crate::error::{ErrorCode, SdkError};
use crate::js_value::{describe, js_marker};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Action {
    Continue,
    Skip,
    Abort,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ModifiedInput {
    /// A callback's object: merged key by key into the input.
    Object(Map<String, Value>),
    /// A command hook's `updatedInput`: the whole new input.
    Whole(Map<String, Value>),
    /// The legacy bare-string form, which UserPromptSubmit takes as the new prompt.
    Text(String),
    /// Anything else; ignored.
    Other,
}

#[derive(Debug, Clone, PartialEq)]
pub struct HookOutput {
    pub action: Action,
    pub modified_input: Option<ModifiedInput>,
    /// `Some(Value::Null)` is an explicit `null`; `None` means the key was absent.
    pub modified_output: Option<Value>,
    /// Empty reasons count as absent, so the default texts apply.
    pub reason: Option<String>,
    /// What only a command hook's answer says; callbacks leave it empty.
    pub directives: Directives,
}

/// A command hook's answer beyond the action (Claude Code's contract).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Directives {
    pub permission: Option<PermissionHint>,
    /// `additionalContext`: text the model reads next to what the event concerns.
    pub context: Option<String>,
    /// `continue: false`: the run ends after this step, with this text.
    pub stop: Option<String>,
    /// TaskCompleted's `decision: 'block'`: the model gets another turn with this instruction.
    pub more_work: Option<String>,
}

/// `permissionDecision: 'allow' | 'ask'` on PreToolUse.
#[derive(Debug, Clone, PartialEq)]
pub enum PermissionHint {
    /// No one is asked; a policy's deny still denies.
    Allow,
    /// A person confirms (the confirmation handler, or a pause), with this message.
    Ask(Option<String>),
}

impl HookOutput {
    /// The hook's `reason`, or the event's default text when it gave none.
    pub fn reason_or(&self, default: impl FnOnce() -> String) -> String {
        self.reason.clone().unwrap_or_else(default)
    }

    pub fn continue_() -> Self {
        HookOutput {
            action: Action::Continue,
            modified_input: None,
            modified_output: None,
            reason: None,
            directives: Directives::default(),
        }
    }

    /// Reads what the callback `label` (e.g. `advanced.hooks.PreToolUse[1]`, `hook "audit"`)
    /// returned; anything that is not a hook output is an `INVALID_HOOK_OUTPUT` error naming the
    /// callback and what it returned.
    pub fn parse(returned: Option<&Value>, label: impl std::fmt::Display) -> Result<Self, SdkError> {
        let invalid = |what: String| {
            SdkError::new(
                ErrorCode::InvalidHookOutput,
                format!("{label} returned {what}; a hook must return {{ action: 'continue' | 'skip' | 'abort' }}"),
            )
        };
        let Some(value) = returned else {
            return Err(invalid("undefined".into()));
        };
        let Some(object) = value.as_object().filter(|_| js_marker(value).is_none()) else {
            return Err(invalid(describe(value)));
        };
        let action = match object.get("action") {
            Some(Value::String(action)) if action == "continue" => Action::Continue,
            Some(Value::String(action)) if action == "skip" => Action::Skip,
            Some(Value::String(action)) if action == "abort" => Action::Abort,
            Some(other) => return Err(invalid(format!("an object whose action is {}", describe(other)))),
            None => return Err(invalid("an object without an action".into())),
        };
        let reason = match object.get("reason") {
            None | Some(Value::Null) => None,
            Some(Value::String(reason)) => Some(reason.clone()).filter(|reason| !reason.is_empty()),
            Some(other) => return Err(invalid(format!("an object whose reason is {}", describe(other)))),
        };
        let modified_input = object.get("modifiedInput").map(|value| match value {
            Value::Object(map) => ModifiedInput::Object(map.clone()),
            Value::String(text) => ModifiedInput::Text(text.clone()),
            _ => ModifiedInput::Other,
        });
        Ok(HookOutput {
            action,
            modified_input,
            modified_output: object.get("modifiedOutput").cloned(),
            reason,
            directives: Directives::default(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn outputs_are_read() {
        let output = HookOutput::parse(
            Some(&json!({"action": "skip", "reason": "no", "modifiedInput": {"a": 1}, "modifiedOutput": null})),
            "advanced.hooks.PreToolUse[0]",
        )
        .unwrap();
        assert_eq!(output.action, Action::Skip);
        assert_eq!(output.reason.as_deref(), Some("no"));
        assert_eq!(
            output.modified_input,
            Some(ModifiedInput::Object(json!({"a": 1}).as_object().unwrap().clone()))
        );
        assert_eq!(output.modified_output, Some(Value::Null));
        let empty_reason = HookOutput::parse(
            Some(&json!({"action": "abort", "reason": ""})),
            "advanced.hooks.PreToolUse[0]",
        )
        .unwrap();
        assert_eq!(empty_reason.reason, None);
    }

    #[test]
    fn anything_else_is_invalid_and_names_the_callback() {
        let cases = [
            (None, "advanced.hooks.PostToolUse[2] returned undefined; a hook must return { action: 'continue' | 'skip' | 'abort' }"),
            (Some(json!(42)), "advanced.hooks.PostToolUse[2] returned 42; a hook must return { action: 'continue' | 'skip' | 'abort' }"),
            (Some(json!({"action": "stop"})), "advanced.hooks.PostToolUse[2] returned an object whose action is \"stop\"; a hook must return { action: 'continue' | 'skip' | 'abort' }"),
            (Some(json!({})), "advanced.hooks.PostToolUse[2] returned an object without an action; a hook must return { action: 'continue' | 'skip' | 'abort' }"),
            (Some(json!({"action": "continue", "reason": 5})), "advanced.hooks.PostToolUse[2] returned an object whose reason is 5; a hook must return { action: 'continue' | 'skip' | 'abort' }"),
        ];
        for (value, message) in cases {
            let error = HookOutput::parse(value.as_ref(), "advanced.hooks.PostToolUse[2]").unwrap_err();
            assert_eq!(error.code, ErrorCode::InvalidHookOutput);
            assert_eq!(error.message, message);
        }
    }
}
