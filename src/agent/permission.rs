//! `advanced.permission`: a preset or a function deciding whether a tool call may run.

use serde_json::{Map, Value};

use super::tools::ToolKind;
use crate::error::{Result, SdkError};
use crate::host::Callable;
use crate::js_value::{callable, describe, js_marker};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Preset {
    /// Readonly tools run; the rest ask.
    Default,
    /// Readonly and write tools run; execute tools ask.
    AcceptEdits,
    /// Everything runs.
    BypassPermissions,
    /// Readonly tools run; the rest are denied.
    Plan,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Permission {
    Preset(Preset),
    /// `advanced.permission` or Blade's `permissionHandler`: called with the request object.
    Function(Callable),
    /// Blade's `canUseTool(toolName, input, { toolKind, sideEffect, affectedPaths, signal })`.
    CanUseTool(Callable),
    /// `permissionMode: 'plan'` beside a handler: calls that are not read-only are denied first.
    PlanThen(Callable, Form),
    /// Plan mode the model entered (EnterPlanMode) over this preset, or over no permission at
    /// all: leaving it (ExitPlanMode) goes back there.
    PlanOver(Option<Preset>),
}

/// How a permission function is called.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Form {
    /// `(request)`.
    Request,
    /// `(toolName, input, options)`.
    CanUseTool,
}

impl Permission {
    /// Reads `advanced.permission`: a preset's name or a function.
    pub fn parse(value: &Value) -> Result<Self> {
        if let Some(function) = callable(value) {
            return Ok(Permission::Function(function));
        }
        match value.as_str() {
            Some("default") => Ok(Permission::Preset(Preset::Default)),
            Some("accept-edits") => Ok(Permission::Preset(Preset::AcceptEdits)),
            Some("bypass-permissions") => Ok(Permission::Preset(Preset::BypassPermissions)),
            Some("plan") => Ok(Permission::Preset(Preset::Plan)),
            _ => Err(SdkError::config(format!(
                "advanced.permission must be 'default', 'accept-edits', 'bypass-permissions', 'plan' or a function (got {})",
                describe(value)
            )).at("advanced.permission")),
        }
    }

    /// `setPermissionMode(mode)`: Blade's `PermissionMode` values (`default`, `autoEdit`,
    /// `yolo`, `plan`) or our preset names.
    pub fn mode(mode: &str) -> Option<Self> {
        let preset = match mode {
            "default" => Preset::Default,
            "autoEdit" | "accept-edits" => Preset::AcceptEdits,
            "yolo" | "bypass-permissions" => Preset::BypassPermissions,
            "plan" => Preset::Plan,
            _ => return None,
        };
        Some(Permission::Preset(preset))
    }

    /// The function that decides, and how it is called; a preset alone has none. `PlanThen`
    /// answers a call that is not read-only itself.
    pub fn handler(self, kind: ToolKind) -> std::result::Result<(Callable, Form), Decision> {
        match self {
            Permission::Preset(preset) => Err(preset.decide(kind)),
            Permission::Function(function) => Ok((function, Form::Request)),
            Permission::CanUseTool(function) => Ok((function, Form::CanUseTool)),
            Permission::PlanThen(function, form) => match Preset::Plan.decide(kind) {
                Decision::Allow { .. } => Ok((function, form)),
                denied => Err(denied),
            },
            Permission::PlanOver(_) => Err(Preset::Plan.decide(kind)),
        }
    }

    /// Plan mode entered over `current`: a handler keeps deciding the read-only calls, and
    /// leaving goes back to what was in force.
    pub fn entering_plan(current: Option<Permission>) -> Permission {
        match current {
            None => Permission::PlanOver(None),
            Some(Permission::Preset(Preset::Plan)) => Permission::Preset(Preset::Plan),
            Some(Permission::Preset(preset)) => Permission::PlanOver(Some(preset)),
            Some(Permission::Function(function)) => Permission::PlanThen(function, Form::Request),
            Some(Permission::CanUseTool(function)) => Permission::PlanThen(function, Form::CanUseTool),
            Some(planning @ (Permission::PlanThen(..) | Permission::PlanOver(_))) => planning,
        }
    }

    /// Plan mode left: into `target` (one of [`Permission::mode`]'s names) when given — a
    /// handler the session has keeps deciding, as beside `permissionMode` — else back to what
    /// was in force before plan mode; a session that started in plan mode goes to `'default'`.
    /// Outside plan mode only a `target` changes anything.
    pub fn leaving_plan(current: Option<Permission>, target: Option<&str>) -> Option<Permission> {
        let before = match current {
            Some(Permission::PlanOver(before)) => before.map(Permission::Preset),
            Some(Permission::PlanThen(function, Form::Request)) => Some(Permission::Function(function)),
            Some(Permission::PlanThen(function, Form::CanUseTool)) => Some(Permission::CanUseTool(function)),
            Some(Permission::Preset(Preset::Plan)) => Some(Permission::Preset(Preset::Default)),
            other => other,
        };
        match (target.and_then(Permission::mode), before) {
            (None, before) => before,
            (Some(Permission::Preset(Preset::Plan)), before) => Some(Permission::entering_plan(before)),
            (Some(_), Some(handler @ (Permission::Function(_) | Permission::CanUseTool(_)))) => Some(handler),
            (Some(mode), _) => Some(mode),
        }
    }
}

