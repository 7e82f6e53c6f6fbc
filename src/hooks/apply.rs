//! The per-event rules that turn callbacks' outputs (all collected first) into effects.

use serde_json::{Map, Value};

use super::output::{Action, HookOutput, ModifiedInput, PermissionHint};
use crate::hook_event::HookEvent;
use crate::js_value::stringify;
use crate::model::{ContentPart, UserContent};

/// What PreToolUse decided for a call.
#[derive(Debug, Clone, PartialEq)]
pub enum PreVerdict {
    Continue,
    /// Do not run the tool; a successful call whose output is this text.
    Skip(String),
    /// A failed call: `Tool execution aborted: <text>`.
    Abort(String),
}

/// PreToolUse: shallow-merge each object `modifiedInput` (last writer per key wins) until the
/// first `skip` / `abort`, whose own `modifiedInput` is not merged.
pub fn pre_tool_use(outputs: &[HookOutput], input: &mut Map<String, Value>, tool: &str) -> PreVerdict {
    for output in outputs {
        match output.action {
            Action::Skip => {
                return PreVerdict::Skip(output.reason_or(|| format!("Tool \"{tool}\" was skipped by hook")))
            }
            Action::Abort => {
                return PreVerdict::Abort(output.reason_or(|| format!("Tool \"{tool}\" was aborted by hook")))
            }
            Action::Continue => merge(input, output),
        }
    }
    PreVerdict::Continue
}

/// A PermissionRequest denial: the call fails with `Tool execution aborted: <message>`;
/// `interrupt` (an `abort`) also ends the run after the turn.
#[derive(Debug, Clone, PartialEq)]
pub struct Denial {
    pub message: String,
    pub interrupt: bool,
}

/// PermissionRequest: each output's object `modifiedInput` is merged first; then a `skip` or
/// `abort` denies.
pub fn permission_request(outputs: &[HookOutput], input: &mut Map<String, Value>, tool: &str) -> Option<Denial> {
    for output in outputs {
        merge(input, output);
        if output.action != Action::Continue {
            return Some(Denial {
                message: output.reason_or(|| format!("Tool \"{tool}\" was blocked by hook")),
                interrupt: output.action == Action::Abort,
            });
        }
    }
    None
}

/// A callback's `modifiedInput` is merged key by key; a command hook's `updatedInput` replaces.
fn merge(input: &mut Map<String, Value>, output: &HookOutput) {
    match &output.modified_input {
        Some(ModifiedInput::Whole(replacement)) => input.clone_from(replacement),
        Some(ModifiedInput::Object(changes)) => {
            for (key, value) in changes {
                input.insert(key.clone(), value.clone());
            }
        }
        _ => {}
    }
}

/// What command hooks said about asking: any `ask` wins over `allow` (a deny is an abort).
pub fn permission_hint(outputs: &[HookOutput]) -> Option<PermissionHint> {
    let mut hint = None;
    for output in outputs {
        match &output.directives.permission {
            Some(ask @ PermissionHint::Ask(_)) => return Some(ask.clone()),
            Some(PermissionHint::Allow) => hint = Some(PermissionHint::Allow),
            None => {}
        }
    }
    hint
}

/// Every hook's `additionalContext`, in order, one per line; `None` when there is none.
pub fn context(outputs: &[HookOutput]) -> Option<String> {
    let parts: Vec<&str> = outputs
        .iter()
        .filter_map(|output| output.directives.context.as_deref())
        .collect();
    (!parts.is_empty()).then(|| parts.join("\n"))
}

/// The first `continue: false`: the run ends after this step with its text.
pub fn stop(outputs: &[HookOutput]) -> Option<String> {
    outputs.iter().find_map(|output| output.directives.stop.clone())
}

/// `text` with hooks' context after it, as the model reads it.
pub fn with_context(text: &str, context: Option<&str>) -> String {
    match context {
        Some(context) if text.is_empty() => context.to_string(),
        Some(context) => format!("{text}\n\n{context}"),
        None => text.to_string(),
    }
}

/// What PostToolUse / PostToolUseFailure decided.
#[derive(Debug, Clone, PartialEq)]
pub enum PostVerdict {
    /// The model-facing output, replaced or not; the status stays.
    Output(String),
    /// A failed call: `Tool execution failed: <text>`.
    Abort(String),
}

