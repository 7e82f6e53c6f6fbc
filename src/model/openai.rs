//! OpenAI Chat Completions (`POST {baseUrl}/chat/completions`), streamed or not. Serves openai,
//! openai-compatible servers (vLLM, llama.cpp, Ollama) and deepseek.

use std::collections::BTreeMap;

use futures::future::BoxFuture;
use serde::{Deserialize, Serialize};

use super::http::{self, Connection};
use super::sse::{parse_data, SseReader};
use super::{Message, Model, ModelReply, ModelRequest, TextSink, ToolCallRequest, ToolSchema, Usage};
use crate::error::{Result, SdkError};
use crate::ids;

pub struct OpenAiClient {
    pub model: String,
    pub connection: Connection,
    pub organization: Option<String>,
    pub project: Option<String>,
    /// `max_completion_tokens` (api.openai.com) instead of the older `max_tokens`.
    pub completion_tokens_field: bool,
}

#[derive(Serialize)]
#[serde(untagged)]
enum WireMessage<'a> {
    System { role: &'static str, content: &'a str },
    Chat(&'a Message),
}

#[derive(Serialize)]
struct WireTool<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    function: &'a ToolSchema,
}

#[derive(Serialize)]
struct StreamOptions {
    include_usage: bool,
}

#[derive(Serialize)]
struct Body<'a> {
    model: &'a str,
    messages: Vec<WireMessage<'a>>,
    #[serde(skip_serializing_if = "Vec::is_empty")]
    tools: Vec<WireTool<'a>>,
    #[serde(skip_serializing_if = "Option::is_none")]
    temperature: Option<f64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_tokens: Option<u32>,
    #[serde(skip_serializing_if = "Option::is_none")]
    max_completion_tokens: Option<u32>,
    stream: bool,
    #[serde(skip_serializing_if = "Option::is_none")]
    stream_options: Option<StreamOptions>,
}

#[derive(Deserialize, Default)]
struct WireUsage {
    #[serde(default)]
    prompt_tokens: u64,
    #[serde(default)]
    completion_tokens: u64,
}

impl From<WireUsage> for Usage {
    fn from(usage: WireUsage) -> Self {
        Usage::new(usage.prompt_tokens, usage.completion_tokens)
    }
}

#[derive(Deserialize)]
struct Completion {
    #[serde(default)]
    choices: Vec<CompletionChoice>,
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
struct CompletionChoice {
    message: CompletionMessage,
}

#[derive(Deserialize)]
struct CompletionMessage {
    content: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<CompletionToolCall>>,
}

#[derive(Deserialize)]
struct CompletionToolCall {
    id: Option<String>,
    function: CompletionFunction,
}

#[derive(Deserialize)]
struct CompletionFunction {
    name: String,
    #[serde(default)]
    arguments: Option<String>,
}

#[derive(Deserialize)]
struct Chunk {
    #[serde(default)]
    choices: Vec<ChunkChoice>,
    usage: Option<WireUsage>,
    error: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct ChunkChoice {
    #[serde(default)]
    delta: Option<Delta>,
    finish_reason: Option<String>,
}

#[derive(Deserialize, Default)]
struct Delta {
    content: Option<String>,
    #[serde(default)]
    tool_calls: Option<Vec<DeltaToolCall>>,
}

#[derive(Deserialize)]
struct DeltaToolCall {
    index: Option<usize>,
    id: Option<String>,
    function: Option<DeltaFunction>,
}

#[derive(Deserialize)]
struct DeltaFunction {
    name: Option<String>,
    arguments: Option<String>,
}

/// Tool calls streamed in fragments, assembled by their `index`.
#[derive(Default)]
pub(crate) struct ToolCallAssembler {
    calls: BTreeMap<usize, ToolCallRequest>,
}

impl ToolCallAssembler {
    fn push(&mut self, position: usize, fragment: DeltaToolCall) {
        let index = fragment.index.unwrap_or(position);
        let call = self.calls.entry(index).or_insert_with(|| ToolCallRequest {
            id: String::new(),
            name: String::new(),
            arguments: String::new(),
        });
        if let Some(id) = fragment.id.filter(|id| !id.is_empty()) {
            call.id = id;
        }
        if let Some(function) = fragment.function {
            if let Some(name) = function.name {
                call.name.push_str(&name);
            }
            if let Some(arguments) = function.arguments {
                call.arguments.push_str(&arguments);
            }
        }
    }

