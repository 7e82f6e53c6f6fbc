//! An event's fields: the input its callbacks get (without `abortSignal`), as the text of one
//! JSON object. Written once per event straight from the values it describes; each callback's
//! JS side parses its own copy, and webhooks and result controls, which reshape it, read it
//! back as a map.

use serde::Serialize;
use serde_json::value::RawValue;
use serde_json::{Map, Value};

#[derive(Debug, Clone)]
pub struct Fields(Box<RawValue>);

impl Fields {
    /// `value` must serialize as a JSON object (a struct or a map).
    pub fn of(value: &impl Serialize) -> Self {
        match serde_json::value::to_raw_value(value) {
            Ok(raw) if raw.get().starts_with('{') => Fields(raw),
            _ => Fields::default(),
        }
    }

    pub fn json(&self) -> &RawValue {
        &self.0
    }

    pub fn to_map(&self) -> Map<String, Value> {
        serde_json::from_str(self.0.get()).unwrap_or_default()
    }
}

impl Default for Fields {
    fn default() -> Self {
        Fields(RawValue::from_string("{}".into()).expect("an empty object is JSON"))
    }
}

impl From<Map<String, Value>> for Fields {
    fn from(map: Map<String, Value>) -> Self {
        Fields::of(&map)
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
        let fields = Fields::of(&Sample {
            event: "PreToolUse",
            session_id: "s",
            tool_input: &input,
        });
        assert_eq!(
            fields.json().get(),
            r#"{"event":"PreToolUse","sessionId":"s","toolInput":{"b":1,"a":[true]}}"#
        );
        let map = fields.to_map();
        assert_eq!(map.keys().collect::<Vec<_>>(), ["event", "sessionId", "toolInput"]);
        assert_eq!(map["toolInput"], json!({"b": 1, "a": [true]}));
    }

    #[test]
    fn what_is_not_an_object_becomes_an_empty_one() {
        assert_eq!(Fields::of(&[1, 2]).json().get(), "{}");
        assert_eq!(Fields::from(Map::new()).json().get(), "{}");
    }
}
