//! Human approvals (SPEC §8.1): calls paused on an `'ask'` nobody answered, the decisions taken
//! on them, and the turn a resumed run goes on with. Everything here is plain data, stored as it
//! is: a pause can be answered and resumed in another process.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::events::{PendingApproval, ToolCallRecord};
use crate::error::{ErrorCode, SdkError};
use crate::model::ToolCallRequest;
use crate::store;
pub use crate::store::{Decision, PendingReason};

/// A call waiting for a decision, with what it was asked with (after PreToolUse and
/// PermissionRequest rewrites).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PausedCall {
    /// Its place among the turn's calls.
    pub index: usize,
    pub tool_call_id: String,
    pub tool_name: String,
    pub input: Map<String, Value>,
    pub fingerprint: String,
    pub reason: PendingReason,
    pub decision: Option<Decision>,
    /// The process died before this call started (or before it was asked about): it goes
    /// through the whole pipeline again, asking nobody first.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub rerun: bool,
}

/// A tool call of the paused turn, as the model asked for it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TurnCall {
    pub id: String,
    pub name: String,
    pub arguments: String,
}

impl TurnCall {
    pub fn of(call: &ToolCallRequest) -> Self {
        TurnCall {
            id: call.id.clone(),
            name: call.name.clone(),
            arguments: call.arguments.clone(),
        }
    }

    pub fn request(&self) -> ToolCallRequest {
        ToolCallRequest {
            id: self.id.clone(),
            name: self.name.clone(),
            arguments: self.arguments.clone(),
        }
    }
}

/// The turn a run paused in: its calls, the results of those that finished, and those that
/// wait. The turn's tool messages are pushed only when every call has its result.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PausedTurn {
    /// The run that paused (`operationId` of its events).
    pub operation_id: String,
    /// The paused turn's step index (model calls from 0).
    pub step_index: u32,
    /// The turn's assistant text.
    pub text: String,
    pub calls: Vec<TurnCall>,
    /// By call index: the finished calls' records; `None` for the paused ones.
    pub results: Vec<Option<ToolCallRecord>>,
    pub pending: Vec<PausedCall>,
}

impl PausedTurn {
    /// `APPROVALS_PENDING` for `what` (`send`, `resume`), naming the calls still without a
    /// decision.
    pub fn pending_error(&self, what: &str) -> SdkError {
        let waiting = self.undecided();
        let message = if waiting.is_empty() {
            format!("A paused run waits to be resumed: call resume() before {what}()")
        } else {
            format!(
                "Approvals are pending for tool calls {}: approve or reject each before {what}()",
                waiting.join(", ")
            )
        };
        SdkError::new(ErrorCode::ApprovalsPending, message)
    }

    /// The calls waiting for a person (a call to run again waits for nobody).
    pub fn waiting(&self) -> impl Iterator<Item = &PausedCall> {
        self.pending
            .iter()
            .filter(|call| call.decision.is_none() && !call.rerun)
    }

    /// What the caller is told waits: the waiting calls, each with a token under `secret`
    /// (`approvalSecret`) binding it to `session_id`.
    pub fn approvals(&self, session_id: &str, secret: Option<&str>) -> Vec<PendingApproval> {
        self.waiting()
            .map(|call| PendingApproval {
                tool_call_id: call.tool_call_id.clone(),
                tool_name: call.tool_name.clone(),
                input: call.input.clone(),
                fingerprint: call.fingerprint.clone(),
                reason: call.reason,
                token: secret.map(|secret| {
                    store::approval_token(secret.as_bytes(), session_id, &call.tool_call_id, &call.fingerprint)
                }),
            })
            .collect()
    }

    /// Whether a turn read back from a store holds together: one result slot per call, and
    /// every waiting call at its own place among them. A turn that does not is never acted on.
    pub fn check_shape(&self) -> Result<(), String> {
        if self.results.len() != self.calls.len() {
            return Err(format!("{} results for {} calls", self.results.len(), self.calls.len()));
        }
        for call in &self.pending {
            match self.calls.get(call.index) {
                Some(turn_call) if turn_call.id == call.tool_call_id && turn_call.name == call.tool_name => {}
                _ => {
                    return Err(format!(
                        "waiting call {} is not call {} of its turn",
                        call.tool_call_id, call.index
                    ))
                }
            }
        }
        Ok(())
    }

    /// The calls a person must decide before the turn can go on (a deferred call waits for
    /// its result instead).
    pub fn undecided(&self) -> Vec<&str> {
        self.waiting()
            .filter(|call| call.reason != PendingReason::Deferred)
            .map(|call| call.tool_call_id.as_str())
            .collect()
    }
}

