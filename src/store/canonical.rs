//! RFC 8785 (JSON Canonicalization Scheme) over `serde_json::Value`, and the two digests built on
//! it: a pending call's fingerprint and its approval token (SPEC §8.1).
//!
//! Written here rather than taken from `serde_jcs`: that crate turns on serde_json's
//! `float_roundtrip` for the whole addon (a project-wide parsing change) and serializes through
//! serde, while we only ever canonicalize a `Value`. The one hard part, ECMAScript number
//! formatting, comes from `ryu-js` (the Boa engine's, ES `Number.prototype.toString` exact).

use std::cmp::Ordering;

use hmac::{Hmac, Mac};
use serde_json::{Map, Number, Value};
use sha2::{Digest, Sha256};

/// The RFC 8785 canonical text of `value`: object keys sorted by UTF-16 code units, no
/// whitespace, numbers as ECMAScript prints them, strings escaped as `JSON.stringify` does.
pub fn canonical_json(value: &Value) -> String {
    let mut out = String::new();
    write_value(&mut out, value);
    out
}

/// SHA-256 (lowercase hex) of the canonical JSON of `{ "input": input, "toolName": name }`: what
/// binds an approval to one exact invocation (taken after PreToolUse/PermissionRequest rewrites).
pub fn fingerprint(tool_name: &str, input: &Map<String, Value>) -> String {
    let mut text = String::from("{\"input\":");
    write_object(&mut text, input);
    text.push_str(",\"toolName\":");
    write_string(&mut text, tool_name);
    text.push('}');
    hex(&Sha256::digest(text.as_bytes()))
}

/// SHA-256 of `text`, lowercase hex.
pub(super) fn sha256_hex(text: &str) -> String {
    hex(&Sha256::digest(text.as_bytes()))
}

/// The effects-ledger key of a call made inside a sub-agent (SPEC §8.7): its id and a digest of
/// the `Task` calls above it (`chain`, from the root's down), so two sub-agents whose models
/// reuse an id keep two entries, and a deep tree's key stays short. The root's calls are keyed
/// by their id alone, as before sub-agents were ledgered.
pub fn ledger_key(chain: &[String], tool_call_id: &str) -> String {
    if chain.is_empty() {
        return tool_call_id.to_owned();
    }
    let digest = sha256_hex(&canonical_json(&Value::from(chain.to_vec())));
    format!("{tool_call_id}@{}", &digest[..32])
}

type HmacSha256 = Hmac<Sha256>;

/// Where a waiting call sits, as its approval token binds it: the session, the sub-agents from
/// the root's child down to the agent that made the call (`[]` for the root's own), the call.
#[derive(Debug, Clone, Copy)]
pub struct CallPlace<'a> {
    pub session_id: &'a str,
    pub agent_path: &'a [String],
    pub tool_call_id: &'a str,
}

impl<'a> CallPlace<'a> {
    /// A call of the root agent.
    pub fn root(session_id: &'a str, tool_call_id: &'a str) -> Self {
        CallPlace {
            session_id,
            agent_path: &[],
            tool_call_id,
        }
    }

    /// What the token signs: `[sessionId, toolCallId, fingerprint]` for the root's calls (as
    /// tokens were before sub-agents could pause), `[sessionId, agentPath, toolCallId,
    /// fingerprint]` inside a sub-agent. A 3- and a 4-element array never share a canonical form.
    fn signed(&self, fingerprint: &str) -> String {
        let mut parts = vec![Value::from(self.session_id)];
        if !self.agent_path.is_empty() {
            parts.push(Value::from(self.agent_path.to_vec()));
        }
        parts.push(Value::from(self.tool_call_id));
        parts.push(Value::from(fingerprint));
        canonical_json(&Value::Array(parts))
    }
}

fn token_mac(secret: &[u8], place: CallPlace<'_>, fingerprint: &str) -> HmacSha256 {
    // HMAC takes keys of any length, so this cannot fail.
    let mut mac = HmacSha256::new_from_slice(secret).expect("HMAC accepts any key length");
    mac.update(place.signed(fingerprint).as_bytes());
    mac
}

/// HMAC-SHA256 (key: `secret`) over the canonical JSON of the call's place and fingerprint
/// ([`CallPlace::signed`]), lowercase hex: an approval relayed by an untrusted client cannot be
/// forged or moved to another call, another sub-agent or another session.
pub fn approval_token(secret: &[u8], place: CallPlace<'_>, fingerprint: &str) -> String {
    hex(&token_mac(secret, place, fingerprint).finalize().into_bytes())
}

