//! How stored values become text and back. `Message` serializes in the OpenAI wire shape, which
//! drops `Tool::is_error`; the store keeps the conversation through this mirror instead, so a
//! resumed session tells the model (and Anthropic's `tool_result`) the same as before.

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::{Decision, StoreError};
use crate::model::{AssistantToolCall, Message, UserContent};

#[derive(Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "lowercase")]
enum StoredMessage {
    User {
        content: UserContent,
    },
    Assistant {
        content: Option<String>,
        #[serde(default, rename = "toolCalls")]
        tool_calls: Vec<StoredToolCall>,
    },
    Tool {
        #[serde(rename = "toolCallId")]
        tool_call_id: String,
        content: String,
        #[serde(rename = "isError")]
        is_error: bool,
    },
}

#[derive(Serialize, Deserialize)]
struct StoredToolCall {
    id: String,
    name: String,
    arguments: String,
}

impl From<&Message> for StoredMessage {
    fn from(message: &Message) -> Self {
        match message {
            Message::User { content } => StoredMessage::User {
                content: content.clone(),
            },
            Message::Assistant { content, tool_calls } => StoredMessage::Assistant {
                content: content.clone(),
                tool_calls: tool_calls
                    .iter()
                    .map(|call| StoredToolCall {
                        id: call.id.clone(),
                        name: call.function.name.clone(),
                        arguments: call.function.arguments.clone(),
                    })
                    .collect(),
            },
            Message::Tool {
                tool_call_id,
                content,
                is_error,
            } => StoredMessage::Tool {
                tool_call_id: tool_call_id.clone(),
                content: content.clone(),
                is_error: *is_error,
            },
        }
    }
}

impl From<StoredMessage> for Message {
    fn from(message: StoredMessage) -> Self {
        match message {
            StoredMessage::User { content } => Message::User { content },
            StoredMessage::Assistant { content, tool_calls } => Message::Assistant {
                content,
                tool_calls: tool_calls
                    .into_iter()
                    .map(|call| AssistantToolCall::new(call.id, call.name, call.arguments))
                    .collect(),
            },
            StoredMessage::Tool {
                tool_call_id,
                content,
                is_error,
            } => Message::Tool {
                tool_call_id,
                content,
                is_error,
            },
        }
    }
}

/// The conversation as stored text (a JSON array of the mirror).
pub(crate) fn messages_to_text(messages: &[Message]) -> String {
    let stored: Vec<StoredMessage> = messages.iter().map(StoredMessage::from).collect();
    serde_json::to_string(&stored).expect("messages always serialize")
}

pub(crate) fn messages_from_text(text: &str, operation: &str) -> Result<Vec<Message>, StoreError> {
    let stored: Vec<StoredMessage> = parse(text, operation, "messages")?;
    Ok(stored.into_iter().map(Message::from).collect())
}

/// `#[serde(with = "store::stored_messages")]`: a conversation kept inside another stored value
/// (a paused sub-agent's, inside its parent's paused turn) in the same mirror.
pub mod stored_messages {
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    use super::StoredMessage;
    use crate::model::Message;

    pub fn serialize<S: Serializer>(messages: &[Message], serializer: S) -> Result<S::Ok, S::Error> {
        let stored: Vec<StoredMessage> = messages.iter().map(StoredMessage::from).collect();
        stored.serialize(serializer)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Vec<Message>, D::Error> {
        let stored = Vec::<StoredMessage>::deserialize(deserializer)?;
        Ok(stored.into_iter().map(Message::from).collect())
    }
}

pub(crate) fn to_text<T: Serialize + ?Sized>(value: &T) -> String {
    serde_json::to_string(value).expect("JSON values always serialize")
}

/// Parses a stored column; an unreadable one is a `StoreError` naming the column, not its text
/// (which may be large or sensitive).
pub(crate) fn parse<T: DeserializeOwned>(text: &str, operation: &str, column: &str) -> Result<T, StoreError> {
    serde_json::from_str(text).map_err(|e| StoreError::new(operation, format!("stored {column} is unreadable: {e}")))
}

pub(crate) fn parse_object(text: &str, operation: &str, column: &str) -> Result<Map<String, Value>, StoreError> {
    parse(text, operation, column)
}

pub(crate) fn parse_decision(text: Option<&str>, operation: &str) -> Result<Option<Decision>, StoreError> {
    text.map(|text| parse(text, operation, "decision")).transpose()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::messages::ImageUrl;
    use crate::model::ContentPart;

    #[test]
    fn messages_round_trip_with_is_error_and_image_parts() {
        let messages = vec![
            Message::User {
                content: UserContent::Parts(vec![
                    ContentPart::Text { text: "look".into() },
                    ContentPart::ImageUrl {
                        image_url: ImageUrl {
                            url: "data:image/png;base64,AA".into(),
                            detail: Some("low".into()),
                        },
                    },
                ]),
            },
            Message::Assistant {
                content: None,
                tool_calls: vec![AssistantToolCall::new("c1".into(), "read".into(), "{\"p\":1}".into())],
            },
            Message::Tool {
                tool_call_id: "c1".into(),
                content: "boom".into(),
                is_error: true,
            },
            Message::Tool {
                tool_call_id: "c2".into(),
                content: "ok".into(),
                is_error: false,
            },
            Message::Assistant {
                content: Some("done".into()),
                tool_calls: vec![],
            },
        ];
        let text = messages_to_text(&messages);
        assert!(text.contains("\"isError\":true"), "{text}");
        assert_eq!(messages_from_text(&text, "test").unwrap(), messages);
    }

    #[test]
    fn unreadable_text_names_the_column_and_operation() {
        let error = messages_from_text("[{\"role\":\"robot\"}]", "load session s1").unwrap_err();
        assert_eq!(error.operation, "load session s1");
        assert!(error.cause.starts_with("stored messages is unreadable"), "{error}");
    }
}
