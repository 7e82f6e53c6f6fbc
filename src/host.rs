//! The host runs user-supplied functions (tools' `execute`, a scripted model's function, hook
//! callbacks, the permission function) for the core. `binding/` implements it with direct calls
//! into JS on the JS thread; tests implement it with plain Rust closures.

use std::future::Future;
use std::pin::Pin;

use serde::Serialize;
use serde_json::Value;

/// A user function, as numbered by the host when the options were handed over.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Callable(pub u32);

/// A caller-side operation (a `send`, `createAgent`, `close`, `resume`), as numbered by the
/// host: its signal, and the values its user functions threw, live there.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct ScopeId(pub u32);

impl ScopeId {
    /// No operation: the host falls back to a scope of its own (a log line, a deferred
    /// result published from outside any run).
    pub const NONE: ScopeId = ScopeId(0);
}

/// A hook dispatch (or a tool's budget), numbered by the dispatcher: the calls of one dispatch
/// share one signal, which [`Host::abort`] aborts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct DispatchId(pub u32);

/// A value a user function threw, kept by the host in the call's scope so it can be handed
/// back unchanged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct ThrownId(pub u32);

/// A generator a tool returned, kept by the host in the call's scope for [`Host::step`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GeneratorId(pub u32);

/// Where the host puts an `AbortSignal` among the call's arguments: `args[arg][key] = signal`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SignalSlot {
    pub arg: usize,
    pub key: &'static str,
    /// Without a dispatch: the scope's own signal (aborted with the caller's reason). With one:
    /// a signal made for that dispatch, aborted by the scope's signal or by [`Host::abort`].
    pub dispatch: Option<DispatchSignal>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DispatchSignal {
    pub id: DispatchId,
    /// This call is the dispatch's last: the host may forget the signal once it settles.
    pub last: bool,
    /// Also abort when the scope's signal aborts (a caller's signal). Unlinked signals abort
    /// only through [`Host::abort`], e.g. hooks that run after a run was aborted.
    pub linked: bool,
}

/// Where the host puts an `Error` built from a failure: `args[arg][key] = error`, the thrown
/// value itself when `thrown` names one that is an error, else a new `Error(message)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ErrorSlot {
    pub arg: usize,
    pub key: &'static str,
    pub message: String,
    pub thrown: Option<ThrownId>,
}

/// A call's arguments as the text of one JSON array, written once: the JS side parses it in
/// its own realm, and an event's fields go in as they were serialized, not rebuilt per call.
#[derive(Debug, Clone)]
pub struct Args(String);

impl Args {
    /// `values` serialized as an array: a slice, a tuple, a `Vec`.
    pub fn of(values: &impl Serialize) -> Self {
        match serde_json::to_string(values) {
            Ok(text) if text.starts_with('[') => Args(text),
            _ => Args("[]".into()),
        }
    }

    /// One argument: the JSON object text `object`.
    pub fn object(object: &str) -> Self {
        let mut text = String::with_capacity(object.len() + 2);
        text.push('[');
        text.push_str(object);
        text.push(']');
        Args(text)
    }

    pub fn into_json(self) -> String {
        self.0
    }

    /// The arguments as values, for a host written in Rust.
    pub fn values(&self) -> Vec<Value> {
        serde_json::from_str(&self.0).unwrap_or_default()
    }
}

/// How the host reads what a function returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reply {
    /// Plain data, read from own data properties only (no getters, no `toJSON`, no functions
    /// or symbols): a decision or a hook output. Anything else fails the call, so a gating
    /// event denies.
    Data,
    /// [`Reply::Data`], and `args[0]` gets a `mock(result)` function: the reply is then
    /// `{ returned?, mocked? }`, what the function returned and the first result it mocked.
    DataWithMock,
    /// JSON as `JSON.stringify` makes it (a scripted model's turn).
    Json,
    /// A tool's return: `{ returned }` (JSON as `JSON.stringify` makes it), `{ generator: id }`
    /// for a generator the host keeps for [`Host::step`], or `{ invalid: what }` for a value
    /// JSON would silently flatten (a function, a symbol, an iterator that is not a generator).
    Tool,
    /// An object with a `requestConfirmation` method (what `confirmationHandlerFactory`
    /// returns): the host keeps the method and replies `{ function: n }`, its number.
    Handler,
}

