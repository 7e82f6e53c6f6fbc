//! Anthropic Messages (`POST {baseUrl}/v1/messages`): `tool_use` / `tool_result` blocks, SSE.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{json, Map, Value};

use super::answer::Assembler;
use super::fragments::{decode, finish_text, push_string, push_text, Fragments};
use super::http::{self, Connection};
use super::http_model::{malformed, HttpModel};
use super::secrets::Secrets;
use super::sse::parse_data;
use super::{
    ContentPart, FinishReason, Message, ModelReply, ModelRequest, TextSink, ToolCallRequest, ToolChoice, Usage,
    UserContent,
};
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
struct MessageResponse<'a> {
    /// Required: a body without it (an error object answered with 200) is not a message.
    #[serde(borrow)]
    content: Vec<Block<'a>>,
    #[serde(default)]
    usage: WireUsage,
    stop_reason: Option<String>,
}

/// A content block, its text read raw (see `Fragments`).
#[derive(Deserialize)]
struct Block<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    id: Option<String>,
    name: Option<String>,
    #[serde(borrow)]
    text: Option<&'a RawValue>,
    input: Option<Value>,
}

/// One stream event. A struct rather than an enum tagged by `type`: serde buffers a tagged
/// enum's fields, and raw values do not survive that.
#[derive(Deserialize)]
struct StreamEvent<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    index: Option<usize>,
    message: Option<StartedMessage>,
    #[serde(borrow)]
    content_block: Option<Block<'a>>,
    #[serde(borrow)]
    delta: Option<EventDelta<'a>>,
    usage: Option<WireUsage>,
    error: Option<Value>,
}

#[derive(Deserialize)]
struct EventDelta<'a> {
    #[serde(rename = "type", borrow)]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow)]
    text: Option<&'a RawValue>,
    #[serde(borrow)]
    partial_json: Option<&'a RawValue>,
    /// `message_delta`'s.
    stop_reason: Option<String>,
}

#[derive(Deserialize)]
struct StartedMessage {
    #[serde(default)]
    usage: WireUsage,
}

/// A streamed message being put together from its events.
pub(crate) struct StreamAssembler {
    reply: ModelReply,
    text: Fragments,
    input_tokens: u64,
    output_tokens: u64,
    tool_calls: BTreeMap<usize, (ToolCallRequest, Fragments)>,
    stop_reason: Option<String>,
    stopped: bool,
    max: usize,
}

impl Assembler for StreamAssembler {
    fn new(max: usize) -> Self {
        StreamAssembler {
            reply: ModelReply::default(),
            text: Fragments::default(),
            input_tokens: 0,
            output_tokens: 0,
            tool_calls: BTreeMap::new(),
            stop_reason: None,
            stopped: false,
            max,
        }
    }

