//! `NativeAgent` and `NativeRun`: the session and one of its runs, as JS classes; and the
//! functions that reach a stored session from outside an agent (`resumeAgent`'s read,
//! `completeToolCall`, `drainOutbox`, `approvalToken`).

use std::collections::HashMap;
use std::rc::Rc;
use std::sync::{Arc, Mutex};

use napi::bindgen_prelude::*;
use napi_derive::napi;
use serde_json::Value;

use super::host::{AbortArgs, Functions, InvokeArgs, JsHost, Returned, StepArgs};
use super::result::{native, NativeResult};
use super::{arguments, local, telemetry};
use crate::agent::config::store_of;
use crate::agent::config::Shape;
use crate::agent::deferred;
use crate::agent::durable::{self, Stored};
use crate::agent::events::Published;
use crate::agent::inputs::{Priority, Submitted};
use crate::agent::{AgentConfig, EventReader, RunControl, RunHandle, SendOptions, Session};
use crate::error::{ErrorCode, SdkError};
use crate::host::ScopeId;
use crate::model::ENV_VARS;
use crate::offload::offload;
use crate::text::parse_js_json;
use futures::future::BoxFuture;

/// Why `close()` aborts the active run: the wrapper aborts the run's signal with it too.
#[napi]
pub const SESSION_CLOSED: &str = crate::agent::session::CLOSED;

