//! `advanced.hooks`, read once and validated as a whole: the map form
//! (`{ PreToolUse: [fn, { id, matcher, handler, webhook, command, onFailure }] }`) and the array form
//! (`AgentHook[]`). Every problem is a `ConfigError` naming the hook and the field.

use std::collections::HashSet;
use std::fmt;
use std::sync::Arc;

use regex::Regex;
use serde_json::Value;

use crate::command_hook::http::HttpConfig;
use crate::command_hook::CommandConfig;
use crate::error::{Result, SdkError};
use crate::hook_event::{HookEvent, EVENT_COUNT};
use crate::host::Callable;
use crate::js_value::{callable, describe};
use crate::options::OptionsObject;
use crate::webhook::{Delivery, Handling, WebhookConfig};

/// A hook object: a handler, a webhook, or both; or a command; on one event.
#[derive(Debug)]
pub struct HookObject {
    pub id: String,
    /// The type as registered (`beforeToolCall` stays `beforeToolCall`).
    pub type_name: String,
    pub event: HookEvent,
    /// Compiled once; `None` matches every tool.
    pub matcher: Option<Regex>,
    pub handler: Option<Callable>,
    /// Shared with the delivery task that sends it.
    pub webhook: Option<Arc<WebhookConfig>>,
    /// A command or HTTP hook with Claude Code's contract (never with a handler or webhook).
    pub external: Option<External>,
    /// `onFailure`; `None` follows the event (gating events block).
    pub on_failure: Option<OnFailure>,
}

/// A hook run outside JS with Claude Code's contract: a process, or a POST read like one.
#[derive(Debug)]
pub enum External {
    Command(CommandConfig),
    /// A Claude-style HTTP hook: the command hook's input POSTed, its answer read alike.
    Http(HttpConfig),
}

impl External {
    pub fn timeout_ms(&self) -> u64 {
        match self {
            External::Command(config) => config.timeout_ms(),
            External::Http(config) => config.timeout_ms(),
        }
    }
}

/// What a hook that fails (throws, times out, crashes, answers nonsense) does to a gating event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnFailure {
    /// The action it guards does not happen.
    Block,
    /// Logged; the action goes on as if the hook had said nothing.
    Continue,
}

impl OnFailure {
    pub fn as_str(self) -> &'static str {
        match self {
            OnFailure::Block => "block",
            OnFailure::Continue => "continue",
        }
    }
}

impl HookObject {
    /// Whether the hook applies to a call of `tool` (events without a tool always match).
    pub fn matches(&self, tool: Option<&str>) -> bool {
        match (&self.matcher, tool) {
            (Some(matcher), Some(tool)) => matcher.is_match(tool),
            _ => true,
        }
    }

    pub fn is_control(&self) -> bool {
        self.webhook.as_ref().is_some_and(|webhook| webhook.is_control())
    }

    /// Whether a failure of this hook lets the action go on.
    pub fn continues_on_failure(&self) -> bool {
        self.on_failure == Some(OnFailure::Continue)
    }
}

/// One registered hook of an event, in registration order.
#[derive(Debug, Clone)]
pub enum Entry {
    /// A bare function of the map form: the inline-hook contract applies exactly.
    Callback {
        function: Callable,
        path: Arc<str>,
    },
    Hook(Arc<HookObject>),
}

impl Entry {
    /// The hook object, when this is one.
    pub fn hook(&self) -> Option<&Arc<HookObject>> {
        match self {
            Entry::Hook(hook) => Some(hook),
            Entry::Callback { .. } => None,
        }
    }

    /// What a dispatch calls: the callback, or the hook object's handler.
    pub fn function(&self) -> Option<Callable> {
        match self {
            Entry::Callback { function, .. } => Some(*function),
            Entry::Hook(hook) => hook.handler,
        }
    }

    /// Whether a dispatch for `tool` runs it: a callback always; a hook object when its matcher
    /// matches, unless it is a result control (those run around the tool, not in a dispatch).
    pub fn applies(&self, tool: Option<&str>) -> bool {
        match self {
            Entry::Callback { .. } => true,
            Entry::Hook(hook) => !hook.is_control() && hook.matches(tool),
        }
    }

    /// Its name in spans: a hook object's id, or where a bare callback was registered.
    pub fn name(&self) -> &str {
        match self {
            Entry::Callback { path, .. } => path,
            Entry::Hook(hook) => &hook.id,
        }
    }

