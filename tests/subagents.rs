//! Sub-agent trees without Node, as a hostile model would grow them: deep chains must not take
//! more stack with each level, one budget bounds the `Task` calls of a whole tree, and an abort
//! stops every sub-agent of it.
//!
//! Its own test binary: a stack overflow aborts the process it happens in.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use agent_runtime_hooks::agent::{SendOptions, StreamEvent};
use agent_runtime_hooks::error::ErrorCode;
use agent_runtime_hooks::host::HostFuture;
use common::{f, result, run, session, FakeHost};
use serde_json::{json, Value};

/// Who a scripted model call is for: `root`, or the sub-agent named by its system prompt
/// (`You are <name>`).
fn who(request: &Value) -> String {
    match request["messages"][0]["content"].as_str() {
        Some(system) if request["messages"][0]["role"] == "system" => {
            system.strip_prefix("You are ").unwrap_or(system).to_string()
        }
        _ => "root".into(),
    }
}

/// The tool results the model was shown since the last user message (this run's).
fn answered(request: &Value) -> Vec<String> {
    let messages = request["messages"].as_array().cloned().unwrap_or_default();
    let since = messages
        .iter()
        .rposition(|message| message["role"] == "user")
        .map_or(0, |last| last + 1);
    messages[since..]
        .iter()
        .filter(|message| message["role"] == "tool")
        .map(|message| message["content"].as_str().unwrap_or_default().to_string())
        .collect()
}

fn offers_task(request: &Value) -> bool {
    request["tools"]
        .as_array()
        .is_some_and(|tools| tools.iter().any(|tool| tool["name"] == "Task"))
}

fn task(id: &str, subagent: &str) -> Value {
    json!({"id": id, "name": "Task", "input": {"subagent_type": subagent, "prompt": "go on"}})
}

/// A scripted model played by function 9 with `script`, which gets the request's arguments.
fn model_host(script: impl Fn(&Value) -> Value + Send + Sync + 'static) -> FakeHost {
    FakeHost::default().with(9, move |args| {
        let turn = script(&args[0]);
        Box::pin(async move { Ok(Some(turn)) }) as HostFuture
    })
}

/// A chain 20 deep, driven on a thread with a 1 MiB stack (half a test thread's): each level
/// used to be polled inside its parent's poll, so the stack grew with the depth until it
/// overflowed and the process died.
#[test]
fn a_chain_of_sub_agents_twenty_deep_answers_on_a_small_stack() {
    let driven = std::thread::Builder::new()
        .stack_size(1 << 20)
        .spawn(|| {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
            runtime.block_on(async {
                // Each agent delegates once while it may, then answers with what its child said.
                let host = model_host(|request| match answered(request).first() {
                    Some(below) => json!({"text": format!("up({below})")}),
                    None if offers_task(request) => json!({"toolCalls": [task("t", "link")]}),
                    None => json!({"text": "bottom"}),
                });
                let (session, _) = session(
                    json!({"model": {"kind": "scripted", "script": f(9)},
                           "advanced": {"agents": {"link": {"description": "Delegates once"}}, "maxSubagentDepth": 20}}),
                    host,
                );
                let events = run(&session, "go").await;
                result(&events).content.clone()
            })
        })
        .unwrap()
        .join()
        .unwrap();
    // The sub-agent at depth 20 answered; the root and 19 sub-agents wrapped what it said.
    assert_eq!(driven, format!("{}bottom{}", "up(".repeat(20), ")".repeat(20)));
}

#[tokio::test]
async fn the_tree_budget_refuses_task_calls_past_it_with_a_text_the_model_sees() {
    // The root asks for three workers, then three more; four may start in all.
    let worked = Arc::new(AtomicUsize::new(0));
    let counted = worked.clone();
    let host = model_host(move |request| match (who(request).as_str(), answered(request).len()) {
        ("worker", _) => {
            counted.fetch_add(1, Ordering::SeqCst);
            json!({"text": "worked"})
        }
        (_, 0) => json!({"toolCalls": [task("a1", "worker"), task("a2", "worker"), task("a3", "worker")]}),
        (_, 3) => json!({"toolCalls": [task("b1", "worker"), task("b2", "worker"), task("b3", "worker")]}),
        _ => json!({"text": "root done"}),
    });
    let (session, _) = session(
        json!({"model": {"kind": "scripted", "script": f(9)},
               "advanced": {"agents": {"worker": {"description": "Works", "systemPrompt": "You are worker"}},
                            "maxSubagentCalls": 4}}),
        host,
    );
    let events = run(&session, "go").await;
    let done = result(&events);
    assert_eq!(done.content, "root done");
    assert_eq!(worked.load(Ordering::SeqCst), 4, "the sub-agents that ran");
    let outputs: Vec<(&str, bool)> = done
        .tool_calls
        .iter()
        .map(|call| (call.output.as_str(), call.is_error))
        .collect();
    let refused = "Tool execution failed: Task: the limit of 4 sub-agent calls for this run (advanced.maxSubagentCalls) is reached; go on without delegating";
    assert_eq!(outputs.iter().filter(|output| **output == ("worked", false)).count(), 4);
    assert_eq!(
        outputs.iter().filter(|output| **output == (refused, true)).count(),
        2,
        "{outputs:?}"
    );
    // The next run of the session has a budget of its own.
    worked.store(0, Ordering::SeqCst);
    let again = run(&session, "again").await;
    assert_eq!(result(&again).content, "root done");
    assert_eq!(worked.load(Ordering::SeqCst), 4);
}

