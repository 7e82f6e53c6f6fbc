use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tempfile::TempDir;
use tokio_util::sync::CancellationToken;

use super::foreground::ABORTED;
use super::NO_WORKING_DIRECTORY;
use crate::builtins::{Answer, Builtin, Call, State, Workspace};

struct Room {
    dir: TempDir,
    workspace: Workspace,
    state: State,
}

fn room() -> Room {
    let dir = tempfile::tempdir().unwrap();
    let workspace = Workspace {
        roots: vec![dir.path().into()],
        cwd: Some(dir.path().into()),
    };
    Room {
        dir,
        workspace,
        state: State::default(),
    }
}

impl Room {
    fn call(&self, cancel: &CancellationToken) -> Call<'_> {
        Call {
            workspace: &self.workspace,
            state: &self.state,
            cancel: cancel.clone(),
        }
    }

    async fn run(&self, tool: Builtin, input: Value) -> Answer {
        tool.run(input.as_object().unwrap(), self.call(&CancellationToken::new()))
            .await
    }

    async fn json(&self, tool: Builtin, input: Value) -> Value {
        let answer = self.run(tool, input).await;
        assert!(!answer.failed, "{tool:?} failed: {}", answer.text);
        serde_json::from_str(&answer.text).unwrap()
    }
}

/// A `sleep` duration no other process has: it marks the processes of one test.
fn marker() -> String {
    static NEXT: AtomicU64 = AtomicU64::new(0);
    format!("1000.{}{:03}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed))
}

/// Processes whose command line holds `marker` (zombies have none).
fn processes_with(marker: &str) -> usize {
    command_lines().filter(|line| line.contains(marker)).count()
}

/// Whether `sleep <marker>` itself runs (not only the bash about to start it).
fn sleeping(marker: &str) -> bool {
    let sleep = format!("sleep {marker} ");
    command_lines().any(|line| line == sleep)
}

fn command_lines() -> impl Iterator<Item = String> {
    std::fs::read_dir("/proc")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| std::fs::read(entry.path().join("cmdline")).ok())
        .map(|cmdline| String::from_utf8_lossy(&cmdline).replace('\0', " "))
}

async fn until(within: Duration, mut condition: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if condition() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    condition()
}

async fn until_running(marker: &str) -> bool {
    until(Duration::from_secs(5), || sleeping(marker)).await
}

#[tokio::test]
async fn a_failing_exit_is_no_error_and_output_is_trimmed() {
    let room = room();
    let answer = room
        .run(
            Builtin::Bash,
            json!({"command": "echo '  out  '; echo; echo '  err  ' >&2; exit 3"}),
        )
        .await;
    assert!(!answer.failed);
    assert!(answer
        .text
        .starts_with("{\n  \"stdout\": \"out\",\n  \"stderr\": \"err\",\n  \"execution_time\": "));
    let result: Value = serde_json::from_str(&answer.text).unwrap();
    assert_eq!(result["exit_code"], 3);
    assert_eq!(result["signal"], Value::Null);
    assert!(result["execution_time"].is_u64());
    assert!(result.get("truncation_info").is_none());
}

#[tokio::test]
async fn a_signal_is_named() {
    let room = room();
    let result = room.json(Builtin::Bash, json!({"command": "kill -TERM $$"})).await;
    assert_eq!(result["exit_code"], Value::Null);
    assert_eq!(result["signal"], "SIGTERM");
}

#[tokio::test]
async fn environment_and_working_folder() {
    let room = room();
    let sub = room.dir.path().join("sub dir");
    std::fs::create_dir(&sub).unwrap();
    let result = room
        .json(
            Builtin::Bash,
            json!({"command": "pwd; echo \"$GREETING $BLADE_CLI $HOME\"", "cwd": "sub dir", "env": {"GREETING": "hello"}}),
        )
        .await;
    let home = std::env::var("HOME").unwrap_or_default();
    assert_eq!(
        result["stdout"],
        format!("{}\nhello 1 {home}", sub.canonicalize().unwrap().display())
    );
    let result = room.json(Builtin::Bash, json!({"command": "pwd"})).await;
    assert_eq!(
        result["stdout"],
        room.dir.path().canonicalize().unwrap().display().to_string()
    );
}