/// The first `abort` wins; otherwise the last defined `modifiedOutput` replaces the output
/// (strings as they are, other JSON stringified, `null` → `'null'`).
pub fn post_tool_use(outputs: &[HookOutput], output: &str, tool: &str) -> PostVerdict {
    let mut replacement: Option<&Value> = None;
    for hook in outputs {
        if hook.action == Action::Abort {
            return PostVerdict::Abort(hook.reason_or(|| format!("Tool \"{tool}\" post-execution hook aborted")));
        }
        if let Some(modified) = &hook.modified_output {
            replacement = Some(modified);
        }
    }
    let output = replacement.map_or_else(|| output.to_string(), stringify);
    PostVerdict::Output(with_context(&output, context(outputs).as_deref()))
}

/// UserPromptSubmit: an `abort` rejects (`Err` holds the message); `modifiedInput.userPrompt`
/// or a bare-string `modifiedInput` replaces the prompt text (the last one wins), keeping images.
/// `skip` is ignored.
pub fn user_prompt_submit(outputs: &[HookOutput], content: UserContent) -> Result<UserContent, String> {
    let mut replacement: Option<&str> = None;
    for output in outputs {
        if output.action == Action::Abort {
            return Err(output.reason_or(|| "Prompt submission aborted by hook".into()));
        }
        if let Some(stop) = &output.directives.stop {
            return Err(stop.clone());
        }
        match &output.modified_input {
            Some(ModifiedInput::Text(text)) => replacement = Some(text),
            Some(ModifiedInput::Object(map)) => {
                if let Some(Value::String(text)) = map.get("userPrompt") {
                    replacement = Some(text);
                }
            }
            _ => {}
        }
    }
    // Command hooks' context goes with the prompt, after it.
    let context = context(outputs);
    let Some(text) = replacement else {
        return Ok(match (content, context) {
            (content, None) => content,
            (UserContent::Text(prompt), Some(context)) => UserContent::Text(with_context(&prompt, Some(&context))),
            (UserContent::Parts(mut parts), Some(context)) => {
                parts.push(ContentPart::Text { text: context });
                UserContent::Parts(parts)
            }
        });
    };
    let text = with_context(text, context.as_deref());
    let text = text.as_str();
    Ok(match content {
        UserContent::Text(_) => UserContent::Text(text.to_string()),
        UserContent::Parts(parts) => {
            let mut rewritten = Vec::with_capacity(parts.len());
            if !text.is_empty() {
                rewritten.push(ContentPart::Text { text: text.to_string() });
            }
            rewritten.extend(
                parts
                    .into_iter()
                    .filter(|part| matches!(part, ContentPart::ImageUrl { .. })),
            );
            UserContent::Parts(rewritten)
        }
    })
}

/// `content` with SessionStart's `context` before it, as the model reads the first prompt.
pub fn context_first(content: UserContent, context: &str) -> UserContent {
    match content {
        UserContent::Text(prompt) => UserContent::Text(format!("{context}\n\n{prompt}")),
        UserContent::Parts(mut parts) => {
            parts.insert(
                0,
                ContentPart::Text {
                    text: context.to_string(),
                },
            );
            UserContent::Parts(parts)
        }
    }
}

/// TaskCompleted: the first command hook's `decision: 'block'`, the model's next instruction.
pub fn more_work(outputs: &[HookOutput]) -> Option<String> {
    outputs.iter().find_map(|output| output.directives.more_work.clone())
}

