//! Ordered dispatch: the callbacks of one event run one at a time, in registration order, each
//! with a copy of the same input, under one wall-clock budget for the whole event. Every result
//! is collected before any is applied; a callback that throws, times out or returns something
//! that is not a hook output stops the dispatch.

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::event::HookEvent;
use super::output::HookOutput;
use super::pending::{Owner, Pending, TrackedCall};
use crate::error::{ErrorCode, HookTimeout, SdkError};
use crate::host::{AbortReason, Callable, DispatchSignal, ErrorSlot, Host, HostCall, HostError, SignalSlot};

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
    /// A callback abandoned earlier is still running.
    CleaningUp,
    /// A callback returned something that is not a hook output.
    Invalid(SdkError),
}

impl HookError {
    pub fn message(&self) -> String {
        match self {
            HookError::Thrown(error) => error.message.clone(),
            HookError::Timeout(error) | HookError::Invalid(error) => error.message.clone(),
            HookError::Cancelled => "Operation aborted".into(),
            HookError::CleaningUp => CLEANING_UP.into(),
        }
    }

    /// The thrown value's handle, when there is one.
    pub fn thrown(&self) -> Option<u32> {
        match self {
            HookError::Thrown(error) => error.thrown,
            _ => None,
        }
    }

    /// The error the caller sees: the thrown value itself, the `HookTimeoutError`, or a plain `Error`.
    pub fn into_sdk(self) -> SdkError {
        match self {
            HookError::Thrown(error) => SdkError {
                thrown: error.thrown,
                ..SdkError::new(ErrorCode::Plain, error.message)
            },
            HookError::Timeout(error) | HookError::Invalid(error) => error,
            HookError::Cancelled => SdkError::new(ErrorCode::Abort, "Operation aborted"),
            HookError::CleaningUp => SdkError::new(ErrorCode::Plain, CLEANING_UP),
        }
    }
}

/// Who is dispatching: the host scope, and the caller's cancellation if there is a caller
/// signal (a run's). Without one, the callbacks' signal aborts only at the deadline.
#[derive(Clone, Copy)]
pub struct Caller<'a> {
    pub scope: u32,
    pub cancel: Option<&'a CancellationToken>,
}

impl Caller<'_> {
    fn cancelled(&self) -> bool {
        self.cancel.is_some_and(CancellationToken::is_cancelled)
    }

    async fn wait_cancelled(&self) {
        match self.cancel {
            Some(token) => token.cancelled().await,
            None => std::future::pending().await,
        }
    }
}

pub struct Dispatcher {
    callbacks: [Vec<Callable>; 8],
    hook_timeout_ms: u32,
    session_end_timeout_ms: u32,
    host: Arc<dyn Host>,
    pending: Arc<Pending>,
    next_dispatch: AtomicU32,
    session_end_attempted: AtomicBool,
}

impl Dispatcher {
    pub fn new(
        callbacks: [Vec<Callable>; 8],
        hook_timeout_ms: u32,
        session_end_timeout_ms: u32,
        host: Arc<dyn Host>,
    ) -> Self {
        Dispatcher {
            callbacks,
            hook_timeout_ms,
            session_end_timeout_ms,
            host,
            pending: Arc::new(Pending::default()),
            next_dispatch: AtomicU32::new(1),
            session_end_attempted: AtomicBool::new(false),
        }
    }

    /// Whether `event` has callbacks; without any, the caller builds no input at all.
    pub fn has(&self, event: HookEvent) -> bool {
        !self.callbacks[event.index()].is_empty()
    }

    pub fn pending(&self) -> &Arc<Pending> {
        &self.pending
    }

    pub fn hook_timeout_ms(&self) -> u32 {
        self.hook_timeout_ms
    }

    fn budget_ms(&self, event: HookEvent) -> u32 {
        if event == HookEvent::SessionEnd {
            self.session_end_timeout_ms
        } else {
            self.hook_timeout_ms
        }
    }

    pub fn next_dispatch_id(&self) -> u32 {
        self.next_dispatch.fetch_add(1, Ordering::Relaxed)
    }

    /// Runs `event`'s callbacks in order and returns their outputs, unapplied.
    /// `error` puts an `Error` into the input (PostToolUseFailure).
    pub async fn dispatch(
        &self,
        event: HookEvent,
        input: Value,
        error: Option<ErrorSlot>,
        caller: Caller<'_>,
    ) -> Result<Vec<HookOutput>, HookError> {
        let callbacks = &self.callbacks[event.index()];
        if callbacks.is_empty() {
            return Ok(Vec::new());
        }
        let span = tracing::debug_span!("hook_dispatch", event = event.name(), callbacks = callbacks.len());
        let started = std::time::Instant::now();
        let outcome = self
            .run_callbacks(event, callbacks, input, error, caller)
            .instrument(span.clone())
            .await;
        span.in_scope(|| {
            tracing::debug!(
                elapsed_us = started.elapsed().as_micros() as u64,
                ok = outcome.is_ok(),
                "hook dispatch finished"
            )
        });
        outcome
    }