    /// `Ok(true)` at `message_stop`.
    fn event(&mut self, data: &str, secrets: &Secrets, on_text: TextSink<'_>) -> Result<bool> {
        if data.trim().is_empty() {
            return Ok(false);
        }
        let event: StreamEvent = parse_data(data, secrets)?;
        let index = event.index.unwrap_or(0);
        match event.kind.as_ref() {
            "message_start" => {
                let usage = event.message.map(|message| message.usage).unwrap_or_default();
                self.input_tokens = usage.input_tokens.unwrap_or(0);
                self.output_tokens = usage.output_tokens.unwrap_or(0);
            }
            "content_block_start" => {
                let Some(block) = event.content_block else {
                    return Ok(false);
                };
                if block.kind == "tool_use" {
                    let call = ToolCallRequest {
                        id: block.id.filter(|id| !id.is_empty()).unwrap_or_else(ids::call_id),
                        name: block.name.unwrap_or_default(),
                        arguments: String::new(),
                    };
                    self.tool_calls.insert(index, (call, Fragments::default()));
                } else {
                    push_text(&mut self.text, block.text, &mut self.reply.text, on_text)?;
                }
            }
            "content_block_delta" => {
                let Some(delta) = event.delta else { return Ok(false) };
                match delta.kind.as_deref() {
                    Some("text_delta") => push_text(&mut self.text, delta.text, &mut self.reply.text, on_text)?,
                    Some("input_json_delta") => {
                        let Some((call, arguments)) = self.tool_calls.get_mut(&index) else {
                            return Err(SdkError::model(format!(
                                "Model stream is malformed: input for content block {index}, which is not a tool_use block"
                            )));
                        };
                        push_string(arguments, delta.partial_json, &mut call.arguments)?;
                        if call.arguments.len() > self.max {
                            return Err(http::too_large("a tool call's arguments", self.max));
                        }
                    }
                    _ => {}
                }
            }
            "message_delta" => {
                if let Some(reason) = event.delta.and_then(|delta| delta.stop_reason) {
                    self.stop_reason = Some(reason);
                }
                let usage = event.usage.unwrap_or_default();
                if let Some(tokens) = usage.output_tokens {
                    self.output_tokens = tokens;
                }
                if let Some(tokens) = usage.input_tokens {
                    self.input_tokens = tokens;
                }
            }
            "message_stop" => {
                self.stopped = true;
                return Ok(true);
            }
            "error" => {
                let error = event.error.unwrap_or(Value::Null);
                let message = error
                    .get("message")
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .unwrap_or_else(|| error.to_string());
                return Err(SdkError::model(format!("Model stream reported an error: {message}")));
            }
            // content_block_stop, ping, and event types added after this was written.
            _ => {}
        }
        Ok(false)
    }

    fn finish(mut self, on_text: TextSink<'_>) -> Result<ModelReply> {
        if !self.stopped {
            return Err(SdkError::model("Model stream ended before the response was complete"));
        }
        finish_text(&mut self.text, &mut self.reply.text, on_text);
        self.reply.usage = Usage::new(self.input_tokens, self.output_tokens);
        self.reply.tool_calls = self
            .tool_calls
            .into_values()
            .map(|(mut call, mut arguments)| {
                arguments.finish(&mut call.arguments);
                if call.arguments.trim().is_empty() {
                    call.arguments = "{}".into();
                }
                call
            })
            .collect();
        self.reply.finish_reason = FinishReason::read(self.stop_reason.as_deref(), !self.reply.tool_calls.is_empty());
        Ok(self.reply)
    }
}

impl HttpModel for AnthropicClient {
    type Assembler = StreamAssembler;

    fn connection(&self) -> &Connection {
        &self.connection
    }

    /// `{baseUrl}/v1/messages`; a base URL that ends in `/v1` already (as `@ai-sdk/anthropic`'s,
    /// which Blade's sessions take) gets `/messages` only.
    fn url(&self) -> String {
        let versioned = reqwest::Url::parse(&self.connection.base_url)
            .map(|url| url.path().trim_end_matches('/').ends_with("/v1"))
            .unwrap_or(false);
        http::endpoint(
            &self.connection.base_url,
            if versioned { "messages" } else { "v1/messages" },
        )
    }

    fn headers(&self) -> Vec<(&'static str, String)> {
        let version = self.connection.settings.api_version.as_deref().unwrap_or(API_VERSION);
        let mut own = vec![("anthropic-version", version.to_string())];
        if let Some(key) = self.connection.api_key.as_ref().filter(|key| !key.is_empty()) {
            own.push(("x-api-key", key.clone()));
        }
        own
    }

