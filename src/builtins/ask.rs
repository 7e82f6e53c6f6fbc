//! AskUserQuestion: questions for the person using the agent (not built yet).

use serde_json::{json, Map, Value};

use super::{Answer, Builtin, Call};

pub(crate) fn side_effect() -> &'static str {
    "idempotent"
}

pub(crate) fn description() -> &'static str {
    "AskUserQuestion (not built yet)"
}

pub(crate) fn schema() -> Value {
    json!({"type": "object", "properties": {}})
}

pub(crate) async fn ask_user_question(_input: &Map<String, Value>, _call: &Call<'_>) -> Answer {
    let _ = Builtin::AskUserQuestion;
    Answer::error("AskUserQuestion is not built yet")
}
