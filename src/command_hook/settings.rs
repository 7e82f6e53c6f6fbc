//! `loadClaudeHooks`: the hooks of a Claude Code settings file (`.claude/settings.json`'s
//! `{ hooks: { <Event>: [{ matcher, hooks: [...] }] } }`) as our hook objects, in file order,
//! with Claude Code's matcher meaning and event names. What this runtime cannot run as Claude
//! Code would (an event it does not have, `prompt`/`agent`/`mcp_tool` entries, `async`,
//! `if`, a matcher on an event without tools) is an error naming the entry, unless the caller
//! asks to skip such entries: a guard that silently does not load is the dangerous case.

use std::path::Path;

use serde_json::{json, Map, Value};

use super::config::CommandConfig;
use super::http::HttpConfig;
use crate::error::{Result, SdkError};
use crate::hook_event::HookEvent;
use crate::js_value::describe;

/// Claude Code events and the event each is here.
const EVENTS: &[(&str, HookEvent)] = &[
    ("PreToolUse", HookEvent::PreToolUse),
    ("PostToolUse", HookEvent::PostToolUse),
    ("PostToolUseFailure", HookEvent::PostToolUseFailure),
    ("PermissionRequest", HookEvent::PermissionRequest),
    ("UserPromptSubmit", HookEvent::UserPromptSubmit),
    ("SessionStart", HookEvent::SessionStart),
    ("SessionEnd", HookEvent::SessionEnd),
    ("Stop", HookEvent::TaskCompleted),
    ("StopFailure", HookEvent::StopFailure),
    ("SubagentStart", HookEvent::SubagentStart),
    ("SubagentStop", HookEvent::SubagentStarted),
    ("PreCompact", HookEvent::PreCompact),
    ("PostCompact", HookEvent::PostCompact),
];

/// Claude Code events this runtime never fires: their hooks cannot run here.
const NOT_FIRED: &[&str] = &[
    "Notification",
    "PostToolBatch",
    "PermissionDenied",
    "TaskCreated",
    "TaskCompleted",
    "TeammateIdle",
    "ConfigChange",
    "CwdChanged",
    "FileChanged",
    "InstructionsLoaded",
    "UserPromptExpansion",
    "WorktreeCreate",
    "WorktreeRemove",
    "Elicitation",
    "ElicitationResult",
    "MessageDisplay",
    "Setup",
];

const COMMON_KEYS: &[&str] = &["type", "timeout", "onFailure", "statusMessage", "once", "async"];
const COMMAND_KEYS: &[&str] = &["command", "args", "shell"];
const HTTP_KEYS: &[&str] = &["url", "headers", "allowedEnvVars"];

/// What to do with an entry this runtime cannot run as Claude Code would.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unsupported {
    Error,
    Skip,
}

/// Reads `source`: a path to a settings file, or the settings object itself.
pub fn load(source: &Value, unsupported: Unsupported) -> Result<Vec<Value>> {
    match source {
        Value::String(path) => {
            let text = std::fs::read_to_string(Path::new(path)).map_err(|error| {
                SdkError::config(format!("Claude settings file \"{path}\" could not be read: {error}"))
            })?;
            let settings: Value = serde_json::from_str(&text)
                .map_err(|error| SdkError::config(format!("Claude settings file \"{path}\" is not JSON: {error}")))?;
            hook_objects(&settings, unsupported, project_dir(Path::new(path)).as_deref())
        }
        Value::Object(_) => hook_objects(source, unsupported, None),
        other => Err(SdkError::config(format!(
            "loadClaudeHooks takes a settings file's path or its parsed object (got {})",
            describe(other)
        ))),
    }
}

/// The project a `<project>/.claude/settings*.json` belongs to: its commands run there, as
/// Claude Code runs them (relative script paths and `$CLAUDE_PROJECT_DIR` mean that directory).
fn project_dir(settings: &Path) -> Option<String> {
    let folder = settings.parent()?;
    if folder.file_name()? != ".claude" {
        return None;
    }
    let project = std::path::absolute(folder.parent()?).ok()?;
    Some(project.to_string_lossy().into_owned())
}

