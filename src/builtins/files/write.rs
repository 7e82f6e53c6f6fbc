//! Write, and the atomic replacement it shares with Edit: the new bytes go to a temporary file
//! in the same folder, which is then renamed over the target, so a reader never sees half a
//! file. An existing file keeps its permissions.

use std::fs::OpenOptions;
use std::io::{ErrorKind, Write};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

use base64::Engine;
use serde_json::{json, Map, Value};
use tokio_util::sync::CancellationToken;

use super::super::input::Fields;
use super::super::paths::authorize;
use super::super::{iso_time, Answer, Call};
use super::seen::{guard, Fingerprint};
use super::{blocking, ENCODINGS};

pub(super) async fn write(input: &Map<String, Value>, call: &Call<'_>) -> Answer {
    let fields = Fields::of("Write", input);
    let parsed = (|| {
        let file_path = fields.required_string("file_path")?;
        let content = fields.required_string("content")?;
        let encoding = fields.choice("encoding", ENCODINGS, "utf8")?;
        let create_directories = fields.bool("create_directories", true)?;
        Ok::<_, Answer>((file_path, content, encoding, create_directories))
    })();
    let (file_path, content, encoding, create_directories) = match parsed {
        Ok(parsed) => parsed,
        Err(answer) => return answer,
    };
    let path = match authorize(file_path, call.workspace) {
        Ok(authorized) => authorized.path,
        Err(answer) => return answer,
    };
    let bytes = match encode(content, encoding) {
        Ok(bytes) => bytes,
        Err(message) => return Answer::error(format!("File write failed: {message}")),
    };
    let then = call.state.read.get(&path);
    let cancel = call.cancel.clone();
    let target = path.clone();
    let written = blocking("File write", move || {
        if cancel.is_cancelled() {
            return Err(Answer::error("File write aborted"));
        }
        match std::fs::metadata(&target) {
            Ok(metadata) if metadata.is_dir() => {
                return Err(Answer::error(format!(
                    "File write failed: {} is a directory",
                    target.display()
                )))
            }
            Ok(_) => {
                let now = Fingerprint::of_file(&target).map_err(|error| failure("File write", &error))?;
                guard(then.as_ref(), &now, "writing")?;
            }
            // Not there: a new file needs no Read.
            Err(error) if error.kind() == ErrorKind::NotFound => {}
            Err(error) => return Err(failure("File write", &error)),
        }
        replace_file(&target, &bytes, create_directories, "File write", &cancel)
    })
    .await;
    match written {
        Ok(fingerprint) => {
            let answer = Answer::json(&json!({
                "file_path": path.display().to_string(),
                "size": fingerprint.len,
                "modified": fingerprint.modified.map(iso_time),
            }));
            // What was just written counts as read: the model may write or edit again.
            call.state.read.record(path, fingerprint);
            answer
        }
        Err(answer) => answer,
    }
}

/// The bytes `content` stands for in `encoding`.
fn encode(content: &str, encoding: &str) -> Result<Vec<u8>, String> {
    match encoding {
        "base64" => base64::engine::general_purpose::STANDARD
            .decode(content.trim())
            .map_err(|error| format!("content is not valid base64 ({error})")),
        "binary" => content
            .chars()
            .map(|c| u8::try_from(u32::from(c)).ok())
            .collect::<Option<Vec<u8>>>()
            .ok_or_else(|| "content has a character above U+00FF, which binary (Latin-1) cannot hold".to_string()),
        _ => Ok(content.as_bytes().to_vec()),
    }
}

fn failure(operation: &str, error: &std::io::Error) -> Answer {
    Answer::error(format!("{operation} failed: {error}"))
}

/// Makes temporary names unique within the process (the process id covers other processes).
static TEMPORARY: AtomicU64 = AtomicU64::new(0);

