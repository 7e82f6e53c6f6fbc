//! `createAgent` options: read from the JSON the binding hands over (user functions replaced by
//! `{ "$function": n }`), validated as a whole, every problem a `ConfigError` naming the field.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use serde_json::{Map, Value};

use super::compaction::Compaction;
use super::permission::{Form, Permission, Preset};
use super::subagents::{Subagents, TASK_TOOL};
use super::tools::{Runner, SideEffect, ToolKind, ToolSpec};
use crate::builtins::{Builtin, WebPolicy};
use crate::error::{Result, SdkError};
use crate::hooks::registry::Registry;
use crate::host::{Callable, Host};
use crate::js_value::{callable, kind, whole_number, MAX_SAFE_INTEGER, MAX_TIMER_MS};
use crate::log::Sink;
use crate::mcp;
use crate::model::{Endpoint, Model, ModelChoice, ToolChoice, ToolSchema};
use crate::options::OptionsObject;
use crate::store::StoreConfig;

pub const DEFAULT_MAX_TURNS: u32 = 200;
pub const DEFAULT_TOOL_TIMEOUT_MS: u32 = 600_000;
/// `advanced.leaseTtlMs` when not given (SPEC §8.3).
pub const DEFAULT_LEASE_TTL_MS: u32 = 30_000;
pub const DEFAULT_MAX_CONTEXT_TOKENS: u64 = 128_000;

/// Blade's `advanced` options this runtime does not build: accepted, and warned about once per
/// process (`ARH_UNSUPPORTED_OPTION`), so a Blade program starts and its user knows what is off.
const UNSUPPORTED_ADVANCED: &[&str] = &[
    "sessionRepository",
    "sessionEventStore",
    "skills",
    "tokenBudget",
    "providerOptions",
    "thinkingEnabled",
    "thinkingBudget",
    "middleware",
    "plugins",
    "sandbox",
    "observability",
    "durableEventStore",
    "executionLease",
    "outputFormat",
    "memoryManager",
    "providerRegistry",
    "subagent",
    "permissions",
    "toolSourcePolicy",
];

/// Blade's legacy permission fields, which Blade's own `createAgent` drops without a word.
const LEGACY_ADVANCED: &[&str] = &["permissionMode", "permissionHandler", "canUseTool"];

/// Blade's connection fields this runtime does not use.
const UNSUPPORTED_CONNECTION: &[&str] = &["id"];
pub const DEFAULT_HOOK_TIMEOUT_MS: u32 = 600_000;
pub const DEFAULT_SESSION_END_HOOK_TIMEOUT_MS: u32 = 3_000;

#[derive(Debug)]
pub struct AgentConfig {
    pub model: ModelChoice,
    pub system_prompt: Option<String>,
    pub temperature: Option<f64>,
    pub max_output_tokens: Option<u32>,
    /// `toolChoice`: what the model is told about calling tools, each run (a send may change it).
    pub tool_choice: Option<ToolChoice>,
    pub max_turns: u32,
    pub tools: Vec<ToolSpec>,
    pub hook_timeout_ms: u32,
    pub session_end_hook_timeout_ms: u32,
    /// `includeHookEvents`: each hook's `hook_started` / `hook_response` in the stream.
    pub include_hook_events: bool,
    /// Hooks per event, in registration order; taken by the session's dispatcher.
    pub hooks: Registry,
    pub permission: Option<Permission>,
    pub logger: Option<Sink>,
    /// Budget of one tool call, `execute` to result (`advanced.toolTimeoutMs`).
    pub tool_timeout_ms: u32,
    /// Reported as `usage.maxContextTokens`.
    pub max_context_tokens: u64,
    /// `advanced.agents`: the sub-agents the `Task` tool runs.
    pub subagents: Option<Arc<Subagents>>,
    /// `advanced.compaction`: when and how older messages become a summary.
    pub compaction: Option<Compaction>,
    /// `advanced.defaultContext`, with `filesystem` merged into `capabilities.filesystem`.
    pub default_context: Map<String, Value>,
    /// Who answers a permission `'ask'`.
    pub confirmation: Option<Confirmation>,
    /// Option keys accepted but not built, as the user wrote them (`advanced.skills`).
    pub unsupported: Vec<String>,
    /// `advanced.approvalSecret`: pending approvals carry an HMAC token `approve` must be given.
    pub approval_secret: Option<String>,
    /// Where the session is kept (`advanced.store`, or Blade's `storagePath`).
    pub store: StoreConfig,
    /// `advanced.leaseTtlMs`: how long a run's claim on the session outlives its last renewal
    /// (a dead process's claim expires after this).
    pub lease_ttl_ms: u32,
    /// The caller's webhook hooks, as a durable session keeps them (templates unresolved).
    pub stored_hooks: Value,
    /// `advanced.mcpServers`, started by the session before SessionStart.
    pub mcp_servers: Vec<mcp::ServerConfig>,
    /// `allowedTools` / `disallowedTools`, which MCP tools obey too once listed.
    pub tool_filter: ToolFilter,
    /// `advanced.webFetch`: where the built-in WebFetch may go.
    pub web_fetch: WebPolicy,
}

/// Blade's `advanced.confirmationHandler` (its `requestConfirmation` method) or
/// `confirmationHandlerFactory(sessionId)`, which makes one per session.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Confirmation {
    Handler(Callable),
    Factory(Callable),
}

/// Which API the options were written for: `createAgent`'s (`AgentOptions`: Blade's
/// `advanced.*` group, `provider` a name, `advanced.connection`) or `createSession`'s
/// (`SessionOptions`: every key at the top, `provider` an object holding the connection). One
/// reader serves both: the groups are only read from different places.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    Agent,
    Session,
}

