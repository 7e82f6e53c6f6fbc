//! Blade's built-in tools, run in Rust on the tokio workers: Read, Write, Edit (files.rs), Glob,
//! Grep (search.rs), Bash, KillShell, TaskOutput (shell.rs), WebFetch (web.rs), NotebookEdit
//! (notebook.rs), TodoWrite (todo.rs), EnterPlanMode, ExitPlanMode (plan.rs) and
//! AskUserQuestion (ask.rs). Every path goes through `paths.rs` first. The agent wires them into its pipeline (`Runner::Builtin`): hooks,
//! permissions and the ledger treat a built-in call as they treat a JS tool's. The tools that
//! talk to the person (todo, plan, ask) reach them through a [`Talk`] the agent gives, and say
//! what the run should change (its permission mode, its end) in their [`Answer`].

mod ask;
mod files;
mod input;
mod notebook;
mod paths;
mod plan;
mod search;
mod shell;
mod todo;
mod web;

use std::path::PathBuf;

use futures::future::BoxFuture;
use serde_json::{Map, Value};
use tokio_util::sync::CancellationToken;

pub use paths::NO_FILESYSTEM;
pub use web::WebPolicy;

/// What a built-in call answers: the text the model is sent, and whether it is an error
/// (`tool_result.isError`). A tool-level failure is the tool's own text, as Blade sends it.
#[derive(Debug, Clone, PartialEq)]
pub struct Answer {
    pub text: String,
    pub failed: bool,
    /// Shown in `tool_result.display`, never sent to the model (Edit's diff).
    pub display: Option<Value>,
    /// The permission mode the run goes on in (EnterPlanMode, ExitPlanMode); boxed, as rare,
    /// to keep every answer small.
    pub mode: Option<Box<ModeChange>>,
    /// The run ends after this turn, with this text (a plan the person rejected).
    pub stop: bool,
}

impl Answer {
    pub fn ok(text: impl Into<String>) -> Self {
        Answer {
            text: text.into(),
            failed: false,
            display: None,
            mode: None,
            stop: false,
        }
    }

    /// A JSON result, as Blade sends one: `JSON.stringify(value, null, 2)`.
    pub fn json(value: &Value) -> Self {
        Answer::ok(serde_json::to_string_pretty(value).unwrap_or_default())
    }

    pub fn error(text: impl Into<String>) -> Self {
        Answer {
            text: text.into(),
            failed: true,
            display: None,
            mode: None,
            stop: false,
        }
    }

    fn switching(self, mode: ModeChange) -> Self {
        Answer {
            mode: Some(Box::new(mode)),
            ..self
        }
    }
}

/// A change of the run's permission mode a built-in asks for; the agent applies it to the
/// calls that follow and to the session's next runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ModeChange {
    /// Into plan mode: calls that are not read-only are denied.
    EnterPlan,
    /// Out of plan mode: into `target` (a Blade mode the person chose) when given, else back to
    /// what was in force before.
    LeavePlan { target: Option<String> },
}

/// Who answers what a built-in asks the person using the agent (AskUserQuestion, the plan-mode
/// confirmations): the agent's confirmation handler.
pub trait Person: Sync {
    /// Asks with Blade's confirmation details (`type`, `title`, `message`, …).
    fn confirm(&self, details: Map<String, Value>) -> BoxFuture<'_, Reply>;
}

/// What the person answered.
#[derive(Debug, Clone, PartialEq)]
pub enum Reply {
    /// The handler's answer: an object whose `approved` is a boolean.
    Answered(Map<String, Value>),
    /// Nobody can be asked: no confirmation handler is configured.
    Nobody,
    /// The handler threw, timed out or answered nonsense.
    Failed(String),
}

/// No one to ask.
pub struct Nobody;

impl Person for Nobody {
    fn confirm(&self, _details: Map<String, Value>) -> BoxFuture<'_, Reply> {
        Box::pin(async { Reply::Nobody })
    }
}

/// What the tools that talk to the person get besides a [`Call`]: who answers, and where their
/// progress goes (`tool_progress`).
pub struct Talk<'a> {
    pub person: &'a dyn Person,
    pub progress: &'a (dyn Fn(Value) + Sync),
}

impl Talk<'_> {
    /// Nobody to ask, and progress nobody sees.
    pub const NOBODY: Talk<'static> = Talk {
        person: &Nobody,
        progress: &unseen,
    };
}

fn unseen(_progress: Value) {}

/// Where the file tools may work: `capabilities.filesystem` of the run's context (`{ roots,
/// cwd? }`, which the `filesystem` option sets).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Workspace {
    pub roots: Vec<PathBuf>,
    pub cwd: Option<PathBuf>,
}

impl Workspace {
    /// Read from a tool context (`advanced.defaultContext` with `filesystem` merged in).
    pub fn of_context(context: &Map<String, Value>) -> Workspace {
        let filesystem = context
            .get("capabilities")
            .and_then(|capabilities| capabilities.get("filesystem"));
        let Some(filesystem) = filesystem else {
            return Workspace::default();
        };
        let roots = filesystem
            .get("roots")
            .and_then(Value::as_array)
            .map(|roots| roots.iter().filter_map(Value::as_str).map(PathBuf::from).collect())
            .unwrap_or_default();
        let cwd = filesystem.get("cwd").and_then(Value::as_str).map(PathBuf::from);
        Workspace { roots, cwd }
    }
}