    /// Its name in logs and errors: `advanced.hooks.PreToolUse[1]` or `hook "audit"`, written
    /// only when a text needs it.
    pub fn label(&self) -> impl fmt::Display + '_ {
        struct Label<'a>(&'a Entry);
        impl fmt::Display for Label<'_> {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                match self.0 {
                    Entry::Callback { path, .. } => f.write_str(path),
                    Entry::Hook(hook) => write!(f, "hook \"{}\"", hook.id),
                }
            }
        }
        Label(self)
    }
}

#[derive(Debug, Default)]
pub struct Registry {
    entries: [Vec<Entry>; EVENT_COUNT],
}

/// Ids of environment hooks (`environment.rs`) start with this; caller hooks may not.
pub const ID_PREFIX: &str = "env-webhook:";

const HOOK_KEYS: &[&str] = &[
    "id",
    "type",
    "matcher",
    "handler",
    "webhook",
    "command",
    "http",
    "onFailure",
];

impl Registry {
    pub fn parse(value: Option<&Value>) -> Result<Self> {
        let mut registry = Registry::default();
        let mut ids = HashSet::new();
        match value {
            None | Some(Value::Null) => {}
            Some(Value::Array(items)) => {
                for (index, item) in items.iter().enumerate() {
                    let hook = parse_hook(item, &format!("advanced.hooks[{index}]"), None, &mut ids)?;
                    registry.entries[hook.event.index()].push(Entry::Hook(Arc::new(hook)));
                }
            }
            Some(value @ Value::Object(map)) if callable(value).is_none() => {
                let hooks = OptionsObject::new(map, "advanced.hooks");
                for (key, list) in hooks.map() {
                    let event = HookEvent::parse(key).ok_or_else(|| {
                        hooks.error(
                            key,
                            format_args!("is not a hook event (events: {})", HookEvent::all_names().join(", ")),
                        )
                    })?;
                    let Value::Array(items) = list else {
                        return Err(hooks.invalid(key, "an array of callbacks or hook objects", list));
                    };
                    for (index, item) in items.iter().enumerate() {
                        let path = format!("advanced.hooks.{key}[{index}]");
                        let entry = match callable(item) {
                            Some(function) => Entry::Callback {
                                function,
                                path: path.into(),
                            },
                            None if item.is_object() => Entry::Hook(Arc::new(parse_hook(item, &path, Some((key, event)), &mut ids)?)),
                            None => {
                                return Err(SdkError::config(format!(
                                    "{path} must be a function or a hook object (got {})",
                                    describe(item)
                                )).at(&path))
                            }
                        };
                        registry.entries[event.index()].push(entry);
                    }
                }
            }
            Some(other) => {
                return Err(SdkError::config(format!(
                    "advanced.hooks must be an object mapping hook events to callbacks, or an array of hook objects (got {})",
                    describe(other)
                )).at("advanced.hooks"))
            }
        }
        Ok(registry)
    }

    pub fn entries(&self, event: HookEvent) -> &[Entry] {
        &self.entries[event.index()]
    }

    /// The caller's webhook hooks of `advanced.hooks` (hook objects with a webhook and no
    /// handler), as an array of hook objects each with its `type`: what a durable session keeps
    /// (SPEC §8.2), header templates unresolved. JS functions are never among them.
    pub fn webhook_hooks(value: Option<&Value>) -> Value {
        let webhook_only = |item: &Value| {
            item.get("webhook").is_some_and(|webhook| !webhook.is_null())
                && item.get("handler").is_none_or(Value::is_null)
        };
        let mut kept = Vec::new();
        match value {
            Some(Value::Array(items)) => kept.extend(items.iter().filter(|item| webhook_only(item)).cloned()),
            Some(Value::Object(map)) if callable(value.unwrap_or(&Value::Null)).is_none() => {
                for (key, list) in map {
                    for item in list.as_array().into_iter().flatten().filter(|item| webhook_only(item)) {
                        let mut hook = item.clone();
                        if let Value::Object(hook) = &mut hook {
                            hook.entry("type").or_insert_with(|| Value::String(key.clone()));
                        }
                        kept.push(hook);
                    }
                }
            }
            _ => {}
        }
        Value::Array(kept)
    }

