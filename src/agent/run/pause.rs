//! Pause and resume (§8.1): a turn whose calls wait for a person is kept and the run ends
//! `interrupted`; a later run goes on with it, call by call, once every call is decided.

use super::pipeline::{self, Ended};
use super::{parse_arguments, tool_message, Finish, Run};
use crate::agent::approvals::{self, Decision, PausedCall, PausedTurn, TurnCall};
use crate::agent::events::{PendingReason, StopReason, ToolCallRecord};
use crate::agent::payloads;
use crate::agent::subagents;
use crate::error::{ErrorCode, Result, SdkError};
use crate::hooks::{EventFields, HookEvent};
use crate::model::ToolCallRequest;
use crate::store::CallPlace;

impl Run {
    /// Some calls of the turn wait for a person (§8.1): the turn's finished calls are reported,
    /// the pause is kept (before anything is announced), HumanInterventionRequest fires, and
    /// the run ends `interrupted` with the pending approvals. The turn's tool messages wait
    /// until every call has its result.
    pub(super) async fn pause(&mut self, text: String, calls: &[ToolCallRequest], ended: Vec<Ended>) -> Finish {
        let mut results = Vec::with_capacity(ended.len());
        let mut pending = Vec::new();
        for ended in ended {
            match ended {
                Ended::Finished(mut finished) => {
                    self.emit_result(&mut finished.record);
                    self.tool_calls.push(finished.record.clone());
                    results.push(Some(finished.record));
                }
                Ended::Paused(call) => {
                    results.push(None);
                    pending.push(call);
                }
            }
        }
        let turn = PausedTurn {
            operation_id: self.id.clone(),
            step_index: self.step_index(),
            text: text.clone(),
            calls: calls.iter().map(TurnCall::of).collect(),
            results,
            pending,
        };
        self.repause(text, turn).await
    }

    /// Keeps `turn` as the session's pause, tells HumanInterventionRequest, and ends the run
    /// `interrupted`.
    ///
    /// A sub-agent's run keeps its turn and ends `interrupted` only: its parent's `Task` call
    /// carries it up, and the root keeps and announces the whole tree (§8.7).
    pub(super) async fn repause(&mut self, text: String, turn: PausedTurn) -> Finish {
        if self.settings.child.is_some() {
            self.conversation.pause(turn);
            return Ok((text, StopReason::Interrupted));
        }
        // Kept before anything is announced: a person may answer from another process. With
        // nothing to announce it to, it is kept with the run's end, in the release's write.
        if self.quiet_end(true) {
            self.unsaved = true;
        } else {
            self.save(Some(&turn)).await?;
        }
        self.conversation.pause(turn.clone());
        self.paused = Some(turn.approvals(&self.agent.id, self.agent.config.approval_secret.as_deref()));
        if self.has(HookEvent::HumanInterventionRequest) {
            let pending_tools = turn.leaves().into_iter().map(payloads::PendingTool::of).collect();
            let payload = EventFields::of(&payloads::HumanInterventionRequest {
                event: HookEvent::HumanInterventionRequest.name(),
                session_id: &self.agent.id,
                operation_id: &self.id,
                step_index: turn.step_index,
                pending_tools,
            });
            self.lifecycle(HookEvent::HumanInterventionRequest, payload, self.caller())
                .await?;
        }
        Ok((text, StopReason::Interrupted))
    }

