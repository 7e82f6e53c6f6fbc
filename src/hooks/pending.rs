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
    Permission,
}

/// How long an abandoned callback is given to settle before the caller hears of the abort or
/// timeout: a callback that honours its signal settles well within it, so the next dispatch
/// does not find it still pending.
pub const SETTLE_GRACE: Duration = Duration::from_millis(25);

#[derive(Default)]
pub struct Pending {
    hooks: AtomicUsize,
    permissions: AtomicUsize,
    changed: Notify,
}

impl Pending {
    fn counter(&self, owner: Owner) -> &AtomicUsize {
        match owner {
            Owner::Hook => &self.hooks,
            Owner::Permission => &self.permissions,
        }
    }

    pub fn count(&self, owner: Owner) -> usize {
        self.counter(owner).load(Ordering::SeqCst)
    }

    fn total(&self) -> usize {
        self.count(Owner::Hook) + self.count(Owner::Permission)
    }

    fn add(&self, owner: Owner) {
        self.counter(owner).fetch_add(1, Ordering::SeqCst);
    }

    fn release(&self, owner: Owner) {
        self.counter(owner).fetch_sub(1, Ordering::SeqCst);
        self.changed.notify_waiters();
    }

    /// Waits until nothing is pending, at most `limit`; true if nothing is.
    pub async fn settle(&self, limit: Duration) -> bool {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let changed = self.changed.notified();
            if self.total() == 0 {
                return true;
            }
            if tokio::time::timeout_at(deadline, changed).await.is_err() {
                return self.total() == 0;
            }
        }
    }
}

#[derive(Default)]
struct Flags {
    done: bool,
    abandoned: bool,
}

/// A callback call running as its own task, so it outlives a dispatch that stopped waiting.
pub struct TrackedCall {
    handle: JoinHandle<Result<Option<Value>, HostError>>,
    flags: Arc<Mutex<Flags>>,
    pending: Arc<Pending>,
    owner: Owner,
    finished: bool,
}

fn lock(flags: &Mutex<Flags>) -> std::sync::MutexGuard<'_, Flags> {
    flags.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl TrackedCall {
    pub fn spawn(call: HostFuture, pending: Arc<Pending>, owner: Owner) -> Self {
        let flags = Arc::new(Mutex::new(Flags::default()));
        let task_flags = flags.clone();
        let task_pending = pending.clone();
        let handle = tokio::spawn(async move {
            let result = call.await;
            let mut flags = lock(&task_flags);
            flags.done = true;
            if flags.abandoned {
                task_pending.release(owner);
            }
            result
        });
        TrackedCall {
            handle,
            flags,
            pending,
            owner,
            finished: false,
        }
    }

    /// What the callback returned or threw.
    pub async fn result(&mut self) -> Result<Option<Value>, HostError> {
        let outcome = (&mut self.handle).await;
        self.finished = true;
        outcome.unwrap_or_else(|error| {
            Err(HostError {
                message: format!("the callback's task failed: {error}"),
                thrown: None,
            })
        })
    }

    /// Nobody waits for this call any more: it counts as pending until it settles.
    pub fn abandon(&mut self) {
        self.finished = true;
        let mut flags = lock(&self.flags);
        if !flags.done && !flags.abandoned {
            flags.abandoned = true;
            self.pending.add(self.owner);
        }
    }

    /// Abandons the call, then gives it [`SETTLE_GRACE`] to settle.
    pub async fn abandon_with_grace(&mut self) {
        self.abandon();
        let _ = tokio::time::timeout(SETTLE_GRACE, &mut self.handle).await;
    }
}

impl Drop for TrackedCall {
    fn drop(&mut self) {
        if !self.finished {
            self.abandon();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_abandoned_call_is_pending_until_it_settles() {
        let pending = Arc::new(Pending::default());
        let (release, released) = tokio::sync::oneshot::channel::<()>();
        let mut call = TrackedCall::spawn(
            Box::pin(async move {
                let _ = released.await;
                Ok(None)
            }),
            pending.clone(),
            Owner::Hook,
        );
        call.abandon();
        assert_eq!(pending.count(Owner::Hook), 1);
        assert!(!pending.settle(Duration::from_millis(10)).await);
        release.send(()).unwrap();
        assert!(pending.settle(Duration::from_secs(1)).await);
        assert_eq!(pending.count(Owner::Hook), 0);
    }

    #[tokio::test]
    async fn a_finished_call_is_never_pending() {
        let pending = Arc::new(Pending::default());
        let mut call = TrackedCall::spawn(
            Box::pin(async { Ok(Some(Value::Bool(true))) }),
            pending.clone(),
            Owner::Permission,
        );
        assert_eq!(call.result().await, Ok(Some(Value::Bool(true))));
        drop(call);
        assert_eq!(pending.count(Owner::Permission), 0);
    }

    #[tokio::test]
    async fn dropping_a_running_call_abandons_it() {
        let pending = Arc::new(Pending::default());
        let call = TrackedCall::spawn(Box::pin(futures::future::pending()), pending.clone(), Owner::Hook);
        drop(call);
        assert_eq!(pending.count(Owner::Hook), 1);
    }
}