/// Whether `token` is the approval token of this call. The comparison is constant-time (the
/// `hmac` crate's `verify_slice`); only the token's shape (64 lowercase hex digits) is checked
/// before it, and that says nothing about the secret.
pub fn verify_approval_token(secret: &[u8], place: CallPlace<'_>, fingerprint: &str, token: &str) -> bool {
    let Some(bytes) = unhex(token) else { return false };
    token_mac(secret, place, fingerprint).verify_slice(&bytes).is_ok()
}

fn hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        out.push(DIGITS[usize::from(byte >> 4)] as char);
        out.push(DIGITS[usize::from(byte & 0xf)] as char);
    }
    out
}

/// Lowercase hex only: the token is defined as lowercase, so `ABC…` is not the same token.
fn unhex(text: &str) -> Option<Vec<u8>> {
    fn digit(c: u8) -> Option<u8> {
        match c {
            b'0'..=b'9' => Some(c - b'0'),
            b'a'..=b'f' => Some(c - b'a' + 10),
            _ => None,
        }
    }
    if text.len() != 64 {
        return None;
    }
    text.as_bytes()
        .chunks(2)
        .map(|pair| Some(digit(pair[0])? << 4 | digit(pair[1])?))
        .collect()
}

fn write_value(out: &mut String, value: &Value) {
    match value {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => write_number(out, n),
        Value::String(s) => write_string(out, s),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_value(out, item);
            }
            out.push(']');
        }
        Value::Object(map) => write_object(out, map),
    }
}

fn write_object(out: &mut String, map: &Map<String, Value>) {
    let mut entries: Vec<(&String, &Value)> = map.iter().collect();
    entries.sort_by(|a, b| utf16_cmp(a.0, b.0));
    out.push('{');
    for (i, (key, value)) in entries.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_string(out, key);
        out.push(':');
        write_value(out, value);
    }
    out.push('}');
}

/// RFC 8785 §3.2.3 sorts by UTF-16 code units, which differs from `str`'s code point order for
/// characters above U+FFFF against U+E000..U+FFFF.
fn utf16_cmp(a: &str, b: &str) -> Ordering {
    a.encode_utf16().cmp(b.encode_utf16())
}

/// serde_json already escapes strings exactly as RFC 8785 §3.2.2.2 asks (`\b \t \n \f \r \" \\`,
/// other controls as lowercase `\u00xx`, everything else literal); a test pins that.
fn write_string(out: &mut String, text: &str) {
    out.push_str(&serde_json::to_string(text).expect("a string always serializes"));
}

