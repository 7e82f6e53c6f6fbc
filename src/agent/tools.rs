//! User tools: their definitions, calling `execute` through the host, and turning whatever it
//! returned into the text the model is sent.

use std::sync::Arc;

use serde::Serialize;
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use super::events::CallStatus;
use crate::builtins::Builtin;
use crate::hooks::dispatch::{Caller, Dispatcher, HookError};
use crate::hooks::pending::Owner;
use crate::host::{Args, Callable, GeneratorId, Host, HostCall, Reply, ScopeId, Step, ThrownId};
use crate::js_value::stringify;
use crate::model::ToolSchema;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ToolKind {
    Readonly,
    Write,
    Execute,
}

impl ToolKind {
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "readonly" => Some(ToolKind::Readonly),
            "write" => Some(ToolKind::Write),
            "execute" => Some(ToolKind::Execute),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ToolKind::Readonly => "readonly",
            ToolKind::Write => "write",
            ToolKind::Execute => "execute",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SideEffect {
    Pure,
    Idempotent,
    NonIdempotent,
}

impl SideEffect {
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "pure" => Some(SideEffect::Pure),
            "idempotent" => Some(SideEffect::Idempotent),
            "non_idempotent" => Some(SideEffect::NonIdempotent),
            _ => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            SideEffect::Pure => "pure",
            SideEffect::Idempotent => "idempotent",
            SideEffect::NonIdempotent => "non_idempotent",
        }
    }
}

#[derive(Debug, Clone)]
pub struct ToolSpec {
    pub schema: ToolSchema,
    pub kind: ToolKind,
    pub side_effect: SideEffect,
    pub execute: Runner,
}

impl ToolSpec {
    /// A built-in tool, as the model is offered it.
    pub fn builtin(tool: Builtin) -> Self {
        ToolSpec {
            schema: ToolSchema {
                name: tool.name().to_string(),
                description: Some(tool.description().to_string()),
                parameters: Arc::new(tool.schema()),
            },
            kind: ToolKind::parse(tool.kind()).unwrap_or(ToolKind::Execute),
            side_effect: SideEffect::parse(tool.side_effect()).unwrap_or(SideEffect::NonIdempotent),
            execute: Runner::Builtin(tool),
        }
    }
}

/// What runs a tool's calls.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Runner {
    /// The user's `execute`.
    Js(Callable),
    /// `Task`: a sub-agent runs it (`pipeline.rs`).
    Task,
    /// An MCP server's tool: its index in the agent's `mcp::Servers::tools`.
    Mcp(usize),
    /// One of the built-in tools (`src/builtins`), run in Rust.
    Builtin(Builtin),
}

/// Where a call stands: its status, the text the model is sent, and (for a failure) what
/// failed, so PostToolUseFailure hooks can be given an `Error`.
#[derive(Debug, Clone, PartialEq)]
pub struct CallResult {
    pub status: CallStatus,
    pub output: String,
    pub failure: Option<Failure>,
    /// `hook_denied` or `hook_control_error` when a result control blocked the call.
    pub classification: Option<&'static str>,
    /// The result came from a PreToolUse `mock()`.
    pub mocked: bool,
    /// `ToolResult.display`: shown in `tool_result`, never sent to the model.
    pub display: Option<Value>,
    /// A post hook's `continue: false`: the run ends after this turn with this text.
    pub stops_run: Option<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub struct Failure {
    pub message: String,
    /// The thrown value's handle, when a user function threw.
    pub thrown: Option<ThrownId>,
}

impl CallResult {
    pub fn success(output: impl Into<String>) -> Self {
        CallResult {
            status: CallStatus::Success,
            output: output.into(),
            failure: None,
            classification: None,
            mocked: false,
            display: None,
            stops_run: None,
        }
    }

    /// `Tool execution failed: <message>`.
    pub fn failed(message: impl Into<String>, thrown: Option<ThrownId>) -> Self {
        let message = message.into();
        CallResult {
            output: format!("Tool execution failed: {message}"),
            ..Self::failure(message, thrown)
        }
    }

    /// `toolTimeoutMs` passed before a tool that runs outside JS (an MCP server's, a built-in)
    /// answered; the same text a JS tool's deadline gives (`hooks/dispatch.rs`).
    pub fn timed_out(timeout_ms: u32) -> Self {
        Self::failed(format!("Tool execution timeout after {timeout_ms}ms"), None)
    }

    /// `Tool execution aborted: <message>` (a hook or the permission policy stopped it).
    pub fn aborted(message: impl Into<String>) -> Self {
        let message = message.into();
        CallResult {
            output: format!("Tool execution aborted: {message}"),
            ..Self::failure(message, None)
        }
    }

