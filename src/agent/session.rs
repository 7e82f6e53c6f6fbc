//! One agent session: the lifecycle around an immutable [`Agent`] — its conversation, the
//! settings runs start from, whether it is closing or closed — and the runs it starts.

use std::sync::{Arc, Mutex};

use futures::future::{BoxFuture, FutureExt, Shared};
use serde_json::{json, Map, Value};
use tracing::Instrument;

use super::approvals::{self, Decision};
use super::config::AgentConfig;
use super::confirm::Remembered;
use super::control::{RunControl, SendOptions};
use super::conversation::Conversation;
use super::definition::Agent;
use super::durable::{self, Durable, Stored};
use super::events::{PendingApproval, PendingReason};
use super::inputs::{Inputs, PendingInput, Priority, Submitted};
use super::payloads;
use super::permission::Permission;
use super::plan_mode::Switched;
use super::reader::{event_log, EventReader};
use super::run::{Run, RunParts, Start};
use super::settings::RunSettings;
use crate::error::{Detail, ErrorCode, Result, SdkError};
use crate::hooks::apply;
use crate::hooks::dispatch::{Caller, Dispatcher, EventInput, HookContext, HookError};
use crate::hooks::environment;
use crate::hooks::listing::{self, Budgets, Registration};
use crate::hooks::pending::{Owner, SETTLE_GRACE};
use crate::hooks::registry::Registry;
use crate::hooks::{EventFields, HookEvent};
use crate::host::{Host, ScopeId};
use crate::ids;
use crate::js_value::{describe, MAX_TIMER_MS};
use crate::model::{Message, UserContent};
use crate::options::OptionsObject;
use crate::store;
use crate::sync::lock;
use crate::webhook::Environment;

pub struct Session {
    pub id: String,
    agent: Arc<Agent>,
    /// Where the session is kept (SPEC §8.2).
    durable: Arc<Durable>,
    conversation: Arc<Conversation>,
    approvals: Arc<Remembered>,
    /// Inputs sent while a request runs (Blade's steering), and the request they may steer.
    inputs: Arc<Inputs>,
    /// The permission plan mode left, when a run's EnterPlanMode / ExitPlanMode switched it.
    switched: Arc<Switched>,
    state: Mutex<State>,
}

type CloseAttempt = Shared<BoxFuture<'static, Result<()>>>;

/// Why a closed session refuses runs, and why `close()` aborts the active one.
pub const CLOSED: &str = "Session is closed";

struct State {
    settings: RunSettings,
    /// SessionStart command hooks' context, until the first prompt takes it.
    start_context: Option<String>,
    /// Made by `resumeAgent`: SessionStart says `isResume: true`.
    resumed: bool,
    /// `close()` was called: no new runs.
    closing: bool,
    /// `close()` succeeded.
    closed: bool,
    /// The close in progress; concurrent `close()` calls share it.
    close_attempt: Option<CloseAttempt>,
}

/// The caller's end of a run: its events, the means to abort it, and its submission's ids.
pub struct RunHandle {
    pub events: EventReader,
    pub control: Arc<RunControl>,
    /// The run's id (`operationId` in hook payloads).
    pub request_id: String,
    pub input_id: String,
}

fn invalid_input(message: impl Into<String>) -> SdkError {
    SdkError::new(ErrorCode::InvalidInput, message)
}

impl Session {
    pub fn new(config: AgentConfig, host: Arc<dyn Host>) -> Arc<Self> {
        Session::make(config, host, None)
    }

    /// A stored session, carried on in this process (`resumeAgent`, SPEC §8.2): its
    /// conversation, its paused turn (rebuilt with the effects ledger after a crash), and its
    /// stored webhook hooks first, then the hooks of the options given now (less their webhook
    /// hooks, which come from the store).
    pub fn from_store(mut config: AgentConfig, host: Arc<dyn Host>, stored: Stored) -> Result<Arc<Self>> {
        config.hooks = Registry::resumed(&stored.record.hooks, std::mem::take(&mut config.hooks))?;
        config.stored_hooks = stored.record.hooks.clone();
        let session = Session::make(config, host, Some(stored.record.session_id.clone()));
        session.adopt(stored)?;
        {
            let mut state = lock(&session.state);
            state.resumed = true;
        }
        Ok(session)
    }

