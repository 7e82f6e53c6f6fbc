//! One agent session: its conversation, whether a run is active, whether it is closed.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, MutexGuard};

use futures::future::{BoxFuture, FutureExt, Shared};
use serde_json::{json, Map, Value};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::config::{AgentConfig, Fields, MAX_TIMER_MS};
use super::permission::Permission;
use super::reader::{event_log, EventReader};
use super::run::Run;
use crate::error::{ErrorCode, Result, SdkError};
use crate::hooks::apply;
use crate::hooks::dispatch::{Caller, Dispatcher, EventInput, HookContext, HookError};
use crate::hooks::pending::{Owner, SETTLE_GRACE};
use crate::hooks::HookEvent;
use crate::host::{Callable, Host};
use crate::ids;
use crate::log::Log;
use crate::model::{Message, Model, ToolSchema, UserContent};
use crate::text::describe;
use crate::webhook::environment;
use crate::webhook::Environment;

pub struct Session {
    pub id: String,
    pub(crate) config: AgentConfig,
    pub(crate) tool_schemas: Vec<ToolSchema>,
    pub(crate) host: Arc<dyn Host>,
    pub(crate) dispatcher: Dispatcher,
    state: Mutex<State>,
}

/// What `setModel`, `setMaxTurns`, `setPermissionMode` and `setDefaultContext` change. A run
/// takes a copy when it starts: a change applies from the next run.
#[derive(Clone)]
pub struct RunSettings {
    pub model: Arc<dyn Model>,
    /// `supportedModels()`'s `name`.
    pub model_name: String,
    pub max_turns: u32,
    pub permission: Option<Permission>,
    /// What tools get as their context besides the signal and ids.
    pub default_context: Arc<Map<String, Value>>,
}

type CloseAttempt = Shared<BoxFuture<'static, Result<()>>>;

struct State {
    settings: RunSettings,
    /// The confirmation handler `confirmationHandlerFactory` made.
    confirmation: Option<Callable>,
    /// Tool calls approved for the rest of the session (`scope: 'session'`).
    approved: HashSet<String>,
    /// Shared with in-flight model requests: a snapshot is an `Arc` clone, and a push copies
    /// the list only while a snapshot is still held.
    messages: Arc<Vec<Arc<Message>>>,
    active: Option<Arc<RunControl>>,
    /// `close()` was called: no new runs.
    closing: bool,
    /// `close()` succeeded.
    closed: bool,
    /// The close in progress; concurrent `close()` calls share it.
    close_attempt: Option<CloseAttempt>,
}

/// Stops a run: the caller's signal and `agent.abort()` both end up here.
#[derive(Default)]
pub struct RunControl {
    token: CancellationToken,
    reason: Mutex<Option<String>>,
    finished: CancellationToken,
}

impl RunControl {
    /// Aborts the run; the first reason given is the one reported.
    pub fn abort(&self, reason: String) {
        lock(&self.reason).get_or_insert(reason);
        self.token.cancel();
    }

    pub(crate) async fn aborted(&self) {
        self.token.cancelled().await
    }

    /// Whether the run was aborted, however little has been awaited since.
    pub(crate) fn is_aborted(&self) -> bool {
        self.token.is_cancelled()
    }

    pub(crate) fn token(&self) -> &CancellationToken {
        &self.token
    }

    /// Called once the run published its last event.
    pub(crate) fn finish(&self) {
        self.finished.cancel();
    }

    /// Resolves once the run has published its last event.
    pub async fn finished(&self) {
        self.finished.cancelled().await
    }

    pub(crate) fn reason(&self) -> String {
        lock(&self.reason).clone().unwrap_or_else(|| "Operation aborted".into())
    }
}

/// Per-`send` options.
#[derive(Debug, Clone, Default)]
pub struct SendOptions {
    pub max_turns: Option<u32>,
    /// The host scope whose signal tools and callbacks of this run receive.
    pub scope: u32,
    /// The environment variables of [`Session::environment_names`], read when the run started.
    pub environment: Environment,
}

impl SendOptions {
    /// `maxTurns` of a `send`'s options (JSON as the wrapper encodes options: NaN, bigints and
    /// functions marked), read as `createAgent` reads its own; a bad one is `INVALID_INPUT`.
    pub fn max_turns(options: &Value) -> Result<Option<u32>> {
        let read = Fields::object(options, "options", "an object")
            .and_then(|options| options.positive_integer("maxTurns", MAX_TIMER_MS));
        match read {
            Ok(turns) => Ok(turns.map(|n| n as u32)),
            Err(error) => Err(SdkError {
                code: ErrorCode::InvalidInput,
                ..error
            }),
        }
    }
}

