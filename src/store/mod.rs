//! Durable sessions (SPEC §8.2): one store interface, three back ends (in memory, SQLite,
//! PostgreSQL for many workers, §8.3), the options that pick one (`options`), and the digests
//! that bind an approval to one call (`canonical`). Every back end runs through the same
//! conformance suite (`tests/store.rs`).
//!
//! Every operation is async and runs on the Tokio runtime, never on the JS thread. A store that
//! cannot be read or written answers `StoreError` (the caller's `STORE_ERROR`), never "nothing
//! stored".

mod canonical;
mod codec;
pub mod delivery;
mod edge;
mod group_commit;
mod lease;
mod memory;
mod options;
pub mod outbox;
mod pooler;
mod postgres;
mod rows;
mod shared;
mod sql;
mod sqlite;

use std::fmt;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::model::{display_url, Message};

pub use canonical::{approval_token, canonical_json, fingerprint, ledger_key, verify_approval_token, CallPlace};
pub use codec::stored_messages;
pub use edge::{check_id, within, Guarded, DEADLINE, MAX_ID_BYTES};
pub use lease::{Claim, Lease, LeaseState};
pub use memory::MemoryStore;
pub use outbox::{Attempt, Claimed, Due, Queued, Settled};
pub use postgres::{check_postgres_url, PostgresStore};
pub use sqlite::{check_sqlite_path, SqliteStore};

/// Where sessions live (`advanced.store`).
#[derive(Clone, PartialEq, Eq)]
pub enum StoreConfig {
    /// Process-wide, in memory: a pause lives as long as the process.
    Memory,
    /// A SQLite file, created (with its directory) on first use.
    Sqlite(PathBuf),
    /// A PostgreSQL database (`postgres://user:password@host:port/database?sslmode=...`), its
    /// schema created on first use. The URL may hold a password: it is never shown whole.
    Postgres(String),
}

/// The URL of a PostgreSQL store is shown without user-info and query (they may hold secrets).
impl fmt::Debug for StoreConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreConfig::Memory => f.write_str("Memory"),
            StoreConfig::Sqlite(path) => f.debug_tuple("Sqlite").field(path).finish(),
            StoreConfig::Postgres(url) => f.debug_tuple("Postgres").field(&display_url(url)).finish(),
        }
    }
}

/// Opens the configured store, migrated and ready. The memory store is one per process; SQL
/// stores are shared per database within a process while any handle is alive (one pool per SQLite
/// file, one per PostgreSQL URL).
///
/// Every back end is behind the edge (`edge.rs`): ids a store cannot keep are refused, and an
/// SQL store's operations each have a deadline.
///
/// Its outbox deliverer runs in this process from then on, while the store is open.
pub async fn open(config: &StoreConfig) -> Result<Arc<dyn Store>, StoreError> {
    let store: Arc<dyn Store> = match config {
        StoreConfig::Memory => MemoryStore::process_wide(),
        StoreConfig::Sqlite(path) => SqliteStore::shared(path).await?,
        StoreConfig::Postgres(url) => PostgresStore::shared(url).await?,
    };
    delivery::attach(&store);
    Ok(store)
}

/// One stored session: what `resumeAgent` needs to carry on in another process.
#[derive(Debug, Clone, PartialEq)]
pub struct SessionRecord {
    pub session_id: String,
    /// The conversation, faithfully (`Message::Tool::is_error` included).
    pub messages: Vec<Message>,
    /// The caller's webhook hook objects as the options gave them (header templates unresolved).
    /// Never resolved values, API keys, environment hooks or JS functions: the store keeps
    /// exactly what it is given, so the caller must give only that.
    pub hooks: Value,
    /// The run paused for approval, if any (JSON the caller defines: operation id, step index,
    /// usage, the paused turn's finished results...).
    pub paused: Option<Value>,
    /// The sub-agents at work in the current turn, as of their last turn boundaries (JSON the
    /// caller defines). A save of the record stores what it is given (`None` clears it);
    /// [`Store::save_running`] replaces it alone.
    pub running: Option<Value>,
}