/// Why an approved call may not run as it was approved, checked just before it would: the
/// input it is about to run is fingerprinted again. The waiting call must still be what was
/// fingerprinted when it paused (an edit of the stored input, or of the tool it calls, shows);
/// and with `secret` (`approvalSecret`) the decision must carry the token over the fingerprint
/// of the input that runs (`updatedInput` when given), so a decision written into the store by
/// anyone without the secret, or relayed with another input, runs nothing.
pub fn approval_refusal(
    call: &PausedCall,
    request: &ToolCallRequest,
    session_id: &str,
    secret: Option<&str>,
) -> Option<&'static str> {
    let Some(Decision::Approve { updated_input, token }) = &call.decision else {
        return None;
    };
    if request.id != call.tool_call_id
        || request.name != call.tool_name
        || store::fingerprint(&request.name, &call.input) != call.fingerprint
    {
        return Some("the stored call does not match its fingerprint");
    }
    let secret = secret?;
    let fingerprint = match updated_input {
        Some(input) => store::fingerprint(&request.name, input),
        None => call.fingerprint.clone(),
    };
    let token = token.as_deref().unwrap_or_default();
    if store::verify_approval_token(secret.as_bytes(), session_id, &call.tool_call_id, &fingerprint, token) {
        None
    } else {
        Some("its approval token does not match the input to run")
    }
}

/// `approvalToken({ secret, sessionId, toolCallId, toolName, input })`: the fingerprint of
/// `input` and the token `approve` needs to run it under that secret (for an `updatedInput`,
/// made by whoever holds the secret).
pub fn token_for(
    secret: &str,
    session_id: &str,
    tool_call_id: &str,
    tool_name: &str,
    input: &Value,
) -> Result<(String, String), String> {
    if secret.is_empty() {
        return Err("secret must be a non-empty string".into());
    }
    let Value::Object(input) = input else {
        return Err(format!(
            "input must be an object (got {})",
            crate::js_value::describe(input)
        ));
    };
    let fingerprint = store::fingerprint(tool_name, input);
    let token = store::approval_token(secret.as_bytes(), session_id, tool_call_id, &fingerprint);
    Ok((fingerprint, token))
}

/// `approve(toolCallId, { updatedInput?, token? })`'s options.
#[derive(Debug, Clone, PartialEq)]
pub struct ApproveOptions {
    pub updated_input: Option<Map<String, Value>>,
    pub token: Option<String>,
}

pub fn read_approve(options: &Value) -> Result<ApproveOptions, String> {
    let options = object(options, "approve options")?;
    let updated_input = match options.get("updatedInput") {
        None | Some(Value::Null) => None,
        Some(Value::Object(input)) => Some(input.clone()),
        Some(other) => {
            return Err(format!(
                "updatedInput must be an object (got {})",
                crate::js_value::describe(other)
            ))
        }
    };
    Ok(ApproveOptions {
        updated_input,
        token: string(&options, "token")?,
    })
}

/// `reject(toolCallId, { reason?, stop? })`'s options.
pub fn read_reject(options: &Value) -> Result<Decision, String> {
    let options = object(options, "reject options")?;
    let stop = match options.get("stop") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(stop)) => *stop,
        Some(other) => {
            return Err(format!(
                "stop must be a boolean (got {})",
                crate::js_value::describe(other)
            ))
        }
    };
    Ok(Decision::Reject {
        reason: string(&options, "reason")?.filter(|reason| !reason.is_empty()),
        stop,
    })
}

fn object(value: &Value, what: &str) -> Result<Map<String, Value>, String> {
    match value {
        Value::Null => Ok(Map::new()),
        Value::Object(map) => Ok(map.clone()),
        other => Err(format!(
            "{what} must be an object (got {})",
            crate::js_value::describe(other)
        )),
    }
}

fn string(options: &Map<String, Value>, name: &str) -> Result<Option<String>, String> {
    match options.get(name) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text.clone())),
        Some(other) => Err(format!(
            "{name} must be a string (got {})",
            crate::js_value::describe(other)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn decisions_are_read_and_named() {
        assert_eq!(
            read_approve(&json!(null)),
            Ok(ApproveOptions {
                updated_input: None,
                token: None
            })
        );
        assert_eq!(
            read_approve(&json!({"updatedInput": {"a": 1}, "token": "t"})),
            Ok(ApproveOptions {
                updated_input: Some(json!({"a": 1}).as_object().unwrap().clone()),
                token: Some("t".into())
            })
        );
        assert_eq!(
            read_approve(&json!({"updatedInput": 3})),
            Err("updatedInput must be an object (got 3)".into())
        );
        assert_eq!(
            read_reject(&json!({"reason": "no", "stop": true})),
            Ok(Decision::Reject {
                reason: Some("no".into()),
                stop: true
            })
        );
        assert_eq!(
            read_reject(&json!({"stop": "yes"})),
            Err("stop must be a boolean (got \"yes\")".into())
        );
    }

    #[test]
    fn a_paused_turn_survives_its_json() {
        let turn = PausedTurn {
            operation_id: "o".into(),
            step_index: 2,
            text: "asking".into(),
            calls: vec![TurnCall {
                id: "c".into(),
                name: "write".into(),
                arguments: "{}".into(),
            }],
            results: vec![None],
            pending: vec![PausedCall {
                index: 0,
                tool_call_id: "c".into(),
                tool_name: "write".into(),
                input: Map::new(),
                fingerprint: "f".into(),
                reason: PendingReason::Ask,
                decision: Some(Decision::Approve {
                    updated_input: None,
                    token: None,
                }),
                rerun: false,
            }],
        };
        let json = serde_json::to_value(&turn).unwrap();
        assert_eq!(json["pending"][0]["decision"], json!({"action": "approve"}));
        assert_eq!(serde_json::from_value::<PausedTurn>(json).unwrap(), turn);
    }
}
