//! OpenAI Chat Completions (`POST {baseUrl}/chat/completions`), streamed or not. Serves openai,
//! openai-compatible servers (vLLM, llama.cpp, Ollama) and deepseek.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use serde_json::value::RawValue;

use super::answer::Assembler;
use super::fragments::{decode, finish_text, push_string, push_text, Fragments};
use super::http::{self, Connection};
use super::http_model::{malformed, HttpModel};
use super::messages::AssistantToolCall;
use super::secrets::Secrets;
use super::sse::parse_data;
use super::{
    FinishReason, Message, ModelReply, ModelRequest, TextSink, ToolCallRequest, ToolChoice, ToolSchema, Usage,
};
use crate::error::{Result, SdkError};
use crate::ids;

pub struct OpenAiClient {
    pub model: String,
    pub connection: Connection,
    pub organization: Option<String>,
    pub project: Option<String>,
    /// `max_completion_tokens` (api.openai.com) instead of the older `max_tokens`.
    pub completion_tokens_field: bool,
    /// The key in an `api-key` header, not `Authorization: Bearer` (Azure).
    pub key_header: bool,
}

#[derive(Serialize)]
#[serde(untagged)]
enum WireMessage<'a> {
    System {
        role: &'static str,
        content: &'a str,
    },
    /// An assistant turn with tool calls and no text goes with `content: ""`: OpenAI accepts it,
    /// and servers that validate `content` as a string (llama.cpp's) refuse the `null` that
    /// `agent.messages` shows.
    Assistant {
        role: &'static str,
        content: &'a str,
        #[serde(skip_serializing_if = "<[_]>::is_empty")]
        tool_calls: &'a [AssistantToolCall],
    },
    Chat(&'a Message),
}

impl<'a> WireMessage<'a> {
    fn of(message: &'a Message) -> Self {
        match message {
            Message::Assistant {
                content: None,
                tool_calls,
            } => WireMessage::Assistant {
                role: "assistant",
                content: "",
                tool_calls,
            },
            other => WireMessage::Chat(other),
        }
    }
}

/// `tool_choice` as Chat Completions spells it.
#[derive(Serialize)]
#[serde(untagged)]
enum WireToolChoice<'a> {
    Word(&'static str),
    Function {
        #[serde(rename = "type")]
        kind: &'static str,
        function: FunctionName<'a>,
    },
}

#[derive(Serialize)]
struct FunctionName<'a> {
    name: &'a str,
}

impl<'a> WireToolChoice<'a> {
    fn of(choice: &'a ToolChoice) -> Self {
        match choice {
            ToolChoice::Auto => WireToolChoice::Word("auto"),
            ToolChoice::None => WireToolChoice::Word("none"),
            ToolChoice::Required => WireToolChoice::Word("required"),
            ToolChoice::Tool(name) => WireToolChoice::Function {
                kind: "function",
                function: FunctionName { name },
            },
        }
    }
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
    tool_choice: Option<WireToolChoice<'a>>,
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

// Text and arguments are read raw and decoded by `Fragments`: a stream may cut a surrogate
// pair between two chunks, which serde_json would refuse.
#[derive(Deserialize)]
struct Completion<'a> {
    #[serde(default, borrow)]
    choices: Vec<CompletionChoice<'a>>,
    usage: Option<WireUsage>,
}

#[derive(Deserialize)]
struct CompletionChoice<'a> {
    #[serde(borrow)]
    message: CompletionMessage<'a>,
    finish_reason: Option<String>,
}

#[derive(Deserialize)]
struct CompletionMessage<'a> {
    #[serde(borrow)]
    content: Option<&'a RawValue>,
    #[serde(default, borrow)]
    tool_calls: Option<Vec<CompletionToolCall<'a>>>,
}

#[derive(Deserialize)]
struct CompletionToolCall<'a> {
    id: Option<String>,
    #[serde(borrow)]
    function: CompletionFunction<'a>,
}

