//! Text that streams in as JSON string fragments (content deltas, tool-call arguments). A server
//! may cut a surrogate pair between two fragments (`"\ud83d"`, then `"\ude00"`), which
//! `serde_json` refuses to decode alone; so fragments are read raw and decoded here, a high
//! surrogate at the end of one being held for the low one at the start of the next. A surrogate
//! left alone becomes U+FFFD: a Rust string (and UTF-8) cannot hold it.

use serde_json::value::RawValue;

use super::TextSink;
use crate::error::{Result, SdkError};

const REPLACEMENT: char = '\u{FFFD}';

/// One stream of fragments; `push` each in order, then `finish`.
#[derive(Debug, Default)]
pub(crate) struct Fragments {
    /// A high surrogate that ended the last fragment.
    high: Option<u16>,
}

impl Fragments {
    /// Appends the text of the JSON string literal `raw` to `out`.
    pub fn push(&mut self, raw: &RawValue, out: &mut String) -> std::result::Result<(), String> {
        let literal = raw.get();
        let inner = literal
            .strip_prefix('"')
            .and_then(|rest| rest.strip_suffix('"'))
            .ok_or_else(|| format!("expected a string, got {}", crate::text::excerpt(literal, 40)))?;
        let mut rest = inner;
        while let Some(backslash) = rest.find('\\') {
            if backslash > 0 {
                self.lone(out);
                out.push_str(&rest[..backslash]);
            }
            let escape = &rest[backslash + 1..];
            let (unit, used) = match escape.as_bytes().first() {
                Some(b'u') => {
                    let hex = escape.get(1..5).ok_or("a \\u escape is cut short")?;
                    let unit = u16::from_str_radix(hex, 16).map_err(|_| "a \\u escape is not hexadecimal")?;
                    (unit, 5)
                }
                Some(&simple) => {
                    let unit = match simple {
                        b'"' => b'"',
                        b'\\' => b'\\',
                        b'/' => b'/',
                        b'b' => 8,
                        b'f' => 12,
                        b'n' => b'\n',
                        b'r' => b'\r',
                        b't' => b'\t',
                        _ => return Err(format!("\\{} is not a JSON escape", simple as char)),
                    };
                    (u16::from(unit), 1)
                }
                None => return Err("a string ends in a lone backslash".into()),
            };
            self.unit(unit, out);
            rest = &escape[used..];
        }
        if !rest.is_empty() {
            self.lone(out);
            out.push_str(rest);
        }
        Ok(())
    }

    /// The last fragment was pushed: a high surrogate still held is alone.
    pub fn finish(&mut self, out: &mut String) {
        self.lone(out);
    }

    fn unit(&mut self, unit: u16, out: &mut String) {
        match unit {
            0xD800..=0xDBFF => {
                self.lone(out);
                self.high = Some(unit);
            }
            0xDC00..=0xDFFF => match self.high.take() {
                Some(high) => {
                    let code = 0x10000 + ((u32::from(high) - 0xD800) << 10) + (u32::from(unit) - 0xDC00);
                    out.push(char::from_u32(code).unwrap_or(REPLACEMENT));
                }
                None => out.push(REPLACEMENT),
            },
            _ => {
                self.lone(out);
                out.push(char::from_u32(u32::from(unit)).unwrap_or(REPLACEMENT));
            }
        }
    }

    /// A held high surrogate followed by anything but a low one is alone.
    fn lone(&mut self, out: &mut String) {
        if self.high.take().is_some() {
            out.push(REPLACEMENT);
        }
    }
}

/// Appends the string `raw` (`null` is nothing) to `out`; anything else is a malformed stream.
pub(crate) fn push_string(fragments: &mut Fragments, raw: Option<&RawValue>, out: &mut String) -> Result<()> {
    match raw {
        Some(raw) if raw.get() != "null" => fragments
            .push(raw, out)
            .map_err(|error| SdkError::model(format!("Model stream is malformed: {error}"))),
        _ => Ok(()),
    }
}

/// `push_string`, handing what it appended to `on_text`.
pub(crate) fn push_text(
    fragments: &mut Fragments,
    raw: Option<&RawValue>,
    out: &mut String,
    on_text: TextSink<'_>,
) -> Result<()> {
    let start = out.len();
    push_string(fragments, raw, out)?;
    if out.len() > start {
        on_text(&out[start..]);
    }
    Ok(())
}

