//! Placeholder until the store lands (replaced by the store branch).

use serde_json::{Map, Value};

pub fn fingerprint(tool_name: &str, input: &Map<String, Value>) -> String {
    format!("{tool_name}:{}", Value::Object(input.clone()))
}

pub fn approval_token(secret: &str, session_id: &str, tool_call_id: &str, fingerprint: &str) -> String {
    format!("{secret}:{session_id}:{tool_call_id}:{fingerprint}")
}
