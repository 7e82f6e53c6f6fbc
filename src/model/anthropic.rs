//! Anthropic Messages (`POST {baseUrl}/v1/messages`): `tool_use` / `tool_result` blocks, SSE.

use std::collections::BTreeMap;

use futures::future::BoxFuture;
use serde::Deserialize;
use serde_json::{json, Map, Value};

use super::http::{self, Connection};
use super::sse::{parse_data, SseReader};
use super::{ContentPart, Message, Model, ModelReply, ModelRequest, TextSink, ToolCallRequest, Usage, UserContent};
use crate::error::{Result, SdkError};
use crate::ids;

pub const API_VERSION: &str = "2023-06-01";
/// Anthropic requires `max_tokens`; this is used when `maxOutputTokens` is not set.
pub const DEFAULT_MAX_TOKENS: u32 = 4096;

pub struct AnthropicClient {
    pub model: String,
    pub connection: Connection,
}

/// Converts the OpenAI-shaped conversation to Anthropic messages: tool calls become `tool_use`
/// blocks, tool messages `tool_result` blocks, and consecutive same-role turns are merged
/// (the API requires roles to alternate).
pub(crate) fn wire_messages(messages: &[std::sync::Arc<Message>]) -> Vec<Value> {
    let mut out: Vec<(&'static str, Vec<Value>)> = Vec::new();
    for message in messages {
        let (role, blocks) = match message.as_ref() {
            Message::User { content } => ("user", user_blocks(content)),
            Message::Assistant { content, tool_calls } => {
                let mut blocks = Vec::new();
                if let Some(text) = content.as_ref().filter(|text| !text.is_empty()) {
                    blocks.push(json!({"type": "text", "text": text}));
                }
                for call in tool_calls {
                    let input = serde_json::from_str::<Value>(&call.function.arguments)
                        .ok()
                        .filter(Value::is_object)
                        .unwrap_or_else(|| Value::Object(Map::new()));
                    blocks.push(json!({"type": "tool_use", "id": call.id, "name": call.function.name, "input": input}));
                }
                ("assistant", blocks)
            }
            Message::Tool {
                tool_call_id,
                content,
                is_error,
            } => {
                let mut block = json!({"type": "tool_result", "tool_use_id": tool_call_id, "content": content});
                if *is_error {
                    block["is_error"] = json!(true);
                }
                ("user", vec![block])
            }
        };
        match out.last_mut() {
            Some((last_role, last_blocks)) if *last_role == role => last_blocks.extend(blocks),
            _ => out.push((role, blocks)),
        }
    }
    out.into_iter()
        .map(|(role, content)| json!({"role": role, "content": content}))
        .collect()
}

fn user_blocks(content: &UserContent) -> Vec<Value> {
    match content {
        UserContent::Text(text) => vec![json!({"type": "text", "text": text})],
        UserContent::Parts(parts) => parts
            .iter()
            .map(|part| match part {
                ContentPart::Text { text } => json!({"type": "text", "text": text}),
                ContentPart::ImageUrl { image_url } => {
                    json!({"type": "image", "source": image_source(&image_url.url)})
                }
            })
            .collect(),
    }
}

/// `data:<media type>;base64,<data>` becomes a base64 source; anything else a URL source.
fn image_source(url: &str) -> Value {
    if let Some(rest) = url.strip_prefix("data:") {
        if let Some((media_type, data)) = rest.split_once(";base64,") {
            return json!({"type": "base64", "media_type": media_type, "data": data});
        }
    }
    json!({"type": "url", "url": url})
}

#[derive(Deserialize, Default)]
struct WireUsage {
    #[serde(default)]
    input_tokens: Option<u64>,
    #[serde(default)]
    output_tokens: Option<u64>,
}

#[derive(Deserialize)]
struct MessageResponse {
    #[serde(default)]
    content: Vec<Value>,
    #[serde(default)]
    usage: WireUsage,
}

#[derive(Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
enum StreamEvent {
    MessageStart {
        message: StartedMessage,
    },
    ContentBlockStart {
        index: usize,
        content_block: Value,
    },
    ContentBlockDelta {
        index: usize,
        delta: Value,
    },
    ContentBlockStop {},
    MessageDelta {
        #[serde(default)]
        usage: WireUsage,
    },
    MessageStop {},
    Ping {},
    Error {
        error: Value,
    },
}

#[derive(Deserialize)]
struct StartedMessage {
    #[serde(default)]
    usage: WireUsage,
}

impl AnthropicClient {
    async fn complete_inner(&self, request: ModelRequest<'_>, on_text: TextSink<'_>) -> Result<ModelReply> {
        let settings = &self.connection.settings;
        let url = http::endpoint(&self.connection.base_url, "v1/messages");
        let mut own = vec![("anthropic-version", API_VERSION.to_string())];
        if let Some(key) = self.connection.api_key.as_ref().filter(|key| !key.is_empty()) {
            own.push(("x-api-key", key.clone()));
        }
        let headers = http::header_map(&own, &settings.headers)?;
        let mut body = Map::new();
        body.insert("model".into(), json!(self.model));
        body.insert(
            "max_tokens".into(),
            json!(request.max_output_tokens.unwrap_or(DEFAULT_MAX_TOKENS)),
        );
        if let Some(system) = request.system_prompt {
            body.insert("system".into(), json!(system));
        }
        body.insert("messages".into(), Value::Array(wire_messages(request.messages)));
        if !request.tools.is_empty() {
            let tools = request
                .tools
                .iter()
                .map(|tool| {
                    let mut wire = Map::new();
                    wire.insert("name".into(), json!(tool.name));
                    if let Some(description) = &tool.description {
                        wire.insert("description".into(), json!(description));
                    }
                    wire.insert("input_schema".into(), tool.parameters.clone());
                    Value::Object(wire)
                })
                .collect();
            body.insert("tools".into(), Value::Array(tools));
        }
        if let Some(temperature) = request.temperature {
            body.insert("temperature".into(), json!(temperature));
        }
        body.insert("stream".into(), json!(settings.stream));
        let body = serde_json::to_vec(&body).map_err(|error| SdkError::model(error.to_string()))?;
        let opened = http::post(&url, headers, body, settings).await?;
        if settings.stream {
            read_stream(SseReader::new(opened), on_text).await
        } else {
            let bytes = tokio::time::timeout_at(opened.deadline, opened.response.bytes())
                .await
                .map_err(|_| http::timed_out(opened.timeout))?
                .map_err(|error| SdkError::model(format!("Model response broke off: {}", http::chain(&error))))?;
            let reply = parse_message(&bytes)?;
            if !reply.text.is_empty() {
                on_text(&reply.text);
            }
            Ok(reply)
        }
    }
}

impl Model for AnthropicClient {
    fn complete<'a>(&'a self, request: ModelRequest<'a>, on_text: TextSink<'a>) -> BoxFuture<'a, Result<ModelReply>> {
        Box::pin(self.complete_inner(request, on_text))
    }

    fn is_remote(&self) -> bool {
        true
    }
}

