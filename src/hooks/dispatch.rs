//! Ordered dispatch: the callbacks of one event run one at a time, in registration order, each
//! with a copy of the same input, under one wall-clock budget for the whole event. Every result
//! is collected before any is applied; a callback that throws, times out or returns something
//! that is not a hook output stops the dispatch.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use serde_json::{json, Map, Value};
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::field::Empty;
use tracing::Instrument;

use super::command::{self, Ran};
use super::fields::EventFields;
use super::observer::Observer;
use super::output::{Action, HookOutput};
use super::pending::{Owner, Pending, TrackedCall};
use super::registry::{Entry, External, HookObject, Registry};
use super::span::{finish_span, HookSpan};
use crate::error::{Detail, ErrorCode, HookTimeout, SdkError};
use crate::hook_event::HookEvent;
use crate::host::{
    AbortReason, Args, Callable, DispatchId, DispatchSignal, ErrorSlot, Host, HostCall, HostError, HostFuture, Reply,
    ScopeId, SignalSlot, ThrownId,
};
use crate::log::Log;
use crate::pace::Pace;
use crate::store::outbox::{idempotency_key, Enqueue, Queued, Target};
use crate::webhook::deliver::{deliver, ControlAnswer, Environment};
use crate::webhook::payload;
use crate::webhook::{Delivery, Handling, WebhookConfig};

pub const CLEANING_UP: &str = "An inline hook callback is still cleaning up";

/// Why a dispatch (or a guarded call) failed.
#[derive(Debug, Clone, PartialEq)]
pub enum HookError {
    /// The callback threw or rejected.
    Thrown(HostError),
    /// The budget ran out (`HOOK_TIMEOUT`).
    Timeout(SdkError),
    /// The caller's signal aborted.
    Cancelled,
    /// A callback abandoned earlier is still running (what it is: `hook "audit"`).
    CleaningUp(String),
    /// A callback returned something that is not a hook output.
    Invalid(SdkError),
    /// A webhook with `fallback: 'none'` failed; the first such hook and why.
    Critical { hook_id: String, cause: String },
}

impl HookError {
    /// What went wrong, in a word (tracing's `outcome`).
    pub fn kind(&self) -> &'static str {
        match self {
            HookError::Thrown(_) => "threw",
            HookError::Timeout(_) => "timeout",
            HookError::Cancelled => "cancelled",
            HookError::CleaningUp(_) => "cleaning_up",
            HookError::Invalid(_) => "invalid_output",
            HookError::Critical { .. } => "critical_delivery_failed",
        }
    }

    pub fn message(&self) -> String {
        match self {
            HookError::Thrown(error) => error.message.clone(),
            HookError::Timeout(error) | HookError::Invalid(error) => error.message.clone(),
            HookError::Cancelled => "Operation aborted".into(),
            HookError::CleaningUp(_) => CLEANING_UP.into(),
            HookError::Critical { hook_id, .. } => critical_message(hook_id),
        }
    }

    /// The thrown value's handle, when there is one.
    pub fn thrown(&self) -> Option<ThrownId> {
        match self {
            HookError::Thrown(error) => error.thrown,
            _ => None,
        }
    }

    /// The error the caller sees: the thrown value itself, the `HookTimeoutError`, or a plain `Error`.
    pub fn into_sdk(self) -> SdkError {
        match self {
            HookError::Thrown(error) => SdkError::new(ErrorCode::Plain, error.message).with_thrown(error.thrown),
            HookError::Timeout(error) | HookError::Invalid(error) => error,
            HookError::Cancelled => SdkError::new(ErrorCode::Abort, "Operation aborted"),
            HookError::CleaningUp(what) => {
                SdkError::new(ErrorCode::CleanupPending, CLEANING_UP).with_detail(Detail::Callback(what))
            }
            HookError::Critical { hook_id, cause } => {
                SdkError::new(ErrorCode::CriticalHookDelivery, critical_message(&hook_id))
                    .with_detail(Detail::Critical { hook_id, cause })
            }
        }
    }
}

