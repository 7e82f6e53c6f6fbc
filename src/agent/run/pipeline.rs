//! One tool call, end to end: PreToolUse (callbacks, handlers, `mock()`) → PermissionRequest
//! hooks → `advanced.permission` → before-controls on the final input → execute (unless
//! mocked) → after-controls → PostToolUse / PostToolUseFailure. Hook failures here become
//! failed calls, never a failed run.

use serde_json::{Map, Value};

use crate::agent::approvals::{self, PausedCall, PausedChild};
use crate::agent::confirm::{Answer, BuiltinQuestion, Confirmation, ConfirmationRequest, Remembered};
use crate::agent::definition::Agent;
use crate::agent::durable::Durable;
use crate::agent::events::{JsonText, PendingReason, StreamEvent, ToolCallRecord, ToolProgressEvent};
use crate::agent::payloads::{CallOf, CanUseToolOptions, PermissionAsk, ToolEvent};
use crate::agent::permission::{self, Decision, Form, Permission};
use crate::agent::plan_mode::RunPermission;
use crate::agent::post_call::{blocked, Failures, PostCall};
use crate::agent::reader::EventSender;
use crate::agent::settings::RunSettings;
use crate::agent::subagents;
use crate::agent::subagents::delegate::{Children, Delegated, Delegation};
use crate::agent::tools::{self, CallResult, Execution, NoResult, Runner, ToolContext, ToolSpec};
use crate::builtins::{self, Builtin, Workspace};
use crate::hooks::apply::{self, PreVerdict};
use crate::hooks::control;
use crate::hooks::dispatch::{Caller, EventInput, HookError};
use crate::hooks::pending::Owner;
use crate::hooks::PermissionHint;
use crate::hooks::{EventFields, HookEvent};
use crate::host::{Args, ErrorSlot, HostCall};
use crate::js_value::describe;
use crate::mcp;
use crate::model::ToolCallRequest;
use crate::offload::offload;
use crate::store;
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;

use crate::model::Usage;

/// How long a built-in past its deadline has to stop (SIGTERM, then SIGKILL after 1 s).
const BUILTIN_WIND_DOWN: std::time::Duration = std::time::Duration::from_secs(3);

/// The part of the run a tool call needs.
pub(crate) struct CallSite<'a> {
    pub agent: &'a Arc<Agent>,
    /// What the session remembers of its confirmations.
    pub approvals: &'a Arc<Remembered>,
    /// The run's copy of the session's settings (model, default context, …).
    pub settings: &'a RunSettings,
    /// The permission this turn's calls are decided with: the run's when the turn began.
    pub permission: Option<Permission>,
    /// Where a built-in's plan-mode switch goes: the run's next turns, the session's next runs.
    pub switches: &'a RunPermission,
    pub caller: Caller<'a>,
    /// Counts model turns from 0.
    pub step_index: u32,
    /// One id per run.
    pub operation_id: &'a str,
    /// Where a generator tool's yields go (`tool_progress`).
    pub events: &'a EventSender,
    /// The session's store: the effects ledger, when it outlives the process.
    pub durable: &'a Durable,
    /// Where `Task` calls start their sub-agents.
    pub children: &'a dyn Children,
}

/// One call being handled: what it asked for and where it sits in its turn.
struct Call<'a> {
    site: &'a CallSite<'a>,
    request: &'a ToolCallRequest,
    index: usize,
    /// Tokens spent on the call's behalf: a `Task` call's sub-agent.
    spent: Mutex<Usage>,
}

/// What became of one call; `interrupt` ends the run after this turn.
pub(crate) struct Finished {
    pub record: ToolCallRecord,
    pub interrupt: Option<String>,
    /// Tokens a sub-agent used for this call (`Task`), counted in the run's usage.
    pub spent: Usage,
}

/// How a call left the pipeline: with a result, or paused for a person's decision.
pub(crate) enum Ended {
    Finished(Finished),
    Paused(PausedCall),
}