#[tokio::test]
async fn the_working_folder_is_checked() {
    let mut room = room();
    let outside = room.run(Builtin::Bash, json!({"command": "pwd", "cwd": "/"})).await;
    assert_eq!(outside, Answer::error("Filesystem path is outside authorized roots: /"));
    room.workspace.cwd = None;
    let nowhere = room.run(Builtin::Bash, json!({"command": "pwd"})).await;
    assert_eq!(nowhere, Answer::error(NO_WORKING_DIRECTORY));
}

#[tokio::test]
async fn inputs_are_checked() {
    let room = room();
    let short = room.run(Builtin::Bash, json!({"command": "true", "timeout": 10})).await;
    assert_eq!(
        short.text,
        "Invalid input for Bash: timeout must be an integer from 1000 to 300000 (got a number)"
    );
    let env = room
        .run(Builtin::Bash, json!({"command": "true", "env": {"A": 1}}))
        .await;
    assert_eq!(
        env.text,
        "Invalid input for Bash: env must be an object of strings (got an object)"
    );
    let unspawnable = room
        .run(Builtin::Bash, json!({"command": "true", "env": {"A": "x\u{0}y"}}))
        .await;
    assert!(unspawnable.failed);
    assert!(
        unspawnable.text.starts_with("Command execution failed: "),
        "{}",
        unspawnable.text
    );
}

#[tokio::test]
async fn a_timeout_kills_the_whole_group() {
    let room = room();
    let marker = marker();
    let started = Instant::now();
    // Everything ignores SIGTERM, the subshell's sleep is a grandchild.
    let command = format!("trap '' TERM; (sleep {marker}; true) & sleep {marker} & wait");
    let answer = room
        .run(Builtin::Bash, json!({"command": command, "timeout": 1000}))
        .await;
    assert_eq!(answer, Answer::error("Command execution timed out (1000ms)"));
    let elapsed = started.elapsed();
    assert!(
        elapsed >= Duration::from_millis(1900),
        "SIGKILL came after the grace: {elapsed:?}"
    );
    assert!(elapsed < Duration::from_secs(10), "{elapsed:?}");
    assert_eq!(processes_with(&marker), 0);
}

#[tokio::test]
async fn an_abort_kills_the_group() {
    let room = room();
    let marker = marker();
    let cancel = CancellationToken::new();
    let input = json!({"command": format!("sleep {marker}; true")});
    let started = Instant::now();
    let (answer, ()) = tokio::join!(
        Builtin::Bash.run(input.as_object().unwrap(), room.call(&cancel)),
        async {
            assert!(until_running(&marker).await);
            cancel.cancel();
        }
    );
    assert_eq!(answer, Answer::error(ABORTED));
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(processes_with(&marker), 0);

    // Aborted before it starts, the command does not run.
    let answer = Builtin::Bash
        .run(json!({"command": "touch ran"}).as_object().unwrap(), room.call(&cancel))
        .await;
    assert_eq!(answer, Answer::error(ABORTED));
    assert!(!room.dir.path().join("ran").exists());
}

#[tokio::test]
async fn dropping_the_call_kills_the_group() {
    let room = room();
    let marker = marker();
    let input = json!({"command": format!("trap '' TERM; sleep {marker} & wait")});
    let cancel = CancellationToken::new();
    tokio::select! {
        _ = Builtin::Bash.run(input.as_object().unwrap(), room.call(&cancel)) => panic!("the command cannot finish"),
        running = until_running(&marker) => assert!(running),
    }
    // The sleep ignores SIGTERM: it outlives the drop until SIGKILL, a second later.
    assert!(sleeping(&marker));
    assert!(until(Duration::from_secs(3), || processes_with(&marker) == 0).await);
}

#[tokio::test]
async fn invalid_utf8_is_replaced() {
    let room = room();
    let result = room
        .json(Builtin::Bash, json!({"command": r"printf 'a\377b'; printf '\300' >&2"}))
        .await;
    assert_eq!(result["stdout"], "a\u{FFFD}b");
    assert_eq!(result["stderr"], "\u{FFFD}");
}

