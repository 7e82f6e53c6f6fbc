//! Inline hooks: the events, ordered dispatch of their callbacks under one deadline, the
//! tracking that makes later dispatches fail closed while a cancelled callback still runs, and
//! the per-event rules that turn callbacks' outputs into effects. Hooks come from `advanced.hooks`
//! (`registry.rs`) and, per run, from the environment (`environment.rs`). Plain Rust: callbacks are
//! reached through the `Host` trait.

pub mod apply;
pub mod control;
pub mod dispatch;
pub mod environment;
pub mod event;
pub mod fields;
pub mod output;
pub mod pending;
pub mod registry;
mod span;

pub use dispatch::{Dispatcher, HookError};
pub use event::HookEvent;
pub use fields::EventFields;
pub use output::{Action, HookOutput};
