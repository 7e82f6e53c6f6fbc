//! Delivering the outbox (SPEC §8.3): every process that opens a store attaches a deliverer to
//! it, which claims due rows, sends each once (with its `Idempotency-Key`) and reports how it
//! went; `drain` tries every queued row once now. A row whose process died mid-attempt is claimed
//! again once its claim expires: delivery is at least once, never lost.
//!
//! Each store's [`Deliverer`] is the handle its sessions hold. A critical row (`fallback:
//! 'none'`) given up after its last attempt fails its run when that run is still going in this
//! process ([`Deliverer::watch_operation`]); otherwise it stays in the outbox as failed. Header
//! templates resolve from the environment the store's runs last read
//! ([`Deliverer::remember_environment`]), never from a stored value. Nothing here keeps Node
//! alive: the deliverers are tasks of the runtime's workers, and end with their store.

use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex, Weak};
use std::time::Duration;

use futures::future::join_all;
use tokio::sync::Notify;

use super::outbox::{Attempt, Claimed, Due, Settled};
use super::{Store, StoreError};
use crate::ids;
use crate::sync::lock;
use crate::webhook::deliver::notify_queued;
use crate::webhook::Environment;

/// How often an idle deliverer looks for rows other processes queued (its own wake it at once).
const POLL: Duration = Duration::from_millis(500);
/// Rows one claim takes.
const BATCH: u32 = 16;

/// What fails a run when one of its critical rows is given up: the hook's id and why.
pub type GiveUp = Box<dyn Fn(&str, &str) + Send + Sync>;

/// This process's name as a deliverer.
static OWNER: LazyLock<String> = LazyLock::new(|| format!("{}/{}", std::process::id(), ids::uuid()));
/// A store this process delivers for, and its deliverer.
type Attached = (Weak<dyn Store>, Arc<Deliverer>);
static DELIVERERS: Mutex<Vec<Attached>> = Mutex::new(Vec::new());

/// A store's deliverer in this process, as its sessions hold it: what wakes it, the variables
/// its rows' header templates resolve from, and the runs a given-up critical row fails.
#[derive(Default)]
pub struct Deliverer {
    wake: Notify,
    environment: Mutex<Environment>,
    operations: Mutex<HashMap<String, GiveUp>>,
}

impl Deliverer {
    /// Variables header templates may use, as a run (or `drainOutbox`) read them on the JS thread.
    pub fn remember_environment(&self, environment: &Environment) {
        if environment.is_empty() {
            return;
        }
        let mut known = lock(&self.environment);
        for (name, value) in environment {
            known.insert(name.clone(), value.clone());
        }
    }

    /// While the returned guard lives, a critical row of run `operation_id` given up calls
    /// `give_up`.
    pub fn watch_operation(self: &Arc<Self>, operation_id: &str, give_up: GiveUp) -> Watch {
        lock(&self.operations).insert(operation_id.to_owned(), give_up);
        Watch {
            deliverer: Arc::downgrade(self),
            operation_id: operation_id.to_owned(),
        }
    }

    /// Rows were just queued: deliver them now, not at the next poll.
    pub fn wake(&self) {
        self.wake.notify_one();
    }

    fn environment(&self) -> Environment {
        lock(&self.environment).clone()
    }

    fn give_up(&self, operation_id: &str, hook_id: &str, cause: &str) {
        if let Some(give_up) = lock(&self.operations).get(operation_id) {
            give_up(hook_id, cause);
        }
    }
}

/// Ends a [`Deliverer::watch_operation`] when dropped.
pub struct Watch {
    deliverer: Weak<Deliverer>,
    operation_id: String,
}

impl Drop for Watch {
    fn drop(&mut self) {
        if let Some(deliverer) = self.deliverer.upgrade() {
            lock(&deliverer.operations).remove(&self.operation_id);
        }
    }
}

fn same(a: &Weak<dyn Store>, b: &Arc<dyn Store>) -> bool {
    std::ptr::addr_eq(a.as_ptr(), Arc::as_ptr(b))
}

