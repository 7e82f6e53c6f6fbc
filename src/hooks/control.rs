//! Result controls (`responseHandling: 'toolCall'` webhooks) on PreToolUse (before the tool runs,
//! on its final input) and PostToolUse (after it ran, before anything sees the result).
//! They run in registration order, then the environment's; the first deny wins, an allow does
//! not stop later controls, and errors follow each hook's `onError`.

use std::future::Future;
use std::pin::Pin;

use serde_json::{json, Map, Value};
use tracing::Instrument;

use super::dispatch::Caller;
use super::registry::HookObject;
use super::span::HookSpan;
use crate::hook_event::HookEvent;
use crate::log::Log;
use crate::webhook::decision::Decision;
use crate::webhook::deliver::{deliver, ControlAnswer};
use crate::webhook::payload;
use crate::webhook::{Handling, OnError};

/// The model-facing text of a call blocked because a control failed with `onError: 'block'`.
pub const CONTROL_ERROR: &str = "hook_control_error";

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Allow,
    /// Denied by a receiver (`hook_denied`): the call's output is exactly `reason`.
    Denied {
        reason: String,
    },
    /// A control failed and blocks on error: the output is `hook_control_error`.
    Failed,
}

/// Runs `controls` on `payload`. Boxed: its webhook calls make a future of several KB, which
/// every tool call's state would otherwise carry inline, though most calls have no controls.
pub fn evaluate<'a>(
    controls: &'a [&'a std::sync::Arc<HookObject>],
    event: HookEvent,
    payload: &'a Map<String, Value>,
    caller: Caller<'a>,
    log: &'a Log,
) -> Pin<Box<impl Future<Output = Verdict> + 'a>> {
    Box::pin(evaluate_each(controls, event, payload, caller, log))
}

async fn evaluate_each(
    controls: &[&std::sync::Arc<HookObject>],
    event: HookEvent,
    payload: &Map<String, Value>,
    caller: Caller<'_>,
    log: &Log,
) -> Verdict {
    for hook in controls {
        let Some(webhook) = &hook.webhook else { continue };
        let Handling::Control { on_error } = webhook.handling else {
            continue;
        };
        let body = payload::build(payload, webhook, &hook.id, &hook.type_name, false);
        // A control is a hook span of its own, like the hooks of a dispatch.
        let mut span = HookSpan::new(&hook.id);
        let answer = tokio::select! {
            biased;
            answer = deliver(webhook, body, &caller.context.environment).instrument(span.span()) => answer,
            // Cancellation never grants permission.
            _ = caller.wait_cancelled() => {
                span.failed("cancelled");
                return Verdict::Failed;
            }
        };
        match &answer {
            ControlAnswer::Decision(Decision::Allow) => span.succeeded("allow"),
            ControlAnswer::Decision(Decision::Deny(_)) => span.succeeded("deny"),
            ControlAnswer::Notification => span.succeeded("delivered"),
            ControlAnswer::Failed(error) => span.failed(error.code()),
        }
        match answer {
            ControlAnswer::Decision(Decision::Allow) | ControlAnswer::Notification => {}
            ControlAnswer::Decision(Decision::Deny(reason)) => {
                return Verdict::Denied {
                    reason: reason.unwrap_or_else(|| format!("Blocked by {} hook.", hook.type_name)),
                }
            }
            ControlAnswer::Failed(error) => {
                log.warn(
                    &format!(
                        "Result control {} failed ({})",
                        hook.id,
                        match on_error {
                            OnError::Block => "blocking",
                            OnError::Continue => "continuing",
                        }
                    ),
                    json!({"hookId": hook.id, "event": event.name(), "error": error.to_string()}),
                );
                if on_error == OnError::Block {
                    return Verdict::Failed;
                }
            }
        }
    }
    Verdict::Allow
}
