//! NotebookEdit: replace, insert or delete one cell of a Jupyter notebook (nbformat 4 JSON).
//! The path goes through the same policy as Write's; the notebook is rewritten atomically, as
//! Write replaces a file, in the file's own layout (`layout.rs`), every other field kept. As in
//! Blade, no Read is needed first.

mod layout;

use std::path::Path;

use serde_json::{json, Map, Value};
use tokio_util::sync::CancellationToken;

use super::files::replace_file;
use super::input::Fields;
use super::paths::authorize;
use super::{Answer, Call};
use layout::Layout;

const EDIT_MODES: &[&str] = &["replace", "insert", "delete"];
const CELL_TYPES: &[&str] = &["code", "markdown"];
/// The largest notebook edited: it is held in memory whole, parsed.
const MAX_NOTEBOOK_BYTES: u64 = 64 * 1024 * 1024;

/// Inserting or deleting twice is not doing it once (Blade: only `replace` is idempotent; the
/// ledger keeps one value per tool).
pub(crate) fn side_effect() -> &'static str {
    "non_idempotent"
}

pub(crate) fn description() -> &'static str {
    "Edits one cell of a Jupyter notebook (.ipynb). edit_mode replace (the default) sets the source of the \
     cell with cell_id (and its type, with cell_type); insert adds a new cell of cell_type after the cell \
     with cell_id, or first without one; delete removes the cell with cell_id. new_source is the whole \
     source of the cell. The rest of the notebook is kept as it is."
}

pub(crate) fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "notebook_path": {"type": "string", "description": "Absolute path of the Jupyter notebook"},
            "cell_id": {"type": "string", "description": "ID of the cell to edit, or the cell to insert after"},
            "new_source": {"type": "string", "description": "New source of the cell"},
            "cell_type": {"type": "string", "enum": CELL_TYPES, "description": "Type of the cell (required for insert)"},
            "edit_mode": {"type": "string", "enum": EDIT_MODES, "default": "replace", "description": "Cell operation"},
        },
        "required": ["notebook_path", "new_source"],
        "additionalProperties": false,
    })
}

/// One edit, checked.
struct Edit {
    cell_id: Option<String>,
    source: String,
    cell_type: Option<&'static str>,
    mode: &'static str,
}

pub(crate) async fn notebook_edit(input: &Map<String, Value>, call: &Call<'_>) -> Answer {
    let fields = Fields::of("NotebookEdit", input);
    let parsed = (|| {
        let notebook_path = fields.required_string("notebook_path")?;
        let edit = Edit {
            cell_id: fields.string("cell_id")?.map(str::to_string),
            source: fields.required_string("new_source")?.to_string(),
            cell_type: match fields.get("cell_type") {
                None => None,
                Some(_) => Some(fields.choice("cell_type", CELL_TYPES, "code")?),
            },
            mode: fields.choice("edit_mode", EDIT_MODES, "replace")?,
        };
        Ok::<_, Answer>((notebook_path, edit))
    })();
    let (notebook_path, edit) = match parsed {
        Ok(parsed) => parsed,
        Err(answer) => return answer,
    };
    let authorized = match authorize(notebook_path, call.workspace) {
        Ok(authorized) => authorized,
        Err(answer) => return answer,
    };
    let path = authorized.path;
    if !authorized.exists {
        return Answer::error(format!("Notebook edit failed: File not found: {}", path.display()));
    }
    let cancel = call.cancel.clone();
    let target = path.clone();
    let done = tokio::task::spawn_blocking(move || edit_file(&target, &edit, &cancel)).await;
    match done {
        Ok(Ok(action)) => Answer::ok(format!("Successfully {action} cell in {}", path.display())),
        Ok(Err(answer)) => answer,
        Err(error) => Answer::error(format!("Notebook edit failed: {error}")),
    }
}

/// Reads, edits and rewrites the notebook; answers what was done (`replaced`, …).
fn edit_file(path: &Path, edit: &Edit, cancel: &CancellationToken) -> Result<&'static str, Answer> {
    if cancel.is_cancelled() {
        return Err(Answer::error("Notebook edit aborted"));
    }
    let text = read_notebook(path)?;
    let mut notebook: Value = serde_json::from_str(&text).map_err(|error| {
        Answer::error(format!(
            "Notebook edit failed: the notebook is not valid JSON ({error})"
        ))
    })?;
    let action = apply(&mut notebook, edit)?;
    let bytes = Layout::of(&text).write(&notebook);
    replace_file(path, &bytes, false, "Notebook edit", cancel)?;
    Ok(action)
}

