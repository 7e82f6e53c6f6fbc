//! Inline hooks without Node: dispatch order, shared budgets, fail-closed cleanup, SessionEnd
//! once, and the tool pipeline's texts, with callbacks played by Rust closures.

mod common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use agent_runtime_hooks::agent::events::CallStatus;
use agent_runtime_hooks::agent::{StopReason, StreamEvent};
use agent_runtime_hooks::error::ErrorCode;
use agent_runtime_hooks::hooks::dispatch::{Caller, EventInput, HookContext, HookError};
use agent_runtime_hooks::hooks::pending::Owner;
use agent_runtime_hooks::hooks::HookEvent;
use agent_runtime_hooks::host::{AbortReason, ScopeId, ThrownId};
use common::{audited_tool_call, f, one_call, result, run, scripted, session as new_session, tool, FakeHost};
use serde_json::{json, Value};

fn error_of(events: &[StreamEvent]) -> &agent_runtime_hooks::error::SdkError {
    match events.last() {
        Some(StreamEvent::Error { message, code, error }) => {
            assert_eq!(message, &error.message);
            assert_eq!(*code, Some(error.code.code()).filter(|code| !code.is_empty()));
            error
        }
        other => panic!("expected an error, got {other:?}"),
    }
}

#[tokio::test]
async fn callbacks_run_in_order_each_with_the_original_input() {
    let order = Arc::new(Mutex::new(Vec::new()));
    let record = |name: &'static str, output: Value| {
        let order = order.clone();
        move |args: Vec<Value>| {
            order.lock().unwrap().push((name, args[0]["toolInput"].clone()));
            let output = output.clone();
            Box::pin(async move { Ok(Some(output)) }) as agent_runtime_hooks::host::HostFuture
        }
    };
    let host = FakeHost::default()
        .with(1, record("a", json!({"action": "skip", "reason": "skipped by a"})))
        .with(2, record("b", json!({"action": "continue", "modifiedInput": {"x": 2}})))
        .with(3, record("c", json!({"action": "abort"})))
        .returning(0, json!("ran"));
    let (session, host) = new_session(
        json!({"model": one_call("t", json!({"x": 1})), "tools": [tool("t", 0)], "advanced": {"hooks": {"PreToolUse": [f(1), f(2), f(3)]}}}),
        host,
    );
    let events = run(&session, "go").await;
    // All three ran (a skip does not stop later callbacks), each saw the original input.
    assert_eq!(
        *order.lock().unwrap(),
        vec![("a", json!({"x": 1})), ("b", json!({"x": 1})), ("c", json!({"x": 1}))]
    );
    // The first skip decides: the tool did not run; the output is the skip reason.
    let record = &result(&events).tool_calls[0];
    assert_eq!(
        (record.status, record.output.as_str()),
        (CallStatus::Success, "skipped by a")
    );
    assert!(host.calls_of(0).is_empty());
}

#[tokio::test]
async fn an_event_without_callbacks_calls_nothing() {
    let host = FakeHost::default().returning(0, json!("ran"));
    let (session, host) = new_session(
        json!({"model": one_call("t", json!({})), "tools": [tool("t", 0)]}),
        host,
    );
    run(&session, "go").await;
    assert_eq!(host.calls.lock().unwrap().len(), 1, "only the tool itself");
}

#[tokio::test]
async fn one_budget_is_shared_by_the_callbacks_of_an_event() {
    let host = FakeHost::default()
        .with(1, |_| {
            Box::pin(async {
                tokio::time::sleep(Duration::from_millis(60)).await;
                Ok(Some(json!({"action": "continue"})))
            })
        })
        .with(2, |_| {
            Box::pin(async {
                tokio::time::sleep(Duration::from_millis(60)).await;
                Ok(Some(json!({"action": "continue"})))
            })
        });
    let (session, host) = new_session(
        json!({"model": scripted(json!([{"text": "x"}])), "advanced": {"hookTimeoutMs": 100, "hooks": {"UserPromptSubmit": [f(1), f(2)]}}}),
        host,
    );
    let started = Instant::now();
    let events = run(&session, "go").await;
    let error = error_of(&events);
    assert_eq!(
        (error.code, error.message.as_str()),
        (ErrorCode::HookTimeout, "Hook UserPromptSubmit exceeded 100ms")
    );
    let elapsed = started.elapsed();
    assert!(
        elapsed >= Duration::from_millis(100) && elapsed < Duration::from_millis(400),
        "{elapsed:?}"
    );
    let aborts = host.aborts.lock().unwrap();
    assert_eq!(aborts.len(), 1);
    assert_eq!(
        aborts[0].1,
        AbortReason::HookTimeout {
            event: "UserPromptSubmit",
            timeout_ms: 100
        }
    );
    assert_eq!(error.timeout().unwrap().dispatch, aborts[0].0);
}