/// Counts its drops: a tool call's future the run let go of.
struct Dropped(Arc<AtomicUsize>);

impl Drop for Dropped {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[tokio::test]
async fn aborting_the_root_stops_every_sub_agent_and_their_events_reached_its_stream() {
    // root → manager → worker, whose tool never settles; TaskCompleted counts the runs that ended.
    let dropped = Arc::new(AtomicUsize::new(0));
    let let_go = dropped.clone();
    let completed = Arc::new(Mutex::new(Vec::new()));
    let seen = completed.clone();
    let hung = Arc::new(AtomicUsize::new(0));
    let called = hung.clone();
    let host = model_host(|request| match (who(request).as_str(), answered(request).len()) {
        ("manager", 0) => json!({"toolCalls": [task("m1", "worker")]}),
        ("worker", 0) => json!({"toolCalls": [{"id": "w1", "name": "hang", "input": {}}]}),
        (_, 0) => json!({"toolCalls": [task("r1", "manager")]}),
        _ => json!({"text": "should not get here"}),
    })
    .with(1, move |_| {
        called.fetch_add(1, Ordering::SeqCst);
        let guard = Dropped(let_go.clone());
        Box::pin(async move {
            let _guard = guard;
            std::future::pending::<()>().await;
            Ok(None)
        })
    })
    .with(2, move |args| {
        seen.lock().unwrap().push(args[0]["taskId"].clone());
        Box::pin(async { Ok(None) })
    });
    let (session, _) = session(
        json!({"model": {"kind": "scripted", "script": f(9)},
               "tools": [{"name": "hang", "execute": f(1)}],
               "advanced": {"agents": {"manager": {"description": "Manages", "systemPrompt": "You are manager"},
                                       "worker": {"description": "Works", "systemPrompt": "You are worker"}},
                            "hooks": {"TaskCompleted": [f(2)]}}}),
        host,
    );
    let (handle, drive) = session.send(&json!("go"), SendOptions::default()).unwrap();
    tokio::spawn(drive);
    let mut events = Vec::new();
    loop {
        let event = handle
            .events
            .recv()
            .await
            .expect("the run goes on until the worker's tool");
        let deepest = matches!(&event, StreamEvent::ToolUse(call) if call.name == "hang");
        events.push(event);
        if deepest {
            break;
        }
    }
    // Aborted once the worker's tool is running (its ToolUse comes just before it starts).
    let running = tokio::time::Instant::now();
    while hung.load(Ordering::SeqCst) == 0 {
        assert!(
            running.elapsed() < std::time::Duration::from_secs(5),
            "the worker's tool never started"
        );
        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
    }
    handle.control.abort("stop the tree".into());
    while let Some(event) = handle.events.recv().await {
        events.push(event);
    }
    match events.last() {
        Some(StreamEvent::Error { error, .. }) => {
            assert_eq!(
                (error.code, error.message.as_str()),
                (ErrorCode::Abort, "stop the tree")
            )
        }
        other => panic!("expected the abort, got {other:?}"),
    }
    // The worker's tool was running when the tree was stopped; like any tool abandoned at an
    // abort, it is left to settle on its own (tracked, not dropped), and nothing else started.
    assert_eq!(hung.load(Ordering::SeqCst), 1);
    assert_eq!(dropped.load(Ordering::SeqCst), 0);
    // The sub-agents' tool events reached the root's stream with their path.
    let paths: Vec<(String, Option<Vec<String>>)> = events
        .iter()
        .filter_map(|event| match event {
            StreamEvent::ToolUse(call) => Some((call.name.clone(), call.agent_path.clone())),
            _ => None,
        })
        .collect();
    assert_eq!(
        paths,
        vec![
            ("Task".into(), None),
            ("Task".into(), Some(vec!["manager".into()])),
            ("hang".into(), Some(vec!["manager".into(), "worker".into()])),
        ]
    );
    // Only the root's run ended (aborted): the sub-agents were stopped, not finished.
    assert_eq!(completed.lock().unwrap().len(), 1);
}
