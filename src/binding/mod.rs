//! The Node-API edge: the only code that knows napi. It converts between JS values and the
//! core's types and calls the core; `index.js` wraps it in the public API.

pub mod agent;
pub mod host;
pub mod local;

/// The loop allocates many small, short-lived values (events, hook inputs, JSON text) on the
/// JS thread; mimalloc serves them several times faster than the system allocator.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;
