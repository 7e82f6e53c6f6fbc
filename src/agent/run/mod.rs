//! The loop of one `send`: UserPromptSubmit → { model turn → tool calls } until the model
//! answers without tool calls, `maxTurns` is reached or a denial interrupts → TaskCompleted.

mod admit;
mod claim;
mod compact;
mod lifecycle;
mod model_turn;
mod pause;
mod pipeline;
mod sub_runs;

use std::sync::Arc;

use futures::future::{join_all, BoxFuture};
use futures::FutureExt;
use serde_json::{json, Map, Value};
use tracing::field::Empty;
use tracing::Instrument;

use self::lifecycle::Completion;
use self::model_turn::{where_models_run, ModelTurn};
use self::pipeline::{CallSite, Ended};
use self::sub_runs::SubRuns;
use crate::agent::approvals::{Decision, PausedCall, PausedChild, PausedTurn};
use crate::agent::confirm::Remembered;
use crate::agent::control::{RunControl, SendOptions};
use crate::agent::conversation::Conversation;
use crate::agent::definition::Agent;
use crate::agent::durable::running::RunningChild;
use crate::agent::durable::Durable;
use crate::agent::events::{
    JsonText, PendingApproval, PendingReason, PromptResult, StopReason, StreamEvent, TokenUsage, ToolCallRecord,
    ToolResultEvent, ToolUseEvent,
};
use crate::agent::inputs::{Inputs, PendingInput};
use crate::agent::payloads;
use crate::agent::permission::Permission;
use crate::agent::plan_mode::{RunPermission, Switched};
use crate::agent::reader::EventSender;
use crate::agent::settings::RunSettings;
use crate::agent::subagents;
use crate::agent::subagents::delegate::ChildEnd;
use crate::agent::tree::{Nursery, Tree};
use crate::error::{ErrorCode, Result, SdkError};
use crate::hooks::apply;
use crate::hooks::dispatch::{Caller, HookContext};
use crate::hooks::environment;
use crate::hooks::observer::Observer;
use crate::hooks::pending::SETTLE_GRACE;
use crate::hooks::{EventFields, HookEvent};
use crate::host::ScopeId;
use crate::ids;
use crate::js_value::describe;
use crate::model::{
    AssistantToolCall, FinishReason, Message, ModelReply, ToolCallRequest, ToolChoice, Usage, UserContent,
};

pub(crate) struct Run {
    agent: Arc<Agent>,
    /// Where the session is kept: pauses, turn boundaries, the effects ledger.
    durable: Arc<Durable>,
    /// The only mutable part of the session a run touches.
    conversation: Arc<Conversation>,
    approvals: Arc<Remembered>,
    control: Arc<RunControl>,
    events: EventSender,
    /// The session's settings when the run started (`setModel` and the like apply later).
    settings: RunSettings,
    /// The permission its calls are decided with: `settings`' until a built-in switches plan mode.
    permission: RunPermission,
    /// When `send` accepted the run (`duration`).
    started: std::time::Instant,
    scope: ScopeId,
    /// One id per run (`taskId` of TaskCompleted).
    id: String,
    max_turns: u32,
    turns: u32,
    /// `toolChoice` for this run's model calls (a sub-agent's runs have none).
    tool_choice: Option<ToolChoice>,
    /// The model has called a tool in this run: a forced choice is spent.
    called_a_tool: bool,
    usage: Usage,
    tool_calls: Vec<ToolCallRecord>,
    /// The environment's hooks for this run and the variables webhooks may use.
    context: HookContext,
    /// The environment's hooks could not be read: the run fails with this.
    setup_error: Option<SdkError>,
    last_text: String,
    /// The calls this run paused on, for its result's `pendingApprovals`.
    paused: Option<Vec<PendingApproval>>,
    /// The last model call's reported prompt tokens and how many messages it was sent, for
    /// compaction's count.
    reported: Option<(u64, usize)>,
    /// The step index of this run's first model turn (after a paused turn, the next one).
    first_step: u32,
    /// The root of the run's trace: model calls, tool calls and dispatches nest in it. A root
    /// even when `send` is called from inside another run's tool or hook.
    span: tracing::Span,
    /// Where its `Task` calls start sub-agents: the tree of the root run it belongs to.
    children: SubRuns,
    /// A root run's sub-agents, polled beside it while it drives (a sub-agent's run has none).
    nursery: Option<Nursery>,
    /// The session's inbox of steering inputs (Blade's `send` with a priority); a sub-agent's
    /// run is not steered.
    inputs: Option<Arc<Inputs>>,
    /// SessionStart command hooks' context, sent with this run's prompt (the session's first).
    start_context: Option<String>,
    /// A person's `reject` with `stop` ended this run: a sub-agent's `Task` call then fails
    /// with the stop text.
    stopped_by_person: bool,
    /// The run's last state may not be kept yet (its last save waited for the run's end, see
    /// `quiet_end`; or a turn boundary waited for the turn's first write, see `quiet_calls`):
    /// the run's end saves it with the release, in one write.
    unsaved: bool,
}