fn hook_objects(settings: &Value, unsupported: Unsupported, project: Option<&str>) -> Result<Vec<Value>> {
    let hooks = match settings.get("hooks") {
        None | Some(Value::Null) => return Ok(Vec::new()),
        Some(Value::Object(hooks)) => hooks,
        Some(other) => {
            return Err(SdkError::config(format!(
                "hooks must be an object of events (got {})",
                describe(other)
            )))
        }
    };
    let mut objects = Vec::new();
    for (name, groups) in hooks {
        let event = match EVENTS.iter().find(|(claude, _)| claude == name) {
            Some((_, event)) => *event,
            None if NOT_FIRED.contains(&name.as_str()) => {
                if unsupported == Unsupported::Skip {
                    continue;
                }
                return Err(SdkError::config(format!(
                    "hooks.{name} is a Claude Code event this runtime does not fire; pass {{ unsupported: 'skip' }} to leave its hooks out"
                )));
            }
            None => {
                let known: Vec<&str> = EVENTS.iter().map(|(claude, _)| *claude).collect();
                return Err(SdkError::config(format!(
                    "hooks.{name} is not a Claude Code hook event (events run here: {})",
                    known.join(", ")
                )));
            }
        };
        let Value::Array(groups) = groups else {
            return Err(SdkError::config(format!(
                "hooks.{name} must be an array of {{ matcher, hooks }} groups (got {})",
                describe(groups)
            )));
        };
        for (group_index, group) in groups.iter().enumerate() {
            let at = format!("hooks.{name}[{group_index}]");
            let Value::Object(group) = group else {
                return Err(SdkError::config(format!(
                    "{at} must be a {{ matcher, hooks }} group (got {})",
                    describe(group)
                )));
            };
            let matcher = match matcher(group, &at, event) {
                Ok(matcher) => matcher,
                Err(skip) if skip.skippable && unsupported == Unsupported::Skip => continue,
                Err(skip) => return Err(skip.error),
            };
            let entries = match group.get("hooks") {
                Some(Value::Array(entries)) => entries,
                other => {
                    return Err(SdkError::config(format!(
                        "{at}.hooks must be an array of hook entries (got {})",
                        describe(other.unwrap_or(&Value::Null))
                    )))
                }
            };
            for (index, entry) in entries.iter().enumerate() {
                let at = format!("{at}.hooks[{index}]");
                match hook_object(entry, &at, (event, matcher.as_deref()), project) {
                    Ok(object) => objects.push(object),
                    Err(skip) if skip.skippable && unsupported == Unsupported::Skip => {}
                    Err(skip) => return Err(skip.error),
                }
            }
        }
    }
    Ok(objects)
}

/// A refusal; `skippable` when the entry is valid Claude Code that cannot run here.
struct Refusal {
    error: SdkError,
    skippable: bool,
}

fn invalid(message: String) -> Refusal {
    Refusal {
        error: SdkError::config(message),
        skippable: false,
    }
}

fn cannot_run(message: String) -> Refusal {
    Refusal {
        error: SdkError::config(format!("{message}; pass {{ unsupported: 'skip' }} to leave it out")),
        skippable: true,
    }
}

