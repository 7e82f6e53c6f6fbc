//! What the model gets of a command's output: Blade's tiers (30 lines / 3000 characters for
//! noisy commands such as installs, up to 200 lines / 20000 for test runs and diffs). A long
//! output keeps its first and last lines, then at most the tier's characters.

use std::sync::LazyLock;

use regex::Regex;

/// A stream's output, trimmed: whole, or (when it was too large to keep) its two ends and the
/// counts over all of it.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Text {
    Whole(String),
    Ends {
        head: String,
        tail: String,
        lines: usize,
        chars: usize,
    },
}

impl Text {
    /// Lines as `split('\n')` counts them, and characters.
    fn counts(&self) -> (usize, usize) {
        match self {
            Text::Whole(text) => (text.split('\n').count(), text.chars().count()),
            Text::Ends { lines, chars, .. } => (*lines, *chars),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq)]
pub(super) struct Tier {
    max_lines: usize,
    max_chars: usize,
    keep_head: usize,
    keep_tail: usize,
    /// Whether a cut output ends with the command type's summary line.
    summarize: bool,
}

const AGGRESSIVE: Tier = Tier {
    max_lines: 30,
    max_chars: 3000,
    keep_head: 10,
    keep_tail: 10,
    summarize: true,
};
const MODERATE: Tier = Tier {
    max_lines: 100,
    max_chars: 10_000,
    keep_head: 40,
    keep_tail: 40,
    summarize: true,
};
const CONSERVATIVE: Tier = Tier {
    max_lines: 200,
    max_chars: 20_000,
    keep_head: 80,
    keep_tail: 80,
    summarize: false,
};
const DEFAULT: Tier = Tier {
    max_lines: 150,
    max_chars: 15_000,
    keep_head: 50,
    keep_tail: 50,
    summarize: true,
};

/// Command types, first match wins: the pattern, its tier, its summary (`{}` is the line count).
const KINDS: [(&str, Tier, Option<&str>); 13] = [
    (
        r"^git\s+(rm|add)\s+(-r|--cached|-rf|-f)?\s*",
        AGGRESSIVE,
        Some("Successfully processed {} files"),
    ),
    (
        r"^(npm|pnpm|yarn|bun)\s+(install|i|add|remove|uninstall)",
        AGGRESSIVE,
        Some("Package operation completed ({} lines of output)"),
    ),
    (
        r"^(npm|pnpm|yarn|bun)\s+(run|exec)\s+(build|compile|bundle)",
        MODERATE,
        Some("Build completed ({} lines of output)"),
    ),
    (
        r"^(npm|pnpm|yarn|bun)\s+(run|exec)\s+(test|lint|check)",
        CONSERVATIVE,
        None,
    ),
    (r"^git\s+(status|branch|remote)", MODERATE, None),
    (r"^git\s+(log|diff|show)", CONSERVATIVE, None),
    (r"^(ls|dir|tree)\s+", MODERATE, Some("Listed {} items")),
    (r"^find\s+", MODERATE, Some("Found {} matches")),
    (r"^(grep|rg|ag)\s+", MODERATE, Some("Found {} matching lines")),
    (
        r"^(docker|podman)\s+(build|pull|push)",
        AGGRESSIVE,
        Some("Docker operation completed ({} lines)"),
    ),
    (
        r"^(pip|pip3|poetry|pipenv)\s+(install|uninstall)",
        AGGRESSIVE,
        Some("Python package operation completed ({} lines)"),
    ),
    (
        r"^(cargo|rustup)\s+(build|install|update)",
        MODERATE,
        Some("Rust operation completed ({} lines)"),
    ),
    (
        r"^(go)\s+(build|get|mod)",
        MODERATE,
        Some("Go operation completed ({} lines)"),
    ),
];

static PATTERNS: LazyLock<Vec<Regex>> = LazyLock::new(|| {
    KINDS
        .iter()
        .map(|(pattern, _, _)| Regex::new(&format!("(?i){pattern}")).expect("the command patterns are valid"))
        .collect()
});

/// The tier for `command`, and its summary template.
pub(super) fn tier_for(command: &str) -> (Tier, Option<&'static str>) {
    PATTERNS
        .iter()
        .zip(KINDS)
        .find(|(pattern, _)| pattern.is_match(command))
        .map_or((DEFAULT, None), |(_, (_, tier, summary))| (tier, summary))
}

/// One stream as the model gets it.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Cut {
    pub content: String,
    pub truncated: bool,
    pub lines: usize,
    pub chars: usize,
}

