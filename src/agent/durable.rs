//! A session's store (SPEC §8.2): opened on first use, every operation on the tokio workers
//! (never the JS thread), every failure a `STORE_ERROR` — never taken as "nothing stored".
//! And the way back: a stored session read for `resumeAgent`, its paused (or interrupted) turn
//! rebuilt with the effects ledger, so nothing that started runs again silently.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Map, Value};
use tokio::sync::OnceCell;

use super::approvals::{PausedCall, PausedTurn, TurnCall};
use super::conversation::Conversation;
use super::events::{PendingReason, ToolCallRecord};
use super::tools::{SideEffect, ToolSpec};
use crate::error::{ErrorCode, Result, SdkError};
use crate::ids;
use crate::model::Message;
use crate::offload::offload;
use crate::store::delivery;
use crate::store::outbox::{Enqueue, Queued};
use crate::store::{
    self, Claim, Effect, Lease, PendingCall, SessionRecord, Store, StoreConfig, StoreError, StoreErrorKind, ToolResult,
};
use crate::sync::lock;

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
}

impl std::fmt::Debug for Durable {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Durable")
            .field("session_id", &self.session_id)
            .finish_non_exhaustive()
    }
}

/// A run's queued notifications go to its store's outbox under its claim (a run that lost the
/// session queues nothing); outside a run (SessionStart, SessionEnd), unfenced. This process's
/// deliverer is told at once.
#[async_trait::async_trait]
impl Enqueue for Durable {
    async fn enqueue(&self, rows: Vec<Queued>) -> std::result::Result<(), StoreError> {
        let store = self
            .store()
            .await
            .map_err(|error| StoreError::new("open the store", error.message))?;
        let lease = lock(&self.lease).clone();
        queue_rows(store, rows, lease).await
    }
}

/// Writes `rows` to `store`'s outbox on the tokio workers (fenced by `lease` when given), then
/// tells this process's deliverer.
async fn queue_rows(
    store: Arc<dyn Store>,
    rows: Vec<Queued>,
    lease: Option<Lease>,
) -> std::result::Result<(), StoreError> {
    let queue = store.clone();
    match offload(async move { queue.enqueue(&rows, lease.as_ref()).await }).await {
        Ok(written) => written?,
        Err(error) => return Err(StoreError::new("queue webhook notifications", error)),
    }
    delivery::wake(&store);
    Ok(())
}

/// Queues to a store's outbox outside any run (a deferred call's publication).
#[derive(Debug)]
pub struct Unfenced(pub StoreConfig);