    /// Takes `stored` as this agent's copy of the session: its conversation and its paused turn,
    /// rebuilt with the effects ledger after a crash. A session another agent drives right now
    /// is taken as stored (its run is at work; this agent's first claim reads it again once that
    /// run has settled).
    fn adopt(&self, stored: Stored) -> Result<()> {
        let recover = !stored.lease.is_some_and(|lease| lease.live);
        let resumed = durable::resumed_turn(&stored, &self.agent.config.tools, recover)?;
        if resumed.as_ref().is_some_and(|resumed| resumed.changed) {
            self.durable.mark_recovered();
        }
        self.durable.set_known(stored.lease);
        durable::install(
            &self.conversation,
            stored.record.messages,
            resumed.map(|resumed| resumed.turn),
        );
        Ok(())
    }

    /// Reads the session again when another agent may have changed it since this one did (a
    /// pause taken elsewhere, before `approve` or `reject` here). Not while a run of this agent
    /// is at work: its copy is the session then.
    async fn catch_up(&self) -> Result<()> {
        if !self.durable.survives() || self.conversation.active().is_some() {
            return Ok(());
        }
        match self.durable.reload().await? {
            Some(stored) => self.adopt(stored),
            None => Ok(()),
        }
    }

    fn make(config: AgentConfig, host: Arc<dyn Host>, id: Option<String>) -> Arc<Self> {
        let settings = RunSettings::of(&config, host.clone());
        let agent = Agent::new(config, host, id);
        Arc::new(Session {
            id: agent.id.clone(),
            durable: Arc::new(Durable::new(
                agent.config.store.clone(),
                agent.id.clone(),
                agent.config.lease_ttl_ms,
            )),
            agent: Arc::new(agent),
            conversation: Arc::default(),
            approvals: Arc::default(),
            inputs: Arc::default(),
            switched: Arc::default(),
            state: Mutex::new(State {
                settings,
                start_context: None,
                resumed: false,
                closing: false,
                closed: false,
                close_attempt: None,
            }),
        })
    }

    /// The options the session was made with.
    pub fn config(&self) -> &AgentConfig {
        &self.agent.config
    }

    /// The settings a run starting now uses.
    pub fn settings(&self) -> RunSettings {
        let mut state = lock(&self.state);
        self.keep_switch(&mut state);
        state.settings.clone()
    }

    /// A plan-mode switch a run made becomes the session's permission.
    fn keep_switch(&self, state: &mut State) {
        if let Some(permission) = self.switched.take() {
            state.settings.permission = permission;
        }
    }

    /// `supportedModels()`: `[{ id: 'default', name, provider }]`.
    pub fn supported_models(&self) -> Value {
        let name = lock(&self.state).settings.model_name.clone();
        json!([{"id": "default", "name": name, "provider": self.agent.config.model_name().1}])
    }

    /// `setModel(id)`, from the next run. A scripted model cannot be swapped for a model id.
    pub fn set_model(&self, id: &Value) -> Result<()> {
        let Some(id) = id.as_str().filter(|id| !id.trim().is_empty()) else {
            return Err(invalid_input(format!(
                "setModel() takes a model id string (got {})",
                describe(id)
            )));
        };
        let model = self
            .agent
            .config
            .with_model(id, self.agent.host.clone())
            .ok_or_else(|| {
                invalid_input("setModel() cannot replace a scriptedModel(...): create an agent with a model id")
            })?;
        let mut state = lock(&self.state);
        state.settings.model = model;
        state.settings.model_name = id.to_string();
        Ok(())
    }

    /// `setMaxTurns(n)`, from the next run.
    pub fn set_max_turns(&self, turns: &Value) -> Result<()> {
        let turns = turns
            .as_u64()
            .filter(|n| (1..=MAX_TIMER_MS).contains(n))
            .ok_or_else(|| {
                invalid_input(format!(
                    "setMaxTurns() takes a positive integer no greater than {MAX_TIMER_MS} (got {})",
                    describe(turns)
                ))
            })?;
        lock(&self.state).settings.max_turns = turns as u32;
        Ok(())
    }

