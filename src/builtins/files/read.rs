//! Read: a whole file as it is, or a range of its lines numbered. A whole read is sized from
//! the file's metadata before anything is loaded; a range is streamed line by line, so a huge
//! file costs flat memory. Either way the whole file is hashed for the session's record.

use std::fs::File;
use std::io::{BufRead, BufReader, Cursor, ErrorKind, Read};
use std::path::{Path, PathBuf};

use base64::Engine;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use tokio_util::sync::CancellationToken;

use super::super::input::Fields;
use super::super::paths::authorize;
use super::super::{Answer, Call};
use super::seen::Fingerprint;
use super::{blocking, ENCODINGS, MAX_RESULT_CHARS};

/// Extensions always read as bytes (base64 unless another encoding is asked for).
const BINARY_EXTENSIONS: &[&str] = &[
    "png", "jpg", "jpeg", "gif", "bmp", "ico", "webp", "tif", "tiff", "avif", "heic", "psd", "pdf", "doc", "docx",
    "xls", "xlsx", "ppt", "pptx", "odt", "ods", "odp", "zip", "gz", "tgz", "bz2", "xz", "zst", "7z", "rar", "tar",
    "jar", "war", "whl", "exe", "dll", "so", "dylib", "a", "o", "obj", "lib", "class", "pyc", "wasm", "bin", "mp3",
    "wav", "flac", "ogg", "m4a", "aac", "mp4", "m4v", "avi", "mov", "mkv", "webm", "wmv", "flv", "ttf", "otf", "woff",
    "woff2", "eot", "sqlite", "db",
];

/// How much of a file is looked at for a NUL byte, the sign of a binary file.
const SNIFF_BYTES: u64 = 8 * 1024;
/// Longer lines are cut to this many characters (code points), followed by `...`.
const MAX_LINE_CHARS: usize = 2000;
/// Bytes kept of one selected line: enough for `MAX_LINE_CHARS` characters of four bytes, and one
/// more to tell that the line goes on.
const LINE_BYTES_KEPT: usize = (MAX_LINE_CHARS + 1) * 4;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Decoding {
    Utf8,
    Latin1,
}

impl Decoding {
    fn decode(self, bytes: &[u8]) -> String {
        match self {
            Decoding::Utf8 => String::from_utf8_lossy(bytes).into_owned(),
            Decoding::Latin1 => bytes.iter().map(|&byte| char::from(byte)).collect(),
        }
    }
}

/// What the model asked for: the file, which lines (offset, limit) if any, and the encoding.
struct Request {
    path: PathBuf,
    lines: Option<(u64, Option<u64>)>,
    encoding: &'static str,
}

/// A read's text, and what the file held.
struct Outcome {
    text: String,
    fingerprint: Fingerprint,
}

pub(super) async fn read(input: &Map<String, Value>, call: &Call<'_>) -> Answer {
    let fields = Fields::of("Read", input);
    let parsed = (|| {
        let file_path = fields.required_string("file_path")?;
        let offset = fields.integer("offset", 0, MAX_SAFE_INTEGER)?;
        let limit = fields.integer("limit", 1, MAX_SAFE_INTEGER)?;
        let encoding = fields.choice("encoding", ENCODINGS, "utf8")?;
        Ok::<_, Answer>((file_path, offset, limit, encoding))
    })();
    let (file_path, offset, limit, encoding) = match parsed {
        Ok(parsed) => parsed,
        Err(answer) => return answer,
    };
    let authorized = match authorize(file_path, call.workspace) {
        Ok(authorized) => authorized,
        Err(answer) => return answer,
    };
    if !authorized.exists {
        return not_found(&authorized.path);
    }
    let lines = (offset.is_some() || limit.is_some()).then(|| (offset.unwrap_or(0), limit));
    let request = Request {
        path: authorized.path.clone(),
        lines,
        encoding,
    };
    let cancel = call.cancel.clone();
    match blocking("File read", move || perform(&request, &cancel)).await {
        Ok(outcome) => {
            call.state.read.record(authorized.path, outcome.fingerprint);
            Answer::ok(outcome.text)
        }
        Err(answer) => answer,
    }
}

/// JavaScript's `Number.MAX_SAFE_INTEGER`: the largest offset or limit a model can mean.
const MAX_SAFE_INTEGER: u64 = (1 << 53) - 1;

fn not_found(path: &Path) -> Answer {
    Answer::error(format!("File not found: {}", path.display()))
}

fn failed(error: std::io::Error) -> Answer {
    Answer::error(format!("File read failed: {error}"))
}