/// SessionStart, TaskCompleted, SessionEnd: the first `abort` fails the operation with its
/// reason or `Hook <Event> aborted`; everything else is ignored.
pub fn first_abort(outputs: &[HookOutput], event: HookEvent) -> Option<String> {
    outputs
        .iter()
        .find(|output| output.action == Action::Abort)
        .map(|output| output.reason_or(|| format!("Hook {} aborted", event.name())))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::messages::ImageUrl;
    use serde_json::json;

    fn out(value: Value) -> HookOutput {
        HookOutput::parse(Some(&value), "test").unwrap()
    }

    fn map(value: Value) -> Map<String, Value> {
        value.as_object().unwrap().clone()
    }

    #[test]
    fn pre_tool_use_merges_until_the_first_skip_or_abort() {
        let mut input = map(json!({"a": 1, "b": 1}));
        let verdict = pre_tool_use(
            &[
                out(json!({"action": "continue", "modifiedInput": {"a": 2}})),
                out(json!({"action": "continue", "modifiedInput": {"a": 3, "c": 1}})),
                out(json!({"action": "skip", "modifiedInput": {"b": 9}})),
                out(json!({"action": "abort"})),
            ],
            &mut input,
            "Read",
        );
        assert_eq!(verdict, PreVerdict::Skip("Tool \"Read\" was skipped by hook".into()));
        assert_eq!(Value::Object(input), json!({"a": 3, "b": 1, "c": 1}));
        let mut input = Map::new();
        assert_eq!(
            pre_tool_use(
                &[out(json!({"action": "abort", "reason": "no rm -rf"}))],
                &mut input,
                "Bash"
            ),
            PreVerdict::Abort("no rm -rf".into())
        );
        assert_eq!(
            pre_tool_use(&[out(json!({"action": "abort"}))], &mut input, "Bash"),
            PreVerdict::Abort("Tool \"Bash\" was aborted by hook".into())
        );
        // Bare strings and arrays are not merged.
        let mut input = map(json!({"a": 1}));
        pre_tool_use(
            &[
                out(json!({"action": "continue", "modifiedInput": "x"})),
                out(json!({"action": "continue", "modifiedInput": [1]})),
            ],
            &mut input,
            "T",
        );
        assert_eq!(Value::Object(input), json!({"a": 1}));
    }

    #[test]
    fn permission_request_merges_then_denies() {
        let mut input = Map::new();
        let denial = permission_request(
            &[
                out(json!({"action": "continue", "modifiedInput": {"approved": true}})),
                out(json!({"action": "skip", "reason": "blocked", "modifiedInput": {"x": 1}})),
            ],
            &mut input,
            "Write",
        );
        assert_eq!(
            denial,
            Some(Denial {
                message: "blocked".into(),
                interrupt: false
            })
        );
        assert_eq!(Value::Object(input), json!({"approved": true, "x": 1}));
        let mut input = Map::new();
        assert_eq!(
            permission_request(&[out(json!({"action": "abort"}))], &mut input, "Write"),
            Some(Denial {
                message: "Tool \"Write\" was blocked by hook".into(),
                interrupt: true
            })
        );
    }

    #[test]
    fn post_tool_use_takes_the_last_defined_output_unless_one_aborts() {
        let outputs = [
            out(json!({"action": "continue", "modifiedOutput": "first"})),
            out(json!({"action": "continue"})),
            out(json!({"action": "continue", "modifiedOutput": {"ok": true}})),
        ];
        assert_eq!(
            post_tool_use(&outputs, "orig", "T"),
            PostVerdict::Output("{\"ok\":true}".into())
        );
        assert_eq!(
            post_tool_use(
                &[out(json!({"action": "continue", "modifiedOutput": null}))],
                "orig",
                "T"
            ),
            PostVerdict::Output("null".into())
        );
        assert_eq!(
            post_tool_use(&[out(json!({"action": "continue"}))], "orig", "T"),
            PostVerdict::Output("orig".into())
        );
        assert_eq!(
            post_tool_use(
                &[
                    out(json!({"action": "continue", "modifiedOutput": "x"})),
                    out(json!({"action": "abort"}))
                ],
                "orig",
                "Read"
            ),
            PostVerdict::Abort("Tool \"Read\" post-execution hook aborted".into())
        );
    }

    #[test]
    fn user_prompt_rewrites_text_and_keeps_images() {
        let image = |url: &str| ContentPart::ImageUrl {
            image_url: ImageUrl {
                url: url.into(),
                detail: None,
            },
        };
        let content = UserContent::Parts(vec![
            image("before"),
            ContentPart::Text {
                text: "first chunk".into(),
            },
            image("after"),
            ContentPart::Text {
                text: "second chunk".into(),
            },
        ]);
        let rewritten = user_prompt_submit(
            &[out(
                json!({"action": "continue", "modifiedInput": {"userPrompt": "updated prompt"}}),
            )],
            content,
        )
        .unwrap();
        assert_eq!(
            rewritten,
            UserContent::Parts(vec![
                ContentPart::Text {
                    text: "updated prompt".into()
                },
                image("before"),
                image("after")
            ])
        );
        let bare = user_prompt_submit(
            &[out(json!({"action": "skip", "modifiedInput": "bare"}))],
            UserContent::Text("x".into()),
        )
        .unwrap();
        assert_eq!(bare, UserContent::Text("bare".into()));
        assert_eq!(
            user_prompt_submit(&[out(json!({"action": "abort"}))], UserContent::Text("x".into())),
            Err("Prompt submission aborted by hook".into())
        );
    }

    #[test]
    fn first_abort_uses_the_reason_or_the_event_text() {
        assert_eq!(
            first_abort(&[out(json!({"action": "continue"}))], HookEvent::SessionStart),
            None
        );
        assert_eq!(
            first_abort(&[out(json!({"action": "abort"}))], HookEvent::SessionEnd),
            Some("Hook SessionEnd aborted".into())
        );
        assert_eq!(
            first_abort(
                &[
                    out(json!({"action": "skip"})),
                    out(json!({"action": "abort", "reason": "r"}))
                ],
                HookEvent::TaskCompleted
            ),
            Some("r".into())
        );
    }
}
