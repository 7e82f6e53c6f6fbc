//! Durability: a session's end of its store (SPEC §8.2), opened on first use, every operation on
//! the tokio workers (never the JS thread), every failure a `STORE_ERROR` — never taken as
//! "nothing stored". Beside it: the outbox glue (`queue`), the way back after a crash
//! (`recovery`) and results published from outside a run (`deferred`). Nothing here knows the
//! loop (`tests/layers.rs`).

pub mod deferred;
mod queue;
mod recovery;
pub mod running;

pub use queue::{drain_outbox, Unfenced};
pub use recovery::{install, load, resumed_turn, Resumed, Stored};

use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Map, Value};
use tokio::sync::OnceCell;

use super::approvals::PausedTurn;
use super::tools::ToolSpec;
use crate::error::{ErrorCode, Result, SdkError};
use crate::ids;
use crate::model::Message;
use crate::offload::offload;
use crate::store::delivery;
use crate::store::{
    self, Claim, Lease, PendingCall, SessionRecord, Store, StoreConfig, StoreError, StoreErrorKind, ToolResult,
};
use crate::sync::lock;
use crate::webhook::Environment;

/// `STORE_ERROR`, with what failed; `SESSION_LEASED` for a write refused because the run's
/// claim on the session is no longer live.
pub fn store_error(error: StoreError) -> SdkError {
    let code = match error.kind {
        StoreErrorKind::LeaseLost => ErrorCode::SessionLeased,
        StoreErrorKind::Failed => ErrorCode::Store,
    };
    SdkError::new(code, error.to_string())
}

/// Runs `work` on the tokio workers; a task that did not finish is a store error too.
async fn on_workers<T: Send + 'static>(
    what: &str,
    work: impl std::future::Future<Output = std::result::Result<T, StoreError>> + Send + 'static,
) -> Result<T> {
    match offload(work).await {
        Ok(done) => done.map_err(store_error),
        Err(error) => Err(store_error(StoreError::new(what, error))),
    }
}

/// The session's end of its store, and its claim on the session while a run drives it.
pub struct Durable {
    config: StoreConfig,
    session_id: String,
    store: OnceCell<Arc<dyn Store>>,
    /// This agent's name as a lease holder: one per agent object, so two agents of one process
    /// exclude each other too.
    owner: String,
    lease_ttl: Duration,
    /// The claim of the run in progress; every write of run state is fenced by it.
    lease: Mutex<Option<Lease>>,
    /// When that claim expires unless renewed, as this agent last learnt it (from when it asked:
    /// never later than the store's own). A fenced write must be answered by then.
    expires: Mutex<Option<tokio::time::Instant>>,
    /// The token of the last claim whose writes this agent holds in memory: its own last
    /// lease, or the released one `resumeAgent` read. `None` when not known (a lease was live
    /// while the session was read). A claim that does not follow it means another agent drove
    /// the session in between: what this one holds is stale.
    known: Mutex<Option<i64>>,
    /// The paused turn in memory was rebuilt after a crash and differs from what the store holds
    /// (a decision taken before the crash no longer stands for an `outcome_unknown` call): it is
    /// stored before the next decision or run, so the store's old decisions are never read back.
    recovered: std::sync::atomic::AtomicBool,
    /// The variables this session's runs read, for its store's deliverer (queued rows' header
    /// templates), handed over once the store is open.
    environment: Mutex<Environment>,
    /// The store's deliverer, looked up once when the store opens.
    deliverer: std::sync::OnceLock<Arc<delivery::Deliverer>>,
    /// The sub-agents at work in the current turn, as of their last boundaries; the lock is held
    /// across each write, so snapshots reach the store in the order they were taken.
    running: tokio::sync::Mutex<running::Running>,
    /// A turn boundary not written yet: it goes with the turn's first write (a call's start, or
    /// a save). Held across that write, so no call's start is kept before its turn.
    boundary: tokio::sync::Mutex<Option<Boundary>>,
    /// A call's result that the effects ledger could not record (the run went on): until a save
    /// keeps the conversation holding it, only a save may stand for it.
    unrecorded: std::sync::atomic::AtomicBool,
}

