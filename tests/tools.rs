//! Tool execution without Node: generators driven step by step, `toolTimeoutMs` and the
//! fail-closed cleanup that follows it, values that cannot reach the model, and an abort made
//! by synchronous code before the next tool starts.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agent_runtime_hooks::agent::{AgentConfig, SendOptions, Session, StopReason, StreamEvent};
use agent_runtime_hooks::error::ErrorCode;
use agent_runtime_hooks::host::{
    AbortFuture, AbortReason, DispatchId, GeneratorId, Host, HostCall, HostError, HostFuture, Reply, ScopeId, Step,
};
use serde_json::{json, Value};
use tokio::sync::Notify;

/// What a fake tool does when called.
#[derive(Clone)]
enum Behaviour {
    /// Returns this value (as `{ returned }`).
    Return(Value),
    /// Returns a generator that yields these values, then returns the last one.
    Generate(Vec<Value>),
    /// Replies `{ invalid: what }`, as the wrapper does for a function or a symbol.
    Invalid(&'static str),
    /// Never settles until `release` is notified.
    Hang,
    /// Aborts the session's active run, synchronously, then returns.
    AbortRun,
    /// Returns a generator that answers every `next()` at once and never ends.
    Endless,
}

#[derive(Default)]
struct ToolHost {
    tools: HashMap<u32, Behaviour>,
    generators: Mutex<HashMap<u32, VecDeque<Value>>>,
    /// Tool calls in order: which function.
    calls: Mutex<Vec<u32>>,
    steps: AtomicUsize,
    aborts: Mutex<Vec<AbortReason>>,
    release: Arc<Notify>,
    session: Mutex<Option<Arc<Session>>>,
    /// Generators that never end.
    endless: Mutex<Vec<u32>>,
    /// `return()` calls, and a permit for each.
    returns: AtomicUsize,
    returned: Notify,
}

impl Host for ToolHost {
    fn call(&self, call: HostCall) -> HostFuture {
        assert_eq!(call.reply, Reply::Tool, "only tools are called here");
        self.calls.lock().unwrap().push(call.function.0);
        let reply = match self.tools[&call.function.0].clone() {
            Behaviour::Return(value) => json!({ "returned": value }),
            Behaviour::Generate(values) => {
                let mut generators = self.generators.lock().unwrap();
                let id = generators.len() as u32 + 1;
                generators.insert(id, values.into());
                json!({ "generator": id })
            }
            Behaviour::Endless => {
                let mut generators = self.generators.lock().unwrap();
                let id = generators.len() as u32 + 1;
                generators.insert(id, VecDeque::new());
                self.endless.lock().unwrap().push(id);
                json!({ "generator": id })
            }
            Behaviour::Invalid(what) => json!({ "invalid": what }),
            Behaviour::Hang => {
                let release = self.release.clone();
                return Box::pin(async move {
                    release.notified().await;
                    Ok(Some(json!({ "returned": "late" })))
                });
            }
            Behaviour::AbortRun => {
                if let Some(session) = self.session.lock().unwrap().as_ref() {
                    session.abort("kill switch".into());
                }
                json!({ "returned": "aborted it" })
            }
        };
        Box::pin(async move { Ok(Some(reply)) })
    }

    fn abort(&self, _scope: ScopeId, _dispatch: DispatchId, reason: AbortReason) -> AbortFuture {
        self.aborts.lock().unwrap().push(reason);
        Box::pin(async {})
    }

