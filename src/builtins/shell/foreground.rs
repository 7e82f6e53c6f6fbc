//! A command run to its end: its output captured, its group killed on timeout, on abort and
//! when the future running it is dropped.

use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{json, Value};
use tokio::process::Command;
use tokio_util::sync::CancellationToken;

use super::capture::capture;
use super::group::{signal_name, Group};
use super::truncate::for_model;
use crate::builtins::Answer;

pub(super) const ABORTED: &str = "Command execution aborted by user";

/// `bash -c <command>` in `dir`, leading a process group of its own.
pub(super) fn command(command: &str, dir: &Path, env: &[(String, String)]) -> Command {
    let mut bash = Command::new("bash");
    bash.arg("-c")
        .arg(command)
        .current_dir(dir)
        .envs(env.iter().map(|(key, value)| (key, value)))
        .env("BLADE_CLI", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    bash
}

pub(super) fn spawn_failed(error: &std::io::Error) -> Answer {
    Answer::error(format!("Command execution failed: {error}"))
}

enum Outcome<T> {
    Finished(T),
    TimedOut,
    Aborted,
}

pub(super) async fn run(
    text: &str,
    dir: &Path,
    env: &[(String, String)],
    timeout_ms: u64,
    cancel: &CancellationToken,
) -> Answer {
    if cancel.is_cancelled() {
        return Answer::error(ABORTED);
    }
    let started = Instant::now();
    let mut child = match command(text, dir, env).spawn() {
        Ok(child) => child,
        Err(error) => return spawn_failed(&error),
    };
    let Some(pid) = child.id() else {
        return Answer::error("Command execution failed: the process has no id");
    };
    let mut group = Group::lead(pid);
    let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
    let outcome = {
        let finished = async { tokio::join!(capture(stdout), capture(stderr), child.wait()) };
        tokio::select! {
            done = finished => Outcome::Finished(done),
            _ = tokio::time::sleep(Duration::from_millis(timeout_ms)) => Outcome::TimedOut,
            _ = cancel.cancelled() => Outcome::Aborted,
        }
    };
    let (stdout, stderr, status) = match outcome {
        Outcome::Finished(done) => done,
        stopped => {
            let _ = group
                .terminate(|| {
                    let _ = child.try_wait();
                })
                .await;
            let _ = child.wait().await;
            return match stopped {
                Outcome::TimedOut => Answer::error(format!("Command execution timed out ({timeout_ms}ms)")),
                _ => Answer::error(ABORTED),
            };
        }
    };
    group.release();
    let status = match status {
        Ok(status) => status,
        Err(error) => return spawn_failed(&error),
    };
    let (stdout, stderr, truncation_info) = for_model(&stdout.finish(), &stderr.finish(), text);
    let mut result = json!({
        "stdout": stdout,
        "stderr": stderr,
        "execution_time": started.elapsed().as_millis() as u64,
        "exit_code": status.code(),
        "signal": status.signal().map(signal_name),
    });
    if let (Some(info), Value::Object(fields)) = (truncation_info, &mut result) {
        fields.insert("truncation_info".into(), Value::String(info));
    }
    Answer::json(&result)
}
