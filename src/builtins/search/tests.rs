use std::fs::{self, File};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use serde_json::{json, Value};
use tokio_util::sync::CancellationToken;

use crate::builtins::{Answer, Builtin, Call, State, Workspace};

fn workspace(root: &Path) -> Workspace {
    Workspace {
        roots: vec![root.to_path_buf()],
        cwd: Some(root.to_path_buf()),
    }
}

async fn run_with(tool: Builtin, workspace: &Workspace, input: Value, cancel: CancellationToken) -> Answer {
    let state = State::default();
    let call = Call {
        workspace,
        state: &state,
        cancel,
    };
    tool.run(input.as_object().unwrap(), call).await
}

async fn run(tool: Builtin, root: &Path, input: Value) -> Answer {
    run_with(tool, &workspace(root), input, CancellationToken::new()).await
}

/// Writes `files` (relative path, contents) under a fresh temporary folder.
fn tree(files: &[(&str, &str)]) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    for (path, contents) in files {
        write(&root, path, contents.as_bytes());
    }
    (dir, root)
}

fn write(root: &Path, path: &str, contents: &[u8]) {
    let path = root.join(path);
    fs::create_dir_all(path.parent().unwrap()).unwrap();
    fs::write(path, contents).unwrap();
}

/// Sets a file's mtime `seconds` after a fixed moment.
fn age(root: &Path, path: &str, seconds: u64) {
    let time = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000 + seconds);
    File::options()
        .write(true)
        .open(root.join(path))
        .unwrap()
        .set_modified(time)
        .unwrap();
}

fn glob_text(pattern: &str, paths: &[&str]) -> String {
    let list: Vec<String> = paths.iter().map(|path| format!("- {path}")).collect();
    format!(
        "Found {} file(s) matching \"{pattern}\":\n\n{}\n\nUse the relative_path values above for Read/Edit operations.",
        paths.len(),
        list.join("\n")
    )
}

fn parsed(answer: &Answer) -> Value {
    assert!(!answer.failed, "{}", answer.text);
    serde_json::from_str(&answer.text).unwrap()
}

fn file_paths(answer: &Answer) -> Vec<String> {
    parsed(answer)
        .as_array()
        .unwrap()
        .iter()
        .map(|entry| entry["file_path"].as_str().unwrap().to_string())
        .collect()
}

fn abs(root: &Path, path: &str) -> String {
    root.join(path).display().to_string()
}

// ---- Glob ----

#[tokio::test]
async fn glob_lists_files_newest_first_in_blades_text() {
    let (_dir, root) = tree(&[
        ("src/a.ts", ""),
        ("src/b.ts", ""),
        ("src/deep/c.ts", ""),
        ("README.md", ""),
    ]);
    age(&root, "src/a.ts", 10);
    age(&root, "src/b.ts", 30);
    age(&root, "src/deep/c.ts", 20);
    let answer = run(Builtin::Glob, &root, json!({"pattern": "**/*.ts"})).await;
    assert_eq!(
        answer,
        Answer::ok(glob_text("**/*.ts", &["src/b.ts", "src/deep/c.ts", "src/a.ts"]))
    );
}

#[tokio::test]
async fn glob_patterns_match_the_whole_relative_path() {
    let (_dir, root) = tree(&[
        ("README.md", ""),
        ("docs/guide.md", ""),
        ("src/lib.rs", ""),
        ("src/deep/mod.rs", ""),
    ]);
    // Without a `/` the pattern means the search folder itself, not any depth.
    let top = run(Builtin::Glob, &root, json!({"pattern": "*.md"})).await;
    assert_eq!(top.text, glob_text("*.md", &["README.md"]));
    let one_level = run(Builtin::Glob, &root, json!({"pattern": "src/*.rs"})).await;
    assert_eq!(one_level.text, glob_text("src/*.rs", &["src/lib.rs"]));
    let inside = run(Builtin::Glob, &root, json!({"pattern": "./src/**/*.rs", "path": "src"})).await;
    assert_eq!(inside.text, "No files found matching \"./src/**/*.rs\"");
    let from_src = run(Builtin::Glob, &root, json!({"pattern": "*.rs", "path": "src"})).await;
    assert_eq!(from_src.text, glob_text("*.rs", &["lib.rs"]));
    let absolute = format!("{}/**/mod.rs", root.display());
    let answer = run(Builtin::Glob, &root, json!({"pattern": absolute})).await;
    assert_eq!(answer.text, glob_text(&absolute, &["src/deep/mod.rs"]));
}