fn aborted() -> Answer {
    Answer::error("File read aborted")
}

fn perform(request: &Request, cancel: &CancellationToken) -> Result<Outcome, Answer> {
    if cancel.is_cancelled() {
        return Err(aborted());
    }
    let path = &request.path;
    let mut file = match File::open(path) {
        Ok(file) => file,
        Err(error) if error.kind() == ErrorKind::NotFound => return Err(not_found(path)),
        Err(error) if error.kind() == ErrorKind::IsADirectory => return Err(directory(path)),
        Err(error) => return Err(failed(error)),
    };
    let metadata = file.metadata().map_err(failed)?;
    if metadata.is_dir() {
        return Err(directory(path));
    }
    if !metadata.is_file() {
        return Err(Answer::error(format!(
            "File read failed: not a regular file: {}",
            path.display()
        )));
    }
    let modified = metadata.modified().ok();
    let mut head = Vec::new();
    (&mut file).take(SNIFF_BYTES).read_to_end(&mut head).map_err(failed)?;
    let binary = has_binary_extension(path) || head.contains(&0);
    let reader = BufReader::with_capacity(64 * 1024, Cursor::new(head).chain(file));
    let decoding = match request.encoding {
        "base64" => None,
        "binary" => Some(Decoding::Latin1),
        _ if binary => None,
        _ => Some(Decoding::Utf8),
    };
    match (decoding, request.lines) {
        (Some(decoding), Some((offset, limit))) => read_lines(reader, decoding, offset, limit, modified, cancel),
        (Some(decoding), None) => read_text(reader, metadata.len(), decoding, path, modified, cancel),
        // Offset and limit count lines; bytes are returned whole.
        (None, _) => {
            let labelled = request.encoding != "base64";
            read_base64(reader, metadata.len(), labelled, path, modified, cancel)
        }
    }
}

fn directory(path: &Path) -> Answer {
    Answer::error(format!("Cannot read a directory: {}", path.display()))
}

fn has_binary_extension(path: &Path) -> bool {
    path.extension()
        .and_then(|extension| extension.to_str())
        .is_some_and(|extension| BINARY_EXTENSIONS.contains(&extension.to_ascii_lowercase().as_str()))
}

fn too_large(path: &Path, bytes: u64, base64_chars: Option<u64>) -> Answer {
    match base64_chars {
        None => Answer::error(format!(
            "File is too large to read whole: {} is {bytes} bytes, over the {MAX_RESULT_CHARS}-character limit \
             of a whole read. Use offset and limit to read it in parts.",
            path.display()
        )),
        Some(chars) => Answer::error(format!(
            "File is too large to read whole: {} is {bytes} bytes, {chars} characters in base64, over the \
             {MAX_RESULT_CHARS}-character limit of a read.",
            path.display()
        )),
    }
}

/// The whole file, read in pieces so a cancel is seen between them.
fn read_all(mut reader: impl Read, size: u64, cancel: &CancellationToken) -> Result<Vec<u8>, Answer> {
    let mut bytes = Vec::with_capacity(size as usize);
    let mut buffer = vec![0; 64 * 1024];
    loop {
        if cancel.is_cancelled() {
            return Err(aborted());
        }
        match reader.read(&mut buffer) {
            Ok(0) => return Ok(bytes),
            Ok(read) => bytes.extend_from_slice(&buffer[..read]),
            Err(error) if error.kind() == ErrorKind::Interrupted => {}
            Err(error) => return Err(failed(error)),
        }
    }
}

fn read_text(
    reader: impl Read,
    size: u64,
    decoding: Decoding,
    path: &Path,
    modified: Option<std::time::SystemTime>,
    cancel: &CancellationToken,
) -> Result<Outcome, Answer> {
    // A character takes one to four bytes (one in Latin-1): past that, it cannot fit.
    let bytes_per_char = if decoding == Decoding::Latin1 { 1 } else { 4 };
    if size > (MAX_RESULT_CHARS * bytes_per_char) as u64 {
        return Err(too_large(path, size, None));
    }
    let bytes = read_all(reader, size, cancel)?;
    let text = decoding.decode(&bytes);
    if text.chars().count() > MAX_RESULT_CHARS {
        return Err(too_large(path, bytes.len() as u64, None));
    }
    Ok(Outcome {
        fingerprint: Fingerprint::of_bytes(&bytes, modified),
        text,
    })
}

