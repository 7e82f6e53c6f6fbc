//! The built-in tools inside the agent, without Node: which are offered and when, the seed's
//! three hook examples on them (a Bash guard that aborts, a Write rewritten through
//! `modifiedInput`, a Read redacted through `modifiedOutput`), plan mode, permission kinds,
//! and the process group of a command killed at `toolTimeoutMs`, an abort and `close()`.

mod common;

use std::path::Path;
use std::time::{Duration, Instant};

use agent_runtime_hooks::agent::config::Shape;
use agent_runtime_hooks::agent::{AgentConfig, StreamEvent};
use agent_runtime_hooks::host::ScopeId;
use common::{f, one_call, result, run, scripted, session, tool, FakeHost};
use serde_json::{json, Value};

fn workspace(root: &Path) -> Value {
    json!({"roots": [root], "cwd": root})
}

fn offered(options: Value, shape: Shape) -> Vec<String> {
    let config = AgentConfig::read(&options, shape, &Default::default()).expect("valid options");
    config.tools.iter().map(|tool| tool.schema.name.clone()).collect()
}

const ALL: [&str; 14] = [
    "Read",
    "Write",
    "Edit",
    "Glob",
    "Grep",
    "Bash",
    "KillShell",
    "TaskOutput",
    "WebFetch",
    "NotebookEdit",
    "TodoWrite",
    "EnterPlanMode",
    "ExitPlanMode",
    "AskUserQuestion",
];

#[test]
fn built_ins_are_offered_as_blade_offers_them() {
    let model = json!({"kind": "scripted", "turns": []});
    // createAgent: only with a local profile (filesystem, profile: 'local') or builtinTools.
    assert!(offered(json!({"model": model}), Shape::Agent).is_empty());
    assert_eq!(
        offered(json!({"model": model, "filesystem": {"roots": ["/tmp"]}}), Shape::Agent),
        ALL
    );
    assert_eq!(offered(json!({"model": model, "profile": "local"}), Shape::Agent), ALL);
    assert_eq!(
        offered(
            json!({"model": model, "advanced": {"builtinTools": true}}),
            Shape::Agent
        ),
        ALL
    );
    let off = json!({"model": model, "filesystem": {"roots": ["/tmp"]}, "advanced": {"builtinTools": false}});
    assert!(offered(off, Shape::Agent).is_empty());
    // A session: always, unless builtinTools is false; narrowed by allowedTools / disallowedTools.
    let session = |extra: Value| {
        let mut options =
            json!({"model": model, "provider": {"type": "openai-compatible", "baseUrl": "http://127.0.0.1:9/v1"}});
        options
            .as_object_mut()
            .unwrap()
            .extend(extra.as_object().unwrap().clone());
        offered(options, Shape::Session)
    };
    assert_eq!(session(json!({})), ALL);
    assert!(session(json!({"builtinTools": false})).is_empty());
    assert_eq!(session(json!({"allowedTools": ["Read", "Glob"]})), ["Read", "Glob"]);
    assert!(session(json!({"allowedTools": []})).is_empty());
    assert!(!session(json!({"disallowedTools": ["Bash"]})).contains(&"Bash".to_string()));
    // A tool of the user's own with a built-in's name replaces it: offered once, first.
    let replaced = session(json!({"tools": [tool("Bash", 0)]}));
    assert_eq!(replaced.iter().filter(|name| *name == "Bash").count(), 1);
    assert_eq!(replaced[0], "Bash");
}

#[test]
fn a_builtin_marker_names_a_built_in_and_nothing_else() {
    let model = json!({"kind": "scripted", "turns": []});
    let marked = json!({"model": model, "tools": [{"name": "Grep", "builtin": "Grep"}]});
    assert_eq!(offered(marked, Shape::Agent), ["Grep"]);
    let wrong = json!({"model": model, "tools": [{"name": "Grep", "builtin": "Find"}]});
    let error = AgentConfig::read(&wrong, Shape::Agent, &Default::default()).unwrap_err();
    assert!(
        error
            .message
            .starts_with("tools[0].builtin must be the name of a built-in tool"),
        "{}",
        error.message
    );
    let bad = json!({"model": model, "advanced": {"builtinTools": "yes"}});
    let error = AgentConfig::read(&bad, Shape::Agent, &Default::default()).unwrap_err();
    assert_eq!(error.message, "advanced.builtinTools must be a boolean (got \"yes\")");
}

