//! One model call: the request a turn sends, and where it runs (HTTP exchanges on the workers).

use std::future::Future;
use std::sync::Arc;

use crate::agent::definition::Agent;
use crate::agent::events::StreamEvent;
use crate::agent::reader::EventSender;
use crate::agent::subagents::Child;
use crate::error::{Result, SdkError};
use crate::host::ScopeId;
use crate::model::{Message, Model, ModelReply, ModelRequest, ToolChoice};
use crate::offload::offload;

/// Runs a model exchange: an HTTP one on the workers, so its SSE parsing stays off the thread
/// that polls the run (the JS thread); anything else in place.
pub(super) async fn where_models_run<T: Send + 'static>(
    remote: bool,
    exchange: impl Future<Output = Result<T>> + Send + 'static,
) -> Result<T> {
    if !remote {
        return exchange.await;
    }
    offload(exchange)
        .await
        .unwrap_or_else(|error| Err(SdkError::model(format!("Model request task failed: {error}"))))
}

/// One model call over the conversation `messages`; content deltas are published as they come.
pub(super) struct ModelTurn {
    pub agent: Arc<Agent>,
    pub model: Arc<dyn Model>,
    pub messages: Arc<Vec<Arc<Message>>>,
    pub turn: u32,
    pub scope: ScopeId,
    pub events: EventSender,
    pub child: Option<Arc<Child>>,
    pub tool_choice: Option<ToolChoice>,
}

impl ModelTurn {
    pub(super) async fn call(self) -> Result<ModelReply> {
        let ModelTurn {
            agent,
            model,
            messages,
            turn,
            scope,
            events,
            child,
            tool_choice,
        } = self;
        let config = &agent.config;
        // A sub-agent has its own prompt and tools, and its text is its answer to the parent, not
        // part of the parent's stream.
        let (system_prompt, tools) = match &child {
            Some(child) => (child.system_prompt.as_deref(), child.tool_schemas.as_slice()),
            None => (config.system_prompt.as_deref(), agent.tool_schemas()),
        };
        if let Some(ToolChoice::Tool(name)) = &tool_choice {
            if !tools.iter().any(|tool| &tool.name == name) {
                let offered: Vec<&str> = tools.iter().map(|tool| tool.name.as_str()).collect();
                return Err(SdkError::config(format!(
                    "toolChoice names the tool \"{name}\", which the model is not offered (offered: {})",
                    if offered.is_empty() {
                        "none".to_string()
                    } else {
                        offered.join(", ")
                    }
                ))
                .at("toolChoice"));
            }
        }
        let request = ModelRequest {
            system_prompt,
            messages: &messages,
            tools,
            temperature: config.temperature,
            max_output_tokens: config.max_output_tokens,
            tool_choice: tool_choice.as_ref(),
            turn,
            scope,
        };
        let streams = child.is_none();
        let mut on_text = move |delta: &str| {
            if streams {
                events.send(StreamEvent::Content {
                    delta: delta.to_string(),
                });
            }
        };
        model.complete(request, &mut on_text).await
    }
}
