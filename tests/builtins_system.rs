//! TodoWrite, EnterPlanMode, ExitPlanMode and AskUserQuestion inside the agent, without Node:
//! what the model is sent, what the confirmation handler is asked, and plan mode really switched
//! — a Write after EnterPlanMode refused with Blade's text, allowed again after ExitPlanMode, and
//! the mode kept for the session's next run.

mod common;

use std::path::Path;

use agent_runtime_hooks::agent::{StopReason, StreamEvent, ToolCallRecord};
use common::{f, result, run, scripted, session, FakeHost};
use serde_json::{json, Value};

const PLAN_DENIAL: &str = "Tool execution aborted: Plan mode: modification tools are blocked; only read-only tools are allowed (Read/Glob/Grep/WebFetch/WebSearch/Task)";
const ENTER_UNCONFIRMED: &str = "Plan mode requested but no interactive confirmation available.\n\nProceeding with research phase. Use read-only tools to explore the codebase, then call ExitPlanMode with your implementation plan when ready.";
const EXIT_UNCONFIRMED: &str =
    "✅ Plan mode exit requested. No interactive confirmation available.\nProceeding with implementation.";

fn workspace(root: &Path) -> Value {
    json!({"roots": [root], "cwd": root})
}

fn call(id: &str, name: &str, input: Value) -> Value {
    json!({"toolCalls": [{"id": id, "name": name, "input": input}]})
}

fn write(id: &str, file: &str) -> Value {
    call(id, "Write", json!({"file_path": file, "content": "x"}))
}

/// The options of a session in `dir` whose model plays `turns`, with `advanced` added.
fn options(dir: &Path, turns: Value, advanced: Value) -> Value {
    json!({"model": scripted(turns), "filesystem": workspace(dir), "advanced": advanced})
}

fn outputs(records: &[ToolCallRecord]) -> Vec<(&str, &str, bool)> {
    records
        .iter()
        .map(|record| (record.name.as_str(), record.output.as_str(), record.is_error))
        .collect()
}

/// The run's result, whatever it stopped for.
fn ended(events: &[StreamEvent]) -> &agent_runtime_hooks::agent::PromptResult {
    match events.last() {
        Some(StreamEvent::Result { result, .. }) => result,
        other => panic!("expected a result, got {other:?}"),
    }
}

/// A confirmation handler (function 5) answering `answer`, keeping each request.
fn answering(answer: Value) -> FakeHost {
    FakeHost::default().returning(5, answer)
}

fn handler() -> Value {
    json!({"confirmationHandler": {"requestConfirmation": f(5)}})
}

#[tokio::test]
async fn nobody_to_ask_plan_mode_is_entered_and_left_and_writes_follow_it() {
    let dir = tempfile::tempdir().unwrap();
    let turns = json!([
        call("enter", "EnterPlanMode", json!({})),
        write("w1", "planned.txt"),
        call("read", "Glob", json!({"pattern": "*"})),
        call("exit", "ExitPlanMode", json!({"plan": "# Plan\n\n1. Write it"})),
        write("w2", "done.txt"),
        {"text": "done"},
    ]);
    let (session, _) = session(options(dir.path(), turns, json!({})), FakeHost::default());
    let events = run(&session, "plan then do").await;
    let records = &result(&events).tool_calls;
    let sent = outputs(records);
    assert_eq!(sent[0], ("EnterPlanMode", ENTER_UNCONFIRMED, false));
    assert_eq!(sent[1], ("Write", PLAN_DENIAL, true));
    assert!(!sent[2].2, "a read-only tool runs in plan mode: {}", sent[2].1);
    assert_eq!(sent[3], ("ExitPlanMode", EXIT_UNCONFIRMED, false));
    assert!(!sent[4].2, "{}", sent[4].1);
    assert!(!dir.path().join("planned.txt").exists());
    assert_eq!(std::fs::read_to_string(dir.path().join("done.txt")).unwrap(), "x");
}

#[tokio::test]
async fn plan_mode_outlives_the_run_that_entered_it_until_set_permission_mode() {
    let dir = tempfile::tempdir().unwrap();
    let turns = json!([
        call("enter", "EnterPlanMode", json!({})),
        {"text": "planning"},
        write("w1", "a.txt"),
        {"text": "refused"},
        write("w2", "b.txt"),
        {"text": "written"},
    ]);
    let (session, _) = session(options(dir.path(), turns, json!({})), FakeHost::default());
    run(&session, "enter").await;
    let second = run(&session, "write").await;
    assert_eq!(outputs(&result(&second).tool_calls), [("Write", PLAN_DENIAL, true)]);
    session.set_permission_mode(&json!("yolo")).unwrap();
    let third = run(&session, "write again").await;
    assert!(
        !result(&third).tool_calls[0].is_error,
        "{}",
        result(&third).tool_calls[0].output
    );
    assert!(dir.path().join("b.txt").exists() && !dir.path().join("a.txt").exists());
}

