//! The in-memory back end: the default when no `advanced.store` is given. One per process (a
//! pause lives as long as the process); `MemoryStore::new()` gives a private one (tests).

use std::collections::HashMap;
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde_json::{Map, Value};

use super::edge::Guarded;
use super::outbox::CLAIM_MARGIN;
use super::{
    Attempt, Claim, Claimed, Decision, Deferred, DeferredOutcome, Due, Effect, Lease, LeaseState, PendingCall,
    PendingReason, Queued, SessionRecord, Settled, StartedEffect, Store, StoreError, ToolResult,
};

#[derive(Default)]
pub struct MemoryStore {
    sessions: Mutex<HashMap<String, Session>>,
    /// Live leases only: a released one is forgotten (a process-wide store must not grow with
    /// every session ever run), so tokens come from one counter and never repeat.
    leases: Mutex<HashMap<String, Held>>,
    last_token: AtomicI64,
    /// Queued notifications, oldest first; a row leaves once delivered or given up.
    outbox: Mutex<Vec<OutboxRow>>,
}

struct OutboxRow {
    queued: Queued,
    attempts: u32,
    available: Instant,
    claimed_until: Option<Instant>,
    claim_token: i64,
    drain: Option<String>,
}

struct Held {
    token: i64,
    owner: String,
    expires: Instant,
}

#[derive(Default)]
struct Session {
    saved: Option<(SessionRecord, Vec<PendingCall>)>,
    /// Ledger entries by call id; `seq` keeps start order.
    effects: HashMap<String, LedgerEntry>,
    next_seq: u64,
    deferred: HashMap<String, Deferred>,
}

struct LedgerEntry {
    seq: u64,
    tool_name: String,
    input: Map<String, Value>,
    side_effect: String,
    effect: Effect,
}

impl MemoryStore {
    pub fn new() -> Self {
        Self::default()
    }

    /// The process's memory store.
    /// Behind the edge (its ids checked as every back end's are); no deadline: its operations
    /// are a lock and a map, and never wait.
    pub fn process_wide() -> Arc<Guarded<MemoryStore>> {
        static PROCESS: OnceLock<Arc<Guarded<MemoryStore>>> = OnceLock::new();
        PROCESS
            .get_or_init(|| Arc::new(Guarded::new(MemoryStore::new(), None)))
            .clone()
    }

    fn outbox(&self) -> MutexGuard<'_, Vec<OutboxRow>> {
        // Plain data: a panic elsewhere leaves whole rows behind.
        self.outbox.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn leases(&self) -> MutexGuard<'_, HashMap<String, Held>> {
        // Plain data, each update one assignment: a panic elsewhere leaves nothing half-written.
        self.leases.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Refuses a write whose lease is no longer live.
    fn fence(&self, lease: &Lease, operation: &str) -> Result<(), StoreError> {
        match self.leases().get(&lease.session_id) {
            Some(held) if held.token == lease.token && held.expires > Instant::now() => Ok(()),
            _ => Err(StoreError::lease_lost(operation, lease)),
        }
    }

    /// No operation awaits while holding the lock, so a poisoned lock only means a panic
    /// elsewhere mid-update; report it rather than read possibly half-written state.
    fn lock(&self, operation: &str) -> Result<MutexGuard<'_, HashMap<String, Session>>, StoreError> {
        self.sessions
            .lock()
            .map_err(|_| StoreError::new(operation, "the memory store was poisoned by a panic"))
    }
}

#[async_trait]
impl Store for MemoryStore {
    async fn load(&self, session_id: &str) -> Result<Option<(SessionRecord, Vec<PendingCall>)>, StoreError> {
        let sessions = self.lock("load session")?;
        Ok(sessions.get(session_id).and_then(|session| session.saved.clone()))
    }

    async fn save(&self, record: &SessionRecord, pending: &[PendingCall], lease: &Lease) -> Result<(), StoreError> {
        self.fence(lease, "save session")?;
        let mut sessions = self.lock("save session")?;
        let session = sessions.entry(record.session_id.clone()).or_default();
        for call in pending {
            match call.reason {
                PendingReason::Deferred => {
                    session
                        .deferred
                        .entry(call.tool_call_id.clone())
                        .or_insert(Deferred::Waiting);
                }
                PendingReason::OutcomeUnknown => {
                    if let Some(entry) = session.effects.get_mut(&call.tool_call_id) {
                        if entry.effect == Effect::Started {
                            entry.effect = Effect::Unknown;
                        }
                    }
                }
                PendingReason::Ask | PendingReason::Subagent => {}
            }
        }
        session.saved = Some((record.clone(), pending.to_vec()));
        Ok(())
    }

