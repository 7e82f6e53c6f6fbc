//! How a command hook's process answered, read as Claude Code reads it: the exit code first
//! (0 decides by stdout, 2 blocks with stderr as the reason), then stdout's JSON. Pure: what
//! the process printed in, a verdict or the reason it failed out.

use serde_json::{Map, Value};

use crate::hook_event::HookEvent;
use crate::js_value::describe;

/// How the process ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Exit {
    Code(i32),
    Signal(i32),
}

/// A process that ran to its end, with what it printed (each stream capped).
#[derive(Debug, Clone, PartialEq)]
pub struct Finished {
    pub exit: Exit,
    pub stdout: String,
    pub stderr: String,
}

/// What the hook decided about the action it was asked about.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// Exit 2, `decision: 'block'` or `permissionDecision: 'deny'`: the reason the model reads.
    Block(Option<String>),
    /// `permissionDecision: 'allow'` (or the old `decision: 'approve'`): no permission ask.
    Allow,
    /// `permissionDecision: 'ask'`: a person confirms, whatever the permission policy says.
    Ask(Option<String>),
    /// PermissionRequest's `decision: { behavior: 'deny', message?, interrupt? }`.
    Deny { message: Option<String>, interrupt: bool },
}

/// Everything an answer said; absent parts are `None` / empty.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Verdict {
    pub decision: Option<Decision>,
    /// `updatedInput`: the tool's whole new input.
    pub updated_input: Option<Map<String, Value>>,
    /// `updatedToolOutput` (PostToolUse): the model-facing output instead of the tool's.
    pub updated_output: Option<Value>,
    /// `additionalContext` (and plain stdout where Claude Code reads it as context).
    pub context: Option<String>,
    /// `continue: false`: the run ends after this step, with `stopReason` as its content.
    pub stop: Option<String>,
}

/// Claude Code caps what reaches the model from one hook's `additionalContext`.
pub const MAX_CONTEXT_CHARS: usize = 10_000;

/// Reads `finished` as the answer to `event`. `Err` says why it is no answer: the process
/// failed (an exit code other than 0 and 2 without a JSON decision, a signal) or printed JSON
/// that does not parse or has the wrong shape.
pub fn read(event: HookEvent, finished: &Finished) -> Result<Verdict, String> {
    let stdout = finished.stdout.trim();
    let json = if stdout.starts_with('{') && stdout.ends_with('}') {
        let value: Value =
            serde_json::from_str(stdout).map_err(|error| format!("printed JSON that does not parse ({error})"))?;
        Some(value)
    } else {
        None
    };
    let stderr = Some(finished.stderr.trim().to_string()).filter(|text| !text.is_empty());
    match finished.exit {
        Exit::Code(2) => {
            // A blocking error: stderr is the reason; JSON cannot turn it into anything else.
            let json_reason = match &json {
                Some(Value::Object(object)) => blocking_reason(object),
                _ => None,
            };
            Ok(Verdict {
                decision: Some(Decision::Block(stderr.or(json_reason))),
                ..Verdict::default()
            })
        }
        Exit::Code(code) => {
            let verdict = match &json {
                Some(value) => from_json(event, value)?,
                None => Verdict {
                    context: plain_context(event, stdout),
                    ..Verdict::default()
                },
            };
            if code == 0 || verdict.decides() {
                Ok(verdict)
            } else {
                Err(match stderr {
                    Some(stderr) => format!("exited with code {code}: {}", first_line(&stderr)),
                    None => format!("exited with code {code}"),
                })
            }
        }
        Exit::Signal(signal) => Err(format!("was killed by signal {signal}")),
    }
}

impl Verdict {
    /// Whether the answer decides something (which lets an exit code other than 0 stand).
    fn decides(&self) -> bool {
        self.decision.is_some() || self.updated_input.is_some() || self.stop.is_some()
    }
}