#[derive(Deserialize)]
struct CompletionFunction<'a> {
    name: String,
    #[serde(default, borrow)]
    arguments: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct Chunk<'a> {
    #[serde(default, borrow)]
    choices: Vec<ChunkChoice<'a>>,
    usage: Option<WireUsage>,
    error: Option<serde_json::Value>,
}

#[derive(Deserialize)]
struct ChunkChoice<'a> {
    #[serde(default, borrow)]
    delta: Option<Delta<'a>>,
    finish_reason: Option<String>,
}

#[derive(Deserialize, Default)]
struct Delta<'a> {
    #[serde(borrow)]
    content: Option<&'a RawValue>,
    #[serde(default, borrow)]
    tool_calls: Option<Vec<DeltaToolCall<'a>>>,
}

#[derive(Deserialize)]
struct DeltaToolCall<'a> {
    index: Option<usize>,
    id: Option<String>,
    #[serde(borrow)]
    function: Option<DeltaFunction<'a>>,
}

#[derive(Deserialize)]
struct DeltaFunction<'a> {
    name: Option<String>,
    #[serde(borrow)]
    arguments: Option<&'a RawValue>,
}

/// Tool calls streamed in fragments, assembled by their `index`; each call's arguments are
/// capped.
pub(crate) struct ToolCallAssembler {
    calls: BTreeMap<usize, (ToolCallRequest, Fragments)>,
    max: usize,
}

impl ToolCallAssembler {
    pub fn new(max: usize) -> Self {
        ToolCallAssembler {
            calls: BTreeMap::new(),
            max,
        }
    }

    fn push(&mut self, position: usize, fragment: DeltaToolCall<'_>) -> Result<()> {
        let index = fragment.index.unwrap_or(position);
        let (call, arguments) = self.calls.entry(index).or_insert_with(|| {
            let call = ToolCallRequest {
                id: String::new(),
                name: String::new(),
                arguments: String::new(),
            };
            (call, Fragments::default())
        });
        if let Some(id) = fragment.id.filter(|id| !id.is_empty()) {
            call.id = id;
        }
        if let Some(function) = fragment.function {
            // Set, not appended, as the OpenAI SDKs do: servers repeat the name in every
            // delta (llama.cpp), none known sends it in pieces.
            if let Some(name) = function.name.filter(|name| !name.is_empty()) {
                call.name = name;
            }
            push_string(arguments, function.arguments, &mut call.arguments)?;
            if call.arguments.len() > self.max {
                return Err(http::too_large("a tool call's arguments", self.max));
            }
        }
        Ok(())
    }

    fn finish(self) -> Vec<ToolCallRequest> {
        self.calls
            .into_values()
            .map(|(mut call, mut arguments)| {
                arguments.finish(&mut call.arguments);
                if call.id.is_empty() {
                    call.id = ids::call_id();
                }
                call
            })
            .collect()
    }
}

/// A streamed completion being put together from its events.
pub(crate) struct StreamAssembler {
    reply: ModelReply,
    text: Fragments,
    tool_calls: ToolCallAssembler,
    finished: bool,
    finish_reason: Option<String>,
}

impl Assembler for StreamAssembler {
    fn new(max: usize) -> Self {
        StreamAssembler {
            reply: ModelReply::default(),
            text: Fragments::default(),
            tool_calls: ToolCallAssembler::new(max),
            finished: false,
            finish_reason: None,
        }
    }

    /// `Ok(true)` at `[DONE]`.
    fn event(&mut self, data: &str, secrets: &Secrets, on_text: TextSink<'_>) -> Result<bool> {
        let data = data.trim();
        if data == "[DONE]" {
            self.finished = true;
            return Ok(true);
        }
        if data.is_empty() {
            return Ok(false);
        }
        let chunk: Chunk = parse_data(data, secrets)?;
        if let Some(error) = chunk.error {
            let message = error
                .get("message")
                .and_then(|message| message.as_str())
                .map(str::to_string)
                .unwrap_or_else(|| error.to_string());
            return Err(SdkError::model(format!("Model stream reported an error: {message}")));
        }
        if let Some(usage) = chunk.usage {
            self.reply.usage = usage.into();
        }
        for choice in chunk.choices {
            if choice.finish_reason.is_some() {
                self.finished = true;
                self.finish_reason = choice.finish_reason;
            }
            let Some(delta) = choice.delta else { continue };
            push_text(&mut self.text, delta.content, &mut self.reply.text, on_text)?;
            for (position, fragment) in delta.tool_calls.unwrap_or_default().into_iter().enumerate() {
                self.tool_calls.push(position, fragment)?;
            }
        }
        Ok(false)
    }

