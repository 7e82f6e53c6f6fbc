//! The agent loop without Node: a scripted model and tools played by a Rust host.

mod common;

use std::sync::Arc;
use std::time::Duration;

use agent_runtime_hooks::agent::events::CallStatus;
use agent_runtime_hooks::agent::{SendOptions, StopReason, StreamEvent};
use agent_runtime_hooks::error::ErrorCode;
use agent_runtime_hooks::host::{HostError, ScopeId, ThrownId};
use common::{result, run, session, tool, FakeHost};
use serde_json::json;

#[tokio::test]
async fn tool_calls_run_and_their_results_reach_the_next_turn() {
    let mut host = FakeHost::default();
    host.functions.insert(
        0,
        Box::new(|args| Box::pin(async move { Ok(Some(json!({"echo": args[0]["text"]}))) })),
    );
    let (session, host) = session(
        json!({
            "model": {"kind": "scripted", "turns": [
                {"toolCalls": [{"id": "a", "name": "echo", "input": {"text": "hi"}}]},
                {"text": "done"}
            ]},
            "tools": [tool("echo", 0)]
        }),
        host,
    );
    let events = run(&session, "go").await;
    let result = result(&events);
    assert_eq!(result.content, "done");
    assert_eq!(result.stop_reason, StopReason::Done);
    assert_eq!(result.tool_calls[0].output, "{\"echo\":\"hi\"}");
    let calls = host.calls.lock().unwrap();
    assert_eq!(
        calls[0].args.values()[1],
        json!({"toolCallId": "a", "sessionId": session.id})
    );
    let messages = serde_json::to_value(session.messages()).unwrap();
    assert_eq!(
        messages[2],
        json!({"role": "tool", "tool_call_id": "a", "content": "{\"echo\":\"hi\"}"})
    );
}