fn read_base64(
    reader: impl Read,
    size: u64,
    labelled: bool,
    path: &Path,
    modified: Option<std::time::SystemTime>,
    cancel: &CancellationToken,
) -> Result<Outcome, Answer> {
    let chars = size.div_ceil(3) * 4;
    if chars > MAX_RESULT_CHARS as u64 {
        return Err(too_large(path, size, Some(chars)));
    }
    let bytes = read_all(reader, size, cancel)?;
    let encoded = base64::engine::general_purpose::STANDARD.encode(&bytes);
    // Asked for utf8 but found bytes: the first line says what follows.
    let text = if labelled {
        format!("Binary file ({} bytes), base64-encoded:\n{encoded}", bytes.len())
    } else {
        encoded
    };
    Ok(Outcome {
        fingerprint: Fingerprint::of_bytes(&bytes, modified),
        text,
    })
}

/// The selected lines of a file being streamed, numbered as Read shows them.
struct Selection {
    decoding: Decoding,
    start: u64,
    /// One past the last line wanted (0-based), if there is a limit.
    end: Option<u64>,
    shown: Vec<String>,
    shown_chars: usize,
    /// Set when the next line would have taken the text past `MAX_RESULT_CHARS`.
    cut_at: Option<u64>,
    /// The current line (0-based) and the part of it kept, if it is selected.
    line: u64,
    kept: Vec<u8>,
    longer: bool,
}

impl Selection {
    fn wanted(&self) -> bool {
        self.line >= self.start && self.end.is_none_or(|end| self.line < end) && self.cut_at.is_none()
    }

    fn take(&mut self, piece: &[u8]) {
        if !self.wanted() {
            return;
        }
        let room = LINE_BYTES_KEPT - self.kept.len();
        if piece.len() > room {
            self.longer = true;
        }
        self.kept.extend_from_slice(&piece[..piece.len().min(room)]);
    }

    fn end_line(&mut self) {
        if self.wanted() {
            if !self.longer && self.kept.last() == Some(&b'\r') {
                self.kept.pop();
            }
            let text = self.decoding.decode(&self.kept);
            let mut cut: String = text.chars().take(MAX_LINE_CHARS).collect();
            if self.longer || cut.len() < text.len() {
                cut.push_str("...");
            }
            let entry = format!("{:>6}→{cut}", self.line + 1);
            let added = entry.chars().count() + usize::from(!self.shown.is_empty());
            if self.shown_chars + added > MAX_RESULT_CHARS {
                self.cut_at = Some(self.line);
            } else {
                self.shown_chars += added;
                self.shown.push(entry);
            }
        }
        self.line += 1;
        self.kept.clear();
        self.longer = false;
    }
}

fn read_lines(
    mut reader: impl BufRead,
    decoding: Decoding,
    offset: u64,
    limit: Option<u64>,
    modified: Option<std::time::SystemTime>,
    cancel: &CancellationToken,
) -> Result<Outcome, Answer> {
    let mut selection = Selection {
        decoding,
        start: offset,
        end: limit.map(|limit| offset.saturating_add(limit)),
        shown: Vec::new(),
        shown_chars: 0,
        cut_at: None,
        line: 0,
        kept: Vec::new(),
        longer: false,
    };
    let mut hasher = Sha256::new();
    let mut len = 0u64;
    // Whether bytes came after the last line end: a last line without `\n` still counts.
    let mut open_line = false;
    loop {
        if cancel.is_cancelled() {
            return Err(aborted());
        }
        let chunk = match reader.fill_buf() {
            Ok(chunk) => chunk,
            Err(error) if error.kind() == ErrorKind::Interrupted => continue,
            Err(error) => return Err(failed(error)),
        };
        if chunk.is_empty() {
            break;
        }
        hasher.update(chunk);
        len += chunk.len() as u64;
        let mut rest = chunk;
        while let Some(at) = memchr::memchr(b'\n', rest) {
            selection.take(&rest[..at]);
            selection.end_line();
            rest = &rest[at + 1..];
        }
        selection.take(rest);
        open_line = !rest.is_empty();
        let consumed = chunk.len();
        reader.consume(consumed);
    }
    if open_line {
        selection.end_line();
    }
    let total = selection.line;
    let mut text = selection.shown.join("\n");
    if let Some(next) = selection.cut_at {
        text.push_str(&format!(
            "\n... (output cut at {MAX_RESULT_CHARS} characters; read on with offset {next})"
        ));
    } else if selection.shown.is_empty() && offset >= total {
        text = format!("The file has {total} lines; offset {offset} is past its end.");
    }
    Ok(Outcome {
        text,
        fingerprint: Fingerprint {
            len,
            modified,
            digest: hasher.finalize().into(),
        },
    })
}

#[cfg(test)]
mod tests {
    use std::io::Write;
    use std::time::Instant;

