//! What `setModel`, `setMaxTurns`, `setPermissionMode` and `setDefaultContext` change. A run
//! takes a copy when it starts: a change applies from the next run.

use std::sync::Arc;

use serde_json::{Map, Value};

use super::config::AgentConfig;
use super::permission::Permission;
use super::subagents::Child;
use crate::host::Host;
use crate::model::Model;

#[derive(Clone)]
pub struct RunSettings {
    pub model: Arc<dyn Model>,
    /// `supportedModels()`'s `name`.
    pub model_name: String,
    pub max_turns: u32,
    pub permission: Option<Permission>,
    /// What tools get as their context besides the signal and ids.
    pub default_context: Arc<Map<String, Value>>,
    /// Set in a sub-agent's run: its place in the tree, prompt and tools.
    pub child: Option<Arc<Child>>,
}

impl RunSettings {
    /// The settings `config` starts with.
    pub fn of(config: &AgentConfig, host: Arc<dyn Host>) -> Self {
        RunSettings {
            model: config.build_model(host),
            model_name: config.model_name().0,
            max_turns: config.max_turns,
            permission: config.permission,
            default_context: Arc::new(config.default_context.clone()),
            child: None,
        }
    }
}
