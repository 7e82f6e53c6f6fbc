//! Read, Write and Edit. (Being written.)

use serde_json::{json, Map, Value};

use super::{Answer, Builtin, Call};

/// The files Read in this session, with what they were when read (Write and Edit of an
/// existing file need one, unchanged since).
#[derive(Default)]
pub(crate) struct ReadFiles {}

pub(crate) fn description(_tool: Builtin) -> &'static str {
    ""
}

pub(crate) fn schema(_tool: Builtin) -> Value {
    json!({"type": "object", "properties": {}})
}

pub(crate) async fn read(_input: &Map<String, Value>, _call: &Call<'_>) -> Answer {
    Answer::error("Read is not built yet")
}

pub(crate) async fn write(_input: &Map<String, Value>, _call: &Call<'_>) -> Answer {
    Answer::error("Write is not built yet")
}

pub(crate) async fn edit(_input: &Map<String, Value>, _call: &Call<'_>) -> Answer {
    Answer::error("Edit is not built yet")
}
