//! The loop of one `send`: UserPromptSubmit → { model turn → tool calls } until the model
//! answers without tool calls, `maxTurns` is reached or a denial interrupts → TaskCompleted.

use std::sync::Arc;

use futures::future::join_all;
use futures::FutureExt;
use serde_json::{json, Map, Value};
use tracing::field::Empty;
use tracing::Instrument;

use super::confirm::Approvals;
use super::control::{RunControl, SendOptions};
use super::conversation::Conversation;
use super::events::{PromptResult, StopReason, StreamEvent, TokenUsage, ToolCallRecord};
use super::parts::Agent;
use super::pipeline::{self, CallSite};
use super::reader::EventSender;
use super::settings::RunSettings;
use crate::error::{ErrorCode, Result, SdkError};
use crate::hooks::apply;
use crate::hooks::dispatch::{Caller, EventInput, HookContext, HookError};
use crate::hooks::environment;
use crate::hooks::pending::SETTLE_GRACE;
use crate::hooks::HookEvent;
use crate::ids;
use crate::js_value::describe;
use crate::model::{AssistantToolCall, Message, Model, ModelReply, ModelRequest, ToolCallRequest, Usage, UserContent};
use crate::offload::offload;

pub(crate) struct Run {
    agent: Arc<Agent>,
    /// The only mutable part of the session a run touches.
    conversation: Arc<Conversation>,
    approvals: Arc<Approvals>,
    control: Arc<RunControl>,
    events: EventSender,
    /// The session's settings when the run started (`setModel` and the like apply later).
    settings: RunSettings,
    /// When `send` accepted the run (`duration`).
    started: std::time::Instant,
    scope: u32,
    /// One id per run (`taskId` of TaskCompleted).
    id: String,
    max_turns: u32,
    turns: u32,
    usage: Usage,
    tool_calls: Vec<ToolCallRecord>,
    /// The environment's hooks for this run and the variables webhooks may use.
    context: HookContext,
    /// The environment's hooks could not be read: the run fails with this.
    setup_error: Option<SdkError>,
    last_text: String,
    /// The root of the run's trace: model calls, tool calls and dispatches nest in it. A root
    /// even when `send` is called from inside another run's tool or hook.
    span: tracing::Span,
}

type Finish = Result<(String, StopReason)>;

impl Run {
    pub fn new(
        agent: Arc<Agent>,
        conversation: Arc<Conversation>,
        approvals: Arc<Approvals>,
        settings: RunSettings,
        control: Arc<RunControl>,
        events: EventSender,
        options: SendOptions,
    ) -> Self {
        let max_turns = options.max_turns.unwrap_or(settings.max_turns);
        let (extra, setup_error) = match environment::hooks(&options.environment) {
            Ok(hooks) => (hooks, None),
            Err(error) => (Vec::new(), Some(error)),
        };
        let span = tracing::info_span!(
            parent: None,
            "agent_run",
            session_id = %agent.id,
            turns = Empty,
            stop_reason = Empty,
            otel.status_description = Empty
        );
        Run {
            agent,
            conversation,
            approvals,
            control,
            events,
            settings,
            started: std::time::Instant::now(),
            scope: options.scope,
            id: ids::uuid(),
            max_turns,
            turns: 0,
            usage: Usage::default(),
            tool_calls: Vec::new(),
            context: HookContext {
                extra,
                environment: Arc::new(options.environment),
            },
            setup_error,
            last_text: String::new(),
            span,
        }
    }

    /// One id per run: `operationId`, `taskId`, the submission's `requestId`.
    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn span(&self) -> &tracing::Span {
        &self.span
    }

    /// Fails with the abort once the run was aborted. Checked before every model call and as
    /// soon as a turn's tool calls return: user code that aborts synchronously never gives the
    /// `select!` in [`Run::drive`] a chance to see it.
    fn checkpoint(&self) -> Result<()> {
        if self.control.is_aborted() {
            return Err(SdkError::new(ErrorCode::Abort, self.control.reason()));
        }
        Ok(())
    }