#[tokio::test]
async fn glob_skips_ignored_and_hidden_files_unless_named() {
    let (_dir, root) = tree(&[
        (".gitignore", "build/\n*.log\n"),
        ("keep.log.txt", ""),
        ("debug.log", ""),
        ("build/out.txt", ""),
        ("nested/.ignore", "secret.txt\n"),
        ("nested/secret.txt", ""),
        ("nested/open.txt", ""),
        (".hidden/inside.txt", ""),
        (".github/ci.yml", ""),
        (".git/config.txt", ""),
    ]);
    age(&root, "keep.log.txt", 2);
    age(&root, "nested/open.txt", 1);
    let answer = run(Builtin::Glob, &root, json!({"pattern": "**/*.txt"})).await;
    assert_eq!(answer.text, glob_text("**/*.txt", &["keep.log.txt", "nested/open.txt"]));
    let logs = run(Builtin::Glob, &root, json!({"pattern": "**/*.log"})).await;
    assert_eq!(logs.text, "No files found matching \"**/*.log\"");
    // A pattern spelling a dot-name asks for hidden entries; git's folder stays out.
    let hidden = run(Builtin::Glob, &root, json!({"pattern": ".github/*.yml"})).await;
    assert_eq!(hidden.text, glob_text(".github/*.yml", &[".github/ci.yml"]));
    let dotted = run(Builtin::Glob, &root, json!({"pattern": "**/.*/*.txt"})).await;
    assert_eq!(dotted.text, glob_text("**/.*/*.txt", &[".hidden/inside.txt"]));
}

#[tokio::test]
async fn glob_case_folding_is_the_default() {
    let (_dir, root) = tree(&[("Src/Main.TS", "")]);
    let folded = run(Builtin::Glob, &root, json!({"pattern": "src/*.ts"})).await;
    assert_eq!(folded.text, glob_text("src/*.ts", &["Src/Main.TS"]));
    let exact = run(
        Builtin::Glob,
        &root,
        json!({"pattern": "src/*.ts", "case_sensitive": true}),
    )
    .await;
    assert_eq!(exact.text, "No files found matching \"src/*.ts\"");
}

#[tokio::test]
async fn glob_lists_directories_after_files_when_asked() {
    let (_dir, root) = tree(&[("app/x.txt", ""), ("apple.txt", ""), ("apps/y.txt", "")]);
    age(&root, "apple.txt", 1);
    let files = run(Builtin::Glob, &root, json!({"pattern": "app*"})).await;
    assert_eq!(files.text, glob_text("app*", &["apple.txt"]));
    let all = run(
        Builtin::Glob,
        &root,
        json!({"pattern": "app*", "include_directories": true}),
    )
    .await;
    let lines: Vec<&str> = all.text.lines().filter(|line| line.starts_with("- ")).collect();
    assert_eq!(lines[0], "- apple.txt");
    let mut folders = lines[1..].to_vec();
    folders.sort();
    assert_eq!(folders, ["- app", "- apps"]);
}

#[tokio::test]
async fn glob_truncates_at_max_results() {
    let (_dir, root) = tree(&[
        ("1.txt", ""),
        ("2.txt", ""),
        ("3.txt", ""),
        ("4.txt", ""),
        ("5.txt", ""),
    ]);
    let answer = run(Builtin::Glob, &root, json!({"pattern": "*.txt", "max_results": 3})).await;
    let heading = "Found at least 3 file(s) matching \"*.txt\" (truncated):\n\n";
    assert!(answer.text.starts_with(heading), "{}", answer.text);
    assert!(answer
        .text
        .ends_with("\n\nUse the relative_path values above for Read/Edit operations."));
    assert_eq!(answer.text.lines().filter(|line| line.starts_with("- ")).count(), 3);
    // Exactly as many as asked for is a full answer.
    let full = run(Builtin::Glob, &root, json!({"pattern": "*.txt", "max_results": 5})).await;
    assert!(
        full.text.starts_with("Found 5 file(s) matching \"*.txt\":"),
        "{}",
        full.text
    );
}

