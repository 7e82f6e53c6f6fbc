//! The core's `Host`, made of four functions `lib/wire.js` hands over: `invoke` calls a user
//! function (its arguments: [`InvokeArgs`]), `abortDispatch` aborts a dispatch's signal,
//! `stepGenerator` advances a generator a tool returned, and `nextTurn` replies on a later turn
//! of the event loop. Each replies at once, or later through `settleReply` ([`super::later`]).
//! A session's futures are polled on the JS thread (`local.rs`), so they are called directly.
//! A call's arguments cross as JSON text: it is cheaper than building objects through napi, and
//! the values land in the caller's own JS realm (Jest runs tests in a VM realm). The rest of a
//! call crosses as plain numbers and strings, with nothing to parse.

use std::sync::Arc;

use napi::bindgen_prelude::{Either, FnArgs, FunctionRef};
use napi::Env;
use napi_derive::napi;
use serde::Deserialize;
use serde_json::Value;

use super::later;
use super::local::Remote;
use crate::host::{
    AbortFuture, AbortReason, DispatchId, GeneratorId, Host, HostCall, HostError, HostFuture, ScopeId, Step, ThrownId,
};
use crate::text::parse_js_json;

/// What `invoke` and the other functions return: a reply at once, or the call's token, when
/// the reply will come through `settleReply(token, reply)`.
#[napi]
pub type Returned = Either<String, u32>;

/// The arguments of `invoke`, in order (described here only: the binding's types, the
/// `createSession` signature and `lib/wire.js` point here):
/// - `fn`: the user function's number ([`crate::host::Callable`]);
/// - `argsJson`: its arguments, the text of one JSON array ([`crate::host::Args`]);
/// - `scope`: the caller-side operation ([`ScopeId`]; 0 is none);
/// - `reply`: how its return is read ([`Reply`]);
/// - `signalArg`, `signalKey`: `args[signalArg][signalKey]` gets an `AbortSignal` (`signalArg`
///   is -1 for none, [`crate::host::SignalSlot`]);
/// - `dispatch`: that signal is dispatch `dispatch`'s, made on first use; `null` for the
///   scope's own signal;
/// - `last`: the call is the dispatch's last ([`crate::host::DispatchSignal`]);
/// - `linked`: the dispatch's signal also follows the scope's;
/// - `errorJson`: `[arg, key, message, thrown]`, `args[arg][key]` gets the error (the thrown
///   value itself when `thrown` names one, [`crate::host::ErrorSlot`]), or `null`;
/// - `token`: what `invoke` returns instead of a reply when the function returned a promise,
///   and what it then settles ([`super::later`]).
///
/// The reply is the return as `reply` reads it, `""` for `undefined`, or `!` and
/// `{ message, thrown? }` when the function threw (see [`reply`]).
#[napi]
pub type InvokeArgs = (
    u32,
    String,
    u32,
    Reply,
    i32,
    Option<&'static str>,
    Option<u32>,
    bool,
    bool,
    Option<String>,
    u32,
);
pub type InvokeRef = FunctionRef<FnArgs<InvokeArgs>, Returned>;

