//! Reading a built-in call's input: each field checked against the schema the model was
//! offered, a wrong one named with what it should be.

use serde_json::{Map, Value};

use super::Answer;
use crate::js_value::kind;

pub(crate) struct Fields<'a> {
    tool: &'static str,
    input: &'a Map<String, Value>,
}

impl<'a> Fields<'a> {
    pub fn of(tool: &'static str, input: &'a Map<String, Value>) -> Self {
        Fields { tool, input }
    }

    /// `Invalid input for Read: file_path must be a string (got a number)`.
    pub fn invalid(&self, field: &str, what: &str) -> Answer {
        invalid(self.tool, field, self.input.get(field), what)
    }

    fn present(&self, field: &str) -> Option<&'a Value> {
        self.input.get(field).filter(|value| !value.is_null())
    }

    pub fn string(&self, field: &str) -> Result<Option<&'a str>, Answer> {
        match self.present(field) {
            None => Ok(None),
            Some(Value::String(text)) => Ok(Some(text)),
            Some(_) => Err(self.invalid(field, "a string")),
        }
    }

    pub fn required_string(&self, field: &str) -> Result<&'a str, Answer> {
        self.string(field)?.ok_or_else(|| self.invalid(field, "a string"))
    }

    pub fn bool(&self, field: &str, default: bool) -> Result<bool, Answer> {
        match self.present(field) {
            None => Ok(default),
            Some(Value::Bool(value)) => Ok(*value),
            Some(_) => Err(self.invalid(field, "a boolean")),
        }
    }

    /// An integer from `min` to `max`.
    pub fn integer(&self, field: &str, min: u64, max: u64) -> Result<Option<u64>, Answer> {
        match self.present(field) {
            None => Ok(None),
            Some(value) => value
                .as_f64()
                .filter(|n| n.fract() == 0.0 && *n >= min as f64 && *n <= max as f64)
                .map(|n| Some(n as u64))
                .ok_or_else(|| self.invalid(field, &format!("an integer from {min} to {max}"))),
        }
    }

    /// One of `choices` (a string).
    pub fn choice(&self, field: &str, choices: &[&'static str], default: &'static str) -> Result<&'static str, Answer> {
        match self.present(field) {
            None => Ok(default),
            Some(Value::String(text)) => choices
                .iter()
                .find(|choice| **choice == text)
                .copied()
                .ok_or_else(|| self.invalid(field, &format!("one of {}", choices.join(", ")))),
            Some(_) => Err(self.invalid(field, &format!("one of {}", choices.join(", ")))),
        }
    }

    pub fn get(&self, field: &str) -> Option<&'a Value> {
        self.present(field)
    }
}

/// The same text for a field inside another (`todos[1].status`): what it is, what it got.
pub(crate) fn invalid(tool: &str, field: &str, got: Option<&Value>, what: &str) -> Answer {
    let got = got.map_or("nothing", kind);
    Answer::error(format!("Invalid input for {tool}: {field} must be {what} (got {got})"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn wrong_fields_are_named() {
        let input = json!({"a": 1, "b": "x", "n": 2.5, "m": "zz"});
        let fields = Fields::of("Read", input.as_object().unwrap());
        assert_eq!(
            fields.required_string("a").unwrap_err().text,
            "Invalid input for Read: a must be a string (got a number)"
        );
        assert_eq!(
            fields.required_string("missing").unwrap_err().text,
            "Invalid input for Read: missing must be a string (got nothing)"
        );
        assert_eq!(fields.string("b").unwrap(), Some("x"));
        assert_eq!(
            fields.integer("n", 0, 10).unwrap_err().text,
            "Invalid input for Read: n must be an integer from 0 to 10 (got a number)"
        );
        assert_eq!(fields.integer("a", 0, 10).unwrap(), Some(1));
        assert!(fields
            .choice("m", &["x", "y"], "x")
            .unwrap_err()
            .text
            .ends_with("one of x, y (got a string)"));
        assert!(fields.bool("missing", true).unwrap());
    }
}
