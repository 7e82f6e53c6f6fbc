//! Human approvals (SPEC §8.1): calls paused on an `'ask'` nobody answered, the decisions taken
//! on them, and the turn a resumed run goes on with. Everything here is plain data, stored as it
//! is: a pause can be answered and resumed in another process.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::events::{PendingApproval, ToolCallRecord};
use crate::error::{ErrorCode, SdkError};
use crate::model::{Message, ToolCallRequest};
use crate::store::{self, CallPlace};
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
    /// A `Task` call whose sub-agent paused (`reason: subagent`): that sub-agent, kept whole.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub child: Option<Box<PausedChild>>,
}

/// A sub-agent paused inside a `Task` call (§8.7): what it needs to go on where it stood.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PausedChild {
    /// Sub-agent names from the root's child down to this one: its calls' `agentPath` (the
    /// last is its `subagent_type`, the key in `advanced.agents`).
    pub agent_path: Vec<String>,
    /// The `Task` call ids from the root's down to the one that started it.
    pub chain: Vec<String>,
    /// Its run's id (`subOperationId`), the same once it goes on.
    pub operation_id: String,
    /// Its conversation so far, without its system prompt (kept as the store keeps one).
    #[serde(with = "store::stored_messages")]
    pub messages: Vec<Message>,
    /// The model turns it has taken (its `maxTurns` counts them).
    pub turns: u32,
    /// The turn it paused in.
    pub turn: PausedTurn,
}

/// A call of a paused tree that waits on its own (not on a sub-agent), and where it sits.
#[derive(Debug, Clone, Copy)]
pub struct Leaf<'a> {
    pub call: &'a PausedCall,
    /// `[]` for the root's own calls.
    pub agent_path: &'a [String],
    /// The `Task` call ids above the agent making this call (`[]` for the root's).
    pub chain: &'a [String],
}

