//! Edit: replaces an exact string, once (it must then be unique) or everywhere. A miss or an
//! ambiguous match leaves the file as it was and tells the model how to retry.

use std::ops::Range;

use serde_json::{json, Map, Value};
use similar::TextDiff;

use super::super::input::Fields;
use super::super::paths::authorize;
use super::super::{Answer, Call};
use super::blocking;
use super::seen::{guard, Fingerprint};
use super::write::replace_file;

/// The excerpt of a not-found answer: this many lines either side of the closest match.
const EXCERPT_RADIUS: usize = 10;
/// The closest-match search compares at most this many windows of lines, each cut to this many
/// characters, so a miss in a long file stays quick.
const FUZZY_WINDOWS: usize = 5000;
const FUZZY_CHARS: usize = 120;

/// A successful edit, for the answer.
struct Edited {
    fingerprint: Fingerprint,
    replacements: usize,
    total_matches: usize,
    diff: String,
}

pub(super) async fn edit(input: &Map<String, Value>, call: &Call<'_>) -> Answer {
    let fields = Fields::of("Edit", input);
    let parsed = (|| {
        let file_path = fields.required_string("file_path")?;
        let old_string = fields.required_string("old_string")?;
        let new_string = fields.required_string("new_string")?;
        let replace_all = fields.bool("replace_all", false)?;
        Ok::<_, Answer>((file_path, old_string, new_string, replace_all))
    })();
    let (file_path, old_string, new_string, replace_all) = match parsed {
        Ok(parsed) => parsed,
        Err(answer) => return answer,
    };
    if old_string.is_empty() {
        return Answer::error("old_string cannot be empty");
    }
    if old_string == new_string {
        return Answer::error("New string is identical; no replacement needed");
    }
    let authorized = match authorize(file_path, call.workspace) {
        Ok(authorized) => authorized,
        Err(answer) => return answer,
    };
    let path = authorized.path;
    if !authorized.exists {
        return not_found(&path);
    }
    let then = call.state.read.get(&path);
    let cancel = call.cancel.clone();
    let (target, old_string, new_string) = (path.clone(), old_string.to_string(), new_string.to_string());
    let edited = blocking("File edit", move || {
        if cancel.is_cancelled() {
            return Err(Answer::error("File edit aborted"));
        }
        let failed = |error: std::io::Error| Answer::error(format!("File edit failed: {error}"));
        let metadata = match std::fs::metadata(&target) {
            Ok(metadata) => metadata,
            Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Err(not_found(&target)),
            Err(error) => return Err(failed(error)),
        };
        if metadata.is_dir() {
            return Err(Answer::error(format!(
                "File edit failed: {} is a directory",
                target.display()
            )));
        }
        let bytes = std::fs::read(&target).map_err(failed)?;
        guard(
            then.as_ref(),
            &Fingerprint::of_bytes(&bytes, metadata.modified().ok()),
            "editing",
        )?;
        let Ok(content) = String::from_utf8(bytes) else {
            return Err(Answer::error("File edit failed: the file is not UTF-8 text"));
        };
        let matches = find(&content, &old_string);
        if matches.is_empty() {
            return Err(Answer::error(not_found_text(
                &content,
                &old_string,
                &target.display().to_string(),
            )));
        }
        if matches.len() > 1 && !replace_all {
            return Err(Answer::error(ambiguous_text(&content, &matches)));
        }
        let updated = splice(&content, &matches, &new_string);
        let fingerprint = replace_file(&target, updated.as_bytes(), false, "File edit", &cancel)?;
        let name = target.display().to_string();
        let diff = TextDiff::from_lines(&content, &updated)
            .unified_diff()
            .context_radius(3)
            .header(&name, &name)
            .to_string();
        Ok(Edited {
            fingerprint,
            replacements: matches.len(),
            total_matches: matches.len(),
            diff,
        })
    })
    .await;
    match edited {
        Ok(edited) => {
            let mut answer = Answer::json(&json!({
                "file_path": path.display().to_string(),
                "replacements": edited.replacements,
                "total_matches": edited.total_matches,
            }));
            answer.display = Some(Value::String(edited.diff));
            // The edited file counts as read: the model may edit it again.
            call.state.read.record(path, edited.fingerprint);
            answer
        }
        Err(answer) => answer,
    }
}

