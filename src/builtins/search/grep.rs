//! Grep: the files under the search folder (or the one file given) whose contents match a
//! regular expression, as a JSON array sorted by path: `files_with_matches` lists the files,
//! `content` the matching lines (with their context), `count` the matching lines per file.

use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};

use grep_matcher::Matcher;
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use grep_searcher::{BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkMatch};
use ignore::overrides::OverrideBuilder;
use ignore::types::TypesBuilder;
use ignore::WalkState;
use serde_json::{json, Map, Value};
use tokio_util::sync::CancellationToken;

use super::walk::{off_the_workers, walker};
use super::MISSING_PATH;
use crate::builtins::input::Fields;
use crate::builtins::paths;
use crate::builtins::{Answer, Call};

const ABORTED: &str = "Search aborted";

/// The answer's size limit (Blade's `maxResultSizeChars` for Grep); entries past it are left
/// out and a note says so.
const MAX_OUTPUT_CHARS: usize = 100_000;

/// A longer line is cut to this many characters around its first match (minified files).
const MAX_LINE_CHARS: usize = 500;

/// How much of a long line is shown before its first match.
const CHARS_BEFORE_MATCH: usize = 100;

/// Without `head_limit`, the search stops after this many entries past `offset`: more could
/// never fit in the answer.
const ENTRY_CEILING: usize = 10_000;

/// Largest value accepted for the counts (`-A`, `head_limit`, `offset`, …).
const MAX_COUNT: u64 = 1_000_000;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    FilesWithMatches,
    Content,
    Count,
}

enum Target {
    Folder(PathBuf),
    /// A file given as `path`: searched whatever the ignore files, `glob` and `type` say, as
    /// `rg` searches a file named on its command line.
    File(PathBuf),
}

struct Query {
    pattern: String,
    target: Target,
    glob: Option<String>,
    file_type: Option<String>,
    mode: Mode,
    ignore_case: bool,
    line_numbers: bool,
    before: usize,
    after: usize,
    head_limit: Option<usize>,
    offset: usize,
    multiline: bool,
}

/// One file's findings.
struct Found {
    path: PathBuf,
    hits: Hits,
}

enum Hits {
    File,
    Count(u64),
    Lines(Vec<Line>),
}

struct Line {
    number: Option<u64>,
    text: String,
}

pub(super) async fn run(input: &Map<String, Value>, call: &Call<'_>) -> Answer {
    let query = match parse(input, call) {
        Ok(query) => query,
        Err(answer) => return answer,
    };
    let cancel = call.cancel.clone();
    off_the_workers(&call.cancel, ABORTED, move || search(&query, &cancel)).await
}

fn parse(input: &Map<String, Value>, call: &Call<'_>) -> Result<Query, Answer> {
    let fields = Fields::of("Grep", input);
    let pattern = fields.required_string("pattern")?;
    if pattern.is_empty() {
        return Err(fields.invalid("pattern", "a non-empty string"));
    }
    let glob = fields.string("glob")?.filter(|glob| !glob.is_empty());
    let file_type = fields.string("type")?.filter(|name| !name.is_empty());
    let mode = match fields.choice(
        "output_mode",
        &["content", "files_with_matches", "count"],
        "files_with_matches",
    )? {
        "content" => Mode::Content,
        "count" => Mode::Count,
        _ => Mode::FilesWithMatches,
    };
    let ignore_case = fields.bool("-i", false)?;
    let line_numbers = fields.bool("-n", true)?;
    let count =
        |field| -> Result<Option<usize>, Answer> { Ok(fields.integer(field, 0, MAX_COUNT)?.map(|n| n as usize)) };
    let (after, before, around) = (count("-A")?, count("-B")?, count("-C")?);
    // `-C` wins over `-A`/`-B`, as Blade passes only `-C` when it is given.
    let (before, after) = match around {
        Some(lines) => (lines, lines),
        None => (before.unwrap_or(0), after.unwrap_or(0)),
    };
    let head_limit = fields.integer("head_limit", 1, MAX_COUNT)?.map(|n| n as usize);
    let offset = count("offset")?.unwrap_or(0);
    let multiline = fields.bool("multiline", false)?;
    let target = target(fields.string("path")?, call)?;
    Ok(Query {
        pattern: pattern.to_string(),
        target,
        glob: glob.map(str::to_string),
        file_type: file_type.map(str::to_string),
        mode,
        ignore_case,
        line_numbers,
        before,
        after,
        head_limit,
        offset,
        multiline,
    })
}