    /// A resumed session's hooks (SPEC §8.2): the stored webhook hooks first, in their order,
    /// then what the options given now register, less their webhook-only hooks (those come
    /// from the store). A stored hook that no longer validates fails the resume.
    pub fn resumed(stored: &Value, given: Registry) -> Result<Self> {
        let mut registry = Registry::parse(Some(stored)).map_err(|error| SdkError {
            message: format!("the stored webhook hooks are not valid: {}", error.message),
            ..error
        })?;
        for (kept, given) in registry.entries.iter_mut().zip(given.entries) {
            kept.extend(given.into_iter().filter(|entry| {
                !entry
                    .hook()
                    .is_some_and(|hook| hook.handler.is_none() && hook.webhook.is_some())
            }));
        }
        Ok(registry)
    }

    /// Whether a critical webhook is queued (`delivery: 'queue'`, `fallback: 'none'`): giving it
    /// up may fail a run from outside it.
    pub fn has_critical_queued(&self) -> bool {
        self.entries
            .iter()
            .flatten()
            .filter_map(|entry| entry.hook()?.webhook.as_ref())
            .any(|webhook| {
                matches!(
                    webhook.handling,
                    Handling::Notify {
                        delivery: Delivery::Queue { .. },
                        critical: true
                    }
                )
            })
    }

    /// The environment variables header templates may use.
    pub fn env_var_names(&self) -> Vec<String> {
        let mut names: Vec<String> = self
            .entries
            .iter()
            .flatten()
            .filter_map(Entry::hook)
            .flat_map(|hook| {
                let webhook = hook.webhook.iter().flat_map(|webhook| webhook.allowed_env_vars.iter());
                let http = match &hook.external {
                    Some(External::Http(http)) => http.allowed_env_vars.as_slice(),
                    _ => &[],
                };
                webhook.chain(http).cloned()
            })
            .collect();
        names.sort();
        names.dedup();
        names
    }
}

/// Reads one hook object. In the map form `key` is the event it is listed under.
fn parse_hook(
    value: &Value,
    path: &str,
    key: Option<(&str, HookEvent)>,
    ids: &mut HashSet<String>,
) -> Result<HookObject> {
    let object = OptionsObject::of(value, path, "a hook object { id, type, handler?, webhook? }")?;
    // `id` and `type` are read as given: a `null` one is a wrong value, not a missing one.
    let id = match object.map().get("id") {
        Some(Value::String(id)) if !id.trim().is_empty() => id.clone(),
        Some(other) => return Err(object.invalid("id", "a non-empty string", other)),
        None => return Err(object.error("id", "is required")),
    };
    let hook = OptionsObject::new(object.map(), &format!("{path} (hook \"{id}\")"));
    if id.starts_with(ID_PREFIX) {
        return Err(hook.error(
            "id",
            format_args!("must not start with \"{ID_PREFIX}\" (reserved for environment hooks)"),
        ));
    }
    if !ids.insert(id.clone()) {
        return Err(hook.error("id", "is already the id of another hook"));
    }
    for field in hook.map().keys() {
        if !HOOK_KEYS.contains(&field.as_str()) {
            return Err(hook.error(
                field,
                format_args!("is not a hook field (known: {})", HOOK_KEYS.join(", ")),
            ));
        }
    }
    let (type_name, event) = match (hook.map().get("type"), key) {
        (Some(Value::String(name)), _) => {
            let event = HookEvent::parse(name).ok_or_else(|| {
                hook.error(
                    "type",
                    format_args!(
                        "must be a hook event or alias (got \"{name}\"; events: {})",
                        HookEvent::all_names().join(", ")
                    ),
                )
            })?;
            if let Some((listed, listed_event)) = key {
                if listed_event != event {
                    return Err(hook.error(
                        "type",
                        format_args!("is \"{name}\" but the hook is listed under {listed}"),
                    ));
                }
            }
            (name.clone(), event)
        }
        (Some(other), _) => return Err(hook.invalid("type", "a string", other)),
        (None, Some((listed, event))) => (listed.to_string(), event),
        (None, None) => return Err(hook.error("type", "is required")),
    };
    let matcher = match hook.str("matcher")? {
        None => None,
        Some(_) if !event.is_tool_event() => {
            return Err(hook.error(
                "matcher",
                "is only supported on tool events (PreToolUse, PermissionRequest, PostToolUse, PostToolUseFailure and their aliases)",
            ));
        }
        Some("" | "*") => None,
        Some(pattern) => Some(Regex::new(pattern).map_err(|error| {
            hook.error(
                "matcher",
                format_args!("is not a valid regular expression: {}", last_line(&error.to_string())),
            )
        })?),
    };
    let handler = hook.function("handler")?;
    let webhook = match hook.get("webhook") {
        None => None,
        Some(value) => Some(Arc::new(WebhookConfig::parse(value, &hook.field("webhook"), event)?)),
    };
    let (command, http) = (hook.get("command"), hook.get("http"));
    let kinds = [
        handler.is_some() || webhook.is_some(),
        command.is_some(),
        http.is_some(),
    ];
    if kinds.iter().filter(|kind| **kind).count() > 1 {
        return Err(SdkError::config(format!(
            "{}: a hook object is a handler and/or webhook, a command, or an http hook: not more than one of these",
            hook.path()
        ))
        .at(hook.path()));
    }
    if !kinds.contains(&true) {
        return Err(SdkError::config(format!(
            "{} needs a handler, a webhook, a command or an http hook",
            hook.path()
        ))
        .at(hook.path()));
    }
    let external = match (command, http) {
        (Some(value), _) => Some(External::Command(CommandConfig::parse(value, &hook.field("command"))?)),
        (_, Some(value)) => Some(External::Http(HttpConfig::parse(value, &hook.field("http"))?)),
        (None, None) => None,
    };
    let on_failure = match hook.get("onFailure") {
        None => None,
        Some(Value::String(policy)) if policy == "block" => Some(OnFailure::Block),
        Some(Value::String(policy)) if policy == "continue" => Some(OnFailure::Continue),
        Some(other) => return Err(hook.invalid("onFailure", "'block' or 'continue'", other)),
    };
    if handler.is_some() && webhook.as_ref().is_some_and(|webhook| webhook.is_control()) {
        return Err(SdkError::config(format!(
            "{}: a control hook (responseHandling 'toolCall') cannot have a handler",
            hook.path()
        ))
        .at(hook.path()));
    }
    Ok(HookObject {
        id,
        type_name,
        event,
        matcher,
        handler,
        webhook,
        external,
        on_failure,
    })
}

