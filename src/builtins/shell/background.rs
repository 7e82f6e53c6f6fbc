//! The session's background shells: started by Bash with `run_in_background`, read with
//! TaskOutput, stopped with KillShell, all killed when the session closes.

use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, SystemTime};

use serde_json::{json, Map, Value};
use tokio::process::Child;
use tokio::sync::watch;

use super::capture::{pump, Recent};
use super::foreground::command;
use super::group::{self, signal_name, Group, GRACE};
use crate::builtins::iso_time;

/// Shells that run or hold output not read yet, at most, per session.
pub(super) const MAX_SHELLS: usize = 16;
/// What each stream keeps between two TaskOutput calls: its most recent bytes.
const KEPT_BYTES: usize = 1024 * 1024;

#[derive(Default)]
pub(crate) struct Shells {
    table: Mutex<Table>,
}

#[derive(Default)]
struct Table {
    started: u64,
    shells: Vec<Arc<Shell>>,
}

pub(super) struct Shell {
    pub id: String,
    command: String,
    pid: u32,
    started_at: SystemTime,
    progress: Mutex<Progress>,
    /// Becomes true once the shell exited and its pipes closed.
    finished: watch::Sender<bool>,
}

struct Progress {
    stdout: Recent,
    stderr: Recent,
    kill_requested: bool,
    end: Option<End>,
    /// TaskOutput has answered the final status and everything before it.
    reported: bool,
}

struct End {
    exit_code: Option<i32>,
    signal: Option<String>,
    at: SystemTime,
    killed: bool,
}

/// Why a shell could not be started.
pub(super) enum Refused {
    Full,
    Spawn(std::io::Error),
}

/// What KillShell did.
pub(super) struct Killed {
    pub already_exited: bool,
    pub report: Map<String, Value>,
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Shells {
    /// Starts `text` as a shell of its own, and the task that keeps its output.
    pub(super) fn start(&self, text: &str, dir: &Path, env: &[(String, String)]) -> Result<Arc<Shell>, Refused> {
        let mut table = lock(&self.table);
        let holding = table.shells.iter().filter(|shell| shell.holds_a_slot()).count();
        if holding >= MAX_SHELLS {
            return Err(Refused::Full);
        }
        let mut child = command(text, dir, env).spawn().map_err(Refused::Spawn)?;
        let Some(pid) = child.id() else {
            return Err(Refused::Spawn(std::io::Error::other("the process has no id")));
        };
        table.started += 1;
        let shell = Arc::new(Shell {
            id: format!("bash_{}", table.started),
            command: text.to_string(),
            pid,
            started_at: SystemTime::now(),
            progress: Mutex::new(Progress {
                stdout: Recent::new(KEPT_BYTES),
                stderr: Recent::new(KEPT_BYTES),
                kill_requested: false,
                end: None,
                reported: false,
            }),
            finished: watch::channel(false).0,
        });
        let (stdout, stderr) = (child.stdout.take(), child.stderr.take());
        let watched = shell.clone();
        tokio::spawn(async move { watched.keep(child, stdout, stderr).await });
        table.shells.push(shell.clone());
        Ok(shell)
    }

    pub(super) fn find(&self, id: &str) -> Option<Arc<Shell>> {
        lock(&self.table).shells.iter().find(|shell| shell.id == id).cloned()
    }

    /// Kills every background shell's process group.
    pub async fn kill_all(&self) {
        let shells: Vec<Arc<Shell>> = lock(&self.table).shells.clone();
        futures::future::join_all(shells.iter().map(|shell| shell.kill())).await;
    }
}

impl Drop for Shells {
    /// The session is gone without closing: no await is possible, so SIGKILL at once.
    fn drop(&mut self) {
        let table = self.table.get_mut().unwrap_or_else(|poisoned| poisoned.into_inner());
        for shell in &table.shells {
            if shell.running() {
                let _ = group::signal(shell.pid, libc::SIGKILL);
            }
        }
    }
}

impl Shell {
    async fn keep(
        self: Arc<Shell>,
        mut child: Child,
        stdout: Option<tokio::process::ChildStdout>,
        stderr: Option<tokio::process::ChildStderr>,
    ) {
        // Killed with the task should the runtime drop it.
        let mut group = Group::lead(self.pid);
        let (_, _, status) = tokio::join!(
            pump(stdout, |chunk| lock(&self.progress).stdout.push(chunk)),
            pump(stderr, |chunk| lock(&self.progress).stderr.push(chunk)),
            child.wait()
        );
        group.release();
        {
            let mut progress = lock(&self.progress);
            progress.end = Some(End {
                exit_code: status.as_ref().ok().and_then(|status| status.code()),
                signal: status.as_ref().ok().and_then(|status| status.signal()).map(signal_name),
                at: SystemTime::now(),
                killed: progress.kill_requested,
            });
        }
        self.finished.send_replace(true);
    }

