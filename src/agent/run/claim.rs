//! The claim keeper: while a run drives a session kept by a store that outlives the process,
//! its claim is renewed; a claim found lost, or a critical queued notification given up, stops
//! the run from outside.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use tokio_util::task::AbortOnDropHandle;

use super::Run;
use crate::agent::control::RunControl;
use crate::agent::durable::{self, Durable};
use crate::error::SdkError;
use crate::hooks::dispatch::HookError;
use crate::offload::offload;
use crate::store;

/// What stops a run from outside while it drives; both watchers end when it is dropped.
pub(super) struct Guard {
    /// Why the run was stopped from outside, when it was.
    pub stopped: Arc<OnceLock<SdkError>>,
    _renewal: Option<AbortOnDropHandle<()>>,
    _watch: Option<store::delivery::Watch>,
}

impl Run {
    /// Starts the claim keeper (the memory store's claims do not expire: no process can die
    /// holding one) and, when the run has critical queued webhooks, the watch on their delivery.
    pub(super) fn guard(&self) -> Guard {
        let stopped = Arc::new(OnceLock::new());
        let renewal = self
            .durable
            .survives()
            .then(|| offload(keep_claim(self.durable.clone(), self.control.clone(), stopped.clone())));
        let watch = self.agent.dispatcher.registry().has_critical_queued().then(|| {
            let (control, stopped) = (self.control.clone(), stopped.clone());
            self.durable.watch_operation(
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
        Guard {
            stopped,
            _renewal: renewal,
            _watch: watch.flatten(),
        }
    }
}

/// Stops a run from outside it with `error`, which its result reports. Why first: the run, once
/// aborted, may end and look for it at once.
pub(super) fn stop(control: &RunControl, stopped: &OnceLock<SdkError>, error: SdkError) {
    let message = error.message.clone();
    let _ = stopped.set(error);
    control.abort(message);
}

/// Renews a run's claim on its session while the run lasts (dropped with it). A claim found lost
/// — expired while renewals failed, or taken by another agent — aborts the run: its writes would
/// be refused, and another agent may be driving the session. A renewal has a third of the TTL to
/// answer; one that fails or does not answer is tried again soon (100 ms), until the TTL has passed
/// since the last one that did: a silent store stops the run about one TTL after its last word.
async fn keep_claim(durable: Arc<Durable>, control: Arc<RunControl>, stopped: Arc<OnceLock<SdkError>>) {
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
