//! The loop of one `send`: prompt → { model turn → tool calls } until the model answers without
//! tool calls or `maxTurns` is reached. Each hook point of the contract is a marked step here.

use std::sync::Arc;

use futures::future::join_all;
use serde_json::{Map, Value};
use tokio::sync::mpsc::UnboundedSender;

use super::events::{CallStatus, PromptResult, StopReason, StreamEvent, ToolCallRecord};
use super::session::{RunControl, SendOptions, Session};
use super::tools::{self, ToolContext, ToolOutcome};
use crate::error::{ErrorCode, Result, SdkError};
use crate::model::scripted::describe;
use crate::model::{
    AssistantToolCall, Message, ModelReply, ModelRequest, ToolCallRequest, Usage, UserContent,
};

pub(crate) struct Run {
    session: Arc<Session>,
    control: Arc<RunControl>,
    events: UnboundedSender<StreamEvent>,
    scope: u32,
    max_turns: u32,
    turns: u32,
    usage: Usage,
    tool_calls: Vec<ToolCallRecord>,
}

impl Run {
    pub fn new(
        session: Arc<Session>,
        control: Arc<RunControl>,
        events: UnboundedSender<StreamEvent>,
        options: SendOptions,
    ) -> Self {
        let max_turns = options.max_turns.unwrap_or(session.config.max_turns);
        Run {
            session,
            control,
            events,
            scope: options.scope,
            max_turns,
            turns: 0,
            usage: Usage::default(),
            tool_calls: Vec::new(),
        }
    }

    fn emit(&self, event: StreamEvent) {
        // The receiver is gone only when nobody wants the events any more.
        let _ = self.events.send(event);
    }

    /// Runs to the end and publishes the outcome as the last event.
    pub async fn drive(mut self, content: UserContent) {
        let control = self.control.clone();
        let outcome = tokio::select! {
            biased;
            _ = control.aborted() => Err(SdkError::new(ErrorCode::Abort, control.reason())),
            outcome = self.steps(content) => outcome,
        };
        let aborted = match &outcome {
            Err(error) if error.code == ErrorCode::Abort => Some(error.message.as_str()),
            _ => None,
        };
        self.session.finish_run(&control, aborted);
        match outcome {
            Ok((content, stop_reason)) => {
                self.emit(StreamEvent::Usage { usage: self.usage });
                let result = PromptResult {
                    content,
                    tool_calls: std::mem::take(&mut self.tool_calls),
                    usage: self.usage,
                    turns: self.turns,
                    stop_reason,
                };
                self.emit(StreamEvent::Result { result });
            }
            Err(error) => self.emit(StreamEvent::Error { error }),
        }
    }

    async fn steps(&mut self, content: UserContent) -> Result<(String, StopReason)> {
        // Hook point: UserPromptSubmit.
        self.session.push(Message::User { content });
        let mut last_text = String::new();
        loop {
            if self.turns >= self.max_turns {
                return Ok((last_text, StopReason::MaxTurns));
            }
            self.turns += 1;
            self.emit(StreamEvent::Turn { index: self.turns });
            // Hook point: StepStart.
            let reply = self.call_model().await?;
            self.usage.add(reply.usage);
            let ModelReply {
                text, tool_calls, ..
            } = reply;
            self.session.push(Message::Assistant {
                content: (!text.is_empty() || tool_calls.is_empty()).then(|| text.clone()),
                tool_calls: tool_calls
                    .iter()
                    .map(|call| {
                        AssistantToolCall::new(
                            call.id.clone(),
                            call.name.clone(),
                            call.arguments.clone(),
                        )
                    })
                    .collect(),
            });
            // Hook point: StepEnd.
            if tool_calls.is_empty() {
                return Ok((text, StopReason::Done));
            }
            last_text = text;
            let records = self.run_tool_calls(&tool_calls).await;
            for record in &records {
                self.session.push(Message::Tool {
                    tool_call_id: record.id.clone(),
                    content: record.output.clone(),
                });
                self.emit(StreamEvent::ToolResult {
                    id: record.id.clone(),
                    name: record.name.clone(),
                    output: record.output.clone(),
                    status: record.status,
                });
            }
            self.tool_calls.extend(records);
        }
    }

    async fn call_model(&self) -> Result<ModelReply> {
        let messages = self.session.messages();
        let config = &self.session.config;
        let request = ModelRequest {
            system_prompt: config.system_prompt.as_deref(),
            messages: &messages,
            tools: &self.session.tool_schemas,
            temperature: config.temperature,
            max_output_tokens: config.max_output_tokens,
            turn: self.turns,
            scope: self.scope,
        };
        let events = self.events.clone();
        let mut on_text = move |delta: &str| {
            let _ = events.send(StreamEvent::Content {
                delta: delta.to_string(),
            });
        };
        self.session.model.complete(request, &mut on_text).await
    }

    /// Runs one turn's tool calls concurrently; results come back in call order.
    async fn run_tool_calls(&self, calls: &[ToolCallRequest]) -> Vec<ToolCallRecord> {
        let inputs: Vec<std::result::Result<Map<String, Value>, String>> = calls
            .iter()
            .map(|call| parse_arguments(&call.arguments))
            .collect();
        for (call, input) in calls.iter().zip(&inputs) {
            self.emit(StreamEvent::ToolUse {
                id: call.id.clone(),
                name: call.name.clone(),
                input: Value::Object(input.clone().unwrap_or_default()),
            });
        }
        join_all(
            calls
                .iter()
                .zip(inputs)
                .map(|(call, input)| self.run_tool_call(call, input)),
        )
        .await
    }

    async fn run_tool_call(
        &self,
        call: &ToolCallRequest,
        input: std::result::Result<Map<String, Value>, String>,
    ) -> ToolCallRecord {
        let tool = self
            .session
            .config
            .tools
            .iter()
            .find(|tool| tool.schema.name == call.name);
        let (outcome, input) = match (tool, input) {
            (None, input) => (
                ToolOutcome::failed(format!("Tool \"{}\" not found", call.name)),
                input.unwrap_or_default(),
            ),
            (Some(_), Err(problem)) => (ToolOutcome::Failure(problem), Map::new()),
            (Some(tool), Ok(input)) => {
                // Hook points: PreToolUse → PermissionRequest → permission → before-controls.
                let context = ToolContext {
                    tool_call_id: &call.id,
                    session_id: &self.session.id,
                    scope: self.scope,
                };
                let outcome =
                    tools::execute(&self.session.host, tool, input.clone(), context).await;
                // Hook points: after-controls → PostToolUse / PostToolUseFailure.
                (outcome, input)
            }
        };
        let (output, status) = match outcome {
            ToolOutcome::Success(output) => (output, CallStatus::Success),
            ToolOutcome::Failure(message) => (
                format!("Tool execution failed: {message}"),
                CallStatus::Error,
            ),
        };
        ToolCallRecord {
            id: call.id.clone(),
            name: call.name.clone(),
            input: Value::Object(input),
            output,
            status,
            mocked: None,
        }
    }
}

/// The model's argument text as a JSON object; empty text means no arguments.
fn parse_arguments(text: &str) -> std::result::Result<Map<String, Value>, String> {
    if text.trim().is_empty() {
        return Ok(Map::new());
    }
    match serde_json::from_str::<Value>(text) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(other) => Err(format!(
            "arguments must be a JSON object (got {})",
            describe(&other)
        )),
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
