//! Starts a command hook's process in a process group of its own, writes the event to its
//! stdin, reads what it prints (each stream capped) and waits for it, up to its timeout. At the
//! timeout, or when the wait is given up (the run was cancelled), the whole group is killed:
//! a script's children do not outlive it.

use std::fmt;
use std::process::Stdio;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::process::Command;

use super::answer::{Exit, Finished};
use super::config::{CommandConfig, Program};

/// What one stream keeps: as much as a webhook's answer may hold.
pub const MAX_OUTPUT_BYTES: usize = crate::webhook::decision::MAX_RESPONSE_BYTES;

/// Why a process gave no answer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RunError {
    CouldNotStart(String),
    TimedOut {
        timeout_ms: u64,
    },
    /// stdout held more than [`MAX_OUTPUT_BYTES`]; the process was killed.
    TooMuchOutput,
}

impl RunError {
    /// A word for spans and stream events.
    pub fn outcome(&self) -> &'static str {
        match self {
            RunError::TimedOut { .. } => "timeout",
            RunError::CouldNotStart(_) | RunError::TooMuchOutput => "error",
        }
    }
}

impl fmt::Display for RunError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RunError::CouldNotStart(why) => write!(f, "could not start ({why})"),
            RunError::TimedOut { timeout_ms } => {
                write!(f, "timed out after {timeout_ms}ms (its process group was killed)")
            }
            RunError::TooMuchOutput => write!(f, "wrote more than {MAX_OUTPUT_BYTES} bytes to stdout"),
        }
    }
}