#[tokio::test]
async fn a_callback_that_ignores_its_deadline_keeps_the_session_failing_closed_until_it_settles() {
    let (release, released) = tokio::sync::watch::channel(false);
    let host = FakeHost::default().with(1, move |_| {
        let mut released = released.clone();
        Box::pin(async move {
            let _ = released.wait_for(|done| *done).await;
            Ok(Some(json!({"action": "continue"})))
        })
    });
    let (session, _) = new_session(
        json!({"model": scripted(json!([{"text": "a"}, {"text": "b"}])), "advanced": {"hookTimeoutMs": 30, "hooks": {"UserPromptSubmit": [f(1)]}}}),
        host,
    );
    assert_eq!(error_of(&run(&session, "one").await).code, ErrorCode::HookTimeout);
    assert_eq!(session.dispatcher().pending().count(Owner::Hook), 1);
    let blocked = run(&session, "two").await;
    assert_eq!(
        error_of(&blocked).message,
        "An inline hook callback is still cleaning up"
    );
    let closing = session.close(ScopeId::NONE, Default::default()).await.unwrap_err();
    assert_eq!(
        closing.message,
        format!(
            "Session runtime {} still has an inline hook callback cleaning up",
            session.id
        )
    );
    release.send(true).unwrap();
    assert!(session.dispatcher().pending().settle(Duration::from_secs(1)).await);
    assert_eq!(session.dispatcher().pending().count(Owner::Hook), 0);
    session.close(ScopeId::NONE, Default::default()).await.unwrap();
}