#[test]
fn schemas_and_kinds_are_blades() {
    let model = json!({"kind": "scripted", "turns": []});
    let config = AgentConfig::read(
        &json!({"model": model, "profile": "local"}),
        Shape::Agent,
        &Default::default(),
    )
    .unwrap();
    let by_name = |name: &str| config.tools.iter().find(|tool| tool.schema.name == name).unwrap();
    for (name, kind, required) in [
        ("Read", "readonly", vec!["file_path"]),
        ("Write", "write", vec!["file_path", "content"]),
        ("Edit", "write", vec!["file_path", "old_string", "new_string"]),
        ("Glob", "readonly", vec!["pattern"]),
        ("Grep", "readonly", vec!["pattern"]),
        ("Bash", "execute", vec!["command"]),
    ] {
        let tool = by_name(name);
        assert_eq!(tool.kind.as_str(), kind, "{name}");
        assert_eq!(tool.schema.parameters["type"], "object", "{name}");
        let mut sent: Vec<String> = tool.schema.parameters["required"]
            .as_array()
            .unwrap_or_else(|| panic!("{name} has required fields"))
            .iter()
            .map(|field| field.as_str().unwrap().to_string())
            .collect();
        sent.sort();
        let mut required: Vec<String> = required.into_iter().map(String::from).collect();
        required.sort();
        assert_eq!(sent, required, "{name}");
        assert!(
            tool.schema.description.as_deref().is_some_and(|text| !text.is_empty()),
            "{name}"
        );
    }
}

/// The model text of the run's only tool call.
fn output_of(events: &[StreamEvent]) -> (String, bool) {
    let record = &result(events).tool_calls[0];
    (record.output.clone(), record.is_error)
}

/// The seed's Bash guard: `abort` with a reason; the command does not run and no PostToolUse
/// fires for it.
#[tokio::test]
async fn a_pre_tool_use_abort_keeps_the_command_from_running() {
    let dir = tempfile::tempdir().unwrap();
    let marker = dir.path().join("ran");
    let command = format!("rm -rf /tmp/nothing-here; touch {}", marker.display());
    let host = FakeHost::default()
        .with(1, |args| {
            let command = args[0]["toolInput"]["command"].as_str().unwrap_or_default().to_string();
            Box::pin(async move {
                Ok(Some(if command.contains("rm -rf") {
                    json!({"action": "abort", "reason": "Dangerous command blocked"})
                } else {
                    json!({"action": "continue"})
                }))
            })
        })
        .returning(2, json!({"action": "continue"}));
    let (session, host) = session(
        json!({"model": one_call("Bash", json!({"command": command})), "filesystem": workspace(dir.path()),
               "advanced": {"hooks": {"PreToolUse": [{"id": "guard", "matcher": "Bash", "handler": f(1)}], "PostToolUse": [f(2)]}}}),
        host,
    );
    let events = run(&session, "clean up").await;
    assert_eq!(
        output_of(&events),
        ("Tool execution aborted: Dangerous command blocked".into(), true)
    );
    assert!(!marker.exists(), "the command ran");
    assert!(host.calls_of(2).is_empty(), "PostToolUse fired for an aborted call");
}

/// The seed's Write rewrite: `modifiedInput` is what the tool runs with.
#[tokio::test]
async fn modified_input_is_what_write_writes() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("note.txt");
    let host = FakeHost::default().with(1, |args| {
        let input = args[0]["toolInput"].clone();
        Box::pin(async move {
            let content = format!("// Generated by AI\n{}", input["content"].as_str().unwrap_or_default());
            Ok(Some(
                json!({"action": "continue", "modifiedInput": {"file_path": input["file_path"], "content": content}}),
            ))
        })
    });
    let (session, _) = session(
        json!({"model": one_call("Write", json!({"file_path": file, "content": "hello\n"})), "filesystem": workspace(dir.path()),
               "advanced": {"hooks": {"PreToolUse": [{"id": "prefix", "matcher": "Write", "handler": f(1)}]}}}),
        host,
    );
    let events = run(&session, "write it").await;
    let (output, failed) = output_of(&events);
    assert!(!failed, "{output}");
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "// Generated by AI\nhello\n");
    let answer: Value = serde_json::from_str(&output).unwrap();
    assert_eq!(answer["size"], 25);
    // Pretty-printed with two spaces, as Blade sends JSON results.
    assert!(output.starts_with("{\n  \""), "{output}");
}

/// The seed's Read redaction: `modifiedOutput` is what the model receives.
#[tokio::test]
async fn modified_output_is_what_the_model_reads() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(".env"), "SECRET_KEY=abc123\nMODE=dev\n").unwrap();
    let host = FakeHost::default().with(1, |args| {
        let output = args[0]["toolOutput"].as_str().unwrap_or_default().to_string();
        Box::pin(async move {
            let redacted = regex::Regex::new(r"SECRET_KEY=\S+")
                .unwrap()
                .replace_all(&output, "SECRET_KEY=***")
                .into_owned();
            Ok(Some(json!({"action": "continue", "modifiedOutput": redacted})))
        })
    });
    let (session, _) = session(
        json!({"model": one_call("Read", json!({"file_path": ".env"})), "filesystem": workspace(dir.path()),
               "advanced": {"hooks": {"PostToolUse": [{"id": "redact", "matcher": "Read", "handler": f(1)}]}}}),
        host,
    );
    let events = run(&session, "read .env").await;
    assert_eq!(output_of(&events), ("SECRET_KEY=***\nMODE=dev\n".into(), false));
}

