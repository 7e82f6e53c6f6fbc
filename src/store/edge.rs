//! What every back end's callers go through: one rule for the ids a store keeps (the same on
//! every back end, the memory store included), and a deadline on every operation of a store
//! that waits on something outside the process (a file lock, a server), so a silent database
//! fails an operation with `STORE_ERROR` instead of holding it forever.
//!
//! Ids: PostgreSQL text cannot hold U+0000, and a key longer than about 2.7 kB does not fit a
//! B-tree index entry; SQLite and the memory store would take both. Rather than store such an
//! id on some back ends and fail on others, every back end refuses it, before anything is
//! written, with an error naming the id and the rule.

use std::future::Future;
use std::ops::Deref;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Map, Value};

use super::{
    Attempt, Claim, Claimed, Decision, Deferred, DeferredOutcome, Due, Effect, Lease, LeaseState, Loaded, PendingCall,
    Queued, SessionRecord, Settled, StartedEffect, Store, StoreError, ToolResult,
};

/// The longest id (session, tool call, hook, lease owner) a store keeps, in bytes of UTF-8. Two
/// of them make a primary key (session, call) that still fits PostgreSQL's index entry.
pub const MAX_ID_BYTES: usize = 1024;

/// How long one operation of an SQL store may take in all: acquiring a connection (at most 10 s),
/// waiting for a lock, its statements. Past it the operation fails with `STORE_ERROR`.
pub const DEADLINE: Duration = Duration::from_secs(15);

/// `Ok` when `id` can be stored on every back end; otherwise what is wrong, phrased to follow the
/// id's name (`must be at most 1024 bytes of UTF-8 without U+0000 (got 1048576 bytes)`).
pub fn check_id(id: &str) -> Result<(), String> {
    const RULE: &str = "must be at most 1024 bytes of UTF-8 without U+0000";
    if id.len() > MAX_ID_BYTES {
        return Err(format!("{RULE} (got {} bytes)", id.len()));
    }
    match id.find('\0') {
        Some(at) => Err(format!("{RULE} (got U+0000 at byte {at})")),
        None => Ok(()),
    }
}

/// An id as an error message may show it: whole when it is one a store keeps, else its start.
fn shown(id: &str) -> String {
    if check_id(id).is_ok() {
        return id.to_owned();
    }
    let start: String = id.chars().take(32).collect();
    format!("{}…", start.escape_debug())
}

/// `<what> call <id> of session <id>`, the ids as an error may show them.
fn of_call(what: &str, tool_call_id: &str, session_id: &str) -> String {
    format!("{what} call {} of session {}", shown(tool_call_id), shown(session_id))
}

/// Refuses the first id of `ids` (its name, the id) that a store cannot keep.
fn check(operation: impl FnOnce() -> String, ids: &[(&str, &str)]) -> Result<(), StoreError> {
    for (name, id) in ids {
        if let Err(problem) = check_id(id) {
            return Err(StoreError::new(operation(), format!("the {name} {problem}")));
        }
    }
    Ok(())
}

/// A back end behind the edge: ids checked, and, with a `deadline`, every operation bounded.
pub struct Guarded<S> {
    inner: S,
    deadline: Option<Duration>,
}

impl<S> Guarded<S> {
    /// `deadline`: how long any one operation may take (acquiring a connection, waiting for a
    /// lock, the statements), `None` for a store whose operations never wait (the memory store).
    pub fn new(inner: S, deadline: Option<Duration>) -> Self {
        Guarded { inner, deadline }
    }
}

impl<S> Deref for Guarded<S> {
    type Target = S;

    fn deref(&self) -> &S {
        &self.inner
    }
}

/// Runs `work` within `deadline`: past it, the operation fails (and its connection is let go).
pub async fn within<T>(
    deadline: Option<Duration>,
    operation: impl FnOnce() -> String,
    work: impl Future<Output = Result<T, StoreError>>,
) -> Result<T, StoreError> {
    let Some(deadline) = deadline else {
        return work.await;
    };
    match tokio::time::timeout(deadline, work).await {
        Ok(done) => done,
        Err(_) => Err(StoreError::new(
            operation(),
            format!("the store did not answer within {} ms", deadline.as_millis()),
        )),
    }
}

impl<S: Store> Guarded<S> {
    async fn run<T>(
        &self,
        operation: impl Fn() -> String,
        ids: &[(&str, &str)],
        work: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        check(&operation, ids)?;
        within(self.deadline, operation, work).await
    }
}

#[async_trait]
impl<S: Store> Store for Guarded<S> {
    async fn load(&self, session_id: &str) -> Result<Option<(SessionRecord, Vec<PendingCall>)>, StoreError> {
        let operation = || format!("load session {}", shown(session_id));
        self.run(operation, &[("session id", session_id)], self.inner.load(session_id))
            .await
    }