type Finish = Result<(String, StopReason)>;

impl Run {
    pub fn new(
        parts: RunParts,
        settings: RunSettings,
        control: Arc<RunControl>,
        events: EventSender,
        options: SendOptions,
    ) -> Self {
        let (extra, setup_error) = match environment::hooks(&options.environment) {
            Ok(hooks) => (hooks, None),
            Err(error) => (Vec::new(), Some(error)),
        };
        let max_turns = options.max_turns.unwrap_or(settings.max_turns);
        // The outbox's deliverer resolves queued notifications' header templates from these.
        parts.durable.remember_environment(&options.environment);
        // Each hook's start and end in the stream, when the agent asks for them.
        let observer = parts.agent.config.include_hook_events.then(|| {
            let events = events.clone();
            Observer::new(move |notice| events.send(StreamEvent::of_hook(notice)))
        });
        let context = HookContext {
            extra,
            queue: Some(parts.durable.clone()),
            environment: Arc::new(options.environment),
            observer,
        };
        let budget = parts
            .agent
            .config
            .subagents
            .as_ref()
            .map_or(subagents::DEFAULT_MAX_CALLS, |subagents| subagents.max_calls);
        let (tree, nursery) = Tree::new(budget);
        let mut run = Run::child(parts, settings, control, events, options.scope, context, tree);
        run.max_turns = max_turns;
        run.tool_choice = options.tool_choice.or_else(|| run.agent.config.tool_choice.clone());
        run.setup_error = setup_error;
        run.nursery = Some(nursery);
        run
    }

    /// A run under hooks already read: a sub-agent's, with its parent's `context` (the
    /// environment hooks and snapshot the parent's run started with), in its parent's `tree`.
    pub fn child(
        parts: RunParts,
        settings: RunSettings,
        control: Arc<RunControl>,
        events: EventSender,
        scope: ScopeId,
        context: HookContext,
        tree: Arc<Tree>,
    ) -> Self {
        let RunParts {
            agent,
            durable,
            conversation,
            approvals,
            switched,
        } = parts;
        let tree_durable = durable.clone();
        let span = tracing::info_span!(
            parent: None,
            "agent_run",
            session_id = %agent.id,
            turns = Empty,
            stop_reason = Empty,
            otel.status_description = Empty
        );
        Run {
            agent,
            durable,
            conversation,
            approvals,
            control,
            events,
            max_turns: settings.max_turns,
            permission: RunPermission::new(settings.permission, switched),
            settings,
            started: std::time::Instant::now(),
            scope,
            id: ids::uuid(),
            turns: 0,
            tool_choice: None,
            called_a_tool: false,
            unsaved: false,
            usage: Usage::default(),
            tool_calls: Vec::new(),
            context,
            setup_error: None,
            last_text: String::new(),
            paused: None,
            reported: None,
            first_step: 0,
            span,
            children: SubRuns {
                tree,
                durable: tree_durable,
            },
            nursery: None,
            inputs: None,
            start_context: None,
            stopped_by_person: false,
        }
    }

    /// A paused sub-agent's run going on (§8.7): the same run id, and the turns it has taken
    /// count against its `maxTurns`.
    pub fn continue_as(&mut self, id: &str, turns: u32) {
        self.id = id.to_string();
        self.turns = turns;
    }

    /// SessionStart's context goes before this run's prompt.
    pub fn with_start_context(mut self, context: Option<String>) -> Self {
        self.start_context = context;
        self
    }

    /// A run that inputs sent while it is active steer (they wait in `inputs`).
    pub fn steered_by(mut self, inputs: Arc<Inputs>) -> Self {
        self.inputs = Some(inputs);
        self
    }

    /// One id per run: `operationId`, `taskId`, the submission's `requestId`.
    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn span(&self) -> &tracing::Span {
        &self.span
    }

    /// Fails with the abort once the run was aborted. Checked before every model call and as
    /// soon as a turn's tool calls return: user code that aborts synchronously never gives the
    /// `select!` in [`Run::drive`] a chance to see it.
    fn checkpoint(&self) -> Result<()> {
        if self.control.is_aborted() {
            return Err(SdkError::new(ErrorCode::Abort, self.control.reason()));
        }
        Ok(())
    }