impl Shape {
    /// `prompt(message, options)` takes either: session options have `provider` as an object, or
    /// a key only `SessionOptions` has at the top; the keys both have mean the same in both.
    pub fn of_prompt(options: &Value) -> Shape {
        let Some(map) = options.as_object() else {
            return Shape::Agent;
        };
        if map.contains_key("advanced") {
            return Shape::Agent;
        }
        let session_only = map.keys().any(|key| {
            !AGENT_KEYS.contains(&key.as_str())
                && (SESSION_KEYS.contains(&key.as_str()) || ADVANCED_KEYS.contains(&key.as_str()))
        });
        if map.get("provider").is_some_and(Value::is_object) || session_only {
            Shape::Session
        } else {
            Shape::Agent
        }
    }
}

/// The top-level keys both APIs share, meaning the same in both.
const MODEL_KEYS: &[&str] = &[
    "model",
    "systemPrompt",
    "temperature",
    "maxOutputTokens",
    "toolChoice",
    "maxTurns",
    "tools",
];

/// `createAgent`'s own top-level keys (`provider` a name).
const AGENT_KEYS: &[&str] = &[
    "apiKey",
    "provider",
    "baseUrl",
    "baseURL",
    "advanced",
    "profile",
    "filesystem",
];

/// The keys of `advanced` (and of `SessionOptions`' top level) that are built here.
const ADVANCED_KEYS: &[&str] = &[
    "hooks",
    "hookTimeoutMs",
    "sessionEndHookTimeoutMs",
    "permission",
    "connection",
    "logger",
    "defaultContext",
    "allowedTools",
    "disallowedTools",
    "toolTimeoutMs",
    "maxContextTokens",
    "confirmationHandler",
    "confirmationHandlerFactory",
    "approvalSecret",
    "store",
    "storagePath",
    "persistSession",
    "compaction",
    "agents",
    "maxSubagentDepth",
    "maxSubagentCalls",
    "mcpServers",
    "leaseTtlMs",
    "builtinTools",
    "webFetch",
    "includeHookEvents",
];

/// `SessionOptions`' own top-level keys (`provider` an object); its others are `advanced`'s.
const SESSION_KEYS: &[&str] = &["provider", "permissionMode", "permissionHandler", "canUseTool"];

/// `SessionOptions` keys this runtime does not build, beside [`UNSUPPORTED_ADVANCED`].
const UNSUPPORTED_SESSION: &[&str] = &[
    "durableExecutionLeaseStore",
    "durableStoreTimeoutMs",
    "agentSessionRepository",
];

/// The connection fields of `advanced.connection`, and of a session's `provider` object.
const CONNECTION_KEYS: &[&str] = &[
    "headers",
    "organization",
    "projectId",
    "requestTimeoutMs",
    "maxRetries",
    "stream",
    "maxResponseBytes",
    "apiVersion",
    "streamIdleTimeoutMs",
];

impl AgentConfig {
    /// Reads and validates `createAgent`'s options. `env` holds the values of [`ENV_VARS`] that are set.
    pub fn from_options(options: &Value, env: &HashMap<String, String>) -> Result<Self> {
        AgentConfig::read(options, Shape::Agent, env)
    }

    /// Reads and validates options of either [`Shape`].
    pub fn read(options: &Value, shape: Shape, env: &HashMap<String, String>) -> Result<Self> {
        let options = OptionsObject::of(options, "options", "an object")?;
        let (advanced, connection, endpoint, unsupported) = match shape {
            Shape::Agent => read_agent_groups(&options)?,
            Shape::Session => read_session_groups(&options)?,
        };
        if let Some(profile) = options.get("profile") {
            if !matches!(profile.as_str(), Some("local" | "server")) {
                return Err(options.invalid("profile", "'local' or 'server'", profile));
            }
        }

        let model = ModelChoice::read(&options, &endpoint, &connection, env)?;
        let subagents = Subagents::read(&advanced)?;
        if let Some(subagents) = &subagents {
            for agent in &subagents.agents {
                if let Some(value) = &agent.model {
                    model.child(value, &format!("{}.{}.model", advanced.field("agents"), agent.name))?;
                }
            }
        }
        let tool_filter = ToolFilter::read(&advanced)?;
        let max_context_tokens = advanced
            .positive_integer("maxContextTokens", MAX_SAFE_INTEGER)?
            .unwrap_or(DEFAULT_MAX_CONTEXT_TOKENS);
        Ok(AgentConfig {
            model,
            system_prompt: options.string("systemPrompt")?,
            temperature: match options.get("temperature") {
                None => None,
                Some(value) => Some(
                    value
                        .as_f64()
                        .filter(|t| (0.0..=2.0).contains(t))
                        .ok_or_else(|| options.invalid("temperature", "a number from 0 to 2", value))?,
                ),
            },
            max_output_tokens: options
                .positive_integer("maxOutputTokens", u32::MAX as u64)?
                .map(|n| n as u32),
            tool_choice: read_tool_choice(&options)?,
            max_turns: options
                .positive_integer("maxTurns", MAX_TIMER_MS)?
                .map_or(DEFAULT_MAX_TURNS, |n| n as u32),
            tools: with_task(
                tool_filter.offered(with_builtins(
                    read_tools(&options)?,
                    builtins_on(&options, &advanced, shape)?,
                )),
                subagents.as_ref(),
                &advanced,
            )?,
            subagents: subagents.map(Arc::new),
            hook_timeout_ms: timeout(&advanced, "hookTimeoutMs", DEFAULT_HOOK_TIMEOUT_MS)?,
            include_hook_events: match advanced.get("includeHookEvents") {
                None => false,
                Some(Value::Bool(on)) => *on,
                Some(other) => return Err(advanced.invalid("includeHookEvents", "a boolean", other)),
            },
            session_end_hook_timeout_ms: timeout(
                &advanced,
                "sessionEndHookTimeoutMs",
                DEFAULT_SESSION_END_HOOK_TIMEOUT_MS,
            )?,
            hooks: Registry::parse(advanced.get("hooks"))?,
            stored_hooks: Registry::webhook_hooks(advanced.get("hooks")),
            store: StoreConfig::read(&advanced)?,
            lease_ttl_ms: timeout(&advanced, "leaseTtlMs", DEFAULT_LEASE_TTL_MS)?,
            logger: Sink::parse(advanced.get("logger"))?,
            permission: read_permission(&advanced, shape)?,
            tool_timeout_ms: timeout(&advanced, "toolTimeoutMs", DEFAULT_TOOL_TIMEOUT_MS)?,
            max_context_tokens,
            compaction: Compaction::read(&advanced, max_context_tokens)?,
            default_context: read_default_context(&advanced, options.get("filesystem"))?,
            confirmation: read_confirmation(&advanced)?,
            unsupported,
            mcp_servers: mcp::read(&advanced)?,
            web_fetch: WebPolicy::read(&advanced)?,
            tool_filter,
            approval_secret: match advanced.get("approvalSecret") {
                None => None,
                Some(Value::String(secret)) if !secret.is_empty() => Some(secret.clone()),
                // Named by kind only: it is a secret.
                Some(other) => {
                    return Err(SdkError::config(format!(
                        "advanced.approvalSecret must be a non-empty string (got {})",
                        kind(other)
                    ))
                    .at("advanced.approvalSecret"))
                }
            },
        })
    }

