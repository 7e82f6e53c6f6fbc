//! Fail-closed bookkeeping: a user callback that was still running when its signal aborted
//! (deadline or caller) is counted as pending until its own promise settles. While any is
//! pending, later dispatches and `close()` refuse to go on.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use crate::host::{HostError, HostFuture};

/// Who a pending callback belongs to; each fails closed with its own message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Owner {
    Hook,
    /// The permission function or the confirmation handler.
    Permission,
    /// A tool's `execute` (or a step of the generator it returned).
    Tool,
}

/// How long an abandoned callback is given to settle before the caller hears of the abort or
/// timeout: a callback that honours its signal settles well within it, so the next dispatch
/// does not find it still pending.
pub const SETTLE_GRACE: Duration = Duration::from_millis(25);

#[derive(Default)]
pub struct Pending {
    hooks: AtomicUsize,
    permissions: AtomicUsize,
    tools: AtomicUsize,
    /// What each pending call is (`advanced.hooks.PreToolUse[0]`, `hook "audit"`, the tool's
    /// name), so that a refusal can name it.
    labels: Mutex<Vec<(Owner, String)>>,
    changed: Notify,
}

impl Pending {
    fn counter(&self, owner: Owner) -> &AtomicUsize {
        match owner {
            Owner::Hook => &self.hooks,
            Owner::Permission => &self.permissions,
            Owner::Tool => &self.tools,
        }
    }

    pub fn count(&self, owner: Owner) -> usize {
        self.counter(owner).load(Ordering::SeqCst)
    }

    fn total(&self) -> usize {
        self.count(Owner::Hook) + self.count(Owner::Permission) + self.count(Owner::Tool)
    }

    /// The first of `owner`'s pending calls, by what it is.
    pub fn first(&self, owner: Owner) -> Option<String> {
        let labels = self.labels.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        labels
            .iter()
            .find(|(of, _)| *of == owner)
            .map(|(_, label)| label.clone())
    }

    fn add(&self, owner: Owner, label: &str) {
        self.labels
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push((owner, label.to_string()));
        self.counter(owner).fetch_add(1, Ordering::SeqCst);
    }

    fn release(&self, owner: Owner, label: &str) {
        {
            let mut labels = self.labels.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            if let Some(at) = labels.iter().position(|(of, what)| *of == owner && what == label) {
                labels.remove(at);
            }
        }
        self.counter(owner).fetch_sub(1, Ordering::SeqCst);
        self.changed.notify_waiters();
    }

    /// Whether one of `owner`'s calls is still pending. A call whose promise has just settled
    /// is counted out by a task of its own on a worker: it is given up to [`SETTLE_GRACE`] for
    /// that, so a step right after a callback settled does not find it still pending.
    pub async fn still_pending(&self, owner: Owner) -> bool {
        !self.wait_until(SETTLE_GRACE, |pending| pending.count(owner) == 0).await
    }

    /// Waits until nothing is pending, at most `limit`; true if nothing is.
    pub async fn settle(&self, limit: Duration) -> bool {
        self.wait_until(limit, |pending| pending.total() == 0).await
    }

    /// Waits until `done` holds, at most `limit`; whether it does.
    async fn wait_until(&self, limit: Duration, done: impl Fn(&Self) -> bool) -> bool {
        if done(self) {
            return true;
        }
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let changed = self.changed.notified();
            if done(self) {
                return true;
            }
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                return done(self);
            }
        }
    }
}

/// A callback call the dispatcher is waiting for. It is polled in place (no extra task, no
/// thread hop); only when the dispatcher stops waiting is it moved to a task of its own, which
/// keeps it counted as pending until it settles.
pub struct TrackedCall {
    call: Option<HostFuture>,
    settled: Option<JoinHandle<()>>,
    pending: Arc<Pending>,
    owner: Owner,
    label: String,
}

impl TrackedCall {
    /// `label` says what the call is, for the refusals while it is pending.
    pub fn spawn(call: HostFuture, pending: Arc<Pending>, owner: Owner, label: String) -> Self {
        TrackedCall {
            call: Some(call),
            settled: None,
            pending,
            owner,
            label,
        }
    }