/// A turn's conversation, to be kept with the turn's first write.
struct Boundary {
    messages: Arc<Vec<Arc<Message>>>,
    hooks: Value,
}

impl std::fmt::Debug for Durable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Durable")
            .field("session_id", &self.session_id)
            .finish_non_exhaustive()
    }
}

/// How long a claim in the memory store lasts: until released, in practice.
const MEMORY_LEASE: Duration = Duration::from_secs(365 * 24 * 3600);

/// A claim refused because this very agent holds the session: its last release was lost (a
/// database crash undid it) and the lease came back live. When the lease is still the one this
/// agent last held (its token), it is released and claimed again, as the continuation it is;
/// otherwise the refusal stands.
async fn continue_own(
    store: &dyn Store,
    session_id: &str,
    owner: &str,
    known: Option<i64>,
    ttl: Duration,
) -> std::result::Result<Claim, StoreError> {
    let own = store.lease_state(session_id).await?;
    if let (Some(state), Some(known)) = (own, known) {
        if state.live && state.token == known {
            let lease = Lease {
                session_id: session_id.to_owned(),
                token: known,
            };
            store.release(&lease).await?;
        }
    }
    store.claim(session_id, owner, ttl).await
}

/// A run's claim, as `claim` got it.
pub struct Claimed {
    /// Another agent drove the session since this one last held it (or read it while it was
    /// driven): the conversation must be read again.
    pub stale: bool,
}

/// `SESSION_LEASED`, naming the session and why.
pub fn session_leased(session_id: &str, why: &str) -> SdkError {
    SdkError::new(ErrorCode::SessionLeased, format!("Session {session_id} {why}"))
}

impl Durable {
    pub fn new(config: StoreConfig, session_id: String, lease_ttl_ms: u32) -> Self {
        Durable {
            config,
            session_id,
            store: OnceCell::new(),
            owner: format!("{}/{}", std::process::id(), ids::uuid()),
            lease_ttl: Duration::from_millis(u64::from(lease_ttl_ms)),
            lease: Mutex::new(None),
            expires: Mutex::new(None),
            // A new session: nobody has written it (tokens start at 1). `resumeAgent` says
            // otherwise with `set_known`.
            known: Mutex::new(Some(0)),
            recovered: std::sync::atomic::AtomicBool::new(false),
            environment: Mutex::default(),
            deliverer: std::sync::OnceLock::new(),
            running: tokio::sync::Mutex::default(),
            boundary: tokio::sync::Mutex::default(),
            unrecorded: std::sync::atomic::AtomicBool::new(false),
        }
    }

    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    /// Whether the store outlives the process: then turn boundaries and the effects ledger are
    /// kept too (the memory store keeps pauses and decisions only).
    pub fn survives(&self) -> bool {
        !matches!(self.config, StoreConfig::Memory)
    }

