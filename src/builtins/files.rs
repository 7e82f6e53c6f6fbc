//! Read, Write and Edit. Every path goes through `paths::authorize` before the file is touched;
//! the file IO itself runs on tokio's blocking pool. Write and Edit of an existing file need a
//! Read of it in this session, unchanged since (`seen.rs`).

mod edit;
mod read;
mod seen;
mod write;

use serde_json::{json, Map, Value};

use super::{Answer, Builtin, Call};

pub(crate) use seen::ReadFiles;
pub(crate) use write::replace_file;

/// The largest result a whole-file Read returns (Blade's `maxResultSizeChars`).
const MAX_RESULT_CHARS: usize = 500_000;

/// The encodings Read and Write take: text, base64, or Latin-1 (Node's `'binary'`: one byte, one
/// character).
const ENCODINGS: &[&str] = &["utf8", "base64", "binary"];

pub(crate) fn description(tool: Builtin) -> &'static str {
    match tool {
        Builtin::Read => {
            "Reads a file in the workspace. Without offset and limit it returns the whole file as it is \
             (up to 500000 characters). With offset (0-based first line) or limit (number of lines) it \
             returns those lines, each after its 1-based number and an arrow (`     1→text`). Binary \
             files come back base64-encoded. Read an existing file before changing it with Write or Edit."
        }
        Builtin::Write => {
            "Writes a file in the workspace, creating missing parent folders unless create_directories is \
             false. An existing file must have been Read in this session and not changed since. Prefer Edit \
             for focused changes to an existing file."
        }
        _ => {
            "Replaces an exact string in a file. old_string must match one place in the file unless \
             replace_all is true. The file must have been Read in this session and not changed since. Copy \
             text from Read's numbered output without the number and arrow before it, keeping the \
             indentation exactly."
        }
    }
}

pub(crate) fn schema(tool: Builtin) -> Value {
    let file_path =
        |what: &str| json!({"type": "string", "description": format!("Absolute path of the file to {what}")});
    let encoding = json!({"type": "string", "enum": ENCODINGS, "default": "utf8", "description": "utf8 for text, base64 for bytes, binary for Latin-1"});
    match tool {
        Builtin::Read => json!({
            "type": "object",
            "properties": {
                "file_path": file_path("read"),
                "offset": {"type": "integer", "minimum": 0, "description": "Zero-based first line to read"},
                "limit": {"type": "integer", "minimum": 1, "description": "Number of lines to read"},
                "encoding": encoding,
            },
            "required": ["file_path"],
            "additionalProperties": false,
        }),
        Builtin::Write => json!({
            "type": "object",
            "properties": {
                "file_path": file_path("write"),
                "content": {"type": "string", "description": "Content to write"},
                "encoding": encoding,
                "create_directories": {"type": "boolean", "default": true, "description": "Create missing parent folders"},
            },
            "required": ["file_path", "content"],
            "additionalProperties": false,
        }),
        _ => json!({
            "type": "object",
            "properties": {
                "file_path": file_path("edit"),
                "old_string": {"type": "string", "minLength": 1, "description": "Exact text to replace"},
                "new_string": {"type": "string", "description": "Replacement text (can be empty)"},
                "replace_all": {"type": "boolean", "default": false, "description": "Replace every match (default: the one match only)"},
            },
            "required": ["file_path", "old_string", "new_string"],
            "additionalProperties": false,
        }),
    }
}

pub(crate) async fn read(input: &Map<String, Value>, call: &Call<'_>) -> Answer {
    read::read(input, call).await
}

pub(crate) async fn write(input: &Map<String, Value>, call: &Call<'_>) -> Answer {
    write::write(input, call).await
}

pub(crate) async fn edit(input: &Map<String, Value>, call: &Call<'_>) -> Answer {
    edit::edit(input, call).await
}

/// Runs blocking file work on tokio's blocking pool; a panic in it is the operation's failure.
async fn blocking<T: Send + 'static>(
    operation: &str,
    work: impl FnOnce() -> Result<T, Answer> + Send + 'static,
) -> Result<T, Answer> {
    match tokio::task::spawn_blocking(work).await {
        Ok(result) => result,
        Err(error) => Err(Answer::error(format!("{operation} failed: {error}"))),
    }
}

#[cfg(test)]
pub(super) mod testing {
    //! A workspace rooted in a temporary folder, and calls into it.
    use std::path::{Path, PathBuf};

    use serde_json::{Map, Value};
    use tokio_util::sync::CancellationToken;

    use super::super::{Answer, Builtin, Call, State, Workspace};

    pub struct Room {
        pub dir: tempfile::TempDir,
        pub workspace: Workspace,
        pub state: State,
    }

    impl Room {
        pub fn new() -> Room {
            let dir = tempfile::tempdir().unwrap();
            let root = dir.path().join("root");
            std::fs::create_dir(&root).unwrap();
            let root = root.canonicalize().unwrap();
            Room {
                dir,
                workspace: Workspace {
                    roots: vec![root.clone()],
                    cwd: Some(root),
                },
                state: State::default(),
            }
        }

        pub fn root(&self) -> &Path {
            &self.workspace.roots[0]
        }

        /// `name` inside the root, written with `content`.
        pub fn file(&self, name: &str, content: impl AsRef<[u8]>) -> PathBuf {
            let path = self.root().join(name);
            std::fs::write(&path, content).unwrap();
            path
        }

        pub async fn run(&self, tool: Builtin, input: Value) -> Answer {
            self.run_with(tool, input, CancellationToken::new()).await
        }

        pub async fn run_with(&self, tool: Builtin, input: Value, cancel: CancellationToken) -> Answer {
            let input: Map<String, Value> = input.as_object().cloned().unwrap();
            let call = Call {
                workspace: &self.workspace,
                state: &self.state,
                cancel,
            };
            tool.run(&input, call).await
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schemas_require_only_the_fields_without_defaults() {
        for (tool, required) in [
            (Builtin::Read, vec!["file_path"]),
            (Builtin::Write, vec!["file_path", "content"]),
            (Builtin::Edit, vec!["file_path", "old_string", "new_string"]),
        ] {
            let schema = schema(tool);
            assert_eq!(schema["type"], "object");
            assert_eq!(schema["additionalProperties"], false);
            assert_eq!(schema["required"], json!(required));
            let properties = schema["properties"].as_object().unwrap();
            for (name, property) in properties {
                let defaulted = property.get("default").is_some();
                assert_eq!(
                    defaulted,
                    !required.contains(&name.as_str()) && name != "offset" && name != "limit"
                );
            }
            assert!(!description(tool).is_empty());
        }
    }
}
