//! The way back: a stored session read for `resumeAgent` (or again by a run whose copy is
//! stale), and the turn it goes on with, rebuilt from the effects ledger after a crash so that
//! nothing that started runs again silently. How each call of that turn goes on (the tests
//! below hold one case per row):
//!
//! | the store holds the turn as | the ledger says | the tool is | the call |
//! | --- | --- | --- | --- |
//! | nothing (died mid-turn) | nothing | any | reruns the whole pipeline |
//! | nothing (died mid-turn) | started | `non_idempotent` | waits as `outcome_unknown`, undecided |
//! | nothing (died mid-turn) | started | `pure`, `idempotent` | reruns the whole pipeline |
//! | a pause, decided | nothing | any | goes on with its decision |
//! | a pause, decided | started | `non_idempotent` | waits as `outcome_unknown`, its decision dropped |
//! | a pause, decided | started | `pure`, `idempotent` | goes on with its decision |
//! | saved `outcome_unknown`, decided | unknown | any | goes on with its decision |
//! | anything but deferred | finished | any | answered with the ledger's result; does not run |
//! | deferred | anything | any | waits for its published result |
//!
//! Inside a sub-agent (§8.7) the same rows hold for each call, looked up by its place in the
//! tree (`store::ledger_key`). A `Task` call is never itself `outcome_unknown`: with a result in
//! the ledger it keeps it; with its sub-agent's snapshot (written at the sub-agent's turn
//! boundaries, newer than any pause) the sub-agent goes on from there — its interrupted turn's
//! calls judged by the rows above, or its next turn, or its answer is the call's result; with a
//! paused sub-agent and no snapshot, that pause is judged; with neither, it runs again (its
//! sub-agent had not finished a model turn, so nothing of it ran).

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Map, Value};

use super::running::{self, RunningChild};
use super::{on_workers, store_error};
use crate::agent::approvals::{Leaf, PausedCall, PausedChild, PausedTurn, TurnCall};
use crate::agent::conversation::Conversation;
use crate::agent::events::{PendingReason, ToolCallRecord};
use crate::agent::subagents::TASK_TOOL;
use crate::agent::tools::{SideEffect, ToolSpec};
use crate::error::{ErrorCode, Result, SdkError};
use crate::ids;
use crate::model::Message;
use crate::store::{self, Effect, PendingCall, SessionRecord, Store, StoreConfig, StoreError};

/// A stored session, read for `resumeAgent` (or again by a run whose copy was stale): its
/// record, its pending calls (decisions included), what the effects ledger says of the calls
/// that may have run, and the session's lease as it was just before (so a live one is known).
pub struct Stored {
    pub record: SessionRecord,
    pub pending: Vec<PendingCall>,
    pub effects: HashMap<String, Effect>,
    pub lease: Option<store::LeaseState>,
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

/// The session with its lease (never taken for newer than the lease read with it) and what the
/// ledger says of its pending calls, then of the other calls it names (most often there are
/// none: a session paused on an approval names only its pending calls).
pub(super) async fn read(store: &dyn Store, id: &str) -> std::result::Result<Option<Stored>, StoreError> {
    let Some(loaded) = store.load_with_lease(id).await? else {
        return Ok(None);
    };
    let mut effects: HashMap<String, Effect> = loaded.pending_effects.into_iter().collect();
    let mut others = ledger_keys(&loaded.record, &loaded.pending);
    others.retain(|key| !loaded.pending.iter().any(|call| &call.tool_call_id == key));
    if !others.is_empty() {
        effects.extend(store.effects(id, &others).await?);
    }
    Ok(Some(Stored {
        record: loaded.record,
        pending: loaded.pending,
        effects,
        lease: loaded.lease,
    }))
}

/// The calls the ledger is asked about (§8.7 keys a sub-agent's calls by their place): every
/// call of the last assistant turn and every pending one, the paused tree's waiting calls, and
/// the last turn's calls of every sub-agent at work.
fn ledger_keys(record: &SessionRecord, pending: &[PendingCall]) -> Vec<String> {
    let mut keys: Vec<String> = pending.iter().map(|call| call.tool_call_id.clone()).collect();
    keys.extend(last_turn_calls(&record.messages).into_iter().map(|call| call.id));
    if let Some(turn) = record
        .paused
        .as_ref()
        .and_then(|paused| serde_json::from_value::<PausedTurn>(paused.clone()).ok())
    {
        keys.extend(turn.leaves().iter().map(Leaf::ledger_key));
    }
    for child in running::read(record.running.as_ref()) {
        keys.extend(
            last_turn_calls(&child.messages)
                .into_iter()
                .map(|call| store::ledger_key(&child.chain, &call.id)),
        );
    }
    keys.sort();
    keys.dedup();
    keys
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
    turn.for_each_leaf(&mut |call| {
        if let Some(kept) = stored
            .pending
            .iter()
            .find(|kept| kept.tool_call_id == call.tool_call_id)
        {
            call.decision = kept.decision.clone();
            call.reason = kept.reason;
        }
    });
    if !recover {
        return Ok(Some(Resumed { turn, changed }));
    }
    let tree = Tree {
        stored,
        tools,
        running: running::read(stored.record.running.as_ref()),
    };
    changed |= tree.recover(&mut turn, &[]);
    Ok(Some(Resumed { turn, changed }))
}

/// What a crash left of a tree: the ledger's word (keyed by place), the tools, and the
/// snapshots of the sub-agents that were at work.
struct Tree<'a> {
    stored: &'a Stored,
    tools: &'a [ToolSpec],
    running: Vec<RunningChild>,
}