#[tokio::test]
async fn the_calls_of_the_turn_that_enters_plan_mode_are_decided_before_it() {
    let dir = tempfile::tempdir().unwrap();
    let turns = json!([
        {"toolCalls": [
            {"id": "enter", "name": "EnterPlanMode", "input": {}},
            {"id": "w1", "name": "Write", "input": {"file_path": "same-turn.txt", "content": "x"}},
        ]},
        write("w2", "next-turn.txt"),
        {"text": "end"},
    ]);
    let (session, _) = session(options(dir.path(), turns, json!({})), FakeHost::default());
    let events = run(&session, "go").await;
    let records = &result(&events).tool_calls;
    assert!(!records[1].is_error, "{}", records[1].output);
    assert_eq!(records[2].output, PLAN_DENIAL);
    assert!(dir.path().join("same-turn.txt").exists() && !dir.path().join("next-turn.txt").exists());
}

#[tokio::test]
async fn the_handler_is_asked_with_blades_request_and_approves_entering() {
    let dir = tempfile::tempdir().unwrap();
    let turns = json!([call("enter", "EnterPlanMode", json!({})), write("w", "a.txt"), {"text": "end"}]);
    let (session, host) = session(
        options(dir.path(), turns, handler()),
        answering(json!({"approved": true})),
    );
    let events = run(&session, "go").await;
    let records = &result(&events).tool_calls;
    assert!(records[0]
        .output
        .starts_with("✅ User approved entering Plan mode.\n\nYou are now in PLAN MODE."));
    assert_eq!(records[1].output, PLAN_DENIAL);
    let asked = host.calls_of(5);
    assert_eq!(
        asked.len(),
        1,
        "only EnterPlanMode asks; the Write is refused by plan mode"
    );
    let request = &asked[0].args.values()[0];
    assert_eq!(request["type"], "enterPlanMode");
    assert_eq!(request["toolName"], "EnterPlanMode");
    assert_eq!(request["kind"], "readonly");
    assert_eq!(request["args"], json!({}));
    assert_eq!(
        request["details"],
        "Plan mode enables systematic research before implementation"
    );
    assert!(request["message"]
        .as_str()
        .unwrap()
        .starts_with("The assistant requests to enter Plan mode for this complex task."));
}

#[tokio::test]
async fn declined_plan_mode_changes_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let turns = json!([call("enter", "EnterPlanMode", json!({})), write("w", "a.txt"), {"text": "end"}]);
    let (session, _) = session(
        options(dir.path(), turns, handler()),
        answering(json!({"approved": false})),
    );
    let events = run(&session, "go").await;
    let records = &result(&events).tool_calls;
    assert!(records[0].output.starts_with("⚠️ User declined to enter Plan mode."));
    assert!(!records[1].is_error, "{}", records[1].output);
}

#[tokio::test]
async fn an_approved_plan_goes_on_in_the_target_mode() {
    let dir = tempfile::tempdir().unwrap();
    let turns = json!([
        call("exit", "ExitPlanMode", json!({"plan": "1. Write a.txt"})),
        write("w", "a.txt"),
        {"text": "end"},
    ]);
    // A session that started in plan mode, and a handler choosing autoEdit: the Write runs
    // without asking (a Default mode would have asked the handler about it).
    let mut advanced = handler();
    advanced["permission"] = json!("plan");
    let (session, host) = session(
        options(dir.path(), turns, advanced),
        answering(json!({"approved": true, "targetMode": "autoEdit"})),
    );
    let events = run(&session, "go").await;
    let records = &result(&events).tool_calls;
    assert_eq!(
        records[0].output,
        "✅ Plan approved by user. Plan mode exited; you can proceed to code changes."
    );
    assert!(!records[1].is_error, "{}", records[1].output);
    let asked = host.calls_of(5);
    assert_eq!(asked.len(), 1);
    let request = &asked[0].args.values()[0];
    assert_eq!(
        (request["type"].as_str(), request["planContent"].as_str()),
        (Some("exitPlanMode"), Some("1. Write a.txt"))
    );
}

#[tokio::test]
async fn a_rejected_plan_ends_the_run_and_keeps_plan_mode() {
    let dir = tempfile::tempdir().unwrap();
    let (session, _) = session_with_rejection(dir.path());
    let events = run(&session, "go").await;
    let outcome = ended(&events);
    assert_eq!(outcome.stop_reason, StopReason::Interrupted);
    let rejected = "⚠️ Plan rejected by user. Awaiting user feedback.\n\nUse SQLite.\n\nThe agent has stopped and control is returned to the user. The user can now provide additional information or clarification.";
    assert_eq!(outcome.tool_calls[1].output, rejected);
    assert_eq!(outcome.result, rejected);
    // Still in plan mode for the next run.
    let next = run(&session, "write").await;
    assert_eq!(result(&next).tool_calls[0].output, PLAN_DENIAL);
}