/// One call of a user function.
#[derive(Debug, Clone)]
pub struct HostCall {
    pub function: Callable,
    pub args: Args,
    /// The caller-side operation (a `send`, `createAgent`, `close`) the call belongs to.
    pub scope: ScopeId,
    pub signal: Option<SignalSlot>,
    pub error: Option<ErrorSlot>,
    pub reply: Reply,
}

impl HostCall {
    /// A call whose reply is read as plain data ([`Reply::Data`]), the safe default.
    pub fn new(function: Callable, args: Args, scope: ScopeId) -> Self {
        HostCall {
            function,
            args,
            scope,
            signal: None,
            error: None,
            reply: Reply::Data,
        }
    }
}

/// What to do with a generator a tool returned.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// `generator.next()`: the reply is `{ done, value }` or `{ done, invalid }`.
    Next,
    /// `generator.return()`: lets its `finally` blocks run once the call is given up.
    Return,
}

/// A user function threw, rejected, or returned something the host could not convert.
#[derive(Debug, Clone, PartialEq)]
pub struct HostError {
    /// `error.message` of what was thrown (or its string form).
    pub message: String,
    /// The host's handle for the thrown value, so it can be handed back unchanged.
    pub thrown: Option<ThrownId>,
}

/// Why the core aborts a dispatch's signal.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AbortReason {
    /// The event's budget ran out: the reason is `HookTimeoutError(event, timeoutMs)`.
    HookTimeout { event: &'static str, timeout_ms: u32 },
    /// A tool ran past `toolTimeoutMs`: the reason is an `SdkError` (`TOOL_TIMEOUT`).
    ToolTimeout { timeout_ms: u32 },
}

pub type HostFuture = Pin<Box<dyn Future<Output = Result<Option<Value>, HostError>> + Send>>;
pub type AbortFuture = Pin<Box<dyn Future<Output = ()> + Send>>;

pub trait Host: Send + Sync + 'static {
    /// Calls the function; resolves with what it returned (`None` for `undefined`).
    fn call(&self, call: HostCall) -> HostFuture;

    /// Aborts the signal of `dispatch` with `reason`; resolves once it is aborted, so an error
    /// published afterwards can refer to the reason.
    fn abort(&self, scope: ScopeId, dispatch: DispatchId, reason: AbortReason) -> AbortFuture;

    /// Calls the function and lets it finish on its own (a log line): nobody waits for it, and
    /// what it returns or throws is ignored.
    fn call_detached(&self, call: HostCall) {
        let pending = self.call(call);
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _ = pending.await;
            });
        }
    }

    /// Gives the host's event loop a turn (its timers, I/O and other callbacks run) and
    /// resolves after it: the core awaits it between synchronous steps (see `pace.rs`). A
    /// host without a loop of its own lets the runtime's other tasks run.
    fn next_turn(&self) -> AbortFuture {
        Box::pin(tokio::task::yield_now())
    }

    /// How long the host's event loop has been running callbacks since its last turn, when the
    /// host can tell: a run woken by a model's answer or a timer starts on a fresh turn, and owes
    /// the loop none until a slice has passed. `None`: the pace counts from the run's own turns.
    fn loop_held_for(&self) -> Option<std::time::Duration> {
        None
    }

    /// Advances generator `generator` of `scope`, which a [`Reply::Tool`] call returned.
    fn step(&self, scope: ScopeId, generator: GeneratorId, step: Step) -> HostFuture {
        let _ = (scope, generator, step);
        Box::pin(async {
            Err(HostError {
                message: "this host does not run generators".into(),
                thrown: None,
            })
        })
    }

    /// [`Host::step`], left to finish on its own: a generator given up (its call timed out or
    /// its run was aborted) is finished with [`Step::Return`] from wherever the core lets go of
    /// it, a `Drop` included, so its `finally` blocks run.
    fn step_detached(&self, scope: ScopeId, generator: GeneratorId, step: Step) {
        let pending = self.step(scope, generator, step);
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                let _ = pending.await;
            });
        }
    }
}

/// A host with no JS functions (hooks run outside any agent, from the store): every call fails
/// with its message, and an abort has nothing to abort.
pub struct NoFunctions(pub &'static str);

impl Host for NoFunctions {
    fn call(&self, _call: HostCall) -> HostFuture {
        let message = self.0;
        Box::pin(async move {
            Err(HostError {
                message: message.into(),
                thrown: None,
            })
        })
    }

    fn abort(&self, _scope: ScopeId, _dispatch: DispatchId, _reason: AbortReason) -> AbortFuture {
        Box::pin(async {})
    }
}