    /// Runs a store operation: on the tokio workers for a SQL store (never on the JS thread), in
    /// place for the memory store, whose operations are a lock and a map and never wait.
    async fn hop<T: Send + 'static>(
        &self,
        what: &str,
        work: impl std::future::Future<Output = std::result::Result<T, StoreError>> + Send + 'static,
    ) -> Result<T> {
        match self.config {
            StoreConfig::Memory => work.await.map_err(store_error),
            _ => on_workers(what, work).await,
        }
    }

    async fn store(&self) -> Result<Arc<dyn Store>> {
        let config = self.config.clone();
        let store = self
            .store
            // Boxed: opening a SQL store (pools, migrations) is a future of ~18 KB, which every
            // store operation's state (and so every run's) would otherwise carry inline.
            .get_or_try_init(|| self.hop("open the store", Box::pin(async move { store::open(&config).await })))
            .await?;
        self.deliverer.get_or_init(|| {
            let deliverer = delivery::attach(store);
            deliverer.remember_environment(&lock(&self.environment));
            deliverer
        });
        Ok(store.clone())
    }

    /// Variables a run read on the JS thread: its store's deliverer resolves queued rows'
    /// header templates from them.
    pub fn remember_environment(&self, environment: &Environment) {
        if environment.is_empty() {
            return;
        }
        lock(&self.environment).extend(environment.iter().map(|(name, value)| (name.clone(), value.clone())));
        if let Some(deliverer) = self.deliverer.get() {
            deliverer.remember_environment(environment);
        }
    }

    /// While the returned guard lives, a critical queued row of run `operation_id` given up
    /// calls `give_up` (`None` before the store is open: nothing was queued yet).
    pub fn watch_operation(&self, operation_id: &str, give_up: delivery::GiveUp) -> Option<delivery::Watch> {
        Some(self.deliverer.get()?.watch_operation(operation_id, give_up))
    }

    /// The lease writes are fenced by; a write outside a claim is a bug, refused as a lost lease.
    fn lease(&self) -> Result<Lease> {
        lock(&self.lease)
            .clone()
            .ok_or_else(|| session_leased(&self.session_id, "is not claimed by this agent: nothing was written"))
    }

    /// The paused turn in memory was recovered and must be stored before anything else.
    pub fn mark_recovered(&self) {
        self.recovered.store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// Whether the paused turn in memory awaits its recovery save (and no longer does).
    pub fn take_recovered(&self) -> bool {
        self.recovered.swap(false, std::sync::atomic::Ordering::SeqCst)
    }

    /// What `resumeAgent` read: the token of the session's last claim, if it was not live then.
    pub fn set_known(&self, state: Option<store::LeaseState>) {
        *lock(&self.known) = match state {
            Some(state) if state.live => None,
            Some(state) => Some(state.token),
            None => Some(0),
        };
    }

    /// Claims the session for a run (SPEC §8.3): `SESSION_LEASED` while another agent's lease
    /// is live.
    pub async fn claim(&self) -> Result<Claimed> {
        let store = self.store().await?;
        // A claim in the memory store cannot outlive its process, nor be orphaned by a dead one:
        // it lasts until released, without renewals.
        let ttl = match self.config {
            StoreConfig::Memory => MEMORY_LEASE,
            _ => self.lease_ttl,
        };
        let (session_id, owner) = (self.session_id.clone(), self.owner.clone());
        let asked = tokio::time::Instant::now();
        let known = *lock(&self.known);
        let running = lock(&self.lease).is_some();
        let claim = self
            .hop("claim the session", async move {
                match store.claim(&session_id, &owner, ttl).await? {
                    Claim::Held { owner: holder, .. } if holder == owner && !running => {
                        continue_own(&*store, &session_id, &owner, known, ttl).await
                    }
                    claim => Ok(claim),
                }
            })
            .await?;
        match claim {
            Claim::Granted(lease) => {
                let previous = lock(&self.known).replace(lease.token);
                let stale = previous != Some(lease.token - 1);
                *lock(&self.lease) = Some(lease);
                *lock(&self.expires) = asked.checked_add(ttl);
                Ok(Claimed { stale })
            }
            Claim::Held { remaining_ms, .. } => Err(session_leased(
                &self.session_id,
                &format!(
                    "is driven by another agent (its lease expires in {remaining_ms} ms unless renewed): try again once its run has settled"
                ),
            )),
        }
    }

    /// Extends this run's claim: `Ok(false)` once it is lost. A renewal not answered within
    /// `within` (its share of the TTL) fails: the store is not keeping the claim.
    pub async fn renew(&self, within: Duration) -> Result<bool> {
        let Some(lease) = lock(&self.lease).clone() else {
            return Ok(false);
        };
        let store = self.store().await?;
        let ttl = self.lease_ttl;
        let asked = tokio::time::Instant::now();
        let renewed = self
            .hop("renew the lease", async move {
                let operation = || format!("renew the lease on session {}", lease.session_id);
                store::within(Some(within), operation, store.renew(&lease, ttl)).await
            })
            .await?;
        if renewed {
            *lock(&self.expires) = Some(asked + ttl);
        }
        Ok(renewed)
    }

    /// A fenced write of this run, on an SQL store: it must be answered while the claim lasts (a
    /// write answered later would be refused anyway, and a silent store must not hold the run
    /// past its claim); one whose claim this agent already knows expired is refused at once.
    async fn fenced<T: Send + 'static>(
        &self,
        what: &'static str,
        lease: Lease,
        work: impl std::future::Future<Output = std::result::Result<T, StoreError>> + Send + 'static,
    ) -> Result<T> {
        let expires = *lock(&self.expires);
        let Some(expires) = expires.filter(|_| self.survives()) else {
            return self.hop(what, work).await;
        };
        let left = expires.saturating_duration_since(tokio::time::Instant::now());
        if left.is_zero() {
            return Err(store_error(StoreError::lease_lost(what, &lease)));
        }
        self.hop(what, async move {
            match tokio::time::timeout(left, work).await {
                Ok(done) => done,
                Err(_) => Err(StoreError::lease_lost(what, &lease)),
            }
        })
        .await
    }

    /// When this run's claim expires unless renewed, as this agent last learnt it (`None`
    /// without a claim).
    pub fn expires(&self) -> Option<tokio::time::Instant> {
        *lock(&self.expires)
    }

    /// How often a run renews its claim: a third of its TTL, so two renewals may fail before it
    /// expires.
    pub fn renew_every(&self) -> Duration {
        (self.lease_ttl / 3).max(Duration::from_millis(1))
    }

    /// Ends this run's claim (the session may be claimed at once by anyone).
    pub async fn release(&self) -> Result<()> {
        let Some(lease) = lock(&self.lease).take() else {
            return Ok(());
        };
        let store = self.store().await?;
        self.hop("release the lease", async move { store.release(&lease).await })
            .await
    }

    /// Lets go of a claim found lost without asking the store (whoever holds the session now
    /// is not to be disturbed, and the store may not be answering).
    pub fn forget_lease(&self) {
        lock(&self.lease).take();
    }

    /// One transaction: the conversation, the paused turn (if any, with every paused sub-agent of
    /// its tree inside it) and the tree's pending calls.
    pub async fn save(&self, messages: &[Arc<Message>], hooks: &Value, paused: Option<&PausedTurn>) -> Result<()> {
        self.write_session(messages, hooks, paused, false).await
    }

    /// A run's last save and the release of its claim, in one write. Once it is written the
    /// claim is this agent's no more; when it fails the claim is still held (`release` lets it
    /// go), unless the failure was its loss.
    pub async fn save_and_release(
        &self,
        messages: &[Arc<Message>],
        hooks: &Value,
        paused: Option<&PausedTurn>,
    ) -> Result<()> {
        self.write_session(messages, hooks, paused, true).await
    }

    /// `save`, or with `release` `save_and_release`. The whole conversation is written, so a
    /// turn boundary waiting goes with it; it waits on if the write fails (no call's start is
    /// kept before its turn).
    async fn write_session(
        &self,
        messages: &[Arc<Message>],
        hooks: &Value,
        paused: Option<&PausedTurn>,
        release: bool,
    ) -> Result<()> {
        let lease = self.lease()?;
        let store = self.store().await?;
        let mut boundary = self.boundary.lock().await;
        let (record, pending) = self.record(messages, hooks, paused).await?;
        let written = lease.clone();
        self.fenced("save the session", lease.clone(), async move {
            match release {
                true => store.save_and_release(&record, &pending, &written).await,
                false => store.save(&record, &pending, &written).await,
            }
        })
        .await?;
        boundary.take();
        self.unrecorded.store(false, std::sync::atomic::Ordering::Release);
        if release {
            let mut held = lock(&self.lease);
            if held.as_ref().is_some_and(|held| held.token == lease.token) {
                held.take();
            }
        }
        Ok(())
    }

    /// What a save writes: the record, and every waiting call of the tree.
    async fn record(
        &self,
        messages: &[Arc<Message>],
        hooks: &Value,
        paused: Option<&PausedTurn>,
    ) -> Result<(SessionRecord, Vec<PendingCall>)> {
        // Nothing of the tree is at work past a save of the session (a pause holds it whole).
        self.running.lock().await.clear();
        let record = SessionRecord {
            session_id: self.session_id.clone(),
            messages: messages.iter().map(|message| (**message).clone()).collect(),
            hooks: hooks.clone(),
            paused: paused
                .map(serde_json::to_value)
                .transpose()
                .map_err(|error| store_error(StoreError::new("save the paused turn", error)))?,
            running: None,
        };
        // Every waiting call of the tree, each decided by its own id (a `Task` call waiting for
        // its sub-agent is not one: it is kept inside the paused turn).
        let pending: Vec<PendingCall> = paused
            .into_iter()
            .flat_map(PausedTurn::leaves)
            .map(|leaf| leaf.call)
            .map(|call| PendingCall {
                tool_call_id: call.tool_call_id.clone(),
                tool_name: call.tool_name.clone(),
                input: call.input.clone(),
                fingerprint: call.fingerprint.clone(),
                reason: call.reason,
                decision: call.decision.clone(),
            })
            .collect();
        Ok((record, pending))
    }

    /// A sub-agent's turn boundary (§8.7): its snapshot replaces its last one, and the tree's
    /// snapshots are kept in one write, fenced by the root run's claim.
    pub async fn child_boundary(&self, child: running::RunningChild) -> Result<()> {
        let lease = self.lease()?;
        let store = self.store().await?;
        let mut running = self.running.lock().await;
        running.update(child);
        let value = running.to_value();
        let session_id = self.session_id.clone();
        self.fenced("save the sub-agents at work", lease.clone(), async move {
            store.save_running(&session_id, &value, &lease).await
        })
        .await
    }

    /// A sub-agent that ended is no longer at work: its snapshot goes with the next write.
    pub async fn child_finished(&self, chain: &[String]) {
        self.running.lock().await.finished(chain);
    }

    /// Records a decision if the call waits for one; `false` when it does not (any more).
    pub async fn decide(&self, tool_call_id: &str, decision: &store::Decision) -> Result<bool> {
        let store = self.store().await?;
        let (session_id, tool_call_id, decision) =
            (self.session_id.clone(), tool_call_id.to_string(), decision.clone());
        self.hop("record a decision", async move {
            store.decide(&session_id, &tool_call_id, &decision).await
        })
        .await
    }

    /// A turn boundary kept with the turn's first write rather than on its own (see `boundary`).
    pub async fn defer_boundary(&self, messages: Arc<Vec<Arc<Message>>>, hooks: &Value) {
        *self.boundary.lock().await = Some(Boundary {
            messages,
            hooks: hooks.clone(),
        });
    }

    /// The effects ledger: a call is recorded as started before its tool executes; the first
    /// of its turn with the turn's boundary, when that waits (a failed write leaves it waiting).
    pub async fn started(&self, tool_call_id: &str, tool: &ToolSpec, input: &Map<String, Value>) -> Result<()> {
        let lease = self.lease()?;
        let store = self.store().await?;
        let tool_call_id = tool_call_id.to_string();
        let (name, input, side_effect) = (tool.schema.name.clone(), input.clone(), tool.side_effect.as_str());
        let mut boundary = self.boundary.lock().await;
        let Some(turn) = boundary.take() else {
            drop(boundary);
            return self
                .fenced("record a tool call as started", lease.clone(), async move {
                    store
                        .effect_started(&lease, &tool_call_id, &name, &input, side_effect)
                        .await
                })
                .await;
        };
        let (record, _) = self.record(&turn.messages, &turn.hooks, None).await?;
        let started = self
            .fenced("record a tool call as started", lease.clone(), async move {
                let call = (tool_call_id.as_str(), name.as_str(), &input);
                store.save_and_start(&record, &lease, call, side_effect).await
            })
            .await;
        if started.is_err() {
            *boundary = Some(turn);
        }
        started
    }

    /// The effects ledger: the call's result, once known.
    pub async fn finished(&self, tool_call_id: &str, output: &str, is_error: bool) -> Result<()> {
        let finished = self.record_finished(tool_call_id, output, is_error).await;
        if finished.is_err() {
            self.unrecorded.store(true, std::sync::atomic::Ordering::Release);
        }
        finished
    }

    async fn record_finished(&self, tool_call_id: &str, output: &str, is_error: bool) -> Result<()> {
        let lease = self.lease()?;
        let store = self.store().await?;
        let tool_call_id = tool_call_id.to_string();
        let result = ToolResult::new(output.to_string(), is_error);
        self.fenced("record a tool call's result", lease.clone(), async move {
            store.effect_finished(&lease, &tool_call_id, &result).await
        })
        .await
    }

    /// Whether every result of the run since its last save is in the effects ledger, so that a
    /// crash before the next save would find them there.
    pub fn ledger_holds_every_result(&self) -> bool {
        !self.unrecorded.load(std::sync::atomic::Ordering::Acquire)
    }

    /// A save outside a run (a recovered turn kept before a decision): under a claim of its
    /// own, released at once. `false`, and nothing written, when another agent drove the
    /// session since this one read it (what it would write is stale).
    pub async fn save_claimed(
        &self,
        messages: &[Arc<Message>],
        hooks: &Value,
        paused: Option<&PausedTurn>,
    ) -> Result<bool> {
        let claimed = self.claim().await?;
        let saved = match claimed.stale {
            true => Ok(false),
            false => self.save(messages, hooks, paused).await.map(|()| true),
        };
        let released = self.release().await;
        let saved = saved?;
        released.map(|()| saved)
    }

    /// The decisions the store holds for the session's pending calls (taken here or elsewhere).
    pub async fn decisions(&self) -> Result<Vec<(String, store::Decision)>> {
        let store = self.store().await?;
        let id = self.session_id.clone();
        let pending = self
            .hop("read the pending calls", async move { store.pending_calls(&id).await })
            .await?;
        Ok(pending
            .into_iter()
            .filter_map(|call| call.decision.map(|decision| (call.tool_call_id, decision)))
            .collect())
    }

    /// The session as the store has it now, for a claim that found this agent's copy stale.
    pub async fn reload(&self) -> Result<Option<Stored>> {
        let store = self.store().await?;
        let id = self.session_id.clone();
        self.hop(
            "read the session again",
            async move { recovery::read(&*store, &id).await },
        )
        .await
    }
}