pub(super) fn cut(text: &Text, tier: Tier, summary: Option<&str>) -> Cut {
    let (lines, chars) = text.counts();
    if lines <= tier.max_lines && chars <= tier.max_chars {
        let content = match text {
            Text::Whole(text) => text.clone(),
            Text::Ends { head, tail, .. } => format!("{head}{tail}"),
        };
        return Cut {
            content,
            truncated: false,
            lines,
            chars,
        };
    }
    let mut content = if lines > tier.keep_head + tier.keep_tail {
        let (head, tail) = match text {
            Text::Whole(text) => (text.as_str(), text.as_str()),
            Text::Ends { head, tail, .. } => (head.as_str(), tail.as_str()),
        };
        let first: Vec<&str> = head.split('\n').take(tier.keep_head).collect();
        let mut last: Vec<&str> = tail.rsplit('\n').take(tier.keep_tail).collect();
        last.reverse();
        format!(
            "{}\n\n... ({} lines truncated, showing first {} and last {} of {lines} total) ...\n\n{}",
            first.join("\n"),
            lines - tier.keep_head - tier.keep_tail,
            tier.keep_head,
            tier.keep_tail,
            last.join("\n")
        )
    } else {
        // Few but long lines: only the character cut below applies.
        match text {
            Text::Whole(text) => text.clone(),
            Text::Ends { head, tail, .. } => format!("{head}{tail}"),
        }
    };
    if content.chars().count() > tier.max_chars {
        let half = tier.max_chars / 2 - 50;
        content = format!(
            "{}\n\n... (content truncated to {} chars) ...\n\n{}",
            first_chars(&content, half),
            tier.max_chars,
            last_chars(&content, half)
        );
    }
    if let Some(template) = summary.filter(|_| tier.summarize) {
        content.push_str(&format!(
            "\n\n[Summary: {}]",
            template.replace("{}", &lines.to_string())
        ));
    }
    Cut {
        content,
        truncated: true,
        lines,
        chars,
    }
}

fn first_chars(text: &str, count: usize) -> &str {
    text.char_indices().nth(count).map_or(text, |(end, _)| &text[..end])
}

fn last_chars(text: &str, count: usize) -> &str {
    if count == 0 {
        return "";
    }
    text.char_indices()
        .rev()
        .nth(count - 1)
        .map_or(text, |(start, _)| &text[start..])
}

