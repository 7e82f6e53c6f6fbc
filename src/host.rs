//! The host runs user-supplied functions (tool `execute`, a scripted model's function, and later
//! hook callbacks) for the core. `binding/` implements it with one threadsafe function into JS;
//! tests implement it with plain Rust closures.

use std::future::Future;
use std::pin::Pin;

use serde_json::Value;

/// A user function, as numbered by the host when the options were handed over.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Callable(pub u32);

/// Where the host puts the operation's `AbortSignal` among the call's arguments:
/// `args[arg][key] = signal`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SignalSlot {
    pub arg: usize,
    pub key: &'static str,
}

/// One call of a user function.
#[derive(Debug, Clone)]
pub struct HostCall {
    pub function: Callable,
    pub args: Vec<Value>,
    /// The caller-side operation (a `send`, `createAgent`, `close`) whose signal applies.
    pub scope: u32,
    pub signal: Option<SignalSlot>,
}

/// A user function threw, rejected, or returned something the host could not convert.
#[derive(Debug, Clone, PartialEq)]
pub struct HostError {
    /// `error.message` of what was thrown (or its string form).
    pub message: String,
    /// The host's handle for the thrown value, so it can be handed back unchanged.
    pub thrown: Option<u32>,
}

pub type HostFuture = Pin<Box<dyn Future<Output = Result<Option<Value>, HostError>> + Send>>;

pub trait Host: Send + Sync + 'static {
    /// Calls the function; resolves with what it returned (`None` for `undefined`).
    fn call(&self, call: HostCall) -> HostFuture;
}
