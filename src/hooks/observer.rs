//! Hooks as data (`advanced.includeHookEvents`): whoever wants to hear is told when each hook of
//! a dispatch starts and how it ended — the same facts its `tracing` span records.

use std::fmt;
use std::sync::Arc;

/// One hook starting, or its end.
#[derive(Debug, Clone, PartialEq)]
pub enum HookNotice<'a> {
    Started {
        hook_id: &'a str,
        event: &'static str,
    },
    Responded {
        hook_id: &'a str,
        event: &'static str,
        /// `success`, `error`, `timeout` or `cancelled`.
        outcome: &'static str,
        /// What it decided, when it did: a command hook's `deny` / `allow` / `ask`, a
        /// callback's `skip` / `abort`.
        decision: Option<&'static str>,
        duration_ms: u64,
    },
}

/// Told of every hook a run's dispatches run.
#[derive(Clone)]
pub struct Observer(Arc<dyn Fn(HookNotice<'_>) + Send + Sync>);

impl Observer {
    pub fn new(tell: impl Fn(HookNotice<'_>) + Send + Sync + 'static) -> Self {
        Observer(Arc::new(tell))
    }

    pub fn tell(&self, notice: HookNotice<'_>) {
        (self.0)(notice)
    }
}

impl fmt::Debug for Observer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Observer")
    }
}

/// A span's outcome word (`ok`, `delivered`, `threw`, a delivery error's code…) in the four the
/// stream tells.
pub fn outcome_of(span_outcome: Option<&str>) -> &'static str {
    match span_outcome {
        Some("ok" | "delivered" | "queued" | "allow" | "deny" | "ask") => "success",
        Some("timeout") => "timeout",
        Some("cancelled") | None => "cancelled",
        Some(_) => "error",
    }
}