impl Durable {
    /// A deferred call's published result, if it has one yet.
    pub async fn deferred_result(&self, tool_call_id: &str) -> Result<Option<ToolResult>> {
        let store = self.store().await?;
        let (session_id, tool_call_id) = (self.session_id.clone(), tool_call_id.to_string());
        let found = self
            .hop("read a deferred result", async move {
                store.deferred(&session_id, &tool_call_id).await
            })
            .await?;
        Ok(match found {
            Some(store::Deferred::Published(result)) => Some(result),
            _ => None,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every run awaits the store's operations, so their futures are part of every run's state:
    /// opening a SQL store (pools, migrations, ~18 KB of future) must stay boxed, or each run
    /// grows by that much (1000 concurrent sessions: ~25 MB of RSS).
    #[test]
    fn a_store_operation_does_not_carry_the_opening_of_the_store_inline() {
        let durable = Durable::new(StoreConfig::Sqlite("unused.db".into()), "s".into(), 1000);
        let release = std::mem::size_of_val(&durable.release());
        let save = std::mem::size_of_val(&durable.save(&[], &Value::Null, None));
        let tool = ToolSpec::builtin(crate::builtins::Builtin::Read);
        let started = std::mem::size_of_val(&durable.started("c", &tool, &Map::new()));
        let finished = std::mem::size_of_val(&durable.finished("c", "ok", false));
        assert!(release < 2048, "release's future is {release} bytes");
        assert!(save < 4096, "save's future is {save} bytes");
        assert!(started < 4096, "the ledger's started future is {started} bytes");
        assert!(finished < 4096, "the ledger's finished future is {finished} bytes");
    }
}
