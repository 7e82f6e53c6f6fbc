//! agent-runtime-hooks: an agent loop (model → tool calls → model) written in plain Rust, with a
//! thin Node-API edge in `binding/`. Everything outside `binding/` is testable with `cargo test`.

pub mod agent;
pub mod builtins;
pub mod command_hook;
pub mod error;
pub mod hook_event;
pub mod hooks;
pub mod host;
pub mod ids;
pub mod js_value;
pub mod log;
pub mod mcp;
pub mod model;
pub mod offload;
pub mod options;
pub mod pace;
pub mod store;
mod sync;
pub mod telemetry;
pub mod text;
pub mod webhook;

#[cfg(feature = "node")]
pub mod binding;