    /// `setPermissionMode(mode)`, from the next run: Blade's modes or our preset names.
    pub fn set_permission_mode(&self, mode: &Value) -> Result<()> {
        let permission = mode.as_str().and_then(Permission::mode).ok_or_else(|| {
            invalid_input(format!(
                "setPermissionMode() takes 'default', 'autoEdit', 'yolo' or 'plan' (got {})",
                describe(mode)
            ))
        })?;
        let mut state = lock(&self.state);
        // The last change wins: this one over a run's earlier plan-mode switch.
        self.switched.take();
        state.settings.permission = Some(permission);
        Ok(())
    }

    /// `getDefaultContext()`.
    pub fn default_context(&self) -> Arc<Map<String, Value>> {
        lock(&self.state).settings.default_context.clone()
    }

    /// `setDefaultContext(context)`, from the next tool call on.
    pub fn set_default_context(&self, context: &Value) -> Result<()> {
        let mut advanced = Map::new();
        advanced.insert("defaultContext".into(), context.clone());
        let context =
            super::config::read_default_context(&OptionsObject::of(&Value::Object(advanced), "options", "")?, None)
                .map_err(|error| invalid_input(error.message.replace("advanced.defaultContext", "the context")))?;
        lock(&self.state).settings.default_context = Arc::new(context);
        Ok(())
    }

    /// `fork()`: this conversation becomes `other`'s.
    pub fn copy_conversation_from(&self, other: &Session) {
        self.conversation.replace(other.messages());
    }

    /// `forkSession`: the stored session's conversation becomes this one's. A session paused
    /// for approvals is not forked: its last turn is open, and a copy would answer it twice.
    pub fn copy_stored(&self, stored: Stored) -> Result<()> {
        if stored.record.paused.is_some() {
            return Err(invalid_input(format!(
                "Session {} is paused for approvals: resume it (resumeSession) and decide them before forking it",
                stored.record.session_id
            )));
        }
        durable::install(&self.conversation, stored.record.messages, None);
        Ok(())
    }

    /// The conversation so far, without the system prompt.
    pub fn messages(&self) -> Arc<Vec<Arc<Message>>> {
        self.conversation.messages()
    }

    /// Whether a run may be stopped from outside it (its claim lost, a critical queued webhook
    /// given up), so its JS signal needs telling.
    pub fn runs_may_be_stopped(&self) -> bool {
        self.durable.survives() || self.dispatcher().registry().has_critical_queued()
    }

    /// The session's hook dispatcher (its callbacks, budgets and pending cleanups).
    pub fn dispatcher(&self) -> &Dispatcher {
        &self.agent.dispatcher
    }

    pub fn is_closed(&self) -> bool {
        lock(&self.state).closed
    }

    /// Starts a run. The returned future drives it and must be spawned; the handle receives
    /// its events. With the memory store the run is accepted or refused here (nothing waits);
    /// otherwise once driven (`RunControl::admitted`). Call it within the tokio runtime.
    pub fn send(
        self: &Arc<Self>,
        message: &Value,
        options: SendOptions,
    ) -> Result<(RunHandle, BoxFuture<'static, ()>)> {
        let content = parse_message(message)?;
        self.start_run(Start::Prompt(content), options, None)
    }

    /// `resume()`: goes on with the paused turn once every waiting call has a decision (the
    /// run checks, once it holds the session: another process may have decided).
    pub fn resume(self: &Arc<Self>, options: SendOptions) -> Result<(RunHandle, BoxFuture<'static, ()>)> {
        self.start_run(Start::Resume, options, None)
    }