    fn finish(self) -> Vec<ToolCallRequest> {
        self.calls
            .into_values()
            .map(|mut call| {
                if call.id.is_empty() {
                    call.id = ids::call_id();
                }
                call
            })
            .collect()
    }
}

impl OpenAiClient {
    fn body<'a>(&'a self, request: &ModelRequest<'a>) -> Body<'a> {
        let stream = self.connection.settings.stream;
        let mut messages = Vec::with_capacity(request.messages.len() + 1);
        if let Some(system) = request.system_prompt {
            messages.push(WireMessage::System {
                role: "system",
                content: system,
            });
        }
        messages.extend(request.messages.iter().map(|message| WireMessage::Chat(message)));
        let (max_tokens, max_completion_tokens) = if self.completion_tokens_field {
            (None, request.max_output_tokens)
        } else {
            (request.max_output_tokens, None)
        };
        Body {
            model: &self.model,
            messages,
            tools: request
                .tools
                .iter()
                .map(|function| WireTool {
                    kind: "function",
                    function,
                })
                .collect(),
            temperature: request.temperature,
            max_tokens,
            max_completion_tokens,
            stream,
            stream_options: stream.then_some(StreamOptions { include_usage: true }),
        }
    }

    async fn complete_inner(&self, request: ModelRequest<'_>, on_text: TextSink<'_>) -> Result<ModelReply> {
        let url = http::endpoint(&self.connection.base_url, "chat/completions");
        let mut own = Vec::new();
        if let Some(key) = self.connection.api_key.as_ref().filter(|key| !key.is_empty()) {
            own.push(("authorization", format!("Bearer {key}")));
        }
        if let Some(organization) = &self.organization {
            own.push(("openai-organization", organization.clone()));
        }
        if let Some(project) = &self.project {
            own.push(("openai-project", project.clone()));
        }
        let headers = http::header_map(&own, &self.connection.settings.headers)?;
        let body = serde_json::to_vec(&self.body(&request)).map_err(|error| SdkError::model(error.to_string()))?;
        let opened = http::post(&url, headers, body, &self.connection.settings).await?;
        if self.connection.settings.stream {
            read_stream(SseReader::new(opened), on_text).await
        } else {
            let bytes = tokio::time::timeout_at(opened.deadline, opened.response.bytes())
                .await
                .map_err(|_| http::timed_out(opened.timeout))?
                .map_err(|error| SdkError::model(format!("Model response broke off: {}", http::chain(&error))))?;
            let reply = parse_completion(&bytes)?;
            if !reply.text.is_empty() {
                on_text(&reply.text);
            }
            Ok(reply)
        }
    }
}

impl Model for OpenAiClient {
    fn complete<'a>(&'a self, request: ModelRequest<'a>, on_text: TextSink<'a>) -> BoxFuture<'a, Result<ModelReply>> {
        Box::pin(self.complete_inner(request, on_text))
    }

    fn is_remote(&self) -> bool {
        true
    }
}

fn parse_completion(bytes: &[u8]) -> Result<ModelReply> {
    let completion: Completion = serde_json::from_slice(bytes).map_err(|error| {
        SdkError::model(format!(
            "Model response is not a chat completion: {error} in {}",
            http::excerpt(&String::from_utf8_lossy(bytes), 200)
        ))
    })?;
    let usage = completion.usage.map(Usage::from).unwrap_or_default();
    let Some(choice) = completion.choices.into_iter().next() else {
        return Err(SdkError::model("Model response has no choices"));
    };
    let tool_calls = choice
        .message
        .tool_calls
        .unwrap_or_default()
        .into_iter()
        .map(|call| ToolCallRequest {
            id: call.id.filter(|id| !id.is_empty()).unwrap_or_else(ids::call_id),
            name: call.function.name,
            arguments: call.function.arguments.unwrap_or_default(),
        })
        .collect();
    Ok(ModelReply {
        text: choice.message.content.unwrap_or_default(),
        tool_calls,
        usage,
    })
}

