//! `NativeAgent` and `NativeRun`: the session and one of its runs, as JS classes.

use std::collections::HashMap;
use std::rc::Rc;
use std::sync::{Arc, Mutex};

use napi::bindgen_prelude::*;
use napi_derive::napi;
use serde_json::Value;

use super::host::{AbortArgs, Functions, InvokeArgs, JsHost, Returned, StepArgs};
use super::{local, telemetry};
use crate::agent::config::store_of;
use crate::agent::deferred;
use crate::agent::durable::{self, Stored};
use crate::agent::events::Published;
use crate::agent::{AgentConfig, EventReader, RunControl, SendOptions, Session};
use crate::error::{ErrorCode, SdkError};
use crate::host::ScopeId;
use crate::model::ENV_VARS;
use crate::offload::offload;
use crate::text::parse_js_json;

fn error_json(error: &SdkError) -> String {
    serde_json::to_string(error).unwrap_or_default()
}

/// A promise of `null` when `work` succeeds, else of its error's JSON. Node stays alive until
/// it settles: `work` (SessionStart, a close) may wait on webhooks and timers of the workers.
fn failure_of<'env>(
    env: &'env Env,
    work: impl std::future::Future<Output = std::result::Result<(), SdkError>> + 'static,
) -> Result<PromiseRaw<'env, Option<String>>> {
    let keep_alive = local::KeepAlive::new(env.raw())?;
    local::promise(env, async move {
        let failure = work.await.err().map(|error| error_json(&error));
        drop(keep_alive);
        failure
    })
}

/// The values of `names` that are set in `environment` (the caller's `process.env`), read now,
/// on the JS thread: Rust threads never read the process environment while JS may change it.
fn read_environment(environment: &Object, names: &[impl AsRef<str>]) -> Result<HashMap<String, String>> {
    let mut values = HashMap::new();
    for name in names {
        // `process.env.constructor` is Object's: a name only the prototype has is unset.
        if let Some(Either::A(value)) = environment.get::<Either<String, Unknown>>(name.as_ref())? {
            values.insert(name.as_ref().to_string(), value);
        }
    }
    Ok(values)
}

/// A stored session, read by `loadSession` for `resumeAgent`; taken by `createSession`.
#[napi]
pub struct NativeStored {
    stored: Mutex<Option<Stored>>,
}

impl NativeStored {
    fn take(&self) -> Option<Stored> {
        self.stored
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .take()
    }
}

/// Reads session `sessionId` from the store `options` name, off the JS thread: the stored
/// session, or the JSON of the error (`SESSION_NOT_FOUND`, `STORE_ERROR`, a `ConfigError`).
#[napi(ts_return_type = "Promise<NativeStored | string>")]
pub async fn load_session(options: String, session_id: String) -> Either<NativeStored, String> {
    let store = parse_js_json::<Value>(&options)
        .map_err(|error| SdkError::config(format!("options could not be read: {error}")))
        .and_then(|options| store_of(&options));
    let loaded = match store {
        Ok(store) => durable::load(&store, &session_id).await,
        Err(error) => Err(error),
    };
    match loaded {
        Ok(stored) => Either::A(NativeStored {
            stored: Mutex::new(Some(stored)),
        }),
        Err(error) => Either::B(error_json(&error)),
    }
}

/// `approvalToken(...)`: `{ "fingerprint", "token" }` of `input` (JSON), or `{ "error" }`.
#[napi]
pub fn approval_token(
    secret: String,
    session_id: String,
    tool_call_id: String,
    tool_name: String,
    input: String,
) -> String {
    let made = parse_js_json::<Value>(&input)
        .map_err(|error| format!("input could not be read: {error}"))
        .and_then(|input| crate::agent::approvals::token_for(&secret, &session_id, &tool_call_id, &tool_name, &input));
    match made {
        Ok((fingerprint, token)) => serde_json::json!({ "fingerprint": fingerprint, "token": token }).to_string(),
        Err(message) => serde_json::json!({ "error": SdkError::new(ErrorCode::InvalidInput, message) }).to_string(),
    }
}