#[tokio::test]
async fn session_end_runs_once_even_when_it_fails_and_close_is_retried() {
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    let host = FakeHost::default().with(1, move |_| {
        counted.fetch_add(1, Ordering::SeqCst);
        Box::pin(async { Ok(Some(json!({"action": "abort"}))) })
    });
    let (session, _) = new_session(
        json!({"model": scripted(json!([])), "advanced": {"hooks": {"SessionEnd": [f(1)]}}}),
        host,
    );
    let error = session.close(ScopeId::NONE, Default::default()).await.unwrap_err();
    assert_eq!(
        (error.code, error.message.as_str()),
        (ErrorCode::HookAborted, "Hook SessionEnd aborted")
    );
    assert!(!session.is_closed());
    session.close(ScopeId::NONE, Default::default()).await.unwrap();
    assert!(session.is_closed());
    session.close(ScopeId::NONE, Default::default()).await.unwrap();
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn concurrent_closes_share_one_attempt() {
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    let host = FakeHost::default().with(1, move |_| {
        counted.fetch_add(1, Ordering::SeqCst);
        Box::pin(async {
            tokio::time::sleep(Duration::from_millis(30)).await;
            Ok(Some(json!({"action": "abort", "reason": "not now"})))
        })
    });
    let (session, _) = new_session(
        json!({"model": scripted(json!([])), "advanced": {"hooks": {"SessionEnd": [f(1)]}}}),
        host,
    );
    let (a, b) = tokio::join!(
        session.close(ScopeId(1), Default::default()),
        session.close(ScopeId(2), Default::default())
    );
    // A second close that ran on its own would find SessionEnd already attempted and succeed;
    // sharing the attempt, both get its refusal.
    for outcome in [a, b] {
        let error = outcome.unwrap_err();
        assert_eq!(
            (error.code, error.message.as_str()),
            (ErrorCode::HookAborted, "not now")
        );
    }
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn session_end_uses_its_own_budget() {
    let host = FakeHost::default().with(1, |_| Box::pin(futures::future::pending()));
    let (session, _) = new_session(
        json!({"model": scripted(json!([])), "advanced": {"hookTimeoutMs": 10000, "sessionEndHookTimeoutMs": 40, "hooks": {"SessionEnd": [f(1)]}}}),
        host,
    );
    let started = Instant::now();
    let error = session.close(ScopeId::NONE, Default::default()).await.unwrap_err();
    assert_eq!(error.message, "Hook SessionEnd exceeded 40ms");
    assert!(started.elapsed() < Duration::from_millis(1000));
}

#[tokio::test]
async fn tool_hook_failures_become_failed_calls_and_post_failure_hooks_see_them() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let seen_by_hook = seen.clone();
    let host = FakeHost::default()
        .returning(0, json!("tool ran"))
        .throwing(1, "pre hook exploded")
        .with(2, move |args| {
            seen_by_hook.lock().unwrap().push(args[0].clone());
            Box::pin(async { Ok(Some(json!({"action": "continue"}))) })
        });
    let (session, host) = new_session(
        json!({"model": one_call("t", json!({"a": 1})), "tools": [tool("t", 0)],
               "advanced": {"hooks": {"PreToolUse": [f(1)], "PostToolUseFailure": [f(2)]}}}),
        host,
    );
    let events = run(&session, "go").await;
    let record = &result(&events).tool_calls[0];
    assert_eq!(
        (record.status, record.output.as_str()),
        (CallStatus::Error, "Tool execution failed: pre hook exploded")
    );
    assert!(host.calls_of(0).is_empty(), "the tool did not run");
    let payload = seen.lock().unwrap()[0].clone();
    assert_eq!(payload["event"], "PostToolUseFailure");
    assert_eq!(payload["toolName"], "t");
    assert_eq!(payload["toolInput"], json!({"a": 1}));
    assert_eq!(payload["toolOutput"], "Tool execution failed: pre hook exploded");
    assert_eq!(
        payload["result"],
        json!({"content": "Tool execution failed: pre hook exploded", "success": false})
    );
    assert_eq!(
        (payload["toolCallId"].as_str(), payload["mocked"].as_bool()),
        (Some("c1"), Some(false))
    );
    // The failure hook is handed the thrown value as its `error`.
    let failure_call = &host.calls_of(2)[0];
    let slot = failure_call.error.as_ref().unwrap();
    assert_eq!(
        (slot.key, slot.message.as_str(), slot.thrown),
        ("error", "pre hook exploded", Some(ThrownId(101)))
    );
}

#[tokio::test]
async fn a_throwing_post_failure_hook_keeps_the_original_error() {
    let host = FakeHost::default()
        .throwing(0, "tool broke")
        .throwing(1, "failure hook broke");
    let (session, _) = new_session(
        json!({"model": one_call("t", json!({})), "tools": [tool("t", 0)], "advanced": {"hooks": {"PostToolUseFailure": [f(1)]}}}),
        host,
    );
    let events = run(&session, "go").await;
    assert_eq!(
        result(&events).tool_calls[0].output,
        "Tool execution failed: tool broke"
    );
}

#[tokio::test]
async fn post_tool_use_rewrites_output_and_abort_fails_the_call() {
    let host = FakeHost::default()
        .returning(0, json!("SECRET_KEY=abc"))
        .returning(1, json!({"action": "continue", "modifiedOutput": {"redacted": true}}));
    let (session, _) = new_session(
        json!({"model": one_call("t", json!({})), "tools": [tool("t", 0)], "advanced": {"hooks": {"PostToolUse": [f(1)]}}}),
        host,
    );
    let events = run(&session, "go").await;
    let record = &result(&events).tool_calls[0];
    assert_eq!(
        (record.status, record.output.as_str()),
        (CallStatus::Success, "{\"redacted\":true}")
    );

    let host = FakeHost::default()
        .returning(0, json!("x"))
        .returning(2, json!({"action": "abort"}));
    let (session, _) = new_session(
        json!({"model": one_call("t", json!({})), "tools": [tool("t", 0)], "advanced": {"hooks": {"PostToolUse": [f(2)]}}}),
        host,
    );
    let events = run(&session, "go").await;
    let record = &result(&events).tool_calls[0];
    assert_eq!(
        (record.status, record.output.as_str()),
        (
            CallStatus::Error,
            "Tool execution failed: Tool \"t\" post-execution hook aborted"
        )
    );
}

#[tokio::test]
async fn permission_request_hooks_rewrite_input_before_the_permission_function() {
    let host = FakeHost::default()
        .with(0, |args| Box::pin(async move { Ok(Some(args[0]["value"].clone())) }))
        .returning(
            1,
            json!({"action": "continue", "modifiedInput": {"value": "from-permission-hook"}}),
        )
        .returning(2, json!("allow"));
    let (session, host) = new_session(
        json!({"model": one_call("CustomTool", json!({"value": "original", "file_path": "a.ts"})), "tools": [tool("CustomTool", 0)],
               "advanced": {"hooks": {"PermissionRequest": [f(1)]}, "permission": f(2)}}),
        host,
    );
    let events = run(&session, "go").await;
    assert_eq!(result(&events).tool_calls[0].output, "from-permission-hook");
    let request = &host.calls_of(2)[0];
    assert_eq!(
        request.args.values()[0],
        json!({"toolName": "CustomTool", "input": {"value": "from-permission-hook", "file_path": "a.ts"}, "kind": "execute",
               "affectedPaths": ["a.ts"], "sessionId": session.id, "toolCallId": "c1"})
    );
    assert_eq!(request.signal.unwrap().key, "signal");
}

#[tokio::test]
async fn a_permission_request_abort_denies_without_asking_and_interrupts_the_run() {
    let host = FakeHost::default()
        .returning(0, json!("ran"))
        .returning(1, json!({"action": "abort", "reason": "not today"}))
        .returning(2, json!("allow"));
    let (session, host) = new_session(
        json!({"model": one_call("t", json!({})), "tools": [tool("t", 0)], "advanced": {"hooks": {"PermissionRequest": [f(1)]}, "permission": f(2)}}),
        host,
    );
    let events = run(&session, "go").await;
    let result = result(&events);
    assert_eq!(result.tool_calls[0].output, "Tool execution aborted: not today");
    assert_eq!(
        (result.stop_reason, result.content.as_str(), result.turns),
        (StopReason::Interrupted, "Tool execution aborted: not today", 1)
    );
    assert_eq!(
        (result.result.as_str(), result.turns_count),
        (result.content.as_str(), 1)
    );
    assert!(host.calls_of(2).is_empty() && host.calls_of(0).is_empty());
}

#[tokio::test]
async fn a_permission_function_that_throws_or_times_out_denies() {
    let host = FakeHost::default()
        .returning(0, json!("ran"))
        .throwing(2, "policy service down");
    let (session, host) = new_session(
        json!({"model": one_call("t", json!({})), "tools": [tool("t", 0)], "advanced": {"permission": f(2)}}),
        host,
    );
    let events = run(&session, "go").await;
    assert_eq!(
        result(&events).tool_calls[0].output,
        "Tool execution aborted: Permission check failed: policy service down"
    );
    assert!(host.calls_of(0).is_empty());

    let host = FakeHost::default()
        .returning(0, json!("ran"))
        .with(2, |_| Box::pin(futures::future::pending()));
    let (session, _) = new_session(
        json!({"model": one_call("t", json!({})), "tools": [tool("t", 0)], "advanced": {"permission": f(2), "hookTimeoutMs": 30}}),
        host,
    );
    let events = run(&session, "go").await;
    assert_eq!(
        result(&events).tool_calls[0].output,
        "Tool execution aborted: Permission check failed: Hook PermissionRequest exceeded 30ms"
    );
    let closing = session.close(ScopeId::NONE, Default::default()).await.unwrap_err();
    assert_eq!(
        closing.message,
        format!(
            "Session runtime {} still has a permission callback cleaning up",
            session.id
        )
    );
}

#[tokio::test]
async fn an_ask_nobody_answers_pauses_the_call_for_a_person() {
    let host = FakeHost::default().returning(0, json!("ran"));
    let (session, host) = new_session(
        json!({"model": one_call("Bash", json!({"command": "ls"})), "tools": [tool("Bash", 0)], "advanced": {"permission": "default"}}),
        host,
    );
    let events = run(&session, "go").await;
    let result = result(&events);
    assert_eq!(result.stop_reason, agent_runtime_hooks::agent::StopReason::Interrupted);
    assert!(result.tool_calls.is_empty());
    let pending = result.pending_approvals.as_ref().expect("pending approvals");
    assert_eq!(pending.len(), 1);
    assert_eq!(pending[0].tool_call_id, "c1");
    assert_eq!(pending[0].tool_name, "Bash");
    assert!(host.calls_of(0).is_empty(), "the tool ran");
    assert_eq!(session.pending_approvals(), *pending);
}

#[tokio::test]
async fn task_completed_sees_the_outcome_and_its_abort_fails_the_run() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let recorder = seen.clone();
    let host = FakeHost::default().with(1, move |args| {
        recorder.lock().unwrap().push(args[0].clone());
        Box::pin(async { Ok(Some(json!({"action": "abort", "reason": "not accepted"}))) })
    });
    let (session, _) = new_session(
        json!({"model": scripted(json!([{"text": "answer"}])), "advanced": {"hooks": {"TaskCompleted": [f(1)]}}}),
        host,
    );
    let events = run(&session, "the task").await;
    let error = error_of(&events);
    assert_eq!(
        (error.code, error.message.as_str()),
        (ErrorCode::HookAborted, "not accepted")
    );
    let payload = seen.lock().unwrap()[0].clone();
    assert_eq!(payload["taskDescription"], "the task");
    assert_eq!(payload["resultSummary"], "answer");
    assert_eq!(payload["success"], true);
    assert_eq!(payload["reason"], "done");
}

