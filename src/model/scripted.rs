//! `scriptedModel(turns | fn)`: a model that answers from a script, for tests and the demo.
//! Each model call consumes the next turn; the function form is asked for each turn and sees
//! the request (messages, tools) the model would have been sent.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use futures::future::BoxFuture;
use serde_json::{json, Value};

use super::{FinishReason, Model, ModelReply, ModelRequest, TextSink, ToolCallRequest, ToolChoice, Usage};
use crate::error::{Result, SdkError};
use crate::host::{Args, Callable, Host, HostCall, Reply};
use crate::ids;
use crate::js_value::describe;
use crate::options::OptionsObject;

/// One scripted assistant turn.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ScriptedTurn {
    pub text: String,
    pub tool_calls: Vec<ToolCallRequest>,
    pub usage: Usage,
}

pub enum Script {
    Turns(Arc<[ScriptedTurn]>),
    Function(Callable),
}

pub struct ScriptedModel {
    script: Script,
    host: Arc<dyn Host>,
    calls: AtomicUsize,
}

impl ScriptedModel {
    pub fn new(script: Script, host: Arc<dyn Host>) -> Self {
        ScriptedModel {
            script,
            host,
            calls: AtomicUsize::new(0),
        }
    }

    async fn complete_inner(&self, request: ModelRequest<'_>, on_text: TextSink<'_>) -> Result<ModelReply> {
        let call = self.calls.fetch_add(1, Ordering::SeqCst);
        let turn = match &self.script {
            Script::Turns(turns) => turns.get(call).cloned().ok_or_else(|| {
                SdkError::model(format!(
                    "scriptedModel ran out of turns: it has {}, and this is model call {}",
                    turns.len(),
                    call + 1
                ))
            })?,
            Script::Function(function) => {
                let returned = self
                    .host
                    .call(HostCall {
                        reply: Reply::Json,
                        ..HostCall::new(*function, Args::of(&[request_value(&request)]), request.scope)
                    })
                    .await
                    .map_err(|error| SdkError::model(error.message).with_thrown(error.thrown))?;
                let returned = returned.unwrap_or(Value::Null);
                parse_turn(&returned, "").map_err(|problem| {
                    SdkError::model(format!(
                        "scriptedModel function returned an invalid turn: {}",
                        problem.message
                    ))
                })?
            }
        };
        if !turn.text.is_empty() {
            on_text(&turn.text);
        }
        Ok(ModelReply {
            text: turn.text,
            finish_reason: FinishReason::read(None, !turn.tool_calls.is_empty()),
            tool_calls: turn
                .tool_calls
                .into_iter()
                .map(|mut call| {
                    if call.id.is_empty() {
                        call.id = ids::call_id();
                    }
                    call
                })
                .collect(),
            usage: turn.usage,
        })
    }
}

impl Model for ScriptedModel {
    fn complete<'a>(&'a self, request: ModelRequest<'a>, on_text: TextSink<'a>) -> BoxFuture<'a, Result<ModelReply>> {
        Box::pin(self.complete_inner(request, on_text))
    }
}

/// What the function form is given: `{ turn, messages, tools }`, with the system prompt as the
/// first message, as a chat-completions model would receive it.
fn request_value(request: &ModelRequest<'_>) -> Value {
    let mut messages = Vec::with_capacity(request.messages.len() + 1);
    if let Some(system) = request.system_prompt {
        messages.push(json!({"role": "system", "content": system}));
    }
    messages.extend(
        request
            .messages
            .iter()
            .map(|message| serde_json::to_value(message.as_ref()).unwrap_or(Value::Null)),
    );
    let mut value = json!({
        "turn": request.turn,
        "messages": messages,
        "tools": request.tools,
    });
    if let Some(choice) = request.tool_choice {
        value["toolChoice"] = match choice {
            ToolChoice::Auto => json!("auto"),
            ToolChoice::None => json!("none"),
            ToolChoice::Required => json!("required"),
            ToolChoice::Tool(name) => json!({ "name": name }),
        };
    }
    value
}

/// The path a turn or call is first read under: its real one is written only for an error.
const UNNAMED: &str = "?";