    /// Publishes `event`; a sub-agent's run shows the parent's stream its tool events only.
    fn emit(&self, event: StreamEvent) {
        subagents::publish(self.settings.child.as_ref(), &self.events, event);
    }

    fn caller(&self) -> Caller<'_> {
        Caller {
            scope: self.scope,
            cancel: Some(self.control.token()),
            context: &self.context,
        }
    }

    /// After the run failed or was aborted, hooks get their own budget, not the aborted signal.
    fn detached(&self) -> Caller<'_> {
        Caller {
            scope: self.scope,
            cancel: None,
            context: &self.context,
        }
    }

    fn has(&self, event: HookEvent) -> bool {
        self.agent.dispatcher.has(event, None, &self.context)
    }

    /// The run's totals so far, as the step and end events carry them.
    fn totals(&self) -> payloads::Totals {
        payloads::Totals {
            steps: self.turns,
            total_input_tokens: self.usage.input_tokens,
            total_output_tokens: self.usage.output_tokens,
            total_tokens: self.usage.total_tokens,
            total_tool_calls: self.tool_calls.len(),
        }
    }

    /// Runs to the end and publishes the outcome as the last event.
    pub async fn drive(mut self, start: Start) {
        let control = self.control.clone();
        // A run is first polled on a turn of its own: its slice of the event loop starts now.
        self.agent.dispatcher.pace().restart(std::time::Instant::now());
        if !control.is_admitted() {
            if let Err(refusal) = self.prepare(&start).await {
                if let Some(inputs) = &self.inputs {
                    inputs.close(&self.id);
                }
                self.refuse(refusal).await;
                return;
            }
            control.admit(Ok(()));
        }
        let guard = self.guard();
        let mut outcome = match self.nursery.take() {
            Some(nursery) => nursery.alongside(self.conclude(start)).await,
            None => self.conclude(start).await,
        };
        let stopped = guard.stopped.clone();
        drop(guard);
        let aborted = matches!(&outcome, Err(error) if error.code == ErrorCode::Abort);
        if let (Some(stopped), Err(error)) = (stopped.get(), &mut outcome) {
            // Aborted from outside: said as what it was.
            *error = stopped.clone();
        }
        // An aborted run's open calls were answered in memory (§2); kept (unless the claim is
        // lost), so the next agent to claim the session finds the conversation as this one does.
        let lost = matches!(&outcome, Err(error) if error.code == ErrorCode::SessionLeased);
        let keep_aborted = aborted && self.durable.survives() && self.conversation.paused().is_none();
        // Released before the result is published: whoever sees it may claim the session. A
        // lost claim is no longer this run's to release (and a silent store would hold the
        // result back for the release's deadline).
        if lost {
            self.durable.forget_lease();
        } else if self.unsaved || keep_aborted {
            if let Err(error) = self.save_and_release().await {
                self.last_save_failed(error, &mut outcome).await;
            }
        } else if let Err(error) = self.durable.release().await {
            self.release_failed(&error);
        }
        match outcome {
            Ok((content, stop_reason)) => {
                let usage = TokenUsage::of(self.usage, self.agent.config.max_context_tokens);
                self.emit(StreamEvent::Usage { usage });
                let result = PromptResult {
                    result: content.clone(),
                    tool_calls: std::mem::take(&mut self.tool_calls),
                    usage,
                    duration: self.started.elapsed().as_millis() as u64,
                    turns_count: self.turns,
                    content,
                    turns: self.turns,
                    stop_reason,
                    pending_approvals: self.paused.take(),
                };
                self.emit(StreamEvent::result(result));
            }
            Err(error) => self.emit(StreamEvent::error(error)),
        }
        control.finish();
    }

    /// Runs a sub-agent to its end or its pause: its final text, the person's stop, all of it
    /// to go on with later, or why it failed. Boxed with its type spelled out: a sub-agent's run
    /// holds the `Task` call that may start another.
    pub fn drive_child(mut self, start: Start) -> BoxFuture<'static, (Result<ChildEnd>, Usage)> {
        Box::pin(async move {
            let control = self.control.clone();
            let outcome = self.conclude(start).await;
            control.finish();
            let ended = outcome.map(|(text, _)| match self.conversation.take_paused() {
                Some(turn) => ChildEnd::Paused(Box::new(PausedChild {
                    agent_path: subagents::lineage(self.settings.child.as_ref()).0.to_vec(),
                    chain: subagents::chain(self.settings.child.as_ref()).to_vec(),
                    operation_id: self.id.clone(),
                    messages: self
                        .conversation
                        .messages()
                        .iter()
                        .map(|message| (**message).clone())
                        .collect(),
                    turns: self.turns,
                    turn,
                })),
                None if self.stopped_by_person => ChildEnd::Stopped(text),
                None => ChildEnd::Answered(text),
            });
            (ended, self.usage)
        })
    }

    /// The run's steps, then the events of its end (TaskCompleted, StopFailure) and its span.
    async fn conclude(&mut self, start: Start) -> Finish {
        let control = self.control.clone();
        let description = match &start {
            Start::Prompt(content) => content.text(),
            Start::Resume | Start::Instruction(_) => self.conversation.last_prompt(),
        };
        let outcome = match self.setup_error.take() {
            Some(error) => Err(error),
            None => tokio::select! {
                biased;
                _ = control.aborted() => Err(SdkError::new(ErrorCode::Abort, control.reason())),
                outcome = self.steps(start) => outcome,
            },
        };
        if matches!(&outcome, Err(error) if error.code == ErrorCode::Abort) {
            // Callbacks told to stop usually settle at once; let them, so the session is not
            // found still cleaning up by the caller's next step.
            self.agent.dispatcher.pending().settle(SETTLE_GRACE).await;
        }
        // A TaskCompleted hook may send the model back to work; max_turns still bounds the run.
        let mut outcome = outcome;
        let mut again = false;
        let outcome = loop {
            match self.task_completed(outcome, &description, again).await {
                Completion::Finished(finished) => break finished,
                Completion::MoreWork(instruction) => {
                    again = true;
                    outcome = tokio::select! {
                        biased;
                        _ = control.aborted() => Err(SdkError::new(ErrorCode::Abort, control.reason())),
                        outcome = self.steps(Start::Instruction(instruction)) => outcome,
                    };
                }
            }
        };
        if let Err(error) = &outcome {
            if error.code != ErrorCode::Abort {
                self.stop_failure(error).await;
            }
        }
        let aborted = match &outcome {
            Err(error) if error.code == ErrorCode::Abort => Some(error.message.as_str()),
            _ => None,
        };
        self.conversation.finish(&control, aborted);
        // Only now may an input start a request of its own: until here it waits for one.
        if let Some(inputs) = &self.inputs {
            inputs.close(&self.id);
        }
        // How the run ended; a failure (not an abort) marks its span as an error.
        // Numbers as i64: tracing-opentelemetry exports an unsigned field as text.
        self.span.record("turns", i64::from(self.turns));
        self.span.record("stop_reason", reason(&outcome));
        if let Err(error) = &outcome {
            if error.code != ErrorCode::Abort {
                self.span.record("otel.status_description", error.message.as_str());
            }
        }
        outcome
    }

    async fn steps(&mut self, start: Start) -> Finish {
        match start {
            Start::Prompt(content) => {
                let mut content = self.user_prompt_submit(content).await?;
                if let Some(context) = self.start_context.take() {
                    content = apply::context_first(content, &context);
                }
                self.checkpoint()?;
                self.conversation.push(Message::User { content });
            }
            Start::Resume => {
                if let Some(finished) = self.resume_turn().await? {
                    return Ok(finished);
                }
            }
            // Not a prompt of the user's: UserPromptSubmit does not see it.
            Start::Instruction(text) => {
                self.checkpoint()?;
                self.conversation.push(Message::User {
                    content: UserContent::Text(text),
                });
            }
        }
        loop {
            if self.turns >= self.max_turns {
                return Ok((self.last_text.clone(), StopReason::MaxTurns));
            }
            // A run whose every step answers at once still lets timers and aborts fire.
            self.agent.dispatcher.pause_if_due().await;
            self.checkpoint()?;
            self.turns += 1;
            self.emit(StreamEvent::TurnStart { turn: self.turns });
            if self.has(HookEvent::StepStart) {
                let payload = EventFields::of(&payloads::StepStart {
                    event: HookEvent::StepStart.name(),
                    session_id: &self.agent.id,
                    operation_id: &self.id,
                    step_index: self.step_index(),
                    steps: self.step_index(),
                });
                self.lifecycle(HookEvent::StepStart, payload, self.caller()).await?;
            }
            self.checkpoint()?;
            self.compact_if_needed().await?;
            self.checkpoint()?;
            let sent = self.conversation.messages().len();
            let Some(reply) = self.call_model_steered().await? else {
                // A `now` input interrupted the answer: what came of it is dropped.
                self.safe_point(false).await?;
                self.emit(StreamEvent::TurnEnd {
                    turn: self.turns,
                    finish_reason: FinishReason::Stop,
                });
                self.step_end("", &[], &[], true).await?;
                continue;
            };
            self.checkpoint()?;
            self.usage.add(reply.usage);
            self.reported = (reply.usage.input_tokens > 0).then_some((reply.usage.input_tokens, sent));
            let ModelReply {
                text,
                tool_calls,
                finish_reason,
                ..
            } = reply;
            self.called_a_tool |= !tool_calls.is_empty();
            self.conversation.push(Message::Assistant {
                content: (!text.is_empty() || tool_calls.is_empty()).then(|| text.clone()),
                tool_calls: tool_calls
                    .iter()
                    .map(|call| AssistantToolCall::new(call.id.clone(), call.name.clone(), call.arguments.clone()))
                    .collect(),
            });
            self.last_text = text.clone();
            let quiet = tool_calls.is_empty() && self.quiet_end(false);
            if !quiet && self.durable.survives() && self.quiet_calls(&tool_calls) {
                // Kept with the turn's first write: a call's start, its pause, or its results.
                let messages = self.conversation.messages();
                self.durable
                    .defer_boundary(messages, &self.agent.config.stored_hooks)
                    .await;
                self.unsaved = true;
            } else if !quiet {
                self.boundary().await?;
            }
            if tool_calls.is_empty() {
                // Inputs that came meanwhile are answered in this request; with none, it is
                // sealed and later ones wait for the next.
                let steered = self.safe_point(true).await?;
                match (quiet, steered) {
                    (true, true) => self.boundary().await?,
                    // The memory store keeps no turn boundaries: nothing waits to be saved.
                    (true, false) => self.unsaved = self.durable.survives(),
                    (false, _) => {}
                }
                self.emit(StreamEvent::TurnEnd {
                    turn: self.turns,
                    finish_reason,
                });
                self.step_end(&text, &tool_calls, &[], steered).await?;
                if steered {
                    continue;
                }
                // An answer the output limit cut says so.
                let stop = match finish_reason {
                    FinishReason::Length => StopReason::MaxTokens,
                    _ => StopReason::Done,
                };
                return Ok((text, stop));
            }
            let ended = self.run_tool_calls(&tool_calls).await;
            self.checkpoint()?;
            if ended.iter().any(|ended| matches!(ended, Ended::Paused(_))) {
                return self.pause(text, &tool_calls, ended).await;
            }
            let mut interrupt = None;
            let mut records = Vec::with_capacity(ended.len());
            for ended in ended {
                if let Ended::Finished(finished) = ended {
                    self.usage.add(finished.spent);
                    interrupt = interrupt.or(finished.interrupt);
                    records.push(finished.record);
                }
            }
            for record in &mut records {
                self.conversation.push(tool_message(record));
                self.emit_result(record);
            }
            if interrupt.is_none() {
                self.safe_point(false).await?;
            }
            self.boundary().await?;
            self.emit(StreamEvent::TurnEnd {
                turn: self.turns,
                finish_reason,
            });
            let more = interrupt.is_none() && self.turns < self.max_turns;
            let first = self.tool_calls.len();
            self.tool_calls.extend(records);
            self.step_end(&text, &tool_calls, &self.tool_calls[first..], more)
                .await?;
            if let Some(denial) = interrupt {
                return Ok((denial, StopReason::Interrupted));
            }
        }
    }

    /// What this model call is told about tools: a forced call (`'required'`, `{ name }`) is
    /// asked for until the model has made one, then `'auto'`, or the loop would never end.
    fn tool_choice(&self) -> Option<ToolChoice> {
        match &self.tool_choice {
            Some(choice) if choice.forces_a_call() && self.called_a_tool => Some(ToolChoice::Auto),
            other => other.clone(),
        }
    }

    /// The model call, unless a `now` input interrupts it first (`None`).
    async fn call_model_steered(&self) -> Result<Option<ModelReply>> {
        let Some(inputs) = &self.inputs else {
            return self.call_model().await.map(Some);
        };
        let step = inputs.step(&self.id);
        tokio::select! {
            biased;
            _ = step.cancelled() => Ok(None),
            reply = self.call_model() => reply.map(Some),
        }
    }

    /// A safe point of the run (a model step or a turn's tools done): says which `now` input
    /// interrupted the step, if one did, then applies the steering inputs waiting for this run
    /// as user messages, each through UserPromptSubmit as the first prompt is; whether there
    /// were any. `seal_if_none`: the request's last safe point.
    async fn safe_point(&mut self, seal_if_none: bool) -> Result<bool> {
        let Some(inputs) = self.inputs.clone() else {
            return Ok(false);
        };
        if let Some(input_id) = inputs.take_interruption(&self.id) {
            self.emit(StreamEvent::TurnInterrupted {
                input_id,
                request_id: self.id.clone(),
                turn: self.turns,
            });
        }
        // No model turn would see them: they wait for the next request (its end says so).
        if self.turns >= self.max_turns {
            return Ok(false);
        }
        // Held until applied: inputs the request could not apply (it failed, or was aborted
        // with this future dropped mid-hook) go back to the inbox.
        let mut claimed = Claimed {
            waiting: inputs.claim(&self.id, seal_if_none).into(),
            inputs,
        };
        let mut applied = false;
        while let Some(input) = claimed.waiting.front().cloned() {
            let checked = match self.user_prompt_submit(input.content).await {
                Ok(content) => self.checkpoint().map(|()| content),
                Err(error) => Err(error),
            };
            let content = match checked {
                Ok(content) => content,
                Err(error) => {
                    // One a hook refused is gone.
                    if error.code == ErrorCode::HookAborted {
                        claimed.waiting.pop_front();
                    }
                    return Err(error);
                }
            };
            claimed.waiting.pop_front();
            applied = true;
            self.conversation.push(Message::User { content });
            self.emit(StreamEvent::InputApplied {
                input_id: input.input_id,
                request_id: self.id.clone(),
                priority: input.priority,
                turn: self.turns + 1,
            });
        }
        Ok(applied)
    }

    async fn call_model(&self) -> Result<ModelReply> {
        let turn = ModelTurn {
            agent: self.agent.clone(),
            model: self.settings.model.clone(),
            messages: self.conversation.messages(),
            turn: self.turns,
            scope: self.scope,
            events: self.events.clone(),
            child: self.settings.child.clone(),
            tool_choice: self.tool_choice(),
        }
        .call();
        let span = tracing::info_span!("model_call", turn = i64::from(self.turns));
        where_models_run(self.settings.model.is_remote(), turn.instrument(span)).await
    }

    /// Runs one turn's tool calls concurrently; results come back in call order, with the first
    /// interrupting denial.
    async fn run_tool_calls(&self, calls: &[ToolCallRequest]) -> Vec<Ended> {
        let inputs: Vec<std::result::Result<Map<String, Value>, String>> =
            calls.iter().map(|call| parse_arguments(&call.arguments)).collect();
        for (call, input) in calls.iter().zip(&inputs) {
            self.emit(StreamEvent::ToolUse(Box::new(ToolUseEvent {
                id: call.id.clone(),
                name: call.name.clone(),
                input: match input {
                    Ok(input) => JsonText::of(input),
                    Err(_) => JsonText::of(&Map::new()),
                },
                agent_path: None,
            })));
        }
        let site = self.site(self.step_index());
        join_all(calls.iter().zip(inputs).enumerate().map(|(index, (call, input))| {
            let span = tracing::info_span!("tool_call", tool = %call.name, tool_call_id = %call.id, status = Empty);
            let finished = span.clone();
            pipeline::run(&site, call, index, input)
                .instrument(span)
                .inspect(move |ended| {
                    let status = match ended {
                        Ended::Finished(done) => done.record.status.name(),
                        Ended::Paused(_) => "paused",
                    };
                    finished.record("status", status);
                })
        }))
        .await
    }

    /// The current model turn's step index. A resumed run goes on counting after the paused
    /// turn, so no two turns of a session's story share one.
    fn step_index(&self) -> u32 {
        self.first_step + self.turns - 1
    }

    /// What a tool call of step `step_index` needs of the run.
    fn site(&self, step_index: u32) -> CallSite<'_> {
        CallSite {
            agent: &self.agent,
            approvals: &self.approvals,
            settings: &self.settings,
            permission: self.permission.get(),
            switches: &self.permission,
            caller: self.caller(),
            step_index,
            operation_id: &self.id,
            events: &self.events,
            durable: &self.durable,
            children: &self.children,
        }
    }

    /// Keeps the session as it is now (with its paused turn, if any), in one transaction. A
    /// sub-agent's run keeps nothing of its own: the root's save holds its paused tree.
    async fn save(&self, paused: Option<&PausedTurn>) -> Result<()> {
        if let Some(child) = &self.settings.child {
            return self.child_boundary(child).await;
        }
        let messages = self.conversation.messages();
        self.durable
            .save(&messages, &self.agent.config.stored_hooks, paused)
            .await
    }

    /// A sub-agent's turn boundary, kept beside the root's session when the store outlives the
    /// process: after a crash the tree goes on from here (§8.7).
    async fn child_boundary(&self, child: &subagents::Child) -> Result<()> {
        if !self.durable.survives() {
            return Ok(());
        }
        let snapshot = RunningChild {
            chain: child.chain.clone(),
            agent_path: child.path.clone(),
            operation_id: self.id.clone(),
            messages: self
                .conversation
                .messages()
                .iter()
                .map(|message| (**message).clone())
                .collect(),
            turns: self.turns,
        };
        self.durable.child_boundary(snapshot).await
    }

    /// The run's last save with the release of its claim, in one write.
    async fn save_and_release(&self) -> Result<()> {
        let messages = self.conversation.messages();
        let paused = self.conversation.paused();
        self.durable
            .save_and_release(&messages, &self.agent.config.stored_hooks, paused.as_ref())
            .await
    }

    /// The run's last save failed: a run that had succeeded fails with it (its pause, never
    /// kept, is dropped), an aborted run's conversation is only not kept; the claim is let go.
    async fn last_save_failed(&mut self, error: SdkError, outcome: &mut Finish) {
        if self.unsaved && outcome.is_ok() {
            if outcome.as_ref().is_ok_and(|(_, stop)| *stop == StopReason::Interrupted) {
                self.conversation.take_paused();
                self.paused = None;
            }
            *outcome = Err(error.clone());
        } else {
            self.agent.log().warn(
                "The run's conversation could not be kept",
                json!({"sessionId": self.agent.id, "error": error.message}),
            );
        }
        if error.code == ErrorCode::SessionLeased {
            self.durable.forget_lease();
        } else if let Err(error) = self.durable.release().await {
            self.release_failed(&error);
        }
    }

    /// Whether nothing but bookkeeping may stand between here and the run's end, so its last
    /// save may wait for the end and go with the release in one write: a root run (a
    /// sub-agent's boundaries are its root's) on which no hook can fire after this point
    /// (StepEnd, TaskCompleted, StopFailure; for a pause HumanInterventionRequest, which must see
    /// the pause kept; for an answer UserPromptSubmit, which a steering input applied at the
    /// request's last safe point would go through). A crash in between is then a crash before
    /// the save: the result is published only once it is written.
    fn quiet_end(&self, pausing: bool) -> bool {
        let after = [HookEvent::StepEnd, HookEvent::TaskCompleted, HookEvent::StopFailure];
        let last = match pausing {
            true => HookEvent::HumanInterventionRequest,
            false => HookEvent::UserPromptSubmit,
        };
        self.settings.child.is_none() && !after.into_iter().chain([last]).any(|event| self.has(event))
    }

    /// Whether nothing can wait between a model turn's reply and its calls' first write, so the
    /// turn's boundary may go with that write (`Durable::started` keeps no call's start before
    /// it): a root run whose calls meet no hook before they start (PreToolUse,
    /// PermissionRequest), no before-control (a webhook it waits for), no permission or
    /// confirmation function of the caller's, and no sub-agent (`Task`), whose turns are kept
    /// beside the root's session.
    fn quiet_calls(&self, calls: &[ToolCallRequest]) -> bool {
        let before = [HookEvent::PreToolUse, HookEvent::PermissionRequest];
        let preset = matches!(
            self.permission.get(),
            None | Some(Permission::Preset(_) | Permission::PlanOver(_))
        );
        self.settings.child.is_none()
            && !calls.is_empty()
            && preset
            && self.agent.config.confirmation.is_none()
            && !before.into_iter().any(|event| self.has(event))
            && !self.agent.dispatcher.has_controls(HookEvent::PreToolUse, &self.context)
            && calls.iter().all(|call| call.name != subagents::TASK_TOOL)
    }

    /// Whether a resumed turn, answered, may be kept with the run's next write (a later turn's
    /// first write, or the release's) instead of in one of its own. Until then the store still
    /// holds the decided pause; a crash meanwhile replays the turn from it and from the effects
    /// ledger, which answers every call that ran, so nothing runs twice. Only when that replay
    /// would show nobody anything and give the same turn:
    /// - the calls are quiet (`quiet_calls`: no hook, control or function of the caller's before
    ///   they start, no sub-agent) and no after-control judges them (the ledger keeps a tool's
    ///   own output, from before after-controls);
    /// - no hook hears of a decision or a result, nor of anything that may happen before the
    ///   next write (the next step's start, a compaction; the run's end, as for `quiet_end`);
    /// - each decided call is answered the same way again: none waits for a deferred result
    ///   (it would be listed as pending again), none runs with an `updatedInput` (the ledger
    ///   answers with the paused input), none is to go through the whole pipeline;
    /// - the ledger holds every result (one it failed to record is saved at once).
    pub(super) fn quiet_resume(&self, calls: &[ToolCallRequest], decided: &[PausedCall]) -> bool {
        let heard = [
            HookEvent::HumanInterventionResult,
            HookEvent::HumanInterventionStop,
            HookEvent::PostToolUse,
            HookEvent::PostToolUseFailure,
            HookEvent::StepStart,
            HookEvent::PreCompact,
            HookEvent::PostCompact,
            HookEvent::CompactFailure,
        ];
        let controlled = self
            .agent
            .dispatcher
            .has_controls(HookEvent::PostToolUse, &self.context);
        let replayed_alike = |call: &PausedCall| {
            call.reason != PendingReason::Deferred
                && !call.rerun
                && call.child.is_none()
                && !matches!(
                    &call.decision,
                    Some(Decision::Approve {
                        updated_input: Some(_),
                        ..
                    })
                )
        };
        self.durable.survives()
            && self.durable.ledger_holds_every_result()
            && self.quiet_calls(calls)
            && self.quiet_end(false)
            && !controlled
            && !heard.into_iter().any(|event| self.has(event))
            && decided.iter().all(replayed_alike)
    }

    /// A turn boundary: kept when the store outlives the process, so a crash loses no turn.
    async fn boundary(&self) -> Result<()> {
        if !self.durable.survives() {
            return Ok(());
        }
        self.save(None).await
    }

    fn emit_result(&self, record: &mut ToolCallRecord) {
        self.emit(StreamEvent::ToolResult(Box::new(ToolResultEvent {
            id: record.id.clone(),
            name: record.name.clone(),
            output: record.output.clone(),
            is_error: record.is_error,
            display: record.display.take(),
            status: record.status,
            classification: record.classification.clone(),
            agent_path: None,
        })));
    }
}

