//! WebFetch: an HTTP request from the model (not built yet).

use serde_json::{json, Map, Value};

use super::{Answer, Builtin, Call};

pub(crate) fn side_effect() -> &'static str {
    "idempotent"
}

pub(crate) fn description() -> &'static str {
    "WebFetch (not built yet)"
}

pub(crate) fn schema() -> Value {
    json!({"type": "object", "properties": {}})
}

pub(crate) async fn web_fetch(_input: &Map<String, Value>, _call: &Call<'_>) -> Answer {
    let _ = Builtin::WebFetch;
    Answer::error("WebFetch is not built yet")
}