/// The caller's end of a run: its events, the means to abort it, and its submission's ids.
pub struct RunHandle {
    pub events: EventReader,
    pub control: Arc<RunControl>,
    /// The run's id (`operationId` in hook payloads).
    pub request_id: String,
    pub input_id: String,
}

/// A tool and its arguments, the same whatever the order of their keys.
fn approval_key(tool: &str, args: &Map<String, Value>) -> String {
    fn sorted(value: &Value) -> Value {
        match value {
            Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                Value::Object(keys.into_iter().map(|key| (key.clone(), sorted(&map[key]))).collect())
            }
            Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    format!("{tool}\0{}", sorted(&Value::Object(args.clone())))
}

fn invalid_input(message: impl Into<String>) -> SdkError {
    SdkError::new(ErrorCode::InvalidInput, message)
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // A panic while holding the lock leaves plain data behind; keep serving it.
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl Session {
    pub fn new(mut config: AgentConfig, host: Arc<dyn Host>) -> Arc<Self> {
        let log = Log::new(host.clone(), config.logger.take());
        let dispatcher = Dispatcher::new(
            std::mem::take(&mut config.hooks),
            config.hook_timeout_ms,
            config.session_end_hook_timeout_ms,
            host.clone(),
            log,
        );
        let settings = RunSettings {
            model: config.build_model(host.clone()),
            model_name: config.model_name().0,
            max_turns: config.max_turns,
            permission: config.permission,
            default_context: Arc::new(config.default_context.clone()),
        };
        Arc::new(Session {
            id: ids::uuid(),
            tool_schemas: config.tool_schemas(),
            config,
            host,
            dispatcher,
            state: Mutex::new(State {
                settings,
                confirmation: None,
                approved: HashSet::new(),
                messages: Arc::default(),
                active: None,
                closing: false,
                closed: false,
                close_attempt: None,
            }),
        })
    }

    /// The options the session was made with.
    pub fn config(&self) -> &AgentConfig {
        &self.config
    }

    /// The settings a run starting now uses.
    pub fn settings(&self) -> RunSettings {
        lock(&self.state).settings.clone()
    }

    /// `supportedModels()`: `[{ id: 'default', name, provider }]`.
    pub fn supported_models(&self) -> Value {
        let name = lock(&self.state).settings.model_name.clone();
        json!([{"id": "default", "name": name, "provider": self.config.model_name().1}])
    }

    /// `setModel(id)`, from the next run. A scripted model cannot be swapped for a model id.
    pub fn set_model(&self, id: &Value) -> Result<()> {
        let Some(id) = id.as_str().filter(|id| !id.trim().is_empty()) else {
            return Err(invalid_input(format!(
                "setModel() takes a model id string (got {})",
                describe(id)
            )));
        };
        let model = self.config.with_model(id, self.host.clone()).ok_or_else(|| {
            invalid_input("setModel() cannot replace a scriptedModel(...): create an agent with a model id")
        })?;
        let mut state = lock(&self.state);
        state.settings.model = model;
        state.settings.model_name = id.to_string();
        Ok(())
    }

    /// `setMaxTurns(n)`, from the next run.
    pub fn set_max_turns(&self, turns: &Value) -> Result<()> {
        let turns = turns
            .as_u64()
            .filter(|n| (1..=MAX_TIMER_MS).contains(n))
            .ok_or_else(|| {
                invalid_input(format!(
                    "setMaxTurns() takes a positive integer no greater than {MAX_TIMER_MS} (got {})",
                    describe(turns)
                ))
            })?;
        lock(&self.state).settings.max_turns = turns as u32;
        Ok(())
    }

    /// `setPermissionMode(mode)`, from the next run: Blade's modes or our preset names.
    pub fn set_permission_mode(&self, mode: &Value) -> Result<()> {
        let permission = mode.as_str().and_then(Permission::mode).ok_or_else(|| {
            invalid_input(format!(
                "setPermissionMode() takes 'default', 'autoEdit', 'yolo' or 'plan' (got {})",
                describe(mode)
            ))
        })?;
        lock(&self.state).settings.permission = Some(permission);
        Ok(())
    }

    /// `getDefaultContext()`.
    pub fn default_context(&self) -> Arc<Map<String, Value>> {
        lock(&self.state).settings.default_context.clone()
    }

    /// `setDefaultContext(context)`, from the next tool call on.
    pub fn set_default_context(&self, context: &Value) -> Result<()> {
        let mut advanced = Map::new();
        advanced.insert("defaultContext".into(), context.clone());
        let context =
            super::config::read_default_context(&Fields::object(&Value::Object(advanced), "options", "")?, None)
                .map_err(|error| invalid_input(error.message.replace("advanced.defaultContext", "the context")))?;
        lock(&self.state).settings.default_context = Arc::new(context);
        Ok(())
    }

    /// The handler `confirmationHandlerFactory` made for this session, if it was asked yet.
    pub(crate) fn confirmation_handler(&self) -> Option<Callable> {
        lock(&self.state).confirmation
    }

    /// Keeps the handler the factory made; if two calls asked at once, the first one made stays.
    pub(crate) fn keep_confirmation_handler(&self, method: Callable) -> Callable {
        *lock(&self.state).confirmation.get_or_insert(method)
    }

    /// A confirmation with `scope: 'session'` approved this tool with these arguments.
    pub(crate) fn approved_for_session(&self, tool: &str, args: &Map<String, Value>) -> bool {
        lock(&self.state).approved.contains(&approval_key(tool, args))
    }

    pub(crate) fn approve_for_session(&self, tool: &str, args: &Map<String, Value>) {
        lock(&self.state).approved.insert(approval_key(tool, args));
    }

    /// `fork()`: this conversation becomes `other`'s.
    pub fn copy_conversation_from(&self, other: &Session) {
        let messages = other.messages();
        lock(&self.state).messages = messages;
    }

    /// The conversation so far, without the system prompt.
    pub fn messages(&self) -> Arc<Vec<Arc<Message>>> {
        lock(&self.state).messages.clone()
    }

    /// The session's hook dispatcher (its callbacks, budgets and pending cleanups).
    pub fn dispatcher(&self) -> &Dispatcher {
        &self.dispatcher
    }

    pub fn is_closed(&self) -> bool {
        lock(&self.state).closed
    }

    pub(crate) fn push(&self, message: Message) {
        Arc::make_mut(&mut lock(&self.state).messages).push(Arc::new(message));
    }

    /// Starts a run. The returned future drives it and must be spawned; the handle receives
    /// its events.
    pub fn send(
        self: &Arc<Self>,
        message: &Value,
        options: SendOptions,
    ) -> Result<(RunHandle, BoxFuture<'static, ()>)> {
        let content = parse_message(message)?;
        let control = Arc::new(RunControl::default());
        {
            let mut state = lock(&self.state);
            if state.closing || state.closed {
                return Err(SdkError::new(ErrorCode::SessionClosed, "Session is closed"));
            }
            if state.active.is_some() {
                return Err(SdkError::new(
                    ErrorCode::SessionBusy,
                    "The previous Agent response is still active. Consume it before sending another message.",
                ));
            }
            state.active = Some(control.clone());
        }
        let (sender, events) = event_log();
        let run = Run::new(self.clone(), control.clone(), sender, options);
        let span = run.span().clone();
        Ok((
            RunHandle {
                events,
                control,
                request_id: run.id().to_string(),
                input_id: ids::uuid(),
            },
            Box::pin(run.drive(content).instrument(span)),
        ))
    }

    /// Aborts the active run, if any.
    pub fn abort(&self, reason: String) {
        if let Some(control) = lock(&self.state).active.clone() {
            control.abort(reason);
        }
    }

    /// The environment variables runs read: those webhook header templates may use, and the
    /// `AGENT_HOOK_WEBHOOK_*` variables of environment hooks.
    pub fn environment_names(&self) -> Vec<String> {
        let mut names = self.dispatcher.registry().env_var_names();
        names.extend(environment::VARIABLES.iter().map(|name| name.to_string()));
        names
    }

    /// SessionStart, inside `createAgent`. If it fails, SessionEnd runs (once) and the session
    /// is closed; the SessionStart error is what the caller gets.
    #[tracing::instrument(name = "agent_start", parent = None, skip_all, fields(session_id = %self.id))]
    pub async fn start(&self, scope: u32, environment: Environment) -> Result<()> {
        let context = HookContext {
            extra: Vec::new(),
            environment: Arc::new(environment),
        };
        if !self.dispatcher.has(HookEvent::SessionStart, None, &context) {
            return Ok(());
        }
        let mut payload = Map::new();
        payload.insert("event".into(), json!("SessionStart"));
        payload.insert("sessionId".into(), json!(self.id));
        payload.insert("isResume".into(), json!(false));
        let input = EventInput {
            event: HookEvent::SessionStart,
            payload: payload.into(),
            tool: None,
            error: None,
        };
        let caller = Caller {
            scope,
            cancel: None,
            context: &context,
        };
        let started = match self.dispatcher.dispatch(input, caller).await {
            Ok(dispatched) => match apply::first_abort(&dispatched.outputs, HookEvent::SessionStart) {
                Some(message) => Err(SdkError::new(ErrorCode::HookAborted, message)),
                None => Ok(()),
            },
            Err(error) => Err(error.into_sdk()),
        };
        if started.is_err() {
            if let Err(error) = self.session_end(scope, &context).await {
                self.dispatcher.log().warn(
                    "SessionEnd failed while cleaning up after SessionStart",
                    json!({"error": error.message}),
                );
            }
            let mut state = lock(&self.state);
            state.closing = true;
            state.closed = true;
        }
        started
    }

    /// Ends the session: later `send`s fail with `SESSION_CLOSED`, an active run is aborted,
    /// SessionEnd runs at most once. Concurrent calls share one attempt; after a failure,
    /// `close()` may be called again; after success it resolves at once.
    #[tracing::instrument(name = "agent_close", parent = None, skip_all, fields(session_id = %self.id))]
    pub async fn close(self: &Arc<Self>, scope: u32, environment: Environment) -> Result<()> {
        let attempt = {
            let mut state = lock(&self.state);
            if state.closed {
                return Ok(());
            }
            match &state.close_attempt {
                Some(attempt) => attempt.clone(),
                None => {
                    let session = self.clone();
                    let attempt = async move { session.close_once(scope, environment).await }
                        .boxed()
                        .shared();
                    state.close_attempt = Some(attempt.clone());
                    attempt
                }
            }
        };
        let outcome = attempt.await;
        let mut state = lock(&self.state);
        state.close_attempt = None;
        if outcome.is_ok() {
            state.closed = true;
        }
        outcome
    }

    async fn close_once(&self, scope: u32, environment: Environment) -> Result<()> {
        self.stop_active_run().await;
        // A close refused because a callback is still cleaning up leaves the session open.
        let pending = self.dispatcher.pending();
        pending.settle(SETTLE_GRACE).await;
        for (owner, what) in [
            (Owner::Hook, "an inline hook callback"),
            (Owner::Permission, "a permission callback"),
            (Owner::Tool, "a tool execution"),
        ] {
            if pending.count(owner) > 0 {
                return Err(SdkError::new(
                    ErrorCode::Plain,
                    format!("Session runtime {} still has {what} cleaning up", self.id),
                ));
            }
        }
        lock(&self.state).closing = true;
        self.stop_active_run().await;
        let context = HookContext {
            extra: Vec::new(),
            environment: Arc::new(environment),
        };
        self.session_end(scope, &context).await
    }

    async fn stop_active_run(&self) {
        let active = lock(&self.state).active.clone();
        if let Some(control) = active {
            control.abort("Session is closed".into());
            control.finished().await;
        }
    }

    async fn session_end(&self, scope: u32, context: &HookContext) -> Result<()> {
        if !self.dispatcher.has(HookEvent::SessionEnd, None, context) {
            return Ok(());
        }
        let mut payload = Map::new();
        payload.insert("event".into(), json!("SessionEnd"));
        payload.insert("sessionId".into(), json!(self.id));
        payload.insert("reason".into(), json!("other"));
        let caller = Caller {
            scope,
            cancel: None,
            context,
        };
        let dispatched = self
            .dispatcher
            .dispatch_session_end(payload.into(), caller)
            .await
            .map_err(HookError::into_sdk)?;
        match apply::first_abort(&dispatched.outputs, HookEvent::SessionEnd) {
            Some(message) => Err(SdkError::new(ErrorCode::HookAborted, message)),
            None => Ok(()),
        }
    }

    /// Called by the run as it ends, before its last event is published, so a caller that sees
    /// the result can send again at once. An aborted run's unanswered tool calls get results.
    pub(crate) fn finish_run(&self, control: &Arc<RunControl>, aborted: Option<&str>) {
        let mut state = lock(&self.state);
        if let Some(reason) = aborted {
            answer_open_calls(Arc::make_mut(&mut state.messages), reason);
        }
        if state.active.as_ref().is_some_and(|active| Arc::ptr_eq(active, control)) {
            state.active = None;
        }
    }
}

/// Gives every tool call of the last assistant message without a result the result
/// `Tool execution aborted: <reason>`, so the conversation stays valid for the next `send`.
fn answer_open_calls(messages: &mut Vec<Arc<Message>>, reason: &str) {
    let Some(position) = messages
        .iter()
        .rposition(|message| matches!(message.as_ref(), Message::Assistant { .. }))
    else {
        return;
    };
    let Message::Assistant { tool_calls, .. } = messages[position].as_ref() else {
        return;
    };
    let answered: Vec<&str> = messages[position + 1..]
        .iter()
        .filter_map(|message| match message.as_ref() {
            Message::Tool { tool_call_id, .. } => Some(tool_call_id.as_str()),
            _ => None,
        })
        .collect();
    let missing: Vec<Message> = tool_calls
        .iter()
        .filter(|call| !answered.contains(&call.id.as_str()))
        .map(|call| Message::Tool {
            tool_call_id: call.id.clone(),
            content: format!("Tool execution aborted: {reason}"),
            is_error: true,
        })
        .collect();
    messages.extend(missing.into_iter().map(Arc::new));
}

/// A `send` message: a string, or an array of `{ type: 'text', text }` and
/// `{ type: 'image_url', image_url: { url } }` parts.
pub fn parse_message(value: &Value) -> Result<UserContent> {
    let invalid = |detail: String| SdkError::new(ErrorCode::InvalidInput, detail);
    match value {
        Value::String(text) => Ok(UserContent::Text(text.clone())),
        Value::Array(parts) => {
            for (index, part) in parts.iter().enumerate() {
                let kind = part.get("type").and_then(Value::as_str);
                let ok = match kind {
                    Some("text") => part.get("text").is_some_and(Value::is_string),
                    Some("image_url") => part.pointer("/image_url/url").is_some_and(Value::is_string),
                    _ => false,
                };
                if !ok {
                    return Err(invalid(format!(
                        "message[{index}] must be {{ type: 'text', text: string }} or {{ type: 'image_url', image_url: {{ url: string }} }} (got {})",
                        describe(part)
                    )));
                }
            }
            serde_json::from_value(value.clone()).map_err(|error| invalid(format!("message is not valid: {error}")))
        }
        other => Err(invalid(format!(
            "message must be a string or an array of text and image_url parts (got {})",
            describe(other)
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::AssistantToolCall;
    use serde_json::json;

    #[test]
    fn max_turns_per_send_must_be_a_positive_integer() {
        assert_eq!(SendOptions::max_turns(&json!({})).unwrap(), None);
        assert_eq!(SendOptions::max_turns(&json!({"maxTurns": null})).unwrap(), None);
        assert_eq!(SendOptions::max_turns(&json!({"maxTurns": 3})).unwrap(), Some(3));
        for (bad, shown) in [
            (json!(0), "0"),
            (json!(-1), "-1"),
            (json!(1.5), "1.5"),
            (json!({"$js": "NaN"}), "NaN"),
            (json!({"$js": "Infinity"}), "Infinity"),
            (json!(2_147_483_648u64), "2147483648"),
            (json!("3"), "\"3\""),
            (json!({"a": 1}), "an object"),
        ] {
            let error = SendOptions::max_turns(&json!({ "maxTurns": bad })).unwrap_err();
            assert_eq!(error.code, ErrorCode::InvalidInput);
            assert_eq!(
                error.message,
                format!("maxTurns must be a positive integer no greater than 2147483647 (got {shown})")
            );
        }
    }

    #[test]
    fn aborted_calls_get_a_result_each() {
        let mut messages = vec![
            Arc::new(Message::User {
                content: UserContent::Text("go".into()),
            }),
            Arc::new(Message::Assistant {
                content: None,
                tool_calls: vec![
                    AssistantToolCall::new("a".into(), "t".into(), "{}".into()),
                    AssistantToolCall::new("b".into(), "t".into(), "{}".into()),
                ],
            }),
            Arc::new(Message::Tool {
                tool_call_id: "a".into(),
                content: "done".into(),
                is_error: false,
            }),
        ];
        answer_open_calls(&mut messages, "stop now");
        assert_eq!(messages.len(), 4);
        assert_eq!(
            *messages[3],
            Message::Tool {
                tool_call_id: "b".into(),
                content: "Tool execution aborted: stop now".into(),
                is_error: true,
            }
        );
    }

    #[test]
    fn messages_are_strings_or_parts() {
        assert_eq!(parse_message(&json!("hi")).unwrap(), UserContent::Text("hi".into()));
        assert_eq!(
            parse_message(&json!([{"type": "text", "text": "a"}])).unwrap().text(),
            "a"
        );
        let error = parse_message(&json!(5)).unwrap_err();
        assert_eq!(error.code, ErrorCode::InvalidInput);
        assert_eq!(
            error.message,
            "message must be a string or an array of text and image_url parts (got 5)"
        );
        let error = parse_message(&json!([{"type": "image"}])).unwrap_err();
        assert!(error.message.starts_with("message[0] must be"), "{}", error.message);
    }
}