/// A session whose handler approves EnterPlanMode and rejects ExitPlanMode with feedback.
fn session_with_rejection(
    dir: &Path,
) -> (
    std::sync::Arc<agent_runtime_hooks::agent::Session>,
    std::sync::Arc<FakeHost>,
) {
    let turns = json!([
        call("enter", "EnterPlanMode", json!({})),
        call("exit", "ExitPlanMode", json!({"plan": "1. Write a.txt"})),
        // The run stops at the rejection: the next model call is the next run's.
        write("w", "a.txt"),
        {"text": "end"},
    ]);
    let host = FakeHost::default().with(5, |args| {
        let kind = args[0]["type"].as_str().unwrap_or_default().to_string();
        Box::pin(async move {
            Ok(Some(match kind.as_str() {
                "exitPlanMode" => json!({"approved": false, "feedback": "Use SQLite."}),
                _ => json!({"approved": true}),
            }))
        })
    });
    session(options(dir, turns, handler()), host)
}

fn questions() -> Value {
    json!({"questions": [{
        "question": "Which framework?",
        "header": "Framework",
        "multiSelect": false,
        "options": [
            {"label": "React", "description": "Popular UI library"},
            {"label": "Vue", "description": "Progressive framework"},
        ],
    }]})
}

async fn ask(host: FakeHost, advanced: Value) -> (ToolCallRecord, std::sync::Arc<FakeHost>) {
    let dir = tempfile::tempdir().unwrap();
    let turns = json!([call("q", "AskUserQuestion", questions()), {"text": "end"}]);
    let (session, host) = session(options(dir.path(), turns, advanced), host);
    let events = run(&session, "ask").await;
    (result(&events).tool_calls[0].clone(), host)
}

#[tokio::test]
async fn ask_user_question_answered_cancelled_and_with_nobody() {
    let (answered, host) = ask(
        answering(json!({"approved": true, "answers": {"Framework": "React"}})),
        handler(),
    )
    .await;
    assert_eq!(
        (answered.output.as_str(), answered.is_error),
        ("User answers:\nFramework: React", false)
    );
    let request = &host.calls_of(5)[0].args.values()[0];
    assert_eq!(request["type"], "askUserQuestion");
    assert_eq!(request["message"], "Please answer the following questions:");
    assert_eq!(request["questions"], questions()["questions"]);
    let (cancelled, _) = ask(answering(json!({"approved": false})), handler()).await;
    assert_eq!(
        (cancelled.output.as_str(), cancelled.is_error),
        ("User cancelled the question prompt without providing answers.", false)
    );
    let (nobody, _) = ask(FakeHost::default(), json!({})).await;
    assert_eq!(
        (nobody.output.as_str(), nobody.is_error),
        (
            "No confirmation handler available. Cannot ask user questions in non-interactive mode.",
            true
        )
    );
    let (broken, _) = ask(FakeHost::default().throwing(5, "no terminal"), handler()).await;
    assert_eq!(
        (broken.output.as_str(), broken.is_error),
        ("Failed to ask user questions: no terminal", true)
    );
    let (nonsense, _) = ask(answering(json!({"answers": {}})), handler()).await;
    assert_eq!(
        nonsense.output,
        "Failed to ask user questions: the confirmation handler returned an object; expected { approved: boolean }"
    );
}

#[tokio::test]
async fn todo_write_keeps_the_list_for_the_session_and_reports_progress() {
    let dir = tempfile::tempdir().unwrap();
    let item = |content: &str, status: &str| json!({"content": content, "status": status, "activeForm": content});
    let turns = json!([
        call("t1", "TodoWrite", json!({"todos": [item("Test", "pending"), item("Build", "in_progress")]})),
        {"text": "listed"},
        call("t2", "TodoWrite", json!({"todos": [item("Test", "in_progress"), item("Build", "completed")]})),
        {"text": "updated"},
    ]);
    let (session, _) = session(options(dir.path(), turns, json!({})), FakeHost::default());
    let first = run(&session, "plan").await;
    let listed: Value = serde_json::from_str(&result(&first).tool_calls[0].output).unwrap();
    assert_eq!(listed["todos"][0]["content"], "Build");
    assert_eq!(
        listed["stats"],
        json!({"total": 2, "completed": 0, "inProgress": 1, "pending": 1})
    );
    let progress: Vec<&Value> = first
        .iter()
        .filter_map(|event| match event {
            StreamEvent::ToolProgress(event) if event.name == "TodoWrite" => Some(&event.progress),
            _ => None,
        })
        .collect();
    assert_eq!(
        progress,
        [
            &json!({"kind": "progress", "message": "Updating TODO list...", "data": {"total": 2}}),
            &json!({"kind": "progress", "message": "TODO list updated (0/2 completed)", "completed": 0, "total": 2}),
        ]
    );
    let second = run(&session, "go on").await;
    let updated: Value = serde_json::from_str(&result(&second).tool_calls[0].output).unwrap();
    let build = &updated["todos"][0];
    assert_eq!(
        (build["content"].as_str(), build["status"].as_str()),
        (Some("Build"), Some("completed"))
    );
    // The same item as the first run's: same id and start time.
    assert_eq!(build["id"], listed["todos"][0]["id"]);
    assert_eq!(build["startedAt"], listed["todos"][0]["startedAt"]);
}