/// Steering inputs a run claimed and has not applied yet: given back to the inbox when dropped.
struct Claimed {
    inputs: Arc<Inputs>,
    waiting: std::collections::VecDeque<PendingInput>,
}

impl Drop for Claimed {
    fn drop(&mut self) {
        if !self.waiting.is_empty() {
            self.inputs.restore(self.waiting.drain(..).collect());
        }
    }
}

/// What a run borrows of its session: the immutable agent, and the few mutable things a run
/// may touch (its store, the conversation, what confirmations were remembered).
#[derive(Clone)]
pub(crate) struct RunParts {
    pub agent: Arc<Agent>,
    pub durable: Arc<Durable>,
    pub conversation: Arc<Conversation>,
    pub approvals: Arc<Remembered>,
    /// Where a plan-mode switch goes for the session's next runs (none for a sub-agent's run).
    pub switched: Option<Arc<Switched>>,
}

/// How a run begins: with a prompt, or by going on with a paused turn.
pub(crate) enum Start {
    Prompt(UserContent),
    Resume,
    /// A TaskCompleted hook's `decision: 'block'`: its reason, as the next user message.
    Instruction(String),
}

/// A finished call's result as the conversation keeps it.
fn tool_message(record: &ToolCallRecord) -> Message {
    Message::Tool {
        tool_call_id: record.id.clone(),
        content: record.output.clone(),
        is_error: record.is_error,
    }
}

/// How a run ended, as TaskCompleted's `reason` and the run span's `stop_reason` say it.
fn reason(outcome: &Finish) -> &'static str {
    match outcome {
        Ok((_, stop)) => stop.name(),
        Err(error) if error.code == ErrorCode::Abort => "aborted",
        Err(_) => "error",
    }
}

/// The model's argument text as a JSON object; empty text means no arguments.
fn parse_arguments(text: &str) -> std::result::Result<Map<String, Value>, String> {
    if text.trim().is_empty() {
        return Ok(Map::new());
    }
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(other) => Err(format!("arguments must be a JSON object (got {})", describe(&other))),
        Err(error) => Err(format!("arguments are not valid JSON: {error}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_must_be_a_json_object() {
        assert_eq!(parse_arguments("").unwrap(), Map::new());
        assert_eq!(parse_arguments("{\"a\":1}").unwrap()["a"], 1);
        assert_eq!(
            parse_arguments("[1]").unwrap_err(),
            "arguments must be a JSON object (got an array)"
        );
        assert_eq!(
            parse_arguments("{\"a\":").unwrap_err(),
            "arguments are not valid JSON: EOF while parsing a value at line 1 column 5"
        );
    }
}