/// A call waiting for a human (or, for `Deferred`, for `complete_deferred`).
#[derive(Debug, Clone, PartialEq)]
pub struct PendingCall {
    pub tool_call_id: String,
    pub tool_name: String,
    pub input: Map<String, Value>,
    /// `fingerprint(tool_name, input)`, taken when the call paused.
    pub fingerprint: String,
    pub reason: PendingReason,
    pub decision: Option<Decision>,
}

/// Why a call waits (`pendingApprovals[].reason`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PendingReason {
    /// The permission answer was `'ask'` and no confirmation handler was given.
    Ask,
    /// Found started without a result after a crash, and not `pure`/`idempotent`.
    OutcomeUnknown,
    /// `execute` returned `deferred()`.
    Deferred,
    /// A `Task` call whose sub-agent paused (§8.7): it waits for that sub-agent, not for a
    /// person, and is never an entry of its own.
    Subagent,
}

impl PendingReason {
    /// The wire (and column) spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            PendingReason::Ask => "ask",
            PendingReason::OutcomeUnknown => "outcome_unknown",
            PendingReason::Deferred => "deferred",
            PendingReason::Subagent => "subagent",
        }
    }

    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "ask" => Some(PendingReason::Ask),
            "outcome_unknown" => Some(PendingReason::OutcomeUnknown),
            "deferred" => Some(PendingReason::Deferred),
            "subagent" => Some(PendingReason::Subagent),
            _ => None,
        }
    }
}

/// A human's answer to a pending call.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "camelCase", rename_all_fields = "camelCase")]
pub enum Decision {
    Approve {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        updated_input: Option<Map<String, Value>>,
        /// With `approvalSecret`: the approval token the decision was taken with, over the
        /// fingerprint of the input that runs; checked again before the call runs, so a decision
        /// written into the store without the secret is never acted on.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        token: Option<String>,
    },
    Reject {
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        #[serde(default)]
        stop: bool,
    },
}

/// A call's final result: the text the model sees, and whether the call failed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolResult {
    pub output: String,
    pub is_error: bool,
}

impl ToolResult {
    pub fn new(output: impl Into<String>, is_error: bool) -> Self {
        ToolResult {
            output: output.into(),
            is_error,
        }
    }
}

/// A call's entry in the effects ledger.
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// Recorded before the tool executed; no result yet.
    Started,
    /// Started without a result, and since then saved as an `outcome_unknown` approval: a
    /// decision on it was taken knowing that (it says `Started` again once the call reruns).
    Unknown,
    Finished(ToolResult),
}

/// A call recorded as started whose result never came (the process died in between).
#[derive(Debug, Clone, PartialEq)]
pub struct StartedEffect {
    pub tool_call_id: String,
    pub tool_name: String,
    pub input: Map<String, Value>,
    /// The tool's `sideEffect` when it started (`pure`, `idempotent`, ...): decides whether it
    /// may run again or becomes an `outcome_unknown` approval.
    pub side_effect: String,
}

/// A deferred call's placeholder.
#[derive(Debug, Clone, PartialEq)]
pub enum Deferred {
    /// Not completed yet.
    Waiting,
    /// The first final result, which no later completion changes.
    Published(ToolResult),
}

/// What `complete_deferred` did.
#[derive(Debug, Clone, PartialEq)]
pub enum DeferredOutcome {
    /// This completion filled the placeholder.
    Published,
    /// An earlier completion did; here is its result (nothing changed).
    AlreadyPublished(ToolResult),
    /// No deferred call of that id in that session.
    NotDeferred,
}

/// A session as `load_with_lease` reads it for `resumeAgent`.
#[derive(Debug, Clone, PartialEq)]
pub struct Loaded {
    pub record: SessionRecord,
    /// In saved order, decisions included.
    pub pending: Vec<PendingCall>,
    /// The session's last claim, read before the record.
    pub lease: Option<LeaseState>,
    /// The ledger entries of the pending calls that were ever started (any order).
    pub pending_effects: Vec<(String, Effect)>,
}

/// The store interface every back end implements with the same semantics (checked by the
/// conformance suite in `tests/store.rs`).
#[async_trait]
pub trait Store: Send + Sync {
    /// The session and its pending calls (in saved order); `None` only when the store was read
    /// and holds no such session. Anything unreadable is an error.
    async fn load(&self, session_id: &str) -> Result<Option<(SessionRecord, Vec<PendingCall>)>, StoreError>;

