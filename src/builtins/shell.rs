//! Bash, KillShell and TaskOutput. A command runs as `bash -c` in the working folder, leading
//! a process group of its own, so a timeout, an abort or a kill ends everything it started.
//! Output is read with bounded memory whatever its size (capture.rs) and cut for the model by
//! Blade's tiers (truncate.rs).

mod background;
mod capture;
mod foreground;
mod group;
mod truncate;

#[cfg(test)]
mod tests;

use std::time::Duration;

use serde_json::{json, Map, Value};

use super::input::Fields;
use super::{paths, Answer, Builtin, Call};
use background::{Refused, MAX_SHELLS};

pub(crate) use background::Shells;

/// Blade's text when Bash has neither a `cwd` argument nor a workspace cwd.
pub(crate) const NO_WORKING_DIRECTORY: &str =
    "No working directory provided and no filesystem working directory is available.";

const BASH: &str = "Runs a bash command (`bash -c`) and answers JSON with its stdout, stderr, exit_code, signal and \
execution_time (ms). A non-zero exit code is not an error. Output is trimmed; a long output keeps its first and last \
lines, and truncation_info says what was cut.\n\
- timeout: milliseconds, 1000 to 300000 (default 30000). On timeout the command and every process it started are \
stopped.\n\
- cwd: the working folder for this command only (default: the workspace folder). To work elsewhere for good, use \
absolute paths.\n\
- env: extra environment variables for this command.\n\
- run_in_background: start the command and answer at once with its shell_id; read its output with TaskOutput and \
stop it with KillShell. No trailing `&` is needed.\n\
Prefer the dedicated tools to shell commands for files: Read (not cat, head or tail), Write (not echo or heredocs), \
Edit (not sed or awk), Glob (not find or ls), Grep (not grep or rg). Chain dependent commands with `&&`; quote \
paths that contain spaces.";

const KILL_SHELL: &str = "Stops a background shell that Bash started with run_in_background, together with every \
process it started (SIGTERM, then SIGKILL after a second). Takes the shell_id Bash answered; answers the shell's \
final status.";

const TASK_OUTPUT: &str = "Reads a background shell's output: what it printed since the previous TaskOutput call, \
and its status (running; completed, with exit_code; killed). Takes the shell_id Bash answered as task_id. With block \
(default true) it waits until the shell finishes or timeout milliseconds pass (default 30000, at most 600000); with \
block false it answers at once.";

pub(crate) fn description(tool: Builtin) -> &'static str {
    match tool {
        Builtin::KillShell => KILL_SHELL,
        Builtin::TaskOutput => TASK_OUTPUT,
        _ => BASH,
    }
}

pub(crate) fn schema(tool: Builtin) -> Value {
    match tool {
        Builtin::KillShell => json!({
            "type": "object",
            "properties": {
                "shell_id": {"type": "string", "minLength": 1, "description": "The background shell to stop (Bash's shell_id)"},
            },
            "required": ["shell_id"],
            "additionalProperties": false,
        }),
        Builtin::TaskOutput => json!({
            "type": "object",
            "properties": {
                "task_id": {"type": "string", "minLength": 1, "description": "The background shell to read (Bash's shell_id)"},
                "block": {"type": "boolean", "default": true, "description": "Wait until the shell finishes"},
                "timeout": {"type": "integer", "minimum": 0, "maximum": 600_000, "default": 30_000, "description": "How long to wait, in milliseconds"},
            },
            "required": ["task_id"],
            "additionalProperties": false,
        }),
        _ => json!({
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": "The bash command to run"},
                "timeout": {"type": "integer", "minimum": 1000, "maximum": 300_000, "default": 30_000, "description": "Timeout in milliseconds"},
                "cwd": {"type": "string", "description": "Working folder for this command only"},
                "env": {"type": "object", "additionalProperties": {"type": "string"}, "description": "Extra environment variables"},
                "run_in_background": {"type": "boolean", "default": false, "description": "Run in the background (long-running commands); read it with TaskOutput"},
            },
            "required": ["command"],
            "additionalProperties": false,
        }),
    }
}