pub(crate) async fn run(
    site: &CallSite<'_>,
    request: &ToolCallRequest,
    index: usize,
    input: Result<Map<String, Value>, String>,
) -> Ended {
    let started = std::time::Instant::now();
    let call = Call {
        site,
        request,
        index,
        spent: Mutex::default(),
    };
    let (result, input, interrupt) = match (call.tool(), input) {
        // Arguments that are not a JSON object: no hooks at all.
        (Some(_), Err(problem)) => (CallResult::failed(problem, None), Map::new(), None),
        (None, input) => {
            let input = input.unwrap_or_default();
            (call.post_hooks(&input, call.not_found()).await, input, None)
        }
        (Some(tool), Ok(input)) => match call.run_tool(tool, input).await {
            Ok(outcome) => outcome,
            Err(paused) => return call.paused(paused),
        },
    };
    Ended::Finished(Finished {
        record: record(request, input, result, started),
        interrupt,
        spent: call.spent(),
    })
}

/// A call that stopped short of a result: it waits for a person (`ask`) or for its deferred
/// result (`deferred`).
struct Paused {
    input: Map<String, Value>,
    reason: PendingReason,
    /// A `Task` call's sub-agent that paused (`reason: subagent`).
    child: Option<Box<PausedChild>>,
}

impl Paused {
    fn on(input: Map<String, Value>, reason: PendingReason) -> Self {
        Paused {
            input,
            reason,
            child: None,
        }
    }
}

/// Goes on with a call a person decided about (§8.1): approved, it continues from where it
/// paused — before-controls on its final input, execute, after-controls, post hooks (PreToolUse
/// and the permission are not asked again); rejected, it fails with Blade's text, and a
/// rejection with `stop` ends the run with that text. An approval that does not hold
/// (`refusal`, from `approvals::approval_refusal`) runs nothing: the call fails, the model is told.
/// A `Task` call waiting for its paused sub-agent goes on with that sub-agent (§8.7).
pub(crate) async fn resume(
    site: &CallSite<'_>,
    request: &ToolCallRequest,
    paused: &PausedCall,
    refusal: Option<&str>,
) -> Ended {
    let started = std::time::Instant::now();
    let call = Call {
        site,
        request,
        index: paused.index,
        spent: Mutex::default(),
    };
    if let Some(child) = &paused.child {
        return match call.resume_delegation(paused, child.clone()).await {
            Ok((result, input, interrupt)) => Ended::Finished(Finished {
                record: record(request, input, result, started),
                interrupt,
                spent: call.spent(),
            }),
            Err(waiting) => call.paused(waiting),
        };
    }
    let decision = refusal.map_or(Ok(&paused.decision), Err);
    let (result, input, interrupt) = match (decision, call.tool()) {
        (Err(why), _) => {
            let refused = CallResult::aborted(format!("Approval refused: {why}"));
            let (result, input, _) = call.finish(paused.input.clone(), refused, None).await;
            (result, input, None)
        }
        (Ok(Some(approvals::Decision::Approve { updated_input, .. })), Some(tool)) => {
            let input = updated_input.clone().unwrap_or_else(|| paused.input.clone());
            match call.execute(tool, input).await {
                Ok(outcome) => outcome,
                Err(deferred) => return call.paused(deferred),
            }
        }
        (Ok(Some(approvals::Decision::Approve { .. })), None) => {
            let input = paused.input.clone();
            (call.post_hooks(&input, call.not_found()).await, input, None)
        }
        // No decision is never resumed; were it, it would be a rejection (fail closed).
        (Ok(Some(approvals::Decision::Reject { reason, stop })), _) => {
            call.rejected(paused, reason.as_deref(), *stop).await
        }
        (Ok(None), _) => call.rejected(paused, None, false).await,
    };
    Ended::Finished(Finished {
        record: record(request, input, result, started),
        interrupt,
        spent: call.spent(),
    })
}

type Outcome = (CallResult, Map<String, Value>, Option<String>);

/// A finished call as the run reports it.
fn record(
    request: &ToolCallRequest,
    input: Map<String, Value>,
    result: CallResult,
    started: std::time::Instant,
) -> ToolCallRecord {
    ToolCallRecord {
        id: request.id.clone(),
        name: request.name.clone(),
        input: JsonText::of(&input),
        is_error: !result.is_success(),
        output: result.output,
        duration: started.elapsed().as_millis() as u64,
        status: result.status,
        mocked: result.mocked.then_some(true),
        classification: result.classification.map(str::to_string),
        display: result.display,
    }
}