/// A sub-agent rebuilt from its snapshot: it had answered, or it goes on.
enum Rebuilt {
    Answered(String),
    GoesOn(Box<PausedChild>),
}

impl Tree<'_> {
    /// A `pure` or `idempotent` tool runs again after a crash; a `Task` call is never itself
    /// of unknown outcome: its sub-agent's calls are judged one by one (§8.7).
    fn replayable(&self, name: &str) -> bool {
        name == TASK_TOOL
            || self
                .tools
                .iter()
                .find(|tool| tool.schema.name == name)
                .is_some_and(|tool| matches!(tool.side_effect, SideEffect::Pure | SideEffect::Idempotent))
    }

    fn snapshot(&self, chain: &[String]) -> Option<&RunningChild> {
        self.running.iter().find(|child| child.chain == chain)
    }

    /// Judges the waiting calls of `turn` (made under the `Task` calls `chain`) by the ledger,
    /// and each sub-agent below by its newest state: its snapshot when it was at work (newer than
    /// any pause, which every save of the session clears them with), else its paused turn.
    /// Whether anything changed.
    fn recover(&self, turn: &mut PausedTurn, chain: &[String]) -> bool {
        let mut changed = false;
        let mut waiting = Vec::with_capacity(turn.pending.len());
        for mut call in std::mem::take(&mut turn.pending) {
            // A deferred call started on purpose and waits for its published result.
            if call.reason == PendingReason::Deferred {
                waiting.push(call);
                continue;
            }
            let mut below = chain.to_vec();
            below.push(call.tool_call_id.clone());
            match self.stored.effects.get(&store::ledger_key(chain, &call.tool_call_id)) {
                Some(Effect::Finished(result)) => {
                    changed = true;
                    turn.results[call.index] = Some(ToolCallRecord::stored(
                        &call.tool_call_id,
                        &call.tool_name,
                        &call.input,
                        result.output.clone(),
                        result.is_error,
                    ));
                    continue;
                }
                // Found started without a result: its outcome is unknown (a decision taken before
                // the crash no longer stands). `Unknown`: it was saved so, and its decision stands.
                Some(Effect::Started) if !self.replayable(&call.tool_name) => {
                    changed |= call.reason != PendingReason::OutcomeUnknown || call.decision.is_some();
                    call.reason = PendingReason::OutcomeUnknown;
                    call.decision = None;
                    call.rerun = false;
                }
                _ => {}
            }
            if call.tool_name == TASK_TOOL {
                if let Some(snapshot) = self.snapshot(&below) {
                    changed = true;
                    match self.rebuild(snapshot) {
                        Rebuilt::Answered(text) => {
                            turn.results[call.index] = Some(ToolCallRecord::stored(
                                &call.tool_call_id,
                                &call.tool_name,
                                &call.input,
                                text,
                                false,
                            ));
                            continue;
                        }
                        Rebuilt::GoesOn(child) => {
                            call.reason = PendingReason::Subagent;
                            call.rerun = false;
                            call.child = Some(child);
                        }
                    }
                } else if let Some(child) = call.child.as_deref_mut() {
                    changed |= self.recover(&mut child.turn, &below);
                }
            }
            waiting.push(call);
        }
        turn.pending = waiting;
        changed
    }

    /// A sub-agent at work when the process died, from its last boundary: the turn it was in
    /// (its calls judged by the ledger), or — its turn done — the next one, or its answer.
    fn rebuild(&self, snapshot: &RunningChild) -> Rebuilt {
        let mut messages = snapshot.messages.clone();
        let turn = match interrupted_turn(&messages) {
            Some(mut turn) => {
                turn.operation_id = snapshot.operation_id.clone();
                self.recover(&mut turn, &snapshot.chain);
                let ids: Vec<&str> = turn.calls.iter().map(|call| call.id.as_str()).collect();
                messages.retain(
                    |message| !matches!(message, Message::Tool { tool_call_id, .. } if ids.contains(&tool_call_id.as_str())),
                );
                turn
            }
            None => match messages.last() {
                Some(Message::Assistant { content, tool_calls }) if tool_calls.is_empty() => {
                    return Rebuilt::Answered(content.clone().unwrap_or_default())
                }
                // Its turn's results are in: it goes on with its next model turn.
                _ => PausedTurn {
                    operation_id: snapshot.operation_id.clone(),
                    step_index: snapshot.turns.saturating_sub(1),
                    text: String::new(),
                    calls: Vec::new(),
                    results: Vec::new(),
                    pending: Vec::new(),
                },
            },
        };
        Rebuilt::GoesOn(Box::new(PausedChild {
            agent_path: snapshot.agent_path.clone(),
            chain: snapshot.chain.clone(),
            operation_id: snapshot.operation_id.clone(),
            messages,
            turns: snapshot.turns,
            turn,
        }))
    }
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
                &input,
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
                    child: None,
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