#[tokio::test]
async fn calls_of_one_turn_run_concurrently_and_report_in_call_order() {
    let barrier = Arc::new(tokio::sync::Barrier::new(2));
    let mut host = FakeHost::default();
    host.functions.insert(
        0,
        Box::new(move |args| {
            let barrier = barrier.clone();
            Box::pin(async move {
                // Both calls must be in flight at once, or this waits forever.
                barrier.wait().await;
                let delay = args[0]["ms"].as_u64().unwrap();
                tokio::time::sleep(Duration::from_millis(delay)).await;
                Ok(Some(args[0]["name"].clone()))
            })
        }),
    );
    let (session, _) = session(
        json!({
            "model": {"kind": "scripted", "turns": [
                {"toolCalls": [{"name": "w", "input": {"name": "slow", "ms": 30}}, {"name": "w", "input": {"name": "fast", "ms": 1}}]},
                {"text": "end"}
            ]},
            "tools": [tool("w", 0)]
        }),
        host,
    );
    let events = tokio::time::timeout(Duration::from_secs(5), run(&session, "go"))
        .await
        .expect("no deadlock");
    let outputs: Vec<&str> = events
        .iter()
        .filter_map(|event| match event {
            StreamEvent::ToolResult(result) => Some(result.output.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(outputs, ["slow", "fast"]);
}

#[tokio::test]
async fn failures_are_reported_with_the_contract_texts() {
    let mut host = FakeHost::default();
    host.functions.insert(
        0,
        Box::new(|_| {
            Box::pin(async {
                Err(HostError {
                    message: "boom".into(),
                    thrown: Some(ThrownId(1)),
                })
            })
        }),
    );
    let (session, host) = session(
        json!({
            "model": {"kind": "scripted", "turns": [
                {"toolCalls": [
                    {"name": "bad", "input": {}},
                    {"name": "ghost", "input": {}},
                    {"name": "bad", "arguments": "nope"}
                ]},
                {"text": "end"}
            ]},
            "tools": [tool("bad", 0)]
        }),
        host,
    );
    let events = run(&session, "go").await;
    let records = &result(&events).tool_calls;
    assert_eq!(records[0].output, "Tool execution failed: boom");
    assert_eq!(records[1].output, "Tool execution failed: Tool \"ghost\" not found");
    assert_eq!(
        records[2].output,
        "Tool execution failed: arguments are not valid JSON: expected ident at line 1 column 2"
    );
    assert!(records.iter().all(|record| record.status == CallStatus::Error));
    // Only the first call reached the tool.
    assert_eq!(host.calls.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn max_turns_stops_the_run() {
    let mut host = FakeHost::default();
    host.functions
        .insert(0, Box::new(|_| Box::pin(async { Ok(Some(json!("again"))) })));
    let again = json!({"toolCalls": [{"name": "t", "input": {}}]});
    let (session, _) = session(
        json!({"model": {"kind": "scripted", "turns": [again, again, again]}, "tools": [tool("t", 0)], "maxTurns": 2}),
        host,
    );
    let events = run(&session, "go").await;
    let result = result(&events);
    assert_eq!((result.stop_reason, result.turns), (StopReason::MaxTurns, 2));
}

#[tokio::test]
async fn abort_ends_the_run_answers_open_calls_and_frees_the_session() {
    // The tool ignores its signal: it settles only when released, after the abort.
    let release = Arc::new(tokio::sync::Notify::new());
    let released = release.clone();
    let mut host = FakeHost::default();
    host.functions.insert(
        0,
        Box::new(move |_| {
            let released = released.clone();
            Box::pin(async move {
                released.notified().await;
                Ok(Some(json!("too late")))
            })
        }),
    );
    let (session, _) = session(
        json!({
            "model": {"kind": "scripted", "turns": [{"toolCalls": [{"id": "x", "name": "hang", "input": {}}]}, {"text": "later"}]},
            "tools": [tool("hang", 0)]
        }),
        host,
    );
    let (handle, drive) = session.send(&json!("go"), SendOptions::default()).unwrap();
    tokio::spawn(drive);
    // Wait until the tool call is under way, then abort.
    loop {
        match handle.events.recv().await {
            Some(StreamEvent::ToolUse(_)) => break,
            Some(_) => continue,
            None => panic!("run ended early"),
        }
    }
    let busy = session
        .send(&json!("again"), SendOptions::default())
        .err()
        .expect("busy");
    assert_eq!(busy.code, ErrorCode::SessionBusy);
    handle.control.abort("stop".into());
    let mut last = None;
    while let Some(event) = handle.events.recv().await {
        last = Some(event);
    }
    match last {
        Some(StreamEvent::Error { message, code, error }) => {
            assert_eq!((error.code, error.message.as_str()), (ErrorCode::Abort, "stop"));
            assert_eq!((message.as_str(), code), ("stop", Some("ABORT")));
        }
        other => panic!("expected the abort error, got {other:?}"),
    }
    let messages = serde_json::to_value(session.messages()).unwrap();
    assert_eq!(
        messages[2],
        json!({"role": "tool", "tool_call_id": "x", "content": "Tool execution aborted: stop"})
    );
    let events = run(&session, "again").await;
    assert_eq!(result(&events).content, "later");
    // A tool still running after its signal aborted is tracked: close fails closed until it settles.
    let refused = session
        .close(ScopeId::NONE, Default::default())
        .await
        .expect_err("a tool still runs");
    assert_eq!(
        (refused.code, refused.message),
        (
            ErrorCode::CleanupPending,
            format!("Session runtime {} still has a tool execution cleaning up", session.id)
        )
    );
    release.notify_one();
    session.close(ScopeId::NONE, Default::default()).await.unwrap();
    let closed = session.send(&json!("x"), SendOptions::default()).err().expect("closed");
    assert_eq!(
        (closed.code, closed.message.as_str()),
        (ErrorCode::SessionClosed, "Session is closed")
    );
}