#[tokio::test]
async fn plan_mode_runs_reads_and_blocks_every_change() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "alpha\n").unwrap();
    let calls = json!([
        {"id": "r", "name": "Read", "input": {"file_path": "a.txt"}},
        {"id": "g", "name": "Grep", "input": {"pattern": "alpha"}},
        {"id": "w", "name": "Write", "input": {"file_path": "b.txt", "content": "x"}},
        {"id": "e", "name": "Edit", "input": {"file_path": "a.txt", "old_string": "alpha", "new_string": "beta"}},
        {"id": "b", "name": "Bash", "input": {"command": "touch c.txt"}},
    ]);
    let (session, _) = session(
        json!({"model": scripted(json!([{"toolCalls": calls}, {"text": "planned"}])), "filesystem": workspace(dir.path()),
               "advanced": {"permission": "plan"}}),
        FakeHost::default(),
    );
    let events = run(&session, "plan").await;
    let records = &result(&events).tool_calls;
    assert_eq!(records[0].output, "alpha\n");
    assert!(!records[1].is_error, "{}", records[1].output);
    const PLAN: &str = "Tool execution aborted: Plan mode: modification tools are blocked; only read-only tools are allowed (Read/Glob/Grep/WebFetch/WebSearch/Task)";
    for record in &records[2..] {
        assert_eq!(
            (record.output.as_str(), record.is_error),
            (PLAN, true),
            "{}",
            record.name
        );
    }
    assert!(!dir.path().join("b.txt").exists() && !dir.path().join("c.txt").exists());
    assert_eq!(std::fs::read_to_string(dir.path().join("a.txt")).unwrap(), "alpha\n");
}

#[tokio::test]
async fn without_roots_the_file_tools_say_so() {
    let (session, _) = session(
        json!({"model": one_call("Read", json!({"file_path": "/etc/hostname"})), "advanced": {"builtinTools": true}}),
        FakeHost::default(),
    );
    let events = run(&session, "read").await;
    assert_eq!(
        output_of(&events),
        ("No filesystem access in the current runtime context.".into(), true)
    );
}

/// Processes whose command line holds `marker`.
fn alive(marker: &str) -> Vec<String> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        if !entry.file_name().to_string_lossy().bytes().all(|b| b.is_ascii_digit()) {
            continue;
        }
        if let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) {
            let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
            if cmdline.contains(marker) {
                found.push(cmdline);
            }
        }
    }
    found
}

async fn gone(marker: &str) -> bool {
    let until = Instant::now() + Duration::from_secs(5);
    while Instant::now() < until {
        if alive(marker).is_empty() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    false
}

/// A command outliving `toolTimeoutMs`, with a child that ignores SIGTERM: the call fails with
/// the deadline's text and nothing of the group survives.
#[tokio::test]
async fn tool_timeout_kills_the_whole_process_group() {
    let dir = tempfile::tempdir().unwrap();
    let marker = format!("arh-timeout-{}", std::process::id());
    let command = format!("bash -c \"trap '' TERM; sleep 60 # {marker}\" & sleep 60 # {marker}");
    let (session, _) = session(
        json!({"model": one_call("Bash", json!({"command": command})), "filesystem": workspace(dir.path()),
               "advanced": {"toolTimeoutMs": 700}}),
        FakeHost::default(),
    );
    let started = Instant::now();
    let events = run(&session, "run").await;
    assert_eq!(
        output_of(&events),
        ("Tool execution failed: Tool execution timeout after 700ms".into(), true)
    );
    assert!(started.elapsed() < Duration::from_secs(6), "{:?}", started.elapsed());
    assert!(gone(&marker).await, "still running: {:?}", alive(&marker));
}

#[tokio::test]
async fn an_abort_mid_command_kills_it() {
    let dir = tempfile::tempdir().unwrap();
    let marker = format!("arh-abort-{}", std::process::id());
    let (session, _) = session(
        json!({"model": one_call("Bash", json!({"command": format!("sleep 60; : {marker}")})), "filesystem": workspace(dir.path())}),
        FakeHost::default(),
    );
    let (handle, drive) = session
        .send(&json!("run"), agent_runtime_hooks::agent::SendOptions::default())
        .unwrap();
    tokio::spawn(drive);
    let until = Instant::now() + Duration::from_secs(5);
    while alive(&marker).is_empty() && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(!alive(&marker).is_empty(), "the command never started");
    session.abort("stop".into());
    while handle.events.recv().await.is_some() {}
    assert!(gone(&marker).await, "still running: {:?}", alive(&marker));
}

#[tokio::test]
async fn close_kills_background_shells() {
    let dir = tempfile::tempdir().unwrap();
    let marker = format!("arh-background-{}", std::process::id());
    let (session, _) = session(
        json!({"model": one_call("Bash", json!({"command": format!("sleep 60; : {marker}"), "run_in_background": true})),
               "filesystem": workspace(dir.path())}),
        FakeHost::default(),
    );
    let events = run(&session, "start it").await;
    let (output, failed) = output_of(&events);
    assert!(!failed, "{output}");
    // It answered at once; the command may still be starting.
    let until = Instant::now() + Duration::from_secs(5);
    while alive(&marker).is_empty() && Instant::now() < until {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(!alive(&marker).is_empty(), "the background command is not running");
    session.close(ScopeId::NONE, Default::default()).await.unwrap();
    assert!(gone(&marker).await, "still running after close: {:?}", alive(&marker));
}