#[cfg(test)]
mod tests {
    //! The recovery outcomes as a table: (what the store holds of the turn × what the effects
    //! ledger says of its call × the tool's side effect) → how the call goes on.

    use super::*;
    use crate::agent::tools::{Runner, ToolKind};
    use crate::host::Callable;
    use crate::model::{AssistantToolCall, ToolSchema};
    use crate::store::{Decision, PendingCall, SessionRecord, ToolResult};

    /// What the store holds of the turn.
    #[derive(Clone, Copy, Debug)]
    enum Held {
        /// No pause: the process died mid-turn, the call has no tool message.
        Interrupted,
        /// A pause asking for approval, approved in the store.
        Approved,
        /// A pause saved as `outcome_unknown` (after an earlier crash), approved in the store.
        Unknown,
        /// A deferred call waiting for `completeToolCall`.
        Deferred,
    }

    /// How the call goes on.
    #[derive(Debug, PartialEq)]
    enum Goes {
        /// Its result is the ledger's; it does not run.
        Answered,
        /// It waits: with this reason, this decision, and whether it reruns the whole pipeline.
        Waits(PendingReason, Option<&'static str>, bool),
    }

    const CALL: &str = "call_1";

    fn tool(side_effect: SideEffect) -> ToolSpec {
        ToolSpec {
            schema: ToolSchema {
                name: "pay".into(),
                description: None,
                parameters: std::sync::Arc::new(serde_json::json!({"type": "object"})),
            },
            kind: ToolKind::Execute,
            side_effect,
            execute: Runner::Js(Callable(0)),
        }
    }

    fn stored(held: Held, effect: Option<Effect>) -> Stored {
        let messages = vec![
            Message::User {
                content: crate::model::UserContent::Text("pay the bill".into()),
            },
            Message::Assistant {
                content: None,
                tool_calls: vec![AssistantToolCall::new(
                    CALL.into(),
                    "pay".into(),
                    "{\"amount\":5}".into(),
                )],
            },
        ];
        let reason = match held {
            Held::Unknown => PendingReason::OutcomeUnknown,
            Held::Deferred => PendingReason::Deferred,
            _ => PendingReason::Ask,
        };
        let approve = Decision::Approve {
            updated_input: None,
            token: None,
        };
        let (paused, pending) = match held {
            Held::Interrupted => (None, Vec::new()),
            _ => {
                let mut turn = interrupted_turn(&messages).expect("a turn with an unanswered call");
                turn.pending[0].reason = reason;
                turn.pending[0].rerun = false;
                let kept = PendingCall {
                    tool_call_id: CALL.into(),
                    tool_name: "pay".into(),
                    input: turn.pending[0].input.clone(),
                    fingerprint: turn.pending[0].fingerprint.clone(),
                    reason,
                    decision: (!matches!(held, Held::Deferred)).then_some(approve),
                };
                (Some(serde_json::to_value(&turn).unwrap()), vec![kept])
            }
        };
        Stored {
            record: SessionRecord {
                session_id: "s".into(),
                messages,
                hooks: Value::Null,
                paused,
                running: None,
            },
            pending,
            effects: effect.into_iter().map(|effect| (CALL.to_string(), effect)).collect(),
            lease: None,
        }
    }