/// One call's surroundings.
pub struct Call<'a> {
    pub workspace: &'a Workspace,
    /// What the session's built-ins remember between calls.
    pub state: &'a State,
    /// Cancelled when the run is aborted or the call's deadline passes: a running command's
    /// process group is killed, a search stops.
    pub cancel: CancellationToken,
}

/// What a session's built-ins keep between calls: the files Read (Write and Edit of an existing
/// file need one), the background shells, the todo list, and where WebFetch may go (the
/// `webFetch` option).
#[derive(Default)]
pub struct State {
    pub(crate) read: files::ReadFiles,
    pub(crate) shells: shell::Shells,
    pub(crate) web: WebPolicy,
    pub(crate) todos: todo::Todos,
}

impl State {
    /// A session's state, WebFetch held to `web`.
    pub fn with_web_policy(web: WebPolicy) -> State {
        State {
            web,
            ..State::default()
        }
    }

    /// Kills every background shell's process group (the session closes).
    pub async fn close(&self) {
        self.shells.kill_all().await;
    }
}

/// The built-in tools, by the names Blade and the Claude Agent SDK give them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Builtin {
    Read,
    Write,
    Edit,
    Glob,
    Grep,
    Bash,
    KillShell,
    TaskOutput,
    WebFetch,
    NotebookEdit,
    TodoWrite,
    EnterPlanMode,
    ExitPlanMode,
    AskUserQuestion,
}

impl Builtin {
    /// The tools sessions offer (a tool joins when it is built).
    pub const ALL: [Builtin; 14] = [
        Builtin::Read,
        Builtin::Write,
        Builtin::Edit,
        Builtin::Glob,
        Builtin::Grep,
        Builtin::Bash,
        Builtin::KillShell,
        Builtin::TaskOutput,
        Builtin::WebFetch,
        Builtin::NotebookEdit,
        Builtin::TodoWrite,
        Builtin::EnterPlanMode,
        Builtin::ExitPlanMode,
        Builtin::AskUserQuestion,
    ];

    pub fn parse(name: &str) -> Option<Builtin> {
        Builtin::ALL.into_iter().find(|tool| tool.name() == name)
    }