impl<'a> Leaf<'a> {
    /// The `Task` call that started the agent making this call (none for the root's).
    pub fn parent_tool_call_id(&self) -> Option<&'a str> {
        self.chain.last().map(String::as_str)
    }

    /// Its key in the effects ledger.
    pub fn ledger_key(&self) -> String {
        store::ledger_key(self.chain, &self.call.tool_call_id)
    }

    /// What its approval token binds it to.
    pub fn place<'b>(&'b self, session_id: &'b str) -> CallPlace<'b> {
        CallPlace {
            session_id,
            agent_path: self.agent_path,
            tool_call_id: &self.call.tool_call_id,
        }
    }
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

    /// Every call of the tree that waits on its own, in tree order: this turn's in call order,
    /// each `Task` call whose sub-agent paused replaced by that sub-agent's, recursively.
    pub fn leaves(&self) -> Vec<Leaf<'_>> {
        let mut leaves = Vec::new();
        self.collect(&[], &[], &mut leaves);
        leaves
    }

    fn collect<'a>(&'a self, agent_path: &'a [String], chain: &'a [String], leaves: &mut Vec<Leaf<'a>>) {
        for call in &self.pending {
            match &call.child {
                Some(child) => child.turn.collect(&child.agent_path, &child.chain, leaves),
                None => leaves.push(Leaf {
                    call,
                    agent_path,
                    chain,
                }),
            }
        }
    }

    /// The waiting call `tool_call_id` anywhere in the tree (never a `Task` call that waits for
    /// its sub-agent).
    pub fn leaf_mut(&mut self, tool_call_id: &str) -> Option<&mut PausedCall> {
        for call in &mut self.pending {
            if call.child.is_none() {
                if call.tool_call_id == tool_call_id {
                    return Some(call);
                }
            } else if let Some(found) = call
                .child
                .as_deref_mut()
                .and_then(|child| child.turn.leaf_mut(tool_call_id))
            {
                return Some(found);
            }
        }
        None
    }

    /// Every waiting call of the tree, to change in place (decisions read back, recovery).
    pub fn for_each_leaf(&mut self, visit: &mut impl FnMut(&mut PausedCall)) {
        for call in &mut self.pending {
            match &mut call.child {
                Some(child) => child.turn.for_each_leaf(visit),
                None => visit(call),
            }
        }
    }

    /// The calls of the tree waiting for a person (a call to run again waits for nobody).
    pub fn waiting(&self) -> impl Iterator<Item = Leaf<'_>> {
        self.leaves()
            .into_iter()
            .filter(|leaf| leaf.call.decision.is_none() && !leaf.call.rerun)
    }

    /// What the caller is told waits: the waiting calls of the tree, each with a token under
    /// `secret` (`approvalSecret`) binding it to its place in `session_id`'s tree.
    pub fn approvals(&self, session_id: &str, secret: Option<&str>) -> Vec<PendingApproval> {
        self.waiting()
            .map(|leaf| {
                let call = leaf.call;
                PendingApproval {
                    tool_call_id: call.tool_call_id.clone(),
                    tool_name: call.tool_name.clone(),
                    input: call.input.clone(),
                    fingerprint: call.fingerprint.clone(),
                    reason: call.reason,
                    token: secret.map(|secret| {
                        store::approval_token(secret.as_bytes(), leaf.place(session_id), &call.fingerprint)
                    }),
                    agent_path: leaf.agent_path.to_vec(),
                    parent_tool_call_id: leaf.parent_tool_call_id().map(str::to_string),
                }
            })
            .collect()
    }

    /// Whether a turn read back from a store holds together: one result slot per call, every
    /// waiting call at its own place among them, and a sub-agent exactly where a `Task` call
    /// waits for one (each of them holding together too). A turn that does not is never acted on.
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
            match (&call.child, call.reason) {
                (Some(child), PendingReason::Subagent) => child
                    .turn
                    .check_shape()
                    .map_err(|problem| format!("in the sub-agent of call {}: {problem}", call.tool_call_id))?,
                (None, PendingReason::Subagent) | (Some(_), _) => {
                    return Err(format!(
                        "waiting call {} waits for a sub-agent only when it holds one",
                        call.tool_call_id
                    ))
                }
                (None, _) => {}
            }
        }
        Ok(())
    }

    /// The calls of the tree a person must decide before it can go on (a deferred call waits
    /// for its result instead).
    pub fn undecided(&self) -> Vec<&str> {
        self.waiting()
            .filter(|leaf| leaf.call.reason != PendingReason::Deferred)
            .map(|leaf| leaf.call.tool_call_id.as_str())
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
    place: CallPlace<'_>,
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
    if store::verify_approval_token(secret.as_bytes(), place, &fingerprint, token) {
        None
    } else {
        Some("its approval token does not match the input to run")
    }
}

