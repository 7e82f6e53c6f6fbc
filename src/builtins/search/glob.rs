//! Glob: the files (and, if asked, folders) under the search folder whose path relative to it
//! matches the pattern, files first, newest first.
//!
//! The pattern is matched as Blade's glob library matches it: against the whole relative path,
//! `*` and `?` never crossing a `/`. So `*.md` finds the Markdown files directly in the folder
//! and `**/*.md` those at any depth; a pattern without `/` is not a basename match.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Mutex, PoisonError};
use std::time::SystemTime;

use globset::{GlobBuilder, GlobMatcher};
use ignore::{DirEntry, WalkState};
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

use super::walk::{off_the_workers, walker};
use super::MISSING_PATH;
use crate::builtins::input::Fields;
use crate::builtins::paths;
use crate::builtins::{Answer, Call};

const ABORTED: &str = "File search aborted";

struct Query {
    root: PathBuf,
    pattern: String,
    max_results: usize,
    include_directories: bool,
    case_sensitive: bool,
}

/// One match: what the answer lists and what it is ordered by.
struct Hit {
    relative: String,
    is_directory: bool,
    modified: Option<SystemTime>,
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
    let fields = Fields::of("Glob", input);
    let pattern = fields.required_string("pattern")?;
    if pattern.is_empty() {
        return Err(fields.invalid("pattern", "a non-empty string"));
    }
    let max_results = fields.integer("max_results", 1, 1000)?.unwrap_or(100) as usize;
    let include_directories = fields.bool("include_directories", false)?;
    let case_sensitive = fields.bool("case_sensitive", false)?;
    let root = paths::directory(fields.string("path")?, call.workspace, MISSING_PATH)?;
    Ok(Query {
        root,
        pattern: pattern.to_string(),
        max_results,
        include_directories,
        case_sensitive,
    })
}

fn search(query: &Query, cancel: &CancellationToken) -> Answer {
    let relative = relative_pattern(&query.pattern, &query.root);
    let matcher = match component_matcher(&relative, query.case_sensitive) {
        Ok(matcher) => matcher,
        Err(error) => return Answer::error(format!("Search failed: {error}")),
    };
    let shape = Shape::of(&relative, query.case_sensitive);
    let mut builder = walker(&query.root);
    builder.max_depth(shape.max_depth);
    // `.github/**`, `**/.env`: the pattern asks for hidden entries by name. Git's own folder
    // stays out unless named too.
    let skip_git = shape.names_hidden && !relative.split('/').any(|part| part == ".git");
    builder.hidden(!shape.names_hidden);
    let folders = shape.folders;
    builder.filter_entry(move |entry| {
        !(skip_git && entry.file_name() == ".git") && could_lead_to_a_match(entry, &folders)
    });

    // One more than asked for tells a full answer from a truncated one.
    let wanted = query.max_results + 1;
    let hits = Mutex::new(Vec::new());
    let found = AtomicUsize::new(0);
    builder.build_parallel().run(|| {
        let (hits, found, matcher) = (&hits, &found, &matcher);
        Box::new(move |entry| {
            if cancel.is_cancelled() || found.load(Ordering::Relaxed) >= wanted {
                return WalkState::Quit;
            }
            let Ok(entry) = entry else {
                return WalkState::Continue;
            };
            if let Some(hit) = hit(&entry, query, matcher) {
                hits.lock().unwrap_or_else(PoisonError::into_inner).push(hit);
                if found.fetch_add(1, Ordering::Relaxed) + 1 >= wanted {
                    return WalkState::Quit;
                }
            }
            WalkState::Continue
        })
    });
    if cancel.is_cancelled() {
        return Answer::error(ABORTED);
    }
    let mut hits = hits.into_inner().unwrap_or_else(PoisonError::into_inner);
    hits.sort_by(|a, b| {
        a.is_directory
            .cmp(&b.is_directory)
            .then_with(|| b.modified.cmp(&a.modified))
            .then_with(|| a.relative.cmp(&b.relative))
    });
    let truncated = hits.len() > query.max_results;
    hits.truncate(query.max_results);
    Answer::ok(text(&query.pattern, &hits, truncated))
}

