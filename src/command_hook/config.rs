//! A command hook's `command: { command, args?, env?, cwd?, timeoutMs? }`, read strictly: every
//! problem is a `ConfigError` naming the hook and the field.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use crate::error::Result;
use crate::options::OptionsObject;
use crate::webhook::config::valid_env_name;

/// Claude Code's default: a command hook may run for ten minutes.
pub const DEFAULT_TIMEOUT_MS: u64 = 600_000;
const MAX_TIMEOUT_MS: u64 = 2_147_483_647;
const KEYS: &[&str] = &["command", "args", "env", "cwd", "timeoutMs"];

/// What to start.
#[derive(Debug, Clone, PartialEq)]
pub enum Program {
    /// A shell line, run by `bash -c` (what settings files hold).
    Shell(String),
    /// A program and its argv, started directly: no shell reads it.
    Exec { program: String, args: Vec<String> },
}

#[derive(Debug, Clone, PartialEq)]
pub struct CommandConfig {
    pub program: Program,
    /// Added to the process's environment, over what the runtime sets.
    pub env: Vec<(String, String)>,
    pub cwd: Option<PathBuf>,
    pub timeout: Duration,
}

impl CommandConfig {
    /// Reads `value` found at `path` (`advanced.hooks[0] (hook "guard").command`).
    pub fn parse(value: &Value, path: &str) -> Result<Self> {
        let object = OptionsObject::of(value, path, "an object { command, args?, env?, cwd?, timeoutMs? }")?;
        object.only(KEYS, &[])?;
        let command = match object.get("command") {
            Some(Value::String(command)) if !command.trim().is_empty() => command.clone(),
            Some(other) => return Err(object.invalid("command", "a non-empty string", other)),
            None => return Err(object.error("command", "is required")),
        };
        let cwd = object.string("cwd")?.map(PathBuf::from);
        if let Some(cwd) = &cwd {
            if !cwd.is_dir() {
                return Err(object.error("cwd", format_args!("is not a directory (\"{}\")", cwd.display())));
            }
        }
        let program = match object.get("args") {
            None => Program::Shell(command),
            Some(Value::Array(items)) => {
                let mut args = Vec::with_capacity(items.len());
                for (index, item) in items.iter().enumerate() {
                    match item {
                        Value::String(arg) => args.push(arg.clone()),
                        other => return Err(object.invalid(&format!("args[{index}]"), "a string", other)),
                    }
                }
                Program::Exec { program: command, args }
            }
            Some(other) => return Err(object.invalid("args", "an array of strings", other)),
        };
        let env = match object.get("env") {
            None => Vec::new(),
            Some(Value::Object(map)) => {
                let mut env = Vec::with_capacity(map.len());
                for (name, value) in map {
                    match value {
                        Value::String(text) if valid_env_name(name) => env.push((name.clone(), text.clone())),
                        Value::String(_) => return Err(object.error(
                            &format!("env.{name}"),
                            "is not an environment variable name (letters, digits and _, not starting with a digit)",
                        )),
                        other => return Err(object.invalid(&format!("env.{name}"), "a string", other)),
                    }
                }
                env
            }
            Some(other) => return Err(object.invalid("env", "an object of strings", other)),
        };
        let timeout_ms = object
            .positive_integer("timeoutMs", MAX_TIMEOUT_MS)?
            .unwrap_or(DEFAULT_TIMEOUT_MS);
        let config = CommandConfig {
            program,
            env,
            cwd,
            timeout: Duration::from_millis(timeout_ms),
        };
        if let Some(missing) = config.missing_program() {
            return Err(object.error(
                "command",
                format_args!("names a program that does not exist: \"{missing}\" (not a file, nor found on PATH)"),
            ));
        }
        Ok(config)
    }

    /// The program that would start, when it cannot be found: the exec form's program, or the
    /// first word of a shell line when that word is a plain program name (`python3 x.py`).
    /// Lines that begin with anything a shell reads first (a builtin, an assignment, a quote, a
    /// variable) are left to the shell.
    fn missing_program(&self) -> Option<String> {
        let (program, base) = match &self.program {
            Program::Exec { program, .. } => (program.as_str(), self.cwd.as_deref()),
            Program::Shell(line) => {
                let first = line.split_whitespace().next()?;
                let plain = first
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '/' | '.' | '_' | '-' | '+'));
                if !plain || SHELL_WORDS.contains(&first) {
                    return None;
                }
                (first, self.cwd.as_deref())
            }
        };
        (!program_exists(program, base)).then(|| program.to_string())
    }

    pub fn timeout_ms(&self) -> u64 {
        self.timeout.as_millis() as u64
    }
}