/// `Fragments::finish`, handing what it appended (a lone surrogate's U+FFFD) to `on_text`.
pub(crate) fn finish_text(fragments: &mut Fragments, out: &mut String, on_text: TextSink<'_>) {
    let start = out.len();
    fragments.finish(out);
    if out.len() > start {
        on_text(&out[start..]);
    }
}

/// Decodes a whole JSON string literal (no fragment follows).
pub(crate) fn decode(raw: &RawValue) -> std::result::Result<String, String> {
    let mut out = String::new();
    let mut fragments = Fragments::default();
    fragments.push(raw, &mut out)?;
    fragments.finish(&mut out);
    Ok(out)
}

/// `text` as a JSON string literal whose every non-ASCII unit is a `\u` escape: what the tests
/// send, a lone surrogate included (serde_json cannot write one).
#[cfg(test)]
pub(crate) fn literal(units: &[u16]) -> String {
    let mut out = String::from("\"");
    for &unit in units {
        match unit {
            0x20..=0x7e if unit != u16::from(b'"') && unit != u16::from(b'\\') => out.push(unit as u8 as char),
            _ => out.push_str(&format!("\\u{unit:04x}")),
        }
    }
    out.push('"');
    out
}

/// Text in UTF-16 pieces, pairs and lone surrogates among them, for the stream tests.
#[cfg(test)]
pub(crate) fn utf16_pieces() -> impl proptest::strategy::Strategy<Value = Vec<Vec<u16>>> {
    use proptest::prelude::*;
    let unit = prop_oneof![
        Just(0xD83Du16),
        Just(0xDE00u16),
        0x20u16..0x7f,
        0x80u16..0xD800,
        any::<u16>()
    ];
    proptest::collection::vec(proptest::collection::vec(unit, 0..6), 1..5)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn raw(text: &str) -> Box<RawValue> {
        RawValue::from_string(text.to_string()).unwrap()
    }

    fn joined(literals: &[&str]) -> String {
        let mut out = String::new();
        let mut fragments = Fragments::default();
        for literal in literals {
            fragments.push(&raw(literal), &mut out).unwrap();
        }
        fragments.finish(&mut out);
        out
    }

    #[test]
    fn a_pair_split_across_fragments_is_joined() {
        assert_eq!(joined(&[r#""a\ud83d""#, r#""\ude00b""#]), "a😀b");
        assert_eq!(joined(&[r#""\ud83d""#, r#""""#, r#""\ude00""#]), "😀");
    }

    #[test]
    fn lone_surrogates_become_the_replacement_character() {
        assert_eq!(joined(&[r#""\ud83d""#, r#""x""#]), "\u{FFFD}x");
        assert_eq!(joined(&[r#""\ude00\ud83d""#]), "\u{FFFD}\u{FFFD}");
        assert_eq!(joined(&[r#""\ud83d\ud83d\ude00""#]), "\u{FFFD}😀");
        assert_eq!(joined(&[r#""\ud83d\n""#]), "\u{FFFD}\n");
    }

    #[test]
    fn escapes_and_plain_text_decode_as_json_does() {
        let text = r#""q\"\\\/\b\f\n\r\t\u00e9 é 😀 \ud83d\ude00""#;
        assert_eq!(joined(&[text]), serde_json::from_str::<String>(text).unwrap());
        assert!(Fragments::default().push(&raw("1"), &mut String::new()).is_err());
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

        /// Any UTF-16 text cut anywhere (pairs included) decodes as the whole text does, which is
        /// the text itself when it is well formed.
        #[test]
        fn cutting_utf16_anywhere_changes_nothing(
            units in proptest::collection::vec(prop_oneof![Just(0xD83Du16), Just(0xDE00u16), 0x20u16..0x80, any::<u16>()], 0..40),
            cuts in proptest::collection::vec(any::<usize>(), 0..6),
        ) {
            let whole = joined(&[&literal(&units)]);
            prop_assert_eq!(&whole, &String::from_utf16_lossy(&units));
            let mut points: Vec<usize> = cuts.iter().map(|cut| cut % (units.len() + 1)).collect();
            points.sort_unstable();
            let mut start = 0;
            let mut pieces = Vec::new();
            for point in points.into_iter().chain([units.len()]) {
                pieces.push(literal(&units[start..point]));
                start = point;
            }
            let pieces: Vec<&str> = pieces.iter().map(String::as_str).collect();
            prop_assert_eq!(joined(&pieces), whole);
        }
    }
}
