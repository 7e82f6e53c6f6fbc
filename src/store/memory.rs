//! The in-memory back end: the default when no `advanced.store` is given. One per process (a
//! pause lives as long as the process); `MemoryStore::new()` gives a private one (tests).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use async_trait::async_trait;
use serde_json::{Map, Value};

use super::{
    Decision, Deferred, DeferredOutcome, Effect, PendingCall, PendingReason, SessionRecord, StartedEffect, Store,
    StoreError, ToolResult,
};

#[derive(Default)]
pub struct MemoryStore {
    sessions: Mutex<HashMap<String, Session>>,
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
    pub fn process_wide() -> Arc<MemoryStore> {
        static PROCESS: OnceLock<Arc<MemoryStore>> = OnceLock::new();
        PROCESS.get_or_init(|| Arc::new(MemoryStore::new())).clone()
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

    async fn save(&self, record: &SessionRecord, pending: &[PendingCall]) -> Result<(), StoreError> {
        let mut sessions = self.lock("save session")?;
        let session = sessions.entry(record.session_id.clone()).or_default();
        for call in pending.iter().filter(|call| call.reason == PendingReason::Deferred) {
            session
                .deferred
                .entry(call.tool_call_id.clone())
                .or_insert(Deferred::Waiting);
        }
        session.saved = Some((record.clone(), pending.to_vec()));
        Ok(())
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
        session_id: &str,
        tool_call_id: &str,
        tool_name: &str,
        input: &Map<String, Value>,
        side_effect: &str,
    ) -> Result<(), StoreError> {
        let mut sessions = self.lock("record effect start")?;
        let session = sessions.entry(session_id.to_owned()).or_default();
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

    async fn effect_finished(
        &self,
        session_id: &str,
        tool_call_id: &str,
        result: &ToolResult,
    ) -> Result<(), StoreError> {
        let mut sessions = self.lock("record effect result")?;
        if let Some(entry) = sessions
            .get_mut(session_id)
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
}