    /// One transaction: the record (upsert) and its pending calls (replaced wholesale). A
    /// `Deferred` pending call also gets its placeholder, once: saving again never clears a
    /// published result; an `OutcomeUnknown` one turns its `Started` ledger entry `Unknown`.
    /// Fenced by `lease` (see [`Lease`]).
    async fn save(&self, record: &SessionRecord, pending: &[PendingCall], lease: &Lease) -> Result<(), StoreError>;

    /// `save`, then `release`, as one write: a run's last save ends its claim with it. Refused
    /// whole (nothing saved, the lease kept) when the lease is no longer live.
    async fn save_and_release(
        &self,
        record: &SessionRecord,
        pending: &[PendingCall],
        lease: &Lease,
    ) -> Result<(), StoreError> {
        self.save(record, pending, lease).await?;
        self.release(lease).await
    }

    /// `save` with no pending calls (a turn boundary), then `effect_started`, as one write: a
    /// turn's first call is recorded as started with the turn itself. Refused whole (nothing
    /// written) when the lease is no longer live.
    async fn save_and_start(
        &self,
        record: &SessionRecord,
        lease: &Lease,
        call: (&str, &str, &Map<String, Value>),
        side_effect: &str,
    ) -> Result<(), StoreError> {
        self.save(record, &[], lease).await?;
        self.effect_started(lease, call.0, call.1, call.2, side_effect).await
    }

    /// Replaces the session's `running` value alone (a sub-agent's turn boundary), fenced by
    /// `lease`. A session not stored yet is left so (nothing of it to go on with).
    async fn save_running(&self, session_id: &str, running: &Value, lease: &Lease) -> Result<(), StoreError>;

    /// The session's last claim, then the session and its pending calls (`load`), and what the
    /// effects ledger says of those calls (`effects`): a claim made after the lease was read
    /// shows as a newer token, so the record is never taken for newer than it is. PostgreSQL
    /// reads it all in one statement (a round trip each would cost every resumed session).
    async fn load_with_lease(&self, session_id: &str) -> Result<Option<Loaded>, StoreError> {
        let lease = self.lease_state(session_id).await?;
        let Some((record, pending)) = self.load(session_id).await? else {
            return Ok(None);
        };
        let ids: Vec<String> = pending.iter().map(|call| call.tool_call_id.clone()).collect();
        let pending_effects = match ids.is_empty() {
            true => Vec::new(),
            false => self.effects(session_id, &ids).await?,
        };
        Ok(Some(Loaded {
            record,
            pending,
            lease,
            pending_effects,
        }))
    }

    /// The session's pending calls as saved (decisions included), in saved order; empty when it
    /// has none (or is not stored).
    async fn pending_calls(&self, session_id: &str) -> Result<Vec<PendingCall>, StoreError>;

    /// Records the decision only if the call is pending and undecided (`true`); `false` when it is
    /// not pending or already decided. Exactly one of two concurrent deciders gets `true`.
    async fn decide(&self, session_id: &str, tool_call_id: &str, decision: &Decision) -> Result<bool, StoreError>;

    /// Effects ledger: the call is about to execute. Starting a call again (an approved
    /// `outcome_unknown` call) resets its entry to started. Fenced by `lease`.
    async fn effect_started(
        &self,
        lease: &Lease,
        tool_call_id: &str,
        tool_name: &str,
        input: &Map<String, Value>,
        side_effect: &str,
    ) -> Result<(), StoreError>;

    /// Effects ledger: the call's result is known. A call never recorded as started records
    /// nothing (the ledger only tracks starts it saw). Fenced by `lease`.
    async fn effect_finished(&self, lease: &Lease, tool_call_id: &str, result: &ToolResult) -> Result<(), StoreError>;

    /// The call's ledger entry, if it was ever started (for "did this already run?" on resume).
    async fn effect(&self, session_id: &str, tool_call_id: &str) -> Result<Option<Effect>, StoreError>;

    /// The ledger entries of `tool_call_ids` that were ever started (one read on a SQL store).
    async fn effects(&self, session_id: &str, tool_call_ids: &[String]) -> Result<Vec<(String, Effect)>, StoreError> {
        let mut found = Vec::new();
        for id in tool_call_ids {
            if let Some(effect) = self.effect(session_id, id).await? {
                found.push((id.clone(), effect));
            }
        }
        Ok(found)
    }

