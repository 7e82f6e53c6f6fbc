//! The core's `Host`: `index.js` hands over `invoke(callJson) => replyJson | Promise<replyJson>`,
//! which calls the user function the call names. A session's futures are polled on the JS
//! thread (`local.rs`), so `invoke` is called directly.
//! JSON text crosses the boundary in both directions: it is cheaper than building objects
//! through napi, and the values land in the caller's own JS realm (Jest runs tests in a VM realm).

use std::sync::Arc;

use napi::bindgen_prelude::{Either, FunctionRef, Promise};
use napi::Env;
use serde::{Deserialize, Serialize};
use serde_json::value::RawValue;
use serde_json::{json, Value};

use super::local::Remote;
use crate::host::{AbortFuture, AbortReason, Host, HostCall, HostError, HostFuture};

/// `invoke` itself, for direct calls from a run polled on the JS thread.
pub type InvokeRef = FunctionRef<String, Either<String, Promise<String>>>;

/// `invoke` replies at once when the user function returned a plain value, and with a promise
/// otherwise: a synchronous reply saves the promise's extra trip through the event loop.
pub struct JsHost {
    invoke: Arc<InvokeRef>,
    /// For calls made off the JS thread (a log line from a webhook delivery, an abandoned
    /// hook's call finishing on a worker): they hop to the JS thread first.
    remote: Remote,
}

impl JsHost {
    /// Made on the JS thread, after [`super::local::init`].
    pub fn new(env: &Env, invoke: InvokeRef) -> napi::Result<Self> {
        let remote = Remote::of(env.raw()).ok_or_else(|| napi::Error::from_reason("the JS thread has no scheduler"))?;
        Ok(JsHost {
            invoke: Arc::new(invoke),
            remote,
        })
    }
}

/// Calls `invoke` when this thread is the JS thread polling a session's future; gives the
/// payload back otherwise.
fn call(invoke: &InvokeRef, payload: String) -> Result<napi::Result<Either<String, Promise<String>>>, String> {
    let Some(env) = super::local::current_env() else {
        return Err(payload);
    };
    Ok(invoke
        .borrow_back(&Env::from_raw(env))
        .and_then(|function| function.call(payload)))
}

fn lost(error: napi::Error) -> HostError {
    HostError {
        message: format!("the JavaScript callback could not be called: {}", error.reason),
        thrown: None,
    }
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
        let remote = self.remote.clone();
        Box::pin(async move {
            let payload = match call(&invoke, payload) {
                Ok(returned) => return reply(returned).await,
                Err(payload) => payload,
            };
            let (sender, receiver) = tokio::sync::oneshot::channel();
            remote.run(move |env| {
                let _ = super::local::spawn(env, async move {
                    let returned = call(&invoke, payload).unwrap_or_else(|_| {
                        Err(napi::Error::from_reason("it was called outside the JavaScript thread"))
                    });
                    let _ = sender.send(reply(returned).await);
                });
            });
            receiver
                .await
                .unwrap_or_else(|_| Err(lost(napi::Error::from_reason("its JavaScript thread has shut down"))))
        })
    }
}

/// Reads what `invoke` returned: its reply, or a promise of it. `invoke` never throws: it
/// catches and replies.
async fn reply(returned: napi::Result<Either<String, Promise<String>>>) -> Result<Option<Value>, HostError> {
    let text = match returned.map_err(lost)? {
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
}

/// What `invoke` is sent for a call; the arguments are written straight from the call.
#[derive(Serialize)]
struct CallPayload<'a> {
    #[serde(rename = "fn")]
    function: u32,
    args: &'a RawValue,
    scope: u32,
    signal: Option<SignalJson>,
    /// `[arg, key, message, thrown]`
    error: Option<(usize, &'static str, &'a str, Option<u32>)>,
    mock: bool,
}

/// `[arg, key]`, or `[arg, key, dispatch, last, linked]` for a dispatch's signal.
#[derive(Serialize)]
#[serde(untagged)]
enum SignalJson {
    Scope(usize, &'static str),
    Dispatch(usize, &'static str, u32, bool, bool),
}

impl Host for JsHost {
    fn call(&self, call: HostCall) -> HostFuture {
        // Slots are short arrays: `signal: [arg, key, dispatch, last, linked]`,
        // `error: [arg, key, message, thrown]`.
        let payload = CallPayload {
            function: call.function.0,
            args: call.args.json(),
            scope: call.scope,
            signal: call.signal.map(|slot| match slot.dispatch {
                Some(dispatch) => SignalJson::Dispatch(slot.arg, slot.key, dispatch.id, dispatch.last, dispatch.linked),
                None => SignalJson::Scope(slot.arg, slot.key),
            }),
            error: call
                .error
                .as_ref()
                .map(|slot| (slot.arg, slot.key, slot.message.as_str(), slot.thrown)),
            mock: call.mock,
        };
        self.request(serde_json::to_string(&payload).unwrap_or_default())
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
        let request = self.request(serde_json::to_string(&payload).unwrap_or_default());
        Box::pin(async move {
            if let Err(error) = request.await {
                tracing::warn!(error = %error.message, "could not abort a hook signal");
            }
        })
    }
}
