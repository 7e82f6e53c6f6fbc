//! The agent, in floors of its own (`tests/layers.rs`): its parts (options, definitions,
//! events, tools, payloads, the pause vocabulary), the store port and delegation beside them
//! (`durable/`, `subagents/delegate.rs`), the loop above (`run/`), and the session on top.

pub mod approvals;
pub mod compaction;
pub mod config;
mod confirm;
pub mod control;
pub mod conversation;
pub mod definition;
pub mod durable;
pub mod events;
pub mod inputs;
pub mod payloads;
pub mod permission;
mod plan_mode;
mod post_call;
pub mod reader;
mod run;
pub mod session;
pub mod settings;
pub mod subagents;
pub mod tools;
mod tree;

pub use config::AgentConfig;
pub use control::{RunControl, SendOptions};
pub use durable::deferred;
pub use events::{PromptResult, StopReason, StreamEvent, ToolCallRecord};
pub use reader::EventReader;
pub use session::{RunHandle, Session};