fn target(given: Option<&str>, call: &Call<'_>) -> Result<Target, Answer> {
    if let Some(path) = given {
        if let Ok(authorized) = paths::authorize(path, call.workspace) {
            if authorized.exists && authorized.path.is_file() {
                return Ok(Target::File(authorized.path));
            }
        }
    }
    // Anything else is a folder, or the folder check's own refusal.
    paths::directory(given, call.workspace, MISSING_PATH).map(Target::Folder)
}

fn execution_failed(error: impl std::fmt::Display) -> Answer {
    Answer::error(format!("Search execution failed: {error}"))
}

fn search(query: &Query, cancel: &CancellationToken) -> Answer {
    let matcher = match matcher(query) {
        Ok(matcher) => matcher,
        Err(error) => return execution_failed(error),
    };
    let budget = Budget {
        used: AtomicUsize::new(0),
        limit: query.offset.saturating_add(query.head_limit.unwrap_or(ENTRY_CEILING)),
    };
    let found = Mutex::new(Vec::new());
    let keep = |hit: Found| found.lock().unwrap_or_else(PoisonError::into_inner).push(hit);
    match &query.target {
        Target::File(path) => {
            let mut searcher = searcher(query);
            if let Some(hit) = search_file(&mut searcher, &matcher, path, query.mode, &budget, cancel) {
                keep(hit);
            }
        }
        Target::Folder(root) => {
            let builder = match walk(query, root) {
                Ok(builder) => builder,
                Err(error) => return execution_failed(error),
            };
            builder.build_parallel().run(|| {
                let mut searcher = searcher(query);
                let (matcher, budget, keep) = (&matcher, &budget, &keep);
                Box::new(move |entry| {
                    if cancel.is_cancelled() || budget.spent() {
                        return WalkState::Quit;
                    }
                    let Ok(entry) = entry else {
                        return WalkState::Continue;
                    };
                    if entry.file_type().is_some_and(|kind| kind.is_file()) {
                        if let Some(hit) = search_file(&mut searcher, matcher, entry.path(), query.mode, budget, cancel)
                        {
                            keep(hit);
                        }
                    }
                    WalkState::Continue
                })
            });
        }
    }
    if cancel.is_cancelled() {
        return Answer::error(ABORTED);
    }
    let mut found = found.into_inner().unwrap_or_else(PoisonError::into_inner);
    found.sort_unstable_by(|a, b| a.path.cmp(&b.path));
    // Without a head_limit, a spent budget means the search stopped before the end.
    let stopped_early = query.head_limit.is_none() && budget.spent();
    answer(query, &found, stopped_early)
}

/// The regex as `rg` builds it: `^`/`$` at line ends, and line by line unless `multiline`
/// (then `.` also matches a newline, `rg -U --multiline-dotall`).
fn matcher(query: &Query) -> Result<RegexMatcher, grep_regex::Error> {
    let mut builder = RegexMatcherBuilder::new();
    builder.multi_line(true).case_insensitive(query.ignore_case);
    if query.multiline {
        builder.dot_matches_new_line(true);
    } else {
        builder.line_terminator(Some(b'\n'));
    }
    builder.build(&query.pattern)
}

fn searcher(query: &Query) -> Searcher {
    let mut builder = SearcherBuilder::new();
    builder
        // A NUL byte marks a binary file, which is left out (rg's default for files it walks).
        .binary_detection(BinaryDetection::quit(b'\0'))
        .multi_line(query.multiline)
        .line_number(query.mode == Mode::Content && query.line_numbers);
    if query.mode == Mode::Content {
        builder.before_context(query.before).after_context(query.after);
    }
    // Never memory-mapped: a file truncated by another process mid-search would fault the
    // whole Node process (SIGBUS), not just this search.
    builder.build()
}

