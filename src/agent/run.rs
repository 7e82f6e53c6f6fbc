//! The loop of one `send`: UserPromptSubmit → { model turn → tool calls } until the model
//! answers without tool calls, `maxTurns` is reached or a denial interrupts → TaskCompleted.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::future::{join_all, BoxFuture};
use futures::FutureExt;
use serde_json::{json, Map, Value};
use tracing::field::Empty;
use tracing::Instrument;

use super::approvals::{self, Decision, PausedCall, PausedTurn, TurnCall};
use super::compaction;
use super::confirm::Approvals;
use super::control::{RunControl, SendOptions};
use super::conversation::Conversation;
use super::durable::{self, Durable};
use super::events::{
    PendingApproval, PendingReason, PromptResult, StopReason, StreamEvent, TokenUsage, ToolCallRecord,
};
use super::parts::Agent;
use super::payloads;
use super::pipeline::{self, CallSite, ChildRun, Children, Ended};
use super::reader::EventSender;
use super::settings::RunSettings;
use super::subagents::{self, Child};
use super::tree::{Nursery, Tree};
use crate::error::{ErrorCode, Result, SdkError};
use crate::hooks::apply;
use crate::hooks::dispatch::{Caller, Dispatched, EventInput, HookContext, HookError};
use crate::hooks::environment;
use crate::hooks::output::Action;
use crate::hooks::pending::SETTLE_GRACE;
use crate::hooks::{EventFields, HookEvent};
use crate::host::ScopeId;
use crate::ids;
use crate::js_value::describe;
use crate::model::{
    AssistantToolCall, FinishReason, Message, Model, ModelReply, ModelRequest, ToolCallRequest, ToolChoice, Usage,
    UserContent,
};
use crate::offload::offload;
use crate::store;

