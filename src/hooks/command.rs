//! A command hook (or a Claude-style HTTP hook) in a dispatch: its input built from the event's
//! fields, its process run (or its POST sent) under its own timeout, and its answer turned into
//! a hook output — or, when it failed, into the output its failure policy gives (a gating event
//! blocks).

use serde_json::{Map, Value};

use super::output::{Action, Directives, HookOutput, ModifiedInput, PermissionHint};
use super::registry::{External, HookObject};
use crate::command_hook::input::{self, Session};
use crate::command_hook::{answer, http, run, CommandConfig, Decision, Verdict};
use crate::hook_event::HookEvent;
use crate::webhook::Environment;

/// How one command hook went.
pub enum Ran {
    /// It answered; `decision` names what it decided, when it did (`deny`, `allow`, …).
    Answered {
        output: Box<HookOutput>,
        decision: Option<&'static str>,
    },
    /// It gave no answer: `why` in words, `outcome` in one (`timeout`, `error`).
    Failed { why: String, outcome: &'static str },
}

/// The events whose command hooks guard an action: a failure there blocks it unless the hook
/// says `onFailure: 'continue'`. (TaskCompleted's hooks ask for more work, not for safety, and
/// the notification events' hooks never fail anything.)
pub fn is_gating(event: HookEvent) -> bool {
    matches!(
        event,
        HookEvent::PreToolUse
            | HookEvent::PermissionRequest
            | HookEvent::UserPromptSubmit
            | HookEvent::PostToolUse
            | HookEvent::PostToolUseFailure
            | HookEvent::PreCompact
    )
}

/// Runs `external`'s command (or posts to its HTTP hook) for `event` with `fields` (the
/// callbacks' input); header templates resolve from `environment`.
pub async fn run(event: HookEvent, external: &External, fields: &Map<String, Value>, environment: &Environment) -> Ran {
    let cwd = match external {
        External::Command(CommandConfig { cwd: Some(cwd), .. }) => {
            std::path::absolute(cwd).unwrap_or_else(|_| cwd.clone())
        }
        _ => std::env::current_dir().unwrap_or_else(|_| "/".into()),
    };
    let cwd = cwd.to_string_lossy().into_owned();
    let session = Session {
        cwd: &cwd,
        stop_hook_active: fields.get("stopHookActive") == Some(&Value::Bool(true)),
    };
    let input = input::build(event, fields, &session);
    let finished = match external {
        External::Command(config) => {
            let mut stdin = input.to_string().into_bytes();
            stdin.push(b'\n');
            let env = [("CLAUDE_PROJECT_DIR".to_string(), cwd.clone())];
            run::run(config, &stdin, &env)
                .await
                .map_err(|error| (error.to_string(), error.outcome()))
        }
        External::Http(config) => http::post(config, &input, environment).await.map_err(|why| {
            let outcome = if why.starts_with("timed out") {
                "timeout"
            } else {
                "error"
            };
            (why, outcome)
        }),
    };
    let finished = match finished {
        Ok(finished) => finished,
        Err((why, outcome)) => return Ran::Failed { why, outcome },
    };
    match answer::read(event, &finished) {
        Ok(verdict) => {
            let decision = verdict.decision.as_ref().map(decision_word);
            Ran::Answered {
                output: Box::new(output_of(event, verdict)),
                decision,
            }
        }
        Err(why) => Ran::Failed { why, outcome: "error" },
    }
}

/// What a failed hook leaves on a gating event, unless it continues on failure: the action
/// blocked with `Hook "<id>" failed: <why>`.
pub fn blocked(hook: &HookObject, event: HookEvent, why: &str) -> HookOutput {
    let reason = format!("Hook \"{}\" failed: {why}", hook.id);
    HookOutput {
        // A PermissionRequest skip denies the call without ending the run.
        action: if event == HookEvent::PermissionRequest {
            Action::Skip
        } else {
            Action::Abort
        },
        reason: Some(reason),
        ..HookOutput::continue_()
    }
}

fn decision_word(decision: &Decision) -> &'static str {
    match decision {
        Decision::Block(_) | Decision::Deny { .. } => "deny",
        Decision::Allow => "allow",
        Decision::Ask(_) => "ask",
    }
}

/// A verdict in the hook output's terms, per event.
pub fn output_of(event: HookEvent, verdict: Verdict) -> HookOutput {
    let mut output = HookOutput::continue_();
    let mut directives = Directives {
        context: verdict.context,
        stop: verdict.stop,
        ..Directives::default()
    };
    match verdict.decision {
        Some(Decision::Block(reason)) => match event {
            // The tool already ran: the reason reaches the model beside its output.
            HookEvent::PostToolUse | HookEvent::PostToolUseFailure => {
                let reason = reason.unwrap_or_else(|| "Blocked by hook".into());
                directives.context = Some(match directives.context.take() {
                    Some(context) => format!("{reason}\n{context}"),
                    None => reason,
                });
            }
            HookEvent::PermissionRequest => {
                output.action = Action::Skip;
                output.reason = reason;
            }
            HookEvent::PreToolUse | HookEvent::UserPromptSubmit | HookEvent::PreCompact => {
                output.action = Action::Abort;
                output.reason = reason;
            }
            // Claude Code's Stop: the reason is the model's next instruction.
            HookEvent::TaskCompleted => {
                directives.more_work = Some(reason.unwrap_or_else(|| "A Stop hook asked to go on.".into()));
            }
            // Elsewhere Claude Code shows it to the user only.
            _ => {}
        },
        Some(Decision::Deny { message, interrupt }) => {
            output.action = if interrupt { Action::Abort } else { Action::Skip };
            output.reason = message;
        }
        Some(Decision::Allow) => directives.permission = Some(PermissionHint::Allow),
        Some(Decision::Ask(reason)) => directives.permission = Some(PermissionHint::Ask(reason)),
        None => {}
    }
    output.modified_input = verdict.updated_input.map(ModifiedInput::Whole);
    output.modified_output = verdict.updated_output;
    output.directives = directives;
    output
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn verdict(decision: Option<Decision>) -> Verdict {
        Verdict {
            decision,
            ..Verdict::default()
        }
    }

    #[test]
    fn a_block_means_what_the_event_can_do() {
        let block = || verdict(Some(Decision::Block(Some("no".into()))));
        let pre = output_of(HookEvent::PreToolUse, block());
        assert_eq!((pre.action, pre.reason.as_deref()), (Action::Abort, Some("no")));
        let post = output_of(HookEvent::PostToolUse, block());
        assert_eq!(
            (post.action, post.directives.context.as_deref()),
            (Action::Continue, Some("no"))
        );
        let permission = output_of(HookEvent::PermissionRequest, block());
        assert_eq!(permission.action, Action::Skip);
        let start = output_of(HookEvent::SessionStart, block());
        assert_eq!(start.action, Action::Continue);
    }

    #[test]
    fn updated_input_replaces_and_permission_hints_are_kept() {
        let output = output_of(
            HookEvent::PreToolUse,
            Verdict {
                decision: Some(Decision::Ask(Some("sure?".into()))),
                updated_input: Some(json!({"command": "rg x"}).as_object().unwrap().clone()),
                ..Verdict::default()
            },
        );
        assert!(matches!(output.modified_input, Some(ModifiedInput::Whole(_))));
        assert_eq!(
            output.directives.permission,
            Some(PermissionHint::Ask(Some("sure?".into())))
        );
    }
}