    use serde_json::json;
    use tokio_util::sync::CancellationToken;

    use super::super::super::Builtin;
    use super::super::testing::Room;
    use super::*;

    #[tokio::test]
    async fn a_whole_file_comes_back_raw() {
        let room = Room::new();
        let path = room.file("a.txt", "alpha\nbeta\ngamma\ndelta\n");
        let answer = room.run(Builtin::Read, json!({"file_path": path})).await;
        assert_eq!(answer, Answer::ok("alpha\nbeta\ngamma\ndelta\n"));
        let relative = room.run(Builtin::Read, json!({"file_path": "a.txt"})).await;
        assert_eq!(relative.text, "alpha\nbeta\ngamma\ndelta\n");
    }

    #[tokio::test]
    async fn a_range_comes_back_numbered() {
        let room = Room::new();
        let path = room.file("a.txt", "alpha\nbeta\r\ngamma\ndelta\n");
        let range = room
            .run(Builtin::Read, json!({"file_path": path, "offset": 1, "limit": 2}))
            .await;
        assert_eq!(range, Answer::ok("     2→beta\n     3→gamma"));
        let tail = room.run(Builtin::Read, json!({"file_path": path, "offset": 2})).await;
        assert_eq!(tail.text, "     3→gamma\n     4→delta");
        let head = room.run(Builtin::Read, json!({"file_path": path, "limit": 1})).await;
        assert_eq!(head.text, "     1→alpha");
        let past = room.run(Builtin::Read, json!({"file_path": path, "offset": 9})).await;
        assert_eq!(past, Answer::ok("The file has 4 lines; offset 9 is past its end."));
        room.file("b.txt", "no newline at the end");
        let last = room
            .run(Builtin::Read, json!({"file_path": "b.txt", "offset": 0}))
            .await;
        assert_eq!(last.text, "     1→no newline at the end");
    }

    #[tokio::test]
    async fn long_lines_are_cut_at_2000_characters() {
        let room = Room::new();
        let long = "é".repeat(2500);
        let exact = "x".repeat(2000);
        room.file("long.txt", format!("{long}\n{exact}\n"));
        let answer = room
            .run(Builtin::Read, json!({"file_path": "long.txt", "offset": 0}))
            .await;
        let expected = format!("     1→{}...\n     2→{exact}", "é".repeat(2000));
        assert_eq!(answer.text, expected);
    }

    #[tokio::test]
    async fn binary_files_come_back_base64() {
        let room = Room::new();
        let png = [0x89, b'P', b'N', b'G', 1, 2, 3];
        room.file("image.png", png);
        let answer = room.run(Builtin::Read, json!({"file_path": "image.png"})).await;
        assert_eq!(
            answer,
            Answer::ok("Binary file (7 bytes), base64-encoded:\niVBORwECAw==")
        );
        // No telling extension, but a NUL byte early on.
        room.file("data", b"abc\0def");
        let sniffed = room.run(Builtin::Read, json!({"file_path": "data", "offset": 0})).await;
        assert_eq!(sniffed.text, "Binary file (7 bytes), base64-encoded:\nYWJjAGRlZg==");
        // Asked for: plain base64, even of text.
        room.file("t.txt", "hi");
        let forced = room
            .run(Builtin::Read, json!({"file_path": "t.txt", "encoding": "base64"}))
            .await;
        assert_eq!(forced, Answer::ok("aGk="));
        let latin1 = room
            .run(Builtin::Read, json!({"file_path": "data", "encoding": "binary"}))
            .await;
        assert_eq!(latin1.text, "abc\0def");
    }