    /// Blade's `session.send(message, { priority, expectedRequestId })`: steers the active
    /// request, queues the input for a later one, or says the session is idle (the caller then
    /// starts a request with [`Session::send`]). `starting_options`: the send also has options
    /// only a starting request takes (`signal`, `maxTurns`, `context`), which Blade refuses
    /// while a request runs. Nothing changes when it fails.
    pub fn submit(
        &self,
        message: &Value,
        priority: Priority,
        expected: Option<&str>,
        starting_options: bool,
    ) -> Result<Submitted> {
        {
            let state = lock(&self.state);
            if state.closing || state.closed {
                return Err(SdkError::new(ErrorCode::SessionClosed, CLOSED));
            }
        }
        let content = parse_message(message)?;
        self.inputs.submit(content, priority, expected, starting_options)
    }

    /// Starts a request with the first input queued for later (`stream()` with no request
    /// under way); `None` when none waits.
    pub fn send_later(self: &Arc<Self>, options: SendOptions) -> Result<Option<(RunHandle, BoxFuture<'static, ()>)>> {
        let Some(input) = self.inputs.first_later() else {
            return Ok(None);
        };
        // Taken once the request starts; a request refused later (by the store) gives it back.
        let started = self.start_run(
            Start::Prompt(input.content.clone()),
            options,
            Some(input.input_id.clone()),
        );
        let (handle, drive) = started?;
        self.inputs.cancel(&input.input_id);
        let inputs = self.inputs.clone();
        let refused = handle.control.clone();
        let drive = async move {
            drive.await;
            if refused.refused() {
                inputs.restore(vec![input]);
            }
        };
        Ok(Some((handle, Box::pin(drive))))
    }

    /// `getPendingInputs()`.
    pub fn pending_inputs(&self) -> Vec<PendingInput> {
        self.inputs.pending()
    }

    /// `cancelInput(inputId)`.
    pub fn cancel_input(&self, input_id: &str) -> bool {
        self.inputs.cancel(input_id)
    }

    /// `pendingApprovals`: what waits now, with a token each when `approvalSecret` is set.
    pub fn pending_approvals(&self) -> Vec<PendingApproval> {
        let Some(turn) = self.conversation.paused() else {
            return Vec::new();
        };
        turn.approvals(&self.id, self.agent.config.approval_secret.as_deref())
    }

    /// `approve(toolCallId, { updatedInput?, token? })`. With `approvalSecret` the token must be
    /// the one over the fingerprint of what will run: the paused input's (`pendingApprovals`
    /// gives it), or `updatedInput`'s (only the secret's holder can make it: `approvalToken`).
    /// The token is kept with the decision and checked again before the call runs.
    pub async fn approve(&self, tool_call_id: &str, options: &Value) -> Result<()> {
        let approvals::ApproveOptions { updated_input, token } =
            approvals::read_approve(options).map_err(invalid_input)?;
        let mut kept_token = None;
        if let Some(secret) = &self.agent.config.approval_secret {
            let waiting = self.pending_approvals();
            if let Some(call) = waiting.iter().find(|call| call.tool_call_id == tool_call_id) {
                let (fingerprint, what) = match &updated_input {
                    Some(input) => (store::fingerprint(&call.tool_name, input), "its updatedInput"),
                    None => (call.fingerprint.clone(), "its input"),
                };
                let token = token.unwrap_or_default();
                // Bound to the call's place in the tree: a token cannot move to another child's call.
                let place = store::CallPlace {
                    session_id: &self.id,
                    agent_path: &call.agent_path,
                    tool_call_id,
                };
                if !store::verify_approval_token(secret.as_bytes(), place, &fingerprint, &token) {
                    return Err(SdkError::new(
                        ErrorCode::ApprovalTokenInvalid,
                        format!("The approval token for tool call {tool_call_id} is missing or does not match {what}"),
                    ));
                }
                kept_token = Some(token);
            }
        }
        let decision = Decision::Approve {
            updated_input,
            token: kept_token,
        };
        self.decide(tool_call_id, decision).await
    }

    /// `reject(toolCallId, { reason?, stop? })`.
    pub async fn reject(&self, tool_call_id: &str, options: &Value) -> Result<()> {
        let decision = approvals::read_reject(options).map_err(invalid_input)?;
        self.decide(tool_call_id, decision).await
    }