#[tokio::test]
async fn long_outputs_are_cut_by_tier() {
    let room = room();
    let result = room.json(Builtin::Bash, json!({"command": "seq 1 1000"})).await;
    let stdout = result["stdout"].as_str().unwrap();
    assert!(stdout.starts_with("1\n2\n3\n"));
    assert!(
        stdout.contains("\n50\n\n... (900 lines truncated, showing first 50 and last 50 of 1000 total) ...\n\n951\n")
    );
    assert!(stdout.ends_with("\n1000"));
    assert_eq!(
        result["truncation_info"],
        format!(
            "Output truncated: stdout: 1000 lines → 103 lines ({} of 3892 chars kept)",
            stdout.chars().count()
        )
    );

    // Three megabytes on one line: the characters are cut, from output kept only in part.
    let result = room
        .json(
            Builtin::Bash,
            json!({"command": "head -c 3000000 /dev/zero | tr '\\0' x; echo >&2 fine"}),
        )
        .await;
    let stdout = result["stdout"].as_str().unwrap();
    let marker = "\n\n... (content truncated to 15000 chars) ...\n\n";
    assert_eq!(stdout, format!("{}{marker}{}", "x".repeat(7450), "x".repeat(7450)));
    assert_eq!(result["stderr"], "fine");
    assert_eq!(
        result["truncation_info"],
        format!(
            "Output truncated: stdout: 1 lines → 5 lines ({} of 3000000 chars kept)",
            stdout.chars().count()
        )
    );
}

fn shell_id(started: &Value) -> String {
    started["shell_id"].as_str().unwrap().to_string()
}

#[tokio::test]
async fn background_output_is_read_in_pieces() {
    let room = room();
    let started = room
        .json(
            Builtin::Bash,
            json!({"command": "echo one; sleep 2; echo two >&2; echo three", "run_in_background": true}),
        )
        .await;
    assert_eq!(started["shell_id"], "bash_1");
    assert_eq!(started["bash_id"], "bash_1");
    assert_eq!(started["background"], true);
    assert!(started["pid"].is_u64());
    assert!(started["message"]
        .as_str()
        .unwrap()
        .contains("TaskOutput (task_id \"bash_1\")"));

    let mut first = String::new();
    let mut status = Value::Null;
    assert!(
        until(Duration::from_secs(5), || {
            let output = room.state.shells.find("bash_1").unwrap().take_output();
            first.push_str(output["stdout"].as_str().unwrap());
            status = output["status"].clone();
            !first.is_empty()
        })
        .await
    );
    assert_eq!(first, "one\n");
    assert_eq!(status, "running");
    let running = room
        .json(Builtin::TaskOutput, json!({"task_id": "bash_1", "block": false}))
        .await;
    assert_eq!(running["status"], "running");
    assert_eq!(running["stdout"], "");
    assert!(running.get("exit_code").is_none());

    let done = room
        .json(Builtin::TaskOutput, json!({"task_id": "bash_1", "timeout": 10_000}))
        .await;
    assert_eq!(done["status"], "completed");
    assert_eq!(done["exit_code"], 0);
    assert_eq!(done["signal"], Value::Null);
    assert_eq!(done["stdout"], "three\n");
    assert_eq!(done["stderr"], "two\n");
    assert_eq!(done["command"], "echo one; sleep 2; echo two >&2; echo three");
    assert!(done["finished_at"].as_str().unwrap().ends_with('Z'));
    let again = room.json(Builtin::TaskOutput, json!({"task_id": "bash_1"})).await;
    assert_eq!(
        (again["status"].as_str(), again["stdout"].as_str()),
        (Some("completed"), Some(""))
    );
}

#[tokio::test]
async fn a_background_shell_is_killed_with_its_group() {
    let room = room();
    let marker = marker();
    let command = format!("trap '' TERM; sleep {marker} & wait");
    let id = shell_id(
        &room
            .json(Builtin::Bash, json!({"command": command, "run_in_background": true}))
            .await,
    );
    assert!(until_running(&marker).await);

    let started = Instant::now();
    let waited = room
        .json(Builtin::TaskOutput, json!({"task_id": id, "timeout": 300}))
        .await;
    assert_eq!(waited["status"], "running");
    assert!(started.elapsed() < Duration::from_secs(3));

    let killed = room.json(Builtin::KillShell, json!({"shell_id": id})).await;
    assert_eq!(killed["status"], "killed");
    assert_eq!(killed["already_exited"], false);
    assert_eq!(killed["signal"], "SIGKILL");
    assert_eq!(killed["exit_code"], Value::Null);
    assert_eq!(killed["message"], format!("Shell {id} was terminated"));
    assert_eq!(processes_with(&marker), 0);

    let read = room.json(Builtin::TaskOutput, json!({"task_id": id})).await;
    assert_eq!(read["status"], "killed");
    let again = room.json(Builtin::KillShell, json!({"shell_id": id})).await;
    assert_eq!(again["already_exited"], true);
    assert_eq!(again["message"], format!("Shell {id} had already exited"));
}