/// `approvalToken({ secret, sessionId, toolCallId, toolName, input, agentPath? })`: the fingerprint of
/// `input` and the token `approve` needs to run it under that secret (for an `updatedInput`,
/// made by whoever holds the secret).
pub fn token_for(
    secret: &str,
    place: CallPlace<'_>,
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
    let token = store::approval_token(secret.as_bytes(), place, &fingerprint);
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
                child: None,
            }],
        };
        let json = serde_json::to_value(&turn).unwrap();
        assert_eq!(json["pending"][0]["decision"], json!({"action": "approve"}));
        assert_eq!(serde_json::from_value::<PausedTurn>(json).unwrap(), turn);
    }

    fn waiting(id: &str, index: usize) -> PausedCall {
        PausedCall {
            index,
            tool_call_id: id.into(),
            tool_name: "Bash".into(),
            input: Map::new(),
            fingerprint: store::fingerprint("Bash", &Map::new()),
            reason: PendingReason::Ask,
            decision: None,
            rerun: false,
            child: None,
        }
    }

    fn turn_of(calls: Vec<PausedCall>) -> PausedTurn {
        PausedTurn {
            operation_id: "o".into(),
            step_index: 0,
            text: String::new(),
            calls: calls
                .iter()
                .map(|call| TurnCall {
                    id: call.tool_call_id.clone(),
                    name: call.tool_name.clone(),
                    arguments: "{}".into(),
                })
                .collect(),
            results: vec![None; calls.len()],
            pending: calls,
        }
    }

    /// A `Task` call `id` (under the `Task` calls `above`) whose sub-agent `path` paused on `calls`.
    fn delegated(id: &str, index: usize, path: &[&str], above: &[&str], calls: Vec<PausedCall>) -> PausedCall {
        let mut chain: Vec<String> = above.iter().map(|id| id.to_string()).collect();
        chain.push(id.to_string());
        PausedCall {
            tool_name: "Task".into(),
            reason: PendingReason::Subagent,
            child: Some(Box::new(PausedChild {
                agent_path: path.iter().map(|name| name.to_string()).collect(),
                chain,
                operation_id: format!("run-{id}"),
                messages: vec![Message::User {
                    content: crate::model::UserContent::Text("do it".into()),
                }],
                turns: 1,
                turn: turn_of(calls),
            })),
            ..waiting(id, index)
        }
    }

    /// root: [task-1 → manager: [m-task → worker: [deep]], task-2 → worker: [near], own]
    fn tree() -> PausedTurn {
        let deep = delegated(
            "m-task",
            0,
            &["manager", "worker"],
            &["task-1"],
            vec![waiting("deep", 0)],
        );
        turn_of(vec![
            delegated("task-1", 0, &["manager"], &[], vec![deep]),
            delegated("task-2", 1, &["worker"], &[], vec![waiting("near", 0)]),
            waiting("own", 2),
        ])
    }

    #[test]
    fn a_tree_lists_its_waiting_calls_in_tree_order_with_their_places() {
        let turn = tree();
        let places: Vec<(&str, Vec<String>, Option<&str>)> = turn
            .leaves()
            .iter()
            .map(|leaf| {
                (
                    leaf.call.tool_call_id.as_str(),
                    leaf.agent_path.to_vec(),
                    leaf.parent_tool_call_id(),
                )
            })
            .collect();
        assert_eq!(
            places,
            vec![
                (
                    "deep",
                    vec!["manager".to_string(), "worker".to_string()],
                    Some("m-task")
                ),
                ("near", vec!["worker".to_string()], Some("task-2")),
                ("own", vec![], None),
            ]
        );
        // Tokens differ by place: the same id and input at another depth signs otherwise.
        let approvals = turn.approvals("s", Some("secret"));
        assert_eq!(approvals[0].parent_tool_call_id.as_deref(), Some("m-task"));
        assert_ne!(approvals[0].token, approvals[1].token);
        assert_eq!(
            approvals[2].token.as_deref(),
            Some(store::approval_token(b"secret", CallPlace::root("s", "own"), &approvals[2].fingerprint).as_str())
        );
        assert_eq!(turn.undecided(), vec!["deep", "near", "own"]);
    }

    #[test]
    fn a_decision_finds_its_call_at_any_depth_and_never_a_waiting_task_call() {
        let mut turn = tree();
        assert!(turn.leaf_mut("task-1").is_none());
        assert!(turn.leaf_mut("m-task").is_none());
        turn.leaf_mut("deep").unwrap().decision = Some(Decision::Reject {
            reason: None,
            stop: false,
        });
        assert_eq!(turn.undecided(), vec!["near", "own"]);
    }

    #[test]
    fn a_paused_tree_survives_its_json_and_a_misshapen_one_is_refused() {
        let turn = tree();
        let json = serde_json::to_value(&turn).unwrap();
        assert_eq!(json["pending"][0]["reason"], "subagent");
        assert_eq!(json["pending"][0]["child"]["agentPath"], json!(["manager"]));
        assert_eq!(
            json["pending"][0]["child"]["messages"],
            json!([{"role": "user", "content": "do it"}])
        );
        assert_eq!(serde_json::from_value::<PausedTurn>(json).unwrap(), turn);
        assert_eq!(turn.check_shape(), Ok(()));
        let mut orphan = tree();
        orphan.pending[1].child = None;
        assert_eq!(
            orphan.check_shape(),
            Err("waiting call task-2 waits for a sub-agent only when it holds one".into())
        );
        let mut broken = tree();
        if let Some(child) = broken.pending[0].child.as_deref_mut() {
            child.turn.results.clear();
        }
        assert_eq!(
            broken.check_shape(),
            Err("in the sub-agent of call task-1: 0 results for 1 calls".into())
        );
    }
}