    fn step(&self, _scope: ScopeId, generator: GeneratorId, step: Step) -> HostFuture {
        if step == Step::Return {
            self.returns.fetch_add(1, Ordering::SeqCst);
            self.returned.notify_one();
            return Box::pin(async { Ok(Some(json!({ "done": true }))) });
        }
        self.steps.fetch_add(1, Ordering::SeqCst);
        if self.endless.lock().unwrap().contains(&generator.0) {
            return Box::pin(async { Ok(Some(json!({ "done": false, "value": "x" }))) });
        }
        let mut generators = self.generators.lock().unwrap();
        let values = generators.get_mut(&generator.0).expect("a kept generator");
        let value = values.pop_front();
        let reply = match (value, values.is_empty()) {
            (Some(value), false) => json!({ "done": false, "value": value }),
            (Some(value), true) => json!({ "done": true, "value": value }),
            (None, _) => {
                let past_the_end = HostError {
                    message: "stepped past the end".into(),
                    thrown: None,
                };
                return Box::pin(async move { Err(past_the_end) });
            }
        };
        Box::pin(async move { Ok(Some(reply)) })
    }

    /// As the JS host does on its thread: the step is made now.
    fn step_detached(&self, scope: ScopeId, generator: GeneratorId, step: Step) {
        drop(self.step(scope, generator, step));
    }
}

fn session_with(options: Value, host: ToolHost) -> (Arc<Session>, Arc<ToolHost>) {
    let host = Arc::new(host);
    let config = AgentConfig::from_options(&options, &HashMap::new()).expect("valid options");
    let session = Session::new(config, host.clone());
    *host.session.lock().unwrap() = Some(session.clone());
    (session, host)
}

async fn run(session: &Arc<Session>) -> Vec<StreamEvent> {
    let (handle, drive) = session.send(&json!("go"), SendOptions::default()).expect("accepted");
    tokio::spawn(drive);
    let mut events = Vec::new();
    while let Some(event) = handle.events.recv().await {
        events.push(event);
    }
    events
}

/// Drives the run on a thread of its own: a run that never gives its thread back fails the
/// test at `within` instead of hanging it.
async fn run_within(session: &Arc<Session>, within: Duration) -> Vec<StreamEvent> {
    let (handle, drive) = session.send(&json!("go"), SendOptions::default()).expect("accepted");
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        runtime.block_on(drive);
    });
    let mut events = Vec::new();
    let collected = tokio::time::timeout(within, async {
        while let Some(event) = handle.events.recv().await {
            events.push(event);
        }
    })
    .await;
    assert!(collected.is_ok(), "the run did not end within {within:?}");
    events
}

fn tool(name: &str, function: u32) -> Value {
    json!({"name": name, "execute": {"$function": function}})
}

fn calls(names: &[&str]) -> Value {
    let calls: Vec<Value> = names
        .iter()
        .enumerate()
        .map(|(index, name)| json!({"id": format!("c{index}"), "name": name, "input": {}}))
        .collect();
    json!({"kind": "scripted", "turns": [{"toolCalls": calls}, {"text": "end"}, {"toolCalls": [{"id": "again", "name": names[0], "input": {}}]}, {"text": "end again"}]})
}

/// The events' types, with each tool event's call id.
fn shape(events: &[StreamEvent]) -> Vec<String> {
    events
        .iter()
        .map(|event| match event {
            StreamEvent::TurnStart { turn } => format!("turn_start {turn}"),
            StreamEvent::TurnEnd { turn, .. } => format!("turn_end {turn}"),
            StreamEvent::Content { delta } => format!("content {delta}"),
            StreamEvent::ToolUse(call) => format!("tool_use {}", call.id),
            StreamEvent::ToolProgress(event) => format!("tool_progress {} {}", event.id, event.progress),
            StreamEvent::ToolResult(result) => format!("tool_result {} {}", result.id, result.output),
            StreamEvent::Usage { .. } => "usage".into(),
            StreamEvent::Result { content, .. } => format!("result {content}"),
            StreamEvent::Error { message, .. } => format!("error {message}"),
            StreamEvent::Thinking { delta } => format!("thinking {delta}"),
            StreamEvent::TurnInterrupted { input_id, .. } => format!("turn_interrupted {input_id}"),
            StreamEvent::InputApplied { input_id, .. } => format!("input_applied {input_id}"),
            StreamEvent::HookStarted { hook_id, .. } => format!("hook_started {hook_id}"),
            StreamEvent::HookResponse(response) => format!("hook_response {} {}", response.hook_id, response.outcome),
        })
        .collect()
}