#[tokio::test]
async fn dispatch_reports_cancellation_and_cleanup() {
    let host = FakeHost::default().with(1, |_| Box::pin(futures::future::pending()));
    let (session, _) = new_session(
        json!({"model": scripted(json!([])), "advanced": {"hooks": {"UserPromptSubmit": [f(1)]}}}),
        host,
    );
    let token = tokio_util::sync::CancellationToken::new();
    let cancel = token.clone();
    tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(20)).await;
        cancel.cancel();
    });
    let context = HookContext::default();
    let input = EventInput {
        event: HookEvent::UserPromptSubmit,
        payload: Default::default(),
        tool: None,
        error: None,
    };
    let caller = Caller {
        scope: ScopeId::NONE,
        cancel: Some(&token),
        context: &context,
    };
    let outcome = session.dispatcher().dispatch(input, caller).await;
    assert_eq!(outcome.err(), Some(HookError::Cancelled));
    assert_eq!(session.dispatcher().pending().count(Owner::Hook), 1);
}

/// A span's name and every field recorded on it, in order.
type SeenSpan = (String, Vec<(String, String)>);

/// Spans as a subscriber saw them.
#[derive(Clone, Default)]
struct SpanLog(Arc<Mutex<Vec<SeenSpan>>>);

struct Fields<'a>(&'a mut Vec<(String, String)>);