/// Both streams for the model, and `truncation_info` when either was cut: what was kept of
/// how much.
pub(super) fn for_model(stdout: &Text, stderr: &Text, command: &str) -> (String, String, Option<String>) {
    let (tier, summary) = tier_for(command);
    let streams = [
        ("stdout", cut(stdout, tier, summary)),
        ("stderr", cut(stderr, tier, summary)),
    ];
    let parts: Vec<String> = streams
        .iter()
        .filter(|(_, cut)| cut.truncated)
        .map(|(name, cut)| {
            format!(
                "{name}: {} lines → {} lines ({} of {} chars kept)",
                cut.lines,
                cut.content.split('\n').count(),
                cut.content.chars().count(),
                cut.chars
            )
        })
        .collect();
    let info = (!parts.is_empty()).then(|| format!("Output truncated: {}", parts.join(", ")));
    let [(_, stdout), (_, stderr)] = streams;
    (stdout.content, stderr.content, info)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn numbered(count: usize) -> Text {
        Text::Whole((1..=count).map(|n| n.to_string()).collect::<Vec<_>>().join("\n"))
    }

    #[test]
    fn commands_get_their_tier() {
        assert_eq!(
            tier_for("npm install left-pad"),
            (AGGRESSIVE, Some("Package operation completed ({} lines of output)"))
        );
        assert_eq!(tier_for("GIT LOG --oneline").0, CONSERVATIVE);
        assert_eq!(tier_for("pnpm run test").0, CONSERVATIVE);
        assert_eq!(tier_for("git status").0, MODERATE);
        assert_eq!(tier_for("ls -la"), (MODERATE, Some("Listed {} items")));
        assert_eq!(tier_for("seq 1 1000"), (DEFAULT, None));
        // Anchored at the start, as a command type is.
        assert_eq!(tier_for("echo git log").0, DEFAULT);
    }

    #[test]
    fn a_short_output_is_untouched() {
        let cut = cut(&numbered(150), DEFAULT, None);
        assert!(!cut.truncated);
        assert_eq!(cut.content.split('\n').count(), 150);
    }

    #[test]
    fn many_lines_keep_the_first_and_the_last() {
        let cut = cut(&numbered(1000), DEFAULT, None);
        assert!(cut.truncated);
        let expected_head = (1..=50).map(|n| n.to_string()).collect::<Vec<_>>().join("\n");
        let expected_tail = (951..=1000).map(|n| n.to_string()).collect::<Vec<_>>().join("\n");
        assert_eq!(
            cut.content,
            format!("{expected_head}\n\n... (900 lines truncated, showing first 50 and last 50 of 1000 total) ...\n\n{expected_tail}")
        );
        assert_eq!((cut.lines, cut.chars), (1000, 3892));
    }

    #[test]
    fn noisy_commands_are_cut_harder_and_summarized() {
        let (tier, summary) = tier_for("npm install");
        let cut = cut(&numbered(31), tier, summary);
        assert!(cut.content.starts_with("1\n2\n"));
        assert!(cut
            .content
            .contains("... (11 lines truncated, showing first 10 and last 10 of 31 total) ..."));
        assert!(cut
            .content
            .ends_with("31\n\n[Summary: Package operation completed (31 lines of output)]"));
        // A conservative tier has no summary.
        let (tier, summary) = tier_for("git diff");
        assert!(!cut_text(&numbered(500), tier, summary).contains("[Summary"));
    }

    fn cut_text(text: &Text, tier: Tier, summary: Option<&str>) -> String {
        cut(text, tier, summary).content
    }

    #[test]
    fn a_long_line_is_cut_to_the_tier_characters() {
        let line = "é".repeat(5000) + &"z".repeat(5000);
        let cut = cut(&Text::Whole(line), AGGRESSIVE, None);
        assert_eq!(
            cut.content,
            format!(
                "{}\n\n... (content truncated to 3000 chars) ...\n\n{}",
                "é".repeat(1450),
                "z".repeat(1450)
            )
        );
        assert_eq!((cut.lines, cut.chars), (1, 10_000));
    }

    #[test]
    fn the_ends_of_a_huge_output_are_cut_alike() {
        let text = Text::Ends {
            head: (1..=5000).map(|n| format!("h{n}")).collect::<Vec<_>>().join("\n"),
            tail: (1..=5000).map(|n| format!("t{n}")).collect::<Vec<_>>().join("\n"),
            lines: 1_000_000,
            chars: 9_000_000,
        };
        let cut = cut(&text, DEFAULT, None);
        assert!(cut.content.starts_with("h1\nh2\n"));
        assert!(cut.content.contains(
            "h50\n\n... (999900 lines truncated, showing first 50 and last 50 of 1000000 total) ...\n\nt4951\n"
        ));
        assert!(cut.content.ends_with("\nt5000"));
    }

    #[test]
    fn truncation_info_says_what_was_kept() {
        let (stdout, stderr, info) = for_model(&numbered(1000), &Text::Whole("warning".into()), "seq 1 1000");
        assert_eq!(stderr, "warning");
        assert_eq!(stdout.split('\n').count(), 103);
        assert_eq!(
            info.as_deref(),
            Some(
                format!(
                    "Output truncated: stdout: 1000 lines → 103 lines ({} of 3892 chars kept)",
                    stdout.chars().count()
                )
                .as_str()
            )
        );
        assert_eq!(for_model(&numbered(3), &numbered(3), "seq 1 3").2, None);
    }
}
