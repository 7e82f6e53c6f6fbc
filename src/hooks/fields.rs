//! An event's fields: the input its callbacks get (without `abortSignal`), as the text of one
//! JSON object. Written once per event straight from the values it describes; each callback's
//! JS side parses its own copy, and webhooks and result controls, which reshape it, read it
//! back as a map.

use serde::Serialize;
use serde_json::{Map, Value};

#[derive(Debug, Clone)]
pub struct EventFields(String);

/// Room for a tool event's fields with a small input, written without growing the buffer.
const TYPICAL_LEN: usize = 512;

impl EventFields {
    /// `value` must serialize as a JSON object (a struct or a map).
    pub fn of(value: &impl Serialize) -> Self {
        let mut text = Vec::with_capacity(TYPICAL_LEN);
        match serde_json::to_writer(&mut text, value).map(|()| String::from_utf8(text)) {
            Ok(Ok(text)) if text.starts_with('{') => EventFields(text),
            _ => EventFields::default(),
        }
    }

    /// The JSON object's text.
    pub fn json(&self) -> &str {
        &self.0
    }

    pub fn to_map(&self) -> Map<String, Value> {
        serde_json::from_str(&self.0).unwrap_or_default()
    }
}

impl Default for EventFields {
    fn default() -> Self {
        EventFields("{}".into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn fields_keep_their_order_and_read_back_as_a_map() {
        #[derive(Serialize)]
        #[serde(rename_all = "camelCase")]
        struct Sample<'a> {
            event: &'a str,
            session_id: &'a str,
            tool_input: &'a Map<String, Value>,
        }
        let input = json!({"b": 1, "a": [true]}).as_object().unwrap().clone();
        let fields = EventFields::of(&Sample {
            event: "PreToolUse",
            session_id: "s",
            tool_input: &input,
        });
        assert_eq!(
            fields.json(),
            r#"{"event":"PreToolUse","sessionId":"s","toolInput":{"b":1,"a":[true]}}"#
        );
        let map = fields.to_map();
        assert_eq!(map.keys().collect::<Vec<_>>(), ["event", "sessionId", "toolInput"]);
        assert_eq!(map["toolInput"], json!({"b": 1, "a": [true]}));
    }

    #[test]
    fn what_is_not_an_object_becomes_an_empty_one() {
        assert_eq!(EventFields::of(&[1, 2]).json(), "{}");
    }
}
