//! The Node-API edge: the only code that knows napi. It converts between JS values and the
//! core's types and calls the core; `index.js` wraps it in the public API.

pub mod agent;
pub mod host;
pub mod local;
