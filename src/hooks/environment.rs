//! Hooks from the environment: `AGENT_HOOK_WEBHOOK_URL`, `_TOKEN`, `_EVENTS`,
//! `_RESPONSE_HANDLING`, `_ON_ERROR`, read when each run starts and never kept. Problems are
//! reported by the variable's name, never its value.

use std::sync::Arc;

use serde_json::json;

use super::registry::{Entry, HookObject, ID_PREFIX};
use crate::error::{Result, SdkError};
use crate::hook_event::HookEvent;
use crate::webhook::config::parse_url;
use crate::webhook::{Environment, WebhookConfig};

pub const URL: &str = "AGENT_HOOK_WEBHOOK_URL";
pub const TOKEN: &str = "AGENT_HOOK_WEBHOOK_TOKEN";
pub const EVENTS: &str = "AGENT_HOOK_WEBHOOK_EVENTS";
pub const RESPONSE_HANDLING: &str = "AGENT_HOOK_WEBHOOK_RESPONSE_HANDLING";
pub const ON_ERROR: &str = "AGENT_HOOK_WEBHOOK_ON_ERROR";
pub const VARIABLES: [&str; 5] = [URL, TOKEN, EVENTS, RESPONSE_HANDLING, ON_ERROR];

fn invalid(message: String) -> SdkError {
    SdkError::config(format!("Invalid agent hook environment: {message}"))
}