/// Replaces `path` with `bytes` atomically and answers what the file holds now. `operation`
/// (`File write`, `File edit`) starts the failure texts. A cancel is honoured up to the rename.
pub(crate) fn replace_file(
    path: &Path,
    bytes: &[u8],
    create_directories: bool,
    operation: &str,
    cancel: &CancellationToken,
) -> Result<Fingerprint, Answer> {
    let fail = |error: std::io::Error| failure(operation, &error);
    let (Some(folder), Some(name)) = (path.parent(), path.file_name()) else {
        return Err(Answer::error(format!(
            "{operation} failed: not a file path: {}",
            path.display()
        )));
    };
    if !folder.is_dir() {
        if !create_directories {
            return Err(Answer::error(format!(
                "{operation} failed: the parent folder does not exist: {}",
                folder.display()
            )));
        }
        std::fs::create_dir_all(folder).map_err(fail)?;
    }
    let existing = std::fs::metadata(path).ok().map(|metadata| metadata.permissions());
    let temporary = folder.join(format!(
        ".{}.{}.{}.tmp",
        name.to_string_lossy(),
        std::process::id(),
        TEMPORARY.fetch_add(1, Ordering::Relaxed)
    ));
    let result = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o666)
            .open(&temporary)
            .map_err(fail)?;
        if let Some(permissions) = existing {
            file.set_permissions(permissions).map_err(fail)?;
        }
        file.write_all(bytes).map_err(fail)?;
        file.sync_all().map_err(fail)?;
        if cancel.is_cancelled() {
            return Err(Answer::error(format!("{operation} aborted")));
        }
        std::fs::rename(&temporary, path).map_err(fail)
    })();
    if let Err(answer) = result {
        let _ = std::fs::remove_file(&temporary);
        return Err(answer);
    }
    let modified = std::fs::metadata(path)
        .ok()
        .and_then(|metadata| metadata.modified().ok());
    Ok(Fingerprint::of_bytes(bytes, modified))
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use serde_json::json;

    use super::super::super::Builtin;
    use super::super::testing::Room;
    use super::*;

    fn parsed(answer: &Answer) -> Value {
        assert!(!answer.failed, "{}", answer.text);
        serde_json::from_str(&answer.text).unwrap()
    }

    #[tokio::test]
    async fn a_new_file_is_written_with_its_folders() {
        let room = Room::new();
        let answer = room
            .run(
                Builtin::Write,
                json!({"file_path": "deep/er/a.txt", "content": "hello file\n"}),
            )
            .await;
        let path = room.root().join("deep/er/a.txt");
        let value = parsed(&answer);
        assert_eq!(value["file_path"], path.display().to_string());
        assert_eq!(value["size"], 11);
        let modified = std::fs::metadata(&path).unwrap().modified().unwrap();
        assert_eq!(value["modified"], iso_time(modified));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "hello file\n");
        assert_eq!(answer.text, serde_json::to_string_pretty(&value).unwrap());
        // No temporary file left behind.
        assert_eq!(std::fs::read_dir(path.parent().unwrap()).unwrap().count(), 1);
    }

    #[tokio::test]
    async fn without_create_directories_a_missing_parent_fails() {
        let room = Room::new();
        let answer = room
            .run(
                Builtin::Write,
                json!({"file_path": "missing/a.txt", "content": "x", "create_directories": false}),
            )
            .await;
        let folder = room.root().join("missing");
        assert_eq!(
            answer,
            Answer::error(format!(
                "File write failed: the parent folder does not exist: {}",
                folder.display()
            ))
        );
        assert!(!folder.exists());
    }

    #[tokio::test]
    async fn an_existing_file_needs_a_read_first() {
        let room = Room::new();
        let path = room.file("a.txt", "old");
        let refused = room
            .run(Builtin::Write, json!({"file_path": "a.txt", "content": "new"}))
            .await;
        assert_eq!(
            refused,
            Answer::error("You must use the Read tool before writing this existing file.")
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "old");
        room.run(Builtin::Read, json!({"file_path": "a.txt"})).await;
        let written = room
            .run(Builtin::Write, json!({"file_path": "a.txt", "content": "new"}))
            .await;
        assert_eq!(parsed(&written)["size"], 3);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "new");
        // What was written counts as read.
        let again = room
            .run(Builtin::Write, json!({"file_path": "a.txt", "content": "newer"}))
            .await;
        assert!(!again.failed, "{}", again.text);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "newer");
    }

    #[tokio::test]
    async fn a_change_after_the_read_is_refused() {
        let room = Room::new();
        let path = room.file("a.txt", "one");
        room.run(Builtin::Read, json!({"file_path": "a.txt"})).await;
        // Same size, within the same clock tick most likely: only the bytes tell.
        std::fs::write(&path, "two").unwrap();
        let refused = room
            .run(Builtin::Write, json!({"file_path": "a.txt", "content": "three"}))
            .await;
        assert!(refused.failed);
        assert!(
            refused.text.starts_with(
                "The file changed since it was read. Read it again before writing.\n\nDetails: the file's \
                 content differs from the read (same size, 3 bytes), last modified "
            ),
            "{}",
            refused.text
        );
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "two");
        std::fs::write(&path, "four!").unwrap();
        let grown = room
            .run(Builtin::Write, json!({"file_path": "a.txt", "content": "x"}))
            .await;
        assert!(
            grown.text.contains("Details: the file is now 5 bytes (3 when read)"),
            "{}",
            grown.text
        );
    }

    #[tokio::test]
    async fn permissions_are_kept_and_symlinks_stay() {
        let room = Room::new();
        let path = room.file("run.sh", "#!/bin/sh\n");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o750)).unwrap();
        std::os::unix::fs::symlink(&path, room.root().join("link.sh")).unwrap();
        room.run(Builtin::Read, json!({"file_path": "run.sh"})).await;
        let answer = room
            .run(
                Builtin::Write,
                json!({"file_path": "link.sh", "content": "#!/bin/sh\nexit 0\n"}),
            )
            .await;
        assert_eq!(parsed(&answer)["file_path"], path.display().to_string());
        let mode = std::fs::metadata(&path).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o750);
        assert!(std::fs::symlink_metadata(room.root().join("link.sh"))
            .unwrap()
            .file_type()
            .is_symlink());
        assert_eq!(
            std::fs::read_to_string(room.root().join("link.sh")).unwrap(),
            "#!/bin/sh\nexit 0\n"
        );
    }

    #[tokio::test]
    async fn encodings() {
        let room = Room::new();
        let answer = room
            .run(
                Builtin::Write,
                json!({"file_path": "b.bin", "content": "AAEC/w==", "encoding": "base64"}),
            )
            .await;
        assert_eq!(parsed(&answer)["size"], 4);
        assert_eq!(std::fs::read(room.root().join("b.bin")).unwrap(), [0, 1, 2, 255]);
        let bad = room
            .run(
                Builtin::Write,
                json!({"file_path": "c.bin", "content": "@@", "encoding": "base64"}),
            )
            .await;
        assert!(
            bad.text.starts_with("File write failed: content is not valid base64"),
            "{}",
            bad.text
        );
        room.run(
            Builtin::Write,
            json!({"file_path": "l.txt", "content": "é", "encoding": "binary"}),
        )
        .await;
        assert_eq!(std::fs::read(room.root().join("l.txt")).unwrap(), [0xE9]);
    }

    #[tokio::test]
    async fn outside_the_root_and_aborted() {
        let room = Room::new();
        let outside = room.dir.path().join("x.txt");
        let answer = room
            .run(Builtin::Write, json!({"file_path": outside, "content": "x"}))
            .await;
        assert_eq!(
            answer.text,
            format!("Filesystem path is outside authorized roots: {}", outside.display())
        );
        assert!(!outside.exists());
        let cancel = CancellationToken::new();
        cancel.cancel();
        let aborted = room
            .run_with(Builtin::Write, json!({"file_path": "a.txt", "content": "x"}), cancel)
            .await;
        assert_eq!(aborted, Answer::error("File write aborted"));
        assert!(!room.root().join("a.txt").exists());
        std::fs::create_dir(room.root().join("sub")).unwrap();
        let folder = room
            .run(Builtin::Write, json!({"file_path": "sub", "content": "x"}))
            .await;
        assert_eq!(
            folder,
            Answer::error(format!(
                "File write failed: {} is a directory",
                room.root().join("sub").display()
            ))
        );
    }
}