/// A promise of what `work` yields, once it is done. Node stays alive until it settles: `work`
/// (SessionStart, a close, a decision) may wait on webhooks and timers of the workers.
fn settled<'env, T: ToNapiValue + 'static>(
    env: &'env Env,
    work: impl std::future::Future<Output = std::result::Result<T, SdkError>> + 'static,
) -> Result<PromiseRaw<'env, NativeResult<T>>> {
    let keep_alive = local::KeepAlive::new(env.raw())?;
    local::promise(env, async move {
        let outcome = work.await;
        drop(keep_alive);
        native(outcome)
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

/// `process.env` as the JSON of its string entries, taken by the calls that learn which
/// variables they need only later, from the store (the hooks of a stored session, the header
/// templates of rows queued by other processes).
fn environment_snapshot(environment: &str) -> HashMap<String, String> {
    parse_js_json::<HashMap<String, Value>>(environment)
        .map(|variables| {
            variables
                .into_iter()
                .filter_map(|(name, value)| value.as_str().map(|value| (name, value.to_owned())))
                .collect()
        })
        .unwrap_or_default()
}

/// Which API's options these are: `createAgent`'s, `createSession`'s, or `prompt`'s (either).
fn shape_of(name: &str, options: &Value) -> Shape {
    match name {
        "session" => Shape::Session,
        "prompt" => Shape::of_prompt(options),
        _ => Shape::Agent,
    }
}

/// JSON from the wrapper (NaN, bigints and functions arrive marked); `what` names it in the error.
fn read_json(what: &str, text: &str) -> std::result::Result<Value, SdkError> {
    parse_js_json::<Value>(text)
        .map_err(|error| SdkError::new(ErrorCode::InvalidInput, format!("{what} could not be read: {error}")))
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

/// `resumeAgent(options)`: reads session `options.sessionId` from the store `options` name, off
/// the JS thread (`SESSION_NOT_FOUND`, `STORE_ERROR`, a `ConfigError`). `options` is `None` for
/// `undefined`.
#[napi(ts_args_type = "options: string | undefined, shape: 'agent' | 'session'")]
pub async fn load_session(options: Option<String>, shape: String) -> NativeResult<NativeStored> {
    let loaded = async {
        let options = arguments::options(options.as_deref())?;
        let session_id = arguments::stored_session_id(&options)?;
        durable::load(&store_of(&options, shape_of(&shape, &options))?, &session_id).await
    };
    native(loaded.await.map(|stored| NativeStored {
        stored: Mutex::new(Some(stored)),
    }))
}

/// `approvalToken(...)`: the token of `input` (JSON) at its place in the tree (`agent_path`).
#[napi]
pub fn approval_token(
    secret: String,
    session_id: String,
    tool_call_id: String,
    tool_name: String,
    input: String,
    agent_path: Vec<String>,
) -> NativeResult<String> {
    let place = crate::store::CallPlace {
        session_id: &session_id,
        agent_path: &agent_path,
        tool_call_id: &tool_call_id,
    };
    let made = parse_js_json::<Value>(&input)
        .map_err(|error| format!("input could not be read: {error}"))
        .and_then(|input| crate::agent::approvals::token_for(&secret, place, &tool_name, &input));
    native(
        made.map(|(_fingerprint, token)| token)
            .map_err(|message| SdkError::new(ErrorCode::InvalidInput, message)),
    )
}

/// `drainOutbox({ store })`: tries every queued notification of the store once now; the JSON of
/// `{ delivered, failed, remaining }`. `environment` is `process.env` as JSON: the header
/// templates of rows queued by other processes may name any variable.
#[napi]
pub async fn drain_outbox(options: String, environment: String) -> NativeResult<String> {
    let drained = async {
        let options = parse_js_json::<Value>(&options)
            .map_err(|error| SdkError::config(format!("options could not be read: {error}")))?;
        let config = store_of(&options, Shape::Agent)?;
        durable::drain_outbox(&config, &environment_snapshot(&environment)).await
    };
    native(drained.await.map(|drained| {
        serde_json::json!({
            "delivered": drained.delivered, "failed": drained.failed, "remaining": drained.remaining
        })
        .to_string()
    }))
}

/// `completeToolCall({ store, sessionId, toolCallId, result })`: publishes `result` (JSON) as
/// deferred call `toolCallId`'s result in the stored session, once; its stored webhook hooks
/// see it first. `call` is the JSON of `{ sessionId, toolCallId, advanced: { store } }`,
/// `environment` that of `process.env`. Resolves the JSON of `{ published, result }`.
#[napi]
pub async fn complete_tool_call(call: String, result: String, environment: String) -> NativeResult<String> {
    let work = async move {
        let call = parse_js_json::<Value>(&call).map_err(|error| SdkError::config(error.to_string()))?;
        let (session_id, tool_call_id) = arguments::tool_call_ids(&call)?;
        let store = store_of(&call, Shape::Agent)?;
        let stored = durable::load(&store, &session_id).await?;
        let names = deferred::environment_names(&stored);
        let mut environment = environment_snapshot(&environment);
        environment.retain(|name, _| names.contains(name));
        let result: Value = parse_js_json(&result)
            .map_err(|error| SdkError::new(ErrorCode::InvalidInput, format!("result could not be read: {error}")))?;
        deferred::complete(&store, stored, &tool_call_id, &result, environment).await
    };
    native(match offload(work).await {
        Ok(completed) => completed.map(|completed| completed.to_json().to_string()),
        Err(error) => Err(SdkError::new(
            ErrorCode::Internal,
            format!("the publication failed: {error}"),
        )),
    })
}

/// A created session. `options` is `None` for `undefined`; the functions are `lib/wire.js`'s
/// (their arguments: [`InvokeArgs`], [`AbortArgs`], [`StepArgs`]).
// The wrapper's functions and the loaded session cross as arguments: one call makes the agent.
#[allow(clippy::too_many_arguments)]
#[napi(
    ts_args_type = "options: string | undefined, invoke: (...args: InvokeArgs) => Returned, abortDispatch: (...args: AbortArgs) => Returned, stepGenerator: (...args: StepArgs) => Returned, nextTurn: (token: number) => Returned, environment: object, wake: () => void, stored: NativeStored | undefined | null, shape: 'agent' | 'session' | 'prompt'"
)]
pub fn create_session(
    env: &Env,
    options: Option<String>,
    invoke: Function<FnArgs<InvokeArgs>, Returned>,
    abort_dispatch: Function<FnArgs<AbortArgs>, Returned>,
    step_generator: Function<FnArgs<StepArgs>, Returned>,
    next_turn: Function<FnArgs<(u32,)>, Returned>,
    environment: Object,
    wake: Function<(), ()>,
    stored: Option<&NativeStored>,
    shape: String,
) -> Result<NativeResult<NativeAgent>> {
    let options = match arguments::options(options.as_deref()) {
        Ok(options) => options,
        Err(error) => return Ok(native(Err(error))),
    };
    let variables = read_environment(&environment, ENV_VARS)?;
    let config = match AgentConfig::read(&options, shape_of(&shape, &options), &variables) {
        Ok(config) => config,
        Err(error) => return Ok(native(Err(error))),
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
            Err(error) => return Ok(native(Err(error))),
        },
    };
    Ok(native(Ok(NativeAgent {
        environment_names: session.environment_names(),
        session,
        open: Rc::new(local::AgentCount::new(env.raw())?),
    })))
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

    /// `agent.hooks()`: the registrations (JSON text), with the environment's hooks read from
    /// `environment` (the caller's `process.env`) now.
    #[napi]
    pub fn hooks(&self, environment: Object) -> Result<NativeResult<String>> {
        let environment = read_environment(&environment, &self.environment_names)?;
        Ok(native(self.session.hooks(&environment).map(|listed| {
            serde_json::to_string(&listed).unwrap_or_else(|_| "[]".into())
        })))
    }

    /// The conversation as JSON text.
    #[napi]
    pub fn messages(&self) -> String {
        serde_json::to_string(&self.session.messages()).unwrap_or_else(|_| "[]".into())
    }

    /// Starts a run with `message` (JSON).
    #[napi]
    pub fn send(
        &self,
        env: &Env,
        message: String,
        scope: u32,
        options: String,
        environment: Object,
    ) -> NativeResult<RunStarted> {
        let started = read_json("message", &message).and_then(|message| {
            self.start_run(env, ScopeId(scope), &options, &environment, |session, options| {
                session.send(&message, options).map(Some)
            })
        });
        native(started.map(|started| started.expect("a send always starts a run")))
    }

    /// `resume()`: goes on with the paused turn.
    #[napi]
    pub fn resume(&self, env: &Env, scope: u32, options: String, environment: Object) -> NativeResult<RunStarted> {
        let started = self.start_run(env, ScopeId(scope), &options, &environment, |session, options| {
            session.resume(options).map(Some)
        });
        native(started.map(|started| started.expect("a resume always starts a run")))
    }

    /// Blade's `session.send(message, { priority, expectedRequestId })` (`message` is JSON):
    /// the JSON of `{ status: 'idle' }` (the wrapper then starts a request with `send`),
    /// `{ status: 'steered', inputId, requestId, priority }` or `{ status: 'queued', inputId,
    /// priority: 'later' }`.
    #[napi]
    pub fn submit(
        &self,
        message: String,
        priority: Option<String>,
        expected_request_id: Option<String>,
        starting_options: bool,
    ) -> NativeResult<String> {
        let submitted = read_json("message", &message).and_then(|message| {
            let priority = Priority::parse(priority.as_deref()).ok_or_else(|| {
                SdkError::new(
                    ErrorCode::InvalidInput,
                    format!(
                        "options.priority must be 'now', 'next' or 'later' (got \"{}\")",
                        priority.unwrap_or_default()
                    ),
                )
            })?;
            self.session
                .submit(&message, priority, expected_request_id.as_deref(), starting_options)
        });
        native(submitted.map(|submitted| {
            match submitted {
                Submitted::Idle => serde_json::json!({"status": "idle"}),
                Submitted::Steered {
                    input_id,
                    request_id,
                    priority,
                } => serde_json::json!({"status": "steered", "inputId": input_id, "requestId": request_id, "priority": priority}),
                Submitted::Queued { input_id } => {
                    serde_json::json!({"status": "queued", "inputId": input_id, "priority": "later"})
                }
            }
            .to_string()
        }))
    }

    /// Starts a request with the first input queued for later; `null` when none waits.
    #[napi]
    pub fn send_later(
        &self,
        env: &Env,
        scope: u32,
        options: String,
        environment: Object,
    ) -> NativeResult<Option<RunStarted>> {
        native(
            self.start_run(env, ScopeId(scope), &options, &environment, |session, options| {
                session.send_later(options)
            }),
        )
    }

    /// `getPendingInputs()` as JSON.
    #[napi]
    pub fn pending_inputs(&self) -> String {
        serde_json::to_string(&self.session.pending_inputs()).unwrap_or_else(|_| "[]".into())
    }

    /// `cancelInput(inputId)`: whether it was still waiting.
    #[napi]
    pub fn cancel_input(&self, input_id: String) -> bool {
        self.session.cancel_input(&input_id)
    }

    /// `pendingApprovals` as JSON.
    #[napi]
    pub fn pending_approvals(&self) -> String {
        serde_json::to_string(&self.session.pending_approvals()).unwrap_or_else(|_| "[]".into())
    }

    /// `approve(toolCallId, options)` (`reject` when `approve` is false): resolves once the
    /// decision is stored.
    #[napi]
    pub fn decide<'env>(
        &self,
        env: &'env Env,
        approve: bool,
        tool_call_id: String,
        options: String,
    ) -> Result<PromiseRaw<'env, NativeResult<()>>> {
        let session = self.session.clone();
        settled(env, async move {
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
    /// which, `value` is its JSON.
    #[napi]
    pub fn set(&self, setting: String, value: String) -> NativeResult<()> {
        let set = parse_js_json::<Value>(&value)
            .map_err(|error| SdkError::new(ErrorCode::InvalidInput, format!("the value could not be read: {error}")))
            .and_then(|value| match setting.as_str() {
                "model" => self.session.set_model(&value),
                "maxTurns" => self.session.set_max_turns(&value),
                "permissionMode" => self.session.set_permission_mode(&value),
                "defaultContext" => self.session.set_default_context(&value),
                other => Err(SdkError::new(ErrorCode::InvalidInput, format!("no setting {other}"))),
            });
        native(set)
    }

    /// `getDefaultContext()` as JSON.
    #[napi]
    pub fn default_context(&self) -> String {
        serde_json::to_string(&*self.session.default_context()).unwrap_or_else(|_| "{}".into())
    }

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

    /// `fork()`: the conversation of `other` becomes this agent's (before its SessionStart).
    #[napi]
    pub fn copy_conversation_from(&self, other: &NativeAgent) {
        self.session.copy_conversation_from(&other.session);
    }

    /// `forkSession`: the stored session's conversation becomes this agent's (before its
    /// SessionStart; [`Session::copy_stored`]).
    #[napi]
    pub fn copy_stored_conversation(&self, stored: &NativeStored) -> NativeResult<()> {
        native(match stored.take() {
            Some(stored) => self.session.copy_stored(stored),
            None => Err(SdkError::new(
                ErrorCode::Internal,
                "the stored session was taken already",
            )),
        })
    }

    /// Runs SessionStart (`createAgent`, `resumeAgent`, `fork()`).
    #[napi]
    pub fn start<'env>(
        &self,
        env: &'env Env,
        scope: u32,
        environment: Object,
    ) -> Result<PromiseRaw<'env, NativeResult<()>>> {
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

    /// `close()`: concurrent calls share one attempt ([`Session::close`]), so they pass the same
    /// `scope`.
    #[napi]
    pub fn close<'env>(
        &self,
        env: &'env Env,
        scope: u32,
        environment: Object,
    ) -> Result<PromiseRaw<'env, NativeResult<()>>> {
        let open = self.open.clone();
        self.with_environment(env, &environment, move |session, environment| async move {
            session.close(ScopeId(scope), environment).await?;
            open.release();
            Ok(())
        })
    }
}