/// `store`'s deliverer in this process, started on first use (once per store).
pub fn attach(store: &Arc<dyn Store>) -> Arc<Deliverer> {
    let mut deliverers = lock(&DELIVERERS);
    deliverers.retain(|(store, _)| store.strong_count() > 0);
    if let Some((_, deliverer)) = deliverers.iter().find(|(attached, _)| same(attached, store)) {
        return deliverer.clone();
    }
    let deliverer = Arc::new(Deliverer::default());
    deliverers.push((Arc::downgrade(store), deliverer.clone()));
    tokio::spawn(deliver_loop(Arc::downgrade(store), deliverer.clone()));
    deliverer
}

async fn deliver_loop(store: Weak<dyn Store>, deliverer: Arc<Deliverer>) {
    loop {
        let Some(live) = store.upgrade() else {
            return;
        };
        let claimed = match live.claim_deliveries(&OWNER, Due::Now, BATCH).await {
            Ok(claimed) => claimed,
            Err(error) => {
                tracing::warn!(error = %error, "queued webhook notifications could not be claimed; trying again");
                Vec::new()
            }
        };
        if !claimed.is_empty() {
            join_all(claimed.iter().map(|claimed| attempt(&*live, &deliverer, claimed))).await;
            // A full batch may have more behind it.
            continue;
        }
        drop(live);
        tokio::select! {
            _ = deliverer.wake.notified() => {}
            _ = tokio::time::sleep(POLL) => {}
        }
    }
}

/// One attempt at `claimed`, reported to the store: what the attempt was, and what it settled to.
async fn attempt(
    store: &dyn Store,
    deliverer: &Deliverer,
    claimed: &Claimed,
) -> (Attempt, Result<Settled, StoreError>) {
    let row = &claimed.row;
    let environment = deliverer.environment();
    let sent = match reqwest::Url::parse(&row.target.url) {
        Ok(url) => {
            let timeout = Duration::from_millis(row.target.timeout_ms);
            notify_queued(
                &url,
                timeout,
                &row.target.headers,
                (row.body.clone(), &row.idempotency_key),
                &environment,
            )
            .await
        }
        Err(_) => Err(crate::webhook::DeliveryError::Configuration),
    };
    let attempt = match sent {
        Ok(()) => Attempt::Delivered,
        Err(error) => Attempt::Failed(error.to_string()),
    };
    let settled = store.report(claimed, &attempt).await;
    match (&attempt, &settled) {
        (Attempt::Failed(cause), Ok(Settled::GaveUp)) => {
            tracing::warn!(hook_id = %row.hook_id, event = %row.event, error = %cause, attempts = row.max_attempts,
                "a queued webhook notification was given up after its last attempt");
            if row.critical {
                if let Some(operation) = &row.operation_id {
                    deliverer.give_up(operation, &row.hook_id, cause);
                }
            }
        }
        (_, Err(error)) => {
            tracing::warn!(error = %error, "a queued notification's attempt could not be recorded; it will be tried again");
        }
        _ => {}
    }
    (attempt, settled)
}

/// What `drain` did.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Drained {
    /// This drain's successful attempts.
    pub delivered: u64,
    /// This drain's failed attempts.
    pub failed: u64,
    /// Rows still queued afterwards.
    pub remaining: u64,
}

/// Tries every queued row once now, whatever its backoff (rows another process holds right now
/// excepted), then counts what is still queued.
pub async fn drain(store: &Arc<dyn Store>) -> Result<Drained, StoreError> {
    let deliverer = attach(store);
    let id = ids::uuid();
    let mut drained = Drained::default();
    loop {
        let claimed = store.claim_deliveries(&OWNER, Due::Drain(&id), BATCH * 2).await?;
        if claimed.is_empty() {
            break;
        }
        for (attempt, _) in join_all(claimed.iter().map(|claimed| attempt(&**store, &deliverer, claimed))).await {
            match attempt {
                Attempt::Delivered => drained.delivered += 1,
                Attempt::Failed(_) => drained.failed += 1,
            }
        }
    }
    drained.remaining = store.queued().await?;
    Ok(drained)
}