    async fn save(&self, record: &SessionRecord, pending: &[PendingCall], lease: &Lease) -> Result<(), StoreError> {
        let operation = || format!("save session {}", shown(&record.session_id));
        let mut ids = vec![("session id", record.session_id.as_str())];
        ids.extend(pending.iter().map(|call| ("tool call id", call.tool_call_id.as_str())));
        self.run(operation, &ids, self.inner.save(record, pending, lease)).await
    }

    async fn save_and_release(
        &self,
        record: &SessionRecord,
        pending: &[PendingCall],
        lease: &Lease,
    ) -> Result<(), StoreError> {
        let operation = || format!("save session {} and release its lease", shown(&record.session_id));
        let mut ids = vec![("session id", record.session_id.as_str())];
        ids.extend(pending.iter().map(|call| ("tool call id", call.tool_call_id.as_str())));
        self.run(operation, &ids, self.inner.save_and_release(record, pending, lease))
            .await
    }

    async fn save_and_start(
        &self,
        record: &SessionRecord,
        lease: &Lease,
        call: (&str, &str, &Map<String, Value>),
        side_effect: &str,
    ) -> Result<(), StoreError> {
        let operation = || {
            format!(
                "save session {} and record the start of call {}",
                shown(&record.session_id),
                shown(call.0)
            )
        };
        let ids = [("session id", record.session_id.as_str()), ("tool call id", call.0)];
        self.run(
            operation,
            &ids,
            self.inner.save_and_start(record, lease, call, side_effect),
        )
        .await
    }

    async fn load_with_lease(&self, session_id: &str) -> Result<Option<Loaded>, StoreError> {
        let operation = || format!("load session {}", shown(session_id));
        self.run(
            operation,
            &[("session id", session_id)],
            self.inner.load_with_lease(session_id),
        )
        .await
    }

    async fn effects(&self, session_id: &str, tool_call_ids: &[String]) -> Result<Vec<(String, Effect)>, StoreError> {
        let operation = || format!("read the effects ledger of session {}", shown(session_id));
        let mut ids = vec![("session id", session_id)];
        ids.extend(tool_call_ids.iter().map(|id| ("tool call id", id.as_str())));
        self.run(operation, &ids, self.inner.effects(session_id, tool_call_ids))
            .await
    }

    async fn save_running(&self, session_id: &str, running: &Value, lease: &Lease) -> Result<(), StoreError> {
        let operation = || format!("save the sub-agents at work in session {}", shown(session_id));
        self.run(
            operation,
            &[("session id", session_id)],
            self.inner.save_running(session_id, running, lease),
        )
        .await
    }

    async fn pending_calls(&self, session_id: &str) -> Result<Vec<PendingCall>, StoreError> {
        let operation = || format!("read the pending calls of session {}", shown(session_id));
        self.run(
            operation,
            &[("session id", session_id)],
            self.inner.pending_calls(session_id),
        )
        .await
    }

    async fn decide(&self, session_id: &str, tool_call_id: &str, decision: &Decision) -> Result<bool, StoreError> {
        let operation = || of_call("decide", tool_call_id, session_id);
        let ids = [("session id", session_id), ("tool call id", tool_call_id)];
        self.run(operation, &ids, self.inner.decide(session_id, tool_call_id, decision))
            .await
    }

    async fn effect_started(
        &self,
        lease: &Lease,
        tool_call_id: &str,
        tool_name: &str,
        input: &Map<String, Value>,
        side_effect: &str,
    ) -> Result<(), StoreError> {
        let session_id = lease.session_id.as_str();
        let operation = || of_call("record start of", tool_call_id, session_id);
        let ids = [("session id", session_id), ("tool call id", tool_call_id)];
        let work = self
            .inner
            .effect_started(lease, tool_call_id, tool_name, input, side_effect);
        self.run(operation, &ids, work).await
    }

    async fn effect_finished(&self, lease: &Lease, tool_call_id: &str, result: &ToolResult) -> Result<(), StoreError> {
        let session_id = lease.session_id.as_str();
        let operation = || of_call("record result of", tool_call_id, session_id);
        let ids = [("session id", session_id), ("tool call id", tool_call_id)];
        self.run(operation, &ids, self.inner.effect_finished(lease, tool_call_id, result))
            .await
    }

    async fn effect(&self, session_id: &str, tool_call_id: &str) -> Result<Option<Effect>, StoreError> {
        let operation = || of_call("read effect of", tool_call_id, session_id);
        let ids = [("session id", session_id), ("tool call id", tool_call_id)];
        self.run(operation, &ids, self.inner.effect(session_id, tool_call_id))
            .await
    }

