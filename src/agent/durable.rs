//! A session's store (SPEC §8.2): opened on first use, every operation on the tokio workers
//! (never the JS thread), every failure a `STORE_ERROR` — never taken as "nothing stored".
//! And the way back: a stored session read for `resumeAgent`, its paused (or interrupted) turn
//! rebuilt with the effects ledger, so nothing that started runs again silently.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Map, Value};
use tokio::sync::OnceCell;

use super::approvals::{PausedCall, PausedTurn, TurnCall};
use super::events::{PendingReason, ToolCallRecord};
use super::tools::{SideEffect, ToolSpec};
use crate::error::{ErrorCode, Result, SdkError};
use crate::ids;
use crate::model::Message;
use crate::offload::offload;
use crate::store::{self, Effect, PendingCall, SessionRecord, Store, StoreConfig, StoreError, ToolResult};

/// `STORE_ERROR`, with what failed.
pub fn store_error(error: StoreError) -> SdkError {
    SdkError::new(ErrorCode::Store, error.to_string())
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

/// The session's end of its store.
pub struct Durable {
    config: StoreConfig,
    session_id: String,
    store: OnceCell<Arc<dyn Store>>,
}

impl Durable {
    pub fn new(config: StoreConfig, session_id: String) -> Self {
        Durable {
            config,
            session_id,
            store: OnceCell::new(),
        }
    }

    /// Whether the store outlives the process: then turn boundaries and the effects ledger are
    /// kept too (the memory store keeps pauses and decisions only).
    pub fn survives(&self) -> bool {
        !matches!(self.config, StoreConfig::Memory)
    }

    async fn store(&self) -> Result<Arc<dyn Store>> {
        let config = self.config.clone();
        let store = self
            .store
            .get_or_try_init(|| on_workers("open the store", async move { store::open(&config).await }))
            .await?;
        Ok(store.clone())
    }

    /// One transaction: the conversation, the paused turn (if any) and its pending calls.
    pub async fn save(&self, messages: &[Arc<Message>], hooks: &Value, paused: Option<&PausedTurn>) -> Result<()> {
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
        on_workers("save the session", async move { store.save(&record, &pending).await }).await
    }

    /// Records a decision if the call waits for one; `false` when it does not (any more).
    pub async fn decide(&self, tool_call_id: &str, decision: &store::Decision) -> Result<bool> {
        let store = self.store().await?;
        let (session_id, tool_call_id, decision) =
            (self.session_id.clone(), tool_call_id.to_string(), decision.clone());
        on_workers("record a decision", async move {
            store.decide(&session_id, &tool_call_id, &decision).await
        })
        .await
    }

    /// The effects ledger: a call is recorded as started before its tool executes.
    pub async fn started(&self, tool_call_id: &str, tool: &ToolSpec, input: &Map<String, Value>) -> Result<()> {
        let store = self.store().await?;
        let (session_id, tool_call_id) = (self.session_id.clone(), tool_call_id.to_string());
        let (name, input, side_effect) = (tool.schema.name.clone(), input.clone(), tool.side_effect.as_str());
        on_workers("record a tool call as started", async move {
            store
                .effect_started(&session_id, &tool_call_id, &name, &input, side_effect)
                .await
        })
        .await
    }

    /// The effects ledger: the call's result, once known.
    pub async fn finished(&self, tool_call_id: &str, output: &str, is_error: bool) -> Result<()> {
        let store = self.store().await?;
        let (session_id, tool_call_id) = (self.session_id.clone(), tool_call_id.to_string());
        let result = ToolResult::new(output.to_string(), is_error);
        on_workers("record a tool call's result", async move {
            store.effect_finished(&session_id, &tool_call_id, &result).await
        })
        .await
    }
}

impl Durable {
    /// A deferred call's published result, if it has one yet.
    pub async fn deferred_result(&self, tool_call_id: &str) -> Result<Option<ToolResult>> {
        let store = self.store().await?;
        let (session_id, tool_call_id) = (self.session_id.clone(), tool_call_id.to_string());
        let found = on_workers("read a deferred result", async move {
            store.deferred(&session_id, &tool_call_id).await
        })
        .await?;
        Ok(match found {
            Some(store::Deferred::Published(result)) => Some(result),
            _ => None,
        })
    }
}

/// A stored session, read for `resumeAgent`: its record, its pending calls (decisions
/// included), and what the effects ledger says of the calls that may have run.
pub struct Stored {
    pub record: SessionRecord,
    pub pending: Vec<PendingCall>,
    pub effects: HashMap<String, Effect>,
}

/// Reads session `session_id`: `SESSION_NOT_FOUND` when the store does not have it, a
/// `STORE_ERROR` when it cannot be read.
pub async fn load(config: &StoreConfig, session_id: &str) -> Result<Stored> {
    let config = config.clone();
    let id = session_id.to_string();
    let loaded = on_workers("load the session", async move {
        let store = store::open(&config).await?;
        let Some((record, pending)) = store.load(&id).await? else {
            return Ok(None);
        };
        // The ledger's word on every call of the last assistant turn (and every pending one).
        let mut ids: Vec<String> = pending.iter().map(|call| call.tool_call_id.clone()).collect();
        ids.extend(last_turn_calls(&record.messages).into_iter().map(|call| call.id));
        let mut effects = HashMap::new();
        for id in ids {
            if let Some(effect) = store.effect(&id_of(&record), &id).await? {
                effects.insert(id, effect);
            }
        }
        Ok(Some(Stored {
            record,
            pending,
            effects,
        }))
    })
    .await?;
    loaded.ok_or_else(|| {
        SdkError::new(
            ErrorCode::SessionNotFound,
            format!("Session {session_id} is not in the store"),
        )
    })
}

fn id_of(record: &SessionRecord) -> String {
    record.session_id.clone()
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
pub fn resumed_turn(stored: &Stored, tools: &[ToolSpec]) -> Result<Option<Resumed>> {
    // Rebuilt from the ledger (the store holds no such turn yet, or holds it differently).
    let mut changed = false;
    let mut turn = match &stored.record.paused {
        Some(paused) => serde_json::from_value::<PausedTurn>(paused.clone())
            .map_err(|error| store_error(StoreError::new("read the paused turn", error)))?,
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