#[tokio::test]
async fn glob_refusals() {
    let (dir, root) = tree(&[("inside/a.txt", ""), ("outside/b.txt", "")]);
    let inside = root.join("inside");
    let outside = run(Builtin::Glob, &inside, json!({"pattern": "*", "path": "../outside"})).await;
    assert_eq!(
        outside,
        Answer::error("Filesystem path is outside authorized roots: ../outside")
    );
    let no_cwd = Workspace {
        roots: vec![dir.path().into()],
        cwd: None,
    };
    let missing = run_with(
        Builtin::Glob,
        &no_cwd,
        json!({"pattern": "*"}),
        CancellationToken::new(),
    )
    .await;
    assert_eq!(
        missing,
        Answer::error("No search path provided and no filesystem working directory is available.")
    );
    let zero = run(Builtin::Glob, &root, json!({"pattern": "*", "max_results": 0})).await;
    assert!(zero.failed);
    assert!(zero
        .text
        .starts_with("Invalid input for Glob: max_results must be an integer from 1 to 1000 (got"));
    let bad = run(Builtin::Glob, &root, json!({"pattern": "a[b"})).await;
    assert!(bad.failed && bad.text.starts_with("Search failed: "), "{}", bad.text);
    let cancel = CancellationToken::new();
    cancel.cancel();
    let aborted = run_with(Builtin::Glob, &workspace(&root), json!({"pattern": "**/*"}), cancel).await;
    assert_eq!(aborted, Answer::error("File search aborted"));
}

// ---- Grep ----

#[tokio::test]
async fn grep_lists_matching_files_sorted_by_path() {
    let (_dir, root) = tree(&[
        (".gitignore", "ignored/\n"),
        ("b.txt", "needle\n"),
        ("a/deep/c.txt", "a needle here\n"),
        ("a/none.txt", "hay\n"),
        ("ignored/d.txt", "needle\n"),
        (".hidden.txt", "needle\n"),
    ]);
    write(&root, "blob.bin", b"needle\0binary\n");
    let answer = run(Builtin::Grep, &root, json!({"pattern": "needle"})).await;
    assert_eq!(
        parsed(&answer),
        json!([{"file_path": abs(&root, "a/deep/c.txt")}, {"file_path": abs(&root, "b.txt")}])
    );
    let none = run(Builtin::Grep, &root, json!({"pattern": "absent"})).await;
    assert_eq!(none, Answer::ok("[]"));
}

#[tokio::test]
async fn grep_content_lines_with_and_without_numbers() {
    let (_dir, root) = tree(&[("f.txt", "one\ntwo match\nthree\nfour match\r\n")]);
    let answer = run(
        Builtin::Grep,
        &root,
        json!({"pattern": "match", "output_mode": "content"}),
    )
    .await;
    let path = abs(&root, "f.txt");
    assert_eq!(
        parsed(&answer),
        json!([
            {"file_path": path, "line_number": 2, "content": "two match"},
            {"file_path": path, "line_number": 4, "content": "four match"}
        ])
    );
    // Pretty-printed with two spaces, as Blade sends JSON.
    assert!(
        answer.text.starts_with("[\n  {\n    \"file_path\": "),
        "{}",
        answer.text
    );
    let bare = run(
        Builtin::Grep,
        &root,
        json!({"pattern": "four", "output_mode": "content", "-n": false}),
    )
    .await;
    assert_eq!(parsed(&bare), json!([{"file_path": path, "content": "four match"}]));
}

