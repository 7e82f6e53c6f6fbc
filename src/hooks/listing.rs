//! `agent.hooks()`: what is registered, per event in dispatch order, with what each hook is,
//! how long it may take and what its failure does — so a team can check that the guard it
//! means to run is the one that runs.

use serde::Serialize;

use super::command;
use super::registry::{Entry, External, HookObject, OnFailure, ID_PREFIX};
use crate::hook_event::HookEvent;
use crate::webhook::{Handling, OnError};

/// One registration, as `agent.hooks()` lists it.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Registration {
    pub id: String,
    /// The canonical event (`PreToolUse` for a hook registered as `beforeToolCall`).
    pub event: &'static str,
    pub kind: &'static str,
    pub matcher: Option<String>,
    pub timeout_ms: u64,
    pub on_failure: &'static str,
}

/// The budgets hooks run under when they have none of their own.
#[derive(Debug, Clone, Copy)]
pub struct Budgets {
    pub hook_timeout_ms: u32,
    pub session_end_timeout_ms: u32,
}

/// Every entry of `session` then of `environment`, event by event in the events' order.
pub fn list(session: impl Fn(HookEvent) -> Vec<Entry>, environment: &[Entry], budgets: Budgets) -> Vec<Registration> {
    let mut listed = Vec::new();
    for event in HookEvent::ALL {
        let from_environment = environment
            .iter()
            .filter(|entry| entry.hook().is_some_and(|hook| hook.event == event));
        for entry in session(event).iter().chain(from_environment) {
            listed.push(registration(entry, event, budgets));
        }
    }
    listed
}

fn registration(entry: &Entry, event: HookEvent, budgets: Budgets) -> Registration {
    let budget = u64::from(if event == HookEvent::SessionEnd {
        budgets.session_end_timeout_ms
    } else {
        budgets.hook_timeout_ms
    });
    // A callback's failure fails the events of the inline-hook contract; elsewhere it is logged.
    let callback_default = if event.is_session_event() { "block" } else { "continue" };
    let hook = match entry {
        Entry::Callback { path, .. } => {
            return Registration {
                id: path.to_string(),
                event: event.name(),
                kind: "callback",
                matcher: None,
                timeout_ms: budget,
                on_failure: callback_default,
            }
        }
        Entry::Hook(hook) => hook,
    };
    let (kind, timeout_ms, default) = kind_of(hook, event, budget, callback_default);
    Registration {
        id: hook.id.clone(),
        event: event.name(),
        kind,
        matcher: hook.matcher.as_ref().map(|matcher| matcher.as_str().to_string()),
        timeout_ms,
        on_failure: hook.on_failure.map_or(default, OnFailure::as_str),
    }
}

/// What `hook` is, how long it may run, and what its failure does unless it says otherwise.
fn kind_of(
    hook: &HookObject,
    event: HookEvent,
    budget: u64,
    callback_default: &'static str,
) -> (&'static str, u64, &'static str) {
    if let Some(external) = &hook.external {
        let kind = match external {
            External::Command(_) => "command",
            External::Http(_) => "http",
        };
        let default = if command::is_gating(event) { "block" } else { "continue" };
        return (kind, external.timeout_ms(), default);
    }
    // A handler, with or without a webhook, is judged as a callback is.
    let Some(webhook) = hook.webhook.as_ref().filter(|_| hook.handler.is_none()) else {
        return ("handler", budget, callback_default);
    };
    let kind = if hook.id.starts_with(ID_PREFIX) {
        "environment"
    } else {
        "webhook"
    };
    let default = match webhook.handling {
        Handling::Control {
            on_error: OnError::Block,
        } => "block",
        Handling::Notify { critical: true, .. } => "block",
        _ => "continue",
    };
    (kind, webhook.timeout.as_millis() as u64, default)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hooks::registry::Registry;
    use serde_json::json;

    #[test]
    fn registrations_in_dispatch_order_with_their_kinds_and_policies() {
        let registry = Registry::parse(Some(&json!({
            "beforeToolCall": [
                {"$function": 0},
                {"id": "guard", "matcher": "^Bash$", "command": {"command": "true", "timeoutMs": 5000}},
                {"id": "lenient", "handler": {"$function": 1}, "onFailure": "continue"}
            ],
            "afterStep": [{"id": "steps", "webhook": {"url": "https://hooks.test/x", "timeout": 7}}],
            "SessionEnd": [{"$function": 2}]
        })))
        .unwrap();
        let budgets = Budgets {
            hook_timeout_ms: 600_000,
            session_end_timeout_ms: 3_000,
        };
        let listed = list(|event| registry.entries(event).to_vec(), &[], budgets);
        let value = serde_json::to_value(&listed).unwrap();
        assert_eq!(
            value,
            json!([
                {"id": "advanced.hooks.beforeToolCall[0]", "event": "PreToolUse", "kind": "callback", "matcher": null, "timeoutMs": 600000, "onFailure": "block"},
                {"id": "guard", "event": "PreToolUse", "kind": "command", "matcher": "^Bash$", "timeoutMs": 5000, "onFailure": "block"},
                {"id": "lenient", "event": "PreToolUse", "kind": "handler", "matcher": null, "timeoutMs": 600000, "onFailure": "continue"},
                {"id": "advanced.hooks.SessionEnd[0]", "event": "SessionEnd", "kind": "callback", "matcher": null, "timeoutMs": 3000, "onFailure": "block"},
                {"id": "steps", "event": "StepEnd", "kind": "webhook", "matcher": null, "timeoutMs": 7000, "onFailure": "continue"}
            ])
        );
    }
}