/// Every JSON number is an IEEE 754 double in RFC 8785, as in JS: integers go through `f64` too,
/// so one beyond 2^53 prints as JS would print it (the value JS code computing the same
/// fingerprint holds). `ryu-js` gives ES `Number.prototype.toString`; -0 prints as `0`.
fn write_number(out: &mut String, number: &Number) {
    let double = number
        .as_f64()
        .expect("serde_json numbers are finite without arbitrary_precision");
    if double == 0.0 {
        out.push('0');
        return;
    }
    out.push_str(ryu_js::Buffer::new().format_finite(double));
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_rfc_8785_sample_canonicalizes_to_its_published_text() {
        // RFC 8785 §3.2.4 (input as the RFC prints it, parsed by serde_json).
        let input = r#"{
          "numbers": [333333333.33333329, 1E30, 4.50, 2e-3, 0.000000000000000000000000001],
          "string": "\u20ac$\u000F\u000aA'\u0042\u0022\u005c\\\"\/",
          "literals": [null, true, false]
        }"#;
        let value: Value = serde_json::from_str(input).unwrap();
        assert_eq!(
            canonical_json(&value),
            r#"{"literals":[null,true,false],"numbers":[333333333.3333333,1e+30,4.5,0.002,1e-27],"string":"€$\u000f\nA'B\"\\\\\"/"}"#
        );
    }

    #[test]
    fn keys_sort_by_utf16_code_units() {
        // RFC 8785 §3.2.3: the emoji (surrogates D83D DE00) sorts before U+FB33, unlike code points.
        let value = json!({
            "\u{20ac}": "Euro Sign",
            "\r": "Carriage Return",
            "\u{fb33}": "Hebrew Letter Dalet With Dagesh",
            "1": "One",
            "\u{1f600}": "Emoji: Grinning Face",
            "\u{80}": "Control",
            "\u{f6}": "Latin Small Letter O With Diaeresis"
        });
        let keys: Vec<String> = match serde_json::from_str::<Value>(&canonical_json(&value)).unwrap() {
            Value::Object(map) => map.keys().cloned().collect(),
            _ => unreachable!(),
        };
        assert_eq!(
            keys,
            ["\r", "1", "\u{80}", "\u{f6}", "\u{20ac}", "\u{1f600}", "\u{fb33}"]
        );
    }

    #[test]
    fn numbers_print_as_ecmascript_does() {
        // RFC 8785 Appendix B's kind of vectors (IEEE 754 bits), each checked against Node's
        // `String(double)`.
        let cases: &[(f64, &str)] = &[
            (f64::from_bits(0x0000_0000_0000_0001), "5e-324"),
            (f64::from_bits(0x7fef_ffff_ffff_ffff), "1.7976931348623157e+308"),
            (f64::from_bits(0x4340_0000_0000_0000), "9007199254740992"),
            (f64::from_bits(0xc340_0000_0000_0000), "-9007199254740992"),
            (f64::from_bits(0x4430_0000_0000_0000), "295147905179352830000"),
            (f64::from_bits(0x44b5_2d02_c7e1_4af5), "9.999999999999997e+22"),
            (f64::from_bits(0x44b5_2d02_c7e1_4af6), "1e+23"),
            (f64::from_bits(0x444b_1ae4_d6e2_ef4e), "999999999999999700000"),
            (f64::from_bits(0x444b_1ae4_d6e2_ef4f), "999999999999999900000"),
            (f64::from_bits(0x444b_1ae4_d6e2_ef50), "1e+21"),
            (f64::from_bits(0x444b_1ae4_d6e2_ef51), "1.0000000000000001e+21"),
            (f64::from_bits(0x3eb0_c6f7_a0b5_ed8c), "9.999999999999997e-7"),
            (f64::from_bits(0x3eb0_c6f7_a0b5_ed8d), "0.000001"),
            (f64::from_bits(0x41b3_de43_5555_5553), "333333333.3333332"),
            (f64::from_bits(0x41b3_de43_5555_5554), "333333333.33333325"),
            (f64::from_bits(0x41b3_de43_5555_5555), "333333333.3333333"),
            (f64::from_bits(0x4022_0000_0000_0000), "9"),
            (-0.0, "0"),
            (0.1, "0.1"),
            (1e-7, "1e-7"),
            (-1.5, "-1.5"),
        ];
        for (double, expected) in cases {
            assert_eq!(canonical_json(&json!(double)), *expected, "{double:e}");
        }
        // Integers are exact up to 2^53 and then print as the double JS would hold.
        assert_eq!(canonical_json(&json!(42_u64)), "42");
        assert_eq!(canonical_json(&json!(-7_i64)), "-7");
        assert_eq!(canonical_json(&json!(9_007_199_254_740_993_u64)), "9007199254740992");
        assert_eq!(canonical_json(&json!(u64::MAX)), "18446744073709552000");
    }

    #[test]
    fn strings_escape_as_json_stringify_does() {
        let value = json!("\u{8}\t\n\u{c}\r\"\\\u{1}\u{1f}\u{7f}\u{2028}/é😀");
        assert_eq!(
            canonical_json(&value),
            "\"\\b\\t\\n\\f\\r\\\"\\\\\\u0001\\u001f\u{7f}\u{2028}/é😀\""
        );
    }

    #[test]
    fn nested_values_have_no_whitespace_and_sorted_keys_at_every_level() {
        let value = json!({"b": [1, {"z": null, "a": true}], "a": {}, "c": []});
        assert_eq!(canonical_json(&value), r#"{"a":{},"b":[1,{"a":true,"z":null}],"c":[]}"#);
    }

    // The expected digests below were computed outside this code (`printf '%s' <text> |
    // sha256sum` and `openssl dgst -sha256 -hmac`) over the canonical texts written out by hand.
    const READ_FINGERPRINT: &str = "5c49b7a0c9dcf8bc19fbc4244719634518f84af54bca24d75ab350aeb0d0989a";

    #[test]
    fn fingerprint_is_sha256_of_the_canonical_input_and_tool_name() {
        let input = json!({"path": "a.txt", "limit": 10, "flags": {"z": 1.5, "a": [true, null]}});
        let Value::Object(input) = input else { unreachable!() };
        // Canonical text: {"input":{"flags":{"a":[true,null],"z":1.5},"limit":10,"path":"a.txt"},"toolName":"read"}
        let expected = READ_FINGERPRINT;
        assert_eq!(fingerprint("read", &input), expected);
        // Key order in the input does not matter; the tool name does.
        let reordered: Map<String, Value> = input.iter().rev().map(|(k, v)| (k.clone(), v.clone())).collect();
        assert_eq!(fingerprint("read", &reordered), expected);
        assert_ne!(fingerprint("write", &input), expected);
    }

    #[test]
    fn approval_token_is_hmac_of_the_canonical_triple_and_verifies_in_constant_time() {
        // Canonical text: ["s1","call_1","<READ_FINGERPRINT>"]
        let place = CallPlace::root("s1", "call_1");
        let token = approval_token(b"top-secret", place, READ_FINGERPRINT);
        assert_eq!(
            token,
            "bc3e27506ecf11930e38433d039f36fcc5bc075411e3020df0a599ebcf19b9cd"
        );
        assert!(verify_approval_token(b"top-secret", place, READ_FINGERPRINT, &token));
        assert!(!verify_approval_token(b"other", place, READ_FINGERPRINT, &token));
        for other in [CallPlace::root("s1", "call_2"), CallPlace::root("s2", "call_1")] {
            assert!(!verify_approval_token(b"top-secret", other, READ_FINGERPRINT, &token));
        }
        assert!(!verify_approval_token(b"top-secret", place, "00", &token));
        assert!(!verify_approval_token(
            b"top-secret",
            place,
            READ_FINGERPRINT,
            &token.to_uppercase()
        ));
        assert!(!verify_approval_token(
            b"top-secret",
            place,
            READ_FINGERPRINT,
            &token[..62]
        ));
        assert!(!verify_approval_token(b"top-secret", place, READ_FINGERPRINT, ""));
    }

    #[test]
    fn a_sub_agents_token_signs_its_agent_path_and_moves_to_no_other_place() {
        let reviewer = ["reviewer".to_string()];
        let deeper = ["reviewer".to_string(), "tester".to_string()];
        let at = |agent_path| CallPlace {
            session_id: "s1",
            agent_path,
            tool_call_id: "call_1",
        };
        // Canonical text: ["s1",["reviewer"],"call_1","<READ_FINGERPRINT>"]
        let token = approval_token(b"top-secret", at(&reviewer), READ_FINGERPRINT);
        assert_eq!(
            token,
            "c104e0e5671015d87b6b3e076a216270cb8c2bc267a8134fcfd0d807fd046be7"
        );
        // ["s1",["reviewer","tester"],"call_1","<READ_FINGERPRINT>"]
        assert_eq!(
            approval_token(b"top-secret", at(&deeper), READ_FINGERPRINT),
            "015afa9b09f5b6cfaa648838759e04ecc6a4c534cac3f95c66f8ed4c69471cd6"
        );
        assert!(verify_approval_token(
            b"top-secret",
            at(&reviewer),
            READ_FINGERPRINT,
            &token
        ));
        // Neither to the root's call of the same id, nor to another depth.
        let root = CallPlace::root("s1", "call_1");
        assert!(!verify_approval_token(b"top-secret", root, READ_FINGERPRINT, &token));
        assert!(!verify_approval_token(
            b"top-secret",
            at(&deeper),
            READ_FINGERPRINT,
            &token
        ));
    }

    #[test]
    fn a_sub_agents_call_has_a_ledger_key_of_its_own_place() {
        assert_eq!(ledger_key(&[], "call_1"), "call_1");
        let task = ["task-1".to_string()];
        // The id and the first 32 hex digits of SHA-256 of `["task-1"]` (computed apart).
        let key = ledger_key(&task, "call_1");
        assert_eq!(key, "call_1@e056239c1a5e1cf6ffda57b9cc656cef");
        assert_ne!(key, ledger_key(&["task-2".to_string()], "call_1"));
        assert_ne!(key, ledger_key(&["task-1".to_string(), "m".to_string()], "call_1"));
    }
}
