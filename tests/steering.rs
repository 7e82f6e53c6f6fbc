//! Blade's steering, decided in the core: inputs sent while a request runs are applied at its
//! next safe point (`next`), interrupt the model step in flight (`now`), or wait for a request
//! of their own (`later`).

mod common;

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use agent_runtime_hooks::agent::inputs::{Priority, Submitted};
use agent_runtime_hooks::agent::{SendOptions, Session, StreamEvent};
use agent_runtime_hooks::error::ErrorCode;
use common::{f, session, FakeHost};
use serde_json::{json, Value};

/// A model whose first answer takes `first_ms` and whose later answers come at once; each
/// answer is `a<n>`.
fn slow_first_model(first_ms: u64) -> (Arc<Session>, Arc<FakeHost>) {
    let answered = Arc::new(AtomicU32::new(0));
    let host = FakeHost::default().with(1, move |_| {
        let n = answered.fetch_add(1, Ordering::SeqCst) + 1;
        Box::pin(async move {
            if n == 1 {
                tokio::time::sleep(Duration::from_millis(first_ms)).await;
            }
            Ok(Some(json!({"text": format!("a{n}")})))
        })
    });
    session(json!({"model": {"kind": "scripted", "script": f(1)}}), host)
}

/// The user messages model call `index` was sent.
fn users_sent(host: &FakeHost, index: usize) -> Vec<String> {
    let request = &host.calls_of(1)[index].args.values()[0];
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|message| message["role"] == "user")
        .map(|message| message["content"].as_str().unwrap_or_default().to_string())
        .collect()
}

fn roles_sent(host: &FakeHost, index: usize) -> Vec<String> {
    let request = &host.calls_of(1)[index].args.values()[0];
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|message| message["role"].as_str().unwrap().to_string())
        .collect()
}

fn shape(events: &[StreamEvent]) -> Vec<String> {
    events
        .iter()
        .filter_map(|event| match event {
            StreamEvent::TurnStart { turn } => Some(format!("turn_start {turn}")),
            StreamEvent::TurnEnd { turn, .. } => Some(format!("turn_end {turn}")),
            StreamEvent::TurnInterrupted { turn, .. } => Some(format!("turn_interrupted {turn}")),
            StreamEvent::InputApplied { turn, priority, .. } => Some(format!("input_applied {priority:?} {turn}")),
            StreamEvent::Result { content, .. } => Some(format!("result {content}")),
            StreamEvent::Error { message, .. } => Some(format!("error {message}")),
            _ => None,
        })
        .collect()
}

async fn drain(handle: agent_runtime_hooks::agent::RunHandle) -> Vec<StreamEvent> {
    let mut events = Vec::new();
    while let Some(event) = handle.events.recv().await {
        events.push(event);
    }
    events
}

#[tokio::test]
async fn a_next_input_is_answered_in_the_same_request_after_the_step_in_flight() {
    let (session, host) = slow_first_model(150);
    let (handle, drive) = session.send(&json!("first"), SendOptions::default()).unwrap();
    tokio::spawn(drive);
    tokio::time::sleep(Duration::from_millis(30)).await;
    let Submitted::Steered {
        request_id,
        priority,
        input_id,
    } = session
        .submit(&json!("and then?"), Priority::Next, None, false)
        .unwrap()
    else {
        panic!("steered")
    };
    assert_eq!(
        (request_id.as_str(), priority),
        (handle.request_id.as_str(), Priority::Next)
    );
    let events = drain(handle).await;
    assert_eq!(
        shape(&events),
        [
            "turn_start 1",
            "input_applied Next 2",
            "turn_end 1",
            "turn_start 2",
            "turn_end 2",
            "result a2"
        ]
    );
    assert!(events
        .iter()
        .any(|event| matches!(event, StreamEvent::InputApplied { input_id: id, .. } if *id == input_id)));
    // The first answer was kept; the input follows it.
    assert_eq!(roles_sent(&host, 1), ["user", "assistant", "user"]);
    assert_eq!(users_sent(&host, 1), ["first", "and then?"]);
    assert!(session.pending_inputs().is_empty());
}

#[tokio::test]
async fn a_now_input_interrupts_the_model_step_and_its_partial_answer_is_dropped() {
    let (session, host) = slow_first_model(5_000);
    let began = Instant::now();
    let (handle, drive) = session.send(&json!("first"), SendOptions::default()).unwrap();
    tokio::spawn(drive);
    tokio::time::sleep(Duration::from_millis(30)).await;
    let Submitted::Steered { input_id, .. } = session
        .submit(&json!("stop, do this"), Priority::Now, None, false)
        .unwrap()
    else {
        panic!("steered")
    };
    let events = drain(handle).await;
    assert!(
        began.elapsed() < Duration::from_secs(2),
        "the slow answer was not waited for"
    );
    assert_eq!(
        shape(&events),
        [
            "turn_start 1",
            "turn_interrupted 1",
            "input_applied Now 2",
            "turn_end 1",
            "turn_start 2",
            "turn_end 2",
            "result a2"
        ]
    );
    let interrupted = events.iter().find_map(|event| match event {
        StreamEvent::TurnInterrupted {
            input_id, request_id, ..
        } => Some((input_id.clone(), request_id.clone())),
        _ => None,
    });
    assert_eq!(interrupted.map(|(input, _)| input), Some(input_id));
    assert_eq!(
        roles_sent(&host, 1),
        ["user", "user"],
        "no assistant message of the interrupted step"
    );
    assert_eq!(users_sent(&host, 1), ["first", "stop, do this"]);
}

