//! Model clients. They turn a conversation into one assistant turn (text + tool calls + usage)
//! and know nothing of hooks or tools' execution. `provider.rs` lists the providers and reads
//! the options that choose one.

mod answer;
pub mod anthropic;
mod fragments;
mod http;
mod http_model;
pub mod messages;
pub mod openai;
pub mod provider;
pub mod scripted;
mod secrets;
mod sse;

use std::sync::Arc;

use futures::future::BoxFuture;
use serde::Serialize;
use serde_json::Value;

use crate::error::Result;
use crate::host::ScopeId;
pub use http::{Connection, HttpSettings, DEFAULT_MAX_RESPONSE_BYTES};
pub use messages::{AssistantToolCall, ContentPart, Message, UserContent};
pub use provider::{Endpoint, ModelChoice, Provider, ENV_VARS};
pub use secrets::{display_url, Secrets};

/// A tool as the model sees it.
#[derive(Debug, Clone, Serialize, PartialEq)]
pub struct ToolSchema {
    pub name: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Shared: every session's toolset, and each request made from it, keep the same schema.
    pub parameters: Arc<Value>,
}

/// Token counts; all three are totals for whatever they describe.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Usage {
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub total_tokens: u64,
}

impl Usage {
    pub fn new(input_tokens: u64, output_tokens: u64) -> Self {
        Usage {
            input_tokens,
            output_tokens,
            total_tokens: input_tokens + output_tokens,
        }
    }

    pub fn add(&mut self, other: Usage) {
        self.input_tokens += other.input_tokens;
        self.output_tokens += other.output_tokens;
        self.total_tokens += other.total_tokens;
    }
}

/// What one model call is asked.
pub struct ModelRequest<'a> {
    pub system_prompt: Option<&'a str>,
    pub messages: &'a [Arc<Message>],
    pub tools: &'a [ToolSchema],
    pub temperature: Option<f64>,
    pub max_output_tokens: Option<u32>,
    /// Whether and which tool the model must call; `None` sends nothing (the server's default).
    pub tool_choice: Option<&'a ToolChoice>,
    /// 1 for the first model call of a run.
    pub turn: u32,
    /// The host scope of the run, for models that call user functions.
    pub scope: ScopeId,
}

/// A tool call as the model asked for it; `arguments` is the raw JSON text.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCallRequest {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

/// `toolChoice`: what the model is told about calling tools (each wire format has its words).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ToolChoice {
    Auto,
    None,
    /// Some tool, the model picks which.
    Required,
    /// This tool.
    Tool(String),
}

impl ToolChoice {
    /// Forces a call: once the model has called a tool in a run, the run's later calls are
    /// `Auto`, or the loop would never end.
    pub fn forces_a_call(&self) -> bool {
        matches!(self, ToolChoice::Required | ToolChoice::Tool(_))
    }
}

/// Why the model stopped, in one vocabulary for both wire formats (OpenAI's words).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum FinishReason {
    /// A natural end (a stop sequence included).
    #[default]
    Stop,
    /// To run the tool calls it asked for.
    ToolCalls,
    /// The output limit (`maxOutputTokens` or the model's own) cut the answer.
    Length,
    /// The provider withheld the rest (a filter, a refusal).
    ContentFilter,
}

impl FinishReason {
    /// The server's word (either wire format's); an unknown or missing one is read from what
    /// the answer holds.
    pub fn read(word: Option<&str>, has_tool_calls: bool) -> Self {
        match word {
            Some("length" | "max_tokens" | "model_context_window_exceeded") => FinishReason::Length,
            Some("content_filter" | "refusal") => FinishReason::ContentFilter,
            _ if has_tool_calls => FinishReason::ToolCalls,
            _ => FinishReason::Stop,
        }
    }
}

/// One assistant turn.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ModelReply {
    pub text: String,
    pub tool_calls: Vec<ToolCallRequest>,
    pub usage: Usage,
    pub finish_reason: FinishReason,
}

/// Receives text deltas as they stream.
pub type TextSink<'a> = &'a mut (dyn FnMut(&str) + Send);

pub trait Model: Send + Sync {
    fn complete<'a>(&'a self, request: ModelRequest<'a>, on_text: TextSink<'a>) -> BoxFuture<'a, Result<ModelReply>>;

    /// Talks to a server: the loop runs it on the runtime's workers, never on the thread that
    /// polls the run (the JS thread), so streams are parsed off the JS thread.
    fn is_remote(&self) -> bool {
        false
    }
}