/// A group's matcher as our regex: `*`, `""` or none match every tool; names and `A|B` lists
/// match exactly; anything else is a regex, as Claude Code reads it.
fn matcher(group: &Map<String, Value>, at: &str, event: HookEvent) -> std::result::Result<Option<String>, Refusal> {
    let pattern = match group.get("matcher") {
        None | Some(Value::Null) => return Ok(None),
        Some(Value::String(pattern)) => pattern.as_str(),
        Some(other) => {
            return Err(invalid(format!(
                "{at}.matcher must be a string (got {})",
                describe(other)
            )))
        }
    };
    if pattern.is_empty() || pattern == "*" {
        return Ok(None);
    }
    if !event.is_tool_event() {
        return Err(cannot_run(format!(
            "{at}.matcher \"{pattern}\" filters {} by something this runtime does not match on",
            event.name()
        )));
    }
    let names = pattern
        .split('|')
        .all(|name| !name.is_empty() && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'));
    let regex = if names {
        format!("^(?:{pattern})$")
    } else {
        pattern.to_string()
    };
    regex::Regex::new(&regex).map_err(|error| {
        invalid(format!(
            "{at}.matcher \"{pattern}\" is not a valid regular expression: {}",
            error.to_string().lines().last().unwrap_or_default().trim()
        ))
    })?;
    Ok(Some(regex))
}

fn hook_object(
    entry: &Value,
    at: &str,
    (event, matcher): (HookEvent, Option<&str>),
    project: Option<&str>,
) -> std::result::Result<Value, Refusal> {
    let Value::Object(entry) = entry else {
        return Err(invalid(format!(
            "{at} must be a hook entry {{ type, command }} (got {})",
            describe(entry)
        )));
    };
    let kind = match entry.get("type").and_then(Value::as_str) {
        Some(kind @ ("command" | "http")) => kind,
        Some(kind @ ("prompt" | "agent" | "mcp_tool")) => {
            return Err(cannot_run(format!(
                "{at} is a \"{kind}\" hook, which this runtime does not run"
            )))
        }
        _ => {
            return Err(invalid(format!(
                "{at}.type must be \"command\", \"http\", \"prompt\", \"agent\" or \"mcp_tool\" (got {})",
                describe(entry.get("type").unwrap_or(&Value::Null))
            )))
        }
    };
    if entry.get("async").is_some_and(|value| value != &Value::Bool(false)) {
        return Err(cannot_run(format!(
            "{at} is an async hook, which this runtime does not run"
        )));
    }
    if entry.contains_key("if") {
        return Err(cannot_run(format!(
            "{at} has an \"if\" permission rule, which this runtime does not read"
        )));
    }
    if let Some(shell) = entry.get("shell").filter(|shell| shell.as_str() != Some("bash")) {
        return Err(cannot_run(format!(
            "{at}.shell is {}; this runtime runs bash",
            describe(shell)
        )));
    }
    let known = if kind == "command" { COMMAND_KEYS } else { HTTP_KEYS };
    for key in entry.keys() {
        if !known.contains(&key.as_str()) && !COMMON_KEYS.contains(&key.as_str()) {
            let mut all: Vec<&str> = known.to_vec();
            all.extend(COMMON_KEYS);
            return Err(invalid(format!(
                "{at}.{key} is not a {kind} hook field (known: {})",
                all.join(", ")
            )));
        }
    }
    let timeout_ms = match entry.get("timeout") {
        None => None,
        Some(timeout) => {
            let seconds = timeout.as_f64().filter(|seconds| seconds.is_finite() && *seconds > 0.0);
            let Some(seconds) = seconds else {
                return Err(invalid(format!(
                    "{at}.timeout must be a positive number of seconds (got {})",
                    describe(timeout)
                )));
            };
            Some(((seconds * 1000.0).ceil() as u64).min(2_147_483_647))
        }
    };
    let mut config = Map::new();
    if kind == "command" {
        for key in ["command", "args"] {
            if let Some(value) = entry.get(key) {
                config.insert(key.into(), value.clone());
            }
        }
        if let Some(project) = project {
            config.insert("cwd".into(), json!(project));
        }
    } else {
        http_fields(entry, &mut config);
    }
    if let Some(timeout_ms) = timeout_ms {
        config.insert("timeoutMs".into(), json!(timeout_ms));
    }
    let config = Value::Object(config);
    let checked = if kind == "command" {
        CommandConfig::parse(&config, at).map(drop)
    } else {
        HttpConfig::parse(&config, at).map(drop)
    };
    checked.map_err(|error| invalid(error.message))?;
    let mut object = Map::new();
    object.insert("id".into(), json!(format!("claude:{at}")));
    object.insert("type".into(), json!(event.name()));
    if let Some(matcher) = matcher {
        object.insert("matcher".into(), json!(matcher));
    }
    object.insert(kind.into(), config);
    match entry.get("onFailure") {
        None => {}
        Some(value @ Value::String(policy)) if policy == "block" || policy == "continue" => {
            object.insert("onFailure".into(), value.clone());
        }
        Some(other) => {
            return Err(invalid(format!(
                "{at}.onFailure must be \"block\" or \"continue\" (got {})",
                describe(other)
            )))
        }
    }
    Ok(Value::Object(object))
}

/// An `http` entry's `url`, `headers` and `allowedEnvVars`, with Claude Code's `$NAME` written
/// as our `${NAME}` where `NAME` is allowed (elsewhere `$NAME` stays text, as there).
fn http_fields(entry: &Map<String, Value>, config: &mut Map<String, Value>) {
    for key in ["url", "allowedEnvVars"] {
        if let Some(value) = entry.get(key) {
            config.insert(key.into(), value.clone());
        }
    }
    let allowed: Vec<&str> = entry
        .get("allowedEnvVars")
        .and_then(Value::as_array)
        .map(|names| names.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    if let Some(headers) = entry.get("headers") {
        let headers = match headers {
            Value::Object(headers) => Value::Object(
                headers
                    .iter()
                    .map(|(name, value)| {
                        let value = match value {
                            Value::String(text) => Value::String(braced(text, &allowed)),
                            other => other.clone(),
                        };
                        (name.clone(), value)
                    })
                    .collect(),
            ),
            other => other.clone(),
        };
        config.insert("headers".into(), headers);
    }
}

/// `$NAME` → `${NAME}` for the allowed names.
fn braced(text: &str, allowed: &[&str]) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let name_len = after
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(after.len());
        let name = &after[..name_len];
        if !name.is_empty() && allowed.contains(&name) {
            out.push_str(&format!("${{{name}}}"));
        } else {
            out.push('$');
            out.push_str(name);
        }
        rest = &after[name_len..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn load_all(settings: Value) -> Result<Vec<Value>> {
        load(&settings, Unsupported::Error)
    }

    #[test]
    fn a_settings_file_becomes_hook_objects_in_file_order() {
        let hooks = load_all(json!({
            "permissions": {"allow": ["Bash(git *)"]},
            "hooks": {
                "PreToolUse": [
                    {"matcher": "Bash", "hooks": [{"type": "command", "command": "python3 -c 'pass'", "timeout": 5}]},
                    {"matcher": "Edit|Write|MultiEdit", "hooks": [{"type": "command", "command": "true", "onFailure": "continue"}]},
                    {"matcher": "mcp__memory__.*", "hooks": [{"type": "command", "command": "true"}]}
                ],
                "Stop": [{"hooks": [{"type": "command", "command": "true", "timeout": 0.5}]}],
                "PostToolUse": [{"matcher": "Write", "hooks": [{"type": "http", "url": "http://127.0.0.1:8080/hooks", "headers": {"Authorization": "Bearer $HOOK_TOKEN", "X-Price": "$5"}, "allowedEnvVars": ["HOOK_TOKEN"]}]}]
            }
        }))
        .unwrap();
        assert_eq!(
            hooks,
            vec![
                json!({"id": "claude:hooks.PreToolUse[0].hooks[0]", "type": "PreToolUse", "matcher": "^(?:Bash)$", "command": {"command": "python3 -c 'pass'", "timeoutMs": 5000}}),
                json!({"id": "claude:hooks.PreToolUse[1].hooks[0]", "type": "PreToolUse", "matcher": "^(?:Edit|Write|MultiEdit)$", "command": {"command": "true"}, "onFailure": "continue"}),
                json!({"id": "claude:hooks.PreToolUse[2].hooks[0]", "type": "PreToolUse", "matcher": "mcp__memory__.*", "command": {"command": "true"}}),
                json!({"id": "claude:hooks.Stop[0].hooks[0]", "type": "TaskCompleted", "command": {"command": "true", "timeoutMs": 500}}),
                json!({"id": "claude:hooks.PostToolUse[0].hooks[0]", "type": "PostToolUse", "matcher": "^(?:Write)$", "http": {"url": "http://127.0.0.1:8080/hooks", "allowedEnvVars": ["HOOK_TOKEN"], "headers": {"Authorization": "Bearer ${HOOK_TOKEN}", "X-Price": "$5"}}}),
            ]
        );
        assert_eq!(load_all(json!({"model": "x"})).unwrap(), Vec::<Value>::new());
    }

    #[test]
    fn bad_entries_are_named() {
        let cases = [
            (json!({"hooks": {"PreToolUse": [{"hooks": [{"type": "command", "command": "true", "timeout": 0}]}]}}), "hooks.PreToolUse[0].hooks[0].timeout must be a positive number of seconds (got 0)"),
            (json!({"hooks": {"PreToolUse": [{"hooks": [{"type": "command", "command": "true", "timeout": "5"}]}]}}), "hooks.PreToolUse[0].hooks[0].timeout must be a positive number of seconds (got \"5\")"),
            (json!({"hooks": {"PreTooluse": []}}), "hooks.PreTooluse is not a Claude Code hook event (events run here: PreToolUse, "),
            (json!({"hooks": {"PreToolUse": [{"matcher": "Bash(", "hooks": []}]}}), "hooks.PreToolUse[0].matcher \"Bash(\" is not a valid regular expression: "),
            (json!({"hooks": {"PreToolUse": [{"hooks": [{"type": "command", "command": "no-such-guard-program x"}]}]}}), "hooks.PreToolUse[0].hooks[0].command names a program that does not exist: \"no-such-guard-program\""),
            (json!({"hooks": {"PreToolUse": [{"hooks": [{"type": "shell", "command": "true"}]}]}}), "hooks.PreToolUse[0].hooks[0].type must be \"command\", \"http\", \"prompt\", \"agent\" or \"mcp_tool\" (got \"shell\")"),
            (json!({"hooks": {"PreToolUse": [{"hooks": [{"type": "prompt", "prompt": "ok?"}]}]}}), "hooks.PreToolUse[0].hooks[0] is a \"prompt\" hook, which this runtime does not run; pass { unsupported: 'skip' } to leave it out"),
            (json!({"hooks": {"Notification": [{"hooks": [{"type": "command", "command": "true"}]}]}}), "hooks.Notification is a Claude Code event this runtime does not fire; pass { unsupported: 'skip' } to leave its hooks out"),
            (json!({"hooks": {"SessionStart": [{"matcher": "startup", "hooks": [{"type": "command", "command": "true"}]}]}}), "hooks.SessionStart[0].matcher \"startup\" filters SessionStart by something this runtime does not match on; pass"),
            (json!({"hooks": []}), "hooks must be an object of events (got an array)"),
        ];
        for (settings, expected) in cases {
            let message = load_all(settings.clone()).unwrap_err().message;
            assert!(
                message.starts_with(expected),
                "for {settings}:\n  got      {message}\n  expected {expected}"
            );
        }
    }

    #[test]
    fn what_cannot_run_here_can_be_left_out_on_request() {
        let settings = json!({"hooks": {
            "Notification": [{"hooks": [{"type": "command", "command": "true"}]}],
            "PreToolUse": [{"hooks": [{"type": "prompt", "prompt": "ok?"}, {"type": "command", "command": "true", "async": true}, {"type": "command", "command": "true"}]}]
        }});
        let hooks = load(&settings, Unsupported::Skip).unwrap();
        assert_eq!(hooks.len(), 1);
        assert_eq!(hooks[0]["id"], "claude:hooks.PreToolUse[0].hooks[2]");
    }

    #[test]
    fn a_projects_settings_file_runs_its_commands_in_the_project() {
        let project = std::env::temp_dir().join(format!("claude-project-{}", std::process::id()));
        let hooks_dir = project.join(".claude").join("hooks");
        std::fs::create_dir_all(&hooks_dir).unwrap();
        std::fs::write(hooks_dir.join("guard.sh"), "exit 0\n").unwrap();
        let settings = project.join(".claude").join("settings.json");
        std::fs::write(
            &settings,
            r#"{"hooks": {"PreToolUse": [{"hooks": [{"type": "command", "command": ".claude/hooks/guard.sh"}]}]}}"#,
        )
        .unwrap();
        let hooks = load(&json!(settings.to_string_lossy()), Unsupported::Error).unwrap();
        assert_eq!(hooks[0]["command"]["cwd"], json!(project.to_string_lossy()));
        std::fs::remove_dir_all(project).unwrap();
    }

    #[test]
    fn a_file_that_is_not_there_or_not_json() {
        let missing = load(&json!("/no/such/settings.json"), Unsupported::Error).unwrap_err();
        assert!(missing
            .message
            .starts_with("Claude settings file \"/no/such/settings.json\" could not be read: "));
        let path = std::env::temp_dir().join(format!("claude-settings-{}.json", std::process::id()));
        std::fs::write(&path, "{ \"hooks\": ").unwrap();
        let broken = load(&json!(path.to_string_lossy()), Unsupported::Error).unwrap_err();
        assert!(broken.message.contains("is not JSON: "), "{}", broken.message);
        std::fs::remove_file(path).unwrap();
    }
}