/// Runs `config` with `input` on stdin; `env` is set before the hook's own `env`.
pub async fn run(config: &CommandConfig, input: &[u8], env: &[(String, String)]) -> Result<Finished, RunError> {
    let mut command = match &config.program {
        Program::Shell(line) => {
            let mut command = Command::new("bash");
            command.arg("-c").arg(line);
            command
        }
        Program::Exec { program, args } => {
            let mut command = Command::new(program);
            command.args(args);
            command
        }
    };
    command
        .envs(env.iter().map(|(name, value)| (name, value)))
        .envs(config.env.iter().map(|(name, value)| (name, value)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    // A group of its own, so that the whole of it can be killed (Windows: the process only).
    #[cfg(unix)]
    command.process_group(0);
    if let Some(cwd) = &config.cwd {
        command.current_dir(cwd);
    }
    let mut child = command
        .spawn()
        .map_err(|error| RunError::CouldNotStart(error.to_string()))?;
    let mut group = Group(child.id().map(|pid| pid as i32));
    let (stdin, stdout, stderr) = (child.stdin.take(), child.stdout.take(), child.stderr.take());
    let work = async move {
        let write = async {
            if let Some(mut stdin) = stdin {
                // A script that never reads its stdin closes it early: that is not a failure.
                let _ = stdin.write_all(input).await;
            }
            Ok::<_, RunError>(())
        };
        let wait = async {
            child
                .wait()
                .await
                .map_err(|error| RunError::CouldNotStart(error.to_string()))
        };
        let ((), stdout, stderr, status) = tokio::try_join!(write, capped(stdout, true), capped(stderr, false), wait)?;
        #[cfg(unix)]
        let signal = std::os::unix::process::ExitStatusExt::signal(&status);
        #[cfg(not(unix))]
        let signal = None;
        let exit = match (status.code(), signal) {
            (Some(code), _) => Exit::Code(code),
            (None, Some(signal)) => Exit::Signal(signal),
            (None, None) => Exit::Code(-1),
        };
        Ok(Finished { exit, stdout, stderr })
    };
    let finished = match tokio::time::timeout(config.timeout, work).await {
        Ok(finished) => finished,
        Err(_) => Err(RunError::TimedOut {
            timeout_ms: config.timeout_ms(),
        }),
    };
    if finished.is_ok() {
        // It ended by itself: what it left running in the background is its own business.
        group.0 = None;
    }
    finished
}

/// A stream read to its end, keeping at most [`MAX_OUTPUT_BYTES`]; past that, `strict` fails
/// (stdout must be an answer) and otherwise the rest is read and dropped (stderr is a log).
async fn capped(stream: Option<impl AsyncRead + Unpin>, strict: bool) -> Result<String, RunError> {
    let Some(mut stream) = stream else {
        return Ok(String::new());
    };
    let mut kept = Vec::new();
    let mut chunk = [0u8; 8192];
    loop {
        let read = match stream.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(read) => read,
        };
        let room = MAX_OUTPUT_BYTES.saturating_sub(kept.len());
        if read > room && strict {
            return Err(RunError::TooMuchOutput);
        }
        kept.extend_from_slice(&chunk[..read.min(room)]);
    }
    Ok(String::from_utf8_lossy(&kept).into_owned())
}

/// The process group of a running hook, killed when dropped unless it ended by itself.
struct Group(Option<i32>);

impl Drop for Group {
    fn drop(&mut self) {
        #[cfg(unix)]
        if let Some(group) = self.0 {
            // SAFETY: killpg only sends a signal; a group that is already gone returns ESRCH.
            unsafe {
                libc::killpg(group, libc::SIGKILL);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::time::{Duration, Instant};

    fn shell(line: &str, timeout_ms: u64) -> CommandConfig {
        CommandConfig::parse(&json!({ "command": line, "timeoutMs": timeout_ms }), "hook").unwrap()
    }

    #[tokio::test]
    async fn the_event_goes_in_on_stdin_and_both_streams_come_back() {
        let config = shell(
            "read -r line; echo \"got $line\"; echo \"to $TARGET\" >&2; exit 3",
            5_000,
        );
        let finished = run(&config, b"{\"a\":1}\n", &[("TARGET".into(), "stderr".into())])
            .await
            .unwrap();
        assert_eq!(finished.exit, Exit::Code(3));
        assert_eq!(finished.stdout, "got {\"a\":1}\n");
        assert_eq!(finished.stderr, "to stderr\n");
        // The hook's own env wins over what the runtime sets; the exec form needs no shell.
        let exec = CommandConfig::parse(
            &json!({"command": "printenv", "args": ["MODE"], "env": {"MODE": "own"}}),
            "hook",
        )
        .unwrap();
        let finished = run(&exec, b"", &[("MODE".into(), "runtime".into())]).await.unwrap();
        assert_eq!((finished.exit, finished.stdout.as_str()), (Exit::Code(0), "own\n"));
        // A script that ignores its stdin is not a failure.
        let finished = run(&shell("exit 0", 5_000), &vec![b'x'; 1 << 20], &[]).await.unwrap();
        assert_eq!(finished.exit, Exit::Code(0));
    }

    #[tokio::test]
    async fn at_the_timeout_the_whole_group_is_killed() {
        let marker = std::env::temp_dir().join(format!("command-hook-orphan-{}", std::process::id()));
        let _ = std::fs::remove_file(&marker);
        // The child sleeps, then would write the marker: it must die with its parent.
        let line = format!("(sleep 1; touch {}) & sleep 30", marker.display());
        let started = Instant::now();
        let error = run(&shell(&line, 300), b"", &[]).await.unwrap_err();
        assert_eq!(error, RunError::TimedOut { timeout_ms: 300 });
        assert_eq!(
            error.to_string(),
            "timed out after 300ms (its process group was killed)"
        );
        assert!(started.elapsed() < Duration::from_secs(5));
        tokio::time::sleep(Duration::from_millis(1_500)).await;
        assert!(!marker.exists(), "a child of the timed-out hook outlived it");
    }

    #[tokio::test]
    async fn megabytes_on_stdout_are_refused_and_on_stderr_cut() {
        let error = run(&shell("head -c 3000000 /dev/zero | tr '\\0' x", 10_000), b"", &[])
            .await
            .unwrap_err();
        assert_eq!(error, RunError::TooMuchOutput);
        assert_eq!(error.to_string(), "wrote more than 65536 bytes to stdout");
        let finished = run(
            &shell("head -c 3000000 /dev/zero | tr '\\0' x >&2; exit 2", 10_000),
            b"",
            &[],
        )
        .await
        .unwrap();
        assert_eq!(
            (finished.exit, finished.stderr.len()),
            (Exit::Code(2), MAX_OUTPUT_BYTES)
        );
    }

    #[tokio::test]
    async fn a_signal_and_a_missing_program_are_told_apart() {
        let finished = run(&shell("kill -9 $$", 5_000), b"", &[]).await.unwrap();
        assert_eq!(finished.exit, Exit::Signal(9));
        let config = CommandConfig {
            program: Program::Exec {
                program: "/no/such/program".into(),
                args: vec![],
            },
            env: vec![],
            cwd: None,
            timeout: Duration::from_secs(1),
        };
        let error = run(&config, b"", &[]).await.unwrap_err();
        assert!(
            matches!(&error, RunError::CouldNotStart(why) if why.contains("No such file")),
            "{error:?}"
        );
    }
}