    /// `supportedModels()`'s `name` and `provider`.
    pub fn model_name(&self) -> (String, &'static str) {
        self.model.name()
    }

    /// The same model client with another model id (`setModel`); a scripted model stays as it is.
    pub fn with_model(&self, id: &str, host: Arc<dyn Host>) -> Option<Arc<dyn Model>> {
        Some(self.model.with_id(id)?.build(host))
    }

    /// The model client these options describe.
    pub fn build_model(&self, host: Arc<dyn Host>) -> Arc<dyn Model> {
        self.model.build(host)
    }

    pub fn tool_schemas(&self) -> Vec<ToolSchema> {
        self.tools.iter().map(|tool| tool.schema.clone()).collect()
    }
}

/// The option groups of `createAgent`'s options: `advanced`, `advanced.connection`, where the
/// provider is named (the options themselves), and the keys accepted but not built.
fn read_agent_groups<'a>(
    options: &OptionsObject<'a>,
) -> Result<(OptionsObject<'a>, OptionsObject<'a>, Endpoint<'a>, Vec<String>)> {
    let known: Vec<&str> = MODEL_KEYS.iter().chain(AGENT_KEYS).copied().collect();
    options.only(&known, &[])?;
    let advanced = match options.get("advanced") {
        None => OptionsObject::empty("advanced"),
        Some(value) => OptionsObject::of(value, "advanced", "an object")?,
    };
    let mut unsupported = advanced.only(ADVANCED_KEYS, &[UNSUPPORTED_ADVANCED, LEGACY_ADVANCED])?;
    unsupported.retain(|key| !LEGACY_ADVANCED.contains(&key.as_str()));
    let mut unsupported: Vec<String> = unsupported.iter().map(|key| advanced.field(key)).collect();
    let connection = match advanced.get("connection") {
        None => OptionsObject::empty("advanced.connection"),
        Some(value) => OptionsObject::of(value, "advanced.connection", "an object")?,
    };
    let ignored = connection.only(CONNECTION_KEYS, &[UNSUPPORTED_CONNECTION])?;
    unsupported.extend(ignored.iter().map(|key| connection.field(key)));
    let endpoint = Endpoint::Named(OptionsObject::new(options.map(), "options"));
    Ok((advanced, connection, endpoint, unsupported))
}

/// The same groups of `SessionOptions`: `advanced`'s keys are at the top, and the `provider`
/// object is both where the provider is named (`type`, `apiKey`, `baseUrl`) and the connection.
fn read_session_groups<'a>(
    options: &OptionsObject<'a>,
) -> Result<(OptionsObject<'a>, OptionsObject<'a>, Endpoint<'a>, Vec<String>)> {
    let known: Vec<&str> = MODEL_KEYS
        .iter()
        .chain(SESSION_KEYS)
        .chain(ADVANCED_KEYS)
        .copied()
        .filter(|key| *key != "connection")
        .collect();
    let unsupported = options.only(&known, &[UNSUPPORTED_ADVANCED, UNSUPPORTED_SESSION])?;
    let advanced = OptionsObject::new(options.map(), "options");
    let connection = match options.get("provider") {
        None => OptionsObject::empty("provider"),
        Some(value) => OptionsObject::of(value, "provider", "an object ({ type, apiKey?, baseUrl?, … })")?,
    };
    let endpoint_keys: Vec<&str> = ["type", "apiKey", "baseUrl", "baseURL"]
        .iter()
        .chain(CONNECTION_KEYS)
        .copied()
        .collect();
    let ignored = connection.only(&endpoint_keys, &[UNSUPPORTED_CONNECTION])?;
    let mut unsupported = unsupported;
    unsupported.extend(ignored.iter().map(|key| connection.field(key)));
    let endpoint = Endpoint::Object(OptionsObject::new(connection.map(), "provider"));
    Ok((advanced, connection, endpoint, unsupported))
}