    fn emit(&self, event: StreamEvent) {
        self.events.send(event);
    }

    fn caller(&self) -> Caller<'_> {
        Caller {
            scope: self.scope,
            cancel: Some(self.control.token()),
            context: &self.context,
        }
    }

    /// After the run failed or was aborted, hooks get their own budget, not the aborted signal.
    fn detached(&self) -> Caller<'_> {
        Caller {
            scope: self.scope,
            cancel: None,
            context: &self.context,
        }
    }

    fn has(&self, event: HookEvent) -> bool {
        self.agent.dispatcher.has(event, None, &self.context)
    }

    /// Fields every run-level event carries.
    fn run_fields(&self, event: HookEvent) -> Map<String, Value> {
        let mut fields = Map::new();
        fields.insert("event".into(), json!(event.name()));
        fields.insert("sessionId".into(), json!(self.agent.id));
        fields.insert("operationId".into(), json!(self.id));
        fields
    }

    fn usage_fields(&self, fields: &mut Map<String, Value>) {
        fields.insert("steps".into(), json!(self.turns));
        fields.insert("totalInputTokens".into(), json!(self.usage.input_tokens));
        fields.insert("totalOutputTokens".into(), json!(self.usage.output_tokens));
        fields.insert("totalTokens".into(), json!(self.usage.total_tokens));
        fields.insert("totalToolCalls".into(), json!(self.tool_calls.len()));
    }

    /// A lifecycle event: observers only, but a critical delivery failure fails the run.
    async fn lifecycle(&self, event: HookEvent, payload: Map<String, Value>, caller: Caller<'_>) -> Result<()> {
        let input = EventInput {
            event,
            payload: payload.into(),
            tool: None,
            error: None,
        };
        self.agent
            .dispatcher
            .dispatch(input, caller)
            .await
            .map(drop)
            .map_err(HookError::into_sdk)
    }

    /// Runs to the end and publishes the outcome as the last event.
    pub async fn drive(mut self, content: UserContent) {
        let control = self.control.clone();
        let description = content.text();
        let outcome = match self.setup_error.take() {
            Some(error) => Err(error),
            None => tokio::select! {
                biased;
                _ = control.aborted() => Err(SdkError::new(ErrorCode::Abort, control.reason())),
                outcome = self.steps(content) => outcome,
            },
        };
        if matches!(&outcome, Err(error) if error.code == ErrorCode::Abort) {
            // Callbacks told to stop usually settle at once; let them, so the session is not
            // found still cleaning up by the caller's next step.
            self.agent.dispatcher.pending().settle(SETTLE_GRACE).await;
        }
        let outcome = self.task_completed(outcome, &description).await;
        if let Err(error) = &outcome {
            if error.code != ErrorCode::Abort {
                self.stop_failure(error).await;
            }
        }
        let aborted = match &outcome {
            Err(error) if error.code == ErrorCode::Abort => Some(error.message.as_str()),
            _ => None,
        };
        self.conversation.finish(&control, aborted);
        // How the run ended; a failure (not an abort) marks its span as an error.
        self.span.record("turns", self.turns);
        self.span.record("stop_reason", reason(&outcome));
        match &outcome {
            Err(error) if error.code != ErrorCode::Abort => {
                self.span.record("otel.status_description", error.message.as_str());
            }
            _ => {}
        }
        match outcome {
            Ok((content, stop_reason)) => {
                let usage = TokenUsage::of(self.usage, self.agent.config.max_context_tokens);
                self.emit(StreamEvent::Usage { usage });
                let result = PromptResult {
                    result: content.clone(),
                    tool_calls: std::mem::take(&mut self.tool_calls),
                    usage,
                    duration: self.started.elapsed().as_millis() as u64,
                    turns_count: self.turns,
                    content,
                    turns: self.turns,
                    stop_reason,
                };
                self.emit(StreamEvent::result(result));
            }
            Err(error) => self.emit(StreamEvent::error(error)),
        }
        control.finish();
    }

    async fn steps(&mut self, content: UserContent) -> Finish {
        let content = self.user_prompt_submit(content).await?;
        self.checkpoint()?;
        self.conversation.push(Message::User { content });
        loop {
            if self.turns >= self.max_turns {
                return Ok((self.last_text.clone(), StopReason::MaxTurns));
            }
            self.turns += 1;
            self.emit(StreamEvent::TurnStart { turn: self.turns });
            if self.has(HookEvent::StepStart) {
                let mut payload = self.run_fields(HookEvent::StepStart);
                payload.insert("stepIndex".into(), json!(self.turns - 1));
                payload.insert("steps".into(), json!(self.turns - 1));
                self.lifecycle(HookEvent::StepStart, payload, self.caller()).await?;
            }
            self.checkpoint()?;
            let reply = self.call_model().await?;
            self.checkpoint()?;
            self.usage.add(reply.usage);
            let ModelReply { text, tool_calls, .. } = reply;
            self.conversation.push(Message::Assistant {
                content: (!text.is_empty() || tool_calls.is_empty()).then(|| text.clone()),
                tool_calls: tool_calls
                    .iter()
                    .map(|call| AssistantToolCall::new(call.id.clone(), call.name.clone(), call.arguments.clone()))
                    .collect(),
            });
            self.last_text = text.clone();
            if tool_calls.is_empty() {
                self.emit(StreamEvent::TurnEnd { turn: self.turns });
                self.step_end(&text, &tool_calls, &[], false).await?;
                return Ok((text, StopReason::Done));
            }
            let (mut records, interrupt) = self.run_tool_calls(&tool_calls).await;
            self.checkpoint()?;
            for record in &mut records {
                self.conversation.push(Message::Tool {
                    tool_call_id: record.id.clone(),
                    content: record.output.clone(),
                    is_error: record.is_error,
                });
                self.emit(StreamEvent::ToolResult {
                    id: record.id.clone(),
                    name: record.name.clone(),
                    output: record.output.clone(),
                    is_error: record.is_error,
                    display: record.display.take(),
                    status: record.status,
                    classification: record.classification.clone(),
                });
            }
            self.emit(StreamEvent::TurnEnd { turn: self.turns });
            let more = interrupt.is_none() && self.turns < self.max_turns;
            let first = self.tool_calls.len();
            self.tool_calls.extend(records);
            self.step_end(&text, &tool_calls, &self.tool_calls[first..], more)
                .await?;
            if let Some(denial) = interrupt {
                return Ok((denial, StopReason::Interrupted));
            }
        }
    }

    /// UserPromptSubmit may rewrite the prompt or abort it; its errors fail the run unchanged.
    async fn user_prompt_submit(&self, content: UserContent) -> Result<UserContent> {
        if !self.has(HookEvent::UserPromptSubmit) {
            return Ok(content);
        }
        let images = content.image_count();
        let mut payload = self.run_fields(HookEvent::UserPromptSubmit);
        payload.remove("operationId");
        payload.insert("userPrompt".into(), json!(content.text()));
        payload.insert("hasImages".into(), json!(images > 0));
        payload.insert("imageCount".into(), json!(images));
        payload.insert("operationId".into(), json!(self.id));
        let input = EventInput {
            event: HookEvent::UserPromptSubmit,
            payload: payload.into(),
            tool: None,
            error: None,
        };
        let dispatched = self
            .agent
            .dispatcher
            .dispatch(input, self.caller())
            .await
            .map_err(HookError::into_sdk)?;
        apply::user_prompt_submit(&dispatched.outputs, content)
            .map_err(|message| SdkError::new(ErrorCode::HookAborted, message))
    }

    /// TaskCompleted, once the run's outcome is known. For a run that succeeded, its abort or
    /// error becomes the run's; for one that failed, the original error stays and the hook's
    /// failure is logged.
    async fn task_completed(&self, outcome: Finish, description: &str) -> Finish {
        if !self.has(HookEvent::TaskCompleted) {
            return outcome;
        }
        let (success, summary) = match &outcome {
            Ok((content, stop)) => (*stop == StopReason::Done, content.clone()),
            Err(error) => (false, error.message.clone()),
        };
        let reason = reason(&outcome);
        let mut payload = Map::new();
        payload.insert("event".into(), json!("TaskCompleted"));
        payload.insert("sessionId".into(), json!(self.agent.id));
        payload.insert("taskId".into(), json!(self.id));
        payload.insert("taskDescription".into(), json!(description));
        payload.insert("resultSummary".into(), json!(summary));
        payload.insert("success".into(), json!(success));
        payload.insert("reason".into(), json!(reason));
        payload.insert("operationId".into(), json!(self.id));
        payload.insert("lastAssistantContent".into(), json!(self.last_text));
        self.usage_fields(&mut payload);
        // After an abort the caller's signal has fired; the hook still gets its own budget.
        let caller = if outcome.is_ok() {
            self.caller()
        } else {
            self.detached()
        };
        let input = EventInput {
            event: HookEvent::TaskCompleted,
            payload: payload.into(),
            tool: None,
            error: None,
        };
        let dispatched = self.agent.dispatcher.dispatch(input, caller).await;
        match (outcome, dispatched) {
            (Ok(finished), Ok(dispatched)) => match apply::first_abort(&dispatched.outputs, HookEvent::TaskCompleted) {
                Some(message) => Err(SdkError::new(ErrorCode::HookAborted, message)),
                None => Ok(finished),
            },
            (Ok(_), Err(HookError::Cancelled)) => Err(SdkError::new(ErrorCode::Abort, self.control.reason())),
            (Ok(_), Err(error)) => Err(error.into_sdk()),
            (Err(original), Err(error)) => {
                self.agent.dispatcher.log().warn(
                    "TaskCompleted hook failed after the run failed; keeping the run's error",
                    json!({"error": error.message()}),
                );
                Err(original)
            }
            (Err(original), Ok(_)) => Err(original),
        }
    }

    /// StepEnd: the step's text, tool calls and results, and the run's totals so far.
    async fn step_end(
        &self,
        text: &str,
        calls: &[ToolCallRequest],
        records: &[ToolCallRecord],
        more: bool,
    ) -> Result<()> {
        if !self.has(HookEvent::StepEnd) {
            return Ok(());
        }
        let mut payload = self.run_fields(HookEvent::StepEnd);
        payload.insert("stepIndex".into(), json!(self.turns - 1));
        payload.insert(
            "stepType".into(),
            json!(if calls.is_empty() { "call_llm" } else { "call_tool" }),
        );
        payload.insert("content".into(), json!(text));
        payload.insert(
            "toolCalls".into(),
            json!(calls
                .iter()
                .map(|call| json!({"id": call.id, "name": call.name, "arguments": call.arguments}))
                .collect::<Vec<_>>()),
        );
        payload.insert("toolsResult".into(), serde_json::to_value(records).unwrap_or_default());
        payload.insert("shouldContinue".into(), json!(more));
        self.usage_fields(&mut payload);
        self.lifecycle(HookEvent::StepEnd, payload, self.caller()).await
    }

    /// StopFailure, when the run failed: the error's message and detail. Its own failures are
    /// logged; the run's error stands.
    async fn stop_failure(&self, error: &SdkError) {
        if !self.has(HookEvent::StopFailure) {
            return;
        }
        let mut payload = self.run_fields(HookEvent::StopFailure);
        payload.insert("reason".into(), json!("error"));
        payload.insert("errorMessage".into(), json!(error.message));
        payload.insert("errorType".into(), json!(error.code.code()));
        payload.insert("errorDetail".into(), serde_json::to_value(error).unwrap_or_default());
        payload.insert("lastAssistantContent".into(), json!(self.last_text));
        self.usage_fields(&mut payload);
        if let Err(failure) = self.lifecycle(HookEvent::StopFailure, payload, self.detached()).await {
            self.agent.dispatcher.log().warn(
                "StopFailure hook failed; keeping the run's error",
                json!({"error": failure.message}),
            );
        }
    }

    async fn call_model(&self) -> Result<ModelReply> {
        let turn = model_turn(
            self.agent.clone(),
            self.settings.model.clone(),
            self.conversation.messages(),
            self.turns,
            self.scope,
            self.events.clone(),
        );
        let span = tracing::info_span!("model_call", turn = self.turns);
        if !self.settings.model.is_remote() {
            return turn.instrument(span).await;
        }
        // Off the polling thread: the HTTP exchange and its SSE parsing run on the workers.
        offload(turn.instrument(span))
            .await
            .unwrap_or_else(|error| Err(SdkError::model(format!("Model request task failed: {error}"))))
    }

    /// Runs one turn's tool calls concurrently; results come back in call order, with the first
    /// interrupting denial.
    async fn run_tool_calls(&self, calls: &[ToolCallRequest]) -> (Vec<ToolCallRecord>, Option<String>) {
        let inputs: Vec<std::result::Result<Map<String, Value>, String>> =
            calls.iter().map(|call| parse_arguments(&call.arguments)).collect();
        for (call, input) in calls.iter().zip(&inputs) {
            self.emit(StreamEvent::ToolUse {
                id: call.id.clone(),
                name: call.name.clone(),
                input: Value::Object(input.clone().unwrap_or_default()),
            });
        }
        let site = CallSite {
            agent: &self.agent,
            approvals: &self.approvals,
            settings: &self.settings,
            caller: self.caller(),
            step_index: self.turns - 1,
            operation_id: &self.id,
            events: &self.events,
        };
        let finished = join_all(calls.iter().zip(inputs).enumerate().map(|(index, (call, input))| {
            let span = tracing::info_span!("tool_call", tool = %call.name, tool_call_id = %call.id, status = Empty);
            let finished = span.clone();
            pipeline::run(&site, call, index, input)
                .instrument(span)
                .inspect(move |done| {
                    finished.record("status", done.record.status.name());
                })
        }))
        .await;
        let interrupt = finished.iter().find_map(|done| done.interrupt.clone());
        (finished.into_iter().map(|done| done.record).collect(), interrupt)
    }
}