    async fn run_callbacks(
        &self,
        event: HookEvent,
        callbacks: &[Callable],
        input: Value,
        error: Option<ErrorSlot>,
        caller: Caller<'_>,
    ) -> Result<Vec<HookOutput>, HookError> {
        if self.pending.count(Owner::Hook) > 0 {
            return Err(HookError::CleaningUp);
        }
        if caller.cancelled() {
            return Err(HookError::Cancelled);
        }
        let budget_ms = self.budget_ms(event);
        let deadline = Instant::now() + Duration::from_millis(u64::from(budget_ms));
        let dispatch = self.next_dispatch_id();
        let timeout = Timeout {
            event: event.name(),
            budget_ms,
            deadline,
            dispatch,
        };
        let mut outputs = Vec::with_capacity(callbacks.len());
        for (index, function) in callbacks.iter().enumerate() {
            if caller.cancelled() {
                return Err(HookError::Cancelled);
            }
            if Instant::now() >= deadline {
                return Err(HookError::Timeout(self.time_out(&timeout, caller.scope).await));
            }
            let mut call = HostCall::new(*function, vec![input.clone()], caller.scope);
            call.signal = Some(SignalSlot {
                arg: 0,
                key: "abortSignal",
                dispatch: Some(DispatchSignal {
                    id: dispatch,
                    last: index + 1 == callbacks.len(),
                    linked: caller.cancel.is_some(),
                }),
            });
            call.error = error.clone();
            let returned = self.call_guarded(call, &timeout, caller, Owner::Hook).await?;
            outputs.push(HookOutput::parse(returned.as_ref(), event, index).map_err(HookError::Invalid)?);
        }
        if caller.cancelled() {
            return Err(HookError::Cancelled);
        }
        if Instant::now() >= deadline {
            return Err(HookError::Timeout(self.time_out(&timeout, caller.scope).await));
        }
        Ok(outputs)
    }

    /// SessionEnd runs at most once per session, whatever its outcome.
    pub async fn dispatch_session_end(&self, input: Value, caller: Caller<'_>) -> Result<Vec<HookOutput>, HookError> {
        if self.session_end_attempted.swap(true, Ordering::SeqCst) {
            return Ok(Vec::new());
        }
        self.dispatch(HookEvent::SessionEnd, input, None, caller).await
    }

    /// Calls one user function under `timeout`, racing the caller's cancellation. A call still
    /// running when either fires is left to finish on its own and counted as pending.
    pub async fn call_guarded(
        &self,
        call: HostCall,
        timeout: &Timeout,
        caller: Caller<'_>,
        owner: Owner,
    ) -> Result<Option<Value>, HookError> {
        let mut tracked = TrackedCall::spawn(self.host.call(call), self.pending.clone(), owner);
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

    /// Aborts the dispatch's signal with `HookTimeoutError(event, ms)` and returns the error
    /// that refers to it.
    async fn time_out(&self, timeout: &Timeout, scope: u32) -> SdkError {
        self.host
            .abort(
                scope,
                timeout.dispatch,
                AbortReason::HookTimeout {
                    event: timeout.event,
                    timeout_ms: timeout.budget_ms,
                },
            )
            .await;
        SdkError {
            timeout: Some(HookTimeout {
                event: timeout.event,
                timeout_ms: timeout.budget_ms,
                dispatch: timeout.dispatch,
            }),
            ..SdkError::new(
                ErrorCode::HookTimeout,
                format!("Hook {} exceeded {}ms", timeout.event, timeout.budget_ms),
            )
        }
    }
}

/// One budget: the event it is named after, its length, when it ends, and the dispatch whose
/// signal it aborts.
pub struct Timeout {
    pub event: &'static str,
    pub budget_ms: u32,
    pub deadline: Instant,
    pub dispatch: u32,
}

impl Timeout {
    pub fn starting_now(event: &'static str, budget_ms: u32, dispatch: u32) -> Self {
        Timeout {
            event,
            budget_ms,
            deadline: Instant::now() + Duration::from_millis(u64::from(budget_ms)),
            dispatch,
        }
    }
}