    /// A decision is stored before it is taken here, and only if the call still waits there:
    /// another process may have decided it already.
    async fn decide(&self, tool_call_id: &str, decision: Decision) -> Result<()> {
        let not_pending = || {
            SdkError::new(
                ErrorCode::ApprovalNotPending,
                format!("Tool call {tool_call_id} is not waiting for approval"),
            )
        };
        // A deferred call waits for its result, not for a person.
        let waiting = || {
            self.conversation.paused().is_some_and(|turn| {
                turn.waiting()
                    .any(|leaf| leaf.call.tool_call_id == tool_call_id && leaf.call.reason != PendingReason::Deferred)
            })
        };
        // Not waiting here: another agent may have paused on it since this one read the session.
        if !waiting() {
            self.catch_up().await?;
        }
        let waiting = waiting();
        if waiting && self.durable.take_recovered() {
            let paused = self.conversation.paused();
            let messages = self.conversation.messages();
            if let Err(error) = self
                .durable
                .save_claimed(&messages, &self.agent.config.stored_hooks, paused.as_ref())
                .await
            {
                self.durable.mark_recovered();
                return Err(error);
            }
        }
        if !waiting || !self.durable.decide(tool_call_id, &decision).await? {
            return Err(not_pending());
        }
        if self.conversation.decide(tool_call_id, decision) {
            return Ok(());
        }
        Err(not_pending())
    }

    fn start_run(
        self: &Arc<Self>,
        start: Start,
        options: SendOptions,
        input_id: Option<String>,
    ) -> Result<(RunHandle, BoxFuture<'static, ()>)> {
        let control = Arc::new(RunControl::default());
        let settings = {
            let mut state = lock(&self.state);
            if state.closing || state.closed {
                return Err(SdkError::new(ErrorCode::SessionClosed, CLOSED));
            }
            if !self.conversation.begin(&control) {
                return Err(SdkError::new(
                    ErrorCode::SessionBusy,
                    "The previous Agent response is still active. Consume it before sending another message.",
                ));
            }
            self.keep_switch(&mut state);
            state.settings.clone()
        };
        let (sender, events) = event_log();
        let parts = RunParts {
            agent: self.agent.clone(),
            durable: self.durable.clone(),
            conversation: self.conversation.clone(),
            approvals: self.approvals.clone(),
            switched: Some(self.switched.clone()),
        };
        let mut run = Run::new(parts, settings, control.clone(), sender, options).steered_by(self.inputs.clone());
        if let Some(Err(refusal)) = run.prepare_now(&start) {
            return Err(refusal);
        }
        if matches!(start, Start::Prompt(_)) {
            run = run.with_start_context(lock(&self.state).start_context.take());
        }
        self.inputs.open(run.id());
        let span = run.span().clone();
        Ok((
            RunHandle {
                events,
                control,
                request_id: run.id().to_string(),
                input_id: input_id.unwrap_or_else(ids::uuid),
            },
            Box::pin(run.drive(start).instrument(span)),
        ))
    }

    /// Aborts the active run, if any.
    pub fn abort(&self, reason: String) {
        if let Some(control) = self.conversation.active() {
            control.abort(reason);
        }
    }

    /// The environment variables runs read: those webhook header templates may use, and the
    /// `AGENT_HOOK_WEBHOOK_*` variables of environment hooks.
    pub fn environment_names(&self) -> Vec<String> {
        let mut names = self.dispatcher().registry().env_var_names();
        names.extend(environment::VARIABLES.iter().map(|name| name.to_string()));
        names
    }

    /// `agent.hooks()`: the session's hooks, then those `environment` adds to a run started now,
    /// per event in dispatch order.
    pub fn hooks(&self, environment: &Environment) -> Result<Vec<Registration>> {
        let from_environment = environment::hooks(environment)?;
        let budgets = Budgets {
            hook_timeout_ms: self.agent.config.hook_timeout_ms,
            session_end_timeout_ms: self.agent.config.session_end_hook_timeout_ms,
        };
        let registry = self.dispatcher().registry();
        Ok(listing::list(
            |event| registry.entries(event).to_vec(),
            &from_environment,
            budgets,
        ))
    }