fn critical_message(hook_id: &str) -> String {
    format!("Critical webhook delivery failed: {hook_id}")
}

/// What a run adds to the session's hooks: the environment's hooks (read when it started) and
/// the environment snapshot header templates resolve from.
#[derive(Debug, Default, Clone)]
pub struct HookContext {
    pub extra: Vec<Entry>,
    pub environment: Arc<Environment>,
    /// Where `delivery: 'queue'` notifications go (the session's store outbox).
    pub queue: Option<Arc<dyn Enqueue>>,
    /// Told of each hook's start and end (`advanced.includeHookEvents`).
    pub observer: Option<Observer>,
}

/// One event to dispatch: its payload (the callbacks' input, without `abortSignal`), the tool
/// it concerns (for matchers), and an `Error` to hand callbacks (PostToolUseFailure).
pub struct EventInput<'a> {
    pub event: HookEvent,
    pub payload: EventFields,
    pub tool: Option<&'a str>,
    pub error: Option<ErrorSlot>,
}

impl EventInput<'_> {
    /// An event that concerns no tool: the session's and the run's.
    pub fn of(event: HookEvent, payload: EventFields) -> Self {
        EventInput {
            event,
            payload,
            tool: None,
            error: None,
        }
    }
}

/// The callbacks' outputs, unapplied, and the first result a PreToolUse callback mocked.
#[derive(Debug, Default)]
pub struct Dispatched {
    pub outputs: Vec<HookOutput>,
    pub mocked: Option<Value>,
}

/// Who is dispatching: the host scope, and the caller's cancellation if there is a caller
/// signal (a run's). Without one, the callbacks' signal aborts only at the deadline.
#[derive(Clone, Copy)]
pub struct Caller<'a> {
    pub scope: ScopeId,
    pub cancel: Option<&'a CancellationToken>,
    pub context: &'a HookContext,
}

impl Caller<'_> {
    fn cancelled(&self) -> bool {
        self.cancel.is_some_and(CancellationToken::is_cancelled)
    }

    pub(crate) async fn wait_cancelled(&self) {
        match self.cancel {
            Some(token) => token.cancelled().await,
            None => std::future::pending().await,
        }
    }
}

pub struct Dispatcher {
    registry: Registry,
    log: Log,
    hook_timeout_ms: u32,
    session_end_timeout_ms: u32,
    host: Arc<dyn Host>,
    pending: Arc<Pending>,
    next_dispatch: AtomicU32,
    session_end_attempted: AtomicBool,
    /// How long the session's runs have held the host's event loop.
    pace: Pace,
}

impl Dispatcher {
    pub fn new(
        registry: Registry,
        hook_timeout_ms: u32,
        session_end_timeout_ms: u32,
        host: Arc<dyn Host>,
        log: Log,
    ) -> Self {
        Dispatcher {
            registry,
            log,
            hook_timeout_ms,
            session_end_timeout_ms,
            host,
            pending: Arc::new(Pending::default()),
            next_dispatch: AtomicU32::new(1),
            session_end_attempted: AtomicBool::new(false),
            pace: Pace::default(),
        }
    }

    pub fn registry(&self) -> &Registry {
        &self.registry
    }

    /// Where the session reports what it does not fail for.
    pub fn log(&self) -> &Log {
        &self.log
    }

