//! The `tracing` spans of hooks: each dispatch is a `hook_dispatch` span and each hook that runs
//! in it (or as a result control) a `hook` span, both closed with how they ended and how long
//! they took.

use std::time::Instant;

use tracing::field::Empty;
use tracing::Span;

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
}

impl HookSpan {
    /// `hook`: a hook object's id, or where a bare callback was registered.
    pub fn new(hook: &str) -> Self {
        HookSpan {
            span: tracing::debug_span!("hook", hook, outcome = Empty, elapsed_us = Empty),
            started: Instant::now(),
            failed: false,
        }
    }

    /// The span to run the hook's work in.
    pub fn span(&self) -> Span {
        self.span.clone()
    }

    /// A part that went as it should (`ok`, `delivered`, a control's `allow` or `deny`).
    pub fn succeeded(&mut self, outcome: &'static str) {
        if !self.failed {
            finish_span(&self.span, self.started, outcome);
        }
    }

    /// A part that failed (`threw`, `timeout`, `cancelled`, a delivery error's code).
    pub fn failed(&mut self, outcome: &'static str) {
        if !self.failed {
            self.failed = true;
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