/// Shell builtins and keywords a line may start with (they are not files).
const SHELL_WORDS: &[&str] = &[
    ".", "cd", "echo", "exec", "exit", "export", "eval", "if", "for", "while", "until", "case", "set", "source",
    "test", "true", "false", "printf", "read", "command", "type", "time", "[", "[[", "{", "(", "!", "ulimit", "umask",
    "unset", "trap", "wait", "pushd", "popd", "declare", "local", "let", "shopt", "builtin",
];

/// Whether `program` names a file (a path, taken from `base` when relative) or a file on `PATH`.
fn program_exists(program: &str, base: Option<&Path>) -> bool {
    if program.contains('/') {
        let path = Path::new(program);
        return match base {
            Some(base) if path.is_relative() => base.join(path).is_file(),
            _ => path.is_file(),
        };
    }
    std::env::var_os("PATH").is_some_and(|paths| std::env::split_paths(&paths).any(|dir| dir.join(program).is_file()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const PATH: &str = "advanced.hooks[0] (hook \"guard\").command";

    #[test]
    fn the_shell_form_and_the_exec_form() {
        let shell = CommandConfig::parse(&json!({"command": "bash ./guard.sh"}), PATH).unwrap();
        assert_eq!(shell.program, Program::Shell("bash ./guard.sh".into()));
        assert_eq!(shell.timeout, Duration::from_secs(600));
        let exec = CommandConfig::parse(
            &json!({"command": "bash", "args": ["-c", "exit 2"], "env": {"MODE": "strict"}, "cwd": "/", "timeoutMs": 1500}),
            PATH,
        )
        .unwrap();
        assert_eq!(
            exec.program,
            Program::Exec {
                program: "bash".into(),
                args: vec!["-c".into(), "exit 2".into()]
            }
        );
        assert_eq!(exec.env, vec![("MODE".to_string(), "strict".to_string())]);
        assert_eq!(exec.cwd.as_deref(), Some(Path::new("/")));
        assert_eq!(exec.timeout_ms(), 1500);
        // A line that starts with what the shell reads first is the shell's to judge.
        for line in [
            "cd /tmp && ./x",
            "FOO=1 python3 x.py",
            "\"$CLAUDE_PROJECT_DIR\"/hooks/x.sh",
            "[ -f x ] || exit 0",
        ] {
            assert!(
                CommandConfig::parse(&json!({ "command": line }), PATH).is_ok(),
                "{line}"
            );
        }
    }

    #[test]
    fn every_problem_names_the_field() {
        let cases = [
            (json!("ls"), format!("{PATH} must be an object {{ command, args?, env?, cwd?, timeoutMs? }} (got \"ls\")")),
            (json!({}), format!("{PATH}.command is required")),
            (json!({"command": ""}), format!("{PATH}.command must be a non-empty string (got \"\")")),
            (json!({"command": "no-such-program-here --x"}), format!("{PATH}.command names a program that does not exist: \"no-such-program-here\" (not a file, nor found on PATH)")),
            (json!({"command": "/no/such/file", "args": []}), format!("{PATH}.command names a program that does not exist: \"/no/such/file\" (not a file, nor found on PATH)")),
            (json!({"command": "bash", "args": "-c"}), format!("{PATH}.args must be an array of strings (got \"-c\")")),
            (json!({"command": "bash", "args": ["-c", 2]}), format!("{PATH}.args[1] must be a string (got 2)")),
            (json!({"command": "bash", "env": {"A": 1}}), format!("{PATH}.env.A must be a string (got 1)")),
            (json!({"command": "bash", "env": {"1A": "x"}}), format!("{PATH}.env.1A is not an environment variable name (letters, digits and _, not starting with a digit)")),
            (json!({"command": "bash", "cwd": "/no/such/dir"}), format!("{PATH}.cwd is not a directory (\"/no/such/dir\")")),
            (json!({"command": "bash", "timeoutMs": 0}), format!("{PATH}.timeoutMs must be a positive integer no greater than 2147483647 (got 0)")),
            (json!({"command": "bash", "timeoutMs": "5"}), format!("{PATH}.timeoutMs must be a positive integer no greater than 2147483647 (got \"5\")")),
            (json!({"command": "bash", "shell": "zsh"}), format!("{PATH}.shell is not a known option (known here: command, args, env, cwd, timeoutMs)")),
        ];
        for (value, expected) in cases {
            let error = CommandConfig::parse(&value, PATH).unwrap_err();
            assert_eq!(error.message, expected, "for {value}");
        }
    }
}
