//! Blade's confirmation handler: who answers a permission `'ask'` when a person must decide.
//! `advanced.confirmationHandler.requestConfirmation(request)`, or the handler
//! `confirmationHandlerFactory(sessionId)` makes for the session, resolves
//! `{ approved, reason?, scope? }` under `hookTimeoutMs`, failing closed like the permission
//! function.

use std::collections::HashSet;
use std::sync::{Mutex, MutexGuard};

use futures::future::BoxFuture;
use serde::Serialize;
use serde_json::{Map, Value};

use super::config::Confirmation as Configured;
use super::definition::Agent;
use crate::builtins::{self, Person};
use crate::hooks::dispatch::Caller;
use crate::hooks::pending::Owner;
use crate::hooks::HookEvent;
use crate::host::{Args, Callable, HostCall, Reply};
use crate::js_value::describe;
use crate::sync::lock;

/// What the handler is asked; the host adds `abortSignal`.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
pub(crate) struct ConfirmationRequest<'a> {
    pub tool_name: &'a str,
    pub args: &'a Map<String, Value>,
    pub title: String,
    pub message: String,
    pub kind: &'static str,
    pub affected_files: Vec<String>,
}

#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Answer {
    Approved,
    /// The person said no; the reason, or `User rejected`.
    Rejected(String),
    /// The handler threw, timed out or answered nonsense.
    Failed(String),
    /// No handler is configured.
    NoHandler,
}

/// What a session remembers of its confirmations: the handler its factory made, and the calls
/// approved for the rest of the session.
#[derive(Default)]
pub struct Remembered {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    handler: Option<Callable>,
    /// Tool calls approved with `scope: 'session'`, by [`approval_key`].
    approved: HashSet<String>,
}

impl Remembered {
    fn state(&self) -> MutexGuard<'_, State> {
        lock(&self.state)
    }

    fn approved(&self, tool: &str, args: &Map<String, Value>) -> bool {
        self.state().approved.contains(&approval_key(tool, args))
    }

    fn approve(&self, tool: &str, args: &Map<String, Value>) {
        self.state().approved.insert(approval_key(tool, args));
    }

    /// Keeps the handler the factory made; if two calls asked at once, the first one made stays.
    fn keep_handler(&self, method: Callable) -> Callable {
        *self.state().handler.get_or_insert(method)
    }
}

/// A tool and its arguments, the same whatever the order of their keys.
fn approval_key(tool: &str, args: &Map<String, Value>) -> String {
    fn sorted(value: &Value) -> Value {
        match value {
            Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                Value::Object(keys.into_iter().map(|key| (key.clone(), sorted(&map[key]))).collect())
            }
            Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    format!("{tool}\0{}", sorted(&Value::Object(args.clone())))
}

pub(crate) struct Confirmation<'a> {
    pub agent: &'a Agent,
    pub approvals: &'a Remembered,
    pub caller: Caller<'a>,
}

impl Confirmation<'_> {
    pub async fn ask(&self, request: &ConfirmationRequest<'_>) -> Answer {
        if self.approvals.approved(request.tool_name, request.args) {
            return Answer::Approved;
        }
        match self.request(request).await {
            Asked::Nobody => Answer::NoHandler,
            Asked::Failed(message) => Answer::Failed(message),
            Asked::Answered(answer) => {
                let answer = Some(Value::Object(answer));
                match read_answer(answer.as_ref()) {
                    Ok((true, remember)) => {
                        if remember {
                            self.approvals.approve(request.tool_name, request.args);
                        }
                        Answer::Approved
                    }
                    Ok((false, _)) => Answer::Rejected(rejection(answer.as_ref())),
                    Err(message) => Answer::Failed(message),
                }
            }
        }
    }

    /// `requestConfirmation(request)` under `hookTimeoutMs`: its answer, an object whose
    /// `approved` is a boolean.
    async fn request(&self, request: &(impl Serialize + Sync)) -> Asked {
        let agent = self.agent;
        let dispatcher = &agent.dispatcher;
        if dispatcher.pending().still_pending(Owner::Permission).await {
            return Asked::Failed("A permission callback is still cleaning up".into());
        }
        let method = match self.handler().await {
            Ok(Some(method)) => method,
            Ok(None) => return Asked::Nobody,
            Err(message) => return Asked::Failed(message),
        };
        let timeout = dispatcher.start_timeout(HookEvent::PermissionRequest);
        let mut call = HostCall::new(method, Args::of(&[request]), self.caller.scope);
        call.signal = Some(timeout.signal("abortSignal", true, self.caller.cancel.is_some()));
        let answered = dispatcher
            .call_guarded(
                agent.host.call(call),
                &timeout,
                self.caller,
                (Owner::Permission, "the confirmation handler".into()),
            )
            .await;
        match answered {
            Err(error) => Asked::Failed(error.message()),
            Ok(answer) => match read_answer(answer.as_ref()) {
                Ok(_) => match answer {
                    Some(Value::Object(answer)) => Asked::Answered(answer),
                    _ => Asked::Failed("the confirmation handler returned no object".into()),
                },
                Err(message) => Asked::Failed(message),
            },
        }
    }

    /// The handler's `requestConfirmation`: the configured one, or the one the factory made
    /// for this session (asked once, on the first `'ask'`).
    async fn handler(&self) -> Result<Option<Callable>, String> {
        let agent = self.agent;
        let factory = match agent.config.confirmation {
            None => return Ok(None),
            Some(Configured::Handler(method)) => return Ok(Some(method)),
            Some(Configured::Factory(factory)) => factory,
        };
        let made_before = self.approvals.state().handler;
        if let Some(method) = made_before {
            return Ok(Some(method));
        }
        let call = HostCall {
            reply: Reply::Handler,
            ..HostCall::new(factory, Args::of(&[&agent.id]), self.caller.scope)
        };
        let made = agent.host.call(call).await.map_err(|error| error.message)?;
        let method = made
            .as_ref()
            .and_then(|made| made.get("function"))
            .and_then(Value::as_u64)
            .map(|n| Callable(n as u32))
            .ok_or_else(|| {
                format!(
                    "confirmationHandlerFactory returned {}; it must return an object with a requestConfirmation method",
                    made.as_ref().map_or_else(|| "undefined".into(), describe)
                )
            })?;
        Ok(Some(self.approvals.keep_handler(method)))
    }
}