    /// A failed call whose output is exactly `output` (a control's denial, a failed mock).
    pub fn failed_as(output: impl Into<String>, classification: Option<&'static str>) -> Self {
        let output = output.into();
        CallResult {
            output: output.clone(),
            classification,
            ..Self::failure(output, None)
        }
    }

    fn failure(message: String, thrown: Option<ThrownId>) -> Self {
        CallResult {
            status: CallStatus::Error,
            output: String::new(),
            failure: Some(Failure { message, thrown }),
            classification: None,
            mocked: false,
            display: None,
            stops_run: None,
        }
    }

    pub fn is_success(&self) -> bool {
        self.status == CallStatus::Success
    }
}

/// What `execute` receives as its second argument (the host adds `signal`).
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolContext<'a> {
    pub tool_call_id: &'a str,
    pub session_id: &'a str,
    /// `defaultContext`'s `environment`, `metadata` and `capabilities`, when set.
    #[serde(flatten)]
    pub defaults: &'a Map<String, Value>,
}

/// A tool call that ended without a result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NoResult {
    /// The run was aborted before the tool could start; it did not run.
    NotStarted,
    /// `execute` returned `deferred()`: its result is published later (`completeToolCall`).
    Deferred,
}

/// New tool calls fail with this while a tool abandoned at its deadline or abort still runs.
pub const TOOL_CLEANING_UP: &str = "A tool execution is still cleaning up; refusing to start another tool";

/// Where a tool call runs: the host, the budget and cleanup bookkeeping, the caller's scope and
/// cancellation, and where its generator's yields go (`tool_progress`).
pub struct Execution<'a> {
    pub host: &'a Arc<dyn Host>,
    pub dispatcher: &'a Dispatcher,
    pub caller: Caller<'a>,
    pub timeout_ms: u32,
    pub progress: &'a (dyn Fn(Value) + Sync),
}

/// Runs `execute`, unless the run was aborted: this is the one place a tool starts, so an
/// abort made by synchronous code (a permission function, a sibling tool, a hook that never
/// yielded) is seen here even though nothing was awaited since. The run, which checks its
/// control as soon as the turn's calls return, then ends with the abort.
///
/// `execute` may return a value, a promise, or a generator (sync or async): a generator is
/// driven here, each yield published as progress, its return value the result; all of it
/// within `toolTimeoutMs`. A tool still running when its signal aborted is tracked until it
/// settles, and new tool calls fail closed meanwhile.
pub async fn execute(
    tool: &ToolSpec,
    input: &Map<String, Value>,
    context: ToolContext<'_>,
    run: Execution<'_>,
) -> Result<CallResult, NoResult> {
    if run.caller.cancel.is_some_and(CancellationToken::is_cancelled) {
        return Err(NoResult::NotStarted);
    }
    if run.dispatcher.pending().still_pending(Owner::Tool).await {
        return Ok(CallResult::failed(TOOL_CLEANING_UP, None));
    }
    let scope = run.caller.scope;
    let timeout = run.dispatcher.start_tool_timeout(run.timeout_ms);
    let Runner::Js(execute) = tool.execute else {
        return Ok(CallResult::failed(
            format!("Tool \"{}\" has no execute function", tool.schema.name),
            None,
        ));
    };
    let mut call = HostCall::new(execute, Args::of(&(input, &context)), scope);
    call.reply = Reply::Tool;
    // The tool's own signal: it aborts at the deadline or with the run. Not released when the
    // call returns: a generator goes on using it.
    call.signal = Some(timeout.signal_at(1, "signal", false, true));
    let what = || (Owner::Tool, format!("tool \"{}\"", tool.schema.name));
    let guarded = |future| run.dispatcher.call_guarded(future, &timeout, run.caller, what());
    let generator = match guarded(run.host.call(call)).await {
        Err(error) => return Ok(hook_failure(error)),
        Ok(reply) => match read_reply(reply) {
            Returned::Value(value) => return Ok(model_output(value)),
            Returned::Invalid(what) => return Ok(not_json(&what)),
            Returned::Deferred => return Err(NoResult::Deferred),
            Returned::Generator(generator) => generator,
        },
    };
    // Given up in any way but its own end (a timeout, an abort, the run dropped), the generator
    // is finished with `return()`, so its `finally` blocks run.
    let mut finish = Finish {
        host: run.host,
        scope,
        generator,
        armed: true,
    };
    loop {
        // A step that answers at once never waits: the deadline, the run's abort and the event
        // loop are looked at here, between steps.
        if let Err(error) = run.dispatcher.between_calls(&timeout, run.caller).await {
            return Ok(hook_failure(error));
        }
        let step = match guarded(run.host.step(scope, generator, Step::Next)).await {
            Err(HookError::Thrown(error)) => {
                // It threw: it is over, nothing is left to finish.
                finish.armed = false;
                return Ok(hook_failure(HookError::Thrown(error)));
            }
            Err(error) => return Ok(hook_failure(error)),
            Ok(step) => step.unwrap_or_default(),
        };
        let done = step.get("done").and_then(Value::as_bool).unwrap_or(true);
        finish.armed = !done;
        if let Some(what) = step.get("invalid").and_then(Value::as_str) {
            if !done {
                // Let its `finally` blocks run; the call has failed whatever they do.
                finish.armed = false;
                let _ = run.host.step(scope, generator, Step::Return).await;
            }
            return Ok(not_json(what));
        }
        if done && step.get("deferred").and_then(Value::as_bool) == Some(true) {
            return Err(NoResult::Deferred);
        }
        let value = step.get("value").cloned();
        if done {
            return Ok(model_output(value));
        }
        (run.progress)(value.unwrap_or(Value::Null));
    }
}