    fn finish(mut self, on_text: TextSink<'_>) -> Result<ModelReply> {
        if !self.finished {
            return Err(SdkError::model("Model stream ended before the response was complete"));
        }
        finish_text(&mut self.text, &mut self.reply.text, on_text);
        self.reply.tool_calls = self.tool_calls.finish();
        self.reply.finish_reason = FinishReason::read(self.finish_reason.as_deref(), !self.reply.tool_calls.is_empty());
        Ok(self.reply)
    }
}

impl HttpModel for OpenAiClient {
    type Assembler = StreamAssembler;

    fn connection(&self) -> &Connection {
        &self.connection
    }

    fn url(&self) -> String {
        let url = http::endpoint(&self.connection.base_url, "chat/completions");
        match &self.connection.settings.api_version {
            Some(version) => http::with_query(&url, "api-version", version),
            None => url,
        }
    }

    fn headers(&self) -> Vec<(&'static str, String)> {
        let mut own = Vec::new();
        if let Some(key) = self.connection.api_key.as_ref().filter(|key| !key.is_empty()) {
            if self.key_header {
                own.push(("api-key", key.clone()));
            } else {
                own.push(("authorization", format!("Bearer {key}")));
            }
        }
        if let Some(organization) = &self.organization {
            own.push(("openai-organization", organization.clone()));
        }
        if let Some(project) = &self.project {
            own.push(("openai-project", project.clone()));
        }
        own
    }

    fn body<'a>(&'a self, request: &ModelRequest<'a>) -> impl Serialize + 'a {
        let stream = self.connection.settings.stream;
        let mut messages = Vec::with_capacity(request.messages.len() + 1);
        if let Some(system) = request.system_prompt {
            messages.push(WireMessage::System {
                role: "system",
                content: system,
            });
        }
        messages.extend(request.messages.iter().map(|message| WireMessage::of(message)));
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
            // Without tools there is nothing to choose (OpenAI refuses the field then).
            tool_choice: request
                .tool_choice
                .filter(|_| !request.tools.is_empty())
                .map(WireToolChoice::of),
            temperature: request.temperature,
            max_tokens,
            max_completion_tokens,
            stream,
            stream_options: stream.then_some(StreamOptions { include_usage: true }),
        }
    }

    fn parse(bytes: &[u8], secrets: &Secrets) -> Result<ModelReply> {
        parse_completion(bytes, secrets)
    }
}