pub(crate) struct Run {
    agent: Arc<Agent>,
    /// Where the session is kept: pauses, turn boundaries, the effects ledger.
    durable: Arc<Durable>,
    /// The only mutable part of the session a run touches.
    conversation: Arc<Conversation>,
    approvals: Arc<Approvals>,
    control: Arc<RunControl>,
    events: EventSender,
    /// The session's settings when the run started (`setModel` and the like apply later).
    settings: RunSettings,
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
        store::delivery::remember_environment(&options.environment);
        let context = HookContext {
            extra,
            queue: Some(parts.durable.clone()),
            environment: Arc::new(options.environment),
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
        } = parts;
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
            settings,
            started: std::time::Instant::now(),
            scope,
            id: ids::uuid(),
            turns: 0,
            tool_choice: None,
            called_a_tool: false,
            usage: Usage::default(),
            tool_calls: Vec::new(),
            context,
            setup_error: None,
            last_text: String::new(),
            paused: None,
            reported: None,
            first_step: 0,
            span,
            children: SubRuns(tree),
            nursery: None,
        }
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

    /// A lifecycle event: observers only, but a critical delivery failure fails the run.
    async fn lifecycle(&self, event: HookEvent, payload: EventFields, caller: Caller<'_>) -> Result<()> {
        self.dispatch(event, payload, caller).await.map(drop)
    }

    /// Dispatches a run event and hands back what its hooks answered.
    async fn dispatch(&self, event: HookEvent, payload: EventFields, caller: Caller<'_>) -> Result<Dispatched> {
        self.agent
            .dispatcher
            .dispatch(EventInput::of(event, payload), caller)
            .await
            .map_err(HookError::into_sdk)
    }

    /// Runs to the end and publishes the outcome as the last event.
    pub async fn drive(mut self, start: Start) {
        let control = self.control.clone();
        // A run is first polled on a turn of its own: its slice of the event loop starts now.
        self.agent.dispatcher.pace().restart(std::time::Instant::now());
        if !control.is_admitted() {
            if let Err(refusal) = self.prepare(&start).await {
                self.refuse(refusal).await;
                return;
            }
            control.admit(Ok(()));
        }
        // Why the run was stopped from outside, when it was: its claim lost, or a critical
        // queued notification given up.
        let stopped = Arc::new(std::sync::OnceLock::new());
        // The memory store's claims do not expire (no process can die holding one).
        let renewal = self
            .durable
            .survives()
            .then(|| offload(keep_claim(self.durable.clone(), control.clone(), stopped.clone())));
        let watch = self.agent.dispatcher.registry().has_critical_queued().then(|| {
            let (control, stopped) = (control.clone(), stopped.clone());
            store::delivery::watch_operation(
                &self.id,
                Box::new(move |hook_id: &str, cause: &str| {
                    let critical = HookError::Critical {
                        hook_id: hook_id.to_owned(),
                        cause: cause.to_owned(),
                    };
                    stop(&control, &stopped, critical.into_sdk());
                }),
            )
        });
        let mut outcome = match self.nursery.take() {
            Some(nursery) => nursery.alongside(self.conclude(start)).await,
            None => self.conclude(start).await,
        };
        drop((renewal, watch));
        let aborted = matches!(&outcome, Err(error) if error.code == ErrorCode::Abort);
        if let (Some(stopped), Err(error)) = (stopped.get(), &mut outcome) {
            // Aborted from outside: said as what it was.
            *error = stopped.clone();
        }
        // An aborted run's open calls were answered in memory (§2); kept (unless the claim is
        // lost), so the next agent to claim the session finds the conversation as this one does.
        let lost = matches!(&outcome, Err(error) if error.code == ErrorCode::SessionLeased);
        if aborted && !lost && self.durable.survives() && self.conversation.paused().is_none() {
            if let Err(error) = self.save(None).await {
                self.agent.log().warn(
                    "The aborted run's conversation could not be kept",
                    json!({"sessionId": self.agent.id, "error": error.message}),
                );
            }
        }
        // Released before the result is published: whoever sees it may claim the session. A
        // lost claim is no longer this run's to release (and a silent store would hold the
        // result back for the release's deadline).
        if lost {
            self.durable.forget_lease();
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

    /// Prepares the run at once when nothing in it waits (the memory store's operations are a
    /// lock and a map): `Some(Ok)` and the run is accepted, `Some(Err)` and it was refused (and is
    /// over), `None` when it must be driven to know.
    pub fn prepare_now(&mut self, start: &Start) -> Option<Result<()>> {
        if self.durable.survives() {
            return None;
        }
        let prepared = self.prepare(start).now_or_never()?;
        match prepared {
            Ok(()) => self.control.admit(Ok(())),
            Err(ref refusal) => {
                // The memory store releases in place too.
                let _ = self.refuse(refusal.clone()).now_or_never();
            }
        }
        Some(prepared)
    }

    /// A refused run: its claim (if it got one) released, the session free for the next `send`.
    async fn refuse(&self, refusal: SdkError) {
        if let Err(error) = self.durable.release().await {
            self.release_failed(&error);
        }
        self.conversation.finish(&self.control, None);
        self.control.admit(Err(refusal));
        self.control.finish();
    }

    /// Before `send` resolves: the session's claim, a fresh copy of the session when another
    /// agent drove it since this one last did (or when a paused turn may have been decided
    /// elsewhere), and whether this start is possible now.
    async fn prepare(&self, start: &Start) -> Result<()> {
        let claimed = self.durable.claim().await?;
        let recovered = self.durable.take_recovered();
        if claimed.stale && self.durable.survives() {
            // Another agent drove the session since: its state, read again (and recovered).
            self.refresh().await?;
        } else {
            if recovered {
                // The turn rebuilt after a crash replaces what the store holds (its old decisions).
                let paused = self.conversation.paused();
                self.save(paused.as_ref()).await?;
            }
            if self
                .conversation
                .paused()
                .is_some_and(|turn| !turn.undecided().is_empty())
            {
                // Decisions may have been taken elsewhere: any process may decide.
                for (tool_call_id, decision) in self.durable.decisions().await? {
                    self.conversation.decide(&tool_call_id, decision);
                }
            }
        }
        let paused = self.conversation.paused();
        match (start, paused) {
            (Start::Prompt(_), Some(turn)) => Err(turn.pending_error("send")),
            (Start::Resume, None) => Err(SdkError::new(
                ErrorCode::NothingToResume,
                "There is nothing to resume: no run is paused",
            )),
            (Start::Resume, Some(turn)) if !turn.undecided().is_empty() => Err(turn.pending_error("resume")),
            _ => Ok(()),
        }
    }

    /// The session as the store has it, under this run's claim: decisions taken elsewhere, and
    /// what another agent's runs did (recovered when one of them died mid-turn).
    async fn refresh(&self) -> Result<()> {
        let Some(stored) = self.durable.reload().await? else {
            // Never saved: nothing anyone else did is kept.
            return Ok(());
        };
        let resumed = durable::resumed_turn(&stored, &self.agent.config.tools, true)?;
        let changed = resumed.as_ref().is_some_and(|resumed| resumed.changed);
        let turn = resumed.map(|resumed| resumed.turn);
        durable::install(&self.conversation, stored.record.messages, turn.clone());
        if changed {
            self.save(turn.as_ref()).await?;
        }
        Ok(())
    }

    fn release_failed(&self, error: &SdkError) {
        self.agent.log().warn(
            "The session's lease could not be released: it expires on its own",
            json!({"sessionId": self.agent.id, "error": error.message}),
        );
    }

    /// Runs a sub-agent to the end: its final text, or why it failed. Boxed with its type
    /// spelled out: a sub-agent's run holds the `Task` call that may start another.
    pub fn drive_child(mut self, prompt: String) -> BoxFuture<'static, (Result<String>, Usage)> {
        Box::pin(async move {
            let control = self.control.clone();
            let outcome = self.conclude(Start::Prompt(UserContent::Text(prompt))).await;
            control.finish();
            (outcome.map(|(text, _)| text), self.usage)
        })
    }

    /// The run's steps, then the events of its end (TaskCompleted, StopFailure) and its span.
    async fn conclude(&mut self, start: Start) -> Finish {
        let control = self.control.clone();
        let description = match &start {
            Start::Prompt(content) => content.text(),
            Start::Resume => self.conversation.last_prompt(),
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
        let outcome = self.task_completed(outcome, &description).await;
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
                let content = self.user_prompt_submit(content).await?;
                self.checkpoint()?;
                self.conversation.push(Message::User { content });
            }
            Start::Resume => {
                if let Some(finished) = self.resume_turn().await? {
                    return Ok(finished);
                }
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
            let reply = self.call_model().await?;
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
            self.boundary().await?;
            if tool_calls.is_empty() {
                self.emit(StreamEvent::TurnEnd {
                    turn: self.turns,
                    finish_reason,
                });
                self.step_end(&text, &tool_calls, &[], false).await?;
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

    /// The prompt the next model call would send, in tokens: the last call's reported count plus
    /// an estimate for what was added since (all of it estimated before the first report).
    fn prompt_tokens(&self, messages: &[Arc<Message>]) -> u64 {
        match self.reported {
            Some((tokens, sent)) if sent <= messages.len() => tokens + compaction::estimate_tokens(&messages[sent..]),
            _ => {
                let system = self.agent.config.system_prompt.as_deref().map_or(0, str::len) as u64;
                compaction::estimate_tokens(messages) + system.div_ceil(4)
            }
        }
    }

    /// Compaction (SPEC §8.5): when the next call would pass the threshold, older messages
    /// become one summary. Only an abort stops the run; a failed summary leaves the
    /// conversation as it was.
    async fn compact_if_needed(&mut self) -> Result<()> {
        let Some(compaction) = self.agent.config.compaction.clone() else {
            return Ok(());
        };
        let messages = self.conversation.messages();
        let token_count = self.prompt_tokens(&messages);
        if token_count < compaction.threshold_tokens {
            return Ok(());
        }
        let Some(split) = compaction::split_point(&messages, compaction.keep_recent_turns) else {
            return Ok(());
        };
        let step_index = self.step_index();
        if self.has(HookEvent::PreCompact) {
            let payload = EventFields::of(&payloads::PreCompact {
                event: HookEvent::PreCompact.name(),
                session_id: &self.agent.id,
                operation_id: &self.id,
                step_index,
                message_count: messages.len(),
                token_count,
            });
            let dispatched = self.dispatch(HookEvent::PreCompact, payload, self.caller()).await?;
            if dispatched.outputs.iter().any(|output| output.action == Action::Abort) {
                return Ok(());
            }
            self.checkpoint()?;
        }
        let older = messages[..split].to_vec();
        let config = &self.agent.config;
        let writer = compaction::Writer {
            host: self.agent.host.clone(),
            model: self.settings.model.clone(),
            system_prompt: config.system_prompt.clone(),
            temperature: config.temperature,
            max_output_tokens: config.max_output_tokens,
            turn: self.turns,
            scope: self.scope,
        };
        let by_model = compaction.summarize.is_none();
        let summary = async move { compaction::summarize(&compaction, &writer, &older).await }
            .instrument(tracing::info_span!("compaction", messages = split as i64));
        let summarized = where_models_run(by_model && self.settings.model.is_remote(), summary).await;
        self.checkpoint()?;
        match summarized {
            Ok((summary, usage)) => {
                self.usage.add(usage);
                let mut compacted = Vec::with_capacity(messages.len() - split + 1);
                compacted.push(Arc::new(compaction::summary_message(&summary)));
                compacted.extend(messages[split..].iter().cloned());
                let messages_after = compacted.len();
                self.conversation.replace(Arc::new(compacted));
                self.reported = None;
                self.boundary().await?;
                if self.has(HookEvent::PostCompact) {
                    let group_id = ids::uuid();
                    let payload = EventFields::of(&payloads::PostCompact {
                        event: HookEvent::PostCompact.name(),
                        session_id: &self.agent.id,
                        operation_id: &self.id,
                        step_index,
                        group_id: &group_id,
                        messages_before: messages.len(),
                        messages_after,
                        summary: &summary,
                    });
                    self.lifecycle(HookEvent::PostCompact, payload, self.caller()).await?;
                }
            }
            Err(error) if error.code == ErrorCode::Abort => return Err(error),
            Err(error) => {
                self.agent.dispatcher.log().warn(
                    "compaction failed; the run goes on uncompacted",
                    json!({"error": error.message}),
                );
                if self.has(HookEvent::CompactFailure) {
                    let payload = EventFields::of(&payloads::CompactFailure {
                        event: HookEvent::CompactFailure.name(),
                        session_id: &self.agent.id,
                        operation_id: &self.id,
                        step_index,
                        error: &error.message,
                        token_count,
                    });
                    self.lifecycle(HookEvent::CompactFailure, payload, self.caller())
                        .await?;
                }
            }
        }
        Ok(())
    }

    /// UserPromptSubmit may rewrite the prompt or abort it; its errors fail the run unchanged.
    async fn user_prompt_submit(&self, content: UserContent) -> Result<UserContent> {
        if !self.has(HookEvent::UserPromptSubmit) {
            return Ok(content);
        }
        let images = content.image_count();
        let payload = EventFields::of(&payloads::UserPromptSubmit {
            event: HookEvent::UserPromptSubmit.name(),
            session_id: &self.agent.id,
            user_prompt: &content.text(),
            has_images: images > 0,
            image_count: images,
            operation_id: &self.id,
        });
        let dispatched = self
            .dispatch(HookEvent::UserPromptSubmit, payload, self.caller())
            .await?;
        apply::user_prompt_submit(&dispatched.outputs, content)
            .map_err(|message| SdkError::new(ErrorCode::HookAborted, message))
    }

    /// TaskCompleted, once the run's outcome is known. For a run that succeeded, its abort or
    /// error becomes the run's; for one that failed, the original error stays and the hook's
    /// failure is logged.
    async fn task_completed(&self, outcome: Finish, description: &str) -> Finish {
        if !self.has(HookEvent::TaskCompleted) {
            return outcome;
        }
        let (success, summary) = match &outcome {
            // A cut answer is still the run's answer: the reason says it was cut.
            Ok((content, stop)) => (
                matches!(stop, StopReason::Done | StopReason::MaxTokens),
                content.clone(),
            ),
            Err(error) => (false, error.message.clone()),
        };
        let payload = EventFields::of(&payloads::TaskCompleted {
            event: HookEvent::TaskCompleted.name(),
            session_id: &self.agent.id,
            task_id: &self.id,
            task_description: description,
            result_summary: &summary,
            success,
            reason: reason(&outcome),
            operation_id: &self.id,
            last_assistant_content: &self.last_text,
            totals: self.totals(),
        });
        // After an abort the caller's signal has fired; the hook still gets its own budget.
        let caller = if outcome.is_ok() {
            self.caller()
        } else {
            self.detached()
        };
        let input = EventInput::of(HookEvent::TaskCompleted, payload);
        let dispatched = self.agent.dispatcher.dispatch(input, caller).await;
        match (outcome, dispatched) {
            (Ok(finished), Ok(dispatched)) => match apply::first_abort(&dispatched.outputs, HookEvent::TaskCompleted) {
                Some(message) => Err(SdkError::new(ErrorCode::HookAborted, message)),
                None => Ok(finished),
            },
            (Ok(_), Err(HookError::Cancelled)) => Err(SdkError::new(ErrorCode::Abort, self.control.reason())),
            (Ok(_), Err(error)) => Err(error.into_sdk()),
            (Err(original), Err(error)) => {
                self.agent.dispatcher.log().warn(
                    "TaskCompleted hook failed after the run failed; keeping the run's error",
                    json!({"error": error.message()}),
                );
                Err(original)
            }
            (Err(original), Ok(_)) => Err(original),
        }
    }

    /// StepEnd: the step's text, tool calls and results, and the run's totals so far.
    async fn step_end(
        &self,
        text: &str,
        calls: &[ToolCallRequest],
        records: &[ToolCallRecord],
        more: bool,
    ) -> Result<()> {
        if !self.has(HookEvent::StepEnd) {
            return Ok(());
        }
        let payload = EventFields::of(&payloads::StepEnd {
            event: HookEvent::StepEnd.name(),
            session_id: &self.agent.id,
            operation_id: &self.id,
            step_index: self.step_index(),
            step_type: if calls.is_empty() { "call_llm" } else { "call_tool" },
            content: text,
            tool_calls: calls.iter().map(payloads::StepToolCall::of).collect(),
            tools_result: records,
            should_continue: more,
            totals: self.totals(),
        });
        self.lifecycle(HookEvent::StepEnd, payload, self.caller()).await
    }

    /// StopFailure, when the run failed: the error's message and detail. Its own failures are
    /// logged; the run's error stands.
    async fn stop_failure(&self, error: &SdkError) {
        if !self.has(HookEvent::StopFailure) {
            return;
        }
        let payload = EventFields::of(&payloads::StopFailure {
            event: HookEvent::StopFailure.name(),
            session_id: &self.agent.id,
            operation_id: &self.id,
            reason: "error",
            error_message: &error.message,
            error_type: error.code.code(),
            error_detail: error,
            last_assistant_content: &self.last_text,
            totals: self.totals(),
        });
        if let Err(failure) = self.lifecycle(HookEvent::StopFailure, payload, self.detached()).await {
            self.agent.dispatcher.log().warn(
                "StopFailure hook failed; keeping the run's error",
                json!({"error": failure.message}),
            );
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
            self.emit(StreamEvent::ToolUse {
                id: call.id.clone(),
                name: call.name.clone(),
                input: Value::Object(input.clone().unwrap_or_default()),
                agent_path: None,
            });
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
            caller: self.caller(),
            step_index,
            operation_id: &self.id,
            events: &self.events,
            durable: &self.durable,
            children: &self.children,
        }
    }

    /// Keeps the session as it is now (with its paused turn, if any), in one transaction.
    async fn save(&self, paused: Option<&PausedTurn>) -> Result<()> {
        let messages = self.conversation.messages();
        self.durable
            .save(&messages, &self.agent.config.stored_hooks, paused)
            .await
    }

    /// A turn boundary: kept when the store outlives the process, so a crash loses no turn.
    async fn boundary(&self) -> Result<()> {
        if !self.durable.survives() {
            return Ok(());
        }
        self.save(None).await
    }

    fn emit_result(&self, record: &mut ToolCallRecord) {
        self.emit(StreamEvent::ToolResult {
            id: record.id.clone(),
            name: record.name.clone(),
            output: record.output.clone(),
            is_error: record.is_error,
            display: record.display.take(),
            status: record.status,
            classification: record.classification.clone(),
            agent_path: None,
        });
    }

    /// Some calls of the turn wait for a person (§8.1): the turn's finished calls are reported,
    /// the pause is kept (before anything is announced), HumanInterventionRequest fires, and
    /// the run ends `interrupted` with the pending approvals. The turn's tool messages wait
    /// until every call has its result.
    async fn pause(&mut self, text: String, calls: &[ToolCallRequest], ended: Vec<Ended>) -> Finish {
        let mut results = Vec::with_capacity(ended.len());
        let mut pending = Vec::new();
        for ended in ended {
            match ended {
                Ended::Finished(mut finished) => {
                    self.emit_result(&mut finished.record);
                    self.tool_calls.push(finished.record.clone());
                    results.push(Some(finished.record));
                }
                Ended::Paused(call) => {
                    results.push(None);
                    pending.push(call);
                }
            }
        }
        let turn = PausedTurn {
            operation_id: self.id.clone(),
            step_index: self.step_index(),
            text: text.clone(),
            calls: calls.iter().map(TurnCall::of).collect(),
            results,
            pending,
        };
        self.repause(text, turn).await
    }

    /// Keeps `turn` as the session's pause, tells HumanInterventionRequest, and ends the run
    /// `interrupted`.
    async fn repause(&mut self, text: String, turn: PausedTurn) -> Finish {
        // Kept before anything is announced: a person may answer from another process.
        self.save(Some(&turn)).await?;
        self.conversation.pause(turn.clone());
        self.paused = Some(turn.approvals(&self.agent.id, self.agent.config.approval_secret.as_deref()));
        if self.has(HookEvent::HumanInterventionRequest) {
            let pending_tools = turn.pending.iter().map(payloads::PendingTool::of).collect();
            let payload = EventFields::of(&payloads::HumanInterventionRequest {
                event: HookEvent::HumanInterventionRequest.name(),
                session_id: &self.agent.id,
                operation_id: &self.id,
                step_index: turn.step_index,
                pending_tools,
            });
            self.lifecycle(HookEvent::HumanInterventionRequest, payload, self.caller())
                .await?;
        }
        Ok((text, StopReason::Interrupted))
    }

    /// Goes on with the paused turn: each decided call, in order, after its
    /// HumanInterventionResult (HumanInterventionStop for a rejection that stops the run);
    /// then the whole turn's tool messages in call order. `Some` when the run ends here.
    async fn resume_turn(&mut self) -> Result<Option<(String, StopReason)>> {
        let Some(turn) = self.conversation.take_paused() else {
            return Err(SdkError::new(
                ErrorCode::NothingToResume,
                "There is nothing to resume: no run is paused",
            ));
        };
        self.first_step = turn.step_index + 1;
        // The paused turn's calls were the model's: a forced `toolChoice` is spent.
        self.called_a_tool = true;
        let requests: Vec<ToolCallRequest> = turn.calls.iter().map(TurnCall::request).collect();
        let mut results = turn.results.clone();
        let mut resumed = Vec::with_capacity(turn.pending.len());
        let mut still_waiting = Vec::new();
        let mut interrupt = None;
        for call in &turn.pending {
            self.checkpoint()?;
            let site = self.site(turn.step_index);
            if call.reason == PendingReason::Deferred {
                // Its result comes from `completeToolCall`, hooks already run; until then it waits.
                match self.durable.deferred_result(&call.tool_call_id).await? {
                    Some(result) => {
                        resumed.push(call.index);
                        results[call.index] = Some(ToolCallRecord::stored(
                            &call.tool_call_id,
                            &call.tool_name,
                            Value::Object(call.input.clone()),
                            result.output,
                            result.is_error,
                        ));
                    }
                    None => still_waiting.push(call.clone()),
                }
                continue;
            }
            let ended = if call.rerun {
                // The process died before this call started: it goes through the whole
                // pipeline, and may pause again.
                let input = parse_arguments(&requests[call.index].arguments);
                pipeline::run(&site, &requests[call.index], call.index, input).await
            } else {
                let refusal = approvals::approval_refusal(
                    call,
                    &requests[call.index],
                    &self.agent.id,
                    self.agent.config.approval_secret.as_deref(),
                );
                // A refused approval is nobody's decision: no HumanInterventionResult for it.
                if refusal.is_none() {
                    self.intervention_result(&turn, call).await?;
                }
                self.checkpoint()?;
                pipeline::resume(&site, &requests[call.index], call, refusal).await
            };
            let finished = match ended {
                Ended::Finished(finished) => finished,
                Ended::Paused(paused) => {
                    still_waiting.push(paused);
                    continue;
                }
            };
            self.usage.add(finished.spent);
            interrupt = interrupt.or(finished.interrupt);
            resumed.push(call.index);
            results[call.index] = Some(finished.record);
        }
        self.checkpoint()?;
        for index in &resumed {
            if let Some(record) = &mut results[*index] {
                self.emit_result(record);
                self.tool_calls.push(record.clone());
            }
        }
        if !still_waiting.is_empty() {
            let text = turn.text.clone();
            let paused = PausedTurn {
                operation_id: self.id.clone(),
                results,
                pending: still_waiting,
                ..turn
            };
            return self.repause(text, paused).await.map(Some);
        }
        for record in results.iter().flatten() {
            self.conversation.push(tool_message(record));
        }
        self.last_text = turn.text;
        // The pause is over: the store forgets it (and keeps the answered turn).
        self.save(None).await?;
        Ok(interrupt.map(|text| (text, StopReason::Interrupted)))
    }

    /// HumanInterventionResult just before a decided call goes on, or HumanInterventionStop for
    /// a rejection that ends the run.
    async fn intervention_result(&self, turn: &PausedTurn, call: &PausedCall) -> Result<()> {
        let stops = matches!(call.decision, Some(Decision::Reject { stop: true, .. }));
        let event = if stops {
            HookEvent::HumanInterventionStop
        } else {
            HookEvent::HumanInterventionResult
        };
        if !self.has(event) {
            return Ok(());
        }
        let payload = EventFields::of(&payloads::HumanInterventionResult {
            event: event.name(),
            session_id: &self.agent.id,
            operation_id: &self.id,
            step_index: turn.step_index,
            action: match call.decision {
                Some(Decision::Approve { .. }) => "approve",
                _ => "reject",
            },
            tool_call_id: &call.tool_call_id,
            tool_name: &call.tool_name,
        });
        self.lifecycle(event, payload, self.caller()).await
    }
}

/// What a run borrows of its session: the immutable agent, and the few mutable things a run
/// may touch (its store, the conversation, what confirmations were remembered).
#[derive(Clone)]
pub(crate) struct RunParts {
    pub agent: Arc<Agent>,
    pub durable: Arc<Durable>,
    pub conversation: Arc<Conversation>,
    pub approvals: Arc<Approvals>,
}

/// Stops a run from outside it with `error`, which its result reports. Why first: the run, once
/// aborted, may end and look for it at once.
fn stop(control: &RunControl, stopped: &std::sync::OnceLock<SdkError>, error: SdkError) {
    let message = error.message.clone();
    let _ = stopped.set(error);
    control.abort(message);
}

/// Renews a run's claim on its session while the run lasts (dropped with it). A claim found lost
/// — expired while renewals failed, or taken by another agent — aborts the run: its writes would
/// be refused, and another agent may be driving the session. A renewal has a third of the TTL to
/// answer; one that fails or does not answer is tried again soon (100 ms), until the TTL has passed
/// since the last one that did: a silent store stops the run about one TTL after its last word.
async fn keep_claim(durable: Arc<Durable>, control: Arc<RunControl>, stopped: Arc<std::sync::OnceLock<SdkError>>) {
    let every = durable.renew_every();
    let mut wait = every;
    loop {
        tokio::time::sleep(wait).await;
        let now = tokio::time::Instant::now();
        let left = durable
            .expires()
            .map_or(Duration::ZERO, |expires| expires.saturating_duration_since(now));
        let why = match durable.renew(every.min(left).max(Duration::from_millis(1))).await {
            Ok(true) => {
                wait = every;
                continue;
            }
            Ok(false) => {
                "was taken over by another agent, or its lease expired, while this run drove it: the run stopped"
            }
            Err(_)
                if durable
                    .expires()
                    .is_some_and(|expires| tokio::time::Instant::now() < expires) =>
            {
                // Again soon, not in a tight loop when the store refuses at once.
                wait = every.min(Duration::from_millis(100));
                continue;
            }
            Err(_) => {
                "could not be kept: its lease expired while the store could not be reached to renew it: the run stopped"
            }
        };
        stop(&control, &stopped, durable::session_leased(durable.session_id(), why));
        return;
    }
}

/// Starts sub-agents as runs of the same agent, with a conversation of their own kept in memory
/// only (a sub-agent's run is not resumed on its own), each a task of the root's tree.
struct SubRuns(Arc<Tree>);

impl Children for SubRuns {
    fn claim(&self) -> bool {
        self.0.claim()
    }

    fn start(&self, child: ChildRun) -> (String, BoxFuture<'static, (Result<String>, Usage)>) {
        let ChildRun {
            agent,
            approvals,
            settings,
            control,
            events,
            scope,
            context,
            prompt,
        } = child;
        let parts = RunParts {
            durable: Arc::new(Durable::new(store::StoreConfig::Memory, agent.id.clone(), 1)),
            agent,
            conversation: Arc::new(Conversation::default()),
            approvals,
        };
        let run = Run::child(parts, settings, control.clone(), events, scope, context, self.0.clone());
        let id = run.id().to_string();
        // Stopped with its parent's run, or when the `Task` call lets go of it.
        let joined = self.0.run(run.drive_child(prompt), control.token().clone());
        let outcome = async move {
            joined
                .await
                .unwrap_or_else(|| (Err(SdkError::new(ErrorCode::Abort, control.reason())), Usage::default()))
        };
        (id, Box::pin(outcome))
    }
}

/// How a run begins: with a prompt, or by going on with a paused turn.
pub(crate) enum Start {
    Prompt(UserContent),
    Resume,
}

/// A finished call's result as the conversation keeps it.
fn tool_message(record: &ToolCallRecord) -> Message {
    Message::Tool {
        tool_call_id: record.id.clone(),
        content: record.output.clone(),
        is_error: record.is_error,
    }
}

/// Runs a model exchange: an HTTP one on the workers, so its SSE parsing stays off the thread
/// that polls the run (the JS thread); anything else in place.
async fn where_models_run<T: Send + 'static>(
    remote: bool,
    exchange: impl Future<Output = Result<T>> + Send + 'static,
) -> Result<T> {
    if !remote {
        return exchange.await;
    }
    offload(exchange)
        .await
        .unwrap_or_else(|error| Err(SdkError::model(format!("Model request task failed: {error}"))))
}

/// One model call over the conversation `messages`; content deltas are published as they come.
struct ModelTurn {
    agent: Arc<Agent>,
    model: Arc<dyn Model>,
    messages: Arc<Vec<Arc<Message>>>,
    turn: u32,
    scope: ScopeId,
    events: EventSender,
    child: Option<Arc<Child>>,
    tool_choice: Option<ToolChoice>,
}

impl ModelTurn {
    async fn call(self) -> Result<ModelReply> {
        let ModelTurn {
            agent,
            model,
            messages,
            turn,
            scope,
            events,
            child,
            tool_choice,
        } = self;
        let config = &agent.config;
        // A sub-agent has its own prompt and tools, and its text is its answer to the parent, not
        // part of the parent's stream.
        let (system_prompt, tools) = match &child {
            Some(child) => (child.system_prompt.as_deref(), child.tool_schemas.as_slice()),
            None => (config.system_prompt.as_deref(), agent.tool_schemas()),
        };
        if let Some(ToolChoice::Tool(name)) = &tool_choice {
            if !tools.iter().any(|tool| &tool.name == name) {
                let offered: Vec<&str> = tools.iter().map(|tool| tool.name.as_str()).collect();
                return Err(SdkError::config(format!(
                    "toolChoice names the tool \"{name}\", which the model is not offered (offered: {})",
                    if offered.is_empty() {
                        "none".to_string()
                    } else {
                        offered.join(", ")
                    }
                )));
            }
        }
        let request = ModelRequest {
            system_prompt,
            messages: &messages,
            tools,
            temperature: config.temperature,
            max_output_tokens: config.max_output_tokens,
            tool_choice: tool_choice.as_ref(),
            turn,
            scope,
        };
        let streams = child.is_none();
        let mut on_text = move |delta: &str| {
            if streams {
                events.send(StreamEvent::Content {
                    delta: delta.to_string(),
                });
            }
        };
        model.complete(request, &mut on_text).await
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