#[async_trait::async_trait]
impl Enqueue for Unfenced {
    async fn enqueue(&self, rows: Vec<Queued>) -> std::result::Result<(), StoreError> {
        let config = self.0.clone();
        let store = match offload(async move { store::open(&config).await }).await {
            Ok(opened) => opened?,
            Err(error) => return Err(StoreError::new("open the store", error)),
        };
        queue_rows(store, rows, None).await
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
            .get_or_try_init(|| self.hop("open the store", async move { store::open(&config).await }))
            .await?;
        Ok(store.clone())
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

    /// One transaction: the conversation, the paused turn (if any) and its pending calls.
    pub async fn save(&self, messages: &[Arc<Message>], hooks: &Value, paused: Option<&PausedTurn>) -> Result<()> {
        let lease = self.lease()?;
        let store = self.store().await?;
        let record = SessionRecord {
            session_id: self.session_id.clone(),
            messages: messages.iter().map(|message| (**message).clone()).collect(),
            hooks: hooks.clone(),
            paused: paused
                .map(serde_json::to_value)
                .transpose()
                .map_err(|error| store_error(StoreError::new("save the paused turn", error)))?,
        };
        let pending: Vec<PendingCall> = paused
            .into_iter()
            .flat_map(|turn| &turn.pending)
            .map(|call| PendingCall {
                tool_call_id: call.tool_call_id.clone(),
                tool_name: call.tool_name.clone(),
                input: call.input.clone(),
                fingerprint: call.fingerprint.clone(),
                reason: call.reason,
                decision: call.decision.clone(),
            })
            .collect();
        self.fenced("save the session", lease.clone(), async move {
            store.save(&record, &pending, &lease).await
        })
        .await
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

    /// The effects ledger: a call is recorded as started before its tool executes.
    pub async fn started(&self, tool_call_id: &str, tool: &ToolSpec, input: &Map<String, Value>) -> Result<()> {
        let lease = self.lease()?;
        let store = self.store().await?;
        let tool_call_id = tool_call_id.to_string();
        let (name, input, side_effect) = (tool.schema.name.clone(), input.clone(), tool.side_effect.as_str());
        self.fenced("record a tool call as started", lease.clone(), async move {
            store
                .effect_started(&lease, &tool_call_id, &name, &input, side_effect)
                .await
        })
        .await
    }

    /// The effects ledger: the call's result, once known.
    pub async fn finished(&self, tool_call_id: &str, output: &str, is_error: bool) -> Result<()> {
        let lease = self.lease()?;
        let store = self.store().await?;
        let tool_call_id = tool_call_id.to_string();
        let result = ToolResult::new(output.to_string(), is_error);
        self.fenced("record a tool call's result", lease.clone(), async move {
            store.effect_finished(&lease, &tool_call_id, &result).await
        })
        .await
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
        self.hop("read the session again", async move { read(&*store, &id).await })
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

/// A stored session, read for `resumeAgent` (or again by a run whose copy was stale): its
/// record, its pending calls (decisions included), what the effects ledger says of the calls
/// that may have run, and the session's lease as it was just before (so a live one is known).
pub struct Stored {
    pub record: SessionRecord,
    pub pending: Vec<PendingCall>,
    pub effects: HashMap<String, Effect>,
    pub lease: Option<store::LeaseState>,
}

/// `drainOutbox`: every queued notification of `config`'s store tried once now, with the header
/// templates resolved from `environment` (this process's, as the caller read it).
pub async fn drain_outbox(
    config: &StoreConfig,
    environment: &crate::webhook::Environment,
) -> Result<delivery::Drained> {
    delivery::remember_environment(environment);
    let config = config.clone();
    on_workers("drain the outbox", async move {
        let store = store::open(&config).await?;
        delivery::drain(&store).await
    })
    .await
}

/// Reads session `session_id`: `SESSION_NOT_FOUND` when the store does not have it, a
/// `STORE_ERROR` when it cannot be read.
pub async fn load(config: &StoreConfig, session_id: &str) -> Result<Stored> {
    let config = config.clone();
    let id = session_id.to_string();
    let loaded = on_workers("load the session", async move {
        let store = store::open(&config).await?;
        read(&*store, &id).await
    })
    .await?;
    loaded.ok_or_else(|| {
        SdkError::new(
            ErrorCode::SessionNotFound,
            format!("Session {session_id} is not in the store"),
        )
    })
}

/// The lease first: a claim made after it was read shows as a newer token, so the record read
/// next is never taken for newer than it is.
async fn read(store: &dyn Store, id: &str) -> std::result::Result<Option<Stored>, StoreError> {
    let lease = store.lease_state(id).await?;
    let Some((record, pending)) = store.load(id).await? else {
        return Ok(None);
    };
    // The ledger's word on every call of the last assistant turn (and every pending one).
    let mut ids: Vec<String> = pending.iter().map(|call| call.tool_call_id.clone()).collect();
    ids.extend(last_turn_calls(&record.messages).into_iter().map(|call| call.id));
    let mut effects = HashMap::new();
    for call_id in ids {
        if let Some(effect) = store.effect(id, &call_id).await? {
            effects.insert(call_id, effect);
        }
    }
    Ok(Some(Stored {
        record,
        pending,
        effects,
        lease,
    }))
}

/// The tool calls of the last assistant message, when it has any.
fn last_turn_calls(messages: &[Message]) -> Vec<TurnCall> {
    match messages
        .iter()
        .rev()
        .find(|message| matches!(message, Message::Assistant { .. }))
    {
        Some(Message::Assistant { tool_calls, .. }) => tool_calls
            .iter()
            .map(|call| TurnCall {
                id: call.id.clone(),
                name: call.function.name.clone(),
                arguments: call.function.arguments.clone(),
            })
            .collect(),
        _ => Vec::new(),
    }
}

/// The turn a resumed session goes on with: the stored pause, or — when the process died in
/// the middle of a turn — that turn, rebuilt. The store's decisions win, and the ledger
/// decides what may run again: a call with a result keeps it; one that started without a
/// result becomes `outcome_unknown` (unless its tool is `pure` or `idempotent`); one that never
/// started goes through the whole pipeline.
///
/// Without `recover` (another agent held the session, live, when it was read: its run may be
/// at work) the stored pause is taken as it is, and nothing is rebuilt.
pub fn resumed_turn(stored: &Stored, tools: &[ToolSpec], recover: bool) -> Result<Option<Resumed>> {
    // Rebuilt from the ledger (the store holds no such turn yet, or holds it differently).
    let mut changed = false;
    if !recover && stored.record.paused.is_none() {
        return Ok(None);
    }
    let mut turn = match &stored.record.paused {
        Some(paused) => {
            let turn = serde_json::from_value::<PausedTurn>(paused.clone())
                .map_err(|error| store_error(StoreError::new("read the paused turn", error)))?;
            turn.check_shape()
                .map_err(|problem| store_error(StoreError::new("read the paused turn", problem)))?;
            turn
        }
        None => match interrupted_turn(&stored.record.messages) {
            Some(turn) => {
                changed = true;
                turn
            }
            None => return Ok(None),
        },
    };
    for call in &mut turn.pending {
        if let Some(kept) = stored
            .pending
            .iter()
            .find(|kept| kept.tool_call_id == call.tool_call_id)
        {
            call.decision = kept.decision.clone();
            call.reason = kept.reason;
        }
    }
    if !recover {
        return Ok(Some(Resumed { turn, changed }));
    }
    let replayable = |name: &str| {
        tools
            .iter()
            .find(|tool| tool.schema.name == name)
            .is_some_and(|tool| matches!(tool.side_effect, SideEffect::Pure | SideEffect::Idempotent))
    };
    let mut waiting = Vec::with_capacity(turn.pending.len());
    for mut call in std::mem::take(&mut turn.pending) {
        // A deferred call started on purpose and waits for its published result.
        if call.reason == PendingReason::Deferred {
            waiting.push(call);
            continue;
        }
        match stored.effects.get(&call.tool_call_id) {
            Some(Effect::Finished(result)) => {
                changed = true;
                turn.results[call.index] = Some(ToolCallRecord::stored(
                    &call.tool_call_id,
                    &call.tool_name,
                    Value::Object(call.input.clone()),
                    result.output.clone(),
                    result.is_error,
                ));
                continue;
            }
            // Found started without a result: its outcome is unknown (a decision taken before
            // the crash no longer stands). `Unknown`: it was saved so, and its decision stands.
            Some(Effect::Started) if !replayable(&call.tool_name) => {
                changed |= call.reason != PendingReason::OutcomeUnknown || call.decision.is_some();
                call.reason = PendingReason::OutcomeUnknown;
                call.decision = None;
                call.rerun = false;
            }
            _ => {}
        }
        waiting.push(call);
    }
    turn.pending = waiting;
    Ok(Some(Resumed { turn, changed }))
}

/// Puts a stored session in `conversation`: its messages (less the tool messages of the turn
/// that goes on, which that turn pushes all together when it does) and that turn, paused.
pub fn install(conversation: &Conversation, mut messages: Vec<Message>, turn: Option<PausedTurn>) {
    if let Some(turn) = &turn {
        let ids: Vec<&str> = turn.calls.iter().map(|call| call.id.as_str()).collect();
        messages.retain(
            |message| !matches!(message, Message::Tool { tool_call_id, .. } if ids.contains(&tool_call_id.as_str())),
        );
    }
    conversation.replace(Arc::new(messages.into_iter().map(Arc::new).collect()));
    conversation.take_paused();
    if let Some(turn) = turn {
        conversation.pause(turn);
    }
}

/// The turn a resumed session goes on with, and whether it differs from what the store holds
/// (then it is stored before the next decision, so a decision made before the crash does not
/// stand for a call whose outcome is now unknown).
pub struct Resumed {
    pub turn: PausedTurn,
    pub changed: bool,
}

/// The turn a process died in: the last assistant message's calls without a tool message.
/// They wait to go through the pipeline again (the ledger then says which ran).
fn interrupted_turn(messages: &[Message]) -> Option<PausedTurn> {
    let position = messages
        .iter()
        .rposition(|message| matches!(message, Message::Assistant { .. }))?;
    let Message::Assistant { content, .. } = &messages[position] else {
        return None;
    };
    let calls = last_turn_calls(messages);
    if calls.is_empty() {
        return None;
    }
    let answered: HashMap<&str, (&str, bool)> = messages[position + 1..]
        .iter()
        .filter_map(|message| match message {
            Message::Tool {
                tool_call_id,
                content,
                is_error,
            } => Some((tool_call_id.as_str(), (content.as_str(), *is_error))),
            _ => None,
        })
        .collect();
    if calls.iter().all(|call| answered.contains_key(call.id.as_str())) {
        return None;
    }
    let steps = messages[..=position]
        .iter()
        .filter(|message| matches!(message, Message::Assistant { .. }))
        .count() as u32;
    let mut results = Vec::with_capacity(calls.len());
    let mut pending = Vec::new();
    for (index, call) in calls.iter().enumerate() {
        let input: Map<String, Value> = serde_json::from_str(&call.arguments).unwrap_or_default();
        match answered.get(call.id.as_str()) {
            Some((output, is_error)) => results.push(Some(ToolCallRecord::stored(
                &call.id,
                &call.name,
                Value::Object(input),
                output.to_string(),
                *is_error,
            ))),
            None => {
                results.push(None);
                pending.push(PausedCall {
                    index,
                    tool_call_id: call.id.clone(),
                    tool_name: call.name.clone(),
                    fingerprint: store::fingerprint(&call.name, &input),
                    input,
                    reason: PendingReason::Ask,
                    decision: None,
                    rerun: true,
                });
            }
        }
    }
    // Any earlier tool messages of this turn are dropped from the conversation by the caller:
    // the resumed turn pushes all of them, in call order.
    Some(PausedTurn {
        operation_id: ids::uuid(),
        step_index: steps.saturating_sub(1),
        text: content.clone().unwrap_or_default(),
        calls,
        results,
        pending,
    })
}