    /// The MCP servers, then SessionStart, inside `createAgent`. A server that cannot start
    /// closes the session (no hook has run). If SessionStart fails, SessionEnd runs (once), the
    /// servers are stopped and the session is closed; the SessionStart error is what the caller
    /// gets.
    #[tracing::instrument(name = "agent_start", parent = None, skip_all, fields(session_id = %self.id))]
    pub async fn start(&self, scope: ScopeId, environment: Environment) -> Result<()> {
        if let Err(error) = self.agent.start_mcp().await {
            let mut state = lock(&self.state);
            state.closing = true;
            state.closed = true;
            return Err(error);
        }
        let context = HookContext {
            extra: Vec::new(),
            queue: Some(self.durable.clone()),
            environment: Arc::new(environment),
            observer: None,
        };
        if !self.dispatcher().has(HookEvent::SessionStart, None, &context) {
            return Ok(());
        }
        let payload = EventFields::of(&payloads::SessionStart {
            event: HookEvent::SessionStart.name(),
            session_id: &self.id,
            is_resume: lock(&self.state).resumed,
        });
        let input = EventInput::of(HookEvent::SessionStart, payload);
        let caller = Caller {
            scope,
            cancel: None,
            context: &context,
        };
        let started = match self.dispatcher().dispatch(input, caller).await {
            Ok(dispatched) => match apply::first_abort(&dispatched.outputs, HookEvent::SessionStart) {
                Some(message) => Err(SdkError::new(ErrorCode::HookAborted, message)),
                None => {
                    // Command hooks' context reaches the model with the first prompt.
                    lock(&self.state).start_context = apply::context(&dispatched.outputs);
                    Ok(())
                }
            },
            Err(error) => Err(error.into_sdk()),
        };
        if started.is_err() {
            if let Err(error) = self.session_end(scope, &context).await {
                self.dispatcher().log().warn(
                    "SessionEnd failed while cleaning up after SessionStart",
                    json!({"error": error.message}),
                );
            }
            self.stop_mcp().await;
            let mut state = lock(&self.state);
            state.closing = true;
            state.closed = true;
        }
        started
    }

    /// Stops the MCP servers (a closed session calls no more tools).
    async fn stop_mcp(&self) {
        if let Some(servers) = self.agent.mcp() {
            servers.stop().await;
        }
    }

    /// `mcpServerStatus()`: `[]` without servers.
    pub fn mcp_server_status(&self) -> Value {
        self.agent
            .mcp()
            .map_or_else(|| Value::Array(Vec::new()), |servers| servers.status())
    }

    /// `mcpListTools()`: `[]` without servers.
    pub fn mcp_list_tools(&self) -> Value {
        self.agent
            .mcp()
            .map_or_else(|| Value::Array(Vec::new()), |servers| servers.list_tools())
    }

    /// Ends the session: later `send`s fail with `SESSION_CLOSED`, an active run is aborted,
    /// SessionEnd runs at most once. Concurrent calls share one attempt; after a failure,
    /// `close()` may be called again; after success it resolves at once.
    #[tracing::instrument(name = "agent_close", parent = None, skip_all, fields(session_id = %self.id))]
    pub async fn close(self: &Arc<Self>, scope: ScopeId, environment: Environment) -> Result<()> {
        let attempt = {
            let mut state = lock(&self.state);
            if state.closed {
                return Ok(());
            }
            match &state.close_attempt {
                Some(attempt) => attempt.clone(),
                None => {
                    let session = self.clone();
                    let attempt = async move { session.close_once(scope, environment).await }
                        .boxed()
                        .shared();
                    state.close_attempt = Some(attempt.clone());
                    attempt
                }
            }
        };
        let outcome = attempt.await;
        let mut state = lock(&self.state);
        state.close_attempt = None;
        if outcome.is_ok() {
            state.closed = true;
        }
        outcome
    }

