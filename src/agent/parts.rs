//! What an agent is made of once created, and never changes: its options, its tools as the
//! model sees them, the host that runs its user functions, and its hook dispatcher. A run
//! borrows it; the mutable rest (conversation, settings, lifecycle) is elsewhere.

use std::sync::Arc;

use super::config::AgentConfig;
use crate::hooks::dispatch::Dispatcher;
use crate::host::Host;
use crate::ids;
use crate::log::Log;
use crate::model::ToolSchema;

pub struct Agent {
    pub id: String,
    pub config: AgentConfig,
    pub tool_schemas: Vec<ToolSchema>,
    pub host: Arc<dyn Host>,
    pub dispatcher: Dispatcher,
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
        Agent {
            id: id.unwrap_or_else(ids::uuid),
            tool_schemas: config.tool_schemas(),
            config,
            host,
            dispatcher,
        }
    }

    /// Where the agent reports what it does not fail for.
    pub fn log(&self) -> &Log {
        self.dispatcher.log()
    }
}
