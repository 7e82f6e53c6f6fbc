//! Bash, KillShell and TaskOutput. (Being written.)

use serde_json::{json, Map, Value};

use super::{Answer, Builtin, Call};

/// The session's background shells.
#[derive(Default)]
pub(crate) struct Shells {}

impl Shells {
    /// Kills every background shell's process group.
    pub async fn kill_all(&self) {}
}

pub(crate) fn description(_tool: Builtin) -> &'static str {
    ""
}

pub(crate) fn schema(_tool: Builtin) -> Value {
    json!({"type": "object", "properties": {}})
}

pub(crate) async fn bash(_input: &Map<String, Value>, _call: &Call<'_>) -> Answer {
    Answer::error("Bash is not built yet")
}

pub(crate) async fn kill_shell(_input: &Map<String, Value>, _call: &Call<'_>) -> Answer {
    Answer::error("KillShell is not built yet")
}

pub(crate) async fn task_output(_input: &Map<String, Value>, _call: &Call<'_>) -> Answer {
    Answer::error("TaskOutput is not built yet")
}