pub(crate) async fn bash(input: &Map<String, Value>, call: &Call<'_>) -> Answer {
    match run_bash(input, call).await {
        Ok(answer) | Err(answer) => answer,
    }
}

async fn run_bash(input: &Map<String, Value>, call: &Call<'_>) -> Result<Answer, Answer> {
    let fields = Fields::of("Bash", input);
    let command = fields.required_string("command")?;
    let timeout = fields.integer("timeout", 1000, 300_000)?.unwrap_or(30_000);
    let cwd = fields.string("cwd")?;
    let env = environment(&fields)?;
    let in_background = fields.bool("run_in_background", false)?;
    let dir = paths::directory(cwd, call.workspace, NO_WORKING_DIRECTORY)?;
    if !in_background {
        return Ok(foreground::run(command, &dir, &env, timeout, &call.cancel).await);
    }
    let shell = match call.state.shells.start(command, &dir, &env) {
        Ok(shell) => shell,
        Err(Refused::Spawn(error)) => return Err(foreground::spawn_failed(&error)),
        Err(Refused::Full) => {
            return Err(Answer::error(format!(
                "Too many background shells: at most {MAX_SHELLS} may run or hold output not read yet. Read finished \
                 ones with TaskOutput or stop one with KillShell."
            )))
        }
    };
    let id = &shell.id;
    Ok(Answer::json(&json!({
        "command": command,
        "background": true,
        "pid": shell.pid(),
        "bash_id": id,
        "shell_id": id,
        "message": format!(
            "Started in the background as {id}. Read its output with TaskOutput (task_id \"{id}\"); stop it with \
             KillShell (shell_id \"{id}\")."
        ),
    })))
}

/// `env`: an object of strings.
fn environment(fields: &Fields<'_>) -> Result<Vec<(String, String)>, Answer> {
    let Some(env) = fields.get("env") else {
        return Ok(Vec::new());
    };
    let invalid = || fields.invalid("env", "an object of strings");
    let Value::Object(env) = env else {
        return Err(invalid());
    };
    env.iter()
        .map(|(key, value)| match value {
            Value::String(value) => Ok((key.clone(), value.clone())),
            _ => Err(invalid()),
        })
        .collect()
}

pub(crate) async fn kill_shell(input: &Map<String, Value>, call: &Call<'_>) -> Answer {
    let fields = Fields::of("KillShell", input);
    let id = match fields.required_string("shell_id") {
        Ok(id) => id,
        Err(answer) => return answer,
    };
    let Some(shell) = call.state.shells.find(id) else {
        return Answer::error(format!("Shell not found: {id}"));
    };
    match shell.kill().await {
        Err(_) => Answer::error(format!("Failed to terminate Shell: {id}")),
        Ok(mut killed) => {
            let message = if killed.already_exited {
                format!("Shell {id} had already exited")
            } else {
                format!("Shell {id} was terminated")
            };
            killed.report.insert("message".into(), Value::String(message));
            Answer::json(&Value::Object(killed.report))
        }
    }
}

pub(crate) async fn task_output(input: &Map<String, Value>, call: &Call<'_>) -> Answer {
    let fields = Fields::of("TaskOutput", input);
    let read = || -> Result<_, Answer> {
        Ok((
            fields.required_string("task_id")?,
            fields.bool("block", true)?,
            fields.integer("timeout", 0, 600_000)?.unwrap_or(30_000),
        ))
    };
    let (id, block, timeout) = match read() {
        Ok(read) => read,
        Err(answer) => return answer,
    };
    let Some(shell) = call.state.shells.find(id) else {
        return Answer::error(if id.starts_with("bash_") {
            format!("Shell not found: {id}")
        } else {
            format!("Unknown task ID: {id}.")
        });
    };
    if block {
        tokio::select! {
            _ = shell.wait(Duration::from_millis(timeout)) => {}
            // Nothing is taken: the output stays for the next call.
            _ = call.cancel.cancelled() => return Answer::error(format!("TaskOutput aborted: {id}")),
        }
    }
    Answer::json(&shell.take_output())
}