pub const DENIED_BY_POLICY: &str = "Denied by permission policy";
/// Blade's text, word for word.
pub const PLAN_MODE_DENIAL: &str =
    "Plan mode: modification tools are blocked; only read-only tools are allowed (Read/Glob/Grep/WebFetch/WebSearch/Task)";

#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    Allow {
        updated_input: Option<Map<String, Value>>,
    },
    Deny {
        message: String,
        interrupt: bool,
    },
    /// A person decides: the confirmation handler, told `message` when the policy gave one.
    Ask {
        message: Option<String>,
    },
}

impl Preset {
    pub fn decide(self, kind: ToolKind) -> Decision {
        let allow = Decision::Allow { updated_input: None };
        match (self, kind) {
            (Preset::BypassPermissions, _) | (_, ToolKind::Readonly) | (Preset::AcceptEdits, ToolKind::Write) => allow,
            (Preset::Plan, _) => Decision::Deny {
                message: PLAN_MODE_DENIAL.into(),
                interrupt: false,
            },
            (Preset::Default | Preset::AcceptEdits, _) => Decision::Ask { message: None },
        }
    }
}

/// Reads what a permission function returned: `'allow' | 'deny' | 'ask'` or
/// `{ behavior: 'allow', updatedInput? } | { behavior: 'deny', message?, interrupt? } | { behavior: 'ask', message? }`.
pub fn parse_decision(returned: Option<&Value>) -> std::result::Result<Decision, String> {
    let expected = "expected 'allow', 'deny', 'ask' or { behavior, … }";
    let Some(value) = returned else {
        return Err(format!("the permission function returned undefined; {expected}"));
    };
    let (behavior, object) = match value {
        Value::String(text) => (text.as_str(), None),
        marked if js_marker(marked).is_some() => {
            return Err(format!(
                "the permission function returned {}; {expected}",
                describe(marked)
            ))
        }
        Value::Object(object) => match object.get("behavior") {
            Some(Value::String(text)) => (text.as_str(), Some(object)),
            _ => {
                return Err(format!(
                    "the permission function returned an object without a behavior; {expected}"
                ))
            }
        },
        other => {
            return Err(format!(
                "the permission function returned {}; {expected}",
                describe(other)
            ))
        }
    };
    match behavior {
        "allow" => {
            let updated_input = match object.and_then(|object| object.get("updatedInput")) {
                None | Some(Value::Null) => None,
                Some(Value::Object(input)) => Some(input.clone()),
                Some(other) => {
                    return Err(format!(
                        "the permission function returned an updatedInput that is {}; it must be an object",
                        describe(other)
                    ))
                }
            };
            Ok(Decision::Allow { updated_input })
        }
        "deny" => {
            let message = object
                .and_then(|object| object.get("message"))
                .and_then(Value::as_str)
                .filter(|message| !message.is_empty())
                .unwrap_or(DENIED_BY_POLICY)
                .to_string();
            let interrupt = object
                .and_then(|object| object.get("interrupt"))
                .and_then(Value::as_bool)
                .unwrap_or(false);
            Ok(Decision::Deny { message, interrupt })
        }
        "ask" => Ok(Decision::Ask {
            message: object
                .and_then(|object| object.get("message"))
                .and_then(Value::as_str)
                .filter(|message| !message.is_empty())
                .map(str::to_string),
        }),
        other => Err(format!(
            "the permission function returned the behavior \"{other}\"; {expected}"
        )),
    }
}

