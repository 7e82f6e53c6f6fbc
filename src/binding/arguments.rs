//! The arguments an entry point takes whole from JS — the options of `createAgent` and
//! `resumeAgent`, `completeToolCall`'s ids — checked before anything is read from them, and
//! named as JS's `typeof` names the value the caller passed.

use serde_json::Value;

use crate::error::{ErrorCode, Result, SdkError};
use crate::js_value::{callable, js_marker};
use crate::text::parse_js_json;

/// What `typeof` said of the value before it crossed (functions and the values JSON cannot
/// carry arrive marked); `None` is `undefined`, which JSON drops.
fn type_of(value: Option<&Value>) -> &'static str {
    match value {
        None => "undefined",
        Some(Value::Bool(_)) => "boolean",
        Some(Value::Number(_)) => "number",
        Some(Value::String(_)) => "string",
        Some(value) if callable(value).is_some() => "function",
        Some(value) => match js_marker(value) {
            Some(text) if text.starts_with("Symbol(") => "symbol",
            Some(text) if text.ends_with('n') => "bigint",
            Some(_) => "number",
            None => "object",
        },
    }
}

/// [`type_of`] as a noun: `a function`, `an object` (`null` included), else the bare type.
fn described(value: Option<&Value>) -> &'static str {
    match type_of(value) {
        "function" => "a function",
        "symbol" => "a symbol",
        "bigint" => "a bigint",
        "object" => "an object",
        other => other,
    }
}

/// `createAgent`'s and `resumeAgent`'s options (their JSON; `None` for `undefined`), when
/// `typeof` calls them an object (an array is one: the options reader names it).
pub fn options(options: Option<&str>) -> Result<Value> {
    let options = options
        .map(parse_js_json::<Value>)
        .transpose()
        .map_err(|error| SdkError::config(format!("options could not be read: {error}")))?;
    let got = match &options {
        Some(Value::Null) => "null",
        other => type_of(other.as_ref()),
    };
    match options {
        Some(options) if got == "object" => Ok(options),
        _ => Err(SdkError::config(format!("options must be an object (got {got})"))),
    }
}

/// `resumeAgent`'s `sessionId`, a non-empty string.
pub fn stored_session_id(options: &Value) -> Result<String> {
    match options.get("sessionId") {
        Some(Value::String(id)) if !id.is_empty() => Ok(id.clone()),
        other => Err(SdkError::config(format!(
            "sessionId must be the id of a stored session (got {})",
            described(other)
        ))
        .at("sessionId")),
    }
}

/// `completeToolCall`'s `sessionId` and `toolCallId`, strings both.
pub fn tool_call_ids(arguments: &Value) -> Result<(String, String)> {
    match (arguments.get("sessionId"), arguments.get("toolCallId")) {
        (Some(Value::String(session_id)), Some(Value::String(tool_call_id))) => {
            Ok((session_id.clone(), tool_call_id.clone()))
        }
        _ => Err(SdkError::new(
            ErrorCode::InvalidInput,
            "completeToolCall takes { store, sessionId, toolCallId, result } with string ids",
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn values_are_named_as_typeof_names_them() {
        let named = |value: Value| described(Some(&value));
        assert_eq!(described(None), "undefined");
        assert_eq!(named(json!(null)), "an object");
        assert_eq!(named(json!([])), "an object");
        assert_eq!(named(json!("")), "string");
        assert_eq!(named(json!(3)), "number");
        assert_eq!(named(json!(false)), "boolean");
        assert_eq!(named(json!({"$function": 0})), "a function");
        assert_eq!(named(json!({"$js": "NaN"})), "number");
        assert_eq!(named(json!({"$js": "-Infinity"})), "number");
        assert_eq!(named(json!({"$js": "5n"})), "a bigint");
        assert_eq!(named(json!({"$js": "Symbol(id)"})), "a symbol");
    }

    #[test]
    fn options_are_an_object_or_an_array() {
        let refused = |text: Option<&str>| options(text).unwrap_err().message;
        assert_eq!(refused(None), "options must be an object (got undefined)");
        assert_eq!(refused(Some("null")), "options must be an object (got null)");
        assert_eq!(refused(Some("\"x\"")), "options must be an object (got string)");
        assert_eq!(
            refused(Some(r#"{"$function":0}"#)),
            "options must be an object (got function)"
        );
        assert_eq!(options(Some("[]")).unwrap(), json!([]));
        let error = stored_session_id(&json!([])).unwrap_err();
        assert_eq!(
            (error.code, error.message.as_str()),
            (
                ErrorCode::Config,
                "sessionId must be the id of a stored session (got undefined)"
            )
        );
    }
}