    async fn open_effects(&self, session_id: &str) -> Result<Vec<StartedEffect>, StoreError> {
        let operation = || format!("list open effects of session {}", shown(session_id));
        self.run(
            operation,
            &[("session id", session_id)],
            self.inner.open_effects(session_id),
        )
        .await
    }

    async fn complete_deferred(
        &self,
        session_id: &str,
        tool_call_id: &str,
        result: &ToolResult,
    ) -> Result<DeferredOutcome, StoreError> {
        let operation = || of_call("complete deferred", tool_call_id, session_id);
        let ids = [("session id", session_id), ("tool call id", tool_call_id)];
        let work = self.inner.complete_deferred(session_id, tool_call_id, result);
        self.run(operation, &ids, work).await
    }

    async fn deferred(&self, session_id: &str, tool_call_id: &str) -> Result<Option<Deferred>, StoreError> {
        let operation = || of_call("read deferred", tool_call_id, session_id);
        let ids = [("session id", session_id), ("tool call id", tool_call_id)];
        self.run(operation, &ids, self.inner.deferred(session_id, tool_call_id))
            .await
    }

    async fn claim(&self, session_id: &str, owner: &str, ttl: Duration) -> Result<Claim, StoreError> {
        let operation = || format!("claim session {}", shown(session_id));
        let ids = [("session id", session_id), ("lease owner", owner)];
        self.run(operation, &ids, self.inner.claim(session_id, owner, ttl))
            .await
    }

    async fn renew(&self, lease: &Lease, ttl: Duration) -> Result<bool, StoreError> {
        let operation = || format!("renew the lease on session {}", shown(&lease.session_id));
        let ids = [("session id", lease.session_id.as_str())];
        self.run(operation, &ids, self.inner.renew(lease, ttl)).await
    }

    async fn release(&self, lease: &Lease) -> Result<(), StoreError> {
        let operation = || format!("release the lease on session {}", shown(&lease.session_id));
        let ids = [("session id", lease.session_id.as_str())];
        self.run(operation, &ids, self.inner.release(lease)).await
    }

    async fn lease_state(&self, session_id: &str) -> Result<Option<LeaseState>, StoreError> {
        let operation = || format!("read the lease on session {}", shown(session_id));
        self.run(
            operation,
            &[("session id", session_id)],
            self.inner.lease_state(session_id),
        )
        .await
    }

    async fn enqueue(&self, rows: &[Queued], lease: Option<&Lease>) -> Result<(), StoreError> {
        let operation = || super::outbox::enqueue_operation(rows);
        let mut ids = Vec::with_capacity(rows.len() * 3);
        for row in rows {
            ids.extend([
                ("session id", row.session_id.as_str()),
                ("hook id", row.hook_id.as_str()),
                ("notification id", row.id.as_str()),
            ]);
        }
        ids.extend(lease.map(|lease| ("session id", lease.session_id.as_str())));
        self.run(operation, &ids, self.inner.enqueue(rows, lease)).await
    }

    async fn claim_deliveries(&self, owner: &str, due: Due<'_>, limit: u32) -> Result<Vec<Claimed>, StoreError> {
        let operation = || "claim queued webhook notifications".to_owned();
        self.run(
            operation,
            &[("owner", owner)],
            self.inner.claim_deliveries(owner, due, limit),
        )
        .await
    }

    async fn report(&self, claimed: &Claimed, attempt: &Attempt) -> Result<Settled, StoreError> {
        let operation = || format!("record a delivery attempt of queued notification {}", claimed.row.id);
        self.run(operation, &[], self.inner.report(claimed, attempt)).await
    }

    async fn queued(&self) -> Result<u64, StoreError> {
        let operation = || "count queued webhook notifications".to_owned();
        self.run(operation, &[], self.inner.queued()).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_with_u0000_or_over_1024_bytes_are_refused_with_the_rule() {
        assert_eq!(check_id(""), Ok(()));
        assert_eq!(check_id("toolu_🦀"), Ok(()));
        assert_eq!(check_id(&"é".repeat(512)), Ok(()));
        assert_eq!(
            check_id(&"é".repeat(513)),
            Err("must be at most 1024 bytes of UTF-8 without U+0000 (got 1026 bytes)".into())
        );
        assert_eq!(
            check_id("ab\0c"),
            Err("must be at most 1024 bytes of UTF-8 without U+0000 (got U+0000 at byte 2)".into())
        );
        assert_eq!(shown("ab\0c"), "ab\\0c…");
        assert_eq!(shown(&"x".repeat(2000)), format!("{}…", "x".repeat(32)));
    }
}
