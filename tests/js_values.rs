//! Property tests of the readers of what JS hands back: any JSON (and any text, for the JSON
//! parser of JS replies) is read without a panic, and a value marked as not plain data is never
//! taken for a decision that lets a tool run.

use agent_runtime_hooks::agent::permission::{parse_decision, Decision};
use agent_runtime_hooks::agent::tools::model_output;
use agent_runtime_hooks::hooks::output::{Action, HookOutput};
use agent_runtime_hooks::text::parse_js_json;
use proptest::prelude::*;
use serde_json::{json, Map, Value};

/// Any JSON value, with the keys the readers look at over-represented.
fn json_value() -> impl Strategy<Value = Value> {
    let key = prop_oneof![
        Just("action".to_string()),
        Just("behavior".to_string()),
        Just("reason".to_string()),
        Just("modifiedInput".to_string()),
        Just("updatedInput".to_string()),
        Just("status".to_string()),
        Just("model".to_string()),
        Just("error".to_string()),
        Just("message".to_string()),
        Just("$js".to_string()),
        "[a-z]{1,6}",
    ];
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>()
            .prop_filter("finite", |n| n.is_finite())
            .prop_map(|n| json!(n)),
        prop_oneof![
            Just("allow".to_string()),
            Just("deny".to_string()),
            Just("ask".to_string()),
            Just("continue".to_string()),
            Just("skip".to_string()),
            Just("abort".to_string()),
            Just("success".to_string()),
            ".{0,12}",
        ]
        .prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, move |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec((key.clone(), inner), 0..5)
                .prop_map(|pairs| Value::Object(pairs.into_iter().collect::<Map<String, Value>>())),
        ]
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn any_reply_is_read_without_a_panic(value in json_value()) {
        let _ = HookOutput::parse(Some(&value), "hook");
        let _ = parse_decision(Some(&value));
        let _ = model_output(Some(value));
    }

    #[test]
    fn a_value_marked_not_plain_data_never_allows_or_continues(detail in ".{0,40}") {
        // What the wrapper sends for a getter, a toJSON, a function or a symbol.
        let marked = json!({ "$js": format!("a value that is not plain data ({detail})") });
        prop_assert!(HookOutput::parse(Some(&marked), "hook").is_err());
        let decision = parse_decision(Some(&marked));
        prop_assert!(!matches!(decision, Ok(Decision::Allow { .. })), "allowed: {decision:?}");
    }

    #[test]
    fn any_text_from_js_is_parsed_without_a_panic(text in ".{0,80}") {
        let _ = parse_js_json::<Value>(&text);
    }

    #[test]
    fn escaped_surrogates_anywhere_never_fail_a_well_formed_reply(units in prop::collection::vec(0xD7F0u16..0xE010, 0..12)) {
        let escaped: String = units.iter().map(|unit| format!("\\u{unit:04x}")).collect();
        let text = format!("{{\"action\":\"continue\",\"reason\":\"{escaped}\"}}");
        let parsed: Value = parse_js_json(&text).unwrap();
        let output = HookOutput::parse(Some(&parsed), "hook").unwrap();
        prop_assert_eq!(output.action, Action::Continue);
    }
}
