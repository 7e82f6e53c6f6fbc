//! Glob and Grep, built on ripgrep's crates: `ignore` walks the search folder (two threads,
//! `.gitignore`/`.ignore` honoured in or out of a git repository, hidden entries skipped),
//! `globset` matches names, `grep-regex` and `grep-searcher` search contents. The work runs on
//! a blocking thread and stops when the call is cancelled or enough has been found.

mod glob;
mod grep;
mod walk;

#[cfg(test)]
mod tests;

use serde_json::{json, Map, Value};

use super::{Answer, Builtin, Call};

/// Both tools' text when neither a `path` nor the workspace's `cwd` is given.
const MISSING_PATH: &str = "No search path provided and no filesystem working directory is available.";

const GLOB_DESCRIPTION: &str = "Fast file pattern matching tool that works with any codebase size. \
Supports glob patterns like \"**/*.js\" or \"src/**/*.ts\". Returns matching file paths sorted by modification time.

Usage notes:
- Use this tool when you need to find files by name patterns
- The pattern is matched against the path relative to the search folder: \"*.md\" matches files directly in it, \"**/*.md\" matches at any depth
- Files listed in .gitignore and hidden files are skipped unless the pattern names a hidden file or folder
- You can call multiple tools in a single response. It is always better to speculatively perform multiple searches in parallel if they are potentially useful.";

const GREP_DESCRIPTION: &str = "A powerful search tool built on ripgrep

  Usage:
  - ALWAYS use Grep for search tasks. NEVER invoke `grep` or `rg` as a Bash command. The Grep tool has been optimized for correct permissions and access.
  - Supports full regex syntax (e.g., \"log.*Error\", \"function\\\\s+\\\\w+\")
  - Filter files with glob parameter (e.g., \"*.js\", \"**/*.tsx\") or type parameter (e.g., \"js\", \"py\", \"rust\")
  - Output modes: \"content\" shows matching lines, \"files_with_matches\" shows only file paths (default), \"count\" shows match counts
  - Pattern syntax: Uses ripgrep (not grep) - literal braces need escaping (use `interface\\\\{\\\\}` to find `interface{}` in Go code)
  - Multiline matching: By default patterns match within single lines only. For cross-line patterns like `struct \\\\{[\\\\s\\\\S]*?field`, use `multiline: true`
";

pub(crate) fn description(tool: Builtin) -> &'static str {
    match tool {
        Builtin::Glob => GLOB_DESCRIPTION,
        _ => GREP_DESCRIPTION,
    }
}

pub(crate) fn schema(tool: Builtin) -> Value {
    match tool {
        Builtin::Glob => glob_schema(),
        _ => grep_schema(),
    }
}

pub(crate) async fn glob(input: &Map<String, Value>, call: &Call<'_>) -> Answer {
    glob::run(input, call).await
}

pub(crate) async fn grep(input: &Map<String, Value>, call: &Call<'_>) -> Answer {
    grep::run(input, call).await
}

fn glob_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "pattern": {
                "type": "string",
                "minLength": 1,
                "description": "Glob pattern string (supports *, ?, ** wildcards)"
            },
            "path": {"type": "string", "description": "Search path (optional, defaults to cwd)"},
            "max_results": {
                "type": "integer",
                "minimum": 1,
                "maximum": 1000,
                "default": 100,
                "description": "Maximum number of results"
            },
            "include_directories": {
                "type": "boolean",
                "default": false,
                "description": "Include directories in results"
            },
            "case_sensitive": {"type": "boolean", "default": false, "description": "Case sensitive matching"}
        },
        "required": ["pattern"],
        "additionalProperties": false
    })
}

fn grep_schema() -> Value {
    let context = |flag: &str, what: &str| {
        json!({
            "type": "integer",
            "minimum": 0,
            "description": format!(
                "Number of lines to show {what} (rg {flag}). Requires output_mode: \"content\", ignored otherwise"
            )
        })
    };
    json!({
        "type": "object",
        "properties": {
            "pattern": {
                "type": "string",
                "minLength": 1,
                "description": "The regular expression pattern to search for in file contents"
            },
            "path": {
                "type": "string",
                "description": "File or directory to search in (rg PATH). Defaults to current working directory"
            },
            "glob": {
                "type": "string",
                "description": "Glob pattern to filter files (e.g. \"*.js\", \"*.{ts,tsx}\") - maps to rg --glob"
            },
            "type": {
                "type": "string",
                "description": "File type to search (rg --type). Common types: js, py, rust, go, java, etc. More efficient than include for standard file types"
            },
            "output_mode": {
                "type": "string",
                "enum": ["content", "files_with_matches", "count"],
                "default": "files_with_matches",
                "description": "Output mode: \"content\" shows matching lines (supports -A/-B/-C context, -n line numbers, head_limit), \"files_with_matches\" shows file paths (supports head_limit), \"count\" shows match counts (supports head_limit). Defaults to \"files_with_matches\""
            },
            "-i": {"type": "boolean", "description": "Case insensitive search (rg -i)"},
            "-n": {
                "type": "boolean",
                "default": true,
                "description": "Show line numbers in output (rg -n). Requires output_mode: \"content\", ignored otherwise. Defaults to true"
            },
            "-B": context("-B", "before each match"),
            "-A": context("-A", "after each match"),
            "-C": context("-C", "before and after each match"),
            "head_limit": {
                "type": "integer",
                "minimum": 1,
                "description": "Limit output to first N lines/entries, equivalent to \"| head -N\". Works across all output modes: content (limits output lines), files_with_matches (limits file paths), count (limits count entries)"
            },
            "offset": {
                "type": "integer",
                "minimum": 0,
                "description": "Skip first N lines/entries before applying head_limit, equivalent to \"| tail -n +N | head -N\". Works across all output modes. Defaults to 0"
            },
            "multiline": {
                "type": "boolean",
                "default": false,
                "description": "Enable multiline mode where . matches newlines and patterns can span lines (rg -U --multiline-dotall). Default: false"
            }
        },
        "required": ["pattern"],
        "additionalProperties": false
    })
}