impl Call<'_> {
    fn spent(&self) -> Usage {
        *self.spent.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn name(&self) -> &str {
        &self.request.name
    }

    /// The call's key in the effects ledger: its id in the root, its id at its place inside a
    /// sub-agent (§8.7).
    fn ledger_key(&self) -> String {
        store::ledger_key(subagents::chain(self.site.settings.child.as_ref()), &self.request.id)
    }

    /// The `Task` call ids above the sub-agent this call starts.
    fn child_chain(&self) -> Vec<String> {
        let mut chain = subagents::chain(self.site.settings.child.as_ref()).to_vec();
        chain.push(self.request.id.clone());
        chain
    }

    fn paused(&self, paused: Paused) -> Ended {
        Ended::Paused(PausedCall {
            index: self.index,
            tool_call_id: self.request.id.clone(),
            tool_name: self.request.name.clone(),
            fingerprint: store::fingerprint(&self.request.name, &paused.input),
            input: paused.input,
            reason: paused.reason,
            decision: None,
            rerun: false,
            child: paused.child,
        })
    }

    /// The tool the model asked for, if this agent (or sub-agent) was offered it.
    fn tool(&self) -> Option<&ToolSpec> {
        if let Some(child) = &self.site.settings.child {
            if !child.offers(&self.request.name) {
                return None;
            }
        }
        let tools = self.site.agent.tools();
        tools.iter().find(|tool| tool.schema.name == self.request.name)
    }

    fn not_found(&self) -> CallResult {
        CallResult::failed(format!("Tool \"{}\" not found", self.request.name), None)
    }

    /// A rejected approval: `Tool execution aborted: User rejected execution: <reason>`; with
    /// `stop`, the run ends with that text.
    async fn rejected(&self, paused: &PausedCall, reason: Option<&str>, stop: bool) -> Outcome {
        let text = format!("User rejected execution: {}", reason.unwrap_or("User rejected"));
        let (result, input, _) = self.finish(paused.input.clone(), CallResult::aborted(text), None).await;
        let interrupt = stop.then(|| result.output.clone());
        (result, input, interrupt)
    }

    /// An MCP server's tool, within `toolTimeoutMs`, cancelled with the run.
    async fn call_mcp(&self, tool: &ToolSpec, input: &Map<String, Value>) -> Result<CallResult, NoResult> {
        let cancel = self.site.caller.cancel;
        if cancel.is_some_and(CancellationToken::is_cancelled) {
            return Err(NoResult::NotStarted);
        }
        let agent = self.site.agent;
        let Some((servers, mcp_tool)) = agent.mcp_tool(tool.execute) else {
            return Ok(self.not_found());
        };
        let timeout_ms = agent.config.tool_timeout_ms;
        Ok(match servers.call(mcp_tool, input, timeout_ms, cancel).await {
            mcp::Outcome::Done { text, failed: false } => CallResult::success(text),
            mcp::Outcome::Done { text, failed: true } => CallResult::failed(text, None),
            mcp::Outcome::Broken(message) => CallResult::failed(message, None),
            mcp::Outcome::TimedOut => CallResult::timed_out(timeout_ms),
            mcp::Outcome::Cancelled => CallResult::aborted("the run was aborted"),
        })
    }

    /// A built-in tool, in the run's workspace (`capabilities.filesystem` of its context). Its
    /// token is cancelled by the run's abort and at `toolTimeoutMs`; the tool then stops (a
    /// command's process group is killed) and says so in its own words. A tool that talks to
    /// the person runs on the run's task, with the confirmation handler to ask and
    /// `tool_progress` for its progress; the plan-mode switch it answers holds from the run's
    /// next turn on. `true` with the result: the run ends after this turn.
    async fn call_builtin(
        &self,
        tool: &ToolSpec,
        builtin: Builtin,
        input: &Map<String, Value>,
        progress: &(dyn Fn(Value) + Sync),
    ) -> Result<(CallResult, bool), NoResult> {
        let run = self.site.caller.cancel;
        if run.is_some_and(CancellationToken::is_cancelled) {
            return Err(NoResult::NotStarted);
        }
        let agent = self.site.agent;
        let workspace = Workspace::of_context(&self.site.settings.default_context);
        let cancel = run.map_or_else(CancellationToken::new, CancellationToken::child_token);
        let timeout_ms = agent.config.tool_timeout_ms;
        let deadline = tokio::time::sleep(std::time::Duration::from_millis(timeout_ms.into()));
        let answer = if builtin.talks() {
            let person = BuiltinQuestion {
                confirmation: Confirmation {
                    agent,
                    approvals: self.site.approvals,
                    caller: self.site.caller,
                },
                tool_name: self.name(),
                args: input,
                kind: tool.kind.as_str(),
            };
            let talk = builtins::Talk {
                person: &person,
                progress,
            };
            let call = builtins::Call {
                workspace: &workspace,
                state: &agent.builtins,
                cancel,
            };
            tokio::select! {
                answer = builtin.run_with(input, call, &talk) => answer,
                () = deadline => return Ok((CallResult::timed_out(timeout_ms), false)),
            }
        } else {
            let (state, input, token) = (agent.builtins.clone(), input.clone(), cancel.clone());
            // On the tokio workers, not the JS thread the run is polled on. Dropped (the run's
            // future dropped), the task is aborted and the tool's own drop kills what it started.
            let mut running = offload(async move {
                let call = builtins::Call {
                    workspace: &workspace,
                    state: &state,
                    cancel: token,
                };
                builtin.run(&input, call).await
            });
            let answer = tokio::select! {
                answer = &mut running => answer,
                () = deadline => {
                    cancel.cancel();
                    // The tool winds down (its processes killed) before the call fails.
                    let _ = tokio::time::timeout(BUILTIN_WIND_DOWN, running).await;
                    return Ok((CallResult::timed_out(timeout_ms), false));
                }
            };
            match answer {
                Ok(answer) => answer,
                Err(error) => {
                    return Ok((
                        CallResult::failed(format!("the built-in tool {} failed: {error}", builtin.name()), None),
                        false,
                    ))
                }
            }
        };
        if let Some(change) = answer.mode.as_deref() {
            self.site.switches.switch(change);
        }
        let mut result = if answer.failed {
            CallResult::failed_as(answer.text, None)
        } else {
            CallResult::success(answer.text)
        };
        result.display = answer.display;
        Ok((result, answer.stop))
    }

    /// The fields every tool event carries, in both vocabularies.
    fn fields<'b>(&'b self, event: HookEvent, input: &'b Map<String, Value>) -> ToolEvent<'b> {
        let name = self.name();
        let (agent_path, parent_tool_call_id) = subagents::lineage(self.site.settings.child.as_ref());
        let agent = self.site.agent;
        // An MCP tool is named by its server and its own name.
        let mcp = agent
            .tools()
            .iter()
            .find(|tool| tool.schema.name == name)
            .and_then(|tool| agent.mcp_tool(tool.execute));
        let call = CallOf {
            session_id: &agent.id,
            lineage: (agent_path, parent_tool_call_id),
            tool_name: name,
            tool_call_id: &self.request.id,
            step_index: self.site.step_index,
            call_index: self.index,
            operation_id: self.site.operation_id,
            mcp: mcp.map(|(servers, tool)| (servers.server_name(tool), tool.api_name.as_str())),
        };
        ToolEvent::new(event, call, input)
    }

    fn has(&self, event: HookEvent) -> bool {
        self.site
            .agent
            .dispatcher
            .has(event, Some(self.name()), self.site.caller.context)
    }

    fn input(&self, event: HookEvent, fields: &ToolEvent<'_>, error: Option<ErrorSlot>) -> EventInput<'_> {
        EventInput {
            event,
            payload: EventFields::of(fields),
            tool: Some(self.name()),
            error,
        }
    }

    /// The whole pipeline; `Err` with the call's input when it paused for a person.
    async fn run_tool(&self, tool: &ToolSpec, mut input: Map<String, Value>) -> Result<Outcome, Paused> {
        let dispatcher = &self.site.agent.dispatcher;
        let name = self.name().to_string();

        let mut mocked = None;
        // Command hooks' `permissionDecision` and `additionalContext`.
        let (mut hint, mut context) = (None, None);
        if self.has(HookEvent::PreToolUse) {
            let fields = self.fields(HookEvent::PreToolUse, &input);
            let dispatched = match dispatcher
                .dispatch(self.input(HookEvent::PreToolUse, &fields, None), self.site.caller)
                .await
            {
                Ok(dispatched) => dispatched,
                Err(error) => return Ok(self.hook_failed(input, &error).await),
            };
            match apply::pre_tool_use(&dispatched.outputs, &mut input, &name) {
                PreVerdict::Continue => mocked = dispatched.mocked,
                PreVerdict::Skip(output) => return Ok(self.finish(input, CallResult::success(output), None).await),
                PreVerdict::Abort(reason) => return Ok(self.finish(input, CallResult::aborted(reason), None).await),
            }
            // `continue: false`: the call does not run, and the run ends after this turn.
            if let Some(stop) = apply::stop(&dispatched.outputs) {
                return Ok(self.finish(input, CallResult::aborted(stop.clone()), Some(stop)).await);
            }
            hint = apply::permission_hint(&dispatched.outputs);
            context = apply::context(&dispatched.outputs);
        }
        if let Some(mock) = mocked {
            return Ok(self.finish(input, mock_result(&mock), None).await);
        }
        let outcome = match self.authorize(tool, &mut input, hint).await {
            Gate::Go => self.execute(tool, input).await,
            Gate::Stop(result, interrupt) => Ok(self.finish(input, result, interrupt).await),
            Gate::Pause => Err(Paused::on(input, PendingReason::Ask)),
        };
        // PreToolUse context reaches the model with the call's result.
        outcome.map(|(mut result, input, interrupt)| {
            if context.is_some() {
                result.output = apply::with_context(&result.output, context.as_deref());
            }
            (result, input, interrupt)
        })
    }

    /// Before-controls on the final input, then `execute` (unless a control denied), then the
    /// after-controls and post hooks.
    async fn execute(&self, tool: &ToolSpec, input: Map<String, Value>) -> Result<Outcome, Paused> {
        let agent = self.site.agent;
        let dispatcher = &agent.dispatcher;
        let name = self.name();
        let result = {
            {
                let controls = dispatcher.controls(HookEvent::PreToolUse, name, self.site.caller.context);
                if !controls.is_empty() {
                    let payload = self.fields(HookEvent::PreToolUse, &input).to_map();
                    if let Some(blocked) = blocked(
                        control::evaluate(
                            &controls,
                            HookEvent::PreToolUse,
                            &payload,
                            self.site.caller,
                            dispatcher.log(),
                        )
                        .await,
                    ) {
                        return Ok(self.finish(input, blocked, None).await);
                    }
                }
                let context = ToolContext {
                    tool_call_id: &self.request.id,
                    session_id: &agent.id,
                    defaults: &self.site.settings.default_context,
                };
                let progress = |progress: Value| {
                    let event = StreamEvent::ToolProgress(Box::new(ToolProgressEvent {
                        progress,
                        id: self.request.id.clone(),
                        name: self.request.name.clone(),
                        agent_path: None,
                    }));
                    subagents::publish(self.site.settings.child.as_ref(), self.site.events, event);
                };
                let execution = Execution {
                    host: &agent.host,
                    dispatcher,
                    caller: self.site.caller,
                    timeout_ms: agent.config.tool_timeout_ms,
                    progress: &progress,
                };
                let ledger = self.site.durable.survives().then_some(self.site.durable);
                // Recorded as started before it runs: after a crash it is never run again
                // silently. A ledger that cannot be written fails the call closed.
                if let Some(ledger) = ledger {
                    // Boxed: a SQL write's future (~3 KB) in the state of every call, most of
                    // which keep no ledger.
                    if let Err(error) = Box::pin(ledger.started(&self.ledger_key(), tool, &input)).await {
                        return Ok(self.finish(input, CallResult::failed(error.message, None), None).await);
                    }
                }
                let mut stops = false;
                let executed = match tool.execute {
                    Runner::Task => match self.delegate(&input).await {
                        Delegated::Done(result) => {
                            self.site.durable.child_finished(&self.child_chain()).await;
                            Ok(result)
                        }
                        // Its sub-agent paused: the call waits for it (§8.7).
                        Delegated::Paused(child) => {
                            return Err(Paused {
                                input,
                                reason: PendingReason::Subagent,
                                child: Some(child),
                            })
                        }
                    },
                    Runner::Js(_) => tools::execute(tool, &input, context, execution).await,
                    Runner::Mcp(_) => self.call_mcp(tool, &input).await,
                    Runner::Builtin(builtin) => {
                        self.call_builtin(tool, builtin, &input, &progress)
                            .await
                            .map(|(result, stop)| {
                                stops = stop;
                                result
                            })
                    }
                };
                let result = match executed {
                    Ok(result) => result,
                    // No hook sees a call that never started: the run ends with the abort.
                    Err(NoResult::NotStarted) => return Ok((CallResult::aborted("the run was aborted"), input, None)),
                    Err(NoResult::Deferred) if self.site.settings.child.is_some() => CallResult::failed(
                        format!("Tool \"{name}\" deferred its result, which a sub-agent cannot wait for"),
                        None,
                    ),
                    // The call waits for its result, published later by `completeToolCall`.
                    Err(NoResult::Deferred) => return Err(Paused::on(input, PendingReason::Deferred)),
                };
                if let Some(ledger) = ledger {
                    if let Err(error) = ledger
                        .finished(&self.ledger_key(), &result.output, !result.is_success())
                        .await
                    {
                        agent.log().warn(
                            "The tool's result could not be recorded in the effects ledger",
                            serde_json::json!({"toolCallId": self.request.id, "error": error.message}),
                        );
                    }
                }
                (result, stops)
            }
        };
        let (result, stops) = result;
        let (result, input, interrupt) = self.finish(input, result, None).await;
        // A tool that ends the run (a rejected plan) ends it with what the model was sent.
        let interrupt = stops.then(|| result.output.clone()).or(interrupt);
        Ok((result, input, interrupt))
    }

    /// PermissionRequest hooks, then `advanced.permission` (and, for an `'ask'`, the
    /// confirmation handler). A command hook's `allow` (PreToolUse's, or PermissionRequest's
    /// `behavior: 'allow'`) skips the ask (a deny still denies); its `ask` asks whatever the
    /// policy says, unless the policy denies.
    async fn authorize(
        &self,
        tool: &ToolSpec,
        input: &mut Map<String, Value>,
        mut hint: Option<PermissionHint>,
    ) -> Gate {
        let agent = self.site.agent;
        let name = self.name().to_string();
        if self.has(HookEvent::PermissionRequest) {
            let fields = ToolEvent {
                tool_kind: Some(tool.kind.as_str()),
                affected_paths: Some(permission::affected_paths(input)),
                ..self.fields(HookEvent::PermissionRequest, input)
            };
            let outputs = match agent
                .dispatcher
                .dispatch(
                    self.input(HookEvent::PermissionRequest, &fields, None),
                    self.site.caller,
                )
                .await
            {
                Ok(dispatched) => dispatched.outputs,
                Err(error) => return Gate::Stop(CallResult::failed(error.message(), error.thrown()), None),
            };
            if let Some(denial) = apply::permission_request(&outputs, input, &name) {
                return stopped(CallResult::aborted(denial.message), denial.interrupt);
            }
            // A command hook's `behavior: 'allow'` answers the ask, as PreToolUse's allow does.
            hint = hint.or_else(|| apply::permission_hint(&outputs));
        }
        let decision = match self.site.permission {
            Some(permission) => self.decide(tool, input, permission).await,
            None => Decision::Allow { updated_input: None },
        };
        match (decision, hint) {
            (Decision::Deny { message, interrupt }, _) => stopped(CallResult::aborted(message), interrupt),
            (Decision::Allow { updated_input }, Some(PermissionHint::Ask(message))) => {
                input.extend(updated_input.unwrap_or_default());
                self.confirm(tool, input, message).await
            }
            (Decision::Ask { message }, Some(PermissionHint::Ask(hinted))) => {
                self.confirm(tool, input, hinted.or(message)).await
            }
            (Decision::Allow { updated_input }, _) => {
                input.extend(updated_input.unwrap_or_default());
                Gate::Go
            }
            (Decision::Ask { .. }, Some(PermissionHint::Allow)) => Gate::Go,
            (Decision::Ask { message }, None) => self.confirm(tool, input, message).await,
        }
    }

    /// An `'ask'`: the confirmation handler decides. Without one, the call pauses for a person
    /// (§8.1): it never turns into an allow.
    async fn confirm(&self, tool: &ToolSpec, input: &Map<String, Value>, message: Option<String>) -> Gate {
        let name = self.name();
        let confirmation = Confirmation {
            agent: self.site.agent,
            approvals: self.site.approvals,
            caller: self.site.caller,
        };
        let request = ConfirmationRequest {
            tool_name: name,
            args: input,
            title: format!("Allow {name}?"),
            message: message.unwrap_or_else(|| format!("The agent wants to run {name}.")),
            kind: tool.kind.as_str(),
            affected_files: permission::affected_paths(input),
        };
        match confirmation.ask(&request).await {
            Answer::Approved => Gate::Go,
            // At any depth: a sub-agent's pause pauses its tree (§8.7).
            Answer::NoHandler => Gate::Pause,
            Answer::Rejected(reason) => {
                stopped(CallResult::aborted(format!("User rejected execution: {reason}")), true)
            }
            Answer::Failed(message) => Gate::Stop(
                CallResult::aborted(format!("User confirmation failed: {message}")),
                None,
            ),
        }
    }

    /// The permission decision: a preset's, or the function's under `hookTimeoutMs`. A function
    /// that throws, times out or answers nonsense denies.
    async fn decide(&self, tool: &ToolSpec, input: &Map<String, Value>, permission: Permission) -> Decision {
        let (function, form) = match permission.handler(tool.kind) {
            Ok(handler) => handler,
            Err(decided) => return decided,
        };
        let denied = |message: String| Decision::Deny {
            message: format!("Permission check failed: {message}"),
            interrupt: false,
        };
        let dispatcher = &self.site.agent.dispatcher;
        if dispatcher.pending().still_pending(Owner::Permission).await {
            return denied("A permission callback is still cleaning up".into());
        }
        let request = PermissionAsk {
            tool_name: self.name(),
            input,
            kind: tool.kind.as_str(),
            affected_paths: permission::affected_paths(input),
            session_id: &self.site.agent.id,
            tool_call_id: &self.request.id,
        };
        let timeout = dispatcher.start_timeout(HookEvent::PermissionRequest);
        let linked = self.site.caller.cancel.is_some();
        let call = match form {
            Form::Request => {
                let mut call = HostCall::new(function, Args::of(&[request]), self.site.caller.scope);
                call.signal = Some(timeout.signal("signal", true, linked));
                call
            }
            // Blade's `canUseTool(toolName, input, { signal, toolKind, sideEffect, affectedPaths })`.
            Form::CanUseTool => {
                let options = CanUseToolOptions {
                    tool_kind: request.kind,
                    side_effect: tool.side_effect.as_str(),
                    affected_paths: &request.affected_paths,
                };
                let args = Args::of(&(request.tool_name, request.input, options));
                let mut call = HostCall::new(function, args, self.site.caller.scope);
                call.signal = Some(timeout.signal_at(2, "signal", true, linked));
                call
            }
        };
        match dispatcher
            .call_guarded(
                self.site.agent.host.call(call),
                &timeout,
                self.site.caller,
                (Owner::Permission, "the permission function".into()),
            )
            .await
        {
            Ok(returned) => permission::parse_decision(returned.as_ref()).unwrap_or_else(denied),
            Err(error) => denied(error.message()),
        }
    }

    /// A `Task` call: the sub-agent it names, run to its end or its pause.
    async fn delegate(&self, input: &Map<String, Value>) -> Delegated {
        let settings = self.delegation_settings();
        let delegation = self.delegation(&settings);
        match delegation.run(input).await {
            Some(delegated) => delegated,
            None => Delegated::Done(self.not_found()),
        }
    }

    /// A sub-agent starts (and goes on) in the mode its parent's turn is in.
    fn delegation_settings(&self) -> RunSettings {
        RunSettings {
            permission: self.site.permission,
            ..self.site.settings.clone()
        }
    }

    fn delegation<'b>(&'b self, settings: &'b RunSettings) -> Delegation<'b> {
        let site = self.site;
        Delegation {
            agent: site.agent,
            approvals: site.approvals,
            settings,
            caller: site.caller,
            operation_id: site.operation_id,
            events: site.events,
            children: site.children,
            tool_call_id: &self.request.id,
            spent: &self.spent,
        }
    }

    /// Goes on with a `Task` call whose sub-agent paused: the sub-agent goes on where it stood;
    /// once it ends, the call ends as any call does (after-controls, post hooks). It may pause
    /// again.
    async fn resume_delegation(&self, paused: &PausedCall, child: Box<PausedChild>) -> Result<Outcome, Paused> {
        let settings = self.delegation_settings();
        let result = match self.delegation(&settings).resume(child).await {
            Delegated::Done(result) => {
                self.site.durable.child_finished(&self.child_chain()).await;
                result
            }
            Delegated::Paused(child) => {
                return Err(Paused {
                    input: paused.input.clone(),
                    reason: PendingReason::Subagent,
                    child: Some(child),
                })
            }
        };
        if self.site.durable.survives() {
            if let Err(error) = self
                .site
                .durable
                .finished(&self.ledger_key(), &result.output, !result.is_success())
                .await
            {
                self.site.agent.log().warn(
                    "The tool's result could not be recorded in the effects ledger",
                    serde_json::json!({"toolCallId": self.request.id, "error": error.message}),
                );
            }
        }
        Ok(self.finish(paused.input.clone(), result, None).await)
    }

    /// A tool hook failed before the tool ran: the call fails with its message.
    async fn hook_failed(&self, input: Map<String, Value>, error: &HookError) -> Outcome {
        self.finish(input, CallResult::failed(error.message(), error.thrown()), None)
            .await
    }

    /// The tail of this call's result (its failures fail the call).
    fn post_call<'b>(&'b self, input: &'b Map<String, Value>) -> PostCall<'b> {
        PostCall {
            dispatcher: &self.site.agent.dispatcher,
            caller: self.site.caller,
            fields: self.fields(HookEvent::PostToolUse, input),
            failures: Failures::FailTheCall,
        }
    }

    /// After-controls, then the post hooks; what they leave is the call's result.
    async fn finish(&self, input: Map<String, Value>, result: CallResult, interrupt: Option<String>) -> Outcome {
        let result = live(self.post_call(&input).finish(result).await);
        // A post hook's `continue: false` ends the run after this turn.
        let interrupt = interrupt.or_else(|| result.stops_run.clone());
        (result, input, interrupt)
    }

    /// The post hooks alone: a call of a tool that is not there (no control sees it).
    async fn post_hooks(&self, input: &Map<String, Value>, result: CallResult) -> CallResult {
        live(self.post_call(input).post_hooks(result).await)
    }
}

/// A live call's tail never refuses (`Failures::FailTheCall`); were it to, the call fails.
fn live(result: Result<CallResult, HookError>) -> CallResult {
    result.unwrap_or_else(|error| CallResult::failed(error.message(), error.thrown()))
}

/// Whether a call goes on to execute after the permission stage.
enum Gate {
    Go,
    /// Stopped with this result; with the run-interrupting text, when it interrupts.
    Stop(CallResult, Option<String>),
    /// Waits for a person's decision.
    Pause,
}

/// A call stopped before it ran; when `interrupt`, the run ends after this turn with the
/// call's text as its content, as Blade ends it.
fn stopped(result: CallResult, interrupt: bool) -> Gate {
    let interrupt = interrupt.then(|| result.output.clone());
    Gate::Stop(result, interrupt)
}

/// `mock(result)`: a string, or `{ content: string, success?: boolean }`; `success: false`
/// makes a failed call whose output is `content`.
fn mock_result(mock: &Value) -> CallResult {
    let parsed = match mock {
        Value::String(content) => Some((content.clone(), true)),
        Value::Object(object) => match (object.get("content"), object.get("success")) {
            (Some(Value::String(content)), None | Some(Value::Null)) => Some((content.clone(), true)),
            (Some(Value::String(content)), Some(Value::Bool(success))) => Some((content.clone(), *success)),
            _ => None,
        },
        _ => None,
    };
    let result = match parsed {
        Some((content, true)) => CallResult::success(content),
        Some((content, false)) => CallResult::failed_as(content, None),
        None => CallResult::failed(
            format!(
                "mock() was given {}; it takes a string or {{ content: string, success?: boolean }}",
                describe(mock)
            ),
            None,
        ),
    };
    CallResult { mocked: true, ..result }
}
