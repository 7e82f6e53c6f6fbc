//! A run's controls: how it is aborted and how its end is awaited, and the options one `send`
//! starts it with.

use std::sync::Mutex;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::config::read_tool_choice;
use crate::error::{ErrorCode, Result, SdkError};
use crate::host::ScopeId;
use crate::js_value::MAX_TIMER_MS;
use crate::model::ToolChoice;
use crate::options::OptionsObject;
use crate::sync::lock;
use crate::webhook::Environment;

/// Stops a run: the caller's signal and `agent.abort()` both end up here.
#[derive(Default)]
pub struct RunControl {
    token: CancellationToken,
    reason: Mutex<Option<String>>,
    finished: CancellationToken,
    /// Whether the run was accepted (its claim on the session granted, its start possible):
    /// decided once, before `send` resolves.
    admitted: CancellationToken,
    refusal: Mutex<Option<SdkError>>,
}

impl RunControl {
    /// A sub-agent's controls: aborted with its parent's run (`parent`), or on its own.
    pub(crate) fn under(parent: Option<&CancellationToken>) -> Self {
        RunControl {
            token: parent.map_or_else(CancellationToken::new, CancellationToken::child_token),
            ..RunControl::default()
        }
    }

    /// Aborts the run; the first reason given is the one reported.
    pub fn abort(&self, reason: String) {
        lock(&self.reason).get_or_insert(reason);
        self.token.cancel();
    }

    pub async fn aborted(&self) {
        self.token.cancelled().await
    }

    /// Whether the run was aborted, however little has been awaited since.
    pub(crate) fn is_aborted(&self) -> bool {
        self.token.is_cancelled()
    }

    pub(crate) fn token(&self) -> &CancellationToken {
        &self.token
    }

    /// Called once the run published its last event.
    pub(crate) fn finish(&self) {
        self.finished.cancel();
    }

    /// Resolves once the run has published its last event.
    pub async fn finished(&self) {
        self.finished.cancelled().await
    }

    /// The run is accepted (`Ok`) or refused with the error `send` rejects with; the first word
    /// stands.
    pub(crate) fn admit(&self, outcome: Result<()>) {
        if self.admitted.is_cancelled() {
            return;
        }
        if let Err(refusal) = outcome {
            *lock(&self.refusal) = Some(refusal);
        }
        self.admitted.cancel();
    }

    /// Whether the run was accepted already.
    pub fn is_admitted(&self) -> bool {
        self.admitted.is_cancelled() && lock(&self.refusal).is_none()
    }

    /// Resolves once the run is accepted or refused.
    /// Whether the run was refused (its admission decided, with an error).
    pub(crate) fn refused(&self) -> bool {
        self.admitted.is_cancelled() && lock(&self.refusal).is_some()
    }

    pub async fn admitted(&self) -> Result<()> {
        self.admitted.cancelled().await;
        match lock(&self.refusal).clone() {
            Some(refusal) => Err(refusal),
            None => Ok(()),
        }
    }

    pub fn reason(&self) -> String {
        lock(&self.reason).clone().unwrap_or_else(|| "Operation aborted".into())
    }
}

/// Per-`send` options.
#[derive(Debug, Clone, Default)]
pub struct SendOptions {
    pub max_turns: Option<u32>,
    /// `toolChoice` for this run (the agent's own otherwise).
    pub tool_choice: Option<ToolChoice>,
    /// The host scope whose signal tools and callbacks of this run receive.
    pub scope: ScopeId,
    /// The environment variables the session reads, read when the run started.
    pub environment: Environment,
}

impl SendOptions {
    /// `maxTurns` of a `send`'s options (JSON as the wrapper encodes options: NaN, bigints and
    /// functions marked), read as `createAgent` reads its own; a bad one is `INVALID_INPUT`.
    pub fn max_turns(options: &Value) -> Result<Option<u32>> {
        let read = OptionsObject::of(options, "options", "an object")
            .and_then(|options| options.positive_integer("maxTurns", MAX_TIMER_MS));
        read.map(|turns| turns.map(|n| n as u32)).map_err(invalid_input)
    }

    /// `toolChoice` of a `send`'s options, read as `createAgent` reads its own.
    pub fn tool_choice(options: &Value) -> Result<Option<ToolChoice>> {
        OptionsObject::of(options, "options", "an object")
            .and_then(|options| read_tool_choice(&options))
            .map_err(invalid_input)
    }
}

/// A send's bad option is the caller's input, not the agent's configuration.
fn invalid_input(error: SdkError) -> SdkError {
    SdkError {
        code: ErrorCode::InvalidInput,
        ..error
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn max_turns_per_send_must_be_a_positive_integer() {
        assert_eq!(SendOptions::max_turns(&json!({})).unwrap(), None);
        assert_eq!(SendOptions::max_turns(&json!({"maxTurns": null})).unwrap(), None);
        assert_eq!(SendOptions::max_turns(&json!({"maxTurns": 3})).unwrap(), Some(3));
        for (bad, shown) in [
            (json!(0), "0"),
            (json!(-1), "-1"),
            (json!(1.5), "1.5"),
            (json!({"$js": "NaN"}), "NaN"),
            (json!({"$js": "Infinity"}), "Infinity"),
            (json!(2_147_483_648u64), "2147483648"),
            (json!("3"), "\"3\""),
            (json!({"a": 1}), "an object"),
        ] {
            let error = SendOptions::max_turns(&json!({ "maxTurns": bad })).unwrap_err();
            assert_eq!(error.code, ErrorCode::InvalidInput);
            assert_eq!(
                error.message,
                format!("maxTurns must be a positive integer no greater than 2147483647 (got {shown})")
            );
        }
    }
}
