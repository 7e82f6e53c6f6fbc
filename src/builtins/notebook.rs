//! NotebookEdit: replace, insert or delete a Jupyter notebook cell (not built yet).

use serde_json::{json, Map, Value};

use super::{Answer, Builtin, Call};

pub(crate) fn side_effect() -> &'static str {
    "idempotent"
}

pub(crate) fn description() -> &'static str {
    "NotebookEdit (not built yet)"
}

pub(crate) fn schema() -> Value {
    json!({"type": "object", "properties": {}})
}

pub(crate) async fn notebook_edit(_input: &Map<String, Value>, _call: &Call<'_>) -> Answer {
    let _ = Builtin::NotebookEdit;
    Answer::error("NotebookEdit is not built yet")
}