async fn read_stream(mut reader: SseReader, on_text: TextSink<'_>) -> Result<ModelReply> {
    let mut reply = ModelReply::default();
    let mut tool_calls = ToolCallAssembler::default();
    let mut finished = false;
    while let Some(event) = reader.next().await? {
        if event.data.trim() == "[DONE]" {
            finished = true;
            break;
        }
        if event.data.trim().is_empty() {
            continue;
        }
        let chunk: Chunk = parse_data(&event)?;
        if let Some(error) = chunk.error {
            let message = error
                .get("message")
                .and_then(|message| message.as_str())
                .map(str::to_string)
                .unwrap_or_else(|| error.to_string());
            return Err(SdkError::model(format!("Model stream reported an error: {message}")));
        }
        if let Some(usage) = chunk.usage {
            reply.usage = usage.into();
        }
        for choice in chunk.choices {
            if choice.finish_reason.is_some() {
                finished = true;
            }
            let Some(delta) = choice.delta else { continue };
            if let Some(text) = delta.content.filter(|text| !text.is_empty()) {
                on_text(&text);
                reply.text.push_str(&text);
            }
            for (position, fragment) in delta.tool_calls.unwrap_or_default().into_iter().enumerate() {
                tool_calls.push(position, fragment);
            }
        }
    }
    if !finished {
        return Err(SdkError::model("Model stream ended before the response was complete"));
    }
    reply.tool_calls = tool_calls.finish();
    Ok(reply)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fragment(value: serde_json::Value) -> DeltaToolCall {
        serde_json::from_value(value).unwrap()
    }

    #[test]
    fn tool_call_fragments_are_assembled_by_index() {
        let mut assembler = ToolCallAssembler::default();
        assembler.push(
            0,
            fragment(json!({"index": 0, "id": "a", "function": {"name": "read", "arguments": "{\"pa"}})),
        );
        assembler.push(
            0,
            fragment(json!({"index": 1, "id": "b", "function": {"name": "list", "arguments": ""}})),
        );
        assembler.push(
            0,
            fragment(json!({"index": 0, "function": {"arguments": "th\":\"x\"}"}})),
        );
        assembler.push(0, fragment(json!({"index": 1, "function": {"arguments": "{}"}})));
        let calls = assembler.finish();
        assert_eq!(calls.len(), 2);
        assert_eq!(
            (
                calls[0].id.as_str(),
                calls[0].name.as_str(),
                calls[0].arguments.as_str()
            ),
            ("a", "read", "{\"path\":\"x\"}")
        );
        assert_eq!(
            (
                calls[1].id.as_str(),
                calls[1].name.as_str(),
                calls[1].arguments.as_str()
            ),
            ("b", "list", "{}")
        );
    }

    #[test]
    fn a_call_without_an_id_gets_one() {
        let mut assembler = ToolCallAssembler::default();
        assembler.push(0, fragment(json!({"function": {"name": "read", "arguments": "{}"}})));
        let calls = assembler.finish();
        assert!(calls[0].id.starts_with("call_"));
    }

    #[test]
    fn a_completion_is_parsed_with_usage_and_tool_calls() {
        let reply = parse_completion(
            br#"{"choices":[{"message":{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"read","arguments":"{}"}}]}}],"usage":{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12}}"#,
        )
        .unwrap();
        assert_eq!(reply.text, "");
        assert_eq!(reply.tool_calls[0].name, "read");
        assert_eq!(reply.usage, Usage::new(5, 7));
    }

    #[test]
    fn a_body_that_is_not_a_completion_is_a_model_error() {
        let error = parse_completion(b"<html>").unwrap_err();
        assert!(
            error.message.starts_with("Model response is not a chat completion"),
            "{}",
            error.message
        );
    }
}