    /// What the callback returned or threw. Cancel-safe: dropping this future leaves the call
    /// in place.
    pub async fn result(&mut self) -> Result<Option<Value>, HostError> {
        let Some(call) = self.call.as_mut() else {
            return Err(HostError {
                message: "the callback was abandoned".into(),
                thrown: None,
            });
        };
        let outcome = call.await;
        self.call = None;
        outcome
    }

    /// Nobody waits for this call any more: it counts as pending until it settles.
    pub fn abandon(&mut self) {
        let Some(call) = self.call.take() else { return };
        // Without a runtime (the process is shutting down) there is nobody left to protect.
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        self.pending.add(self.owner, &self.label);
        let pending = self.pending.clone();
        let (owner, label) = (self.owner, self.label.clone());
        self.settled = Some(runtime.spawn(async move {
            let _ = call.await;
            pending.release(owner, &label);
        }));
    }

    /// Abandons the call, then gives it [`SETTLE_GRACE`] to settle.
    pub async fn abandon_with_grace(&mut self) {
        self.abandon();
        if let Some(settled) = self.settled.as_mut() {
            let _ = tokio::time::timeout(SETTLE_GRACE, settled).await;
        }
    }
}

impl Drop for TrackedCall {
    fn drop(&mut self) {
        self.abandon();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A call that runs until the returned sender releases it (or forever, once it is dropped).
    fn released_call(
        pending: &Arc<Pending>,
        owner: Owner,
        label: &str,
    ) -> (tokio::sync::oneshot::Sender<()>, TrackedCall) {
        let (release, released) = tokio::sync::oneshot::channel::<()>();
        let call = TrackedCall::spawn(
            Box::pin(async move {
                let _ = released.await;
                Ok(None)
            }),
            pending.clone(),
            owner,
            label.into(),
        );
        (release, call)
    }

    #[tokio::test]
    async fn an_abandoned_call_is_pending_until_it_settles() {
        let pending = Arc::new(Pending::default());
        let (release, mut call) = released_call(&pending, Owner::Hook, "hook \"slow\"");
        call.abandon();
        assert_eq!(pending.count(Owner::Hook), 1);
        assert_eq!(pending.first(Owner::Hook).as_deref(), Some("hook \"slow\""));
        assert_eq!(pending.first(Owner::Tool), None);
        assert!(!pending.settle(Duration::from_millis(10)).await);
        release.send(()).unwrap();
        assert!(pending.settle(Duration::from_secs(1)).await);
        assert_eq!(pending.count(Owner::Hook), 0);
        assert_eq!(pending.first(Owner::Hook), None);
    }

    #[tokio::test]
    async fn a_call_settling_within_the_grace_is_not_still_pending_and_one_that_does_not_is() {
        let pending = Arc::new(Pending::default());
        let (release, mut call) = released_call(&pending, Owner::Tool, "noop");
        call.abandon();
        assert!(!pending.still_pending(Owner::Hook).await);
        // Settled just now: counted out by its task a moment later, within the grace.
        release.send(()).unwrap();
        assert!(!pending.still_pending(Owner::Tool).await);

        let (_keep, mut stuck) = released_call(&pending, Owner::Tool, "stuck");
        stuck.abandon();
        let started = std::time::Instant::now();
        assert!(pending.still_pending(Owner::Tool).await);
        assert!(started.elapsed() >= SETTLE_GRACE);
    }

    #[tokio::test]
    async fn a_finished_call_is_never_pending() {
        let pending = Arc::new(Pending::default());
        let mut call = TrackedCall::spawn(
            Box::pin(async { Ok(Some(Value::Bool(true))) }),
            pending.clone(),
            Owner::Permission,
            "the permission function".into(),
        );
        assert_eq!(call.result().await, Ok(Some(Value::Bool(true))));
        drop(call);
        assert_eq!(pending.count(Owner::Permission), 0);
    }

    #[tokio::test]
    async fn dropping_a_running_call_abandons_it() {
        let pending = Arc::new(Pending::default());
        let call = TrackedCall::spawn(
            Box::pin(futures::future::pending()),
            pending.clone(),
            Owner::Hook,
            "advanced.hooks.PreToolUse[0]".into(),
        );
        drop(call);
        assert_eq!(pending.count(Owner::Hook), 1);
    }
}
