//! The agent: options, the session (conversation, busy/closed state), the loop, tool execution
//! and the events a run streams.

pub mod approvals;
pub mod compaction;
pub mod config;
mod confirm;
pub mod control;
pub mod conversation;
pub mod deferred;
pub mod durable;
pub mod events;
pub mod parts;
pub mod payloads;
pub mod permission;
mod pipeline;
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
pub use events::{PromptResult, StopReason, StreamEvent, ToolCallRecord};
pub use reader::EventReader;
pub use session::{RunHandle, Session};