fn parse_completion(bytes: &[u8], secrets: &Secrets) -> Result<ModelReply> {
    let malformed = malformed("a chat completion", bytes, secrets);
    let completion: Completion = serde_json::from_slice(bytes).map_err(|error| malformed(error.to_string()))?;
    let usage = completion.usage.map(Usage::from).unwrap_or_default();
    let Some(choice) = completion.choices.into_iter().next() else {
        return Err(SdkError::model("Model response has no choices"));
    };
    let text = |raw: Option<&RawValue>| match raw {
        Some(raw) if raw.get() != "null" => decode(raw).map_err(malformed),
        _ => Ok(String::new()),
    };
    let mut tool_calls = Vec::new();
    for call in choice.message.tool_calls.unwrap_or_default() {
        tool_calls.push(ToolCallRequest {
            id: call.id.filter(|id| !id.is_empty()).unwrap_or_else(ids::call_id),
            name: call.function.name,
            arguments: text(call.function.arguments)?,
        });
    }
    Ok(ModelReply {
        text: text(choice.message.content)?,
        finish_reason: FinishReason::read(choice.finish_reason.as_deref(), !tool_calls.is_empty()),
        tool_calls,
        usage,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::fragments::{literal, utf16_pieces};
    use crate::model::sse::testing::{self, cut};
    use proptest::prelude::*;
    use serde_json::json;

    fn assemble(datas: &[String], max: usize) -> (Result<ModelReply>, Vec<String>) {
        testing::assemble::<StreamAssembler>(datas, max)
    }

    fn assemble_bytes(pieces: &[&[u8]], max: usize) -> Result<ModelReply> {
        testing::assemble_bytes::<StreamAssembler>(pieces, max)
    }

    fn tool_delta(value: serde_json::Value) -> String {
        json!({"choices": [{"index": 0, "delta": {"tool_calls": [value]}}]}).to_string()
    }

    fn stop() -> String {
        json!({"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}).to_string()
    }

    #[test]
    fn tool_call_fragments_are_assembled_by_index() {
        let (reply, _) = assemble(
            &[
                tool_delta(json!({"index": 0, "id": "a", "function": {"name": "read", "arguments": "{\"pa"}})),
                tool_delta(json!({"index": 1, "id": "b", "function": {"name": "list", "arguments": ""}})),
                tool_delta(json!({"index": 0, "function": {"arguments": "th\":\"x\"}"}})),
                tool_delta(json!({"index": 1, "function": {"arguments": "{}"}})),
                stop(),
            ],
            1000,
        );
        let calls = reply.unwrap().tool_calls;
        let calls: Vec<_> = calls
            .iter()
            .map(|call| (call.id.as_str(), call.name.as_str(), call.arguments.as_str()))
            .collect();
        assert_eq!(calls, [("a", "read", "{\"path\":\"x\"}"), ("b", "list", "{}")]);
    }

    #[test]
    fn a_call_without_an_id_gets_one() {
        let (reply, _) = assemble(
            &[
                tool_delta(json!({"function": {"name": "read", "arguments": "{}"}})),
                stop(),
            ],
            100,
        );
        assert!(reply.unwrap().tool_calls[0].id.starts_with("call_"));
    }

    #[test]
    fn a_surrogate_pair_split_across_events_is_joined_in_text_and_arguments() {
        let content = |literal: &str| format!(r#"{{"choices":[{{"index":0,"delta":{{"content":{literal}}}}}]}}"#);
        let arguments = |literal: &str| {
            format!(
                r#"{{"choices":[{{"index":0,"delta":{{"tool_calls":[{{"index":0,"function":{{"name":"","arguments":{literal}}}}}]}}}}]}}"#
            )
        };
        let (reply, deltas) = assemble(
            &[
                content(r#""a\ud83d""#),
                content(r#""\ude00""#),
                content(r#""\ud83d""#),
                arguments(r#""{\"q\":\"\ud83d""#),
                arguments(r#""\ude00\"}""#),
                stop(),
            ],
            100,
        );
        let reply = reply.unwrap();
        assert_eq!(deltas, ["a", "😀", "\u{FFFD}"]);
        assert_eq!(reply.text, "a😀\u{FFFD}");
        assert_eq!(reply.tool_calls[0].arguments, "{\"q\":\"😀\"}");
    }

    #[test]
    fn arguments_over_the_cap_fail_the_turn() {
        let (reply, _) = assemble(
            &[
                tool_delta(json!({"index": 0, "id": "a", "function": {"name": "n", "arguments": "{\"k\":\""}})),
                tool_delta(json!({"index": 0, "function": {"arguments": "0123456789\"}"}})),
            ],
            16,
        );
        assert_eq!(
            reply.unwrap_err().message,
            "Model answer is too large: a tool call's arguments is longer than 16 bytes (advanced.connection.maxResponseBytes)"
        );
    }

    #[test]
    fn a_completion_is_parsed_with_usage_and_tool_calls() {
        let reply = parse_completion(
            br#"{"choices":[{"message":{"role":"assistant","content":null,"tool_calls":[{"id":"c1","type":"function","function":{"name":"read","arguments":"{}"}}]}}],"usage":{"prompt_tokens":5,"completion_tokens":7,"total_tokens":12}}"#,
            &Secrets::default(),
        )
        .unwrap();
        assert_eq!(reply.text, "");
        assert_eq!(reply.tool_calls[0].name, "read");
        assert_eq!(reply.usage, Usage::new(5, 7));
        let lone = parse_completion(
            br#"{"choices":[{"message":{"content":"x\ud83d"}}]}"#,
            &Secrets::default(),
        );
        assert_eq!(lone.unwrap().text, "x\u{FFFD}");
    }

    #[test]
    fn a_body_that_is_not_a_completion_is_a_model_error() {
        let error = parse_completion(b"<html>", &Secrets::default()).unwrap_err();
        assert!(
            error.message.starts_with("Model response is not a chat completion"),
            "{}",
            error.message
        );
    }

    /// The SSE body of a reply whose text and each call's arguments are sent in the given
    /// UTF-16 pieces (a piece may end inside a surrogate pair).
    fn body(text: &[Vec<u16>], calls: &[(String, Vec<Vec<u16>>)]) -> String {
        let mut out = String::new();
        for piece in text {
            out += &format!(
                "data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"content\":{}}}}}]}}\n\n",
                literal(piece)
            );
        }
        for (index, (name, pieces)) in calls.iter().enumerate() {
            for (n, piece) in pieces.iter().enumerate() {
                let head = if n == 0 {
                    format!("\"id\":\"id{index}\",")
                } else {
                    String::new()
                };
                out += &format!(
                    "data: {{\"choices\":[{{\"index\":0,\"delta\":{{\"tool_calls\":[{{\"index\":{index},{head}\"function\":{{\"name\":{},\"arguments\":{}}}}}]}}}}]}}\n\n",
                    if n == 0 { serde_json::to_string(name).unwrap() } else { "null".into() },
                    literal(piece)
                );
            }
        }
        out + "data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}],\"usage\":{\"prompt_tokens\":3,\"completion_tokens\":4}}\n\ndata: [DONE]\n\n"
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        #[test]
        fn arbitrary_bytes_never_panic_the_assembler(
            bytes in proptest::collection::vec(any::<u8>(), 0..200),
            splits in proptest::collection::vec(any::<usize>(), 0..6),
        ) {
            let mut body = b"data: ".to_vec();
            body.extend_from_slice(&bytes);
            body.extend_from_slice(b"\n\n");
            let _ = assemble_bytes(&cut(&body, &splits), 1 << 16);
        }

        #[test]
        fn arbitrary_json_events_never_panic_the_assembler(
            datas in proptest::collection::vec(
                prop_oneof![
                    Just(r#"{"choices":[{"delta":{"content":"\ud83d"}}]}"#.to_string()),
                    Just(r#"{"choices":[{"delta":{"tool_calls":[{"index":1,"function":{"arguments":"\ude00"}}]}}]}"#.to_string()),
                    Just(r#"{"choices":[{"finish_reason":"stop"}]}"#.to_string()),
                    Just(r#"{"choices":[{"delta":{"content":5}}]}"#.to_string()),
                    "[ -~]{0,30}",
                ],
                0..8,
            ),
        ) {
            let _ = assemble(&datas, 64);
        }

        #[test]
        fn cutting_a_valid_stream_anywhere_changes_nothing(
            text in utf16_pieces(),
            calls in proptest::collection::vec(("[a-z]{1,5}", utf16_pieces()), 0..3),
            splits in proptest::collection::vec(any::<usize>(), 0..12),
        ) {
            let body = body(&text, &calls);
            let whole = assemble_bytes(&[body.as_bytes()], 1 << 16).unwrap();
            let expected: Vec<u16> = text.concat();
            prop_assert_eq!(&whole.text, &String::from_utf16_lossy(&expected));
            for (call, (name, pieces)) in whole.tool_calls.iter().zip(&calls) {
                prop_assert_eq!(&call.name, name);
                prop_assert_eq!(&call.arguments, &String::from_utf16_lossy(&pieces.concat()));
            }
            prop_assert_eq!(whole.usage, Usage::new(3, 4));
            prop_assert_eq!(assemble_bytes(&cut(body.as_bytes(), &splits), 1 << 16).unwrap(), whole);
        }
    }
}
