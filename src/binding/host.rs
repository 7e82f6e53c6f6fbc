//! The core's `Host`, implemented with one threadsafe function per agent: `index.js` hands over
//! `invoke(callJson) => Promise<replyJson>`, which calls the user function the call names.
//! JSON text crosses the boundary in both directions: it is cheaper than building objects
//! through napi, and the values land in the caller's own JS realm (Jest runs tests in a VM realm).

use std::sync::Arc;

use napi::bindgen_prelude::{Either, FunctionRef, Promise};
use napi::threadsafe_function::ThreadsafeFunction;
use napi::Env;
use napi::Status;
use serde::Deserialize;
use serde_json::{json, Value};

use crate::host::{AbortFuture, AbortReason, Host, HostCall, HostError, HostFuture};

/// `CalleeHandled = false` (the JS side is a plain function) and `Weak = true` (a stored agent
/// never keeps Node alive; a pending call is kept alive by the promise awaiting it). `invoke`
/// replies at once when the user function returned a plain value, and with a promise otherwise:
/// a synchronous reply saves the promise's extra trip through the event loop.
pub type InvokeFn = ThreadsafeFunction<String, Either<String, Promise<String>>, String, Status, false, true>;

/// `invoke` itself, for direct calls from a run polled on the JS thread.
pub type InvokeRef = FunctionRef<String, Either<String, Promise<String>>>;

pub struct JsHost {
    invoke: Arc<InvokeFn>,
    direct: Arc<InvokeRef>,
}

impl JsHost {
    pub fn new(invoke: InvokeFn, direct: InvokeRef) -> Self {
        JsHost {
            invoke: Arc::new(invoke),
            direct: Arc::new(direct),
        }
    }
}

/// Calls `invoke` directly, when this thread is the JS thread polling a run.
fn call_directly(direct: &InvokeRef, payload: &str) -> Option<napi::Result<Either<String, Promise<String>>>> {
    let env = super::local::current_env()?;
    let env = Env::from_raw(env);
    Some(
        direct
            .borrow_back(&env)
            .and_then(|function| function.call(payload.to_string())),
    )
}

#[derive(Deserialize)]
struct Reply {
    ok: bool,
    /// Absent for `undefined`; `null` is a value.
    #[serde(default, deserialize_with = "present")]
    value: Option<Value>,
    message: Option<String>,
    thrown: Option<u32>,
}

fn present<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Option<Value>, D::Error> {
    Value::deserialize(deserializer).map(Some)
}

impl JsHost {
    /// Sends one JSON request to `invoke` and reads its JSON reply.
    fn request(&self, payload: String) -> HostFuture {
        let invoke = self.invoke.clone();
        let direct = self.direct.clone();
        Box::pin(async move {
            let lost = |error: napi::Error| HostError {
                message: format!("the JavaScript callback could not be called: {}", error.reason),
                thrown: None,
            };
            // On the JS thread (a run being polled there) the call is direct; elsewhere it goes
            // through the threadsafe function. `invoke` never throws: it catches and replies.
            let returned = match call_directly(&direct, &payload) {
                Some(returned) => returned.map_err(lost)?,
                None => invoke.call_async_catch(payload).await.map_err(lost)?,
            };
            let text = match returned {
                Either::A(text) => text,
                Either::B(promise) => promise.await.map_err(lost)?,
            };
            let reply: Reply = serde_json::from_str(&text).map_err(|error| HostError {
                message: format!("the JavaScript callback sent an unreadable reply: {error}"),
                thrown: None,
            })?;
            if reply.ok {
                Ok(reply.value)
            } else {
                Err(HostError {
                    message: reply.message.unwrap_or_default(),
                    thrown: reply.thrown,
                })
            }
        })
    }
}

impl Host for JsHost {
    fn call(&self, call: HostCall) -> HostFuture {
        // Slots are short arrays: `signal: [arg, key, dispatch, last, linked]`,
        // `error: [arg, key, message, thrown]`.
        let payload = json!({
            "fn": call.function.0,
            "args": call.args,
            "scope": call.scope,
            "signal": call.signal.map(|slot| match slot.dispatch {
                Some(dispatch) => json!([slot.arg, slot.key, dispatch.id, dispatch.last, dispatch.linked]),
                None => json!([slot.arg, slot.key]),
            }),
            "error": call.error.map(|slot| json!([slot.arg, slot.key, slot.message, slot.thrown])),
            "mock": call.mock,
        });
        self.request(payload.to_string())
    }

    fn abort(&self, scope: u32, dispatch: u32, reason: AbortReason) -> AbortFuture {
        let AbortReason::HookTimeout { event, timeout_ms } = reason;
        let payload = json!({
            "op": "abort",
            "scope": scope,
            "dispatch": dispatch,
            "event": event,
            "timeoutMs": timeout_ms,
        });
        let request = self.request(payload.to_string());
        Box::pin(async move {
            if let Err(error) = request.await {
                tracing::warn!(error = %error.message, "could not abort a hook signal");
            }
        })
    }
}
