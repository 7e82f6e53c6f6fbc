//! What a JS value looks like once it crossed as JSON: the markers `lib/wire.js` puts where JSON
//! cannot carry a value (`{ "$function": n }` for a user function, `{ "$js": "NaN" }` for the
//! rest), their short descriptions for error messages, and JS's number limits. Ground floor:
//! imports nothing of this crate but `host`'s `Callable`.

use serde_json::Value;

use crate::host::Callable;

/// The key that marks a user function in the options JSON: `{ "$function": 3 }`.
pub const FUNCTION_KEY: &str = "$function";

/// The key `lib/wire.js` uses for a value JSON cannot carry: `{ "$js": "NaN" }`.
pub const JS_VALUE_KEY: &str = "$js";

/// The largest delay a JS timer takes; also the bound of counts such as `maxTurns`.
pub const MAX_TIMER_MS: u64 = 2_147_483_647;

/// The largest integer a JS number holds exactly.
pub const MAX_SAFE_INTEGER: u64 = 9_007_199_254_740_991;

/// The user function a `{ "$function": n }` marker stands for.
pub fn callable(value: &Value) -> Option<Callable> {
    let object = value.as_object()?;
    if object.len() != 1 {
        return None;
    }
    object.get(FUNCTION_KEY)?.as_u64().map(|n| Callable(n as u32))
}

/// A non-negative integer a JS number holds exactly (`3` and `3.0` alike).
pub fn whole_number(value: &Value) -> Option<u64> {
    if let Some(n) = value.as_u64() {
        return Some(n);
    }
    value
        .as_f64()
        .filter(|n| n.fract() == 0.0 && *n >= 0.0 && *n <= MAX_SAFE_INTEGER as f64)
        .map(|n| n as u64)
}

/// A short description of a JSON value from JS: `null`, `42`, `"text"`, `an array`,
/// `an object`; a user function is `a function`, and a value JSON cannot carry is named as JS
/// prints it (`NaN`).
pub fn describe(value: &Value) -> String {
    if let Value::Object(object) = value {
        if let Some((key, Value::Number(_))) = object.iter().next().filter(|_| object.len() == 1) {
            if key == FUNCTION_KEY {
                return "a function".into();
            }
        }
    }
    if let Some(text) = js_marker(value) {
        return text.to_string();
    }
    match value {
        Value::Null => "null".into(),
        Value::Bool(flag) => flag.to_string(),
        Value::Number(number) => number.to_string(),
        Value::String(text) => format!("{:?}", crate::text::excerpt(text, 40)),
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

/// The text of a `{ "$js": text }` marker: a value JSON cannot carry (`NaN`, `5n`), or one
/// that is not plain data where data was expected (`not plain data: … is a getter`).
pub fn js_marker(value: &Value) -> Option<&str> {
    let object = value.as_object().filter(|object| object.len() == 1)?;
    object.get(JS_VALUE_KEY)?.as_str()
}

/// `JSON.stringify` for a value that came from JS: strings as they are, everything else compact JSON.
pub fn stringify(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

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