#[tokio::test]
async fn a_generator_is_driven_its_yields_are_progress_and_its_return_value_the_result() {
    let host = ToolHost {
        tools: HashMap::from([
            (
                0,
                Behaviour::Generate(vec![
                    json!({"step": 1}),
                    json!("two"),
                    json!({"status": "success", "model": {"ok": true}, "display": {"summary": "shown"}}),
                ]),
            ),
            (1, Behaviour::Return(json!("plain"))),
        ]),
        ..ToolHost::default()
    };
    let (session, host) = session_with(
        json!({"model": calls(&["gen", "plain"]), "tools": [tool("gen", 0), tool("plain", 1)]}),
        host,
    );
    let events = run(&session).await;
    assert_eq!(
        shape(&events),
        [
            "turn_start 1",
            "tool_use c0",
            "tool_use c1",
            "tool_progress c0 {\"step\":1}",
            "tool_progress c0 \"two\"",
            "tool_result c0 {\"ok\":true}",
            "tool_result c1 plain",
            "turn_end 1",
            "turn_start 2",
            "content end",
            "turn_end 2",
            "usage",
            "result end",
        ]
    );
    assert_eq!(host.steps.load(Ordering::SeqCst), 3);
    // `display` reaches the stream only: the model is sent `model`.
    let display = events.iter().find_map(|event| match event {
        StreamEvent::ToolResult(result) => result.display.clone(),
        _ => None,
    });
    assert_eq!(display, Some(json!({"summary": "shown"})));
    let messages = serde_json::to_string(&*session.messages()).unwrap();
    assert!(!messages.contains("shown"), "display was sent to the model: {messages}");
}

#[tokio::test]
async fn a_value_json_would_flatten_fails_the_call_loudly() {
    let host = ToolHost {
        tools: HashMap::from([(0, Behaviour::Invalid("a function"))]),
        ..ToolHost::default()
    };
    let (session, _) = session_with(json!({"model": calls(&["f"]), "tools": [tool("f", 0)]}), host);
    let events = run(&session).await;
    let StreamEvent::Result { result, .. } = events.last().unwrap() else {
        panic!("a result")
    };
    assert_eq!(
        result.tool_calls[0].output,
        "Tool execution failed: execute returned a function, which cannot be sent to the model as JSON"
    );
    assert!(result.tool_calls[0].is_error);
}

#[tokio::test]
async fn a_tool_past_its_timeout_fails_and_blocks_new_tools_until_it_settles() {
    let host = ToolHost {
        tools: HashMap::from([(0, Behaviour::Hang)]),
        ..ToolHost::default()
    };
    let options = json!({"model": calls(&["slow"]), "tools": [tool("slow", 0)], "advanced": {"toolTimeoutMs": 50}});
    let (session, host) = session_with(options, host);
    let events = run(&session).await;
    let StreamEvent::Result { result, .. } = events.last().unwrap() else {
        panic!("a result")
    };
    assert_eq!(
        result.tool_calls[0].output,
        "Tool execution failed: Tool execution timeout after 50ms"
    );
    assert_eq!(
        *host.aborts.lock().unwrap(),
        [AbortReason::ToolTimeout { timeout_ms: 50 }]
    );

    // While it still runs, the next tool call fails closed and does not start.
    let events = run(&session).await;
    let StreamEvent::Result { result, .. } = events.last().unwrap() else {
        panic!("a result")
    };
    assert_eq!(
        result.tool_calls[0].output,
        "Tool execution failed: A tool execution is still cleaning up; refusing to start another tool"
    );
    assert_eq!(host.calls.lock().unwrap().len(), 1);
    let closed = session.close(ScopeId::NONE, Default::default()).await.unwrap_err();
    assert_eq!(
        closed.message,
        format!("Session runtime {} still has a tool execution cleaning up", session.id)
    );

    // Once it settles, close goes through.
    host.release.notify_waiters();
    assert!(session.dispatcher().pending().settle(Duration::from_secs(1)).await);
    session.close(ScopeId::NONE, Default::default()).await.unwrap();
}