fn not_found(path: &std::path::Path) -> Answer {
    Answer::error(format!("File not found: {}", path.display()))
}

/// The curly quotes a model or an editor may have put where the other kind stands.
fn is_curly(c: char) -> bool {
    matches!(c, '\u{2018}' | '\u{2019}' | '\u{201C}' | '\u{201D}')
}

fn fold_quotes(text: &str) -> String {
    text.chars()
        .map(|c| match c {
            '\u{2018}' | '\u{2019}' => '\'',
            '\u{201C}' | '\u{201D}' => '"',
            other => other,
        })
        .collect()
}

/// Where `old` stands in `content`: its non-overlapping exact occurrences, as byte ranges.
///
/// Only when there is none, curly quotes are taken for straight ones on both sides (so a
/// straight `"` in `old` finds a `“` in the file, and the reverse): the ranges are then those of
/// the file's own text, which is what gets replaced. Blade's other guesses (undoing escapes,
/// shifting indentation) are left out: they can pick text the model did not mean.
fn find(content: &str, old: &str) -> Vec<Range<usize>> {
    let exact: Vec<Range<usize>> = content
        .match_indices(old)
        .map(|(start, found)| start..start + found.len())
        .collect();
    if !exact.is_empty() || !(content.chars().any(is_curly) || old.chars().any(is_curly)) {
        return exact;
    }
    let (folded_content, folded_old) = (fold_quotes(content), fold_quotes(old));
    // Each curly quote is three bytes in the file and one once folded: a folded offset maps
    // back by adding two per curly quote before it.
    let mut curly_before = Vec::new();
    let mut folded_at = 0;
    for c in content.chars() {
        if is_curly(c) {
            curly_before.push(folded_at);
            folded_at += 1;
        } else {
            folded_at += c.len_utf8();
        }
    }
    let original = |folded: usize| folded + 2 * curly_before.partition_point(|&at| at < folded);
    folded_content
        .match_indices(&folded_old)
        .map(|(start, found)| original(start)..original(start + found.len()))
        .collect()
}

fn splice(content: &str, matches: &[Range<usize>], new: &str) -> String {
    let mut updated = String::with_capacity(content.len() + matches.len() * new.len());
    let mut copied = 0;
    for range in matches {
        updated.push_str(&content[copied..range.start]);
        updated.push_str(new);
        copied = range.end;
    }
    updated.push_str(&content[copied..]);
    updated
}

/// The 1-based line each match starts on.
fn lines_of(content: &str, matches: &[Range<usize>]) -> Vec<usize> {
    let mut lines = Vec::with_capacity(matches.len());
    let (mut line, mut counted) = (1, 0);
    for range in matches {
        line += memchr::memchr_iter(b'\n', &content.as_bytes()[counted..range.start]).count();
        counted = range.start;
        lines.push(line);
    }
    lines
}

fn ambiguous_text(content: &str, matches: &[Range<usize>]) -> String {
    let count = matches.len();
    let mut text =
        format!("⚠️  EDIT PAUSED: old_string matches {count} locations (must be unique).\n\n**Matches found at:**\n");
    for (k, line) in lines_of(content, matches).iter().enumerate() {
        text.push_str(&format!("  {}. Line {line}\n", k + 1));
    }
    text.push_str(&format!(
        "\nAdd a few of the surrounding lines to old_string so that it matches one place only, or set \
         replace_all to true to change all {count}. The file was not changed."
    ));
    text
}