/// `drainOutbox({ store })`: tries every queued notification of the store once now. `environment`
/// is `process.env` as JSON (the header templates of rows queued by other processes may name any
/// variable). Resolves `{ "drained": { delivered, failed, remaining } }` or `{ "error": … }`.
#[napi(ts_return_type = "Promise<string>")]
pub async fn drain_outbox(options: String, environment: String) -> String {
    let drained = async {
        let options = parse_js_json::<Value>(&options)
            .map_err(|error| SdkError::config(format!("options could not be read: {error}")))?;
        let config = store_of(&options)?;
        let environment: HashMap<String, String> = parse_js_json::<HashMap<String, Value>>(&environment)
            .map(|variables| {
                variables
                    .into_iter()
                    .filter_map(|(name, value)| value.as_str().map(|value| (name, value.to_owned())))
                    .collect()
            })
            .unwrap_or_default();
        durable::drain_outbox(&config, &environment).await
    };
    match drained.await {
        Ok(drained) => serde_json::json!({ "drained": {
            "delivered": drained.delivered, "failed": drained.failed, "remaining": drained.remaining
        }})
        .to_string(),
        Err(error) => serde_json::json!({ "error": error }).to_string(),
    }
}

/// `completeToolCall`: publishes `result` (JSON) as deferred call `toolCallId`'s result in the
/// session `stored` was read from, once; the stored webhook hooks see it first. Resolves
/// `{ "completed": { published, result } }` or `{ "error": … }`.
#[napi(ts_return_type = "Promise<string>")]
pub fn complete_tool_call<'env>(
    env: &'env Env,
    stored: &NativeStored,
    options: String,
    tool_call_id: String,
    result: String,
    environment: Object,
) -> Result<PromiseRaw<'env, Option<String>>> {
    let stored = stored.take();
    let names = stored.as_ref().map(deferred::environment_names).unwrap_or_default();
    let environment = read_environment(&environment, &names)?;
    let keep_alive = local::KeepAlive::new(env.raw())?;
    local::promise(env, async move {
        let work = async move {
            let stored =
                stored.ok_or_else(|| SdkError::new(ErrorCode::InvalidInput, "this stored session was used already"))?;
            let store =
                store_of(&parse_js_json::<Value>(&options).map_err(|error| SdkError::config(error.to_string()))?)?;
            let result: Value = parse_js_json(&result).map_err(|error| {
                SdkError::new(ErrorCode::InvalidInput, format!("result could not be read: {error}"))
            })?;
            deferred::complete(&store, stored, &tool_call_id, &result, environment).await
        };
        let outcome = match offload(work).await {
            Ok(Ok(completed)) => serde_json::json!({ "completed": completed.to_json() }),
            Ok(Err(error)) => serde_json::json!({ "error": error }),
            Err(error) => {
                serde_json::json!({ "error": SdkError::new(ErrorCode::Plain, format!("the publication failed: {error}")) })
            }
        };
        drop(keep_alive);
        Some(outcome.to_string())
    })
}

/// A created session, or the JSON of the error that prevented it.
// The wrapper's functions and the loaded session cross as arguments: one call makes the agent.
#[allow(clippy::too_many_arguments)]
#[napi(
    ts_args_type = "options: string, invoke: (fn: number, argsJson: string, scope: number, reply: number, signalArg: number, signalKey: string | null, dispatch: number | null, last: boolean, linked: boolean, errorJson: string | null) => string | Promise<string>, abortDispatch: (scope: number, dispatch: number, event: string, timeoutMs: number) => string, stepGenerator: (scope: number, generator: number, finish: boolean) => string | Promise<string>, nextTurn: () => Promise<string>, environment: object, wake: () => void, stored?: NativeStored | undefined | null"
)]
pub fn create_session(
    env: &Env,
    options: String,
    invoke: Function<InvokeArgs, Returned>,
    abort_dispatch: Function<AbortArgs, Returned>,
    step_generator: Function<StepArgs, Returned>,
    next_turn: Function<(), Returned>,
    environment: Object,
    wake: Function<(), ()>,
    stored: Option<&NativeStored>,
) -> Result<Either<NativeAgent, String>> {
    let options: Value = match parse_js_json(&options) {
        Ok(options) => options,
        Err(error) => {
            return Ok(Either::B(error_json(&SdkError::config(format!(
                "options could not be read: {error}"
            )))))
        }
    };
    let variables = read_environment(&environment, ENV_VARS)?;
    let config = match AgentConfig::from_options(&options, &variables) {
        Ok(config) => config,
        Err(error) => return Ok(Either::B(error_json(&error))),
    };
    if local::init(env, wake)? {
        telemetry::start_for(env)?;
    }
    let functions = Functions {
        invoke: invoke.create_ref()?,
        abort: abort_dispatch.create_ref()?,
        step: step_generator.create_ref()?,
        next_turn: next_turn.create_ref()?,
    };
    let host = Arc::new(JsHost::new(env, functions)?);
    let session = match stored.and_then(NativeStored::take) {
        None => Session::new(config, host),
        Some(stored) => match Session::from_store(config, host, stored) {
            Ok(session) => session,
            Err(error) => return Ok(Either::B(error_json(&error))),
        },
    };
    Ok(Either::A(NativeAgent {
        environment_names: session.environment_names(),
        session,
        open: Rc::new(local::AgentCount::new(env.raw())?),
    }))
}