/// Reads `{ text?, toolCalls?: [{ id?, name, input?, arguments? }], usage? }`; the error names
/// the field under `path` (none: the turn a script function returned).
pub fn parse_turn(value: &Value, path: &str) -> Result<ScriptedTurn> {
    let Some(object) = value.as_object() else {
        let what = if path.is_empty() { "the turn" } else { path };
        return Err(SdkError::config(format!(
            "{what} must be an object like {{ text, toolCalls }} (got {})",
            describe(value)
        ))
        .at(what));
    };
    let turn = OptionsObject::new(object, path);
    for key in object.keys() {
        if !matches!(key.as_str(), "text" | "toolCalls" | "usage") {
            return Err(turn.error(key, "is not a turn field (use text, toolCalls, usage)"));
        }
    }
    let text = turn.string("text")?.unwrap_or_default();
    let tool_calls = match turn.get("toolCalls") {
        None => Vec::new(),
        Some(Value::Array(calls)) => calls
            .iter()
            .enumerate()
            .map(|(index, call)| {
                parse_call(call, UNNAMED).or_else(|_| parse_call(call, &turn.field(&format!("toolCalls[{index}]"))))
            })
            .collect::<Result<_>>()?,
        Some(other) => return Err(turn.invalid("toolCalls", "an array", other)),
    };
    let usage = match turn.get("usage") {
        None => Usage::default(),
        Some(Value::Object(usage)) => {
            // Counts are read as given: a `null` one is not a number.
            let tokens = |field: &str| match usage.get(field) {
                None => Ok(0),
                Some(value) => value
                    .as_u64()
                    .ok_or_else(|| turn.error(&format!("usage.{field}"), "must be a non-negative integer")),
            };
            Usage::new(tokens("inputTokens")?, tokens("outputTokens")?)
        }
        Some(other) => return Err(turn.invalid("usage", "an object", other)),
    };
    Ok(ScriptedTurn {
        text,
        tool_calls,
        usage,
    })
}

fn parse_call(value: &Value, path: &str) -> Result<ToolCallRequest> {
    let Some(object) = value.as_object() else {
        return Err(SdkError::config(format!(
            "{path} must be an object like {{ name, input }} (got {})",
            describe(value)
        ))
        .at(path));
    };
    let call = OptionsObject::new(object, path);
    let name = call
        .string("name")?
        .filter(|name| !name.is_empty())
        .ok_or_else(|| call.error("name", "must be a non-empty string"))?;
    // `arguments` is raw text, so a script can send arguments that are not valid JSON.
    let arguments = match call.string("arguments")? {
        Some(raw) => raw,
        None => match call.get("input") {
            None => "{}".to_string(),
            Some(input) => input.to_string(),
        },
    };
    for key in object.keys() {
        if !matches!(key.as_str(), "id" | "name" | "input" | "arguments") {
            return Err(call.error(key, "is not a tool call field (use id, name, input, arguments)"));
        }
    }
    Ok(ToolCallRequest {
        id: call.string("id")?.unwrap_or_default(),
        name,
        arguments,
    })
}

/// Parses the turns array given to `scriptedModel([...])`.
pub fn parse_turns(value: &Value, path: &str) -> Result<Vec<ScriptedTurn>> {
    match value {
        // A turn's path is written only when the turn is refused (then it is read again, to name
        // the field): a script of a thousand turns costs no string per turn.
        Value::Array(turns) => turns
            .iter()
            .enumerate()
            .map(|(index, turn)| parse_turn(turn, UNNAMED).or_else(|_| parse_turn(turn, &format!("{path}[{index}]"))))
            .collect(),
        other => Err(SdkError::config(format!("{path} must be an array of turns (got {})", describe(other))).at(path)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_turn_is_read_with_its_tool_calls_and_usage() {
        let turn = parse_turn(
            &json!({"text": "hi", "toolCalls": [{"id": "c1", "name": "read", "input": {"path": "a"}}, {"name": "raw", "arguments": "{oops"}], "usage": {"inputTokens": 2, "outputTokens": 3}}),
            "",
        )
        .unwrap();
        assert_eq!(turn.text, "hi");
        assert_eq!(turn.tool_calls[0].arguments, "{\"path\":\"a\"}");
        assert_eq!(turn.tool_calls[1].arguments, "{oops");
        assert_eq!(turn.tool_calls[1].id, "");
        assert_eq!(turn.usage, Usage::new(2, 3));
    }

    #[test]
    fn bad_turns_name_the_field() {
        let cases = [
            (json!([{"text": 1}]), "model.turns[0].text must be a string (got 1)"),
            (
                json!([{}, {"toolCalls": [{"input": {}}]}]),
                "model.turns[1].toolCalls[0].name must be a non-empty string",
            ),
            (
                json!([{"tools": []}]),
                "model.turns[0].tools is not a turn field (use text, toolCalls, usage)",
            ),
            (json!("x"), "model.turns must be an array of turns (got \"x\")"),
            (
                json!([{"usage": {"inputTokens": -1}}]),
                "model.turns[0].usage.inputTokens must be a non-negative integer",
            ),
        ];
        for (value, expected) in cases {
            assert_eq!(parse_turns(&value, "model.turns").unwrap_err().message, expected);
        }
    }
}