    async fn close_once(&self, scope: ScopeId, environment: Environment) -> Result<()> {
        self.stop_active_run().await;
        // A close refused because a callback is still cleaning up leaves the session open.
        let pending = self.dispatcher().pending();
        pending.settle(SETTLE_GRACE).await;
        for (owner, what) in [
            (Owner::Hook, "an inline hook callback"),
            (Owner::Permission, "a permission callback"),
            (Owner::Tool, "a tool execution"),
        ] {
            if let Some(which) = pending.first(owner) {
                return Err(SdkError::new(
                    ErrorCode::CleanupPending,
                    format!("Session runtime {} still has {what} cleaning up", self.id),
                )
                .with_detail(Detail::Callback(which)));
            }
        }
        lock(&self.state).closing = true;
        self.stop_active_run().await;
        let context = HookContext {
            extra: Vec::new(),
            queue: Some(self.durable.clone()),
            environment: Arc::new(environment),
            observer: None,
        };
        let ended = self.session_end(scope, &context).await;
        // Stopped whatever SessionEnd did: the session is closing either way.
        self.stop_mcp().await;
        self.agent.builtins.close().await;
        ended
    }

    async fn stop_active_run(&self) {
        if let Some(control) = self.conversation.active() {
            control.abort(CLOSED.into());
            control.finished().await;
        }
    }

    async fn session_end(&self, scope: ScopeId, context: &HookContext) -> Result<()> {
        if !self.dispatcher().has(HookEvent::SessionEnd, None, context) {
            return Ok(());
        }
        let payload = EventFields::of(&payloads::SessionEnd {
            event: HookEvent::SessionEnd.name(),
            session_id: &self.id,
            reason: "other",
        });
        let caller = Caller {
            scope,
            cancel: None,
            context,
        };
        let dispatched = self
            .dispatcher()
            .dispatch_session_end(payload, caller)
            .await
            .map_err(HookError::into_sdk)?;
        match apply::first_abort(&dispatched.outputs, HookEvent::SessionEnd) {
            Some(message) => Err(SdkError::new(ErrorCode::HookAborted, message)),
            None => Ok(()),
        }
    }
}

/// A `send` message: a string, or an array of `{ type: 'text', text }` and
/// `{ type: 'image_url', image_url: { url } }` parts.
pub fn parse_message(value: &Value) -> Result<UserContent> {
    let invalid = |detail: String| SdkError::new(ErrorCode::InvalidInput, detail);
    match value {
        Value::String(text) => Ok(UserContent::Text(text.clone())),
        Value::Array(parts) => {
            if parts.is_empty() {
                return Err(invalid("message must not be an empty array of parts".into()));
            }
            for (index, part) in parts.iter().enumerate() {
                let kind = part.get("type").and_then(Value::as_str);
                let ok = match kind {
                    Some("text") => part.get("text").is_some_and(Value::is_string),
                    Some("image_url") => part.pointer("/image_url/url").is_some_and(Value::is_string),
                    _ => false,
                };
                if !ok {
                    return Err(invalid(format!(
                        "message[{index}] must be {{ type: 'text', text: string }} or {{ type: 'image_url', image_url: {{ url: string }} }} (got {})",
                        describe(part)
                    )));
                }
            }
            serde_json::from_value(value.clone()).map_err(|error| invalid(format!("message is not valid: {error}")))
        }
        other => Err(invalid(format!(
            "message must be a string or an array of text and image_url parts (got {})",
            describe(other)
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn messages_are_strings_or_parts() {
        assert_eq!(parse_message(&json!("hi")).unwrap(), UserContent::Text("hi".into()));
        assert_eq!(
            parse_message(&json!([{"type": "text", "text": "a"}])).unwrap().text(),
            "a"
        );
        let error = parse_message(&json!(5)).unwrap_err();
        assert_eq!(error.code, ErrorCode::InvalidInput);
        assert_eq!(
            error.message,
            "message must be a string or an array of text and image_url parts (got 5)"
        );
        let error = parse_message(&json!([{"type": "image"}])).unwrap_err();
        assert!(error.message.starts_with("message[0] must be"), "{}", error.message);
    }
}