#[napi]
pub struct NativeAgent {
    session: Arc<Session>,
    /// The environment variables `send`, `start` and `close` read (fixed at creation).
    environment_names: Vec<String>,
    /// Keeps the JS thread's scheduler until this agent is closed (or collected).
    open: Rc<local::AgentCount>,
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

    /// The conversation as JSON text.
    #[napi]
    pub fn messages(&self) -> String {
        serde_json::to_string(&self.session.messages()).unwrap_or_else(|_| "[]".into())
    }

    /// Starts a run, or returns the JSON of the error that refused it.
    #[napi]
    pub fn send(
        &self,
        env: &Env,
        message: String,
        scope: u32,
        options: String,
        environment: Object,
    ) -> Either<NativeRun, String> {
        match self.start_run(env, Some(&message), ScopeId(scope), &options, &environment) {
            Ok(run) => Either::A(run),
            Err(refused) => Either::B(error_json(&refused)),
        }
    }

    /// `resume()`: goes on with the paused turn, or returns the JSON of the error that refused it.
    #[napi]
    pub fn resume(&self, env: &Env, scope: u32, options: String, environment: Object) -> Either<NativeRun, String> {
        match self.start_run(env, None, ScopeId(scope), &options, &environment) {
            Ok(run) => Either::A(run),
            Err(refused) => Either::B(error_json(&refused)),
        }
    }

    /// `pendingApprovals` as JSON.
    #[napi]
    pub fn pending_approvals(&self) -> String {
        serde_json::to_string(&self.session.pending_approvals()).unwrap_or_else(|_| "[]".into())
    }