fn parse_message(bytes: &[u8]) -> Result<ModelReply> {
    let response: MessageResponse = serde_json::from_slice(bytes).map_err(|error| {
        SdkError::model(format!(
            "Model response is not a message: {error} in {}",
            http::excerpt(&String::from_utf8_lossy(bytes), 200)
        ))
    })?;
    let mut reply = ModelReply {
        usage: Usage::new(
            response.usage.input_tokens.unwrap_or(0),
            response.usage.output_tokens.unwrap_or(0),
        ),
        ..ModelReply::default()
    };
    for block in response.content {
        match block.get("type").and_then(Value::as_str) {
            Some("text") => reply
                .text
                .push_str(block.get("text").and_then(Value::as_str).unwrap_or("")),
            Some("tool_use") => reply.tool_calls.push(ToolCallRequest {
                id: block
                    .get("id")
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .unwrap_or_else(ids::call_id),
                name: block.get("name").and_then(Value::as_str).unwrap_or("").to_string(),
                arguments: block.get("input").map(Value::to_string).unwrap_or_else(|| "{}".into()),
            }),
            _ => {}
        }
    }
    Ok(reply)
}

async fn read_stream(mut reader: SseReader, on_text: TextSink<'_>) -> Result<ModelReply> {
    let mut reply = ModelReply::default();
    let mut input_tokens = 0;
    let mut output_tokens = 0;
    let mut tool_calls: BTreeMap<usize, ToolCallRequest> = BTreeMap::new();
    let mut stopped = false;
    while let Some(event) = reader.next().await? {
        if event.data.trim().is_empty() {
            continue;
        }
        match parse_data::<StreamEvent>(&event)? {
            StreamEvent::MessageStart { message } => {
                input_tokens = message.usage.input_tokens.unwrap_or(0);
                output_tokens = message.usage.output_tokens.unwrap_or(0);
            }
            StreamEvent::ContentBlockStart { index, content_block } => {
                if content_block.get("type").and_then(Value::as_str) == Some("tool_use") {
                    let field = |name: &str| {
                        content_block
                            .get(name)
                            .and_then(Value::as_str)
                            .unwrap_or("")
                            .to_string()
                    };
                    let id = Some(field("id"))
                        .filter(|id| !id.is_empty())
                        .unwrap_or_else(ids::call_id);
                    tool_calls.insert(
                        index,
                        ToolCallRequest {
                            id,
                            name: field("name"),
                            arguments: String::new(),
                        },
                    );
                } else if let Some(text) = content_block
                    .get("text")
                    .and_then(Value::as_str)
                    .filter(|t| !t.is_empty())
                {
                    on_text(text);
                    reply.text.push_str(text);
                }
            }
            StreamEvent::ContentBlockDelta { index, delta } => match delta.get("type").and_then(Value::as_str) {
                Some("text_delta") => {
                    if let Some(text) = delta.get("text").and_then(Value::as_str).filter(|t| !t.is_empty()) {
                        on_text(text);
                        reply.text.push_str(text);
                    }
                }
                Some("input_json_delta") => {
                    let fragment = delta.get("partial_json").and_then(Value::as_str).unwrap_or("");
                    match tool_calls.get_mut(&index) {
                        Some(call) => call.arguments.push_str(fragment),
                        None => {
                            return Err(SdkError::model(format!(
                            "Model stream is malformed: input for content block {index}, which is not a tool_use block"
                        )))
                        }
                    }
                }
                _ => {}
            },
            StreamEvent::MessageDelta { usage } => {
                if let Some(tokens) = usage.output_tokens {
                    output_tokens = tokens;
                }
                if let Some(tokens) = usage.input_tokens {
                    input_tokens = tokens;
                }
            }
            StreamEvent::MessageStop {} => {
                stopped = true;
                break;
            }
            StreamEvent::ContentBlockStop {} | StreamEvent::Ping {} => {}
            StreamEvent::Error { error } => {
                let message = error
                    .get("message")
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .unwrap_or_else(|| error.to_string());
                return Err(SdkError::model(format!("Model stream reported an error: {message}")));
            }
        }
    }
    if !stopped {
        return Err(SdkError::model("Model stream ended before the response was complete"));
    }
    reply.usage = Usage::new(input_tokens, output_tokens);
    reply.tool_calls = tool_calls
        .into_values()
        .map(|mut call| {
            if call.arguments.trim().is_empty() {
                call.arguments = "{}".into();
            }
            call
        })
        .collect();
    Ok(reply)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::AssistantToolCall;
    use std::sync::Arc;

    #[test]
    fn conversation_maps_to_alternating_anthropic_turns() {
        let messages: Vec<Arc<Message>> = vec![
            Arc::new(Message::User {
                content: UserContent::Text("list".into()),
            }),
            Arc::new(Message::Assistant {
                content: Some("looking".into()),
                tool_calls: vec![
                    AssistantToolCall::new("t1".into(), "ls".into(), "{\"dir\":\".\"}".into()),
                    AssistantToolCall::new("t2".into(), "ls".into(), "not json".into()),
                ],
            }),
            Arc::new(Message::Tool {
                tool_call_id: "t1".into(),
                content: "a.txt".into(),
                is_error: false,
            }),
            Arc::new(Message::Tool {
                tool_call_id: "t2".into(),
                content: "b.txt".into(),
                is_error: true,
            }),
            Arc::new(Message::User {
                content: UserContent::Parts(vec![ContentPart::ImageUrl {
                    image_url: crate::model::messages::ImageUrl {
                        url: "data:image/png;base64,QUJD".into(),
                        detail: None,
                    },
                }]),
            }),
        ];
        assert_eq!(
            Value::Array(wire_messages(&messages)),
            json!([
                {"role": "user", "content": [{"type": "text", "text": "list"}]},
                {"role": "assistant", "content": [
                    {"type": "text", "text": "looking"},
                    {"type": "tool_use", "id": "t1", "name": "ls", "input": {"dir": "."}},
                    {"type": "tool_use", "id": "t2", "name": "ls", "input": {}}
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "t1", "content": "a.txt"},
                    {"type": "tool_result", "tool_use_id": "t2", "content": "b.txt", "is_error": true},
                    {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "QUJD"}}
                ]}
            ])
        );
    }

    #[test]
    fn a_message_response_is_parsed() {
        let reply = parse_message(
            br#"{"content":[{"type":"text","text":"hi"},{"type":"tool_use","id":"tu","name":"ls","input":{"a":1}}],"usage":{"input_tokens":3,"output_tokens":4}}"#,
        )
        .unwrap();
        assert_eq!(reply.text, "hi");
        assert_eq!(reply.tool_calls[0].arguments, "{\"a\":1}");
        assert_eq!(reply.usage, Usage::new(3, 4));
    }
}