/// `(scope, dispatch, event, timeoutMs)`: `event` is `''` for a tool's timeout.
#[napi]
pub type AbortArgs = (u32, u32, &'static str, u32);
pub type AbortRef = FunctionRef<FnArgs<AbortArgs>, Returned>;

/// `(scope, generator, finish, token)`: `finish` calls `return()` instead of `next()`; an async
/// generator's step is settled with `token`.
#[napi]
pub type StepArgs = (u32, u32, bool, u32);
pub type StepRef = FunctionRef<FnArgs<StepArgs>, Returned>;

/// [`crate::host::Reply`] as it crosses: `binding.d.ts` carries its numbers, and `lib/wire.js`
/// reads them from the binding (`Reply.Tool`).
#[napi]
pub enum Reply {
    Data,
    DataWithMock,
    Json,
    Tool,
    Handler,
}

impl From<crate::host::Reply> for Reply {
    fn from(reply: crate::host::Reply) -> Self {
        match reply {
            crate::host::Reply::Data => Reply::Data,
            crate::host::Reply::DataWithMock => Reply::DataWithMock,
            crate::host::Reply::Json => Reply::Json,
            crate::host::Reply::Tool => Reply::Tool,
            crate::host::Reply::Handler => Reply::Handler,
        }
    }
}

/// `(token)`: settled with `''` on a later turn of the event loop (`setImmediate`).
pub type TurnRef = FunctionRef<FnArgs<(u32,)>, Returned>;

/// The wrapper's functions the host calls.
pub struct Functions {
    pub invoke: InvokeRef,
    pub abort: AbortRef,
    pub step: StepRef,
    pub next_turn: TurnRef,
}

/// `invoke` replies at once when the user function returned a plain value, and with a promise
/// otherwise: a synchronous reply saves the promise's extra trip through the event loop.
pub struct JsHost {
    functions: Arc<Functions>,
    /// For calls made off the JS thread (a log line from a webhook delivery, an abandoned
    /// hook's call finishing on a worker): they hop to the JS thread first.
    remote: Remote,
}

impl JsHost {
    /// Made on the JS thread, after [`super::local::init`].
    pub fn new(env: &Env, functions: Functions) -> napi::Result<Self> {
        let remote = Remote::of(env.raw()).ok_or_else(|| napi::Error::from_reason("the JS thread has no scheduler"))?;
        Ok(JsHost {
            functions: Arc::new(functions),
            remote,
        })
    }
}

/// One crossing into JS: which function, with what.
enum Crossing {
    Call(HostCall),
    Abort {
        scope: ScopeId,
        dispatch: DispatchId,
        event: &'static str,
        timeout_ms: u32,
    },
    Step {
        scope: ScopeId,
        generator: GeneratorId,
        step: Step,
    },
    /// A turn of the event loop.
    Turn,
}

impl Crossing {
    fn make(self, env: &Env, functions: &Functions, token: u32) -> napi::Result<Returned> {
        match self {
            Crossing::Call(call) => {
                let (signal_arg, signal_key, dispatch, last, linked) = match call.signal {
                    None => (-1, None, None, false, false),
                    Some(slot) => {
                        let arg = i32::try_from(slot.arg).unwrap_or(i32::MAX);
                        match slot.dispatch {
                            None => (arg, Some(slot.key), None, false, false),
                            Some(signal) => (arg, Some(slot.key), Some(signal.id.0), signal.last, signal.linked),
                        }
                    }
                };
                let error = call.error.as_ref().map(|slot| {
                    let thrown = slot.thrown.map(|thrown| thrown.0);
                    serde_json::to_string(&(slot.arg, slot.key, &slot.message, thrown)).unwrap_or_default()
                });
                let args = (
                    call.function.0,
                    call.args.into_json(),
                    call.scope.0,
                    Reply::from(call.reply),
                    signal_arg,
                    signal_key,
                    dispatch,
                    last,
                    linked,
                    error,
                    token,
                );
                functions.invoke.borrow_back(env)?.call(args.into())
            }
            Crossing::Abort {
                scope,
                dispatch,
                event,
                timeout_ms,
            } => functions
                .abort
                .borrow_back(env)?
                .call((scope.0, dispatch.0, event, timeout_ms).into()),
            Crossing::Step { scope, generator, step } => functions
                .step
                .borrow_back(env)?
                .call((scope.0, generator.0, step == Step::Return, token).into()),
            Crossing::Turn => functions.next_turn.borrow_back(env)?.call((token,).into()),
        }
    }

    /// [`Crossing::make`] inside a handle scope of its own: a run polled synchronously makes
    /// many crossings in one turn of the event loop, and without one the handles of every
    /// call's arguments and reply (a scripted model's whole conversation, each turn) would be
    /// kept until the turn ends. What comes back is already Rust's: a reply, or the wait for
    /// the one `settleReply` will bring.
    fn make_scoped(self, env: &Env, functions: &Functions) -> Result<Answer, HostError> {
        let mut scope = std::ptr::null_mut();
        // SAFETY: on the JS thread with its live env; the scope is closed below, after
        // everything made in it was converted.
        napi::check_status!(unsafe { napi::sys::napi_open_handle_scope(env.raw(), &mut scope) }).map_err(lost)?;
        let expected = later::Expected::reserve();
        let made = self.make(env, functions, expected.token());
        // SAFETY: the scope opened above, still the innermost: `make` closes what it opens.
        unsafe { napi::sys::napi_close_handle_scope(env.raw(), scope) };
        match made.map_err(lost)? {
            Either::A(reply) => Ok(Answer::Now(reply)),
            Either::B(_) => Ok(Answer::Later(expected.later())),
        }
    }
}

/// What a crossing answered: its reply, or the wait for one.
enum Answer {
    Now(String),
    Later(later::Later),
}

fn lost(error: napi::Error) -> HostError {
    HostError {
        message: format!("the JavaScript callback could not be called: {}", error.reason),
        thrown: None,
    }
}

/// The JS thread went away before a call's reply came.
fn thread_gone() -> HostError {
    lost(napi::Error::from_reason("its JavaScript thread has shut down"))
}

/// A failure's reply, after its `!`.
#[derive(Deserialize)]
struct Failure {
    message: String,
    thrown: Option<u32>,
}

impl JsHost {
    fn request(&self, crossing: Crossing) -> HostFuture {
        let functions = self.functions.clone();
        let remote = self.remote.clone();
        Box::pin(async move {
            if let Some(env) = super::local::current_env() {
                let returned = crossing.make_scoped(&Env::from_raw(env), &functions);
                return reply(returned).await;
            }
            let (sender, receiver) = tokio::sync::oneshot::channel();
            remote.run(move |env| {
                let _ = super::local::spawn(env, async move {
                    let returned = crossing.make_scoped(&Env::from_raw(env), &functions);
                    let _ = sender.send(reply(returned).await);
                });
            });
            receiver.await.unwrap_or_else(|_| Err(thread_gone()))
        })
    }
}

/// Reads what `invoke` answered, at once or later (it never throws: it catches and replies):
/// `""` for `undefined`, `!` and `{ message, thrown? }` for a failure, else the JSON of the value.
async fn reply(answer: Result<Answer, HostError>) -> Result<Option<Value>, HostError> {
    let text = match answer? {
        Answer::Now(text) => text,
        Answer::Later(later) => later.await.ok_or_else(thread_gone)?,
    };
    let unreadable = |error: serde_json::Error| HostError {
        message: format!("the JavaScript callback sent an unreadable reply: {error}"),
        thrown: None,
    };
    if text.is_empty() {
        return Ok(None);
    }
    if let Some(failure) = text.strip_prefix('!') {
        let failure: Failure = parse_js_json(failure).map_err(unreadable)?;
        return Err(HostError {
            message: failure.message,
            thrown: failure.thrown.map(ThrownId),
        });
    }
    parse_js_json(&text).map(Some).map_err(unreadable)
}

impl Host for JsHost {
    fn call(&self, call: HostCall) -> HostFuture {
        self.request(Crossing::Call(call))
    }

    fn abort(&self, scope: ScopeId, dispatch: DispatchId, reason: AbortReason) -> AbortFuture {
        // A tool's timeout crosses as the event `''`: the wrapper makes its own error for it.
        let (event, timeout_ms) = match reason {
            AbortReason::HookTimeout { event, timeout_ms } => (event, timeout_ms),
            AbortReason::ToolTimeout { timeout_ms } => ("", timeout_ms),
        };
        let request = self.request(Crossing::Abort {
            scope,
            dispatch,
            event,
            timeout_ms,
        });
        Box::pin(async move {
            if let Err(error) = request.await {
                tracing::warn!(error = %error.message, "could not abort a hook signal");
            }
        })
    }

    /// On the JS thread the call is made now; elsewhere it hops there first.
    fn call_detached(&self, call: HostCall) {
        self.detached(Crossing::Call(call));
    }

    fn step(&self, scope: ScopeId, generator: GeneratorId, step: Step) -> HostFuture {
        self.request(Crossing::Step { scope, generator, step })
    }

    /// Made now on the JS thread (a generator given up while its run is polled: its scope is
    /// still there); elsewhere it hops there first.
    fn step_detached(&self, scope: ScopeId, generator: GeneratorId, step: Step) {
        self.detached(Crossing::Step { scope, generator, step });
    }

    fn loop_held_for(&self) -> Option<std::time::Duration> {
        super::local::loop_held_for()
    }

    fn next_turn(&self) -> AbortFuture {
        let request = self.request(Crossing::Turn);
        Box::pin(async move {
            if let Err(error) = request.await {
                tracing::warn!(error = %error.message, "could not give the event loop a turn");
            }
        })
    }
}

impl JsHost {
    /// Makes the crossing and lets it finish on its own: nobody waits for what it returns.
    fn detached(&self, crossing: Crossing) {
        let functions = self.functions.clone();
        match super::local::current_env() {
            Some(env) => {
                let _ = crossing.make_scoped(&Env::from_raw(env), &functions);
            }
            None => self.remote.run(move |env| {
                let _ = crossing.make_scoped(&Env::from_raw(env), &functions);
            }),
        }
    }
}