    /// Goes on with the paused turn: each decided call, in order, after its
    /// HumanInterventionResult (HumanInterventionStop for a rejection that stops the run);
    /// then the whole turn's tool messages in call order. `Some` when the run ends here.
    pub(super) async fn resume_turn(&mut self) -> Result<Option<(String, StopReason)>> {
        let Some(turn) = self.conversation.take_paused() else {
            return Err(SdkError::new(
                ErrorCode::NothingToResume,
                "There is nothing to resume: no run is paused",
            ));
        };
        // Its next turn's step follows the paused one (a sub-agent going on has taken turns).
        self.first_step = (turn.step_index + 1).saturating_sub(self.turns);
        // The paused turn's calls were the model's: a forced `toolChoice` is spent.
        self.called_a_tool = true;
        let requests: Vec<ToolCallRequest> = turn.calls.iter().map(TurnCall::request).collect();
        let mut results = turn.results.clone();
        let mut resumed = Vec::with_capacity(turn.pending.len());
        let mut still_waiting = Vec::new();
        let mut interrupt = None;
        for call in &turn.pending {
            self.checkpoint()?;
            let site = self.site(turn.step_index);
            if call.reason == PendingReason::Deferred {
                // Its result comes from `completeToolCall`, hooks already run; until then it waits.
                match self.durable.deferred_result(&call.tool_call_id).await? {
                    Some(result) => {
                        resumed.push(call.index);
                        results[call.index] = Some(ToolCallRecord::stored(
                            &call.tool_call_id,
                            &call.tool_name,
                            &call.input,
                            result.output,
                            result.is_error,
                        ));
                    }
                    None => still_waiting.push(call.clone()),
                }
                continue;
            }
            let ended = if call.child.is_some() {
                // A `Task` call waiting for its sub-agent: the sub-agent goes on (§8.7).
                pipeline::resume(&site, &requests[call.index], call, None).await
            } else if call.rerun {
                // The process died before this call started: it goes through the whole
                // pipeline, and may pause again.
                let input = parse_arguments(&requests[call.index].arguments);
                pipeline::run(&site, &requests[call.index], call.index, input).await
            } else {
                let (agent_path, _) = subagents::lineage(self.settings.child.as_ref());
                let place = CallPlace {
                    session_id: &self.agent.id,
                    agent_path,
                    tool_call_id: &call.tool_call_id,
                };
                let refusal = approvals::approval_refusal(
                    call,
                    &requests[call.index],
                    place,
                    self.agent.config.approval_secret.as_deref(),
                );
                // A refused approval is nobody's decision: no HumanInterventionResult for it.
                if refusal.is_none() {
                    self.intervention_result(&turn, call).await?;
                }
                self.checkpoint()?;
                pipeline::resume(&site, &requests[call.index], call, refusal).await
            };
            let finished = match ended {
                Ended::Finished(finished) => finished,
                Ended::Paused(paused) => {
                    still_waiting.push(paused);
                    continue;
                }
            };
            self.usage.add(finished.spent);
            if finished.interrupt.is_some() && matches!(call.decision, Some(Decision::Reject { stop: true, .. })) {
                self.stopped_by_person = true;
            }
            interrupt = interrupt.or(finished.interrupt);
            resumed.push(call.index);
            results[call.index] = Some(finished.record);
        }
        self.checkpoint()?;
        for index in &resumed {
            if let Some(record) = &mut results[*index] {
                self.emit_result(record);
                self.tool_calls.push(record.clone());
            }
        }
        if !still_waiting.is_empty() {
            let text = turn.text.clone();
            let paused = PausedTurn {
                operation_id: self.id.clone(),
                results,
                pending: still_waiting,
                ..turn
            };
            return self.repause(text, paused).await.map(Some);
        }
        for record in results.iter().flatten() {
            self.conversation.push(tool_message(record));
        }
        self.last_text = turn.text;
        // The pause is over: the store forgets it (and keeps the answered turn), at once or
        // with the run's next write (see `quiet_resume`).
        if self.quiet_resume(&requests, &turn.pending) {
            self.unsaved = true;
        } else {
            self.save(None).await?;
        }
        Ok(interrupt.map(|text| (text, StopReason::Interrupted)))
    }

    /// HumanInterventionResult just before a decided call goes on, or HumanInterventionStop for
    /// a rejection that ends the run.
    pub(super) async fn intervention_result(&self, turn: &PausedTurn, call: &PausedCall) -> Result<()> {
        let stops = matches!(call.decision, Some(Decision::Reject { stop: true, .. }));
        let event = if stops {
            HookEvent::HumanInterventionStop
        } else {
            HookEvent::HumanInterventionResult
        };
        if !self.has(event) {
            return Ok(());
        }
        let (agent_path, parent_tool_call_id) = subagents::lineage(self.settings.child.as_ref());
        let payload = EventFields::of(&payloads::HumanInterventionResult {
            event: event.name(),
            session_id: &self.agent.id,
            operation_id: &self.id,
            step_index: turn.step_index,
            action: match call.decision {
                Some(Decision::Approve { .. }) => "approve",
                _ => "reject",
            },
            tool_call_id: &call.tool_call_id,
            tool_name: &call.tool_name,
            agent_path,
            parent_tool_call_id,
        });
        self.lifecycle(event, payload, self.caller()).await
    }
}
