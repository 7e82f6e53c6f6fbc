//! Short texts about values, for error messages.

use serde_json::Value;

/// The key that marks a user function in the options JSON: `{ "$function": 3 }`.
pub const FUNCTION_KEY: &str = "$function";

/// The key `index.js` uses for a value JSON cannot carry: `{ "$js": "NaN" }`.
pub const JS_VALUE_KEY: &str = "$js";

/// A short description of a JSON value from JS: `null`, `42`, `"text"`, `an array`,
/// `an object`; a user function is `a function`, and a value JSON cannot carry is named as JS
/// prints it (`NaN`).
pub fn describe(value: &Value) -> String {
    if let Value::Object(object) = value {
        match object.iter().next().filter(|_| object.len() == 1) {
            Some((key, Value::Number(_))) if key == FUNCTION_KEY => return "a function".into(),
            Some((key, Value::String(text))) if key == JS_VALUE_KEY => return text.clone(),
            _ => {}
        }
    }
    match value {
        Value::Null => "null".into(),
        Value::Bool(flag) => flag.to_string(),
        Value::Number(number) => number.to_string(),
        Value::String(text) => format!("{:?}", excerpt(text, 40)),
        Value::Array(_) => "an array".into(),
        Value::Object(_) => "an object".into(),
    }
}

/// What kind of value this is, without showing it (for secrets): `a number`, `a string`, …
pub fn kind(value: &Value) -> &'static str {
    if let Value::Object(object) = value {
        match object.iter().next().filter(|_| object.len() == 1) {
            Some((key, Value::Number(_))) if key == FUNCTION_KEY => return "a function",
            Some((key, Value::String(text))) if key == JS_VALUE_KEY => {
                return if text.ends_with('n') { "a bigint" } else { "a number" }
            }
            _ => {}
        }
    }
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The start of `text`, at most `limit` characters, cut on a character boundary.
pub fn excerpt(text: &str, limit: usize) -> String {
    let text = text.trim();
    match text.char_indices().nth(limit) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn excerpt_cuts_on_a_character_boundary() {
        assert_eq!(excerpt("héllo", 2), "hé…");
        assert_eq!(excerpt("hi", 5), "hi");
    }

    #[test]
    fn values_are_described_briefly() {
        assert_eq!(describe(&json!(null)), "null");
        assert_eq!(describe(&json!("x")), "\"x\"");
        assert_eq!(describe(&json!([1])), "an array");
        assert_eq!(describe(&json!({})), "an object");
        assert_eq!(kind(&json!(12345)), "a number");
        assert_eq!(kind(&json!({"$js": "123n"})), "a bigint");
        assert_eq!(kind(&json!({"$function": 1})), "a function");
    }
}
