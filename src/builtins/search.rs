//! Glob and Grep. (Being written.)

use serde_json::{json, Map, Value};

use super::{Answer, Builtin, Call};

pub(crate) fn description(_tool: Builtin) -> &'static str {
    ""
}

pub(crate) fn schema(_tool: Builtin) -> Value {
    json!({"type": "object", "properties": {}})
}

pub(crate) async fn glob(_input: &Map<String, Value>, _call: &Call<'_>) -> Answer {
    Answer::error("Glob is not built yet")
}

pub(crate) async fn grep(_input: &Map<String, Value>, _call: &Call<'_>) -> Answer {
    Answer::error("Grep is not built yet")
}