    pub fn name(self) -> &'static str {
        match self {
            Builtin::Read => "Read",
            Builtin::Write => "Write",
            Builtin::Edit => "Edit",
            Builtin::Glob => "Glob",
            Builtin::Grep => "Grep",
            Builtin::Bash => "Bash",
            Builtin::KillShell => "KillShell",
            Builtin::TaskOutput => "TaskOutput",
            Builtin::WebFetch => "WebFetch",
            Builtin::NotebookEdit => "NotebookEdit",
            Builtin::TodoWrite => "TodoWrite",
            Builtin::EnterPlanMode => "EnterPlanMode",
            Builtin::ExitPlanMode => "ExitPlanMode",
            Builtin::AskUserQuestion => "AskUserQuestion",
        }
    }

    /// Blade's permission kind: `readonly`, `write` or `execute`.
    pub fn kind(self) -> &'static str {
        match self {
            Builtin::Read
            | Builtin::Glob
            | Builtin::Grep
            | Builtin::TaskOutput
            | Builtin::TodoWrite
            | Builtin::EnterPlanMode
            | Builtin::ExitPlanMode
            | Builtin::AskUserQuestion => "readonly",
            Builtin::Write | Builtin::Edit | Builtin::NotebookEdit => "write",
            Builtin::Bash | Builtin::KillShell | Builtin::WebFetch => "execute",
        }
    }

    /// What running the call twice does (the effects ledger's `sideEffect`).
    pub fn side_effect(self) -> &'static str {
        match self {
            Builtin::Read | Builtin::Glob | Builtin::Grep => "pure",
            Builtin::Write | Builtin::KillShell => "idempotent",
            // TaskOutput hands out each piece of a shell's output once.
            Builtin::Edit | Builtin::Bash | Builtin::TaskOutput => "non_idempotent",
            Builtin::WebFetch => web::side_effect(),
            Builtin::NotebookEdit => notebook::side_effect(),
            Builtin::TodoWrite => todo::side_effect(),
            Builtin::EnterPlanMode | Builtin::ExitPlanMode => plan::side_effect(),
            Builtin::AskUserQuestion => ask::side_effect(),
        }
    }

    pub fn description(self) -> &'static str {
        match self {
            Builtin::Read | Builtin::Write | Builtin::Edit => files::description(self),
            Builtin::Glob | Builtin::Grep => search::description(self),
            Builtin::Bash | Builtin::KillShell | Builtin::TaskOutput => shell::description(self),
            Builtin::WebFetch => web::description(),
            Builtin::NotebookEdit => notebook::description(),
            Builtin::TodoWrite => todo::description(),
            Builtin::EnterPlanMode | Builtin::ExitPlanMode => plan::description(self),
            Builtin::AskUserQuestion => ask::description(),
        }
    }

    /// The input schema the model is offered (JSON Schema; defaulted fields not required).
    pub fn schema(self) -> Value {
        match self {
            Builtin::Read | Builtin::Write | Builtin::Edit => files::schema(self),
            Builtin::Glob | Builtin::Grep => search::schema(self),
            Builtin::Bash | Builtin::KillShell | Builtin::TaskOutput => shell::schema(self),
            Builtin::WebFetch => web::schema(),
            Builtin::NotebookEdit => notebook::schema(),
            Builtin::TodoWrite => todo::schema(),
            Builtin::EnterPlanMode | Builtin::ExitPlanMode => plan::schema(self),
            Builtin::AskUserQuestion => ask::schema(),
        }
    }

    /// Whether the tool talks to the person (asks, reports progress): it runs with a [`Talk`]
    /// ([`Builtin::run_with`]), on the run's own task; it does no blocking work.
    pub fn talks(self) -> bool {
        matches!(
            self,
            Builtin::TodoWrite | Builtin::EnterPlanMode | Builtin::ExitPlanMode | Builtin::AskUserQuestion
        )
    }

    /// Runs the tool with nobody to ask.
    pub async fn run(self, input: &Map<String, Value>, call: Call<'_>) -> Answer {
        self.run_with(input, call, &Talk::NOBODY).await
    }

    pub async fn run_with(self, input: &Map<String, Value>, call: Call<'_>, talk: &Talk<'_>) -> Answer {
        match self {
            Builtin::Read => files::read(input, &call).await,
            Builtin::Write => files::write(input, &call).await,
            Builtin::Edit => files::edit(input, &call).await,
            Builtin::Glob => search::glob(input, &call).await,
            Builtin::Grep => search::grep(input, &call).await,
            Builtin::Bash => shell::bash(input, &call).await,
            Builtin::KillShell => shell::kill_shell(input, &call).await,
            Builtin::TaskOutput => shell::task_output(input, &call).await,
            Builtin::WebFetch => web::web_fetch(input, &call).await,
            Builtin::NotebookEdit => notebook::notebook_edit(input, &call).await,
            Builtin::TodoWrite => todo::todo_write(input, &call, talk),
            Builtin::EnterPlanMode => plan::enter_plan_mode(talk).await,
            Builtin::ExitPlanMode => plan::exit_plan_mode(input, talk).await,
            Builtin::AskUserQuestion => ask::ask_user_question(input, talk).await,
        }
    }
}

/// `2026-12-02T11:43:14.000Z`, as JavaScript's `toISOString` prints a time.
pub(crate) fn iso_time(time: std::time::SystemTime) -> String {
    let since = time.duration_since(std::time::UNIX_EPOCH).unwrap_or_default();
    let seconds = since.as_secs() as i64;
    let (days, rest) = (seconds.div_euclid(86_400), seconds.rem_euclid(86_400));
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}.{:03}Z",
        rest / 3600,
        rest % 3600 / 60,
        rest % 60,
        since.subsec_millis()
    )
}

/// A person for the tools' unit tests: answers every confirmation with one reply and keeps
/// what it was asked.
#[cfg(test)]
pub(crate) mod testing {
    use std::sync::Mutex;

    use futures::future::BoxFuture;
    use serde_json::{Map, Value};

    use super::{Person, Reply};

    pub struct Answering {
        pub reply: Reply,
        pub asked: Mutex<Vec<Map<String, Value>>>,
    }

    impl Person for Answering {
        fn confirm(&self, details: Map<String, Value>) -> BoxFuture<'_, Reply> {
            self.asked.lock().unwrap().push(details);
            let reply = self.reply.clone();
            Box::pin(async move { reply })
        }
    }

    pub fn answering(reply: Value) -> Answering {
        Answering {
            reply: Reply::Answered(reply.as_object().unwrap().clone()),
            asked: Mutex::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn times_print_as_javascript_prints_them() {
        assert_eq!(iso_time(UNIX_EPOCH), "1970-01-01T00:00:00.000Z");
        let time = UNIX_EPOCH + Duration::from_millis(1_796_210_594_123);
        assert_eq!(iso_time(time), "2026-12-02T11:23:14.123Z");
        let leap = UNIX_EPOCH + Duration::from_secs(951_782_400);
        assert_eq!(iso_time(leap), "2000-02-29T00:00:00.000Z");
    }

    #[test]
    fn the_workspace_is_read_from_the_context() {
        let context = serde_json::json!({"capabilities": {"filesystem": {"roots": ["/a", "/b"], "cwd": "/a"}}});
        let workspace = Workspace::of_context(context.as_object().unwrap());
        assert_eq!(workspace.roots, vec![PathBuf::from("/a"), PathBuf::from("/b")]);
        assert_eq!(workspace.cwd, Some(PathBuf::from("/a")));
        assert_eq!(Workspace::of_context(&Map::new()), Workspace::default());
    }
}
