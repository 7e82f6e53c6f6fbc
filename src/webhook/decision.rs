//! Reading a result control's answer: a 2xx JSON body with a top-level `decision` decides;
//! anything else that is not an error is a notification (no opinion).

use serde_json::Value;

/// At most this many bytes of a control's answer are read.
pub const MAX_RESPONSE_BYTES: usize = 64 * 1024;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decision {
    Allow,
    /// The receiver's reason, if it gave a non-empty one.
    Deny(Option<String>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Parsed {
    Decision(Decision),
    /// No top-level decision: 204, empty, not JSON, not an object, or no `decision` key.
    Notification,
    /// A `decision` that is not `allow`/`deny`, or a deny whose reason is not a string.
    Invalid,
    /// Not UTF-8.
    NotUtf8,
    /// Over [`MAX_RESPONSE_BYTES`].
    TooLarge,
}

/// Classifies a 2xx answer's body. Never panics, whatever the bytes.
pub fn parse(status: u16, body: &[u8]) -> Parsed {
    if status == 204 {
        return Parsed::Notification;
    }
    if body.len() > MAX_RESPONSE_BYTES {
        return Parsed::TooLarge;
    }
    let Ok(text) = std::str::from_utf8(body) else {
        return Parsed::NotUtf8;
    };
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let Ok(Value::Object(object)) = serde_json::from_str::<Value>(text) else {
        return Parsed::Notification;
    };
    let Some(decision) = object.get("decision") else {
        return Parsed::Notification;
    };
    match decision.as_str() {
        Some("allow") => Parsed::Decision(Decision::Allow),
        Some("deny") => match object.get("reason") {
            None => Parsed::Decision(Decision::Deny(None)),
            Some(Value::String(reason)) => {
                Parsed::Decision(Decision::Deny(Some(reason.clone()).filter(|r| !r.is_empty())))
            }
            Some(_) => Parsed::Invalid,
        },
        _ => Parsed::Invalid,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn decisions_notifications_and_errors() {
        let cases: &[(u16, &[u8], Parsed)] = &[
            (200, br#"{"decision":"allow"}"#, Parsed::Decision(Decision::Allow)),
            (
                201,
                br#"{"decision":"allow","reason":"ignored","updatedInput":{}}"#,
                Parsed::Decision(Decision::Allow),
            ),
            (
                200,
                br#"{"decision":"deny","reason":"no"}"#,
                Parsed::Decision(Decision::Deny(Some("no".into()))),
            ),
            (200, br#"{"decision":"deny"}"#, Parsed::Decision(Decision::Deny(None))),
            (
                200,
                br#"{"decision":"deny","reason":""}"#,
                Parsed::Decision(Decision::Deny(None)),
            ),
            (
                200,
                "\u{feff}{\"decision\":\"allow\"}".as_bytes(),
                Parsed::Decision(Decision::Allow),
            ),
            (204, br#"{"decision":"deny"}"#, Parsed::Notification),
            (200, b"", Parsed::Notification),
            (200, b"  ", Parsed::Notification),
            (200, b"notification accepted", Parsed::Notification),
            (200, b"{\"decision\":", Parsed::Notification),
            (200, b"[1,2]", Parsed::Notification),
            (200, b"null", Parsed::Notification),
            (202, br#"{"accepted":true}"#, Parsed::Notification),
            (
                200,
                br#"{"hookSpecificOutput":{"decision":"deny"}}"#,
                Parsed::Notification,
            ),
            (200, br#"{"decision":"block"}"#, Parsed::Invalid),
            (200, br#"{"decision":null}"#, Parsed::Invalid),
            (200, br#"{"decision":1}"#, Parsed::Invalid),
            (200, br#"{"decision":"deny","reason":3}"#, Parsed::Invalid),
            (200, b"\xff\xfe{}", Parsed::NotUtf8),
        ];
        for (status, body, expected) in cases {
            assert_eq!(&parse(*status, body), expected, "{}", String::from_utf8_lossy(body));
        }
    }

    #[test]
    fn the_size_limit_is_inclusive() {
        let mut exact = br#"{"decision":"allow","pad":""#.to_vec();
        exact.resize(MAX_RESPONSE_BYTES - 2, b'x');
        exact.extend_from_slice(b"\"}");
        assert_eq!(exact.len(), MAX_RESPONSE_BYTES);
        assert_eq!(parse(200, &exact), Parsed::Decision(Decision::Allow));
        exact.insert(30, b'x');
        assert_eq!(parse(200, &exact), Parsed::TooLarge);
    }

    proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(status in 200u16..300, body in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = parse(status, &body);
        }

        #[test]
        fn arbitrary_json_objects_never_panic(key in "[a-z]{1,8}", value in any::<String>(), decision in prop_oneof![Just("allow".to_string()), Just("deny".to_string()), any::<String>()]) {
            let body = serde_json::json!({"decision": decision, key: value}).to_string();
            let _ = parse(200, body.as_bytes());
        }
    }
}
