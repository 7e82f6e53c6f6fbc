//! Command hooks: a process per event, given Claude Code's input JSON on stdin and read as
//! Claude Code reads it (exit 2 blocks; stdout's JSON decides). Configuration, the stdin
//! input, the process (its group killed at the timeout) and the reading of its answer. It knows
//! the `HookEvent` vocabulary and nothing else of hooks; the hooks room (`hooks/command.rs`)
//! turns verdicts into effects.

pub mod answer;
pub mod config;
pub mod http;
pub mod input;
pub mod run;
pub mod settings;

pub use answer::{Decision, Verdict};
pub use config::CommandConfig;