#[tokio::test]
async fn grep_context_lines() {
    let (_dir, root) = tree(&[("f.txt", "1\n2\n3 hit\n4\n5\n6\n7 hit\n8\n")]);
    let lines = |answer: &Answer| -> Vec<(u64, String)> {
        parsed(answer)
            .as_array()
            .unwrap()
            .iter()
            .map(|entry| {
                (
                    entry["line_number"].as_u64().unwrap(),
                    entry["content"].as_str().unwrap().to_string(),
                )
            })
            .collect()
    };
    let numbers = |answer: &Answer| lines(answer).into_iter().map(|(n, _)| n).collect::<Vec<_>>();
    let around = run(
        Builtin::Grep,
        &root,
        json!({"pattern": "hit", "output_mode": "content", "-C": 1}),
    )
    .await;
    assert_eq!(numbers(&around), [2, 3, 4, 6, 7, 8]);
    assert_eq!(lines(&around)[0], (2, "2".to_string()));
    let after = run(
        Builtin::Grep,
        &root,
        json!({"pattern": "hit", "output_mode": "content", "-A": 2}),
    )
    .await;
    assert_eq!(numbers(&after), [3, 4, 5, 7, 8]);
    let before = run(
        Builtin::Grep,
        &root,
        json!({"pattern": "7", "output_mode": "content", "-B": 2}),
    )
    .await;
    assert_eq!(numbers(&before), [5, 6, 7]);
    // `-C` wins over `-A`/`-B`; context is for `content` only.
    let both = run(
        Builtin::Grep,
        &root,
        json!({"pattern": "7", "output_mode": "content", "-C": 0, "-B": 3}),
    )
    .await;
    assert_eq!(numbers(&both), [7]);
    let listed = run(Builtin::Grep, &root, json!({"pattern": "hit", "-C": 3})).await;
    assert_eq!(file_paths(&listed), [abs(&root, "f.txt")]);
}

#[tokio::test]
async fn grep_case_and_multiline() {
    let (_dir, root) = tree(&[("f.rs", "struct Point {\n    x: i32,\n    y: i32,\n}\nSTRUCT\n")]);
    let exact = run(
        Builtin::Grep,
        &root,
        json!({"pattern": "STRUCT", "output_mode": "count"}),
    )
    .await;
    assert_eq!(parsed(&exact), json!([{"file_path": abs(&root, "f.rs"), "count": 1}]));
    let folded = run(
        Builtin::Grep,
        &root,
        json!({"pattern": "STRUCT", "output_mode": "count", "-i": true}),
    )
    .await;
    assert_eq!(parsed(&folded)[0]["count"], 2);
    let single = run(Builtin::Grep, &root, json!({"pattern": "Point \\{.*y"})).await;
    assert_eq!(single, Answer::ok("[]"));
    let spanning = run(
        Builtin::Grep,
        &root,
        json!({"pattern": "Point \\{.*y", "multiline": true, "output_mode": "content"}),
    )
    .await;
    let numbers: Vec<u64> = parsed(&spanning)
        .as_array()
        .unwrap()
        .iter()
        .map(|entry| entry["line_number"].as_u64().unwrap())
        .collect();
    assert_eq!(numbers, [1, 2, 3]);
    assert_eq!(parsed(&spanning)[2]["content"], "    y: i32,");
}

#[tokio::test]
async fn grep_counts_matching_lines_per_file() {
    let (_dir, root) = tree(&[("a.txt", "x\nx x\ny\n"), ("b.txt", "x\n"), ("c.txt", "y\n")]);
    let answer = run(Builtin::Grep, &root, json!({"pattern": "x", "output_mode": "count"})).await;
    assert_eq!(
        parsed(&answer),
        json!([
            {"file_path": abs(&root, "a.txt"), "count": 2},
            {"file_path": abs(&root, "b.txt"), "count": 1}
        ])
    );
}

#[tokio::test]
async fn grep_head_limit_and_offset_page_through_the_entries() {
    let (_dir, root) = tree(&[("a.txt", "m1\nm2\nm3\n"), ("b.txt", "m4\nm5\n")]);
    let page = |offset: u64, limit: u64| {
        let root = root.clone();
        async move {
            let answer = run(
                Builtin::Grep,
                &root,
                json!({"pattern": "m", "output_mode": "content", "offset": offset, "head_limit": limit}),
            )
            .await;
            parsed(&answer)
                .as_array()
                .unwrap()
                .iter()
                .map(|entry| entry["content"].as_str().unwrap().to_string())
                .collect::<Vec<_>>()
        }
    };
    assert_eq!(page(0, 2).await, ["m1", "m2"]);
    assert_eq!(page(2, 2).await, ["m3", "m4"]);
    assert_eq!(page(4, 10).await, ["m5"]);
    assert!(page(9, 10).await.is_empty());
    let files = run(
        Builtin::Grep,
        &root,
        json!({"pattern": "m", "head_limit": 1, "offset": 1}),
    )
    .await;
    assert_eq!(file_paths(&files), [abs(&root, "b.txt")]);
    let zero = run(Builtin::Grep, &root, json!({"pattern": "m", "head_limit": 0})).await;
    assert!(zero.failed);
    assert!(zero
        .text
        .starts_with("Invalid input for Grep: head_limit must be an integer from 1 to 1000000 (got"));
}

