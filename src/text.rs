//! Texts: excerpts for error messages, and JSON text as JS writes it.

/// Parses JSON text that JS made. `JSON.stringify` writes a lone surrogate (a string cut
/// mid-emoji) as a `\uD83D` escape, which is valid JS but has no UTF-8 form: such escapes
/// become U+FFFD, as `TextEncoder` makes them, instead of failing the whole value.
pub fn parse_js_json<T: serde::de::DeserializeOwned>(text: &str) -> serde_json::Result<T> {
    match serde_json::from_str(text) {
        Err(error) if text.contains("\\u") => match replace_lone_surrogates(text) {
            Some(repaired) => serde_json::from_str(&repaired),
            None => Err(error),
        },
        parsed => parsed,
    }
}

/// `text` with every `\uXXXX` escape of an unpaired surrogate written as `\ufffd`; `None` when
/// there is none.
fn replace_lone_surrogates(text: &str) -> Option<String> {
    let bytes = text.as_bytes();
    let unit_at = |at: usize| -> Option<u16> {
        let hex = bytes.get(at..at + 6)?;
        if hex[0] != b'\\' || hex[1] != b'u' {
            return None;
        }
        u16::from_str_radix(std::str::from_utf8(&hex[2..]).ok()?, 16).ok()
    };
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut replaced = false;
    let mut at = 0;
    while at < bytes.len() {
        if bytes[at] != b'\\' {
            at += 1;
            continue;
        }
        let Some(unit) = unit_at(at) else {
            // Another escape (`\\`, `\"`, …): skip it whole, so its second byte is not read as one.
            at += 2;
            continue;
        };
        let paired = match unit {
            0xD800..=0xDBFF => unit_at(at + 6).is_some_and(|next| (0xDC00..=0xDFFF).contains(&next)),
            0xDC00..=0xDFFF => false,
            _ => {
                at += 6;
                continue;
            }
        };
        if paired {
            at += 12;
            continue;
        }
        out.push_str(&text[copied..at]);
        out.push_str("\\ufffd");
        at += 6;
        copied = at;
        replaced = true;
    }
    if !replaced {
        return None;
    }
    out.push_str(&text[copied..]);
    Some(out)
}

/// The start of `text`, at most `limit` characters, cut on a character boundary.
pub fn excerpt(text: &str, limit: usize) -> String {
    let text = text.trim();
    match text.char_indices().nth(limit) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::{json, Value};

    #[test]
    fn excerpt_cuts_on_a_character_boundary() {
        assert_eq!(excerpt("héllo", 2), "hé…");
        assert_eq!(excerpt("hi", 5), "hi");
    }

    #[test]
    fn lone_surrogates_from_js_become_replacement_characters() {
        let parsed: Value =
            parse_js_json(r#"{"a":"ok \ud83d","b":"\ude00 x","c":"\ud83d\ude00","d":"\\ud800"}"#).unwrap();
        assert_eq!(
            parsed,
            json!({"a": "ok \u{fffd}", "b": "\u{fffd} x", "c": "😀", "d": "\\ud800"})
        );
        let high_then_high: Value = parse_js_json(r#""\ud83d\ud83d\ude00""#).unwrap();
        assert_eq!(high_then_high, json!("\u{fffd}😀"));
        assert!(parse_js_json::<Value>("{").is_err());
        assert!(parse_js_json::<Value>(r#""\ud83d"#).is_err());
    }

    proptest::proptest! {
        #[test]
        fn any_js_string_survives(units in proptest::collection::vec(proptest::prelude::any::<u16>(), 0..40)) {
            // What JSON.stringify writes: characters as JSON strings write them, lone
            // surrogates as escapes.
            let mut json = String::from("\"");
            for decoded in char::decode_utf16(units.iter().copied()) {
                match decoded {
                    Ok(c) => {
                        let quoted = serde_json::to_string(&c.to_string()).unwrap();
                        json.push_str(&quoted[1..quoted.len() - 1]);
                    }
                    Err(lone) => json.push_str(&format!("\\u{:04x}", lone.unpaired_surrogate())),
                }
            }
            json.push('"');
            let parsed: String = parse_js_json(&json).unwrap();
            proptest::prop_assert_eq!(parsed, String::from_utf16_lossy(&units));
        }
    }
}