    /// The event's hooks in order: the session's, then the run's environment hooks.
    fn registered<'a>(&'a self, event: HookEvent, context: &'a HookContext) -> impl Iterator<Item = &'a Entry> + 'a {
        let extra = context
            .extra
            .iter()
            .filter(move |entry| entry.hook().is_some_and(|hook| hook.event == event));
        self.registry.entries(event).iter().chain(extra)
    }

    /// Whether dispatching `event` (for `tool`) would do anything; if not, the caller builds
    /// no input at all. Matchers are tested here, in Rust, before anything crosses into JS.
    pub fn has(&self, event: HookEvent, tool: Option<&str>, context: &HookContext) -> bool {
        self.registered(event, context).any(|entry| entry.applies(tool))
    }

    /// Whether `event` has a result control for any tool.
    pub fn has_controls(&self, event: HookEvent, context: &HookContext) -> bool {
        self.registered(event, context)
            .filter_map(Entry::hook)
            .any(|hook| hook.is_control())
    }

    /// The result controls of `event` that apply to `tool`, in order.
    pub fn controls<'a>(
        &'a self,
        event: HookEvent,
        tool: &'a str,
        context: &'a HookContext,
    ) -> Vec<&'a Arc<HookObject>> {
        self.registered(event, context)
            .filter_map(Entry::hook)
            .filter(|hook| hook.is_control() && hook.matches(Some(tool)))
            .collect()
    }

    pub fn pending(&self) -> &Arc<Pending> {
        &self.pending
    }

    /// Numbers a new dispatch of `event` and starts its budget (`sessionEndHookTimeoutMs` for
    /// SessionEnd, `hookTimeoutMs` otherwise).
    pub fn start_timeout(&self, event: HookEvent) -> Timeout {
        let budget_ms = if event == HookEvent::SessionEnd {
            self.session_end_timeout_ms
        } else {
            self.hook_timeout_ms
        };
        self.budget(Budget::Hook(event.name()), budget_ms)
    }

    /// Numbers a tool call's signal and starts its `toolTimeoutMs` budget.
    pub fn start_tool_timeout(&self, budget_ms: u32) -> Timeout {
        self.budget(Budget::Tool, budget_ms)
    }

    fn budget(&self, budget: Budget, budget_ms: u32) -> Timeout {
        Timeout {
            budget,
            budget_ms,
            deadline: Instant::now() + Duration::from_millis(u64::from(budget_ms)),
            dispatch: DispatchId(self.next_dispatch.fetch_add(1, Ordering::Relaxed)),
        }
    }

    /// Runs `event`'s hooks in order and returns the callbacks' outputs, unapplied.
    pub async fn dispatch(&self, input: EventInput<'_>, caller: Caller<'_>) -> Result<Dispatched, HookError> {
        // Each matcher is tested once here; the dispatch runs what applies.
        let applicable: Vec<&Entry> = self
            .registered(input.event, caller.context)
            .filter(|entry| entry.applies(input.tool))
            .collect();
        if applicable.is_empty() {
            return Ok(Dispatched::default());
        }
        let event = input.event;
        let span = tracing::debug_span!(
            "hook_dispatch",
            event = event.name(),
            outcome = Empty,
            elapsed_us = Empty
        );
        let started = std::time::Instant::now();
        let outcome = self
            .run_hooks(&applicable, input, caller)
            .instrument(span.clone())
            .await;
        finish_span(&span, started, outcome.as_ref().map_or_else(HookError::kind, |_| "ok"));
        if event.is_session_event() {
            return outcome;
        }
        // On lifecycle events hooks observe: their failures are logged, except a critical
        // delivery failure.
        match outcome {
            Err(critical @ HookError::Critical { .. }) => Err(critical),
            Err(error) => {
                self.log.warn(
                    &format!("{} hook failed; the run goes on", event.name()),
                    json!({"event": event.name(), "error": error.message()}),
                );
                Ok(Dispatched::default())
            }
            ok => ok,
        }
    }

    /// Runs `applicable` (the event's hooks that apply to its tool), in order, each under the
    /// event's deadline and the caller's cancellation.
    async fn run_hooks(
        &self,
        applicable: &[&Entry],
        input: EventInput<'_>,
        caller: Caller<'_>,
    ) -> Result<Dispatched, HookError> {
        // The last hook that calls into JS (its call may release the dispatch's signal).
        let last_js = applicable.iter().rposition(|entry| entry.function().is_some());
        if last_js.is_some() && self.pending.still_pending(Owner::Hook).await {
            return Err(HookError::CleaningUp(
                self.pending.first(Owner::Hook).unwrap_or_default(),
            ));
        }
        if caller.cancelled() {
            return Err(HookError::Cancelled);
        }
        let round = Round {
            timeout: self.start_timeout(input.event),
            input,
            caller,
        };
        // Webhooks reshape the fields: they get them as a map, made once, when the first needs it.
        let mut fields: Option<Map<String, Value>> = None;
        let mut dispatched = Dispatched::default();
        let mut critical_failure: Option<(String, String)> = None;
        let mut queued = Vec::new();
        for (position, entry) in applicable.iter().enumerate() {
            if caller.cancelled() {
                return Err(HookError::Cancelled);
            }
            if Instant::now() >= round.timeout.deadline {
                return Err(HookError::Timeout(self.time_out(&round.timeout, caller.scope).await));
            }
            // After a mock, later PreToolUse callbacks do not run.
            let function = entry.function().filter(|_| dispatched.mocked.is_none());
            let webhook = entry.hook().and_then(|hook| Some((hook, hook.webhook.as_ref()?)));
            // As callbacks, command hooks after a mock do not run.
            let command = entry
                .hook()
                .and_then(|hook| Some((&**hook, hook.external.as_ref()?)))
                .filter(|_| dispatched.mocked.is_none());
            if function.is_none() && webhook.is_none() && command.is_none() {
                continue;
            }
            let observer = caller.context.observer.as_ref();
            let mut span = HookSpan::observed(entry.name(), round.input.event.name(), observer);
            if let Some(command) = command {
                let fields = fields.get_or_insert_with(|| round.input.payload.to_map());
                // Boxed, as the other rare paths below: their futures (processes, HTTP, the
                // store) would otherwise make every dispatch's state, and each caller's, tens of
                // KB, copied at every call.
                Box::pin(self.run_command(&round, command, fields, &mut span, &mut dispatched)).await?;
                continue;
            }
            if let Some(function) = function {
                let last = Some(position) == last_js;
                self.call_handler(&round, entry, function, last, &mut span, &mut dispatched)
                    .await?;
            }
            if let Some((hook, webhook)) = webhook {
                // Result controls run around the tool call, never in a dispatch (`Entry::applies`).
                let Handling::Notify { delivery, critical } = webhook.handling else {
                    continue;
                };
                let fields = fields.get_or_insert_with(|| round.input.payload.to_map());
                match delivery {
                    Delivery::Queue { max_attempts } => {
                        let row = queue_row(round.input.event, (hook, webhook), fields, max_attempts, critical);
                        queued.push(row);
                        span.succeeded("queued");
                    }
                    Delivery::Direct => {
                        let failure = &mut critical_failure;
                        Box::pin(self.notify(&round, (hook, webhook), critical, fields, &mut span, failure)).await?;
                    }
                }
            }
        }
        if !queued.is_empty() {
            Box::pin(self.enqueue(queued, caller.context, &mut critical_failure)).await;
        }
        if caller.cancelled() {
            return Err(HookError::Cancelled);
        }
        if last_js.is_some() && Instant::now() >= round.timeout.deadline {
            return Err(HookError::Timeout(self.time_out(&round.timeout, caller.scope).await));
        }
        if let Some((hook_id, cause)) = critical_failure {
            return Err(HookError::Critical { hook_id, cause });
        }
        Ok(dispatched)
    }

    /// Calls `function` (`entry`'s) with the event's input and keeps what it returned: the mock
    /// of a PreToolUse reply, the output of a session event's. On lifecycle events a handler that
    /// throws is logged and the next one runs; a spent budget or a cancelled caller still ends
    /// the dispatch.
    async fn call_handler(
        &self,
        round: &Round<'_>,
        entry: &Entry,
        function: Callable,
        last: bool,
        span: &mut HookSpan,
        dispatched: &mut Dispatched,
    ) -> Result<(), HookError> {
        let Round { input, caller, timeout } = round;
        let event = input.event;
        let mut call = HostCall::new(function, Args::object(input.payload.json()), caller.scope);
        call.signal = Some(timeout.signal("abortSignal", last, caller.cancel.is_some()));
        call.error = input.error.clone();
        if event == HookEvent::PreToolUse {
            call.reply = Reply::DataWithMock;
        }
        let called = self
            .call_guarded(
                self.host.call(call),
                timeout,
                *caller,
                (Owner::Hook, entry.label().to_string()),
            )
            .instrument(span.span())
            .await;
        span.called(&called);
        let mut returned = match called {
            Ok(returned) => returned,
            // `onFailure: 'continue'`: this hook's own failure is logged and counts as continue.
            Err(HookError::Thrown(error)) if entry.hook().is_some_and(|hook| hook.continues_on_failure()) => {
                let label = entry.label().to_string();
                self.log.warn(
                    &format!("{label} failed on {}; onFailure is 'continue'", event.name()),
                    json!({"event": event.name(), "hook": label, "error": error.message}),
                );
                return Ok(());
            }
            Err(HookError::Thrown(error)) if !event.is_session_event() => {
                let label = entry.label().to_string();
                self.log.warn(
                    &format!("{label} failed on {}; the next hook runs", event.name()),
                    json!({"event": event.name(), "hook": label, "error": error.message}),
                );
                None
            }
            Err(error) => return Err(error),
        };
        if event == HookEvent::PreToolUse {
            // `{ returned, mocked? }`: both are taken out of the reply, not copied.
            let mut wrapped = match returned.take() {
                Some(Value::Object(wrapped)) => wrapped,
                _ => Map::new(),
            };
            returned = wrapped.remove("returned");
            if let Some(mocked) = wrapped.remove("mocked") {
                dispatched.mocked = Some(mocked);
            }
        }
        if event.is_session_event() {
            // A hook object's handler may return nothing, which means continue.
            let output = match (&returned, entry) {
                (None | Some(Value::Null), Entry::Hook(_)) => HookOutput::continue_(),
                _ => match HookOutput::parse(returned.as_ref(), entry.label()) {
                    Ok(output) => output,
                    Err(error) if entry.hook().is_some_and(|hook| hook.continues_on_failure()) => {
                        self.log.warn(
                            &format!("{} answered nonsense; onFailure is 'continue'", entry.label()),
                            json!({"event": event.name(), "error": error.message}),
                        );
                        HookOutput::continue_()
                    }
                    Err(error) => return Err(HookError::Invalid(error)),
                },
            };
            match output.action {
                Action::Skip => span.decided("skip"),
                Action::Abort => span.decided("abort"),
                Action::Continue => {}
            }
            dispatched.outputs.push(output);
        } else if event == HookEvent::PreCompact {
            // An observer, but one that may skip this compaction (`abort`); anything else is
            // read as continue.
            if let Ok(output) = HookOutput::parse(returned.as_ref(), entry.label()) {
                dispatched.outputs.push(output);
            }
        }
        Ok(())
    }

    /// Runs `hook`'s command (or its HTTP hook) under its own timeout, racing the caller's
    /// cancellation, and keeps its output where the event reads outputs. A hook that fails is
    /// logged; on a gating event it blocks (`command::blocked`) unless it continues on failure.
    async fn run_command(
        &self,
        round: &Round<'_>,
        (hook, external): (&HookObject, &External),
        fields: &Map<String, Value>,
        span: &mut HookSpan,
        dispatched: &mut Dispatched,
    ) -> Result<(), HookError> {
        let event = round.input.event;
        let environment = &round.caller.context.environment;
        let ran = tokio::select! {
            biased;
            ran = command::run(event, external, fields, environment).instrument(span.span()) => ran,
            _ = round.caller.wait_cancelled() => {
                span.failed("cancelled");
                return Err(HookError::Cancelled);
            }
        };
        let output = match ran {
            Ran::Answered { output, decision } => {
                if let Some(decision) = decision {
                    span.decided(decision);
                }
                span.succeeded(decision.unwrap_or("ok"));
                *output
            }
            Ran::Failed { why, outcome } => {
                span.failed(outcome);
                let blocks = command::is_gating(event) && !hook.continues_on_failure();
                let fields = json!({"event": event.name(), "hookId": hook.id, "error": why});
                if !blocks {
                    self.log
                        .warn(&format!("Command hook \"{}\" failed; the run goes on", hook.id), fields);
                    return Ok(());
                }
                self.log.error(
                    &format!("Command hook \"{}\" failed; what it guards is blocked", hook.id),
                    fields,
                );
                span.decided("deny");
                command::blocked(hook, event, &why)
            }
        };
        if event.is_session_event() || event == HookEvent::PreCompact {
            dispatched.outputs.push(output);
        }
        Ok(())
    }

    /// Delivers `hook`'s webhook notification, racing the event's deadline and the caller's
    /// cancellation. A failed delivery is logged; a `critical` one (`fallback: 'none'`) is kept in
    /// `failure`, and the dispatch fails with the first such hook once every hook ran.
    async fn notify(
        &self,
        round: &Round<'_>,
        (hook, webhook): (&HookObject, &Arc<WebhookConfig>),
        critical: bool,
        fields: &Map<String, Value>,
        span: &mut HookSpan,
        failure: &mut Option<(String, String)>,
    ) -> Result<(), HookError> {
        let Round { caller, timeout, .. } = round;
        let body = payload::build(fields, webhook, &hook.id, &hook.type_name, true);
        let answer = tokio::select! {
            biased;
            answer = deliver(webhook, body, &caller.context.environment).instrument(span.span()) => answer,
            _ = tokio::time::sleep_until(timeout.deadline) => {
                span.failed("timeout");
                return Err(HookError::Timeout(self.time_out(timeout, caller.scope).await));
            }
            _ = caller.wait_cancelled() => {
                span.failed("cancelled");
                return Err(HookError::Cancelled);
            }
        };
        let ControlAnswer::Failed(error) = answer else {
            span.succeeded("delivered");
            return Ok(());
        };
        span.failed(error.code());
        let fields = json!({"hookId": hook.id, "hookType": hook.type_name, "error": error.to_string()});
        if critical {
            self.log
                .error(&format!("Critical webhook delivery failed: {}", hook.id), fields);
            failure.get_or_insert((hook.id.clone(), error.to_string()));
        } else {
            self.log
                .warn(&format!("Webhook delivery failed (non-fatal): {}", hook.id), fields);
        }
        Ok(())
    }

    /// Writes a dispatch's queued notifications to the outbox before the run goes on. Rows that
    /// could not be written are a failed delivery: logged, and critical for a `fallback: 'none'`
    /// hook.
    async fn enqueue(&self, rows: Vec<Queued>, context: &HookContext, critical: &mut Option<(String, String)>) {
        let first_critical = rows.iter().find(|row| row.critical).map(|row| row.hook_id.clone());
        let hooks: Vec<String> = rows.iter().map(|row| row.hook_id.clone()).collect();
        let written = match &context.queue {
            Some(queue) => queue.enqueue(rows).await.map_err(|error| error.to_string()),
            None => Err("this operation has no store to queue to".to_string()),
        };
        if let Err(error) = written {
            let cause = format!("the notification could not be queued: {error}");
            self.log.error(
                "Queued webhook notifications could not be written to the outbox",
                json!({"hookIds": hooks, "error": cause}),
            );
            if let Some(hook_id) = first_critical {
                critical.get_or_insert((hook_id, cause));
            }
        }
    }

    /// SessionEnd runs at most once per session, whatever its outcome.
    pub async fn dispatch_session_end(
        &self,
        payload: EventFields,
        caller: Caller<'_>,
    ) -> Result<Dispatched, HookError> {
        if self.session_end_attempted.swap(true, Ordering::SeqCst) {
            return Ok(Dispatched::default());
        }
        self.dispatch(EventInput::of(HookEvent::SessionEnd, payload), caller)
            .await
    }

    /// Waits for one call into JS (a user function, a generator's step) under `timeout`,
    /// racing the caller's cancellation. A call still running when either fires is left to
    /// finish on its own and counted as pending.
    /// `what` names the callback for the refusals while it is pending (`hook "audit"`).
    pub async fn call_guarded(
        &self,
        call: HostFuture,
        timeout: &Timeout,
        caller: Caller<'_>,
        (owner, what): (Owner, String),
    ) -> Result<Option<Value>, HookError> {
        let mut tracked = TrackedCall::spawn(call, self.pending.clone(), owner, what);
        // A callback that returned a plain value has replied by its first poll: no timer needed.
        if let Some(result) = tracked.result().now_or_never() {
            return result.map_err(HookError::Thrown);
        }
        tokio::select! {
            biased;
            result = tracked.result() => result.map_err(HookError::Thrown),
            _ = tokio::time::sleep_until(timeout.deadline) => {
                tracked.abandon();
                let error = self.time_out(timeout, caller.scope).await;
                tracked.abandon_with_grace().await;
                Err(HookError::Timeout(error))
            }
            _ = caller.wait_cancelled() => {
                tracked.abandon_with_grace().await;
                Err(HookError::Cancelled)
            }
        }
    }

    /// How long the session's runs have held the host's event loop.
    pub fn pace(&self) -> &Pace {
        &self.pace
    }

    /// Gives the host's event loop a turn once the session's runs have held it for a slice
    /// (`crate::pace`): between a run's synchronous steps, timers and aborts get to fire.
    pub async fn pause_if_due(&self) {
        self.pace.step(self.host.as_ref()).await;
    }

    /// Between two calls under one budget (a generator's steps): gives the host a turn when
    /// due, then fails as [`Dispatcher::call_guarded`] would have, had a call been waiting: past
    /// the deadline, or cancelled. Steps that each answer at once never wait, so without this
    /// neither would ever be seen.
    pub async fn between_calls(&self, timeout: &Timeout, caller: Caller<'_>) -> Result<(), HookError> {
        self.pause_if_due().await;
        if caller.cancelled() {
            return Err(HookError::Cancelled);
        }
        if Instant::now() >= timeout.deadline {
            return Err(HookError::Timeout(self.time_out(timeout, caller.scope).await));
        }
        Ok(())
    }

    /// Aborts the dispatch's signal with `HookTimeoutError(event, ms)` (a tool's: with the
    /// tool timeout's error) and returns the error that refers to it.
    async fn time_out(&self, timeout: &Timeout, scope: ScopeId) -> SdkError {
        let event = match timeout.budget {
            Budget::Hook(event) => event,
            Budget::Tool => {
                let reason = AbortReason::ToolTimeout {
                    timeout_ms: timeout.budget_ms,
                };
                self.host.abort(scope, timeout.dispatch, reason).await;
                return SdkError::new(
                    ErrorCode::ToolTimeout,
                    format!("Tool execution timeout after {}ms", timeout.budget_ms),
                );
            }
        };
        self.host
            .abort(
                scope,
                timeout.dispatch,
                AbortReason::HookTimeout {
                    event,
                    timeout_ms: timeout.budget_ms,
                },
            )
            .await;
        SdkError::new(
            ErrorCode::HookTimeout,
            format!("Hook {event} exceeded {}ms", timeout.budget_ms),
        )
        .with_detail(Detail::Timeout(HookTimeout {
            event,
            timeout_ms: timeout.budget_ms,
            dispatch: timeout.dispatch,
        }))
    }
}

