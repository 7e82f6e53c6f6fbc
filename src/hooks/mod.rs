//! Inline hooks: ordered dispatch of each event's callbacks under one deadline, the tracking
//! that makes later dispatches fail closed while a cancelled callback still runs, and the
//! per-event rules that turn callbacks' outputs into effects. Hooks come from `advanced.hooks`
//! (`registry.rs`) and, per run, from the environment (`environment.rs`). Plain Rust: callbacks are
//! reached through the `Host` trait. The events themselves are the ground floor's vocabulary
//! (`crate::hook_event`), named here too.

pub mod apply;
pub mod command;
pub mod control;
pub mod dispatch;
pub mod environment;
pub mod fields;
pub mod listing;
pub mod observer;
pub mod output;
pub mod pending;
pub mod registry;
mod span;

pub use crate::hook_event::HookEvent;
pub use dispatch::{Dispatcher, HookError};
pub use fields::EventFields;
pub use output::{Action, Directives, HookOutput, PermissionHint};