    /// Calls started without a result, in start order: a crash between start and finish. A
    /// deferred call is not one of them (its result comes through `complete_deferred`).
    async fn open_effects(&self, session_id: &str) -> Result<Vec<StartedEffect>, StoreError>;

    /// Publishes a deferred call's result once (a conditional update of its placeholder, which
    /// also finishes its ledger entry); later completions change nothing and get the first
    /// result back.
    async fn complete_deferred(
        &self,
        session_id: &str,
        tool_call_id: &str,
        result: &ToolResult,
    ) -> Result<DeferredOutcome, StoreError>;

    /// A deferred call's placeholder: `None` when no such deferred call was ever saved.
    async fn deferred(&self, session_id: &str, tool_call_id: &str) -> Result<Option<Deferred>, StoreError>;

    /// Claims the session for `owner` for `ttl` (SPEC §8.3): granted when no lease is live (none
    /// yet, released, or expired), with a fencing token one greater than the last claim's;
    /// otherwise who holds it and for how long yet. Exactly one of two concurrent claimers wins.
    async fn claim(&self, session_id: &str, owner: &str, ttl: Duration) -> Result<Claim, StoreError>;

    /// Extends a live lease by `ttl` from now; `false` when it is no longer live (released,
    /// expired or claimed again): the holder has lost the session.
    async fn renew(&self, lease: &Lease, ttl: Duration) -> Result<bool, StoreError>;

    /// Ends a lease (nothing happens when it was lost already): the session may be claimed at once.
    async fn release(&self, lease: &Lease) -> Result<(), StoreError>;

    /// The session's last claim: its token, and whether it is live. `None`: never claimed.
    async fn lease_state(&self, session_id: &str) -> Result<Option<LeaseState>, StoreError>;

    /// One transaction: `rows` into the outbox, fenced by `lease` when a run queues them (a
    /// worker that lost the session queues nothing); unfenced for events outside a run.
    async fn enqueue(&self, rows: &[Queued], lease: Option<&Lease>) -> Result<(), StoreError>;

    /// Claims up to `limit` queued rows for one attempt each by `owner`, oldest first: those
    /// `due` and not held by another live claim. Two processes never claim one row at once.
    async fn claim_deliveries(&self, owner: &str, due: Due<'_>, limit: u32) -> Result<Vec<Claimed>, StoreError>;

    /// Records an attempt at a claimed row: delivered, retried after its backoff, or given up
    /// after its last attempt; `Stale` (nothing changed) when the claim no longer stands.
    async fn report(&self, claimed: &Claimed, attempt: &Attempt) -> Result<Settled, StoreError>;

    /// How many rows are still queued (neither delivered nor given up).
    async fn queued(&self) -> Result<u64, StoreError>;
}

/// A store operation that failed: which operation, and why. Never carries a secret (no
/// connection URL, no stored values), only the operation, the session and the driver's cause.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreError {
    /// The operation, e.g. `open sqlite store /data/sessions.db` or `load session s1`.
    pub operation: String,
    pub cause: String,
    pub kind: StoreErrorKind,
}

/// Whether the store failed, or refused a write whose lease is no longer live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoreErrorKind {
    Failed,
    /// A fenced write whose lease was released, expired or claimed again: another process may
    /// drive the session now, so nothing was written.
    LeaseLost,
}

impl StoreError {
    pub fn new(operation: impl Into<String>, cause: impl fmt::Display) -> Self {
        StoreError {
            operation: operation.into(),
            cause: cause.to_string(),
            kind: StoreErrorKind::Failed,
        }
    }

    /// A fenced write refused: `lease` is no longer the session's live lease.
    pub fn lease_lost(operation: impl Into<String>, lease: &Lease) -> Self {
        StoreError {
            operation: operation.into(),
            cause: format!(
                "the lease with fencing token {} on session {} is no longer live (released, expired or claimed by another process)",
                lease.token, lease.session_id
            ),
            kind: StoreErrorKind::LeaseLost,
        }
    }
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "store: {} failed: {}", self.operation, self.cause)
    }
}

impl std::error::Error for StoreError {}
