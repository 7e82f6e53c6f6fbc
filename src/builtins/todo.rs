//! TodoWrite: the session's todo list (not built yet).

use serde_json::{json, Map, Value};

use super::{Answer, Builtin, Call};

pub(crate) fn side_effect() -> &'static str {
    "idempotent"
}

pub(crate) fn description() -> &'static str {
    "TodoWrite (not built yet)"
}

pub(crate) fn schema() -> Value {
    json!({"type": "object", "properties": {}})
}

pub(crate) async fn todo_write(_input: &Map<String, Value>, _call: &Call<'_>) -> Answer {
    let _ = Builtin::TodoWrite;
    Answer::error("TodoWrite is not built yet")
}