/// The fields of Claude Code's JSON output this runtime acts on; the rest (`suppressOutput`,
/// `systemMessage`, `terminalSequence`) are accepted and have no effect here.
fn from_json(event: HookEvent, value: &Value) -> Result<Verdict, String> {
    let Value::Object(object) = value else {
        return Err(format!("printed {} instead of a JSON object", describe(value)));
    };
    let mut verdict = Verdict::default();
    match object.get("continue") {
        None | Some(Value::Bool(true)) => {}
        Some(Value::Bool(false)) => {
            verdict.stop = Some(text(object, "stopReason")?.unwrap_or_else(|| "Stopped by hook".into()));
        }
        Some(other) => return Err(wrong("continue", "a boolean", other)),
    }
    let reason = text(object, "reason")?;
    match object.get("decision") {
        None | Some(Value::Null) => {}
        Some(Value::String(decision)) if decision == "block" => verdict.decision = Some(Decision::Block(reason)),
        Some(Value::String(decision)) if decision == "approve" => verdict.decision = Some(Decision::Allow),
        // PermissionRequest's decision lives in `hookSpecificOutput`; a top-level object is not it.
        Some(other) => return Err(wrong("decision", "'block' or 'approve'", other)),
    }
    let specific = match object.get("hookSpecificOutput") {
        None | Some(Value::Null) => return Ok(verdict),
        Some(Value::Object(specific)) => specific,
        Some(other) => return Err(wrong("hookSpecificOutput", "an object", other)),
    };
    let reason = text(specific, "permissionDecisionReason")?;
    match specific.get("permissionDecision") {
        None | Some(Value::Null) => {}
        Some(Value::String(decision)) => match decision.as_str() {
            // Deny wins over anything else the answer says.
            "deny" => verdict.decision = Some(Decision::Block(reason)),
            "allow" if verdict.decision.is_none() => verdict.decision = Some(Decision::Allow),
            "ask" if !matches!(verdict.decision, Some(Decision::Block(_))) => {
                verdict.decision = Some(Decision::Ask(reason))
            }
            "allow" | "ask" | "defer" => {}
            _ => {
                return Err(wrong(
                    "hookSpecificOutput.permissionDecision",
                    "'allow', 'deny', 'ask' or 'defer'",
                    &Value::String(decision.clone()),
                ))
            }
        },
        Some(other) => {
            return Err(wrong(
                "hookSpecificOutput.permissionDecision",
                "'allow', 'deny', 'ask' or 'defer'",
                other,
            ))
        }
    }
    if event == HookEvent::PermissionRequest {
        if let Some(decision) = specific.get("decision").filter(|value| !value.is_null()) {
            permission_request_decision(decision, &mut verdict)?;
        }
    }
    match specific.get("updatedInput") {
        None | Some(Value::Null) => {}
        Some(Value::Object(input)) => verdict.updated_input = Some(input.clone()),
        Some(other) => return Err(wrong("hookSpecificOutput.updatedInput", "an object", other)),
    }
    if let Some(output) = specific
        .get("updatedToolOutput")
        .or_else(|| specific.get("updatedMCPToolOutput"))
    {
        verdict.updated_output = Some(output.clone());
    }
    if let Some(context) = text(specific, "additionalContext")? {
        verdict.context = Some(capped(context));
    }
    Ok(verdict)
}

/// `{ behavior: 'allow', updatedInput? } | { behavior: 'deny', message?, interrupt? }`.
fn permission_request_decision(decision: &Value, verdict: &mut Verdict) -> Result<(), String> {
    const FIELD: &str = "hookSpecificOutput.decision";
    let Value::Object(decision) = decision else {
        return Err(wrong(FIELD, "an object { behavior: 'allow' | 'deny' }", decision));
    };
    match decision.get("behavior").and_then(Value::as_str) {
        Some("allow") => {
            if let Some(Value::Object(input)) = decision.get("updatedInput") {
                verdict.updated_input = Some(input.clone());
            }
            verdict.decision.get_or_insert(Decision::Allow);
        }
        Some("deny") => {
            verdict.decision = Some(Decision::Deny {
                message: text(decision, "message")?,
                interrupt: decision.get("interrupt") == Some(&Value::Bool(true)),
            })
        }
        _ => {
            let behavior = decision.get("behavior").unwrap_or(&Value::Null);
            return Err(wrong(&format!("{FIELD}.behavior"), "'allow' or 'deny'", behavior));
        }
    }
    Ok(())
}