    /// `approve(toolCallId, options)` (`reject` when `approve` is false): resolves `null` once
    /// the decision is stored, else the JSON of the error that refused it.
    #[napi(ts_return_type = "Promise<string | null>")]
    pub fn decide<'env>(
        &self,
        env: &'env Env,
        approve: bool,
        tool_call_id: String,
        options: String,
    ) -> Result<PromiseRaw<'env, Option<String>>> {
        let session = self.session.clone();
        failure_of(env, async move {
            let options: Value = parse_js_json(&options).map_err(|error| {
                SdkError::new(
                    ErrorCode::InvalidInput,
                    format!("the options could not be read: {error}"),
                )
            })?;
            if approve {
                session.approve(&tool_call_id, &options).await
            } else {
                session.reject(&tool_call_id, &options).await
            }
        })
    }

    /// Option keys accepted but not built here, for the wrapper's warnings.
    #[napi(getter)]
    pub fn unsupported_options(&self) -> Vec<String> {
        self.session.config().unsupported.clone()
    }

    /// `supportedModels()` as JSON.
    #[napi]
    pub fn supported_models(&self) -> String {
        self.session.supported_models().to_string()
    }

    /// `setModel`, `setMaxTurns`, `setPermissionMode`, `setDefaultContext`: `setting` names
    /// which, `value` is its JSON; returns the JSON of the error that refused it, or null.
    #[napi]
    pub fn set(&self, setting: String, value: String) -> Option<String> {
        let value: Value = match parse_js_json(&value) {
            Ok(value) => value,
            Err(error) => {
                return Some(error_json(&SdkError::new(
                    ErrorCode::InvalidInput,
                    format!("the value could not be read: {error}"),
                )))
            }
        };
        let set = match setting.as_str() {
            "model" => self.session.set_model(&value),
            "maxTurns" => self.session.set_max_turns(&value),
            "permissionMode" => self.session.set_permission_mode(&value),
            "defaultContext" => self.session.set_default_context(&value),
            other => Err(SdkError::new(ErrorCode::InvalidInput, format!("no setting {other}"))),
        };
        set.err().map(|error| error_json(&error))
    }

    /// `getDefaultContext()` as JSON.
    #[napi]
    pub fn default_context(&self) -> String {
        serde_json::to_string(&*self.session.default_context()).unwrap_or_else(|_| "{}".into())
    }

    /// `fork()`: the conversation of `other` becomes this agent's (before its SessionStart).
    /// `mcpServerStatus()`, as JSON.
    #[napi]
    pub fn mcp_server_status(&self) -> String {
        self.session.mcp_server_status().to_string()
    }

    /// `mcpListTools()`, as JSON.
    #[napi]
    pub fn mcp_list_tools(&self) -> String {
        self.session.mcp_list_tools().to_string()
    }

    #[napi]
    pub fn copy_conversation_from(&self, other: &NativeAgent) {
        self.session.copy_conversation_from(&other.session);
    }

    /// Runs SessionStart; resolves `null`, or the JSON of the error that stopped it.
    #[napi(ts_return_type = "Promise<string | null>")]
    pub fn start<'env>(
        &self,
        env: &'env Env,
        scope: u32,
        environment: Object,
    ) -> Result<PromiseRaw<'env, Option<String>>> {
        let open = self.open.clone();
        self.with_environment(env, &environment, move |session, environment| async move {
            let started = session.start(ScopeId(scope), environment).await;
            // A failed SessionStart closed the session.
            if started.is_err() {
                open.release();
            }
            started
        })
    }

    /// Resolves `null`, or the JSON of the error that stopped the close.
    #[napi(ts_return_type = "Promise<string | null>")]
    pub fn close<'env>(
        &self,
        env: &'env Env,
        scope: u32,
        environment: Object,
    ) -> Result<PromiseRaw<'env, Option<String>>> {
        let open = self.open.clone();
        self.with_environment(env, &environment, move |session, environment| async move {
            session.close(ScopeId(scope), environment).await?;
            open.release();
            Ok(())
        })
    }
}

impl NativeAgent {
    /// Starts a run with `message`, or (without one) resumes the paused turn.
    fn start_run(
        &self,
        env: &Env,
        message: Option<&str>,
        scope: ScopeId,
        options: &str,
        environment: &Object,
    ) -> std::result::Result<NativeRun, SdkError> {
        let read = |what: &str, text: &str| {
            parse_js_json::<Value>(text)
                .map_err(|error| SdkError::new(ErrorCode::InvalidInput, format!("{what} could not be read: {error}")))
        };
        let message = message.map(|message| read("message", message)).transpose()?;
        // Options are JSON as `createAgent`'s are: NaN, bigints and functions arrive marked.
        let options = read("send options", options)?;
        let max_turns = SendOptions::max_turns(&options)?;
        let tool_choice = SendOptions::tool_choice(&options)?;
        let not_started = |error: napi::Error| {
            SdkError::new(
                ErrorCode::Plain,
                format!("the run could not be started: {}", error.reason),
            )
        };
        // Held by the run until it ends: a run at work keeps Node alive, as a pending request
        // would; an idle agent never does. Made before the session marks a run active, so a
        // failure here leaves no run behind.
        let keep_alive = local::KeepAlive::new(env.raw()).map_err(not_started)?;
        let environment = read_environment(environment, &self.environment_names).map_err(not_started)?;
        let options = SendOptions {
            max_turns,
            tool_choice,
            scope,
            environment,
        };
        // Within the runtime: a run the memory store accepts at once may start its store's tasks.
        let (handle, run) = napi::bindgen_prelude::within_runtime_if_available(|| match &message {
            Some(message) => self.session.send(message, options),
            None => self.session.resume(options),
        })?;
        // The scheduler the keep-alive found is there to take the run.
        local::spawn(env.raw(), async move {
            run.await;
            drop(keep_alive);
        })
        .map_err(not_started)?;
        Ok(NativeRun {
            may_be_stopped: self.session.runs_may_be_stopped(),
            events: Arc::new(handle.events),
            control: handle.control,
            session_id: self.session.id.clone().into(),
            request_id: handle.request_id,
            input_id: handle.input_id,
        })
    }

