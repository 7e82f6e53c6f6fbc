//! EnterPlanMode and ExitPlanMode (not built yet).

use serde_json::{json, Map, Value};

use super::{Answer, Builtin, Call};

pub(crate) fn side_effect() -> &'static str {
    "idempotent"
}

pub(crate) fn description(tool: Builtin) -> &'static str {
    match tool {
        Builtin::EnterPlanMode => "EnterPlanMode (not built yet)",
        _ => "ExitPlanMode (not built yet)",
    }
}

pub(crate) fn schema(_tool: Builtin) -> Value {
    json!({"type": "object", "properties": {}})
}

pub(crate) async fn enter_plan_mode(_input: &Map<String, Value>, _call: &Call<'_>) -> Answer {
    Answer::error("EnterPlanMode is not built yet")
}

pub(crate) async fn exit_plan_mode(_input: &Map<String, Value>, _call: &Call<'_>) -> Answer {
    Answer::error("ExitPlanMode is not built yet")
}
