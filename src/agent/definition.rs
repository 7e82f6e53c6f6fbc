//! What an agent is made of once created, and never changes: its options, its tools as the
//! model sees them, the host that runs its user functions, and its hook dispatcher. A run
//! borrows it; the mutable rest (conversation, settings, lifecycle) is elsewhere.

use std::sync::{Arc, OnceLock};

use super::config::AgentConfig;
use super::tools::{Runner, SideEffect, ToolKind, ToolSpec};
use crate::builtins;
use crate::error::{Result, SdkError};
use crate::hooks::dispatch::Dispatcher;
use crate::host::Host;
use crate::ids;
use crate::log::Log;
use crate::mcp::{self, Servers};
use crate::model::ToolSchema;

pub struct Agent {
    pub id: String,
    pub config: AgentConfig,
    pub host: Arc<dyn Host>,
    pub dispatcher: Dispatcher,
    /// The tools offered, final once the MCP servers are started (at once without any).
    tools: OnceLock<Toolset>,
    /// What the built-in tools keep between calls (files Read, background shells).
    pub builtins: Arc<builtins::State>,
}

/// The agent's tools: its own, then its MCP servers', as the model sees them.
struct Toolset {
    tools: Vec<ToolSpec>,
    schemas: Vec<ToolSchema>,
    mcp: Option<Servers>,
}

impl Toolset {
    fn of(mut tools: Vec<ToolSpec>, mcp: Option<Servers>, config: &AgentConfig) -> Self {
        if let Some(servers) = &mcp {
            for (index, tool) in servers.tools.iter().enumerate() {
                if !config.tool_filter.offers(&tool.name) {
                    continue;
                }
                tools.push(ToolSpec {
                    schema: ToolSchema {
                        name: tool.name.clone(),
                        description: (!tool.description.is_empty()).then(|| tool.description.clone()),
                        parameters: Arc::new(tool.input_schema.clone()),
                    },
                    // Unless the server says it only reads, what it does is unknown:
                    // permission presets treat it as they treat a shell.
                    kind: if tool.read_only {
                        ToolKind::Readonly
                    } else {
                        ToolKind::Execute
                    },
                    side_effect: SideEffect::NonIdempotent,
                    execute: Runner::Mcp(index),
                });
            }
        }
        Toolset {
            schemas: tools.iter().map(|tool| tool.schema.clone()).collect(),
            tools,
            mcp,
        }
    }
}

/// A tool of the agent's own may not take an MCP tool's name: calls, matchers and permission
/// rules written for one would govern the other.
fn no_tool_shadows(tools: &[ToolSpec], servers: &Servers) -> Result<()> {
    for tool in tools {
        if let Some(mcp) = servers.tools.iter().find(|mcp| mcp.name == tool.schema.name) {
            return Err(SdkError::config(format!(
                "a tool is named \"{}\", the name of a tool of advanced.mcpServers.{}: rename it",
                tool.schema.name,
                servers.server_name(mcp)
            )));
        }
    }
    Ok(())
}

impl Agent {
    /// `id`: the session's, when it is resumed; else a new one.
    pub fn new(mut config: AgentConfig, host: Arc<dyn Host>, id: Option<String>) -> Self {
        let log = Log::new(host.clone(), config.logger.take());
        let dispatcher = Dispatcher::new(
            std::mem::take(&mut config.hooks),
            config.hook_timeout_ms,
            config.session_end_hook_timeout_ms,
            host.clone(),
            log,
        );
        let tools = OnceLock::new();
        if config.mcp_servers.is_empty() {
            let _ = tools.set(Toolset::of(config.tools.clone(), None, &config));
        }
        let builtins = Arc::new(builtins::State::with_web_policy(config.web_fetch.clone()));
        Agent {
            id: id.unwrap_or_else(ids::uuid),
            config,
            host,
            dispatcher,
            tools,
            builtins,
        }
    }

    /// Starts `advanced.mcpServers` and makes the tool list final; a server that cannot start
    /// is a `ConfigError` naming it. Does nothing the second time.
    pub async fn start_mcp(&self) -> Result<()> {
        if self.tools.get().is_some() {
            return Ok(());
        }
        let servers = Servers::start(self.config.mcp_servers.clone()).await?;
        if let Err(error) = no_tool_shadows(&self.config.tools, &servers) {
            servers.stop().await;
            return Err(error);
        }
        for skipped in &servers.skipped {
            self.log().warn(skipped, serde_json::json!({}));
        }
        let toolset = Toolset::of(self.config.tools.clone(), Some(servers), &self.config);
        if let Err(toolset) = self.tools.set(toolset) {
            // Started twice at once: the other's servers won.
            if let Some(servers) = toolset.mcp {
                servers.stop().await;
            }
        }
        Ok(())
    }

    /// The tools offered to the model, and callable.
    pub fn tools(&self) -> &[ToolSpec] {
        self.tools.get().map_or(&self.config.tools, |toolset| &toolset.tools)
    }

    pub fn tool_schemas(&self) -> &[ToolSchema] {
        self.tools.get().map_or(&[], |toolset| &toolset.schemas)
    }

    /// The MCP servers, once started.
    pub fn mcp(&self) -> Option<&Servers> {
        self.tools.get().and_then(|toolset| toolset.mcp.as_ref())
    }

    /// The MCP tool a runner calls.
    pub fn mcp_tool(&self, runner: Runner) -> Option<(&Servers, &mcp::Tool)> {
        let Runner::Mcp(index) = runner else {
            return None;
        };
        let servers = self.mcp()?;
        Some((servers, servers.tools.get(index)?))
    }

    /// Where the agent reports what it does not fail for.
    pub fn log(&self) -> &Log {
        self.dispatcher.log()
    }
}