#[tokio::test]
async fn grep_filters_by_glob_and_type() {
    let (_dir, root) = tree(&[
        ("src/lib.rs", "needle\n"),
        ("src/deep/mod.rs", "needle\n"),
        ("web/app.ts", "needle\n"),
        ("notes.md", "needle\n"),
    ]);
    let rust = run(Builtin::Grep, &root, json!({"pattern": "needle", "type": "rust"})).await;
    assert_eq!(
        file_paths(&rust),
        [abs(&root, "src/deep/mod.rs"), abs(&root, "src/lib.rs")]
    );
    // `rg --glob`: a glob without `/` matches at any depth.
    let ts = run(Builtin::Grep, &root, json!({"pattern": "needle", "glob": "*.{ts,md}"})).await;
    assert_eq!(file_paths(&ts), [abs(&root, "notes.md"), abs(&root, "web/app.ts")]);
    let not_rust = run(Builtin::Grep, &root, json!({"pattern": "needle", "glob": "!*.rs"})).await;
    assert_eq!(
        file_paths(&not_rust),
        [abs(&root, "notes.md"), abs(&root, "web/app.ts")]
    );
    let unknown = run(Builtin::Grep, &root, json!({"pattern": "needle", "type": "nope"})).await;
    assert_eq!(
        unknown,
        Answer::error("Search execution failed: unrecognized file type: nope")
    );
}

#[tokio::test]
async fn grep_searches_one_file_given_as_path() {
    let (_dir, root) = tree(&[
        (".gitignore", "skipped.txt\n"),
        ("skipped.txt", "x\nneedle\n"),
        ("other.txt", "needle\n"),
    ]);
    let answer = run(
        Builtin::Grep,
        &root,
        json!({"pattern": "needle", "path": "skipped.txt", "output_mode": "content"}),
    )
    .await;
    assert_eq!(
        parsed(&answer),
        json!([{"file_path": abs(&root, "skipped.txt"), "line_number": 2, "content": "needle"}])
    );
}

#[tokio::test]
async fn grep_refusals() {
    let (dir, root) = tree(&[("inside/a.txt", "x\n"), ("outside/b.txt", "x\n")]);
    let bad = run(Builtin::Grep, &root, json!({"pattern": "(unclosed"})).await;
    assert!(bad.failed, "{}", bad.text);
    assert!(
        bad.text.starts_with("Search execution failed: regex parse error"),
        "{}",
        bad.text
    );
    assert!(bad.text.contains("unclosed group"), "{}", bad.text);
    let inside = root.join("inside");
    let outside = run(
        Builtin::Grep,
        &inside,
        json!({"pattern": "x", "path": "../outside/b.txt"}),
    )
    .await;
    assert_eq!(
        outside,
        Answer::error("Filesystem path is outside authorized roots: ../outside/b.txt")
    );
    let missing = run(Builtin::Grep, &root, json!({"pattern": "x", "path": "nope"})).await;
    assert_eq!(missing, Answer::error("Search path does not exist: nope"));
    let no_cwd = Workspace {
        roots: vec![dir.path().into()],
        cwd: None,
    };
    let no_path = run_with(
        Builtin::Grep,
        &no_cwd,
        json!({"pattern": "x"}),
        CancellationToken::new(),
    )
    .await;
    assert_eq!(
        no_path,
        Answer::error("No search path provided and no filesystem working directory is available.")
    );
    let mode = run(Builtin::Grep, &root, json!({"pattern": "x", "output_mode": "lines"})).await;
    assert!(mode.failed);
    assert!(mode
        .text
        .starts_with("Invalid input for Grep: output_mode must be one of content, files_with_matches, count (got"));
    let cancel = CancellationToken::new();
    cancel.cancel();
    let aborted = run_with(Builtin::Grep, &workspace(&root), json!({"pattern": "x"}), cancel).await;
    assert_eq!(aborted, Answer::error("Search aborted"));
}