    fn running(&self) -> bool {
        lock(&self.progress).end.is_none()
    }

    fn holds_a_slot(&self) -> bool {
        let progress = lock(&self.progress);
        progress.end.is_none() || !progress.reported
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Waits until the shell finishes, at most `timeout`.
    pub async fn wait(&self, timeout: Duration) {
        let mut finished = self.finished.subscribe();
        let _ = tokio::time::timeout(timeout, finished.wait_for(|finished| *finished)).await;
    }

    /// The output since the last call, with the status: TaskOutput's answer.
    pub fn take_output(&self) -> Value {
        let mut progress = lock(&self.progress);
        let more_to_come = progress.end.is_none();
        let (stdout, stdout_dropped) = progress.stdout.take(more_to_come);
        let (stderr, stderr_dropped) = progress.stderr.take(more_to_come);
        if !more_to_come {
            progress.reported = true;
        }
        let mut answer = Map::new();
        answer.insert("task_id".into(), json!(self.id));
        answer.insert("type".into(), json!("shell"));
        answer.insert("status".into(), json!(status(&progress)));
        answer.insert("command".into(), json!(self.command));
        answer.insert("pid".into(), json!(self.pid));
        if let Some(end) = &progress.end {
            answer.insert("exit_code".into(), json!(end.exit_code));
            answer.insert("signal".into(), json!(end.signal));
        }
        answer.insert("started_at".into(), json!(iso_time(self.started_at)));
        if let Some(end) = &progress.end {
            answer.insert("finished_at".into(), json!(iso_time(end.at)));
        }
        answer.insert("stdout".into(), json!(stdout));
        answer.insert("stderr".into(), json!(stderr));
        let dropped: Vec<String> = [("stdout", stdout_dropped), ("stderr", stderr_dropped)]
            .into_iter()
            .filter(|(_, bytes)| *bytes > 0)
            .map(|(name, bytes)| format!("{name}: {bytes} bytes"))
            .collect();
        if !dropped.is_empty() {
            answer.insert(
                "truncation_info".into(),
                json!(format!(
                    "Earlier output was dropped ({}); each stream keeps its last {KEPT_BYTES} bytes between two TaskOutput calls",
                    dropped.join(", ")
                )),
            );
        }
        Value::Object(answer)
    }

    /// Kills the shell's group (SIGTERM, SIGKILL after a grace) and waits for its end.
    pub async fn kill(&self) -> std::io::Result<Killed> {
        let already_exited = {
            let mut progress = lock(&self.progress);
            if progress.end.is_none() {
                progress.kill_requested = true;
            }
            progress.end.is_some()
        };
        if !already_exited {
            if let Err(error) = group::terminate(self.pid, || {}).await {
                lock(&self.progress).kill_requested = false;
                return Err(error);
            }
            self.wait(GRACE).await;
        }
        let progress = lock(&self.progress);
        let end = progress.end.as_ref();
        let mut report = Map::new();
        report.insert("shell_id".into(), json!(self.id));
        report.insert(
            "status".into(),
            json!(if already_exited { status(&progress) } else { "killed" }),
        );
        report.insert("already_exited".into(), json!(already_exited));
        report.insert("pid".into(), json!(self.pid));
        report.insert("exit_code".into(), json!(end.and_then(|end| end.exit_code)));
        report.insert("signal".into(), json!(end.and_then(|end| end.signal.clone())));
        Ok(Killed { already_exited, report })
    }
}

fn status(progress: &Progress) -> &'static str {
    match &progress.end {
        None => "running",
        Some(end) if end.killed => "killed",
        Some(_) => "completed",
    }
}
