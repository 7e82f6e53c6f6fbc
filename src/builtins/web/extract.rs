//! `extract_content`: an HTML page as readable text, in the shape Blade's Jina Reader answer
//! takes (`# <title>`, `**Source**: <url>`, `---`, then the content), made here with
//! `html2text` instead of sending the URL to a third-party service.

use std::sync::OnceLock;

use regex::Regex;

/// Lines are not wrapped: the text is for a model, not a terminal.
const WIDTH: usize = 100_000;

/// Whether a `content-type` names an HTML document.
pub(super) fn is_html(content_type: Option<&str>) -> bool {
    content_type.is_some_and(|value| {
        let essence = value.split(';').next().unwrap_or_default().trim().to_ascii_lowercase();
        essence == "text/html" || essence == "application/xhtml+xml"
    })
}

/// The page's text, headed by its title and where it came from.
pub(super) fn page_text(html: &[u8], source: &str) -> String {
    let mut page = String::new();
    if let Some(title) = title_of(html) {
        page.push_str(&format!("# {title}\n\n"));
    }
    page.push_str(&format!("**Source**: {source}\n\n---\n\n"));
    page.push_str(text_of(html).trim());
    page
}

/// The document as text: scripts, styles and markup gone, headings and lists kept in a
/// Markdown-like form, links as numbered references.
fn text_of(html: &[u8]) -> String {
    html2text::config::plain()
        .allow_width_overflow()
        .raw_mode(true)
        .string_from_read(html, WIDTH)
        // The parser accepts any bytes; a failure would be a bug of the renderer's, and the
        // page is then better sent as it came than not at all.
        .unwrap_or_else(|_| String::from_utf8_lossy(html).into_owned())
}

/// The text of the first `<title>`, entities decoded and spaces collapsed.
fn title_of(html: &[u8]) -> Option<String> {
    static TITLE: OnceLock<Regex> = OnceLock::new();
    let pattern = TITLE.get_or_init(|| Regex::new(r"(?is)<title\b[^>]*>(.*?)</title\s*>").expect("a valid pattern"));
    let text = String::from_utf8_lossy(html);
    let inner = pattern.captures(&text)?.get(1)?.as_str();
    // The title's text is the element's character data: no markup, only entities to decode.
    let decoded = text_of(format!("<p>{}</p>", inner.replace('<', "&lt;")).as_bytes());
    let title = decoded.split_whitespace().collect::<Vec<_>>().join(" ");
    (!title.is_empty()).then_some(title)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn html_is_named_by_its_content_type() {
        assert!(is_html(Some("text/html; charset=utf-8")));
        assert!(is_html(Some("Application/XHTML+XML")));
        assert!(!is_html(Some("application/json")));
        assert!(!is_html(Some("text/plain")));
        assert!(!is_html(None));
    }

    #[test]
    fn a_page_becomes_its_text() {
        let html = br#"<!doctype html><html><head><title> Tom &amp; Jerry
            </title><style>body { color: red }</style><script>var secret = "nope";</script></head>
            <body><h1>Heading</h1><p>First <b>bold</b> paragraph.</p><ul><li>one</li><li>two</li></ul>
            <p>A <a href="https://example.com/x">link</a>.</p></body></html>"#;
        let page = page_text(html, "https://example.com/page");
        assert!(
            page.starts_with("# Tom & Jerry\n\n**Source**: https://example.com/page\n\n---\n\n"),
            "{page}"
        );
        for kept in [
            "Heading",
            "First",
            "bold",
            "paragraph.",
            "one",
            "two",
            "link",
            "https://example.com/x",
        ] {
            assert!(page.contains(kept), "{kept} missing from {page}");
        }
        for dropped in ["color: red", "var secret", "<p>", "<b>", "&amp;"] {
            assert!(!page.contains(dropped), "{dropped} left in {page}");
        }
    }

    #[test]
    fn a_page_without_a_title_has_no_heading() {
        let page = page_text(b"<p>just text</p>", "http://a.example/");
        assert_eq!(page, "**Source**: http://a.example/\n\n---\n\njust text");
    }

    #[test]
    fn hostile_markup_does_not_crash() {
        // Deep nesting, unclosed tags and stray bytes: the renderer answers, on a small stack.
        let deep = format!("{}x{}", "<div>".repeat(20_000), "</div>".repeat(20_000));
        let broken = b"<p><b><i>unclosed <table><tr><td>cell<td>\xff\xfe <script>never closed".to_vec();
        std::thread::Builder::new()
            .stack_size(2 * 1024 * 1024)
            .spawn(move || {
                assert!(page_text(deep.as_bytes(), "u").contains('x'));
                assert!(page_text(&broken, "u").contains("cell"));
            })
            .unwrap()
            .join()
            .unwrap();
    }
}