/// Finishes a generator given up before its end with `return()` when dropped armed.
struct Finish<'a> {
    host: &'a Arc<dyn Host>,
    scope: ScopeId,
    generator: GeneratorId,
    armed: bool,
}

impl Drop for Finish<'_> {
    fn drop(&mut self) {
        if self.armed {
            self.host.step_detached(self.scope, self.generator, Step::Return);
        }
    }
}

/// A tool's call failed before it returned: it threw, timed out, or the run was aborted.
fn hook_failure(error: HookError) -> CallResult {
    CallResult::failed(error.message(), error.thrown())
}

/// A value JSON would flatten to `{}` or drop: the call fails loudly instead.
fn not_json(what: &str) -> CallResult {
    CallResult::failed(
        format!("execute returned {what}, which cannot be sent to the model as JSON"),
        None,
    )
}

/// What a [`Reply::Tool`] call returned.
enum Returned {
    Value(Option<Value>),
    Invalid(String),
    Generator(GeneratorId),
    /// `deferred()`.
    Deferred,
}

fn read_reply(reply: Option<Value>) -> Returned {
    let Some(Value::Object(mut reply)) = reply else {
        return Returned::Value(None);
    };
    if let Some(generator) = reply.get("generator").and_then(Value::as_u64) {
        return Returned::Generator(GeneratorId(generator as u32));
    }
    if let Some(Value::String(what)) = reply.remove("invalid") {
        return Returned::Invalid(what);
    }
    if reply.get("deferred").and_then(Value::as_bool) == Some(true) {
        return Returned::Deferred;
    }
    Returned::Value(reply.remove("returned"))
}

/// Strings pass through; `{ status: 'success', model, display? }` and `{ status: 'error',
/// error: { message } }` are tool results; any other JSON is stringified as `JSON.stringify`
/// would.
pub fn model_output(returned: Option<Value>) -> CallResult {
    let Some(value) = returned else {
        // `undefined`: JSON.stringify has no text for it.
        return CallResult::success(String::new());
    };
    if let Some(result) = value.as_object() {
        match result.get("status").and_then(Value::as_str) {
            Some("success") if result.contains_key("model") => {
                return CallResult {
                    display: result.get("display").cloned(),
                    ..CallResult::success(stringify(&result["model"]))
                }
            }
            Some("error") if result.contains_key("error") || result.contains_key("model") => {
                let message = match result.get("error").and_then(|error| error.get("message")) {
                    Some(Value::String(message)) => message.clone(),
                    _ => result
                        .get("model")
                        .map_or_else(|| "the tool reported an error".into(), stringify),
                };
                return CallResult {
                    display: result.get("display").cloned(),
                    ..CallResult::failed(message, None)
                };
            }
            _ => {}
        }
    }
    CallResult::success(stringify(&value))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn outputs_become_model_text() {
        assert_eq!(model_output(Some(json!("plain"))), CallResult::success("plain"));
        assert_eq!(
            model_output(Some(json!({"b": 1, "a": [true, null]}))),
            CallResult::success("{\"b\":1,\"a\":[true,null]}")
        );
        assert_eq!(model_output(Some(json!(42))), CallResult::success("42"));
        assert_eq!(model_output(Some(Value::Null)), CallResult::success("null"));
        assert_eq!(model_output(None), CallResult::success(String::new()));
    }

    #[test]
    fn tool_results_are_unwrapped() {
        assert_eq!(
            model_output(Some(json!({"status": "success", "model": {"n": 1}}))),
            CallResult::success("{\"n\":1}")
        );
        assert_eq!(
            model_output(Some(json!({"status": "success", "model": "ok"}))),
            CallResult::success("ok")
        );
        assert_eq!(
            model_output(Some(json!({"status": "error", "error": {"message": "disk full"}}))),
            CallResult::failed("disk full", None)
        );
        // Not a tool result: no `model`, so it is plain JSON.
        assert_eq!(
            model_output(Some(json!({"status": "success"}))),
            CallResult::success("{\"status\":\"success\"}")
        );
    }
}
