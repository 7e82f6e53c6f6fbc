//! The conversation, in the OpenAI chat shape users see in `agent.messages`.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "role", rename_all = "lowercase")]
pub enum Message {
    User {
        content: UserContent,
    },
    Assistant {
        /// `null` when the turn had tool calls and no text, as OpenAI sends it.
        content: Option<String>,
        #[serde(skip_serializing_if = "Vec::is_empty")]
        tool_calls: Vec<AssistantToolCall>,
    },
    Tool {
        tool_call_id: String,
        content: String,
        /// The call failed. Not part of the OpenAI shape; Anthropic's `tool_result` carries it.
        #[serde(skip)]
        is_error: bool,
    },
}

/// A user message: plain text, or text and image parts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum UserContent {
    Text(String),
    Parts(Vec<ContentPart>),
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentPart {
    Text { text: String },
    ImageUrl { image_url: ImageUrl },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ImageUrl {
    pub url: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub detail: Option<String>,
}

impl UserContent {
    /// The text parts joined with newlines.
    pub fn text(&self) -> String {
        match self {
            UserContent::Text(text) => text.clone(),
            UserContent::Parts(parts) => parts
                .iter()
                .filter_map(|part| match part {
                    ContentPart::Text { text } => Some(text.as_str()),
                    ContentPart::ImageUrl { .. } => None,
                })
                .collect::<Vec<_>>()
                .join("\n"),
        }
    }

    pub fn image_count(&self) -> usize {
        match self {
            UserContent::Text(_) => 0,
            UserContent::Parts(parts) => parts
                .iter()
                .filter(|part| matches!(part, ContentPart::ImageUrl { .. }))
                .count(),
        }
    }
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct AssistantToolCall {
    pub id: String,
    #[serde(rename = "type")]
    pub kind: FunctionKind,
    pub function: FunctionCall,
}

/// Always `"function"`; a type so the shape is fixed by construction.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum FunctionKind {
    Function,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct FunctionCall {
    pub name: String,
    pub arguments: String,
}

impl AssistantToolCall {
    pub fn new(id: String, name: String, arguments: String) -> Self {
        AssistantToolCall {
            id,
            kind: FunctionKind::Function,
            function: FunctionCall { name, arguments },
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn messages_serialize_in_the_openai_chat_shape() {
        let messages = vec![
            Message::User {
                content: UserContent::Text("hi".into()),
            },
            Message::Assistant {
                content: None,
                tool_calls: vec![AssistantToolCall::new(
                    "c1".into(),
                    "read".into(),
                    "{\"path\":\"a\"}".into(),
                )],
            },
            Message::Tool {
                tool_call_id: "c1".into(),
                content: "text".into(),
                is_error: true,
            },
            Message::Assistant {
                content: Some("done".into()),
                tool_calls: vec![],
            },
        ];
        assert_eq!(
            serde_json::to_value(&messages).unwrap(),
            json!([
                {"role": "user", "content": "hi"},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "c1", "type": "function", "function": {"name": "read", "arguments": "{\"path\":\"a\"}"}}
                ]},
                {"role": "tool", "tool_call_id": "c1", "content": "text"},
                {"role": "assistant", "content": "done"}
            ])
        );
    }

    #[test]
    fn user_content_reads_text_and_counts_images() {
        let content: UserContent = serde_json::from_value(json!([
            {"type": "image_url", "image_url": {"url": "data:image/png;base64,AA"}},
            {"type": "text", "text": "first"},
            {"type": "text", "text": "second"}
        ]))
        .unwrap();
        assert_eq!(content.text(), "first\nsecond");
        assert_eq!(content.image_count(), 1);
    }
}