/// What came of asking the handler.
enum Asked {
    Answered(Map<String, Value>),
    Nobody,
    Failed(String),
}

/// A built-in's question for the person (AskUserQuestion, the plan-mode confirmations), asked
/// through the same handler as a permission's `'ask'`: Blade's details (`type`, `message`, …)
/// with the call's `toolName`, `args`, `kind` and `affectedFiles`. Nothing is remembered.
pub(crate) struct BuiltinQuestion<'a> {
    pub confirmation: Confirmation<'a>,
    pub tool_name: &'a str,
    pub args: &'a Map<String, Value>,
    pub kind: &'static str,
}

impl Person for BuiltinQuestion<'_> {
    fn confirm(&self, details: Map<String, Value>) -> BoxFuture<'_, builtins::Reply> {
        Box::pin(async move {
            let mut request = Map::new();
            request.insert("toolName".into(), Value::from(self.tool_name));
            request.insert("args".into(), Value::Object(self.args.clone()));
            request.insert("kind".into(), Value::from(self.kind));
            request.insert("affectedFiles".into(), Value::Array(Vec::new()));
            request.extend(details);
            match self.confirmation.request(&request).await {
                Asked::Answered(answer) => builtins::Reply::Answered(answer),
                Asked::Nobody => builtins::Reply::Nobody,
                Asked::Failed(message) => builtins::Reply::Failed(message),
            }
        })
    }
}

/// `{ approved: boolean, reason?, scope?: 'once' | 'session' }` → (approved, for the session).
fn read_answer(answer: Option<&Value>) -> Result<(bool, bool), String> {
    let approved = answer
        .and_then(|answer| answer.get("approved"))
        .and_then(Value::as_bool);
    match approved {
        Some(approved) => {
            let scope = answer.and_then(|answer| answer.get("scope")).and_then(Value::as_str);
            Ok((approved, scope == Some("session")))
        }
        None => Err(format!(
            "the confirmation handler returned {}; expected {{ approved: boolean }}",
            answer.map_or_else(|| "undefined".into(), describe)
        )),
    }
}

fn rejection(answer: Option<&Value>) -> String {
    answer
        .and_then(|answer| answer.get("reason"))
        .and_then(Value::as_str)
        .filter(|reason| !reason.is_empty())
        .unwrap_or("User rejected")
        .to_string()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn answers_are_read_strictly() {
        assert_eq!(read_answer(Some(&json!({"approved": true}))), Ok((true, false)));
        assert_eq!(
            read_answer(Some(&json!({"approved": true, "scope": "session"}))),
            Ok((true, true))
        );
        assert_eq!(read_answer(Some(&json!({"approved": false}))), Ok((false, false)));
        assert_eq!(
            read_answer(Some(&json!({"approved": "yes"}))),
            Err("the confirmation handler returned an object; expected { approved: boolean }".into())
        );
        assert!(read_answer(None).is_err());
        assert_eq!(
            rejection(Some(&json!({"approved": false, "reason": "not now"}))),
            "not now"
        );
        assert_eq!(
            rejection(Some(&json!({"approved": false, "reason": ""}))),
            "User rejected"
        );
    }

    #[test]
    fn a_session_approval_is_for_the_same_tool_and_arguments_in_any_key_order() {
        let approvals = Remembered::default();
        let args = |value: Value| value.as_object().unwrap().clone();
        approvals.approve("write", &args(json!({"path": "a", "opts": {"x": 1, "y": 2}})));
        assert!(approvals.approved("write", &args(json!({"opts": {"y": 2, "x": 1}, "path": "a"}))));
        assert!(!approvals.approved("write", &args(json!({"path": "b", "opts": {"x": 1, "y": 2}}))));
        assert!(!approvals.approved("edit", &args(json!({"path": "a", "opts": {"x": 1, "y": 2}}))));
    }
}