fn read_notebook(path: &Path) -> Result<String, Answer> {
    let failed = |error: std::io::Error| Answer::error(format!("Notebook edit failed: {error}"));
    let metadata = std::fs::metadata(path).map_err(failed)?;
    if metadata.is_dir() {
        return Err(Answer::error(format!(
            "Notebook edit failed: {} is a directory",
            path.display()
        )));
    }
    if metadata.len() > MAX_NOTEBOOK_BYTES {
        return Err(Answer::error(format!(
            "Notebook edit failed: the notebook is larger than {MAX_NOTEBOOK_BYTES} bytes"
        )));
    }
    let bytes = std::fs::read(path).map_err(failed)?;
    String::from_utf8(bytes).map_err(|_| Answer::error("Notebook edit failed: the notebook is not UTF-8 text"))
}

/// The edit, made on the parsed notebook; Blade's texts for what cannot be done.
fn apply(notebook: &mut Value, edit: &Edit) -> Result<&'static str, Answer> {
    let numbered_ids = cells_have_ids(notebook);
    let Some(cells) = notebook.get_mut("cells").and_then(Value::as_array_mut) else {
        return Err(Answer::error("Invalid notebook format: no cells array found"));
    };
    let index = match &edit.cell_id {
        None => None,
        Some(id) => match cells
            .iter()
            .position(|cell| cell.get("id").and_then(Value::as_str) == Some(id))
        {
            Some(index) => Some(index),
            // Blade inserts at the top when the anchor is missing; an unknown anchor is more
            // likely a mistake than a wish for the first place.
            None => return Err(Answer::error(format!("Cell with ID \"{id}\" not found"))),
        },
    };
    match edit.mode {
        "replace" => {
            let index = index.ok_or_else(|| Answer::error("Cell ID required for replace operation"))?;
            let cell = cells[index]
                .as_object_mut()
                .ok_or_else(|| Answer::error("Invalid notebook format: a cell is not an object"))?;
            cell.insert("source".into(), source_lines(&edit.source));
            if let Some(cell_type) = edit.cell_type {
                retype(cell, cell_type);
            }
            Ok("replaced")
        }
        "insert" => {
            let cell_type = edit
                .cell_type
                .ok_or_else(|| Answer::error("cell_type is required for insert operation"))?;
            let id = numbered_ids.then(|| new_cell_id(cells));
            let at = index.map_or(0, |index| index + 1);
            cells.insert(at, new_cell(cell_type, id, &edit.source));
            Ok("inserted")
        }
        _ => {
            let index = index.ok_or_else(|| Answer::error("Cell ID required for delete operation"))?;
            cells.remove(index);
            Ok("deleted")
        }
    }
}

/// Source as Jupyter stores it: lines, each with its `\n` but the last.
fn source_lines(source: &str) -> Value {
    let lines: Vec<&str> = source.split_inclusive('\n').collect();
    json!(lines)
}

/// Cells carry ids from nbformat 4.5 on; a notebook whose cells have them gets one for a new cell.
fn cells_have_ids(notebook: &Value) -> bool {
    let version = |key: &str| notebook.get(key).and_then(Value::as_u64).unwrap_or(0);
    let any_id = notebook
        .get("cells")
        .and_then(Value::as_array)
        .is_some_and(|cells| cells.iter().any(|cell| cell.get("id").is_some()));
    any_id || (version("nbformat"), version("nbformat_minor")) >= (4, 5)
}

/// Eight hex digits, as Jupyter makes them, not taken by another cell.
fn new_cell_id(cells: &[Value]) -> String {
    loop {
        let id: String = crate::ids::uuid().chars().filter(|c| *c != '-').take(8).collect();
        if !cells
            .iter()
            .any(|cell| cell.get("id").and_then(Value::as_str) == Some(&id))
        {
            return id;
        }
    }
}

/// A new cell, its keys in the order Jupyter writes them (sorted).
fn new_cell(cell_type: &str, id: Option<String>, source: &str) -> Value {
    let mut cell = Map::new();
    cell.insert("cell_type".into(), json!(cell_type));
    if cell_type == "code" {
        cell.insert("execution_count".into(), Value::Null);
    }
    if let Some(id) = id {
        cell.insert("id".into(), json!(id));
    }
    cell.insert("metadata".into(), json!({}));
    if cell_type == "code" {
        cell.insert("outputs".into(), json!([]));
    }
    cell.insert("source".into(), source_lines(source));
    Value::Object(cell)
}

/// A cell turned into `cell_type`: a code cell has outputs and an execution count, a markdown
/// cell has neither (nbformat's schema). The keys are then sorted, as Jupyter writes them.
fn retype(cell: &mut Map<String, Value>, cell_type: &str) {
    if cell.get("cell_type").and_then(Value::as_str) == Some(cell_type) {
        return;
    }
    cell.insert("cell_type".into(), json!(cell_type));
    if cell_type == "code" {
        cell.entry("execution_count").or_insert(Value::Null);
        cell.entry("outputs").or_insert_with(|| json!([]));
    } else {
        cell.remove("execution_count");
        cell.remove("outputs");
    }
    let mut entries: Vec<(String, Value)> = std::mem::take(cell).into_iter().collect();
    entries.sort_by(|a, b| a.0.cmp(&b.0));
    cell.extend(entries);
}