/// A blocking answer's own reason, read when exit 2 came with no stderr.
fn blocking_reason(object: &Map<String, Value>) -> Option<String> {
    let specific = object.get("hookSpecificOutput").and_then(Value::as_object);
    [
        object.get("reason"),
        specific.and_then(|specific| specific.get("permissionDecisionReason")),
    ]
    .into_iter()
    .flatten()
    .find_map(|value| value.as_str().filter(|text| !text.is_empty()).map(str::to_string))
}

/// Plain stdout on exit 0 is context where Claude Code reads it so; elsewhere it is log output.
fn plain_context(event: HookEvent, stdout: &str) -> Option<String> {
    let reads_plain = matches!(event, HookEvent::UserPromptSubmit | HookEvent::SessionStart);
    (reads_plain && !stdout.is_empty()).then(|| capped(stdout.to_string()))
}

fn text(object: &Map<String, Value>, key: &str) -> Result<Option<String>, String> {
    match object.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text.clone()).filter(|text| !text.is_empty())),
        Some(other) => Err(wrong(key, "a string", other)),
    }
}

fn wrong(field: &str, expected: &str, got: &Value) -> String {
    format!("answered {field} {}; expected {expected}", describe(got))
}

fn capped(mut text: String) -> String {
    if let Some((cut, _)) = text.char_indices().nth(MAX_CONTEXT_CHARS) {
        text.truncate(cut);
    }
    text
}

fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or(text).trim()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ran(code: i32, stdout: &str, stderr: &str) -> Finished {
        Finished {
            exit: Exit::Code(code),
            stdout: stdout.into(),
            stderr: stderr.into(),
        }
    }

    fn pre(code: i32, stdout: &str, stderr: &str) -> Result<Verdict, String> {
        read(HookEvent::PreToolUse, &ran(code, stdout, stderr))
    }

    fn decision(verdict: Result<Verdict, String>) -> Option<Decision> {
        verdict.unwrap().decision
    }

    #[test]
    fn exit_two_blocks_with_stderr_and_json_cannot_undo_it() {
        let allow = r#"{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"allow"}}"#;
        assert_eq!(
            decision(pre(2, allow, "• Use 'rg' instead of 'grep'\n")),
            Some(Decision::Block(Some("• Use 'rg' instead of 'grep'".into())))
        );
        assert_eq!(decision(pre(2, "", "")), Some(Decision::Block(None)));
        assert_eq!(
            decision(pre(2, r#"{"decision":"block","reason":"from json"}"#, "")),
            Some(Decision::Block(Some("from json".into())))
        );
    }

    #[test]
    fn exit_zero_decides_by_json_or_says_nothing() {
        assert_eq!(pre(0, "", "debug output"), Ok(Verdict::default()));
        assert_eq!(pre(0, "checked 3 rules", ""), Ok(Verdict::default()));
        assert_eq!(pre(0, "{}", ""), Ok(Verdict::default()));
        let deny = r#"{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"no rm"}}"#;
        assert_eq!(decision(pre(0, deny, "")), Some(Decision::Block(Some("no rm".into()))));
        let ask = r#"{"hookSpecificOutput":{"permissionDecision":"ask","permissionDecisionReason":"sure?"}}"#;
        assert_eq!(decision(pre(0, ask, "")), Some(Decision::Ask(Some("sure?".into()))));
        assert_eq!(
            decision(pre(0, r#"{"hookSpecificOutput":{"permissionDecision":"defer"}}"#, "")),
            None
        );
        assert_eq!(decision(pre(0, r#"{"decision":"approve"}"#, "")), Some(Decision::Allow));
        // deny > ask > allow within one answer.
        let mixed = r#"{"decision":"approve","hookSpecificOutput":{"permissionDecision":"deny"}}"#;
        assert_eq!(decision(pre(0, mixed, "")), Some(Decision::Block(None)));
        let rewrite = r#"{"hookSpecificOutput":{"permissionDecision":"allow","updatedInput":{"command":"rg x"},"additionalContext":"rewrote grep"}}"#;
        let verdict = pre(0, rewrite, "").unwrap();
        assert_eq!(
            verdict.updated_input,
            Some(json!({"command": "rg x"}).as_object().unwrap().clone())
        );
        assert_eq!(verdict.context.as_deref(), Some("rewrote grep"));
        let post = read(
            HookEvent::PostToolUse,
            &ran(
                0,
                r#"{"hookSpecificOutput":{"hookEventName":"PostToolUse","updatedToolOutput":"[redacted]"}}"#,
                "",
            ),
        )
        .unwrap();
        assert_eq!(post.updated_output, Some(json!("[redacted]")));
        let stop = pre(0, r#"{"continue":false,"stopReason":"budget spent"}"#, "").unwrap();
        assert_eq!(stop.stop.as_deref(), Some("budget spent"));
        assert_eq!(
            pre(0, r#"{"continue":false}"#, "").unwrap().stop.as_deref(),
            Some("Stopped by hook")
        );
    }

    #[test]
    fn plain_stdout_is_context_only_where_claude_code_reads_it() {
        let prompt = read(HookEvent::UserPromptSubmit, &ran(0, "Today is Tuesday.\n", "")).unwrap();
        assert_eq!(prompt.context.as_deref(), Some("Today is Tuesday."));
        let long = "x".repeat(MAX_CONTEXT_CHARS + 5);
        let capped = read(HookEvent::SessionStart, &ran(0, &long, "")).unwrap();
        assert_eq!(capped.context.unwrap().len(), MAX_CONTEXT_CHARS);
    }

    #[test]
    fn other_exits_fail_unless_json_decides() {
        assert_eq!(
            pre(1, "", "Traceback ...\nKeyError: 'x'"),
            Err("exited with code 1: Traceback ...".into())
        );
        assert_eq!(pre(127, "", ""), Err("exited with code 127".into()));
        assert_eq!(
            decision(pre(1, r#"{"decision":"block","reason":"r"}"#, "")),
            Some(Decision::Block(Some("r".into())))
        );
        let killed = Finished {
            exit: Exit::Signal(9),
            stdout: String::new(),
            stderr: String::new(),
        };
        assert_eq!(
            read(HookEvent::PreToolUse, &killed),
            Err("was killed by signal 9".into())
        );
    }

    #[test]
    fn broken_or_misshapen_json_is_no_answer() {
        assert!(pre(0, "{not json}", "")
            .unwrap_err()
            .starts_with("printed JSON that does not parse ("));
        assert_eq!(
            pre(0, r#"{"decision":"allow"}"#, ""),
            Err("answered decision \"allow\"; expected 'block' or 'approve'".into())
        );
        assert_eq!(
            pre(0, r#"{"continue":"no"}"#, ""),
            Err("answered continue \"no\"; expected a boolean".into())
        );
        assert_eq!(
            pre(0, r#"{"hookSpecificOutput":{"permissionDecision":"yes"}}"#, ""),
            Err(
                "answered hookSpecificOutput.permissionDecision \"yes\"; expected 'allow', 'deny', 'ask' or 'defer'"
                    .into()
            )
        );
        assert_eq!(
            pre(0, r#"{"hookSpecificOutput":{"updatedInput":"rg"}}"#, ""),
            Err("answered hookSpecificOutput.updatedInput \"rg\"; expected an object".into())
        );
    }

    #[test]
    fn permission_request_reads_its_decision_object() {
        let read_pr = |stdout: &str| read(HookEvent::PermissionRequest, &ran(0, stdout, ""));
        assert_eq!(
            read_pr(r#"{"hookSpecificOutput":{"hookEventName":"PermissionRequest","decision":{"behavior":"deny","message":"not here","interrupt":true}}}"#)
                .unwrap()
                .decision,
            Some(Decision::Deny { message: Some("not here".into()), interrupt: true })
        );
        let allow =
            read_pr(r#"{"hookSpecificOutput":{"decision":{"behavior":"allow","updatedInput":{"path":"/tmp/x"}}}}"#)
                .unwrap();
        assert_eq!(allow.decision, Some(Decision::Allow));
        assert_eq!(
            allow.updated_input,
            Some(json!({"path": "/tmp/x"}).as_object().unwrap().clone())
        );
        assert_eq!(
            read_pr(r#"{"hookSpecificOutput":{"decision":{"behavior":"maybe"}}}"#),
            Err("answered hookSpecificOutput.decision.behavior \"maybe\"; expected 'allow' or 'deny'".into())
        );
    }
}