fn walk(query: &Query, root: &Path) -> Result<ignore::WalkBuilder, ignore::Error> {
    let mut builder = walker(root);
    if let Some(name) = &query.file_type {
        let mut types = TypesBuilder::new();
        types.add_defaults().select(name);
        builder.types(types.build()?);
    }
    if let Some(glob) = &query.glob {
        // `rg --glob`: gitignore-style, so `*.js` matches at any depth and `!` excludes.
        let mut overrides = OverrideBuilder::new(root);
        overrides.add(glob)?;
        builder.overrides(overrides.build()?);
    }
    Ok(builder)
}

/// How many entries may still be gathered, shared by the walking threads.
struct Budget {
    used: AtomicUsize,
    limit: usize,
}

impl Budget {
    /// Counts `entries` in; false once the limit is reached.
    fn take(&self, entries: usize) -> bool {
        self.used.fetch_add(entries, Ordering::Relaxed) + entries < self.limit
    }

    fn give_back(&self, entries: usize) {
        self.used.fetch_sub(entries, Ordering::Relaxed);
    }

    fn spent(&self) -> bool {
        self.used.load(Ordering::Relaxed) >= self.limit
    }
}

fn search_file(
    searcher: &mut Searcher,
    matcher: &RegexMatcher,
    path: &Path,
    mode: Mode,
    budget: &Budget,
    cancel: &CancellationToken,
) -> Option<Found> {
    let mut sink = Collect {
        mode,
        matcher,
        budget,
        cancel,
        matched: 0,
        lines: Vec::new(),
        binary: false,
    };
    // An unreadable file is skipped, as `rg` skips it (with a warning nobody reads here).
    let searched = searcher.search_path(matcher, path, &mut sink);
    if searched.is_err() || sink.binary || sink.matched == 0 {
        budget.give_back(sink.lines.len());
        return None;
    }
    let hits = match mode {
        Mode::FilesWithMatches => Hits::File,
        Mode::Count => Hits::Count(sink.matched),
        Mode::Content => Hits::Lines(sink.lines),
    };
    if mode != Mode::Content {
        budget.take(1);
    }
    Some(Found {
        path: path.to_path_buf(),
        hits,
    })
}

/// Gathers one file's matches as the mode needs them.
struct Collect<'a> {
    mode: Mode,
    matcher: &'a RegexMatcher,
    budget: &'a Budget,
    cancel: &'a CancellationToken,
    /// Matches seen (for `count`: lines, or multi-line matches).
    matched: u64,
    lines: Vec<Line>,
    /// The file turned out binary: it is left out, whatever matched before.
    binary: bool,
}

impl Collect<'_> {
    fn push_lines(&mut self, bytes: &[u8], first_number: Option<u64>, is_match: bool) -> bool {
        let mut number = first_number;
        let mut added = 0;
        for line in bytes.split_inclusive(|byte| *byte == b'\n') {
            let focus = if is_match { self.match_start(line) } else { 0 };
            self.lines.push(Line {
                number,
                text: shown(line, focus),
            });
            number = number.map(|n| n + 1);
            added += 1;
        }
        self.budget.take(added) && !self.cancel.is_cancelled()
    }

    /// Where a long line's first match starts (a short line is shown whole anyway).
    fn match_start(&self, line: &[u8]) -> usize {
        if line.len() <= MAX_LINE_CHARS {
            return 0;
        }
        self.matcher.find(line).ok().flatten().map_or(0, |found| found.start())
    }
}

