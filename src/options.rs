//! Reading options objects from JS (`createAgent`'s options, hook objects, webhook configs,
//! scripted turns): one reader, so every problem is a `ConfigError` phrased the same way,
//! `<path>.<field> must be <expected> (got <value>)`. Ground floor: it knows JS values and
//! errors, nothing of the agent.

use std::fmt::Display;

use serde_json::{Map, Value};

use crate::error::{Result, SdkError};
use crate::host::Callable;
use crate::js_value::{callable, describe, kind, whole_number};

/// What a `null` field means.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Nulls {
    /// Absent, as `createAgent`'s options read it (`undefined` never arrives: the binding drops it).
    Absent,
    /// A wrong value, as strict readers (webhook configs) read it.
    Invalid,
}

/// An options object being read, with its path for error messages.
pub struct OptionsObject<'a> {
    path: String,
    map: &'a Map<String, Value>,
    nulls: Nulls,
}

impl<'a> OptionsObject<'a> {
    /// `value` as an object (a user function is not one): `<path> must be <expected> (got …)`.
    pub fn of(value: &'a Value, path: &str, expected: &str) -> Result<Self> {
        match value {
            Value::Object(map) if callable(value).is_none() => Ok(Self::new(map, path)),
            other => Err(SdkError::config(format!("{path} must be {expected} (got {})", describe(other))).at(path)),
        }
    }

    /// An object already known to be one; `null` fields are absent.
    pub fn new(map: &'a Map<String, Value>, path: &str) -> Self {
        OptionsObject {
            path: path.to_string(),
            map,
            nulls: Nulls::Absent,
        }
    }

    /// The same reader where `null` fields are `nulls`.
    pub fn nulls(self, nulls: Nulls) -> Self {
        OptionsObject { nulls, ..self }
    }

    /// A reader of no fields (an option group that was not given).
    pub fn empty(path: &str) -> Self {
        static EMPTY: std::sync::OnceLock<Map<String, Value>> = std::sync::OnceLock::new();
        Self::new(EMPTY.get_or_init(Map::new), path)
    }

    /// The path of a field: `advanced.hookTimeoutMs`; top-level options (path `options`, or
    /// none) by their bare name.
    pub fn field(&self, name: &str) -> String {
        if self.path == "options" || self.path.is_empty() {
            name.to_string()
        } else {
            format!("{}.{name}", self.path)
        }
    }

    /// Where the object is (`advanced.connection`).
    pub fn path(&self) -> &str {
        &self.path
    }

    /// The object as given.
    pub fn map(&self) -> &'a Map<String, Value> {
        self.map
    }

    /// A present field.
    pub fn get(&self, name: &str) -> Option<&'a Value> {
        let value = self.map.get(name);
        match self.nulls {
            Nulls::Absent => value.filter(|value| !value.is_null()),
            Nulls::Invalid => value,
        }
    }

    /// `<field> <problem>`: every problem of a field is phrased here.
    pub fn error(&self, name: &str, problem: impl Display) -> SdkError {
        let field = self.field(name);
        SdkError::config(format!("{field} {problem}")).at(&field)
    }

    /// `<field> must be <expected> (got <value>)`.
    pub fn invalid(&self, name: &str, expected: &str, got: &Value) -> SdkError {
        self.error(name, format_args!("must be {expected} (got {})", describe(got)))
    }

    /// Refuses keys neither in `allowed` nor in one of `accepted`, naming the first; returns the
    /// keys present from `accepted` (known, but not built here).
    pub fn only(&self, allowed: &[&str], accepted: &[&[&str]]) -> Result<Vec<String>> {
        let mut present = Vec::new();
        for key in self.map.keys() {
            if accepted.iter().any(|list| list.contains(&key.as_str())) {
                present.push(key.clone());
            } else if !allowed.contains(&key.as_str()) {
                return Err(self.error(
                    key,
                    format_args!("is not a known option (known here: {})", allowed.join(", ")),
                ));
            }
        }
        Ok(present)
    }

    /// A string that may be a secret: a wrong value is named by its kind, never shown.
    pub fn secret(&self, name: &str) -> Result<Option<String>> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::String(text)) => Ok(Some(text.clone())),
            Some(other) => Err(self.error(name, format_args!("must be a string (got {})", kind(other)))),
        }
    }

    pub fn str(&self, name: &str) -> Result<Option<&'a str>> {
        match self.get(name) {
            None => Ok(None),
            Some(Value::String(text)) => Ok(Some(text)),
            Some(other) => Err(self.invalid(name, "a string", other)),
        }
    }

    pub fn string(&self, name: &str) -> Result<Option<String>> {
        Ok(self.str(name)?.map(str::to_string))
    }

    /// A user function: `<field> must be a function (got …)`.
    pub fn function(&self, name: &str) -> Result<Option<Callable>> {
        match self.get(name) {
            None => Ok(None),
            Some(value) => callable(value)
                .map(Some)
                .ok_or_else(|| self.invalid(name, "a function", value)),
        }
    }

    pub fn positive_integer(&self, name: &str, max: u64) -> Result<Option<u64>> {
        match self.get(name) {
            None => Ok(None),
            Some(value) => whole_number(value)
                .filter(|n| (1..=max).contains(n))
                .map(Some)
                .ok_or_else(|| self.invalid(name, &format!("a positive integer no greater than {max}"), value)),
        }
    }
}