/// One dispatch under way: its input, who dispatches, and its budget.
struct Round<'a> {
    input: EventInput<'a>,
    caller: Caller<'a>,
    timeout: Timeout,
}

/// `hook`'s notification of `event` through `webhook` as an outbox row: the payload it would
/// have been sent now, the webhook's URL, timeout and header templates (never their values), and
/// its key.
fn queue_row(
    event: HookEvent,
    (hook, webhook): (&HookObject, &WebhookConfig),
    fields: &Map<String, Value>,
    max_attempts: u32,
    critical: bool,
) -> Queued {
    let body = payload::build(fields, webhook, &hook.id, &hook.type_name, true);
    let id = crate::ids::uuid();
    let text = |name: &str| fields.get(name).and_then(Value::as_str).map(str::to_owned);
    Queued {
        idempotency_key: idempotency_key(fields, &hook.id, event.name(), &id),
        id,
        session_id: text("sessionId").unwrap_or_default(),
        hook_id: hook.id.clone(),
        event: event.name().to_owned(),
        operation_id: text("operationId"),
        target: Target {
            url: webhook.url.to_string(),
            timeout_ms: webhook.timeout.as_millis() as u64,
            headers: webhook.headers.clone(),
            allowed_env_vars: webhook.allowed_env_vars.clone(),
        },
        body: body.to_string(),
        max_attempts,
        critical,
    }
}