/// Who decides whether a call may run: `advanced.permission` (a preset's name or a function);
/// in `SessionOptions` also Blade's `permissionHandler(request)`, `canUseTool(name, input,
/// options)` and `permissionMode`. A handler decides (`permissionHandler` before `canUseTool`,
/// as Blade picks); `permissionMode: 'plan'` still denies every call that is not read-only
/// first, whatever a handler would say; without a handler the mode is the preset.
fn read_permission(advanced: &OptionsObject, shape: Shape) -> Result<Option<Permission>> {
    let given = match advanced.get("permission") {
        None => None,
        Some(value) => Some(Permission::parse(value)?),
    };
    if shape == Shape::Agent {
        return Ok(given);
    }
    let function = |name: &str| -> Result<Option<Callable>> {
        match advanced.get(name) {
            None => Ok(None),
            Some(value) => callable(value)
                .map(Some)
                .ok_or_else(|| advanced.invalid(name, "a function", value)),
        }
    };
    let handler = match (function("permissionHandler")?, function("canUseTool")?) {
        (Some(handler), _) => Some(Permission::Function(handler)),
        (None, Some(can_use_tool)) => Some(Permission::CanUseTool(can_use_tool)),
        (None, None) => None,
    };
    let mode = match advanced.get("permissionMode") {
        None => None,
        Some(value) => Some(
            value
                .as_str()
                .and_then(Permission::mode)
                .ok_or_else(|| advanced.invalid("permissionMode", "'default', 'autoEdit', 'yolo' or 'plan'", value))?,
        ),
    };
    if given.is_some() && (handler.is_some() || mode.is_some()) {
        return Err(SdkError::config(
            "permission is given beside permissionMode, permissionHandler or canUseTool: pass one",
        )
        .at("permission"));
    }
    Ok(match (handler, mode) {
        (Some(Permission::Function(handler)), Some(Permission::Preset(Preset::Plan))) => {
            Some(Permission::PlanThen(handler, Form::Request))
        }
        (Some(Permission::CanUseTool(handler)), Some(Permission::Preset(Preset::Plan))) => {
            Some(Permission::PlanThen(handler, Form::CanUseTool))
        }
        (Some(handler), _) => Some(handler),
        (None, mode) => mode.or(given),
    })
}

/// `allowedTools` (when given; `[]` offers none) minus `disallowedTools`: which tools are
/// offered to the model. A tool not offered cannot be called either.
#[derive(Debug, Clone, Default)]
pub struct ToolFilter {
    allowed: Option<Vec<String>>,
    disallowed: Vec<String>,
}

impl ToolFilter {
    fn read(advanced: &OptionsObject) -> Result<Self> {
        let names = |field: &str| -> Result<Option<Vec<String>>> {
            let Some(value) = advanced.get(field) else {
                return Ok(None);
            };
            let list = value.as_array().filter(|items| items.iter().all(Value::is_string));
            let list = list.ok_or_else(|| advanced.invalid(field, "an array of tool names", value))?;
            Ok(Some(
                list.iter().filter_map(Value::as_str).map(str::to_string).collect(),
            ))
        };
        Ok(ToolFilter {
            allowed: names("allowedTools")?,
            disallowed: names("disallowedTools")?.unwrap_or_default(),
        })
    }

    pub fn offers(&self, name: &str) -> bool {
        let name = name.to_string();
        self.allowed.as_ref().is_none_or(|allowed| allowed.contains(&name)) && !self.disallowed.contains(&name)
    }

    pub fn offered(&self, tools: Vec<ToolSpec>) -> Vec<ToolSpec> {
        tools
            .into_iter()
            .filter(|tool| self.offers(&tool.schema.name))
            .collect()
    }
}

/// Whether the built-in tools are offered. A session (always local in a Node process) and a
/// `createAgent` with `filesystem` or `profile: 'local'` have them unless `builtinTools` is
/// `false`; a server agent has them only with `builtinTools: true`, as Blade decides.
fn builtins_on(options: &OptionsObject, advanced: &OptionsObject, shape: Shape) -> Result<bool> {
    let local = match shape {
        Shape::Session => true,
        Shape::Agent => {
            options.get("filesystem").is_some() || options.get("profile").and_then(Value::as_str) == Some("local")
        }
    };
    match advanced.get("builtinTools") {
        None => Ok(local),
        Some(Value::Bool(on)) => Ok(*on),
        Some(other) => Err(advanced.invalid("builtinTools", "a boolean", other)),
    }
}

/// The user's tools, then the built-ins (when on) whose names the user's tools do not take: a
/// tool of the user's named `Bash` replaces the built-in one.
fn with_builtins(mut tools: Vec<ToolSpec>, on: bool) -> Vec<ToolSpec> {
    if on {
        for builtin in Builtin::ALL {
            if !tools.iter().any(|tool| tool.schema.name == builtin.name()) {
                tools.push(ToolSpec::builtin(builtin));
            }
        }
    }
    tools
}

/// With sub-agents, the `Task` tool that runs them (unless `disallowedTools` names it); a tool of
/// the user's may not take its name.
fn with_task(
    mut tools: Vec<ToolSpec>,
    subagents: Option<&Subagents>,
    advanced: &OptionsObject,
) -> Result<Vec<ToolSpec>> {
    let Some(subagents) = subagents else {
        return Ok(tools);
    };
    if tools.iter().any(|tool| tool.schema.name == TASK_TOOL) {
        return Err(SdkError::config(format!(
            "a tool is named \"{TASK_TOOL}\", the name of the tool that runs advanced.agents: rename it"
        )));
    }
    let disallowed = advanced
        .get("disallowedTools")
        .and_then(Value::as_array)
        .is_some_and(|names| names.iter().any(|name| name == TASK_TOOL));
    if !disallowed {
        tools.push(ToolSpec {
            schema: subagents.task_schema(),
            // Delegating does nothing by itself; each of the sub-agent's calls is checked.
            kind: ToolKind::Readonly,
            side_effect: SideEffect::NonIdempotent,
            execute: Runner::Task,
        });
    }
    Ok(tools)
}

