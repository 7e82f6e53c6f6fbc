//! The tail every tool result goes through, whether it came live (`pipeline.rs`) or later from
//! `completeToolCall` (`deferred.rs`): PostToolUse after-controls, whose denial replaces the
//! result; then PostToolUse, or PostToolUseFailure for a failed result, whose outputs may replace
//! the output or fail the call. Written once, so a webhook rule gives one verdict however the
//! result arrived.

use serde_json::{json, Map, Value};

use super::payloads::{ResultField, ToolEvent};
use super::tools::CallResult;
use crate::hooks::apply::{self, PostVerdict};
use crate::hooks::control::{self, Verdict, CONTROL_ERROR};
use crate::hooks::dispatch::{Caller, Dispatcher, EventInput, HookError};
use crate::hooks::{EventFields, HookEvent};
use crate::host::ErrorSlot;

/// What a failed dispatch of the post hooks (a critical delivery, a hook that threw) does.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(crate) enum Failures {
    /// A live call: a failed PostToolUse fails the call, which PostToolUseFailure then sees; a
    /// failed PostToolUseFailure is logged and the result kept.
    FailTheCall,
    /// A published result: either fails the publication (nothing is published, the caller may
    /// try again).
    Refuse,
}

/// One call's result on its way out.
pub(crate) struct PostCall<'a> {
    pub dispatcher: &'a Dispatcher,
    pub caller: Caller<'a>,
    /// The call's fields as every tool event carries them, before its result.
    pub fields: ToolEvent<'a>,
    pub failures: Failures,
}

impl PostCall<'_> {
    /// After-controls, then the post hooks: what they leave is the call's result. `Err` only
    /// under `Failures::Refuse`.
    pub async fn finish(&self, result: CallResult) -> Result<CallResult, HookError> {
        let result = self.after_controls(result).await;
        self.post_hooks(result).await
    }

    fn name(&self) -> &str {
        self.fields.tool_name
    }

    /// The call's fields for `event`, with `result`: the model-facing output, the structured
    /// result, and `mocked`.
    fn with_result<'b>(&'b self, event: HookEvent, result: &'b CallResult) -> ToolEvent<'b> {
        ToolEvent {
            event: event.name(),
            tool_output: Some(&result.output),
            result: Some(ResultField {
                content: &result.output,
                success: result.is_success(),
            }),
            mocked: Some(result.mocked),
            ..self.fields.clone()
        }
    }

    /// A denial replaces the result (a mock stays marked as one).
    async fn after_controls(&self, result: CallResult) -> CallResult {
        let controls = self
            .dispatcher
            .controls(HookEvent::PostToolUse, self.name(), self.caller.context);
        if controls.is_empty() {
            return result;
        }
        let payload: Map<String, Value> = self.with_result(HookEvent::PostToolUse, &result).to_map();
        let verdict = control::evaluate(
            &controls,
            HookEvent::PostToolUse,
            &payload,
            self.caller,
            self.dispatcher.log(),
        )
        .await;
        match blocked(verdict) {
            Some(blocked) => CallResult {
                mocked: result.mocked,
                ..blocked
            },
            None => result,
        }
    }

    /// PostToolUse for a successful result, PostToolUseFailure for a failed one.
    pub async fn post_hooks(&self, result: CallResult) -> Result<CallResult, HookError> {
        if !result.is_success() {
            return self.post_failure_hooks(result).await;
        }
        if !self.has(HookEvent::PostToolUse) {
            return Ok(result);
        }
        let fields = self.with_result(HookEvent::PostToolUse, &result);
        match self
            .dispatcher
            .dispatch(self.input(HookEvent::PostToolUse, &fields, None), self.caller)
            .await
        {
            Ok(dispatched) => Ok(self.apply(&dispatched.outputs, result)),
            Err(error) if self.failures == Failures::Refuse => Err(error),
            Err(error) => {
                let failed = CallResult {
                    mocked: result.mocked,
                    ..CallResult::failed(error.message(), error.thrown())
                };
                self.post_failure_hooks(failed).await
            }
        }
    }

    /// PostToolUseFailure: may replace the output or abort.
    async fn post_failure_hooks(&self, result: CallResult) -> Result<CallResult, HookError> {
        if !self.has(HookEvent::PostToolUseFailure) {
            return Ok(result);
        }
        let fields = self.with_result(HookEvent::PostToolUseFailure, &result);
        let error = result.failure.as_ref().map(|failure| ErrorSlot {
            arg: 0,
            key: "error",
            message: failure.message.clone(),
            thrown: failure.thrown,
        });
        match self
            .dispatcher
            .dispatch(self.input(HookEvent::PostToolUseFailure, &fields, error), self.caller)
            .await
        {
            Ok(dispatched) => Ok(self.apply(&dispatched.outputs, result)),
            Err(error) if self.failures == Failures::Refuse => Err(error),
            Err(error) => {
                self.dispatcher.log().warn(
                    "PostToolUseFailure hook execution failed; keeping the original tool error",
                    json!({"tool": self.name(), "toolCallId": self.fields.tool_call_id, "error": error.message()}),
                );
                Ok(result)
            }
        }
    }

    /// The post hooks' outputs: a replaced output keeps the status; an abort fails the call.
    fn apply(&self, outputs: &[crate::hooks::HookOutput], result: CallResult) -> CallResult {
        match apply::post_tool_use(outputs, &result.output, self.name()) {
            PostVerdict::Output(output) => CallResult {
                output,
                stops_run: apply::stop(outputs).or(result.stops_run),
                ..result
            },
            PostVerdict::Abort(reason) => CallResult {
                mocked: result.mocked,
                ..CallResult::failed(reason, None)
            },
        }
    }

    fn has(&self, event: HookEvent) -> bool {
        self.dispatcher.has(event, Some(self.name()), self.caller.context)
    }

    fn input<'b>(&'b self, event: HookEvent, fields: &ToolEvent<'_>, error: Option<ErrorSlot>) -> EventInput<'b> {
        EventInput {
            event,
            payload: EventFields::of(fields),
            tool: Some(self.name()),
            error,
        }
    }
}

/// What a control's verdict does to the call, if it blocks it.
pub(crate) fn blocked(verdict: Verdict) -> Option<CallResult> {
    match verdict {
        Verdict::Allow => None,
        Verdict::Denied { reason } => Some(CallResult::failed_as(reason, Some("hook_denied"))),
        Verdict::Failed => Some(CallResult::failed_as(CONTROL_ERROR, Some(CONTROL_ERROR))),
    }
}