#[tokio::test]
async fn an_abort_made_by_a_synchronous_tool_stops_its_sibling_and_the_next_model_call() {
    let host = ToolHost {
        tools: HashMap::from([(0, Behaviour::AbortRun), (1, Behaviour::Return(json!("must not run")))]),
        ..ToolHost::default()
    };
    let (session, host) = session_with(
        json!({"model": calls(&["kill", "sibling"]), "tools": [tool("kill", 0), tool("sibling", 1)]}),
        host,
    );
    let events = run(&session).await;
    match events.last().unwrap() {
        StreamEvent::Error { error, .. } => {
            assert_eq!(error.code, ErrorCode::Abort);
            assert_eq!(error.message, "kill switch");
        }
        other => panic!("expected the abort, got {other:?}"),
    }
    assert_eq!(*host.calls.lock().unwrap(), [0], "the sibling started after the abort");
    assert!(!events
        .iter()
        .any(|event| matches!(event, StreamEvent::TurnStart { turn: 2 })));
    // The conversation stays valid: every call of the last assistant message has a result.
    let messages = serde_json::to_value(&*session.messages()).unwrap();
    let results: Vec<&Value> = messages
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .collect();
    assert_eq!(results.len(), 2);
    assert_eq!(results[1]["content"], "Tool execution aborted: kill switch");
    assert!(events
        .iter()
        .all(|event| !matches!(event, StreamEvent::Result { result, .. } if result.stop_reason == StopReason::Done)));
}

#[tokio::test]
async fn an_endless_synchronous_generator_times_out_and_is_finished() {
    let host = ToolHost {
        tools: HashMap::from([(0, Behaviour::Endless)]),
        ..ToolHost::default()
    };
    let options =
        json!({"model": calls(&["endless"]), "tools": [tool("endless", 0)], "advanced": {"toolTimeoutMs": 50}});
    let (session, host) = session_with(options, host);
    let events = run_within(&session, Duration::from_secs(5)).await;
    let StreamEvent::Result { result, .. } = events.last().unwrap() else {
        panic!("a result, got {:?}", events.last())
    };
    assert_eq!(
        result.tool_calls[0].output,
        "Tool execution failed: Tool execution timeout after 50ms"
    );
    assert_eq!(
        *host.aborts.lock().unwrap(),
        [AbortReason::ToolTimeout { timeout_ms: 50 }]
    );
    assert_eq!(
        host.returns.load(Ordering::SeqCst),
        1,
        "its return() was not called once"
    );
    assert!(host.steps.load(Ordering::SeqCst) > 1);
}

#[tokio::test]
async fn an_endless_synchronous_generator_is_stopped_by_an_abort_and_finished() {
    let host = ToolHost {
        tools: HashMap::from([(0, Behaviour::Endless)]),
        ..ToolHost::default()
    };
    let (session, host) = session_with(
        json!({"model": calls(&["endless"]), "tools": [tool("endless", 0)]}),
        host,
    );
    let aborter = session.clone();
    let stepped = host.clone();
    tokio::spawn(async move {
        while stepped.steps.load(Ordering::SeqCst) < 100 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        aborter.abort("stop it".into());
    });
    let events = run_within(&session, Duration::from_secs(5)).await;
    match events.last().unwrap() {
        StreamEvent::Error { error, .. } => {
            assert_eq!(error.code, ErrorCode::Abort);
            assert_eq!(error.message, "stop it");
        }
        other => panic!("expected the abort, got {other:?}"),
    }
    tokio::time::timeout(Duration::from_secs(1), host.returned.notified())
        .await
        .expect("its return() was called");
    assert_eq!(host.returns.load(Ordering::SeqCst), 1);
}