/// `toolChoice`: `'auto'`, `'none'`, `'required'` or `{ name }`; absent or `null` is nothing
/// (the server's default).
pub(crate) fn read_tool_choice(options: &OptionsObject<'_>) -> Result<Option<ToolChoice>> {
    const EXPECTED: &str = "'auto', 'none', 'required' or { name: string }";
    let Some(value) = options.get("toolChoice") else {
        return Ok(None);
    };
    let choice = match value {
        Value::String(word) => match word.as_str() {
            "auto" => ToolChoice::Auto,
            "none" => ToolChoice::None,
            "required" => ToolChoice::Required,
            _ => return Err(options.invalid("toolChoice", EXPECTED, value)),
        },
        Value::Object(_) => {
            let named = OptionsObject::of(value, "toolChoice", EXPECTED)?;
            named.only(&["name"], &[])?;
            match named.str("name")? {
                Some(name) if !name.is_empty() => ToolChoice::Tool(name.to_string()),
                _ => return Err(named.invalid("name", "a tool's name", named.get("name").unwrap_or(&Value::Null))),
            }
        }
        _ => return Err(options.invalid("toolChoice", EXPECTED, value)),
    };
    Ok(Some(choice))
}

/// `advanced.defaultContext` (`{ environment?, metadata?, capabilities? }`), with the top-level
/// `filesystem` (`{ roots, cwd? }`) merged into `capabilities.filesystem`, as Blade does.
pub(crate) fn read_default_context(advanced: &OptionsObject, filesystem: Option<&Value>) -> Result<Map<String, Value>> {
    let mut context = match advanced.get("defaultContext") {
        None => Map::new(),
        Some(value) => {
            let fields = OptionsObject::of(value, "advanced.defaultContext", "an object")?;
            fields.only(&["environment", "metadata", "capabilities"], &[])?;
            for name in ["environment", "metadata", "capabilities"] {
                if let Some(value) = fields.get(name) {
                    OptionsObject::of(value, &fields.field(name), "an object")?;
                }
            }
            fields.map().clone()
        }
    };
    context.retain(|_, value| !value.is_null());
    if let Some(value) = filesystem {
        let fields = OptionsObject::of(value, "filesystem", "an object ({ roots, cwd? })")?;
        fields.only(&["roots", "cwd"], &[])?;
        let roots = fields
            .get("roots")
            .filter(|roots| roots.as_array().is_some_and(|items| items.iter().all(Value::is_string)))
            .ok_or_else(|| SdkError::config("filesystem.roots must be an array of paths").at("filesystem.roots"))?;
        let mut filesystem = Map::new();
        filesystem.insert("roots".into(), roots.clone());
        if let Some(cwd) = fields.string("cwd")? {
            filesystem.insert("cwd".into(), Value::String(cwd));
        }
        let capabilities = context
            .entry("capabilities")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Value::Object(capabilities) = capabilities {
            capabilities.insert("filesystem".into(), Value::Object(filesystem));
        }
    }
    Ok(context)
}

/// The store `options` name (`advanced.store`, Blade's `storagePath`), read alone: what
/// `resumeAgent` opens before the session is made.
pub fn store_of(options: &Value, shape: Shape) -> Result<StoreConfig> {
    let options = OptionsObject::of(options, "options", "an object")?;
    if shape == Shape::Session {
        return StoreConfig::read(&options);
    }
    match options.get("advanced") {
        None => Ok(StoreConfig::Memory),
        Some(advanced) => StoreConfig::read(&OptionsObject::of(advanced, "advanced", "an object")?),
    }
}

fn read_confirmation(advanced: &OptionsObject) -> Result<Option<Confirmation>> {
    if let Some(value) = advanced.get("confirmationHandler") {
        let handler = OptionsObject::of(
            value,
            "advanced.confirmationHandler",
            "an object with a requestConfirmation method",
        )?;
        let method = handler.get("requestConfirmation").and_then(callable).ok_or_else(|| {
            SdkError::config("advanced.confirmationHandler.requestConfirmation must be a function")
                .at("advanced.confirmationHandler.requestConfirmation")
        })?;
        return Ok(Some(Confirmation::Handler(method)));
    }
    match advanced.get("confirmationHandlerFactory") {
        None => Ok(None),
        Some(value) => callable(value)
            .map(|factory| Some(Confirmation::Factory(factory)))
            .ok_or_else(|| advanced.invalid("confirmationHandlerFactory", "a function", value)),
    }
}

/// `hookTimeoutMs must be a positive integer no greater than 2147483647`.
fn timeout(advanced: &OptionsObject, name: &str, default: u32) -> Result<u32> {
    match advanced.get(name) {
        None | Some(Value::Null) => Ok(default),
        Some(value) => whole_number(value)
            .filter(|n| (1..=MAX_TIMER_MS).contains(n))
            .map(|n| n as u32)
            .ok_or_else(|| {
                // The contract's text names the bare option; the field says where it is.
                SdkError::config(format!(
                    "{name} must be a positive integer no greater than {MAX_TIMER_MS}"
                ))
                .at(&advanced.field(name))
            }),
    }
}

