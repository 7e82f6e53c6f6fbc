//! The run's lifecycle events: UserPromptSubmit, StepEnd, TaskCompleted, StopFailure, and the
//! dispatch every run event goes through.

use serde_json::json;

use super::{reason, Finish, Run};
use crate::agent::events::{StopReason, ToolCallRecord};
use crate::agent::payloads;
use crate::error::{ErrorCode, Result, SdkError};
use crate::hooks::apply;
use crate::hooks::dispatch::{Caller, Dispatched, EventInput, HookError};
use crate::hooks::{EventFields, HookEvent};
use crate::model::{ToolCallRequest, UserContent};

/// What the end of a run's steps came to.
pub(super) enum Completion {
    Finished(Finish),
    /// A TaskCompleted hook sent the model back to work with this instruction.
    MoreWork(String),
}

impl Run {
    /// A lifecycle event: observers only, but a critical delivery failure fails the run.
    pub(super) async fn lifecycle(&self, event: HookEvent, payload: EventFields, caller: Caller<'_>) -> Result<()> {
        self.dispatch(event, payload, caller).await.map(drop)
    }

    /// Dispatches a run event and hands back what its hooks answered.
    pub(super) async fn dispatch(
        &self,
        event: HookEvent,
        payload: EventFields,
        caller: Caller<'_>,
    ) -> Result<Dispatched> {
        self.agent
            .dispatcher
            .dispatch(EventInput::of(event, payload), caller)
            .await
            .map_err(HookError::into_sdk)
    }

    /// UserPromptSubmit may rewrite the prompt or abort it; its errors fail the run unchanged.
    pub(super) async fn user_prompt_submit(&self, content: UserContent) -> Result<UserContent> {
        if !self.has(HookEvent::UserPromptSubmit) {
            return Ok(content);
        }
        let images = content.image_count();
        let payload = EventFields::of(&payloads::UserPromptSubmit {
            event: HookEvent::UserPromptSubmit.name(),
            session_id: &self.agent.id,
            user_prompt: &content.text(),
            has_images: images > 0,
            image_count: images,
            operation_id: &self.id,
        });
        let dispatched = self
            .dispatch(HookEvent::UserPromptSubmit, payload, self.caller())
            .await?;
        apply::user_prompt_submit(&dispatched.outputs, content)
            .map_err(|message| SdkError::new(ErrorCode::HookAborted, message))
    }

    /// TaskCompleted, once the run's outcome is known. For a run that succeeded, its abort or
    /// error becomes the run's; for one that failed, the original error stays and the hook's
    /// failure is logged. A run that ended done may be given more work (a command hook's
    /// `decision: 'block'`); `again` says this end follows such a turn.
    pub(super) async fn task_completed(&self, outcome: Finish, description: &str, again: bool) -> Completion {
        if !self.has(HookEvent::TaskCompleted) {
            return Completion::Finished(outcome);
        }
        let (success, summary) = match &outcome {
            // A cut answer is still the run's answer: the reason says it was cut.
            Ok((content, stop)) => (
                matches!(stop, StopReason::Done | StopReason::MaxTokens),
                content.clone(),
            ),
            Err(error) => (false, error.message.clone()),
        };
        let payload = EventFields::of(&payloads::TaskCompleted {
            event: HookEvent::TaskCompleted.name(),
            session_id: &self.agent.id,
            task_id: &self.id,
            task_description: description,
            result_summary: &summary,
            success,
            reason: reason(&outcome),
            operation_id: &self.id,
            last_assistant_content: &self.last_text,
            totals: self.totals(),
            stop_hook_active: again,
        });
        // After an abort the caller's signal has fired; the hook still gets its own budget.
        let caller = if outcome.is_ok() {
            self.caller()
        } else {
            self.detached()
        };
        let input = EventInput::of(HookEvent::TaskCompleted, payload);
        let dispatched = self.agent.dispatcher.dispatch(input, caller).await;
        let finished = match (outcome, dispatched) {
            (Ok(finished), Ok(dispatched)) => match apply::first_abort(&dispatched.outputs, HookEvent::TaskCompleted) {
                Some(message) => Err(SdkError::new(ErrorCode::HookAborted, message)),
                None if finished.1 == StopReason::Done => match apply::more_work(&dispatched.outputs) {
                    Some(instruction) => return Completion::MoreWork(instruction),
                    None => Ok(finished),
                },
                None => Ok(finished),
            },
            (Ok(_), Err(HookError::Cancelled)) => Err(SdkError::new(ErrorCode::Abort, self.control.reason())),
            (Ok(_), Err(error)) => Err(error.into_sdk()),
            (Err(original), Err(error)) => {
                self.agent.log().warn(
                    "TaskCompleted hook failed after the run failed; keeping the run's error",
                    json!({"error": error.message()}),
                );
                Err(original)
            }
            (Err(original), Ok(_)) => Err(original),
        };
        Completion::Finished(finished)
    }

    /// StepEnd: the step's text, tool calls and results, and the run's totals so far.
    pub(super) async fn step_end(
        &self,
        text: &str,
        calls: &[ToolCallRequest],
        records: &[ToolCallRecord],
        more: bool,
    ) -> Result<()> {
        if !self.has(HookEvent::StepEnd) {
            return Ok(());
        }
        let payload = EventFields::of(&payloads::StepEnd {
            event: HookEvent::StepEnd.name(),
            session_id: &self.agent.id,
            operation_id: &self.id,
            step_index: self.step_index(),
            step_type: if calls.is_empty() { "call_llm" } else { "call_tool" },
            content: text,
            tool_calls: calls.iter().map(payloads::StepToolCall::of).collect(),
            tools_result: records,
            should_continue: more,
            totals: self.totals(),
        });
        self.lifecycle(HookEvent::StepEnd, payload, self.caller()).await
    }

    /// StopFailure, when the run failed: the error's message and detail. Its own failures are
    /// logged; the run's error stands.
    pub(super) async fn stop_failure(&self, error: &SdkError) {
        if !self.has(HookEvent::StopFailure) {
            return;
        }
        let payload = EventFields::of(&payloads::StopFailure {
            event: HookEvent::StopFailure.name(),
            session_id: &self.agent.id,
            operation_id: &self.id,
            reason: "error",
            error_message: &error.message,
            error_type: error.code.code(),
            error_detail: error,
            last_assistant_content: &self.last_text,
            totals: self.totals(),
        });
        if let Err(failure) = self.lifecycle(HookEvent::StopFailure, payload, self.detached()).await {
            self.agent.log().warn(
                "StopFailure hook failed; keeping the run's error",
                json!({"error": failure.message}),
            );
        }
    }
}
