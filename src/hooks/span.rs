//! The `tracing` spans of hooks: each dispatch is a `hook_dispatch` span and each hook that runs
//! in it (or as a result control) a `hook` span, both closed with how they ended and how long
//! they took.

use std::time::Instant;

use tracing::field::Empty;
use tracing::Span;

use super::observer::{outcome_of, HookNotice, Observer};

/// Records how a span ended and its duration so far.
pub(crate) fn finish_span(span: &Span, started: Instant, outcome: &str) {
    span.record("outcome", outcome);
    // As i64: tracing-opentelemetry exports an unsigned field as text.
    span.record(
        "elapsed_us",
        i64::try_from(started.elapsed().as_micros()).unwrap_or(i64::MAX),
    );
}

/// One hook's span. A hook object can run in parts (its handler, then its webhook): the first
/// part that fails names the outcome, otherwise the last part does.
pub(crate) struct HookSpan {
    span: Span,
    started: Instant,
    failed: bool,
    outcome: Option<&'static str>,
    decision: Option<&'static str>,
    /// Who hears of this hook's end, with its id and event.
    observed: Option<(Observer, String, &'static str)>,
}

impl HookSpan {
    /// `hook`: a hook object's id, or where a bare callback was registered.
    pub fn new(hook: &str) -> Self {
        HookSpan {
            span: tracing::debug_span!("hook", hook, outcome = Empty, elapsed_us = Empty),
            started: Instant::now(),
            failed: false,
            outcome: None,
            decision: None,
            observed: None,
        }
    }

    /// As [`HookSpan::new`], and `observer` is told now that it starts and, when the span is
    /// dropped, how it ended.
    pub fn observed(hook: &str, event: &'static str, observer: Option<&Observer>) -> Self {
        let mut span = HookSpan::new(hook);
        if let Some(observer) = observer {
            observer.tell(HookNotice::Started { hook_id: hook, event });
            span.observed = Some((observer.clone(), hook.to_string(), event));
        }
        span
    }

    /// What the hook decided (`deny`, `skip`, …), for the observer.
    pub fn decided(&mut self, decision: &'static str) {
        self.decision = Some(decision);
    }

    /// The span to run the hook's work in.
    pub fn span(&self) -> Span {
        self.span.clone()
    }

    /// A part that went as it should (`ok`, `delivered`, a control's `allow` or `deny`).
    pub fn succeeded(&mut self, outcome: &'static str) {
        if !self.failed {
            self.outcome = Some(outcome);
            finish_span(&self.span, self.started, outcome);
        }
    }

    /// A part that failed (`threw`, `timeout`, `cancelled`, a delivery error's code).
    pub fn failed(&mut self, outcome: &'static str) {
        if !self.failed {
            self.failed = true;
            self.outcome = Some(outcome);
            finish_span(&self.span, self.started, outcome);
        }
    }

    /// A handler's call: `ok`, or its error's kind.
    pub fn called<T>(&mut self, called: &Result<T, super::HookError>) {
        match called {
            Ok(_) => self.succeeded("ok"),
            Err(error) => self.failed(error.kind()),
        }
    }
}

impl Drop for HookSpan {
    fn drop(&mut self) {
        if let Some((observer, hook_id, event)) = &self.observed {
            observer.tell(HookNotice::Responded {
                hook_id,
                event,
                outcome: outcome_of(self.outcome),
                decision: self.decision,
                duration_ms: self.started.elapsed().as_millis() as u64,
            });
        }
    }
}
