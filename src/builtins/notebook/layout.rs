//! A notebook written back as its file was laid out: the same indentation (Jupyter writes one
//! space), a final newline if it had one, keys in the order they came (the JSON map keeps it).
//! Strings are escaped as Python's `json.dumps(ensure_ascii=False)` escapes them, which is
//! serde_json's way too, so an unchanged cell comes back byte for byte.

use serde::Serialize;
use serde_json::ser::{PrettyFormatter, Serializer};
use serde_json::Value;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Layout {
    /// `None`: the file is one line.
    indent: Option<String>,
    final_newline: bool,
}

impl Layout {
    /// How `text` (a notebook's JSON) is laid out: the indentation of its first member.
    pub fn of(text: &str) -> Layout {
        let indent = text
            .trim_start()
            .strip_prefix('{')
            .and_then(|rest| rest.split('\n').nth(1))
            .map(|line| line.chars().take_while(|c| *c == ' ' || *c == '\t').collect::<String>())
            .filter(|indent| !indent.is_empty());
        Layout {
            indent,
            final_newline: text.ends_with('\n'),
        }
    }

    pub fn write(&self, value: &Value) -> Vec<u8> {
        let mut out = Vec::new();
        let written = match &self.indent {
            Some(indent) => {
                let mut serializer =
                    Serializer::with_formatter(&mut out, PrettyFormatter::with_indent(indent.as_bytes()));
                value.serialize(&mut serializer)
            }
            None => value.serialize(&mut Serializer::new(&mut out)),
        };
        // Writing a `Value` into memory cannot fail.
        written.expect("a JSON value serializes");
        if self.final_newline {
            out.push(b'\n');
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_files_own_layout_comes_back() {
        for text in [
            "{\n \"a\": [\n  1,\n  {}\n ],\n \"b\": \"é\\u001b\\\"\"\n}\n",
            "{\n    \"a\": [],\n    \"b\": {\n        \"c\": null\n    }\n}",
            "{\n\t\"a\": 1\n}\n",
            "{\"a\":[1,2],\"b\":\"x\"}",
        ] {
            let value: Value = serde_json::from_str(text).unwrap();
            let layout = Layout::of(text);
            assert_eq!(String::from_utf8(layout.write(&value)).unwrap(), text);
        }
    }
}