fn hit(entry: &DirEntry, query: &Query, matcher: &GlobMatcher) -> Option<Hit> {
    if entry.depth() == 0 {
        return None;
    }
    let kind = entry.file_type()?;
    let is_directory = kind.is_dir();
    // Symlinks are neither: they are not followed.
    if !(kind.is_file() || is_directory && query.include_directories) {
        return None;
    }
    let relative = entry.path().strip_prefix(&query.root).ok()?;
    if !matcher.is_match(relative) {
        return None;
    }
    let modified = entry.metadata().ok().and_then(|metadata| metadata.modified().ok());
    Some(Hit {
        relative: relative.to_string_lossy().into_owned(),
        is_directory,
        modified,
    })
}

fn text(pattern: &str, hits: &[Hit], truncated: bool) -> String {
    if hits.is_empty() {
        return format!("No files found matching \"{pattern}\"");
    }
    let count = hits.len();
    let heading = if truncated {
        format!("Found at least {count} file(s) matching \"{pattern}\" (truncated)")
    } else {
        format!("Found {count} file(s) matching \"{pattern}\"")
    };
    let list: Vec<String> = hits.iter().map(|hit| format!("- {}", hit.relative)).collect();
    format!(
        "{heading}:\n\n{}\n\nUse the relative_path values above for Read/Edit operations.",
        list.join("\n")
    )
}

/// The pattern relative to the search folder: a leading `./` dropped, and an absolute pattern
/// inside the folder made relative to it.
fn relative_pattern(pattern: &str, root: &Path) -> String {
    let mut relative = pattern;
    if let Some(inside) = Path::new(pattern)
        .strip_prefix(root)
        .ok()
        .and_then(|inside| inside.to_str())
    {
        relative = inside;
    }
    while let Some(rest) = relative.strip_prefix("./") {
        relative = rest;
    }
    relative.to_string()
}

/// A glob as Glob matches it: `*` stays within one path component.
fn component_matcher(pattern: &str, case_sensitive: bool) -> Result<GlobMatcher, globset::Error> {
    Ok(GlobBuilder::new(pattern)
        .literal_separator(true)
        .case_insensitive(!case_sensitive)
        .backslash_escape(true)
        .build()?
        .compile_matcher())
}

/// What the pattern's components tell the walk, so it need not visit the whole tree.
struct Shape {
    /// No match lies deeper than this (a pattern without `**`).
    max_depth: Option<usize>,
    /// The patterns of the leading folders (before any `**`): a folder at depth `d` whose name
    /// does not match the `d`th cannot hold a match (`src/*/lib/**/*.rs`).
    folders: Vec<GlobMatcher>,
    /// Some component starts with a dot.
    names_hidden: bool,
}

impl Shape {
    fn of(pattern: &str, case_sensitive: bool) -> Shape {
        let parts: Vec<&str> = pattern.split('/').collect();
        let names_hidden = parts
            .iter()
            .any(|part| part.starts_with('.') && *part != "." && *part != "..");
        // A `{a,b/c}` or `[/]` spanning a `/` would make the split lie: then walk everything.
        let balanced = parts.iter().all(|part| {
            part.matches('{').count() == part.matches('}').count()
                && part.matches('[').count() == part.matches(']').count()
        });
        if !balanced || parts.iter().any(|part| *part == ".." || part.is_empty()) {
            return Shape {
                max_depth: None,
                folders: Vec::new(),
                names_hidden,
            };
        }
        let max_depth = (!parts.iter().any(|part| part.contains("**"))).then_some(parts.len());
        let folders = parts[..parts.len() - 1]
            .iter()
            .take_while(|part| !part.contains("**"))
            .map_while(|part| component_matcher(part, case_sensitive).ok())
            .collect();
        Shape {
            max_depth,
            folders,
            names_hidden,
        }
    }
}

fn could_lead_to_a_match(entry: &DirEntry, folders: &[GlobMatcher]) -> bool {
    let depth = entry.depth();
    if folders.is_empty() || depth == 0 || depth > folders.len() || !entry.file_type().is_some_and(|kind| kind.is_dir())
    {
        return true;
    }
    folders[depth - 1].is_match(entry.file_name())
}