    fn goes(held: Held, effect: Option<Effect>, side_effect: SideEffect) -> (Goes, bool) {
        let resumed = resumed_turn(&stored(held, effect), &[tool(side_effect)], true)
            .unwrap()
            .expect("a turn goes on");
        let turn = resumed.turn;
        let goes = match turn.pending.first() {
            None => {
                assert!(turn.results[0].is_some(), "an answered call has its result");
                Goes::Answered
            }
            Some(call) => Goes::Waits(
                call.reason,
                call.decision.as_ref().map(|decision| match decision {
                    Decision::Approve { .. } => "approve",
                    Decision::Reject { .. } => "reject",
                }),
                call.rerun,
            ),
        };
        (goes, resumed.changed)
    }

    #[test]
    fn every_stored_turn_ledger_effect_and_side_effect_has_its_outcome() {
        use Goes::{Answered, Waits};
        use PendingReason::{Ask, Deferred, OutcomeUnknown};
        use SideEffect::{Idempotent, NonIdempotent, Pure};
        let finished = || Some(Effect::Finished(ToolResult::new("paid", false)));
        #[rustfmt::skip]
        let table: Vec<(Held, Option<Effect>, SideEffect, Goes, bool)> = vec![
            // Died mid-turn: never started → reruns; started → unknown unless replayable.
            (Held::Interrupted, None,                 NonIdempotent, Waits(Ask, None, true), true),
            (Held::Interrupted, Some(Effect::Started), NonIdempotent, Waits(OutcomeUnknown, None, false), true),
            (Held::Interrupted, Some(Effect::Started), Idempotent,    Waits(Ask, None, true), true),
            (Held::Interrupted, Some(Effect::Started), Pure,          Waits(Ask, None, true), true),
            (Held::Interrupted, finished(),            NonIdempotent, Answered, true),
            // A stored approval: it stands unless the call started without a result since.
            (Held::Approved,    None,                  NonIdempotent, Waits(Ask, Some("approve"), false), false),
            (Held::Approved,    Some(Effect::Started), NonIdempotent, Waits(OutcomeUnknown, None, false), true),
            (Held::Approved,    Some(Effect::Started), Idempotent,    Waits(Ask, Some("approve"), false), false),
            (Held::Approved,    Some(Effect::Started), Pure,          Waits(Ask, Some("approve"), false), false),
            (Held::Approved,    finished(),            Pure,          Answered, true),
            // Saved as unknown: a decision taken knowing it stands.
            (Held::Unknown,     Some(Effect::Unknown), NonIdempotent, Waits(OutcomeUnknown, Some("approve"), false), false),
            (Held::Unknown,     finished(),            NonIdempotent, Answered, true),
            // A deferred call waits for its published result, whatever the ledger says.
            (Held::Deferred,    Some(Effect::Started), NonIdempotent, Waits(Deferred, None, false), false),
            (Held::Deferred,    finished(),            NonIdempotent, Waits(Deferred, None, false), false),
        ];
        for (held, effect, side_effect, expected, changed) in table {
            let row = format!("{held:?} × {effect:?} × {side_effect:?}");
            assert_eq!(goes(held, effect, side_effect), (expected, changed), "{row}");
        }
    }

    #[test]
    fn without_recovery_the_stored_pause_is_taken_as_it_is() {
        let resumed = resumed_turn(
            &stored(Held::Approved, Some(Effect::Started)),
            &[tool(SideEffect::NonIdempotent)],
            false,
        )
        .unwrap()
        .expect("the stored pause");
        assert_eq!(resumed.turn.pending[0].reason, PendingReason::Ask);
        assert!(resumed.turn.pending[0].decision.is_some());
        assert!(!resumed.changed);
        // Died mid-turn, but another agent held the session live: nothing is rebuilt.
        let interrupted = stored(Held::Interrupted, Some(Effect::Started));
        assert!(resumed_turn(&interrupted, &[], false).unwrap().is_none());
    }

    #[test]
    fn a_turn_whose_calls_all_have_tool_messages_is_not_interrupted() {
        let mut messages = stored(Held::Interrupted, None).record.messages;
        messages.push(Message::Tool {
            tool_call_id: CALL.into(),
            content: "paid".into(),
            is_error: false,
        });
        assert!(interrupted_turn(&messages).is_none());
    }
}
