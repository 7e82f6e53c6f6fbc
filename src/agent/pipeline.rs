//! One tool call, end to end: PreToolUse → PermissionRequest hooks → `advanced.permission` →
//! execute → PostToolUse / PostToolUseFailure. Every hook failure here becomes a failed call,
//! never a failed run.

use serde_json::{json, Map, Value};

use super::events::ToolCallRecord;
use super::permission::{self, Decision, Permission};
use super::session::Session;
use super::tools::{self, CallResult, ToolContext, ToolSpec};
use crate::hooks::apply::{self, PostVerdict, PreVerdict};
use crate::hooks::dispatch::{Caller, HookError, Timeout};
use crate::hooks::pending::Owner;
use crate::hooks::HookEvent;
use crate::host::{DispatchSignal, ErrorSlot, HostCall, SignalSlot};
use crate::model::ToolCallRequest;

/// The part of the run a tool call needs.
pub(crate) struct CallSite<'a> {
    pub session: &'a Session,
    pub caller: Caller<'a>,
    /// Counts model turns from 0.
    pub step_index: u32,
}

/// What became of one call; `interrupt` ends the run after this turn.
pub(crate) struct Finished {
    pub record: ToolCallRecord,
    pub interrupt: Option<String>,
}

pub(crate) async fn run(
    site: &CallSite<'_>,
    call: &ToolCallRequest,
    input: Result<Map<String, Value>, String>,
) -> Finished {
    let session = site.session;
    let tool = session.config.tools.iter().find(|tool| tool.schema.name == call.name);
    let (result, input, interrupt) = match (tool, input) {
        // Arguments that are not a JSON object: no hooks at all.
        (Some(_), Err(problem)) => (CallResult::failed(problem, None), Map::new(), None),
        (None, input) => {
            let input = input.unwrap_or_default();
            let result = CallResult::failed(format!("Tool \"{}\" not found", call.name), None);
            (post_hooks(site, call, &input, result).await, input, None)
        }
        (Some(tool), Ok(input)) => run_tool(site, tool, call, input).await,
    };
    Finished {
        record: ToolCallRecord {
            id: call.id.clone(),
            name: call.name.clone(),
            input: Value::Object(input),
            output: result.output,
            status: result.status,
            mocked: None,
        },
        interrupt,
    }
}

async fn run_tool(
    site: &CallSite<'_>,
    tool: &ToolSpec,
    call: &ToolCallRequest,
    mut input: Map<String, Value>,
) -> (CallResult, Map<String, Value>, Option<String>) {
    let session = site.session;
    let dispatcher = &session.dispatcher;
    let name = call.name.as_str();

    if dispatcher.has(HookEvent::PreToolUse) {
        let payload = json!({
            "event": "PreToolUse",
            "sessionId": session.id,
            "toolName": name,
            "toolInput": input,
            "toolCallId": call.id,
            "stepIndex": site.step_index,
        });
        let verdict = match dispatcher
            .dispatch(HookEvent::PreToolUse, payload, None, site.caller)
            .await
        {
            Ok(outputs) => apply::pre_tool_use(&outputs, &mut input, name),
            Err(error) => return finish_failed(site, call, input, &error).await,
        };
        match verdict {
            PreVerdict::Continue => {}
            PreVerdict::Skip(output) => {
                let result = post_hooks(site, call, &input, CallResult::success(output)).await;
                return (result, input, None);
            }
            PreVerdict::Abort(reason) => {
                let result = post_hooks(site, call, &input, CallResult::aborted(reason)).await;
                return (result, input, None);
            }
        }
    }

    let affected_paths = permission::affected_paths(&input);
    if dispatcher.has(HookEvent::PermissionRequest) {
        let payload = json!({
            "event": "PermissionRequest",
            "sessionId": session.id,
            "toolName": name,
            "toolInput": input,
            "toolKind": tool.kind.as_str(),
            "affectedPaths": affected_paths,
            "toolCallId": call.id,
        });
        let denial = match dispatcher
            .dispatch(HookEvent::PermissionRequest, payload, None, site.caller)
            .await
        {
            Ok(outputs) => apply::permission_request(&outputs, &mut input, name),
            Err(error) => return finish_failed(site, call, input, &error).await,
        };
        if let Some(denial) = denial {
            let interrupt = denial.interrupt.then(|| denial.message.clone());
            let result = post_hooks(site, call, &input, CallResult::aborted(denial.message)).await;
            return (result, input, interrupt);
        }
    }

    if let Some(permission) = session.config.permission {
        match decide(site, tool, call, &input, &affected_paths, permission).await {
            Decision::Allow { updated_input } => {
                for (key, value) in updated_input.unwrap_or_default() {
                    input.insert(key, value);
                }
            }
            Decision::Deny { message, interrupt } => {
                let interrupt = interrupt.then(|| message.clone());
                let result = post_hooks(site, call, &input, CallResult::aborted(message)).await;
                return (result, input, interrupt);
            }
            Decision::Ask => {
                // Until human intervention exists, asking denies (fail closed).
                let result = CallResult::aborted(format!("Tool \"{name}\" requires approval"));
                let result = post_hooks(site, call, &input, result).await;
                return (result, input, None);
            }
        }
    }

    let context = ToolContext {
        tool_call_id: &call.id,
        session_id: &session.id,
        scope: site.caller.scope,
    };
    let result = tools::execute(&session.host, tool, input.clone(), context).await;
    (post_hooks(site, call, &input, result).await, input, None)
}