/// The last non-empty line: a regex error ends with what is wrong, after lines that show the pattern.
fn last_line(text: &str) -> String {
    text.lines()
        .rfind(|line| !line.trim().is_empty())
        .unwrap_or(text)
        .trim()
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn error(value: Value) -> String {
        Registry::parse(Some(&value)).unwrap_err().message
    }

    #[test]
    fn both_forms_keep_registration_order_and_the_registered_type() {
        let registry = Registry::parse(Some(&json!({
            "PreToolUse": [{"$function": 0}, {"id": "audit", "matcher": "^fs/", "handler": {"$function": 1}}, {"$function": 2}],
            "afterStep": [{"id": "steps", "webhook": {"url": "https://x.test"}}]
        })))
        .unwrap();
        let pre = registry.entries(HookEvent::PreToolUse);
        assert_eq!(pre.len(), 3);
        assert!(
            matches!(&pre[0], Entry::Callback { function: Callable(0), path } if &**path == "advanced.hooks.PreToolUse[0]")
        );
        assert!(
            matches!(&pre[1], Entry::Hook(hook) if hook.id == "audit" && hook.type_name == "PreToolUse" && hook.matches(Some("fs/read")) && !hook.matches(Some("net/get")))
        );
        assert!(matches!(&registry.entries(HookEvent::StepEnd)[0], Entry::Hook(hook) if hook.type_name == "afterStep"));

        let array = Registry::parse(Some(&json!([
            {"id": "a", "type": "beforeToolCall", "matcher": "*", "handler": {"$function": 0}},
            {"id": "b", "type": "onError", "webhook": {"url": "https://x.test", "fallback": "none"}}
        ])))
        .unwrap();
        assert!(
            matches!(&array.entries(HookEvent::PreToolUse)[0], Entry::Hook(hook) if hook.type_name == "beforeToolCall" && hook.matcher.is_none())
        );
        assert_eq!(array.entries(HookEvent::StopFailure).len(), 1);
    }

    #[test]
    fn every_problem_names_the_hook_and_field() {
        let cases = [
            (json!([{"type": "afterStep", "handler": {"$function": 0}}]), "advanced.hooks[0].id is required"),
            (json!([{"id": "x", "handler": {"$function": 0}}]), "advanced.hooks[0] (hook \"x\").type is required"),
            (json!([{"id": "x", "type": "afterEverything", "handler": {"$function": 0}}]), "advanced.hooks[0] (hook \"x\").type must be a hook event or alias (got \"afterEverything\"; events: "),
            (json!([{"id": "x", "type": "afterStep", "matcher": "read", "handler": {"$function": 0}}]), "advanced.hooks[0] (hook \"x\").matcher is only supported on tool events"),
            (json!([{"id": "x", "type": "PreToolUse", "matcher": {"$js": "NaN"}, "handler": {"$function": 0}}]), "advanced.hooks[0] (hook \"x\").matcher must be a string (got NaN)"),
            (json!([{"id": "x", "type": "PreToolUse", "matcher": {"$function": 1}, "handler": {"$function": 0}}]), "advanced.hooks[0] (hook \"x\").matcher must be a string (got a function)"),
            (json!([{"id": "x", "type": "PreToolUse", "matcher": "(", "handler": {"$function": 0}}]), "advanced.hooks[0] (hook \"x\").matcher is not a valid regular expression: "),
            (json!([{"id": "x", "type": "afterStep"}]), "advanced.hooks[0] (hook \"x\") needs a handler, a webhook, a command or an http hook"),
            (json!([{"id": "x", "type": "afterStep", "handler": "f"}]), "advanced.hooks[0] (hook \"x\").handler must be a function (got \"f\")"),
            (json!([{"id": "x", "type": "afterStep", "handler": {"$function": 0}, "extra": 1}]), "advanced.hooks[0] (hook \"x\").extra is not a hook field (known: id, type, matcher, handler, webhook, command, http, onFailure)"),
            (json!([{"id": "x", "type": "PreToolUse", "handler": {"$function": 0}, "onFailure": "ignore"}]), "advanced.hooks[0] (hook \"x\").onFailure must be 'block' or 'continue' (got \"ignore\")"),
            (json!([{"id": "x", "type": "PreToolUse", "command": {"command": "bash"}, "handler": {"$function": 0}}]), "advanced.hooks[0] (hook \"x\"): a hook object is a handler and/or webhook, a command, or an http hook: not more than one of these"),
            (json!([{"id": "x", "type": "PreToolUse", "command": {"command": "bash", "timeoutMs": -1}}]), "advanced.hooks[0] (hook \"x\").command.timeoutMs must be a positive integer no greater than 2147483647 (got -1)"),
            (json!([{"id": "x", "type": "afterStep", "handler": {"$function": 0}}, {"id": "x", "type": "afterStep", "handler": {"$function": 1}}]), "advanced.hooks[1] (hook \"x\").id is already the id of another hook"),
            (json!([{"id": "x", "type": "PreToolUse", "handler": {"$function": 0}, "webhook": {"url": "https://x.test", "responseHandling": "toolCall"}}]), "advanced.hooks[0] (hook \"x\"): a control hook (responseHandling 'toolCall') cannot have a handler"),
            (json!([{"id": "x", "type": "afterStep", "webhook": {"url": "nope"}}]), "advanced.hooks[0] (hook \"x\").webhook.url must be an absolute http(s) URL"),
            (json!({"PreToolUse": [{"id": "x", "type": "afterToolCall", "handler": {"$function": 0}}]}), "advanced.hooks.PreToolUse[0] (hook \"x\").type is \"afterToolCall\" but the hook is listed under PreToolUse"),
            (json!({"PreToolUse": [3]}), "advanced.hooks.PreToolUse[0] must be a function or a hook object (got 3)"),
            (json!({"Nope": []}), "advanced.hooks.Nope is not a hook event (events: "),
            (json!([{"id": "env-webhook:x", "type": "afterStep", "handler": {"$function": 0}}]), "advanced.hooks[0] (hook \"env-webhook:x\").id must not start with \"env-webhook:\" (reserved for environment hooks)"),
        ];
        for (value, expected) in cases {
            let message = error(value.clone());
            assert!(
                message.starts_with(expected),
                "for {value}:\n  got      {message}\n  expected {expected}"
            );
        }
    }
}