/// A window of the file's lines like the text looked for, with how alike they are (0 to 1).
struct Near {
    line: usize,
    text: String,
    similarity: f32,
}

fn cut(text: &str, chars: usize) -> &str {
    text.char_indices().nth(chars).map_or(text, |(at, _)| &text[..at])
}

/// Up to three windows of as many lines as `old` has that look most like it.
fn closest(lines: &[&str], old: &str) -> Vec<Near> {
    let size = old.lines().count().max(1);
    let wanted = cut(old.trim(), FUZZY_CHARS);
    let mut near: Vec<Near> = (0..lines.len().saturating_sub(size - 1))
        .take(FUZZY_WINDOWS)
        .filter_map(|start| {
            let text = lines[start..start + size].join("\n");
            let similarity = TextDiff::from_chars(wanted, cut(text.trim(), FUZZY_CHARS)).ratio();
            (similarity > 0.5).then_some(Near {
                line: start + 1,
                text,
                similarity,
            })
        })
        .collect();
    near.sort_by(|a, b| b.similarity.total_cmp(&a.similarity).then(a.line.cmp(&b.line)));
    near.truncate(3);
    near
}

fn not_found_text(content: &str, old: &str, path: &str) -> String {
    let lines: Vec<&str> = content.lines().collect();
    let total = lines.len();
    let mut text = format!("String not found in file.\n\nFile: {path}\nTotal lines: {total}\n\n");
    let preview = if old.chars().count() > 300 {
        format!("{}\n... (truncated)", cut(old, 300))
    } else {
        old.to_string()
    };
    text.push_str(&format!("You tried to match:\n{preview}\n\n"));
    let near = closest(&lines, old);
    let (first, last) = match near.first() {
        Some(best) => (
            (best.line - 1).saturating_sub(EXCERPT_RADIUS),
            (best.line + EXCERPT_RADIUS).min(total),
        ),
        None => (0, total.min(2 * EXCERPT_RADIUS)),
    };
    let excerpt: Vec<String> = lines[first..last]
        .iter()
        .enumerate()
        .map(|(k, line)| {
            let shown = cut(line, 2000);
            let more = if shown.len() < line.len() { "..." } else { "" };
            format!("    {:>4}: {shown}{more}", first + k + 1)
        })
        .collect();
    if total == 0 {
        text.push_str("The file is empty.\n\n");
    } else {
        let around = if near.is_empty() {
            "File content preview"
        } else {
            "File content around the closest match"
        };
        text.push_str(&format!(
            "{around} (lines {}-{last}):\n{}\n\n",
            first + 1,
            excerpt.join("\n")
        ));
    }
    if !near.is_empty() {
        text.push_str("Similar text found:\n");
        for (k, window) in near.iter().enumerate() {
            let shown = cut(&window.text, 100);
            let more = if shown.len() < window.text.len() { "..." } else { "" };
            text.push_str(&format!(
                "  {}. Line {} (similarity: {}%)\n     {}{more}\n",
                k + 1,
                window.line,
                (window.similarity * 100.0).round(),
                shown.replace('\n', "\\n"),
            ));
        }
        text.push('\n');
    }
    text.push_str(
        "Suggestions:\n\
         1. Read the file again to see its current content.\n\
         2. Check whitespace, indentation, line breaks and quotes against the file.\n\
         3. Copy old_string from Read's output without the line number and arrow before each line.\n\
         4. If the file is not shaped as you expected, rewrite it with Write instead.",
    );
    text
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use tokio_util::sync::CancellationToken;

    use super::super::super::Builtin;
    use super::super::testing::Room;
    use super::*;

    async fn read(room: &Room, name: &str) {
        let answer = room.run(Builtin::Read, json!({"file_path": name})).await;
        assert!(!answer.failed, "{}", answer.text);
    }

    #[tokio::test]
    async fn a_unique_match_is_replaced_with_a_diff() {
        let room = Room::new();
        let path = room.file("a.rs", "fn main() {\n    let x = 1;\n    println!(\"{x}\");\n}\n");
        read(&room, "a.rs").await;
        let answer = room
            .run(
                Builtin::Edit,
                json!({"file_path": "a.rs", "old_string": "let x = 1;", "new_string": "let x = 2;"}),
            )
            .await;
        assert!(!answer.failed, "{}", answer.text);
        let value: Value = serde_json::from_str(&answer.text).unwrap();
        assert_eq!(
            value,
            json!({"file_path": path.display().to_string(), "replacements": 1, "total_matches": 1})
        );
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "fn main() {\n    let x = 2;\n    println!(\"{x}\");\n}\n"
        );
        let name = path.display();
        let expected = format!(
            "--- {name}\n+++ {name}\n@@ -1,4 +1,4 @@\n fn main() {{\n-    let x = 1;\n+    let x = 2;\n     \
             println!(\"{{x}}\");\n }}\n"
        );
        assert_eq!(answer.display, Some(Value::String(expected)));
        // The edit counts as read: a second edit needs no new Read.
        let again = room
            .run(
                Builtin::Edit,
                json!({"file_path": "a.rs", "old_string": "2;", "new_string": "3;"}),
            )
            .await;
        assert!(!again.failed, "{}", again.text);
    }

    #[tokio::test]
    async fn input_and_guard_errors() {
        let room = Room::new();
        let path = room.file("a.txt", "one two\n");
        let edit = |old: &str, new: &str| json!({"file_path": "a.txt", "old_string": old, "new_string": new});
        assert_eq!(
            room.run(Builtin::Edit, edit("", "x")).await,
            Answer::error("old_string cannot be empty")
        );
        assert_eq!(
            room.run(Builtin::Edit, edit("one", "one")).await,
            Answer::error("New string is identical; no replacement needed")
        );
        assert_eq!(
            room.run(Builtin::Edit, edit("one", "1")).await,
            Answer::error("You must use the Read tool before editing this existing file.")
        );
        read(&room, "a.txt").await;
        std::fs::write(&path, "one two three\n").unwrap();
        let changed = room.run(Builtin::Edit, edit("one", "1")).await;
        assert!(changed.text.starts_with(
            "The file changed since it was read. Read it again before editing.\n\nDetails: the file is now 14 \
             bytes (8 when read)"
        ));
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "one two three\n");
        let missing = room
            .run(
                Builtin::Edit,
                json!({"file_path": "none.txt", "old_string": "a", "new_string": "b"}),
            )
            .await;
        assert_eq!(
            missing,
            Answer::error(format!("File not found: {}", room.root().join("none.txt").display()))
        );
        let cancel = CancellationToken::new();
        cancel.cancel();
        let aborted = room.run_with(Builtin::Edit, edit("one", "1"), cancel).await;
        assert_eq!(aborted, Answer::error("File edit aborted"));
    }

    #[tokio::test]
    async fn several_matches_pause_the_edit() {
        let room = Room::new();
        let content = "a\nfoo\nb\nfoo foo\n";
        let path = room.file("a.txt", content);
        read(&room, "a.txt").await;
        let answer = room
            .run(
                Builtin::Edit,
                json!({"file_path": "a.txt", "old_string": "foo", "new_string": "bar"}),
            )
            .await;
        assert_eq!(
            answer,
            Answer::error(
                "⚠️  EDIT PAUSED: old_string matches 3 locations (must be unique).\n\n**Matches found at:**\n  \
                 1. Line 2\n  2. Line 4\n  3. Line 4\n\nAdd a few of the surrounding lines to old_string so that \
                 it matches one place only, or set replace_all to true to change all 3. The file was not changed."
            )
        );
        assert_eq!(std::fs::read(&path).unwrap(), content.as_bytes());
        let all = room
            .run(
                Builtin::Edit,
                json!({"file_path": "a.txt", "old_string": "foo", "new_string": "bar", "replace_all": true}),
            )
            .await;
        let value: Value = serde_json::from_str(&all.text).unwrap();
        assert_eq!(value["replacements"], 3);
        assert_eq!(value["total_matches"], 3);
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "a\nbar\nb\nbar bar\n");
        // Matches do not overlap: "aaaa" holds "aa" twice.
        room.file("b.txt", "aaaa");
        read(&room, "b.txt").await;
        let pairs = room
            .run(
                Builtin::Edit,
                json!({"file_path": "b.txt", "old_string": "aa", "new_string": "b", "replace_all": true}),
            )
            .await;
        assert!(pairs.text.contains("\"replacements\": 2"), "{}", pairs.text);
        assert_eq!(std::fs::read_to_string(room.root().join("b.txt")).unwrap(), "bb");
    }

    #[tokio::test]
    async fn a_miss_shows_the_file_around_the_closest_text() {
        let room = Room::new();
        let content: String = (1..=40).map(|n| format!("line number {n}\n")).collect();
        let path = room.file("a.txt", &content);
        read(&room, "a.txt").await;
        let answer = room
            .run(
                Builtin::Edit,
                json!({"file_path": "a.txt", "old_string": "line numbr 30", "new_string": "x"}),
            )
            .await;
        assert!(answer.failed);
        let excerpt: Vec<String> = (20..=40).map(|n| format!("    {n:>4}: line number {n}")).collect();
        let expected = format!(
            "String not found in file.\n\nFile: {}\nTotal lines: 40\n\nYou tried to match:\nline numbr 30\n\n\
             File content around the closest match (lines 20-40):\n{}\n\nSimilar text found:\n  1. Line 30 \
             (similarity: 96%)\n     line number 30\n",
            path.display(),
            excerpt.join("\n")
        );
        assert!(answer.text.starts_with(&expected), "{}", answer.text);
        assert!(answer
            .text
            .ends_with("4. If the file is not shaped as you expected, rewrite it with Write instead."));
        assert_eq!(std::fs::read(&path).unwrap(), content.as_bytes());
        let nothing = room
            .run(
                Builtin::Edit,
                json!({"file_path": "a.txt", "old_string": "zzzzzzzz", "new_string": "x"}),
            )
            .await;
        assert!(nothing
            .text
            .contains("File content preview (lines 1-20):\n       1: line number 1\n"));
        assert!(!nothing.text.contains("Similar text found"));
        assert_eq!(std::fs::read(&path).unwrap(), content.as_bytes());
    }

    #[tokio::test]
    async fn quotes_match_either_way() {
        let room = Room::new();
        let path = room.file("a.md", "He said “hi” and ‘bye’.\nPlain \"quotes\" here.\n");
        read(&room, "a.md").await;
        let curly = room
            .run(
                Builtin::Edit,
                json!({"file_path": "a.md", "old_string": "said \"hi\"", "new_string": "said \"hello\""}),
            )
            .await;
        assert!(!curly.failed, "{}", curly.text);
        let straight = room
            .run(
                Builtin::Edit,
                json!({"file_path": "a.md", "old_string": "“quotes”", "new_string": "'quotes'"}),
            )
            .await;
        assert!(!straight.failed, "{}", straight.text);
        assert_eq!(
            std::fs::read_to_string(&path).unwrap(),
            "He said \"hello\" and ‘bye’.\nPlain 'quotes' here.\n"
        );
    }

    #[test]
    fn folded_matches_map_back_to_the_files_bytes() {
        let content = "é“a” x “a”";
        let ranges = find(content, "\"a\"");
        let found: Vec<&str> = ranges.iter().map(|range| &content[range.clone()]).collect();
        assert_eq!(found, ["“a”", "“a”"]);
        assert!(find("abc", "\"").is_empty());
    }
}