impl Sink for Collect<'_> {
    type Error = io::Error;

    fn matched(&mut self, _searcher: &Searcher, found: &SinkMatch<'_>) -> Result<bool, io::Error> {
        self.matched += 1;
        match self.mode {
            // The first match settles it: the rest of the file is not read.
            Mode::FilesWithMatches => Ok(false),
            Mode::Count => Ok(!self.cancel.is_cancelled()),
            Mode::Content => Ok(self.push_lines(found.bytes(), found.line_number(), true)),
        }
    }

    fn context(&mut self, _searcher: &Searcher, context: &SinkContext<'_>) -> Result<bool, io::Error> {
        Ok(self.push_lines(context.bytes(), context.line_number(), false))
    }

    fn binary_data(&mut self, _searcher: &Searcher, _offset: u64) -> Result<bool, io::Error> {
        self.binary = true;
        Ok(false)
    }
}

/// A line as the answer shows it: without its line ending, invalid UTF-8 replaced, and cut to
/// `MAX_LINE_CHARS` around `focus` (a byte offset) with `...` where text was left out.
fn shown(line: &[u8], focus: usize) -> String {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    let text = String::from_utf8_lossy(line);
    // Byte length first: counting characters is only needed for a long line.
    let total = if line.len() <= MAX_LINE_CHARS {
        0
    } else {
        text.chars().count()
    };
    if total <= MAX_LINE_CHARS {
        return text.into_owned();
    }
    let focus_chars = String::from_utf8_lossy(&line[..focus.min(line.len())]).chars().count();
    // The match stays in view with a little of what precedes it.
    let start = focus_chars
        .saturating_sub(CHARS_BEFORE_MATCH)
        .min(total - MAX_LINE_CHARS);
    let kept: String = text.chars().skip(start).take(MAX_LINE_CHARS).collect();
    let before = if start > 0 { "..." } else { "" };
    let after = if start + MAX_LINE_CHARS < total { "..." } else { "" };
    format!("{before}{kept}{after}")
}

/// The JSON array: `offset` entries skipped, at most `head_limit` kept, cut at
/// `MAX_OUTPUT_CHARS` with a closing note.
fn answer(query: &Query, found: &[Found], stopped_early: bool) -> Answer {
    let entries = found.iter().flat_map(|file| entries(file, query.line_numbers));
    let total = found
        .iter()
        .map(|file| match &file.hits {
            Hits::Lines(lines) => lines.len(),
            _ => 1,
        })
        .sum::<usize>()
        .saturating_sub(query.offset);
    let wanted = query.head_limit.map_or(total, |limit| limit.min(total));
    let mut kept = Vec::new();
    let mut size = 0;
    for entry in entries.skip(query.offset).take(wanted) {
        // Its size inside the pretty-printed array: two more spaces a line, a comma and newline.
        let printed = serde_json::to_string_pretty(&entry).unwrap_or_default();
        size += printed.len() + 2 * printed.lines().count() + 2;
        if size > MAX_OUTPUT_CHARS && !kept.is_empty() {
            break;
        }
        kept.push(entry);
    }
    if kept.len() < wanted || stopped_early {
        let at_least = if stopped_early { "at least " } else { "" };
        kept.push(json!({
            "note": format!(
                "Output truncated: showing {} of {at_least}{wanted} entries (the answer is limited to {MAX_OUTPUT_CHARS} characters). \
                 Narrow the search with path, glob or type, or page through it with head_limit and offset.",
                kept.len()
            )
        }));
    }
    Answer::json(&Value::Array(kept))
}

fn entries(file: &Found, line_numbers: bool) -> Box<dyn Iterator<Item = Value> + '_> {
    let path = file.path.to_string_lossy();
    match &file.hits {
        Hits::File => Box::new(std::iter::once(json!({ "file_path": path }))),
        Hits::Count(count) => Box::new(std::iter::once(json!({ "file_path": path, "count": count }))),
        Hits::Lines(lines) => Box::new(lines.iter().map(move |line| match (line_numbers, line.number) {
            (true, Some(number)) => json!({ "file_path": path, "line_number": number, "content": line.text }),
            _ => json!({ "file_path": path, "content": line.text }),
        })),
    }
}