impl tracing::field::Visit for Fields<'_> {
    fn record_str(&mut self, field: &tracing::field::Field, value: &str) {
        self.0.push((field.name().into(), value.into()));
    }

    fn record_debug(&mut self, field: &tracing::field::Field, value: &dyn std::fmt::Debug) {
        self.0.push((field.name().into(), format!("{value:?}")));
    }
}

impl tracing::Subscriber for SpanLog {
    fn enabled(&self, _: &tracing::Metadata<'_>) -> bool {
        true
    }

    fn new_span(&self, span: &tracing::span::Attributes<'_>) -> tracing::span::Id {
        let mut spans = self.0.lock().unwrap();
        let mut fields = Vec::new();
        span.record(&mut Fields(&mut fields));
        spans.push((span.metadata().name().into(), fields));
        tracing::span::Id::from_u64(spans.len() as u64)
    }

    fn record(&self, span: &tracing::span::Id, values: &tracing::span::Record<'_>) {
        let mut spans = self.0.lock().unwrap();
        values.record(&mut Fields(&mut spans[span.into_u64() as usize - 1].1));
    }

    fn record_follows_from(&self, _: &tracing::span::Id, _: &tracing::span::Id) {}
    fn event(&self, _: &tracing::Event<'_>) {}
    fn enter(&self, _: &tracing::span::Id) {}
    fn exit(&self, _: &tracing::span::Id) {}
}

#[tokio::test]
async fn every_dispatch_and_hook_is_a_span_with_its_outcome_and_duration() {
    let spans = SpanLog::default();
    let _guard = tracing::subscriber::set_default(spans.clone());
    let (options, host) = audited_tool_call();
    let (session, _host) = new_session(options, host);
    run(&session, "go").await;
    let spans = spans.0.lock().unwrap().clone();
    let field = |fields: &[(String, String)], name: &str| {
        fields
            .iter()
            .rev()
            .find(|(key, _)| key == name)
            .map(|(_, value)| value.clone())
    };
    let summary: Vec<(String, Option<String>, Option<String>)> = spans
        .iter()
        .filter(|(name, _)| name == "hook_dispatch" || name == "hook")
        .map(|(name, fields)| {
            let what = field(fields, "event").or_else(|| field(fields, "hook"));
            assert!(
                field(fields, "elapsed_us").is_some(),
                "{name} has no duration: {fields:?}"
            );
            (name.clone(), what, field(fields, "outcome"))
        })
        .collect();
    let entry =
        |name: &str, what: &str, outcome: &str| (name.to_string(), Some(what.to_string()), Some(outcome.to_string()));
    assert_eq!(
        summary,
        vec![
            entry("hook_dispatch", "PreToolUse", "ok"),
            entry("hook", "advanced.hooks.PreToolUse[0]", "ok"),
            entry("hook_dispatch", "PostToolUse", "threw"),
            entry("hook", "audit", "threw"),
        ]
    );
}