#[tokio::test]
async fn grep_cuts_long_lines_around_the_match() {
    let line = format!("{}needle{}", "a".repeat(3000), "b".repeat(3000));
    let (_dir, root) = tree(&[("min.js", line.as_str())]);
    let answer = run(
        Builtin::Grep,
        &root,
        json!({"pattern": "needle", "output_mode": "content"}),
    )
    .await;
    let content = parsed(&answer)[0]["content"].as_str().unwrap().to_string();
    let expected = format!("...{}needle{}...", "a".repeat(100), "b".repeat(394));
    assert_eq!(content, expected);
}

#[tokio::test]
async fn grep_caps_the_answer_with_a_note() {
    let body = "match this rather long line of text to fill the answer quickly\n".repeat(3000);
    let (_dir, root) = tree(&[("big.txt", body.as_str())]);
    let answer = run(
        Builtin::Grep,
        &root,
        json!({"pattern": "match", "output_mode": "content"}),
    )
    .await;
    assert!(answer.text.len() < 101_000, "{}", answer.text.len());
    let entries = parsed(&answer);
    let entries = entries.as_array().unwrap();
    let note = entries.last().unwrap()["note"].as_str().unwrap();
    let shown = entries.len() - 1;
    assert_eq!(
        note,
        format!(
            "Output truncated: showing {shown} of 3000 entries (the answer is limited to 100000 characters). \
             Narrow the search with path, glob or type, or page through it with head_limit and offset."
        )
    );
    assert_eq!(entries[shown - 1]["line_number"], shown);
}

#[test]
fn schemas_leave_defaulted_fields_optional() {
    let glob = Builtin::Glob.schema();
    assert_eq!(glob["required"], json!(["pattern"]));
    assert_eq!(glob["additionalProperties"], false);
    assert_eq!(glob["properties"]["max_results"]["default"], 100);
    let grep = Builtin::Grep.schema();
    assert_eq!(grep["required"], json!(["pattern"]));
    assert_eq!(grep["properties"]["output_mode"]["default"], "files_with_matches");
    assert_eq!(grep["properties"]["-n"]["default"], true);
    assert!(Builtin::Grep
        .description()
        .starts_with("A powerful search tool built on ripgrep"));
    assert!(Builtin::Glob
        .description()
        .starts_with("Fast file pattern matching tool"));
}

#[tokio::test]
async fn grep_stops_at_its_entry_ceiling_and_says_so() {
    let body = "m\n".repeat(10_050);
    let (_dir, root) = tree(&[("many.txt", body.as_str())]);
    let answer = run(Builtin::Grep, &root, json!({"pattern": "m", "output_mode": "content"})).await;
    let entries = parsed(&answer);
    let entries = entries.as_array().unwrap();
    let shown = entries.len() - 1;
    assert_eq!(
        entries[shown]["note"],
        format!(
            "Output truncated: showing {shown} of at least 10000 entries (the answer is limited to 100000 characters). \
             Narrow the search with path, glob or type, or page through it with head_limit and offset."
        )
    );
}

#[tokio::test]
async fn symlinks_are_not_followed_out_of_the_folder() {
    let (_dir, root) = tree(&[("inside/own.txt", "needle\n"), ("outside/secret.txt", "needle\n")]);
    std::os::unix::fs::symlink(root.join("outside"), root.join("inside/link")).unwrap();
    std::os::unix::fs::symlink(root.join("outside/secret.txt"), root.join("inside/file-link.txt")).unwrap();
    let inside = root.join("inside");
    let found = run(Builtin::Grep, &inside, json!({"pattern": "needle"})).await;
    assert_eq!(file_paths(&found), [abs(&root, "inside/own.txt")]);
    let listed = run(Builtin::Glob, &inside, json!({"pattern": "**/*.txt"})).await;
    assert_eq!(listed.text, glob_text("**/*.txt", &["own.txt"]));
}