/// One model call over the conversation `messages`; content deltas are published as they come.
async fn model_turn(
    agent: Arc<Agent>,
    model: Arc<dyn Model>,
    messages: Arc<Vec<Arc<Message>>>,
    turn: u32,
    scope: u32,
    events: EventSender,
) -> Result<ModelReply> {
    let config = &agent.config;
    let request = ModelRequest {
        system_prompt: config.system_prompt.as_deref(),
        messages: &messages,
        tools: &agent.tool_schemas,
        temperature: config.temperature,
        max_output_tokens: config.max_output_tokens,
        turn,
        scope,
    };
    let mut on_text = move |delta: &str| {
        events.send(StreamEvent::Content {
            delta: delta.to_string(),
        });
    };
    model.complete(request, &mut on_text).await
}

/// How a run ended, as TaskCompleted's `reason` and the run span's `stop_reason` say it.
fn reason(outcome: &Finish) -> &'static str {
    match outcome {
        Ok((_, stop)) => stop.name(),
        Err(error) if error.code == ErrorCode::Abort => "aborted",
        Err(_) => "error",
    }
}

/// The model's argument text as a JSON object; empty text means no arguments.
fn parse_arguments(text: &str) -> std::result::Result<Map<String, Value>, String> {
    if text.trim().is_empty() {
        return Ok(Map::new());
    }
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(other) => Err(format!("arguments must be a JSON object (got {})", describe(&other))),
        Err(error) => Err(format!("arguments are not valid JSON: {error}")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_must_be_a_json_object() {
        assert_eq!(parse_arguments("").unwrap(), Map::new());
        assert_eq!(parse_arguments("{\"a\":1}").unwrap()["a"], 1);
        assert_eq!(
            parse_arguments("[1]").unwrap_err(),
            "arguments must be a JSON object (got an array)"
        );
        assert_eq!(
            parse_arguments("{\"a\":").unwrap_err(),
            "arguments are not valid JSON: EOF while parsing a value at line 1 column 5"
        );
    }
}