    /// Runs `work` on the session with the environment variables it needs, read now.
    fn with_environment<'env, Work>(
        &self,
        env: &'env Env,
        environment: &Object,
        work: impl FnOnce(Arc<Session>, HashMap<String, String>) -> Work,
    ) -> Result<PromiseRaw<'env, Option<String>>>
    where
        Work: std::future::Future<Output = std::result::Result<(), SdkError>> + 'static,
    {
        let environment = read_environment(environment, &self.environment_names)?;
        failure_of(env, work(self.session.clone(), environment))
    }
}

#[napi]
pub struct NativeRun {
    may_be_stopped: bool,
    events: Arc<EventReader>,
    control: Arc<RunControl>,
    session_id: Arc<str>,
    request_id: String,
    input_id: String,
}

#[napi]
impl NativeRun {
    /// The events published since the last call, as a JSON array; waits for text or the end of
    /// the run (for any event after `wantEveryEvent()`), then takes what else the JS thread's
    /// current turn publishes (a streamed answer's deltas that arrived together come in one
    /// batch). `null` once the run has ended and every event was taken. Waited for on the JS
    /// thread, where the run publishes them.
    #[napi(ts_return_type = "Promise<string | null>")]
    pub fn next<'env>(&self, env: &'env Env) -> Result<PromiseRaw<'env, Option<String>>> {
        let events = self.events.clone();
        let session_id = self.session_id.clone();
        local::promise(env, async move {
            let batch = events.next_batch(local::rest_of_turn()).await?;
            let published: Vec<Published<'_>> = batch
                .iter()
                .map(|event| Published {
                    event,
                    session_id: &session_id,
                })
                .collect();
            Some(serde_json::to_string(&published).unwrap_or_else(|_| "[]".into()))
        })
    }

    /// The run's `submission` ids: which request it is, and which input started it.
    #[napi(getter)]
    pub fn request_id(&self) -> String {
        self.request_id.clone()
    }

    #[napi(getter)]
    pub fn input_id(&self) -> String {
        self.input_id.clone()
    }

    /// The run was accepted when it started (nothing to wait for: `accepted()` is not needed).
    #[napi(getter)]
    pub fn is_accepted(&self) -> bool {
        self.control.is_admitted()
    }

    /// Whether the run may be stopped from outside it (`stopped()` is worth waiting on).
    #[napi(getter)]
    pub fn may_be_stopped(&self) -> bool {
        self.may_be_stopped
    }

    /// Resolves `null` once the run is accepted (it holds the session and may start), or the
    /// JSON of the error that refused it (`SESSION_LEASED`, `APPROVALS_PENDING`, ...): what
    /// `send` / `resume` reject with.
    #[napi(ts_return_type = "Promise<string | null>")]
    pub fn accepted<'env>(&self, env: &'env Env) -> Result<PromiseRaw<'env, Option<String>>> {
        let control = self.control.clone();
        local::promise(env, async move {
            control.admitted().await.err().map(|refusal| error_json(&refusal))
        })
    }

    /// Resolves with the abort's reason once the run is aborted before it ends (however it was:
    /// the caller, a lost claim on the session, a critical queued notification given up), or
    /// `null` once it ended otherwise: the wrapper then aborts the run's JS signal too, so the
    /// tools and callbacks still running hear of it.
    #[napi(ts_return_type = "Promise<string | null>")]
    pub fn stopped<'env>(&self, env: &'env Env) -> Result<PromiseRaw<'env, Option<String>>> {
        let control = self.control.clone();
        local::promise(env, async move {
            tokio::select! {
                biased;
                _ = control.finished() => None,
                _ = control.aborted() => Some(control.reason()),
            }
        })
    }

    /// Resolves (with `null`) once the run has published its last event.
    #[napi(ts_return_type = "Promise<null>")]
    pub fn finished<'env>(&self, env: &'env Env) -> Result<PromiseRaw<'env, Option<String>>> {
        let control = self.control.clone();
        local::promise(env, async move {
            control.finished().await;
            None
        })
    }

    /// A reader of every event is waiting (`stream()`), not only of text (`textStream()`).
    #[napi]
    pub fn want_every_event(&self) {
        self.events.want_every_event();
    }

    #[napi]
    pub fn abort(&self, reason: String) {
        self.control.abort(reason);
    }
}
