//! A host that plays the user functions with Rust closures, recording every call and abort.
#![allow(dead_code)]

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use agent_runtime_hooks::agent::{AgentConfig, SendOptions, Session, StreamEvent};
use agent_runtime_hooks::host::{
    AbortFuture, AbortReason, DispatchId, Host, HostCall, HostError, HostFuture, Reply, ScopeId, ThrownId,
};
use serde_json::{json, Value};

pub type Function = Box<dyn Fn(Vec<Value>) -> HostFuture + Send + Sync>;

#[derive(Default)]
pub struct FakeHost {
    pub functions: HashMap<u32, Function>,
    pub calls: Mutex<Vec<HostCall>>,
    pub aborts: Mutex<Vec<(DispatchId, AbortReason)>>,
}

impl FakeHost {
    pub fn with(mut self, id: u32, function: impl Fn(Vec<Value>) -> HostFuture + Send + Sync + 'static) -> Self {
        self.functions.insert(id, Box::new(function));
        self
    }

    /// Function `id` answers every call with `value`.
    pub fn returning(self, id: u32, value: Value) -> Self {
        self.with(id, move |_| {
            let value = value.clone();
            Box::pin(async move { Ok(Some(value)) })
        })
    }

    /// Function `id` throws `message` (thrown handle `id + 100`).
    pub fn throwing(self, id: u32, message: &'static str) -> Self {
        self.with(id, move |_| {
            Box::pin(async move {
                Err(HostError {
                    message: message.into(),
                    thrown: Some(ThrownId(id + 100)),
                })
            })
        })
    }

    pub fn calls_of(&self, id: u32) -> Vec<HostCall> {
        self.calls
            .lock()
            .unwrap()
            .iter()
            .filter(|call| call.function.0 == id)
            .cloned()
            .collect()
    }
}

impl Host for FakeHost {
    fn call(&self, call: HostCall) -> HostFuture {
        self.calls.lock().unwrap().push(call.clone());
        let reply = match self.functions.get(&call.function.0) {
            Some(function) => function(call.args.values()),
            None => Box::pin(async {
                Err(HostError {
                    message: "no such function".into(),
                    thrown: None,
                })
            }),
        };
        let kind = call.reply;
        Box::pin(async move { Ok(encode(kind, reply.await?)) })
    }

    fn abort(&self, _scope: ScopeId, dispatch: DispatchId, reason: AbortReason) -> AbortFuture {
        self.aborts.lock().unwrap().push((dispatch, reason));
        Box::pin(async {})
    }
}

/// What a fake function returned, as `invoke` in `lib/wire.js` encodes it for `reply`: a tool's
/// return as `{ returned }` (`{}` for `undefined`); PreToolUse's as `{ returned?, mocked? }`,
/// where a fake function mocks by returning `{ "$mock": result, "$returned"?: value }`; the
/// rest as it is. `__test__/fixtures/replies.json` pins both encodings.
pub fn encode(reply: Reply, value: Option<Value>) -> Option<Value> {
    match reply {
        Reply::Tool => Some(match value {
            Some(value) => json!({ "returned": value }),
            None => json!({}),
        }),
        Reply::DataWithMock => Some(match value {
            Some(Value::Object(mut object)) if object.contains_key("$mock") => {
                let mut wrapped = serde_json::Map::new();
                if let Some(returned) = object.remove("$returned") {
                    wrapped.insert("returned".into(), returned);
                }
                wrapped.insert("mocked".into(), object.remove("$mock").unwrap_or_default());
                Value::Object(wrapped)
            }
            Some(value) => json!({ "returned": value }),
            None => json!({}),
        }),
        Reply::Data | Reply::Json | Reply::Handler => value,
    }
}

#[test]
fn the_fake_host_encodes_replies_as_the_wire_does() {
    let fixture: Value = serde_json::from_str(include_str!("../../__test__/fixtures/replies.json")).unwrap();
    for case in fixture["cases"].as_array().unwrap() {
        let reply = match case["reply"].as_str().unwrap() {
            "Data" => Reply::Data,
            "DataWithMock" => Reply::DataWithMock,
            "Json" => Reply::Json,
            "Tool" => Reply::Tool,
            other => panic!("no reply {other} in the fixture's cases"),
        };
        let returned = match (case.get("mocked"), case.get("returned")) {
            (Some(mocked), returned) => {
                let mut mocking = json!({ "$mock": mocked });
                if let Some(returned) = returned {
                    mocking["$returned"] = returned.clone();
                }
                Some(mocking)
            }
            (None, returned) => returned.cloned(),
        };
        assert_eq!(encode(reply, returned), case.get("encoded").cloned(), "{case}");
    }
}

pub fn session(options: Value, host: FakeHost) -> (Arc<Session>, Arc<FakeHost>) {
    let host = Arc::new(host);
    let config = AgentConfig::from_options(&options, &HashMap::new()).expect("valid options");
    (Session::new(config, host.clone()), host)
}

pub async fn run(session: &Arc<Session>, message: &str) -> Vec<StreamEvent> {
    let (handle, drive) = session.send(&json!(message), SendOptions::default()).expect("accepted");
    tokio::spawn(drive);
    let mut events = Vec::new();
    while let Some(event) = handle.events.recv().await {
        events.push(event);
    }
    events
}

pub fn result(events: &[StreamEvent]) -> &agent_runtime_hooks::agent::PromptResult {
    match events.last() {
        Some(StreamEvent::Result {
            subtype,
            content,
            result,
        }) => {
            assert_eq!((*subtype, content), ("success", &result.content));
            result
        }
        other => panic!("expected a result, got {other:?}"),
    }
}

pub fn tool(name: &str, function: u32) -> Value {
    json!({"name": name, "execute": {"$function": function}})
}

pub fn f(id: u32) -> Value {
    json!({"$function": id})
}

/// A scripted model of `turns`.
pub fn scripted(turns: Value) -> Value {
    json!({"kind": "scripted", "turns": turns})
}

/// A scripted model that calls tool `name` once (call id `c1`), then answers "end".
pub fn one_call(name: &str, input: Value) -> Value {
    scripted(json!([{"toolCalls": [{"id": "c1", "name": name, "input": input}]}, {"text": "end"}]))
}

/// One call of tool `t` with a PreToolUse callback that continues and a PostToolUse hook object
/// `audit` whose handler throws: the options, and the host that plays them.
pub fn audited_tool_call() -> (Value, FakeHost) {
    let host = FakeHost::default()
        .returning(1, json!({"action": "continue"}))
        .throwing(2, "audit broke")
        .returning(0, json!("ran"));
    let options = json!({"model": one_call("t", json!({})), "tools": [tool("t", 0)],
                         "advanced": {"hooks": {"PreToolUse": [f(1)], "PostToolUse": [{"id": "audit", "handler": f(2)}]}}});
    (options, host)
}