/// The hooks the environment asks for, one per listed event, in the listed order: entries of
/// the run, dispatched after the session's own.
pub fn hooks(environment: &Environment) -> Result<Vec<Entry>> {
    let get = |name: &str| environment.get(name).map(String::as_str);
    let Some(url) = get(URL) else {
        return Ok(Vec::new());
    };
    let url =
        parse_url(url).map_err(|_| invalid(format!("{URL} must be an absolute http(s) URL without credentials")))?;
    if get(TOKEN).is_none_or(|token| token.trim().is_empty()) {
        return Err(invalid(format!("{TOKEN} is required when {URL} is set")));
    }
    let mut events: Vec<(String, HookEvent)> = Vec::new();
    for name in get(EVENTS)
        .unwrap_or("")
        .split(',')
        .map(str::trim)
        .filter(|name| !name.is_empty())
    {
        let event =
            HookEvent::parse(name).ok_or_else(|| invalid(format!("{EVENTS} lists a name that is not a hook event")))?;
        if !events.iter().any(|(listed, _)| listed == name) {
            events.push((name.to_string(), event));
        }
    }
    if events.is_empty() {
        return Err(invalid(format!(
            "{EVENTS} must list at least one hook event when {URL} is set"
        )));
    }
    let control = match get(RESPONSE_HANDLING) {
        None | Some("ignore") => false,
        Some("toolCall") => true,
        Some(_) => return Err(invalid(format!("{RESPONSE_HANDLING} must be ignore or toolCall"))),
    };
    let block = match get(ON_ERROR) {
        None | Some("continue") => false,
        Some("block") => true,
        Some(_) => return Err(invalid(format!("{ON_ERROR} must be continue or block"))),
    };
    if block && !control {
        return Err(invalid(format!(
            "{ON_ERROR}=block requires {RESPONSE_HANDLING}=toolCall"
        )));
    }
    if control && !events.iter().any(|(_, event)| event.allows_control()) {
        return Err(invalid(format!(
            "{RESPONSE_HANDLING}=toolCall requires beforeToolCall or afterToolCall in {EVENTS}"
        )));
    }
    events
        .into_iter()
        .map(|(name, event)| {
            let controls = control && event.allows_control();
            let mut config = json!({
                "url": url.as_str(),
                "headers": {"Authorization": format!("Bearer ${{{TOKEN}}}")},
                "allowedEnvVars": [TOKEN],
            });
            if controls {
                config["responseHandling"] = json!("toolCall");
                config["onError"] = json!(if block { "block" } else { "continue" });
            }
            let webhook = WebhookConfig::parse(&config, URL, event).map_err(|error| invalid(error.message))?;
            Ok(Entry::Hook(Arc::new(HookObject {
                id: format!("{ID_PREFIX}{name}"),
                type_name: name,
                event,
                matcher: None,
                handler: None,
                webhook: Some(Arc::new(webhook)),
                external: None,
                on_failure: None,
            })))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::webhook::{Delivery, Handling, OnError};

    fn env(pairs: &[(&str, &str)]) -> Environment {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn no_url_means_no_hooks() {
        assert!(hooks(&env(&[(EVENTS, "nonsense")])).unwrap().is_empty());
    }

    #[test]
    fn one_hook_per_event_controls_only_for_tool_calls() {
        let hooks = hooks(&env(&[
            (URL, "https://policy.test/hook"),
            (TOKEN, "t0k3n"),
            (EVENTS, " beforeToolCall, afterStep ,PostToolUse,beforeToolCall,"),
            (RESPONSE_HANDLING, "toolCall"),
            (ON_ERROR, "block"),
        ]))
        .unwrap();
        let hooks: Vec<_> = hooks.iter().filter_map(Entry::hook).collect();
        let summary: Vec<(&str, Handling)> = hooks
            .iter()
            .map(|hook| (hook.id.as_str(), hook.webhook.as_ref().unwrap().handling))
            .collect();
        let blocks = Handling::Control {
            on_error: OnError::Block,
        };
        let notifies = Handling::Notify {
            delivery: Delivery::Direct,
            critical: false,
        };
        assert_eq!(
            summary,
            [
                ("env-webhook:beforeToolCall", blocks),
                ("env-webhook:afterStep", notifies),
                ("env-webhook:PostToolUse", blocks)
            ]
        );
        assert_eq!(
            hooks[0].webhook.as_ref().unwrap().headers[0],
            ("authorization".into(), "Bearer ${AGENT_HOOK_WEBHOOK_TOKEN}".into())
        );
    }

    #[test]
    fn problems_name_the_variable_never_the_value() {
        let cases = [
            (env(&[(URL, "ftp://secret-host"), (TOKEN, "t"), (EVENTS, "afterStep")]), "AGENT_HOOK_WEBHOOK_URL must be an absolute http(s) URL without credentials"),
            (env(&[(URL, "https://h.test"), (TOKEN, "  "), (EVENTS, "afterStep")]), "AGENT_HOOK_WEBHOOK_TOKEN is required when AGENT_HOOK_WEBHOOK_URL is set"),
            (env(&[(URL, "https://h.test"), (TOKEN, "t"), (EVENTS, "afterStep,secretEvent")]), "AGENT_HOOK_WEBHOOK_EVENTS lists a name that is not a hook event"),
            (env(&[(URL, "https://h.test"), (TOKEN, "t"), (EVENTS, "")]), "AGENT_HOOK_WEBHOOK_EVENTS must list at least one hook event when AGENT_HOOK_WEBHOOK_URL is set"),
            (env(&[(URL, "https://h.test"), (TOKEN, "t"), (EVENTS, "afterStep"), (RESPONSE_HANDLING, "toolResult")]), "AGENT_HOOK_WEBHOOK_RESPONSE_HANDLING must be ignore or toolCall"),
            (env(&[(URL, "https://h.test"), (TOKEN, "t"), (EVENTS, "afterStep"), (ON_ERROR, "block")]), "AGENT_HOOK_WEBHOOK_ON_ERROR=block requires AGENT_HOOK_WEBHOOK_RESPONSE_HANDLING=toolCall"),
            (env(&[(URL, "https://h.test"), (TOKEN, "t"), (EVENTS, "afterStep"), (RESPONSE_HANDLING, "toolCall")]), "AGENT_HOOK_WEBHOOK_RESPONSE_HANDLING=toolCall requires beforeToolCall or afterToolCall in AGENT_HOOK_WEBHOOK_EVENTS"),
        ];
        for (environment, expected) in cases {
            let error = hooks(&environment).unwrap_err();
            assert_eq!(error.message, format!("Invalid agent hook environment: {expected}"));
            assert!(!error.message.contains("secret"));
        }
    }
}
