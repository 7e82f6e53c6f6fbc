//! `NativeAgent` and `NativeRun`: the session and one of its runs, as JS classes.

use std::collections::HashMap;
use std::sync::Arc;

use napi::bindgen_prelude::*;
use napi_derive::napi;
use serde_json::Value;
use tokio::sync::{mpsc, Mutex};

use super::host::{InvokeFn, JsHost};
use super::local::{self, PollFn};
use crate::agent::config::ENV_VARS;
use crate::agent::session::next_batch;
use crate::agent::{AgentConfig, RunControl, SendOptions, Session, StreamEvent};

/// How long a pull of events waits for more after the first: a stream's consumer gets its
/// events at most this late, in far fewer crossings into JS.
const BATCH_WINDOW: std::time::Duration = std::time::Duration::from_millis(1);
use crate::error::SdkError;

fn error_json(error: &SdkError) -> String {
    serde_json::to_string(error).unwrap_or_default()
}

/// A created session, or the JSON of the error that prevented it.
#[napi]
pub fn create_session(
    options: String,
    invoke: Function<String, Either<String, Promise<String>>>,
    environment: Object,
) -> Result<Either<NativeAgent, String>> {
    let options: Value = match serde_json::from_str(&options) {
        Ok(options) => options,
        Err(error) => {
            return Ok(Either::B(error_json(&SdkError::config(format!(
                "options could not be read: {error}"
            )))))
        }
    };
    let mut variables = HashMap::new();
    for name in ENV_VARS {
        if let Some(value) = environment.get::<String>(name)? {
            variables.insert(name.to_string(), value);
        }
    }
    let config = match AgentConfig::from_options(&options, &variables) {
        Ok(config) => config,
        Err(error) => return Ok(Either::B(error_json(&error))),
    };
    let threadsafe: InvokeFn = invoke
        .build_threadsafe_function()
        .callee_handled::<false>()
        .weak::<true>()
        .build()?;
    // Polling a run: the callback polls it, then `invoke` is given a no-op request.
    let poll: PollFn = invoke
        .build_threadsafe_function::<u64>()
        .callee_handled::<false>()
        .weak::<true>()
        .build_callback(|context| {
            local::poll(context.env.raw(), context.value);
            Ok(r#"{"op":"poll"}"#.to_string())
        })?;
    let host = JsHost::new(threadsafe, invoke.create_ref()?);
    Ok(Either::A(NativeAgent {
        session: Session::new(config, Arc::new(host)),
        poll: Arc::new(poll),
    }))
}

#[napi]
pub struct NativeAgent {
    session: Arc<Session>,
    poll: Arc<PollFn>,
}

#[napi]
impl NativeAgent {
    #[napi(getter)]
    pub fn session_id(&self) -> String {
        self.session.id.clone()
    }

    #[napi(getter)]
    pub fn is_closed(&self) -> bool {
        self.session.is_closed()
    }

    /// The environment variables `send`, `start` and `close` want (see `Session::environment_names`).
    #[napi(getter)]
    pub fn environment_names(&self) -> Vec<String> {
        self.session.environment_names()
    }

    /// The conversation as JSON text.
    #[napi]
    pub fn messages(&self) -> String {
        serde_json::to_string(&self.session.messages()).unwrap_or_else(|_| "[]".into())
    }

    /// Starts a run, or returns the JSON of the error that refused it.
    #[napi]
    pub fn send(
        &self,
        message: String,
        scope: u32,
        max_turns: Option<f64>,
        environment: HashMap<String, String>,
    ) -> Either<NativeRun, String> {
        let message: Value = match serde_json::from_str(&message) {
            Ok(message) => message,
            Err(error) => {
                return Either::B(error_json(&SdkError::new(
                    crate::error::ErrorCode::InvalidInput,
                    format!("message could not be read: {error}"),
                )))
            }
        };
        let max_turns = match max_turns {
            None => None,
            Some(n) if n.fract() == 0.0 && (1.0..=2_147_483_647.0).contains(&n) => Some(n as u32),
            Some(_) => {
                return Either::B(error_json(&SdkError::new(
                    crate::error::ErrorCode::InvalidInput,
                    "maxTurns must be a positive integer no greater than 2147483647",
                )))
            }
        };
        match self.session.send(
            &message,
            SendOptions {
                max_turns,
                scope,
                environment,
            },
        ) {
            Ok((handle, run)) => {
                local::spawn(self.poll.clone(), run);
                Either::A(NativeRun {
                    events: Mutex::new(handle.events),
                    control: handle.control,
                })
            }
            Err(error) => Either::B(error_json(&error)),
        }
    }

    #[napi]
    pub fn abort(&self, reason: String) {
        self.session.abort(reason);
    }

    /// Runs SessionStart; resolves `null`, or the JSON of the error that stopped it.
    #[napi]
    pub async fn start(&self, scope: u32, environment: HashMap<String, String>) -> Option<String> {
        let session = self.session.clone();
        session
            .start(scope, environment)
            .await
            .err()
            .map(|error| error_json(&error))
    }

    /// Resolves `null`, or the JSON of the error that stopped the close.
    #[napi]
    pub async fn close(&self, scope: u32, environment: HashMap<String, String>) -> Option<String> {
        let session = self.session.clone();
        session
            .close(scope, environment)
            .await
            .err()
            .map(|error| error_json(&error))
    }
}

#[napi]
pub struct NativeRun {
    events: Mutex<mpsc::UnboundedReceiver<StreamEvent>>,
    control: Arc<RunControl>,
}

#[napi]
impl NativeRun {
    /// The events published since the last call, as a JSON array; waits for at least one,
    /// then up to a millisecond for more. `null` once the run has ended and every event was taken.
    #[napi]
    pub async fn next(&self) -> Option<String> {
        let mut events = self.events.lock().await;
        let batch = next_batch(&mut events, BATCH_WINDOW).await?;
        Some(serde_json::to_string(&batch).unwrap_or_else(|_| "[]".into()))
    }

    /// Resolves once the run has published its last event.
    #[napi]
    pub async fn finished(&self) {
        self.control.finished().await
    }

    #[napi]
    pub fn abort(&self, reason: String) {
        self.control.abort(reason);
    }
}