impl NativeAgent {
    /// Starts the run `begin` makes of the session (`None`: it made none).
    fn start_run(
        &self,
        env: &Env,
        scope: ScopeId,
        options: &str,
        environment: &Object,
        begin: impl FnOnce(
            &Arc<Session>,
            SendOptions,
        ) -> std::result::Result<Option<(RunHandle, BoxFuture<'static, ()>)>, SdkError>,
    ) -> std::result::Result<Option<RunStarted>, SdkError> {
        // Options are JSON as `createAgent`'s are: NaN, bigints and functions arrive marked.
        let options = read_json("send options", options)?;
        let max_turns = SendOptions::max_turns(&options)?;
        let tool_choice = SendOptions::tool_choice(&options)?;
        let not_started = |error: napi::Error| {
            SdkError::new(
                ErrorCode::Internal,
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
        let Some((handle, run)) = napi::bindgen_prelude::within_runtime_if_available(|| begin(&self.session, options))?
        else {
            return Ok(None);
        };
        // The scheduler the keep-alive found is there to take the run.
        local::spawn(env.raw(), async move {
            run.await;
            drop(keep_alive);
        })
        .map_err(not_started)?;
        Ok(Some(RunStarted {
            request_id: handle.request_id,
            input_id: handle.input_id,
            is_accepted: handle.control.is_admitted(),
            may_be_stopped: self.session.runs_may_be_stopped(),
            run: NativeRun {
                events: Arc::new(handle.events),
                control: handle.control,
                session_id: self.session.id.clone().into(),
            },
        }))
    }

    /// Runs `work` on the session with the environment variables it needs, read now.
    fn with_environment<'env, Work>(
        &self,
        env: &'env Env,
        environment: &Object,
        work: impl FnOnce(Arc<Session>, HashMap<String, String>) -> Work,
    ) -> Result<PromiseRaw<'env, NativeResult<()>>>
    where
        Work: std::future::Future<Output = std::result::Result<(), SdkError>> + 'static,
    {
        let environment = read_environment(environment, &self.environment_names)?;
        settled(env, work(self.session.clone(), environment))
    }
}

/// A run `send` or `resume` started, with what the wrapper reads of it at once: one object,
/// read without crossing again.
#[napi(object, object_from_js = false)]
pub struct RunStarted {
    pub run: NativeRun,
    /// The run's `submission` ids: which request it is, and which input started it.
    pub request_id: String,
    pub input_id: String,
    /// The run was accepted when it started: `accepted()` need not be awaited.
    pub is_accepted: bool,
    /// The run may be stopped from outside it: `stopped()` is worth waiting on.
    pub may_be_stopped: bool,
}

#[napi]
pub struct NativeRun {
    events: Arc<EventReader>,
    control: Arc<RunControl>,
    session_id: Arc<str>,
}

#[napi]
impl NativeRun {
    /// The events published since the last call, as a JSON array; waits for text or the end of
    /// the run (for any event after `wantEveryEvent()`), then takes what else the JS thread's
    /// current turn publishes (a streamed answer's deltas that arrived together come in one
    /// batch). `null` once the run has ended and every event was taken. Waited for on the JS
    /// thread, where the run publishes them.
    #[napi]
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

    /// The run's result or error event, as one JSON object, once published and while not yet
    /// taken by `next()`; `null` otherwise. It stays in the log: a later `next()` still takes
    /// every event, this one included.
    #[napi]
    pub fn outcome(&self) -> Option<String> {
        self.events.outcome(|event| {
            serde_json::to_string(&Published {
                event,
                session_id: &self.session_id,
            })
            .ok()
        })?
    }

    /// Resolves once the run is accepted (it holds the session and may start), or with the
    /// error that refused it (`SESSION_LEASED`, `APPROVALS_PENDING`, ...): what `send` /
    /// `resume` reject with.
    #[napi]
    pub fn accepted<'env>(&self, env: &'env Env) -> Result<PromiseRaw<'env, NativeResult<()>>> {
        let control = self.control.clone();
        local::promise(env, async move { native(control.admitted().await) })
    }

    /// Resolves with the abort's reason once the run is aborted before it ends (however it was:
    /// the caller, a lost claim on the session, a critical queued notification given up), or
    /// `null` once it ended otherwise: the wrapper then aborts the run's JS signal too, so the
    /// tools and callbacks still running hear of it.
    #[napi]
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

    /// Resolves once the run has published its last event.
    #[napi]
    pub fn finished<'env>(&self, env: &'env Env) -> Result<PromiseRaw<'env, ()>> {
        let control = self.control.clone();
        local::promise(env, async move { control.finished().await })
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