#[tokio::test]
async fn unknown_shells_are_named() {
    let room = room();
    let kill = room.run(Builtin::KillShell, json!({"shell_id": "bash_9"})).await;
    assert_eq!(kill, Answer::error("Shell not found: bash_9"));
    let read = room.run(Builtin::TaskOutput, json!({"task_id": "bash_9"})).await;
    assert_eq!(read, Answer::error("Shell not found: bash_9"));
    let other = room.run(Builtin::TaskOutput, json!({"task_id": "task-1"})).await;
    assert_eq!(other, Answer::error("Unknown task ID: task-1."));
}

#[tokio::test]
async fn closing_the_session_kills_every_shell() {
    let room = room();
    let (first, second) = (marker(), marker());
    for command in [format!("trap '' TERM; sleep {first} & wait"), format!("sleep {second}")] {
        room.json(Builtin::Bash, json!({"command": command, "run_in_background": true}))
            .await;
    }
    assert!(until_running(&first).await && until_running(&second).await);
    room.state.close().await;
    assert_eq!(processes_with(&first) + processes_with(&second), 0);
    let read = room.json(Builtin::TaskOutput, json!({"task_id": "bash_2"})).await;
    assert_eq!(read["status"], "killed");
    assert_eq!(read["signal"], "SIGTERM");
}

#[tokio::test]
async fn dropping_the_shells_kills_what_is_left() {
    let room = room();
    let marker = marker();
    let command = format!("trap '' TERM; sleep {marker} & wait");
    room.json(Builtin::Bash, json!({"command": command, "run_in_background": true}))
        .await;
    assert!(until_running(&marker).await);
    let Room { dir: _dir, state, .. } = room;
    drop(state);
    assert!(until(Duration::from_millis(500), || processes_with(&marker) == 0).await);
}

#[tokio::test]
async fn at_most_sixteen_background_shells() {
    let room = room();
    let marker = marker();
    let start = json!({"command": format!("sleep {marker}"), "run_in_background": true});
    for _ in 0..16 {
        room.json(Builtin::Bash, start.clone()).await;
    }
    let refused = room.run(Builtin::Bash, start.clone()).await;
    assert_eq!(
        refused,
        Answer::error(
            "Too many background shells: at most 16 may run or hold output not read yet. Read finished ones with \
             TaskOutput or stop one with KillShell."
        )
    );
    // Killed but not read, a shell still holds its output; once read, its slot is free.
    room.run(Builtin::KillShell, json!({"shell_id": "bash_1"})).await;
    assert!(room.run(Builtin::Bash, start.clone()).await.failed);
    room.json(Builtin::TaskOutput, json!({"task_id": "bash_1"})).await;
    assert_eq!(shell_id(&room.json(Builtin::Bash, start).await), "bash_17");
    room.state.close().await;
    assert_eq!(processes_with(&marker), 0);
}

#[test]
fn schemas_require_what_has_no_default() {
    for (tool, required, fields) in [
        (
            Builtin::Bash,
            vec!["command"],
            vec!["command", "timeout", "cwd", "env", "run_in_background"],
        ),
        (Builtin::KillShell, vec!["shell_id"], vec!["shell_id"]),
        (
            Builtin::TaskOutput,
            vec!["task_id"],
            vec!["task_id", "block", "timeout"],
        ),
    ] {
        let schema = tool.schema();
        assert_eq!(schema["required"], json!(required));
        assert_eq!(schema["additionalProperties"], false);
        let properties: Vec<&String> = schema["properties"].as_object().unwrap().keys().collect();
        assert_eq!(properties, fields);
        assert!(!tool.description().is_empty());
    }
    assert_eq!(Builtin::Bash.schema()["properties"]["timeout"]["maximum"], 300_000);
    assert_eq!(
        Builtin::TaskOutput.schema()["properties"]["timeout"]["maximum"],
        600_000
    );
}