    #[tokio::test]
    async fn errors_are_named() {
        let room = Room::new();
        let root = room.root().display().to_string();
        let missing = room.run(Builtin::Read, json!({"file_path": "nope.txt"})).await;
        assert_eq!(missing, Answer::error(format!("File not found: {root}/nope.txt")));
        std::fs::create_dir(room.root().join("sub")).unwrap();
        let folder = room.run(Builtin::Read, json!({"file_path": "sub"})).await;
        assert_eq!(folder, Answer::error(format!("Cannot read a directory: {root}/sub")));
        let bad = room.run(Builtin::Read, json!({"file_path": "sub", "limit": 0})).await;
        assert!(bad
            .text
            .starts_with("Invalid input for Read: limit must be an integer from 1"));
        let path = room.file("locked.txt", "secret");
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(0o000)).unwrap();
        if std::fs::read(&path).is_err() {
            // Not when the tests run as root, who reads anything.
            let denied = room.run(Builtin::Read, json!({"file_path": "locked.txt"})).await;
            assert_eq!(
                denied,
                Answer::error("File read failed: Permission denied (os error 13)")
            );
        }
    }

    #[tokio::test]
    async fn a_symlink_out_of_the_root_is_refused_before_reading() {
        let room = Room::new();
        let outside = room.dir.path().join("secret.txt");
        std::fs::write(&outside, "secret").unwrap();
        std::os::unix::fs::symlink(&outside, room.root().join("link.txt")).unwrap();
        let answer = room.run(Builtin::Read, json!({"file_path": "link.txt"})).await;
        assert_eq!(
            answer,
            Answer::error("Filesystem path is outside authorized roots: link.txt")
        );
        assert!(room.state.read.get(&outside).is_none());
    }

    #[tokio::test]
    async fn a_cancelled_read_is_aborted() {
        let room = Room::new();
        room.file("a.txt", "a");
        let cancel = CancellationToken::new();
        cancel.cancel();
        let answer = room
            .run_with(Builtin::Read, json!({"file_path": "a.txt"}), cancel)
            .await;
        assert_eq!(answer, Answer::error("File read aborted"));
        assert!(room.state.read.get(&room.root().join("a.txt")).is_none());
    }

    #[tokio::test]
    async fn a_read_is_recorded_with_the_files_bytes() {
        let room = Room::new();
        let path = room.file("a.txt", "one\ntwo\n");
        room.run(Builtin::Read, json!({"file_path": "a.txt", "offset": 1, "limit": 1}))
            .await;
        let seen = room.state.read.get(&path).unwrap();
        assert_eq!(seen.digest, Fingerprint::of_bytes(b"one\ntwo\n", None).digest);
        assert_eq!(seen.len, 8);
    }

    #[tokio::test]
    async fn a_big_whole_read_is_refused_without_loading() {
        let room = Room::new();
        let path = room.file("big.txt", "x".repeat(MAX_RESULT_CHARS + 1));
        let answer = room.run(Builtin::Read, json!({"file_path": "big.txt"})).await;
        let expected = format!(
            "File is too large to read whole: {} is 500001 bytes, over the 500000-character limit of a whole \
             read. Use offset and limit to read it in parts.",
            path.display()
        );
        assert_eq!(answer, Answer::error(expected));
        // Multi-byte text is measured in characters: 400 000 of them in 800 000 bytes pass.
        room.file("wide.txt", "é".repeat(400_000));
        let wide = room.run(Builtin::Read, json!({"file_path": "wide.txt"})).await;
        assert!(!wide.failed);
        assert_eq!(wide.text.chars().count(), 400_000);
        // A sparse file far over the limit: answered from its size, never read.
        let sparse = File::create(room.root().join("sparse.txt")).unwrap();
        sparse.set_len(50 * 1024 * 1024 * 1024).unwrap();
        let started = Instant::now();
        let refused = room.run(Builtin::Read, json!({"file_path": "sparse.txt"})).await;
        assert!(refused.text.contains("is 53687091200 bytes"), "{}", refused.text);
        assert!(started.elapsed().as_millis() < 500);
        room.file("big.bin", vec![1u8; 375_001]);
        let binary = room.run(Builtin::Read, json!({"file_path": "big.bin"})).await;
        assert!(binary.text.contains("375001 bytes, 500004 characters in base64"));
    }

    #[tokio::test]
    async fn a_100_mb_file_is_read_near_its_end() {
        let room = Room::new();
        let path = room.root().join("huge.log");
        let mut file = std::io::BufWriter::new(File::create(&path).unwrap());
        // 1 048 576 lines of 100 bytes: "line 0000001 " and padding.
        let padding = "p".repeat(86);
        let lines = 1_048_576u64;
        for n in 1..=lines {
            writeln!(file, "line {n:07} {padding}").unwrap();
        }
        file.into_inner().unwrap().sync_all().unwrap();
        assert_eq!(std::fs::metadata(&path).unwrap().len(), 104_857_600);
        let started = Instant::now();
        let answer = room
            .run(
                Builtin::Read,
                json!({"file_path": path, "offset": lines - 2, "limit": 5}),
            )
            .await;
        let expected = format!(
            "{:>6}→line 1048575 {padding}\n{:>6}→line 1048576 {padding}",
            1_048_575, 1_048_576
        );
        assert_eq!(answer, Answer::ok(expected));
        assert!(started.elapsed().as_secs() < 5, "took {:?}", started.elapsed());
        assert_eq!(room.state.read.get(&path).unwrap().len, 104_857_600);
    }
}