/// The paths a call would touch, read from its input: `path`, `file`, `directory`, keys ending
/// in `_path` or `Path` (strings), and `paths` / `files` (arrays of strings).
pub fn affected_paths(input: &Map<String, Value>) -> Vec<String> {
    let mut paths = Vec::new();
    for (key, value) in input {
        let single =
            matches!(key.as_str(), "path" | "file" | "directory") || key.ends_with("_path") || key.ends_with("Path");
        let many = matches!(key.as_str(), "paths" | "files");
        match value {
            Value::String(path) if single => paths.push(path.clone()),
            Value::Array(items) if many => paths.extend(items.iter().filter_map(Value::as_str).map(str::to_string)),
            _ => {}
        }
    }
    paths
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn presets_decide_by_tool_kind() {
        use ToolKind::*;
        let allow = Decision::Allow { updated_input: None };
        assert_eq!(Preset::Default.decide(Readonly), allow);
        assert_eq!(Preset::Default.decide(Write), Decision::Ask { message: None });
        assert_eq!(Preset::AcceptEdits.decide(Write), allow);
        assert_eq!(Preset::AcceptEdits.decide(Execute), Decision::Ask { message: None });
        assert_eq!(Preset::Plan.decide(Readonly), allow);
        assert_eq!(
            Preset::Plan.decide(Execute),
            Decision::Deny {
                message: PLAN_MODE_DENIAL.into(),
                interrupt: false
            }
        );
        assert_eq!(Preset::BypassPermissions.decide(Execute), allow);
    }

    #[test]
    fn plan_mode_entered_and_left_goes_back_to_what_was_in_force() {
        let preset = |preset: Preset| Some(Permission::Preset(preset));
        let cycle = |start: Option<Permission>| Permission::leaving_plan(Some(Permission::entering_plan(start)), None);
        for start in [
            None,
            preset(Preset::Default),
            preset(Preset::BypassPermissions),
            Some(Permission::Function(Callable(3))),
            Some(Permission::CanUseTool(Callable(4))),
        ] {
            assert_eq!(cycle(start), start, "{start:?}");
            let planning = Permission::entering_plan(start);
            assert_eq!(
                planning.handler(ToolKind::Write).unwrap_err(),
                Preset::Plan.decide(ToolKind::Write)
            );
            // Entering twice is entering once.
            assert_eq!(Permission::entering_plan(Some(planning)), planning);
        }
        assert_eq!(
            Permission::entering_plan(Some(Permission::Function(Callable(3)))).handler(ToolKind::Readonly),
            Ok((Callable(3), Form::Request))
        );
        // A session that started in plan mode leaves into Blade's default.
        assert_eq!(
            Permission::leaving_plan(preset(Preset::Plan), None),
            preset(Preset::Default)
        );
        assert_eq!(
            Permission::leaving_plan(Some(Permission::PlanOver(None)), Some("autoEdit")),
            preset(Preset::AcceptEdits)
        );
        assert_eq!(
            Permission::leaving_plan(Some(Permission::PlanThen(Callable(3), Form::CanUseTool)), Some("yolo")),
            Some(Permission::CanUseTool(Callable(3)))
        );
        // A target that names no mode is not one: back to what was in force.
        assert_eq!(
            Permission::leaving_plan(Some(Permission::PlanOver(None)), Some("nonsense")),
            None
        );
        // Outside plan mode nothing changes without a target.
        assert_eq!(Permission::leaving_plan(None, None), None);
        assert_eq!(
            Permission::leaving_plan(preset(Preset::AcceptEdits), None),
            preset(Preset::AcceptEdits)
        );
    }

    #[test]
    fn decisions_are_read_in_both_forms() {
        assert_eq!(
            parse_decision(Some(&json!("allow"))),
            Ok(Decision::Allow { updated_input: None })
        );
        assert_eq!(
            parse_decision(Some(&json!("deny"))),
            Ok(Decision::Deny {
                message: DENIED_BY_POLICY.into(),
                interrupt: false
            })
        );
        assert_eq!(parse_decision(Some(&json!("ask"))), Ok(Decision::Ask { message: None }));
        assert_eq!(
            parse_decision(Some(&json!({"behavior": "allow", "updatedInput": {"a": 1}}))),
            Ok(Decision::Allow {
                updated_input: Some(json!({"a": 1}).as_object().unwrap().clone())
            })
        );
        assert_eq!(
            parse_decision(Some(&json!({"behavior": "deny", "message": "no", "interrupt": true}))),
            Ok(Decision::Deny {
                message: "no".into(),
                interrupt: true
            })
        );
        assert_eq!(
            parse_decision(Some(&json!(42))).unwrap_err(),
            "the permission function returned 42; expected 'allow', 'deny', 'ask' or { behavior, … }"
        );
        assert_eq!(
            parse_decision(Some(&json!({"behavior": "maybe"}))).unwrap_err(),
            "the permission function returned the behavior \"maybe\"; expected 'allow', 'deny', 'ask' or { behavior, … }"
        );
        assert!(parse_decision(None)
            .unwrap_err()
            .starts_with("the permission function returned undefined"));
    }

    #[test]
    fn affected_paths_come_from_path_like_keys() {
        let input = json!({"file_path": "a.ts", "path": "b", "paths": ["c", 1, "d"], "content": "x", "outPath": "e", "count": 2});
        assert_eq!(affected_paths(input.as_object().unwrap()), ["a.ts", "b", "c", "d", "e"]);
    }
}
