//! What a webhook is sent: the event's fields (or only `eventFields`, in their order), then
//! `hookId` and `hookType`, then `body`, which wins on any key it shares.

use serde_json::{Map, Value};

use super::config::WebhookConfig;

/// Builds the payload from the event's JSON. `notification` redacts the tool result as
/// notifications see it; controls get the full result.
pub fn build(
    event: &Map<String, Value>,
    config: &WebhookConfig,
    hook_id: &str,
    hook_type: &str,
    notification: bool,
) -> Value {
    let mut payload = match &config.event_fields {
        None => event.clone(),
        Some(fields) => fields
            .iter()
            .filter_map(|field| event.get(field).map(|value| (field.clone(), value.clone())))
            .collect(),
    };
    payload.insert("hookId".into(), Value::String(hook_id.to_string()));
    payload.insert("hookType".into(), Value::String(hook_type.to_string()));
    if let Some(body) = &config.body {
        for (key, value) in body {
            payload.insert(key.clone(), value.clone());
        }
    }
    if notification {
        if let Some(result) = payload.get_mut("result") {
            redact_result(result);
        }
    }
    Value::Object(payload)
}

/// Trims what a notification must not carry from a tool result: the arguments and data of a
/// skill's work registration.
pub fn redact_result(result: &mut Value) {
    if let Some(registration) = result.get_mut("workRegistration").and_then(Value::as_object_mut) {
        if registration.get("type").and_then(Value::as_str) == Some("skill") {
            registration.remove("args");
            registration.insert("data".into(), Value::Null);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hook_event::HookEvent;
    use serde_json::json;

    fn config(extra: Value) -> WebhookConfig {
        let mut value = json!({"url": "https://x.test"});
        value
            .as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        WebhookConfig::parse(&value, "w", HookEvent::PostToolUse).unwrap()
    }

    #[test]
    fn fields_then_ids_then_body_in_order() {
        let event = json!({"event": "PostToolUse", "toolName": "read", "stepIndex": 2})
            .as_object()
            .unwrap()
            .clone();
        let payload = build(
            &event,
            &config(json!({"body": {"toolName": "override", "tenant": "acme"}})),
            "audit",
            "afterToolCall",
            true,
        );
        assert_eq!(
            payload.to_string(),
            r#"{"event":"PostToolUse","toolName":"override","stepIndex":2,"hookId":"audit","hookType":"afterToolCall","tenant":"acme"}"#
        );
        let selected = build(
            &event,
            &config(json!({"eventFields": ["stepIndex", "missing", "event"]})),
            "a",
            "afterToolCall",
            true,
        );
        assert_eq!(
            selected.to_string(),
            r#"{"stepIndex":2,"event":"PostToolUse","hookId":"a","hookType":"afterToolCall"}"#
        );
    }

    #[test]
    fn notifications_redact_skill_work_but_controls_do_not() {
        let event = json!({"result": {"content": "x", "workRegistration": {"type": "skill", "args": {"a": 1}, "data": {"b": 2}}}})
            .as_object()
            .unwrap()
            .clone();
        let notified = build(&event, &config(json!({})), "a", "afterToolCall", true);
        assert_eq!(
            notified["result"]["workRegistration"],
            json!({"type": "skill", "data": null})
        );
        let controlled = build(&event, &config(json!({})), "a", "afterToolCall", false);
        assert_eq!(controlled["result"]["workRegistration"]["args"], json!({"a": 1}));
    }
}