    async fn save_running(&self, session_id: &str, running: &Value, lease: &Lease) -> Result<(), StoreError> {
        self.fence(lease, "save the sub-agents at work")?;
        let mut sessions = self.lock("save the sub-agents at work")?;
        if let Some((record, _)) = sessions.get_mut(session_id).and_then(|session| session.saved.as_mut()) {
            record.running = Some(running.clone());
        }
        Ok(())
    }

    async fn pending_calls(&self, session_id: &str) -> Result<Vec<PendingCall>, StoreError> {
        let sessions = self.lock("read pending calls")?;
        Ok(sessions
            .get(session_id)
            .and_then(|session| session.saved.as_ref())
            .map(|(_, pending)| pending.clone())
            .unwrap_or_default())
    }

    async fn decide(&self, session_id: &str, tool_call_id: &str, decision: &Decision) -> Result<bool, StoreError> {
        let mut sessions = self.lock("decide")?;
        let call = sessions
            .get_mut(session_id)
            .and_then(|session| session.saved.as_mut())
            .and_then(|(_, pending)| pending.iter_mut().find(|call| call.tool_call_id == tool_call_id));
        match call {
            Some(call) if call.decision.is_none() => {
                call.decision = Some(decision.clone());
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    async fn effect_started(
        &self,
        lease: &Lease,
        tool_call_id: &str,
        tool_name: &str,
        input: &Map<String, Value>,
        side_effect: &str,
    ) -> Result<(), StoreError> {
        self.fence(lease, "record effect start")?;
        let mut sessions = self.lock("record effect start")?;
        let session = sessions.entry(lease.session_id.clone()).or_default();
        let seq = match session.effects.get(tool_call_id) {
            Some(entry) => entry.seq,
            None => {
                session.next_seq += 1;
                session.next_seq
            }
        };
        let entry = LedgerEntry {
            seq,
            tool_name: tool_name.to_owned(),
            input: input.clone(),
            side_effect: side_effect.to_owned(),
            effect: Effect::Started,
        };
        session.effects.insert(tool_call_id.to_owned(), entry);
        Ok(())
    }

    async fn effect_finished(&self, lease: &Lease, tool_call_id: &str, result: &ToolResult) -> Result<(), StoreError> {
        self.fence(lease, "record effect result")?;
        let mut sessions = self.lock("record effect result")?;
        if let Some(entry) = sessions
            .get_mut(&lease.session_id)
            .and_then(|session| session.effects.get_mut(tool_call_id))
        {
            entry.effect = Effect::Finished(result.clone());
        }
        Ok(())
    }

    async fn effect(&self, session_id: &str, tool_call_id: &str) -> Result<Option<Effect>, StoreError> {
        let sessions = self.lock("read effect")?;
        Ok(sessions
            .get(session_id)
            .and_then(|session| session.effects.get(tool_call_id))
            .map(|entry| entry.effect.clone()))
    }

    async fn open_effects(&self, session_id: &str) -> Result<Vec<StartedEffect>, StoreError> {
        let sessions = self.lock("list open effects")?;
        let Some(session) = sessions.get(session_id) else {
            return Ok(Vec::new());
        };
        let mut open: Vec<(&String, &LedgerEntry)> = session
            .effects
            .iter()
            .filter(|(id, entry)| entry.effect == Effect::Started && !session.deferred.contains_key(*id))
            .collect();
        open.sort_by_key(|(_, entry)| entry.seq);
        Ok(open
            .into_iter()
            .map(|(id, entry)| StartedEffect {
                tool_call_id: id.clone(),
                tool_name: entry.tool_name.clone(),
                input: entry.input.clone(),
                side_effect: entry.side_effect.clone(),
            })
            .collect())
    }

    async fn complete_deferred(
        &self,
        session_id: &str,
        tool_call_id: &str,
        result: &ToolResult,
    ) -> Result<DeferredOutcome, StoreError> {
        let mut sessions = self.lock("complete deferred call")?;
        let Some(session) = sessions.get_mut(session_id) else {
            return Ok(DeferredOutcome::NotDeferred);
        };
        match session.deferred.get_mut(tool_call_id) {
            None => Ok(DeferredOutcome::NotDeferred),
            Some(Deferred::Published(first)) => Ok(DeferredOutcome::AlreadyPublished(first.clone())),
            Some(placeholder) => {
                *placeholder = Deferred::Published(result.clone());
                if let Some(entry) = session.effects.get_mut(tool_call_id) {
                    entry.effect = Effect::Finished(result.clone());
                }
                Ok(DeferredOutcome::Published)
            }
        }
    }

    async fn deferred(&self, session_id: &str, tool_call_id: &str) -> Result<Option<Deferred>, StoreError> {
        let sessions = self.lock("read deferred call")?;
        Ok(sessions
            .get(session_id)
            .and_then(|session| session.deferred.get(tool_call_id))
            .cloned())
    }

    async fn claim(&self, session_id: &str, owner: &str, ttl: Duration) -> Result<Claim, StoreError> {
        let now = Instant::now();
        let mut leases = self.leases();
        if let Some(held) = leases.get(session_id).filter(|held| held.expires > now) {
            return Ok(Claim::Held {
                owner: held.owner.clone(),
                remaining_ms: held.expires.duration_since(now).as_millis() as i64,
            });
        }
        let token = self.last_token.fetch_add(1, Ordering::Relaxed) + 1;
        let held = Held {
            token,
            owner: owner.to_owned(),
            expires: now + ttl,
        };
        leases.insert(session_id.to_owned(), held);
        Ok(Claim::Granted(Lease {
            session_id: session_id.to_owned(),
            token,
        }))
    }

    async fn renew(&self, lease: &Lease, ttl: Duration) -> Result<bool, StoreError> {
        let now = Instant::now();
        match self.leases().get_mut(&lease.session_id) {
            Some(held) if held.token == lease.token && held.expires > now => {
                held.expires = now + ttl;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    async fn release(&self, lease: &Lease) -> Result<(), StoreError> {
        let mut leases = self.leases();
        if leases
            .get(&lease.session_id)
            .is_some_and(|held| held.token == lease.token)
        {
            leases.remove(&lease.session_id);
        }
        Ok(())
    }

    async fn lease_state(&self, session_id: &str) -> Result<Option<LeaseState>, StoreError> {
        let now = Instant::now();
        Ok(self.leases().get(session_id).map(|held| LeaseState {
            token: held.token,
            live: held.expires > now,
        }))
    }

    async fn enqueue(&self, rows: &[Queued], lease: Option<&Lease>) -> Result<(), StoreError> {
        if let Some(lease) = lease {
            self.fence(lease, "queue webhook notifications")?;
        }
        let now = Instant::now();
        let mut outbox = self.outbox();
        // The first row queued under a key stands while it is kept (SQL stores keep it for good).
        for queued in rows {
            if outbox
                .iter()
                .any(|row| row.queued.idempotency_key == queued.idempotency_key)
            {
                continue;
            }
            outbox.push(OutboxRow {
                queued: queued.clone(),
                attempts: 0,
                available: now,
                claimed_until: None,
                claim_token: 0,
                drain: None,
            });
        }
        Ok(())
    }

    async fn claim_deliveries(&self, _owner: &str, due: Due<'_>, limit: u32) -> Result<Vec<Claimed>, StoreError> {
        let now = Instant::now();
        let mut outbox = self.outbox();
        let mut claimed = Vec::new();
        for row in outbox.iter_mut() {
            if claimed.len() >= limit as usize {
                break;
            }
            let free = row.claimed_until.is_none_or(|until| until <= now);
            let wanted = match due {
                Due::Now => row.available <= now,
                Due::Drain(id) => row.drain.as_deref() != Some(id),
            };
            if !(free && wanted) {
                continue;
            }
            row.claim_token += 1;
            row.claimed_until = Some(now + Duration::from_millis(row.queued.target.timeout_ms) + CLAIM_MARGIN);
            if let Due::Drain(id) = due {
                row.drain = Some(id.to_owned());
            }
            claimed.push(Claimed {
                row: row.queued.clone(),
                attempts: row.attempts,
                claim_token: row.claim_token,
            });
        }
        Ok(claimed)
    }

    async fn report(&self, claimed: &Claimed, attempt: &Attempt) -> Result<Settled, StoreError> {
        let mut outbox = self.outbox();
        let Some(position) = outbox
            .iter()
            .position(|row| row.queued.id == claimed.row.id && row.claim_token == claimed.claim_token)
        else {
            return Ok(Settled::Stale);
        };
        let settled = super::outbox::settle(attempt, claimed.attempts, claimed.row.max_attempts);
        match settled {
            Settled::Retry(wait) => {
                let row = &mut outbox[position];
                row.attempts += 1;
                row.available = Instant::now() + wait;
                row.claimed_until = None;
            }
            _ => {
                outbox.remove(position);
            }
        }
        Ok(settled)
    }

    async fn queued(&self) -> Result<u64, StoreError> {
        Ok(self.outbox().len() as u64)
    }
}