#[tokio::test]
async fn a_later_input_waits_for_a_request_of_its_own() {
    let (session, host) = slow_first_model(100);
    let (handle, drive) = session.send(&json!("first"), SendOptions::default()).unwrap();
    tokio::spawn(drive);
    tokio::time::sleep(Duration::from_millis(20)).await;
    let Submitted::Queued { input_id } = session
        .submit(&json!("afterwards"), Priority::Later, None, false)
        .unwrap()
    else {
        panic!("queued")
    };
    assert_eq!(session.pending_inputs()[0].input_id, input_id);
    assert_eq!(shape(&drain(handle).await), ["turn_start 1", "turn_end 1", "result a1"]);
    assert_eq!(host.calls_of(1).len(), 1);
    // The request is over: a send now starts one, and the queued input starts the next.
    let (handle, drive) = session
        .send_later(SendOptions::default())
        .unwrap()
        .expect("a queued input");
    assert_eq!(handle.input_id, input_id);
    tokio::spawn(drive);
    assert_eq!(shape(&drain(handle).await), ["turn_start 1", "turn_end 1", "result a2"]);
    assert_eq!(users_sent(&host, 1), ["first", "afterwards"]);
    assert!(session.send_later(SendOptions::default()).unwrap().is_none());
}

#[tokio::test]
async fn steering_after_the_last_safe_point_waits_for_the_next_request() {
    let (session, _host) = slow_first_model(0);
    let (handle, drive) = session.send(&json!("first"), SendOptions::default()).unwrap();
    let request_id = handle.request_id.clone();
    drive.await;
    drain(handle).await;
    assert_eq!(
        session.submit(&json!("x"), Priority::Now, None, false).unwrap(),
        Submitted::Idle
    );
    let error = session
        .submit(&json!("x"), Priority::Next, Some(&request_id), false)
        .unwrap_err();
    assert_eq!(error.code, ErrorCode::SessionRequestMismatch);
    assert_eq!(error.message, format!("No active request matches \"{request_id}\""));
}

#[tokio::test]
async fn a_stale_expected_request_id_or_a_starting_option_is_refused_while_a_request_runs() {
    let (session, _host) = slow_first_model(100);
    let (handle, drive) = session.send(&json!("first"), SendOptions::default()).unwrap();
    tokio::spawn(drive);
    let error = session
        .submit(&json!("x"), Priority::Next, Some("old"), false)
        .unwrap_err();
    assert_eq!(
        error.message,
        format!("Expected request \"old\" but \"{}\" is active", handle.request_id)
    );
    let error = session.submit(&json!("x"), Priority::Next, None, true).unwrap_err();
    assert_eq!(error.code, ErrorCode::SessionInputOptionsUnsupported);
    assert!(session.pending_inputs().is_empty(), "nothing was kept");
    let error = session.submit(&json!(42), Priority::Next, None, false).unwrap_err();
    assert_eq!(error.code, ErrorCode::InvalidInput);
    drain(handle).await;
}

#[tokio::test]
async fn a_cancelled_input_never_reaches_the_model() {
    let (session, host) = slow_first_model(100);
    let (handle, drive) = session.send(&json!("first"), SendOptions::default()).unwrap();
    tokio::spawn(drive);
    let Submitted::Steered { input_id, .. } = session.submit(&json!("never"), Priority::Next, None, false).unwrap()
    else {
        panic!("steered")
    };
    assert!(session.cancel_input(&input_id));
    assert!(!session.cancel_input(&input_id));
    assert_eq!(shape(&drain(handle).await), ["turn_start 1", "turn_end 1", "result a1"]);
    assert_eq!(host.calls_of(1).len(), 1);
}

#[tokio::test]
async fn a_steering_input_passes_user_prompt_submit_as_the_first_prompt_does() {
    let seen = Arc::new(std::sync::Mutex::new(Vec::<Value>::new()));
    let record = seen.clone();
    let answered = Arc::new(AtomicU32::new(0));
    let host = FakeHost::default()
        .with(1, move |_| {
            let n = answered.fetch_add(1, Ordering::SeqCst) + 1;
            Box::pin(async move {
                if n == 1 {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Ok(Some(json!({"text": format!("a{n}")})))
            })
        })
        .with(2, move |args| {
            record.lock().unwrap().push(args[0]["userPrompt"].clone());
            let blocked = args[0]["userPrompt"] == "forbidden";
            Box::pin(async move {
                Ok(Some(if blocked {
                    json!({"action": "abort", "reason": "not that"})
                } else {
                    json!({"action": "continue"})
                }))
            })
        });
    let (session, _host) = session(
        json!({"model": {"kind": "scripted", "script": f(1)}, "advanced": {"hooks": {"UserPromptSubmit": [f(2)]}}}),
        host,
    );
    let (handle, drive) = session.send(&json!("first"), SendOptions::default()).unwrap();
    tokio::spawn(drive);
    tokio::time::sleep(Duration::from_millis(20)).await;
    session
        .submit(&json!("forbidden"), Priority::Next, None, false)
        .unwrap();
    let events = drain(handle).await;
    assert_eq!(*seen.lock().unwrap(), [json!("first"), json!("forbidden")]);
    // Fail-closed: the blocked input is not applied, and the request fails as a blocked first
    // prompt fails it.
    assert!(!events
        .iter()
        .any(|event| matches!(event, StreamEvent::InputApplied { .. })));
    assert!(
        matches!(events.last(), Some(StreamEvent::Error { .. })),
        "{:?}",
        shape(&events)
    );
}