#[cfg(test)]
mod tests {
    use super::super::files::testing::Room;
    use super::super::Builtin;
    use super::*;

    /// A notebook as Jupyter writes it: one-space indent, sorted keys, a final newline.
    const NOTEBOOK: &str = r##"{
 "cells": [
  {
   "cell_type": "markdown",
   "id": "intro",
   "metadata": {},
   "source": [
    "# Title\n",
    "Some text — ünïcode"
   ]
  },
  {
   "cell_type": "code",
   "execution_count": 3,
   "id": "calc",
   "metadata": {
    "tags": []
   },
   "outputs": [
    {
     "name": "stdout",
     "output_type": "stream",
     "text": [
      "2\n"
     ]
    }
   ],
   "source": [
    "print(1 + 1)"
   ]
  }
 ],
 "metadata": {
  "kernelspec": {
   "display_name": "Python 3",
   "language": "python",
   "name": "python3"
  }
 },
 "nbformat": 4,
 "nbformat_minor": 5
}
"##;

    async fn edit(room: &Room, input: Value) -> Answer {
        room.run(Builtin::NotebookEdit, input).await
    }

    fn cells(path: &Path) -> Vec<Value> {
        let value: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
        value["cells"].as_array().unwrap().clone()
    }

    #[tokio::test]
    async fn replace_changes_only_that_cells_source() {
        let room = Room::new();
        let path = room.file("a.ipynb", NOTEBOOK);
        let answer = edit(
            &room,
            json!({"notebook_path": "a.ipynb", "cell_id": "calc", "new_source": "x = 2\nprint(x)\n"}),
        )
        .await;
        assert_eq!(
            answer,
            Answer::ok(format!("Successfully replaced cell in {}", path.display()))
        );
        let expected = NOTEBOOK.replace(
            "   \"source\": [\n    \"print(1 + 1)\"\n   ]",
            "   \"source\": [\n    \"x = 2\\n\",\n    \"print(x)\\n\"\n   ]",
        );
        assert_ne!(expected, NOTEBOOK);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), expected);
        // No temporary file left behind.
        assert_eq!(std::fs::read_dir(room.root()).unwrap().count(), 1);
    }

    #[tokio::test]
    async fn replace_with_another_type_makes_a_valid_cell() {
        let room = Room::new();
        let path = room.file("a.ipynb", NOTEBOOK);
        edit(
            &room,
            json!({"notebook_path": path, "cell_id": "calc", "new_source": "Now prose", "cell_type": "markdown"}),
        )
        .await;
        let cell = &cells(&path)[1];
        assert_eq!(
            cell,
            &json!({"cell_type": "markdown", "id": "calc", "metadata": {"tags": []}, "source": ["Now prose"]})
        );
        edit(
            &room,
            json!({"notebook_path": path, "cell_id": "intro", "new_source": "1", "cell_type": "code"}),
        )
        .await;
        let keys: Vec<String> = cells(&path)[0].as_object().unwrap().keys().cloned().collect();
        assert_eq!(
            keys,
            ["cell_type", "execution_count", "id", "metadata", "outputs", "source"]
        );
    }

    #[tokio::test]
    async fn insert_after_a_cell_or_first() {
        let room = Room::new();
        let path = room.file("a.ipynb", NOTEBOOK);
        let answer = edit(
            &room,
            json!({"notebook_path": path, "cell_id": "intro", "new_source": "y = 1", "cell_type": "code", "edit_mode": "insert"}),
        )
        .await;
        assert_eq!(answer.text, format!("Successfully inserted cell in {}", path.display()));
        let now = cells(&path);
        assert_eq!(now.len(), 3);
        let id = now[1]["id"].as_str().unwrap().to_string();
        assert!(id.len() == 8 && id.chars().all(|c| c.is_ascii_hexdigit()), "{id}");
        assert_eq!(
            now[1],
            json!({"cell_type": "code", "execution_count": null, "id": id, "metadata": {}, "outputs": [], "source": ["y = 1"]})
        );
        assert_eq!(now[2]["id"], "calc");
        edit(
            &room,
            json!({"notebook_path": path, "new_source": "", "cell_type": "markdown", "edit_mode": "insert"}),
        )
        .await;
        let first = &cells(&path)[0];
        assert_eq!(first["cell_type"], "markdown");
        assert_eq!(first["source"], json!([]));
        assert!(first.get("outputs").is_none());
    }

    #[tokio::test]
    async fn delete_removes_the_cell() {
        let room = Room::new();
        let path = room.file("a.ipynb", NOTEBOOK);
        let answer = edit(
            &room,
            json!({"notebook_path": path, "cell_id": "intro", "new_source": "", "edit_mode": "delete"}),
        )
        .await;
        assert_eq!(answer.text, format!("Successfully deleted cell in {}", path.display()));
        let now = cells(&path);
        assert_eq!(now.len(), 1);
        assert_eq!(now[0]["id"], "calc");
    }

    #[tokio::test]
    async fn blades_refusals() {
        let room = Room::new();
        let path = room.file("a.ipynb", NOTEBOOK);
        for (input, text) in [
            (
                json!({"cell_id": "nope", "new_source": "x"}),
                "Cell with ID \"nope\" not found",
            ),
            (
                json!({"cell_id": "nope", "new_source": "x", "cell_type": "code", "edit_mode": "insert"}),
                "Cell with ID \"nope\" not found",
            ),
            (json!({"new_source": "x"}), "Cell ID required for replace operation"),
            (
                json!({"new_source": "x", "edit_mode": "insert"}),
                "cell_type is required for insert operation",
            ),
            (
                json!({"new_source": "x", "edit_mode": "delete"}),
                "Cell ID required for delete operation",
            ),
            (
                json!({"new_source": "x", "edit_mode": "append"}),
                "Invalid input for NotebookEdit: edit_mode must be one of replace, insert, delete (got a string)",
            ),
            (
                json!({"new_source": "x", "cell_type": "raw", "edit_mode": "insert"}),
                "Invalid input for NotebookEdit: cell_type must be one of code, markdown (got a string)",
            ),
            (
                json!({"cell_id": "calc"}),
                "Invalid input for NotebookEdit: new_source must be a string (got nothing)",
            ),
        ] {
            let mut input = input;
            input["notebook_path"] = json!(path);
            assert_eq!(edit(&room, input).await, Answer::error(text));
        }
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            NOTEBOOK,
            "a refused edit changed the file"
        );
    }

    #[tokio::test]
    async fn what_is_not_a_notebook() {
        let room = Room::new();
        let json_file = room.file("list.ipynb", "[1, 2]");
        let broken = room.file("broken.ipynb", "{\"cells\": [");
        assert_eq!(
            edit(
                &room,
                json!({"notebook_path": json_file, "cell_id": "a", "new_source": "x"})
            )
            .await,
            Answer::error("Invalid notebook format: no cells array found")
        );
        let answer = edit(
            &room,
            json!({"notebook_path": broken, "cell_id": "a", "new_source": "x"}),
        )
        .await;
        assert!(
            answer
                .text
                .starts_with("Notebook edit failed: the notebook is not valid JSON ("),
            "{}",
            answer.text
        );
        let missing = room.root().join("missing.ipynb");
        assert_eq!(
            edit(
                &room,
                json!({"notebook_path": missing, "cell_id": "a", "new_source": "x"})
            )
            .await,
            Answer::error(format!("Notebook edit failed: File not found: {}", missing.display()))
        );
        assert!(!missing.exists());
    }

    #[tokio::test]
    async fn the_path_policy_is_writes() {
        let room = Room::new();
        let outside = room.dir.path().join("out.ipynb");
        std::fs::write(&outside, NOTEBOOK).unwrap();
        assert_eq!(
            edit(
                &room,
                json!({"notebook_path": outside, "cell_id": "calc", "new_source": "x"})
            )
            .await,
            Answer::error(format!(
                "Filesystem path is outside authorized roots: {}",
                outside.display()
            ))
        );
        assert_eq!(std::fs::read_to_string(&outside).unwrap(), NOTEBOOK);
        let cancel = CancellationToken::new();
        cancel.cancel();
        let path = room.file("a.ipynb", NOTEBOOK);
        let aborted = room
            .run_with(
                Builtin::NotebookEdit,
                json!({"notebook_path": path, "cell_id": "calc", "new_source": "x"}),
                cancel,
            )
            .await;
        assert_eq!(aborted, Answer::error("Notebook edit aborted"));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), NOTEBOOK);
    }

    #[tokio::test]
    async fn an_older_notebook_gets_no_cell_ids() {
        let room = Room::new();
        let old = r#"{"cells": [{"cell_type": "code", "execution_count": null, "metadata": {}, "outputs": [], "source": []}], "metadata": {}, "nbformat": 4, "nbformat_minor": 2}"#;
        let path = room.file("old.ipynb", old);
        edit(
            &room,
            json!({"notebook_path": path, "new_source": "# hi", "cell_type": "markdown", "edit_mode": "insert"}),
        )
        .await;
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(!text.contains("\"id\""), "{text}");
        // One line stays one line.
        assert!(!text.contains('\n'), "{text}");
    }
}