    fn body<'a>(&'a self, request: &ModelRequest<'a>) -> impl Serialize + 'a {
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
                    wire.insert("input_schema".into(), Value::clone(&tool.parameters));
                    Value::Object(wire)
                })
                .collect();
            body.insert("tools".into(), Value::Array(tools));
        }
        if let Some(choice) = request.tool_choice.filter(|_| !request.tools.is_empty()) {
            let wire = match choice {
                ToolChoice::Auto => json!({"type": "auto"}),
                ToolChoice::None => json!({"type": "none"}),
                ToolChoice::Required => json!({"type": "any"}),
                ToolChoice::Tool(name) => json!({"type": "tool", "name": name}),
            };
            body.insert("tool_choice".into(), wire);
        }
        if let Some(temperature) = request.temperature {
            body.insert("temperature".into(), json!(temperature));
        }
        body.insert("stream".into(), json!(self.connection.settings.stream));
        body
    }

    fn parse(bytes: &[u8], secrets: &Secrets) -> Result<ModelReply> {
        parse_message(bytes, secrets)
    }
}

fn parse_message(bytes: &[u8], secrets: &Secrets) -> Result<ModelReply> {
    let malformed = malformed("a message", bytes, secrets);
    let response: MessageResponse = serde_json::from_slice(bytes).map_err(|error| malformed(error.to_string()))?;
    let mut reply = ModelReply {
        usage: Usage::new(
            response.usage.input_tokens.unwrap_or(0),
            response.usage.output_tokens.unwrap_or(0),
        ),
        ..ModelReply::default()
    };
    for block in response.content {
        match block.kind.as_ref() {
            "text" => {
                if let Some(raw) = block.text.filter(|raw| raw.get() != "null") {
                    reply.text.push_str(&decode(raw).map_err(malformed)?);
                }
            }
            "tool_use" => reply.tool_calls.push(ToolCallRequest {
                id: block.id.unwrap_or_else(ids::call_id),
                name: block.name.unwrap_or_default(),
                arguments: block
                    .input
                    .map(|input| input.to_string())
                    .unwrap_or_else(|| "{}".into()),
            }),
            _ => {}
        }
    }
    reply.finish_reason = FinishReason::read(response.stop_reason.as_deref(), !reply.tool_calls.is_empty());
    Ok(reply)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::fragments::{literal, utf16_pieces};
    use crate::model::sse::testing::{self, cut};
    use crate::model::AssistantToolCall;
    use proptest::prelude::*;
    use std::sync::Arc;

    fn assemble(datas: &[String], max: usize) -> (Result<ModelReply>, Vec<String>) {
        testing::assemble::<StreamAssembler>(datas, max)
    }

    fn text_delta(literal: &str) -> String {
        format!(r#"{{"type":"content_block_delta","index":0,"delta":{{"type":"text_delta","text":{literal}}}}}"#)
    }

    fn json_delta(index: usize, literal: &str) -> String {
        format!(
            r#"{{"type":"content_block_delta","index":{index},"delta":{{"type":"input_json_delta","partial_json":{literal}}}}}"#
        )
    }

    fn tool_start(index: usize, name: &str) -> String {
        format!(
            r#"{{"type":"content_block_start","index":{index},"content_block":{{"type":"tool_use","id":"tu{index}","name":"{name}","input":{{}}}}}}"#
        )
    }

    const START: &str = r#"{"type":"message_start","message":{"usage":{"input_tokens":3,"output_tokens":1}}}"#;
    const STOP: &str = r#"{"type":"message_stop"}"#;

    #[test]
    fn a_surrogate_pair_split_across_events_is_joined_in_text_and_input() {
        let (reply, deltas) = assemble(
            &[
                START.into(),
                r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#.into(),
                text_delta(r#""a\ud83d""#),
                text_delta(r#""\ude00""#),
                text_delta(r#""\ude00""#),
                tool_start(1, "ls"),
                json_delta(1, r#""{\"q\":\"\ud83d""#),
                json_delta(1, r#""\ude00\"}""#),
                r#"{"type":"future_event_type"}"#.into(),
                STOP.into(),
            ],
            100,
        );
        let reply = reply.unwrap();
        assert_eq!(deltas, ["a", "😀", "\u{FFFD}"]);
        assert_eq!(reply.text, "a😀\u{FFFD}");
        assert_eq!(reply.tool_calls[0].arguments, "{\"q\":\"😀\"}");
        assert_eq!(reply.usage, Usage::new(3, 1));
    }

    #[test]
    fn input_over_the_cap_fails_the_turn_and_input_without_a_tool_block_is_malformed() {
        let (reply, _) = assemble(&[tool_start(0, "ls"), json_delta(0, r#""{\"k\":\"0123456789\"}""#)], 16);
        assert_eq!(
            reply.unwrap_err().message,
            "Model answer is too large: a tool call's arguments is longer than 16 bytes (advanced.connection.maxResponseBytes)"
        );
        let (reply, _) = assemble(&[json_delta(2, r#""{}""#)], 16);
        assert_eq!(
            reply.unwrap_err().message,
            "Model stream is malformed: input for content block 2, which is not a tool_use block"
        );
    }

    /// The SSE body of a message whose text and each call's input come in the given pieces.
    fn body(text: &[Vec<u16>], calls: &[(String, Vec<Vec<u16>>)]) -> String {
        let mut events = vec![START.to_string()];
        events.extend(text.iter().map(|piece| text_delta(&literal(piece))));
        for (n, (name, pieces)) in calls.iter().enumerate() {
            events.push(tool_start(n + 1, name));
            events.extend(pieces.iter().map(|piece| json_delta(n + 1, &literal(piece))));
        }
        events
            .push(r#"{"type":"message_delta","delta":{"stop_reason":"end_turn"},"usage":{"output_tokens":9}}"#.into());
        events.push(STOP.into());
        events
            .iter()
            .map(|event| format!("event: x\ndata: {event}\n\n"))
            .collect()
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        #[test]
        fn arbitrary_events_and_bytes_never_panic_the_assembler(
            datas in proptest::collection::vec(
                prop_oneof![
                    Just(START.to_string()),
                    Just(STOP.to_string()),
                    Just(tool_start(1, "t")),
                    Just(text_delta(r#""\ud83d""#)),
                    Just(json_delta(1, r#""\ude00""#)),
                    Just(json_delta(1, "7")),
                    Just(r#"{"type":"error","error":{"message":"overloaded"}}"#.to_string()),
                    "[ -~]{0,30}",
                ],
                0..8,
            ),
            bytes in proptest::collection::vec(any::<u8>(), 0..200),
            splits in proptest::collection::vec(any::<usize>(), 0..6),
        ) {
            let _ = assemble(&datas, 64);
            let _ = testing::assemble_bytes::<StreamAssembler>(&cut(&bytes, &splits), 64);
        }

        #[test]
        fn cutting_a_valid_stream_anywhere_changes_nothing(
            text in utf16_pieces(),
            calls in proptest::collection::vec(("[a-z]{1,5}", utf16_pieces()), 0..3),
            splits in proptest::collection::vec(any::<usize>(), 0..12),
        ) {
            let body = body(&text, &calls);
            let whole = testing::assemble_bytes::<StreamAssembler>(&[body.as_bytes()], 1 << 16).unwrap();
            prop_assert_eq!(&whole.text, &String::from_utf16_lossy(&text.concat()));
            prop_assert_eq!(whole.tool_calls.len(), calls.len());
            for (call, (name, pieces)) in whole.tool_calls.iter().zip(&calls) {
                let input = String::from_utf16_lossy(&pieces.concat());
                prop_assert_eq!(&call.name, name);
                prop_assert_eq!(call.arguments.as_str(), if input.trim().is_empty() { "{}" } else { &input });
            }
            prop_assert_eq!(whole.usage, Usage::new(3, 9));
            let cut_up = testing::assemble_bytes::<StreamAssembler>(&cut(body.as_bytes(), &splits), 1 << 16).unwrap();
            prop_assert_eq!(cut_up, whole);
        }
    }

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
            &Secrets::default(),
        )
        .unwrap();
        assert_eq!(reply.text, "hi");
        assert_eq!(reply.tool_calls[0].arguments, "{\"a\":1}");
        assert_eq!(reply.usage, Usage::new(3, 4));
    }
}