/// A tool hook failed: the call fails with its message, then PostToolUseFailure runs.
async fn finish_failed(
    site: &CallSite<'_>,
    call: &ToolCallRequest,
    input: Map<String, Value>,
    error: &HookError,
) -> (CallResult, Map<String, Value>, Option<String>) {
    let result = CallResult::failed(error.message(), error.thrown());
    (post_failure_hooks(site, call, &input, result).await, input, None)
}

/// The permission decision: a preset's, or the function's under `hookTimeoutMs`. A function
/// that throws, times out or answers nonsense denies.
async fn decide(
    site: &CallSite<'_>,
    tool: &ToolSpec,
    call: &ToolCallRequest,
    input: &Map<String, Value>,
    affected_paths: &[String],
    permission: Permission,
) -> Decision {
    let function = match permission {
        Permission::Preset(preset) => return preset.decide(tool.kind),
        Permission::Function(function) => function,
    };
    let denied = |message: String| Decision::Deny {
        message: format!("Permission check failed: {message}"),
        interrupt: false,
    };
    let dispatcher = &site.session.dispatcher;
    if dispatcher.pending().count(Owner::Permission) > 0 {
        return denied("A permission callback is still cleaning up".into());
    }
    let request = json!({
        "toolName": call.name,
        "input": input,
        "kind": tool.kind.as_str(),
        "affectedPaths": affected_paths,
        "sessionId": site.session.id,
        "toolCallId": call.id,
    });
    let dispatch = dispatcher.next_dispatch_id();
    let mut host_call = HostCall::new(function, vec![request], site.caller.scope);
    host_call.signal = Some(SignalSlot {
        arg: 0,
        key: "signal",
        dispatch: Some(DispatchSignal {
            id: dispatch,
            last: true,
            linked: site.caller.cancel.is_some(),
        }),
    });
    let timeout = Timeout::starting_now(
        HookEvent::PermissionRequest.name(),
        dispatcher.hook_timeout_ms(),
        dispatch,
    );
    match dispatcher
        .call_guarded(host_call, &timeout, site.caller, Owner::Permission)
        .await
    {
        Ok(returned) => permission::parse_decision(returned.as_ref()).unwrap_or_else(denied),
        Err(error) => denied(error.message()),
    }
}

/// PostToolUse for a successful result, PostToolUseFailure for a failed one. A PostToolUse that
/// fails turns the call into a failure that PostToolUseFailure then sees.
async fn post_hooks(
    site: &CallSite<'_>,
    call: &ToolCallRequest,
    input: &Map<String, Value>,
    result: CallResult,
) -> CallResult {
    if !result.is_success() {
        return post_failure_hooks(site, call, input, result).await;
    }
    let dispatcher = &site.session.dispatcher;
    if !dispatcher.has(HookEvent::PostToolUse) {
        return result;
    }
    let payload = post_payload(site, "PostToolUse", call, input, &result);
    match dispatcher
        .dispatch(HookEvent::PostToolUse, payload, None, site.caller)
        .await
    {
        Ok(outputs) => match apply::post_tool_use(&outputs, &result.output, &call.name) {
            PostVerdict::Output(output) => CallResult { output, ..result },
            PostVerdict::Abort(reason) => CallResult::failed(reason, None),
        },
        Err(error) => {
            let failed = CallResult::failed(error.message(), error.thrown());
            post_failure_hooks(site, call, input, failed).await
        }
    }
}

/// PostToolUseFailure: may replace the output or abort; if it fails itself, the failure is
/// logged and the original result kept.
async fn post_failure_hooks(
    site: &CallSite<'_>,
    call: &ToolCallRequest,
    input: &Map<String, Value>,
    result: CallResult,
) -> CallResult {
    let dispatcher = &site.session.dispatcher;
    if !dispatcher.has(HookEvent::PostToolUseFailure) {
        return result;
    }
    let payload = post_payload(site, "PostToolUseFailure", call, input, &result);
    let error = result.failure.as_ref().map(|failure| ErrorSlot {
        arg: 0,
        key: "error",
        message: failure.message.clone(),
        thrown: failure.thrown,
    });
    match dispatcher
        .dispatch(HookEvent::PostToolUseFailure, payload, error, site.caller)
        .await
    {
        Ok(outputs) => match apply::post_tool_use(&outputs, &result.output, &call.name) {
            PostVerdict::Output(output) => CallResult { output, ..result },
            PostVerdict::Abort(reason) => CallResult::failed(reason, None),
        },
        Err(error) => {
            tracing::warn!(tool = %call.name, error = %error.message(), "PostToolUseFailure hook failed; keeping the original tool error");
            result
        }
    }
}

fn post_payload(
    site: &CallSite<'_>,
    event: &str,
    call: &ToolCallRequest,
    input: &Map<String, Value>,
    result: &CallResult,
) -> Value {
    json!({
        "event": event,
        "sessionId": site.session.id,
        "toolName": call.name,
        "toolInput": input,
        "toolOutput": result.output,
        "toolCallId": call.id,
        "mocked": false,
    })
}