/// What a budget bounds, which decides the error its deadline makes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Budget {
    /// An event's dispatch (or the permission function under `hookTimeoutMs`).
    Hook(&'static str),
    /// A tool's execution (`toolTimeoutMs`).
    Tool,
}

/// One budget: what it bounds, its length, when it ends, and the dispatch whose signal it
/// aborts.
pub struct Timeout {
    pub budget: Budget,
    pub budget_ms: u32,
    pub deadline: Instant,
    pub dispatch: DispatchId,
}

impl Timeout {
    /// Where a call of this dispatch gets its signal: `args[0][key]`; `last` lets the host
    /// forget the signal once the call settles; `linked` also follows the caller's signal.
    pub fn signal(&self, key: &'static str, last: bool, linked: bool) -> SignalSlot {
        self.signal_at(0, key, last, linked)
    }

    /// As [`Timeout::signal`], at `args[arg][key]`.
    pub fn signal_at(&self, arg: usize, key: &'static str, last: bool, linked: bool) -> SignalSlot {
        SignalSlot {
            arg,
            key,
            dispatch: Some(DispatchSignal {
                id: self.dispatch,
                last,
                linked,
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::NoFunctions;

    /// Every tool call awaits two dispatches, so a dispatch's future is part of every call's
    /// state: command and HTTP hooks, direct webhook delivery and the outbox write, which most
    /// dispatches never reach, must stay boxed (inline they made it ~19 KB, copied at each await).
    #[test]
    fn a_dispatch_does_not_carry_its_rare_paths_inline() {
        let host: Arc<dyn Host> = Arc::new(NoFunctions("no host"));
        let log = Log::new(host.clone(), None);
        let dispatcher = Dispatcher::new(Registry::default(), 1000, 1000, host, log);
        let context = HookContext {
            extra: Vec::new(),
            environment: Arc::new(Environment::new()),
            queue: None,
            observer: None,
        };
        let caller = Caller {
            scope: ScopeId::NONE,
            cancel: None,
            context: &context,
        };
        let input = EventInput::of(HookEvent::SessionStart, EventFields::of(&json!({})));
        let size = std::mem::size_of_val(&dispatcher.dispatch(input, caller));
        assert!(size < 4096, "a dispatch's future is {size} bytes");
    }
}