fn read_tools(options: &OptionsObject) -> Result<Vec<ToolSpec>> {
    let Some(value) = options.get("tools") else {
        return Ok(Vec::new());
    };
    let Value::Array(items) = value else {
        return Err(options.invalid("tools", "an array of tool definitions", value));
    };
    let mut seen: HashSet<&str> = HashSet::new();
    let mut tools = Vec::with_capacity(items.len());
    for (index, item) in items.iter().enumerate() {
        let path = format!("tools[{index}]");
        let tool = OptionsObject::of(item, &path, "a tool definition (defineTool({ name, execute }))")?;
        // Other keys are left alone: tool objects often carry fields of the caller's own.
        let name = tool
            .string("name")?
            .filter(|name| !name.trim().is_empty())
            .ok_or_else(|| {
                SdkError::config(format!("{path}.name must be a non-empty string")).at(&format!("{path}.name"))
            })?;
        if !seen.insert(tool.map()["name"].as_str().unwrap_or_default()) {
            return Err(
                SdkError::config(format!("{path}.name \"{name}\" is already the name of another tool"))
                    .at(&format!("{path}.name")),
            );
        }
        // One of `getBuiltinTools()`'s: it runs in Rust.
        if let Some(marker) = tool.get("builtin") {
            let builtin = marker
                .as_str()
                .and_then(Builtin::parse)
                .filter(|builtin| builtin.name() == name)
                .ok_or_else(|| {
                    tool.invalid(
                        "builtin",
                        "the name of a built-in tool, as getBuiltinTools() gives it",
                        marker,
                    )
                })?;
            tools.push(ToolSpec::builtin(builtin));
            continue;
        }
        let execute = tool.get("execute").and_then(callable).ok_or_else(|| {
            SdkError::config(format!("{path}.execute must be a function")).at(&format!("{path}.execute"))
        })?;
        let parameters = match tool.get("parameters") {
            None => serde_json::json!({"type": "object", "properties": {}}),
            Some(value @ Value::Object(_)) => value.clone(),
            Some(other) => return Err(tool.invalid("parameters", "a JSON Schema object", other)),
        };
        let kind = match tool.string("kind")? {
            None => ToolKind::Execute,
            Some(text) => ToolKind::parse(&text).ok_or_else(|| {
                SdkError::config(format!(
                    "{path}.kind must be one of readonly, write, execute (got \"{text}\")"
                ))
                .at(&format!("{path}.kind"))
            })?,
        };
        let side_effect = match tool.string("sideEffect")? {
            None => SideEffect::NonIdempotent,
            Some(text) => SideEffect::parse(&text).ok_or_else(|| {
                SdkError::config(format!(
                    "{path}.sideEffect must be one of pure, idempotent, non_idempotent (got \"{text}\")"
                ))
                .at(&format!("{path}.sideEffect"))
            })?,
        };
        tools.push(ToolSpec {
            schema: ToolSchema {
                name,
                description: tool.string("description")?,
                parameters: Arc::new(parameters),
            },
            kind,
            side_effect,
            execute: Runner::Js(execute),
        });
    }
    Ok(tools)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::Provider;
    use serde_json::json;

    fn store_of_agent(options: &Value) -> Result<StoreConfig> {
        store_of(options, Shape::Agent)
    }

    fn config(options: Value) -> Result<AgentConfig> {
        AgentConfig::from_options(&options, &HashMap::new())
    }

    fn error(options: Value) -> String {
        let error = config(options).unwrap_err();
        assert_eq!(error.code, crate::error::ErrorCode::Config);
        error.message
    }

    fn tool(name: &str) -> Value {
        json!({"name": name, "execute": {"$function": 0}})
    }

    #[test]
    fn mcp_servers_are_read_and_their_tools_obey_the_tool_filter() {
        let config = config(json!({
            "model": "m", "apiKey": "k",
            "advanced": {
                "mcpServers": {"files": {"command": "node", "args": ["s.js"]}},
                "allowedTools": ["mcp__files__read", "mcp__files__write"],
                "disallowedTools": ["mcp__files__write"],
            },
        }))
        .unwrap();
        assert!(config.unsupported.is_empty());
        assert_eq!(config.mcp_servers.len(), 1);
        assert_eq!(config.mcp_servers[0].name, "files");
        assert!(
            matches!(&config.mcp_servers[0].transport, mcp::Transport::Stdio { args, .. } if args == &["s.js".to_string()])
        );
        let offers = |server: &str, tool: &str| config.tool_filter.offers(&mcp::tool_name(server, tool));
        assert!(offers("files", "read"));
        assert!(!offers("files", "write"));
        assert!(!offers("files", "delete"));
        assert!(ToolFilter::default().offers("mcp__any__tool"));
        assert_eq!(
            error(json!({"model": "m", "apiKey": "k", "advanced": {"mcpServers": {"s": {"command": 1}}}})),
            "advanced.mcpServers.s.command must be a string (got 1)"
        );
    }

    #[test]
    fn minimal_options_get_the_defaults() {
        let config = config(json!({"model": "gpt-4o-mini", "apiKey": "k"})).unwrap();
        assert_eq!(config.max_turns, 200);
        assert_eq!(config.hook_timeout_ms, 600_000);
        assert_eq!(config.session_end_hook_timeout_ms, 3_000);
        let ModelChoice::Http {
            provider, connection, ..
        } = config.model
        else {
            panic!("http model")
        };
        assert_eq!(provider, Provider::OpenAi);
        assert_eq!(connection.base_url, "https://api.openai.com/v1");
        assert_eq!(connection.api_key.as_deref(), Some("k"));
        assert_eq!(connection.settings.max_retries, 2);
    }

    #[test]
    fn the_api_key_falls_back_on_the_environment() {
        let env = HashMap::from([("ANTHROPIC_API_KEY".to_string(), "from-env".to_string())]);
        let config = AgentConfig::from_options(&json!({"model": "claude", "provider": "anthropic"}), &env).unwrap();
        let ModelChoice::Http { connection, .. } = config.model else {
            panic!("http model")
        };
        assert_eq!(connection.api_key.as_deref(), Some("from-env"));
        assert_eq!(connection.base_url, "https://api.anthropic.com");
    }

    #[test]
    fn the_base_url_falls_back_on_the_sdks_variables() {
        let model = |options: Value, env: &[(&str, &str)]| {
            let env = env.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect();
            match AgentConfig::from_options(&options, &env).map(|config| config.model) {
                Ok(ModelChoice::Http { connection, .. }) => Ok(connection.base_url),
                Ok(_) => panic!("http model"),
                Err(error) => Err(error.message),
            }
        };
        let local = [("OPENAI_BASE_URL", "http://127.0.0.1:8080/v1")];
        // No key needed for a server of one's own, as with baseUrl.
        assert_eq!(
            model(json!({"model": "m"}), &local).unwrap(),
            "http://127.0.0.1:8080/v1"
        );
        assert_eq!(
            model(json!({"model": "m", "provider": "openai-compatible"}), &local).unwrap(),
            "http://127.0.0.1:8080/v1"
        );
        // The option wins over the variable; an empty variable is unset; each provider its own.
        assert_eq!(
            model(json!({"model": "m", "baseUrl": "http://10.0.0.1/v1"}), &local).unwrap(),
            "http://10.0.0.1/v1"
        );
        assert_eq!(
            model(json!({"model": "m", "apiKey": "k"}), &[("OPENAI_BASE_URL", "")]).unwrap(),
            "https://api.openai.com/v1"
        );
        let anthropic = [
            ("ANTHROPIC_BASE_URL", "http://127.0.0.1:4000"),
            ("ANTHROPIC_API_KEY", "k"),
        ];
        assert_eq!(
            model(json!({"model": "claude", "provider": "anthropic"}), &anthropic).unwrap(),
            "http://127.0.0.1:4000"
        );
        assert_eq!(
            model(json!({"model": "d", "provider": "deepseek", "apiKey": "k"}), &local).unwrap(),
            "https://api.deepseek.com"
        );
        assert_eq!(
            model(json!({"model": "m"}), &[("OPENAI_BASE_URL", "file:///etc")]).unwrap_err(),
            "OPENAI_BASE_URL must be an http(s) URL (\"file:///etc\" uses file)"
        );
    }

    #[test]
    fn each_bad_option_is_named() {
        let cases = [
            (json!({}), "model is required: pass a model id such as \"gpt-4o-mini\", or scriptedModel(...)"),
            (json!({"model": 3}), "model must be a model id string or scriptedModel(...) (got 3)"),
            (json!({"model": " "}), "model must not be empty"),
            (json!({"model": "m", "apiKey": "k", "provider": "mistral"}), "provider must be one of openai, openai-compatible, anthropic, deepseek, azure-openai, gemini (got \"mistral\")"),
            (json!({"model": "m"}), "apiKey is required for provider openai: pass apiKey or set OPENAI_API_KEY"),
            (json!({"model": "m", "baseUrl": "http://a", "baseURL": "http://b"}), "baseUrl and baseURL are both set and differ (\"http://a\" and \"http://b\"): pass only one"),
            (json!({"model": "m", "baseURL": "ftp://a"}), "baseURL must be an http(s) URL (\"ftp://a\" uses ftp)"),
            (json!({"model": "m", "apiKey": "k", "maxTurns": 0}), "maxTurns must be a positive integer no greater than 2147483647 (got 0)"),
            (json!({"model": "m", "apiKey": "k", "maxTurns": 1.5}), "maxTurns must be a positive integer no greater than 2147483647 (got 1.5)"),
            (json!({"model": "m", "apiKey": "k", "temperature": 3}), "temperature must be a number from 0 to 2 (got 3)"),
            (json!({"model": "m", "apiKey": "k", "systemPrompt": 1}), "systemPrompt must be a string (got 1)"),
            (json!({"model": "m", "apiKey": "k", "maxTurn": 1}), "maxTurn is not a known option (known here: model, systemPrompt, temperature, maxOutputTokens, toolChoice, maxTurns, tools, apiKey, provider, baseUrl, baseURL, advanced, profile, filesystem)"),
            (json!({"model": "m", "apiKey": "k", "tools": {}}), "tools must be an array of tool definitions (got an object)"),
            (json!({"model": "m", "apiKey": "k", "tools": [{"execute": {"$function": 0}}]}), "tools[0].name must be a non-empty string"),
            (json!({"model": "m", "apiKey": "k", "tools": [{"name": "x"}]}), "tools[0].execute must be a function"),
            (json!({"model": "m", "apiKey": "k", "tools": [{"name": "x", "execute": "run"}]}), "tools[0].execute must be a function"),
            (json!({"model": "m", "apiKey": "k", "tools": [tool("a"), tool("a")]}), "tools[1].name \"a\" is already the name of another tool"),
            (json!({"model": "m", "apiKey": "k", "tools": [{"name": "a", "kind": "admin", "execute": {"$function": 0}}]}), "tools[0].kind must be one of readonly, write, execute (got \"admin\")"),
            (json!({"model": "m", "apiKey": "k", "tools": [{"name": "a", "parameters": "x", "execute": {"$function": 0}}]}), "tools[0].parameters must be a JSON Schema object (got \"x\")"),
            (json!({"model": "m", "apiKey": "k", "advanced": {"connection": {"headers": {"x": 1}}}}), "advanced.connection.headers.x must be a string (got a number)"),
            (json!({"model": "m", "apiKey": 918273645}), "apiKey must be a string (got a number)"),
            (json!({"model": "m", "apiKey": {"$js": "918273645n"}}), "apiKey must be a string (got a bigint)"),
            (json!({"model": "m", "baseUrl": "ftp://me:pw@h/?key=918273645"}), "baseUrl must be an http(s) URL (\"ftp://h/\" uses ftp)"),
            (json!({"model": "m", "baseUrl": "http://a?k=918273645", "baseURL": "http://a?k=1"}), "baseUrl and baseURL are both set and differ (\"http://a\" and \"http://a\"): pass only one"),
            (json!({"model": "m", "apiKey": "k", "advanced": {"connection": {"maxResponseBytes": 0}}}), "advanced.connection.maxResponseBytes must be a positive integer no greater than 9007199254740991 (got 0)"),
            (json!({"model": "m", "apiKey": "k", "advanced": {"connection": {"maxResponseBytes": "1MB"}}}), "advanced.connection.maxResponseBytes must be a positive integer no greater than 9007199254740991 (got \"1MB\")"),
            (json!({"model": "m", "apiKey": "k", "advanced": {"connection": {"maxRetries": 11}}}), "advanced.connection.maxRetries must be an integer from 0 to 10 (got 11)"),
            (json!({"model": "m", "apiKey": "k", "advanced": {"nope": 1}}), "advanced.nope is not a known option (known here: hooks, hookTimeoutMs, sessionEndHookTimeoutMs, permission, connection, logger, defaultContext, allowedTools, disallowedTools, toolTimeoutMs, maxContextTokens, confirmationHandler, confirmationHandlerFactory, approvalSecret, store, storagePath, persistSession, compaction, agents, maxSubagentDepth, maxSubagentCalls, mcpServers, leaseTtlMs, builtinTools, webFetch, includeHookEvents)"),
            (json!({"model": {"$function": 0}}), "model must be a model id string or scriptedModel(...) (got a function)"),
            (json!({"model": "m", "apiKey": "k", "maxTurns": {"$js": "Infinity"}}), "maxTurns must be a positive integer no greater than 2147483647 (got Infinity)"),
        ];
        for (options, expected) in cases {
            assert_eq!(error(options.clone()), expected, "for {options}");
        }
    }

    #[test]
    fn the_store_is_read_alone_from_the_options() {
        assert_eq!(store_of_agent(&json!({})).unwrap(), StoreConfig::Memory);
        assert_eq!(
            store_of_agent(&json!({"model": "m", "advanced": {"store": {"sqlite": "/data/s.db"}}})).unwrap(),
            StoreConfig::Sqlite("/data/s.db".into())
        );
        assert_eq!(
            store_of_agent(&json!({"advanced": 1})).unwrap_err().message,
            "advanced must be an object (got 1)"
        );
    }

    #[test]
    fn hooks_and_permission_are_read() {
        let config = config(json!({
            "model": "m", "apiKey": "k",
            "advanced": {"hooks": {"PostToolUse": [{"$function": 3}, {"$function": 1}], "SessionEnd": []}, "permission": "plan"}
        }))
        .unwrap();
        assert_eq!(config.hooks.entries(crate::hooks::HookEvent::PostToolUse).len(), 2);
        assert!(config.hooks.entries(crate::hooks::HookEvent::SessionEnd).is_empty());
        assert_eq!(
            config.permission,
            Some(Permission::Preset(super::super::permission::Preset::Plan))
        );
        let with_function = config_of(json!({"$function": 7}));
        assert_eq!(with_function.permission, Some(Permission::Function(Callable(7))));
    }

    fn config_of(permission: Value) -> AgentConfig {
        config(json!({"model": "m", "apiKey": "k", "advanced": {"permission": permission}})).unwrap()
    }

    #[test]
    fn bad_hooks_and_permissions_are_named() {
        let cases = [
            (json!({"hooks": {"PreToolUse": {"$function": 0}}}), "advanced.hooks.PreToolUse must be an array of callbacks or hook objects (got a function)"),
            (json!({"hooks": {"PreToolUse": [{"$function": 0}, "x"]}}), "advanced.hooks.PreToolUse[1] must be a function or a hook object (got \"x\")"),
            (json!({"hooks": 3}), "advanced.hooks must be an object mapping hook events to callbacks, or an array of hook objects (got 3)"),
            (json!({"permission": "yolo"}), "advanced.permission must be 'default', 'accept-edits', 'bypass-permissions', 'plan' or a function (got \"yolo\")"),
        ];
        for (advanced, expected) in cases {
            assert_eq!(
                error(json!({"model": "m", "apiKey": "k", "advanced": advanced})),
                expected
            );
        }
    }

    #[test]
    fn hook_timeouts_use_the_exact_texts() {
        for bad in [json!(0), json!(-1), json!(1.5), json!("50"), json!(2_147_483_648u64)] {
            assert_eq!(
                error(json!({"model": "m", "apiKey": "k", "advanced": {"hookTimeoutMs": bad}})),
                "hookTimeoutMs must be a positive integer no greater than 2147483647"
            );
            assert_eq!(
                error(json!({"model": "m", "apiKey": "k", "advanced": {"sessionEndHookTimeoutMs": bad}})),
                "sessionEndHookTimeoutMs must be a positive integer no greater than 2147483647"
            );
        }
        let config = config(json!({"model": "m", "apiKey": "k", "advanced": {"hookTimeoutMs": 50, "sessionEndHookTimeoutMs": 2147483647}})).unwrap();
        assert_eq!(
            (config.hook_timeout_ms, config.session_end_hook_timeout_ms),
            (50, 2_147_483_647)
        );
    }

    #[test]
    fn scripted_models_are_read_from_turns_or_a_function() {
        let turns = config(json!({"model": {"kind": "scripted", "turns": [{"text": "hi"}]}})).unwrap();
        assert!(matches!(turns.model, ModelChoice::ScriptedTurns(ref t) if t.len() == 1));
        let function = config(json!({"model": {"kind": "scripted", "script": {"$function": 4}}})).unwrap();
        assert!(matches!(function.model, ModelChoice::ScriptedFunction(Callable(4))));
        assert_eq!(
            error(json!({"model": {"kind": "scripted", "turns": [{"text": 1}]}})),
            "model.turns[0].text must be a string (got 1)"
        );
    }
}
