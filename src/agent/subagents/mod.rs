//! Sub-agents (SPEC §8.4): `advanced.agents` gives the model a `Task` tool that runs a named
//! child agent to completion. A child is a run of the same agent — the same hooks, hook objects,
//! webhooks, environment hooks, permission and confirmation handler — with its own system
//! prompt, tools, model and turns, and its place in the tree (`agentPath`). What a child is
//! configured with, and where a run sits, live here; `pipeline.rs` starts children.

pub mod delegate;

use std::collections::HashSet;
use std::sync::Arc;

use serde_json::{json, Map, Value};

use crate::agent::events::StreamEvent;
use crate::agent::reader::EventSender;
use crate::agent::tools::ToolSpec;
use crate::error::{Result, SdkError};
use crate::js_value::MAX_TIMER_MS;
use crate::model::ToolSchema;
use crate::options::OptionsObject;

/// The tool the model delegates with.
pub const TASK_TOOL: &str = "Task";
pub const DEFAULT_MAX_DEPTH: usize = 3;
/// The deepest tree `maxSubagentDepth` allows. Depth no longer costs stack (each sub-agent is
/// a task of its own), and `maxSubagentCalls` bounds the work; past this a setting is a mistake.
pub const MAX_DEPTH: u64 = 32;
/// `advanced.maxSubagentCalls`: the `Task` calls one root run's whole tree may make.
pub const DEFAULT_MAX_CALLS: u32 = 100;
pub const MAX_CALLS: u64 = 10_000;

/// One entry of `advanced.agents`.
#[derive(Debug, Clone)]
pub struct SubagentSpec {
    /// Its key in `advanced.agents`: the `subagent_type` that runs it, and its `agentId`.
    pub name: String,
    pub description: String,
    pub system_prompt: Option<String>,
    /// The parent's tools it may use; absent: all of them.
    pub allowed_tools: Option<Vec<String>>,
    /// `model`: absent, the parent's; else read as the top-level `model` is.
    pub model: Option<Value>,
    pub max_turns: Option<u32>,
}

/// `advanced.agents`, `advanced.maxSubagentDepth` and `advanced.maxSubagentCalls`.
#[derive(Debug, Clone)]
pub struct Subagents {
    pub agents: Vec<SubagentSpec>,
    /// How deep the tree may grow: children of the root are at depth 1.
    pub max_depth: usize,
    /// How many sub-agents one root run's tree may start, at every depth together.
    pub max_calls: u32,
}

impl Subagents {
    pub fn read(advanced: &OptionsObject) -> Result<Option<Self>> {
        let max_depth = advanced
            .positive_integer("maxSubagentDepth", MAX_DEPTH)?
            .map_or(DEFAULT_MAX_DEPTH, |n| n as usize);
        let max_calls = advanced
            .positive_integer("maxSubagentCalls", MAX_CALLS)?
            .map_or(DEFAULT_MAX_CALLS, |n| n as u32);
        let Some(value) = advanced.get("agents") else {
            return Ok(None);
        };
        let Value::Object(entries) = value else {
            return Err(advanced.invalid("agents", "an object of sub-agents by name", value));
        };
        let mut agents = Vec::with_capacity(entries.len());
        for (name, entry) in entries {
            let path = format!("advanced.agents.{name}");
            if name.trim().is_empty() {
                return Err(
                    SdkError::config("advanced.agents has an empty name; name each sub-agent").at("advanced.agents"),
                );
            }
            let options = OptionsObject::of(entry, &path, "an object like { description, systemPrompt? }")?;
            // Blade's `AgentDefinition` repeats the key as `name`; the key stays the sub-agent's id.
            options.only(
                &[
                    "name",
                    "description",
                    "systemPrompt",
                    "allowedTools",
                    "model",
                    "maxTurns",
                ],
                &[],
            )?;
            if let Some(given) = options.string("name")? {
                if given != *name {
                    return Err(SdkError::config(format!(
                        "{path}.name is \"{given}\" but its key is \"{name}\": give both the same name"
                    ))
                    .at(&format!("{path}.name")));
                }
            }
            let description = options
                .string("description")?
                .filter(|text| !text.trim().is_empty())
                .ok_or_else(|| {
                    SdkError::config(format!("{path}.description must be a non-empty string"))
                        .at(&format!("{path}.description"))
                })?;
            let allowed_tools = match options.get("allowedTools") {
                None => None,
                Some(Value::Array(items)) if items.iter().all(Value::is_string) => {
                    Some(items.iter().filter_map(Value::as_str).map(str::to_string).collect())
                }
                Some(other) => return Err(options.invalid("allowedTools", "an array of tool names", other)),
            };
            agents.push(SubagentSpec {
                name: name.clone(),
                description,
                system_prompt: options.string("systemPrompt")?,
                allowed_tools,
                model: options.get("model").cloned(),
                max_turns: options.positive_integer("maxTurns", MAX_TIMER_MS)?.map(|n| n as u32),
            });
        }
        if agents.is_empty() {
            return Ok(None);
        }
        Ok(Some(Subagents {
            agents,
            max_depth,
            max_calls,
        }))
    }

    pub fn get(&self, name: &str) -> Option<&SubagentSpec> {
        self.agents.iter().find(|agent| agent.name == name)
    }

    /// The `Task` tool as the model sees it: the sub-agents by name, with their descriptions.
    pub fn task_schema(&self) -> ToolSchema {
        let listed: Vec<String> = self
            .agents
            .iter()
            .map(|agent| format!("- {}: {}", agent.name, agent.description))
            .collect();
        let names: Vec<&str> = self.agents.iter().map(|agent| agent.name.as_str()).collect();
        ToolSchema {
            name: TASK_TOOL.into(),
            description: Some(format!(
                "Runs a sub-agent on a task and returns its final answer. Sub-agents:\n{}",
                listed.join("\n")
            )),
            parameters: Arc::new(json!({
                "type": "object",
                "properties": {
                    "subagent_type": {"type": "string", "enum": names, "description": "Which sub-agent runs the task"},
                    "prompt": {"type": "string", "description": "The task, with everything the sub-agent needs to know"},
                    "description": {"type": "string", "description": "A few words on the task"}
                },
                "required": ["subagent_type", "prompt"]
            })),
        }
    }
}

/// The failed `Task` call's text once the tree has started `max_calls` sub-agents.
pub fn calls_spent(max_calls: u32) -> String {
    format!(
        "Task: the limit of {max_calls} sub-agent calls for this run (advanced.maxSubagentCalls) is reached; go on without delegating"
    )
}

/// What a `Task` call asked for.
#[derive(Debug, PartialEq)]
pub struct TaskRequest {
    pub subagent_type: String,
    pub prompt: String,
}

impl TaskRequest {
    /// The call's input; the error is the failed call's text.
    pub fn read(input: &Map<String, Value>, subagents: &Subagents) -> std::result::Result<Self, String> {
        let text = |field: &str| match input.get(field) {
            Some(Value::String(text)) if !text.trim().is_empty() => Ok(text.clone()),
            _ => Err(format!("Task: {field} must be a non-empty string")),
        };
        let subagent_type = text("subagent_type")?;
        if subagents.get(&subagent_type).is_none() {
            let known: Vec<&str> = subagents.agents.iter().map(|agent| agent.name.as_str()).collect();
            return Err(format!(
                "Task: no sub-agent named \"{subagent_type}\" (known: {})",
                known.join(", ")
            ));
        }
        Ok(TaskRequest {
            subagent_type,
            prompt: text("prompt")?,
        })
    }
}

/// A child run's view of the agent: its place in the tree, its prompt and its tools.
#[derive(Debug)]
pub struct Child {
    /// Sub-agent names from the root's child down to this one.
    pub path: Vec<String>,
    /// The `Task` call ids from the root's down to the one that started it (its place in the
    /// tree, as the effects ledger keys its calls).
    pub chain: Vec<String>,
    pub system_prompt: Option<String>,
    pub tool_schemas: Vec<ToolSchema>,
    offered: HashSet<String>,
}

impl Child {
    /// The child `spec` started by the `Task` call `tool_call_id` of a run that is `parent`
    /// (`None`: the root): the parent's `tools` it is allowed, and `Task` while the tree may grow
    /// deeper.
    pub fn new(
        spec: &SubagentSpec,
        parent: Option<&Child>,
        tool_call_id: &str,
        tools: &[ToolSpec],
        max_depth: usize,
    ) -> Self {
        let mut path = parent.map(|parent| parent.path.clone()).unwrap_or_default();
        path.push(spec.name.clone());
        let mut chain = parent.map(|parent| parent.chain.clone()).unwrap_or_default();
        chain.push(tool_call_id.to_string());
        let deeper = path.len() < max_depth;
        let tool_schemas: Vec<ToolSchema> = tools
            .iter()
            .filter(|tool| tool.schema.name != TASK_TOOL || deeper)
            .filter(|tool| {
                spec.allowed_tools
                    .as_ref()
                    .is_none_or(|allowed| allowed.contains(&tool.schema.name))
            })
            .map(|tool| tool.schema.clone())
            .collect();
        Child {
            path,
            chain,
            system_prompt: spec.system_prompt.clone(),
            offered: tool_schemas.iter().map(|schema| schema.name.clone()).collect(),
            tool_schemas,
        }
    }

    /// Whether the child may call `name` (what it was not offered, it cannot call either).
    pub fn offers(&self, name: &str) -> bool {
        self.offered.contains(name)
    }

    /// What of the child's stream the parent's shows: its tool events, with `agentPath`.
    pub fn forward(&self, mut event: StreamEvent) -> Option<StreamEvent> {
        match &mut event {
            StreamEvent::ToolUse(call) => call.agent_path = Some(self.path.clone()),
            StreamEvent::ToolProgress(progress) => progress.agent_path = Some(self.path.clone()),
            StreamEvent::ToolResult(result) => result.agent_path = Some(self.path.clone()),
            _ => return None,
        }
        Some(event)
    }
}

/// Publishes a run's `event`: as it is in the root, through [`Child::forward`] in a sub-agent.
pub fn publish(child: Option<&Arc<Child>>, events: &EventSender, event: StreamEvent) {
    match child {
        None => events.send(event),
        Some(child) => {
            if let Some(event) = child.forward(event) {
                events.send(event);
            }
        }
    }
}

/// Where a run sits: its path (`[]` in the root) and the `Task` call that started it.
pub fn lineage(child: Option<&Arc<Child>>) -> (&[String], Option<&str>) {
    match child {
        Some(child) => (&child.path, child.chain.last().map(String::as_str)),
        None => (&[], None),
    }
}

/// The `Task` call ids above a run (`[]` in the root).
pub fn chain(child: Option<&Arc<Child>>) -> &[String] {
    child.map_or(&[], |child| &child.chain)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn subagents(value: Value) -> Result<Option<Subagents>> {
        let advanced = OptionsObject::of(&value, "advanced", "an object").unwrap();
        Subagents::read(&advanced)
    }

    #[test]
    fn agents_are_read_with_their_fields_and_bad_ones_are_named() {
        let read = subagents(json!({"agents": {"researcher": {"name": "researcher", "description": "finds things", "allowedTools": ["search"], "maxTurns": 4}}}))
            .unwrap()
            .unwrap();
        assert_eq!((read.max_depth, read.max_calls), (3, 100));
        let researcher = read.get("researcher").unwrap();
        assert_eq!(researcher.allowed_tools.as_deref(), Some(&["search".to_string()][..]));
        assert_eq!(researcher.max_turns, Some(4));
        for (value, message) in [
            (
                json!({"agents": []}),
                "advanced.agents must be an object of sub-agents by name (got an array)",
            ),
            (
                json!({"agents": {"a": {}}}),
                "advanced.agents.a.description must be a non-empty string",
            ),
            (
                json!({"agents": {"a": {"description": "d", "tools": []}}}),
                "advanced.agents.a.tools is not a known option",
            ),
            (
                json!({"agents": {"a": {"name": "b", "description": "d"}}}),
                "advanced.agents.a.name is \"b\" but its key is \"a\": give both the same name",
            ),
            (
                json!({"agents": {"a": {"name": 3, "description": "d"}}}),
                "advanced.agents.a.name must be",
            ),
            (
                json!({"agents": {"a": {"description": "d", "allowedTools": "x"}}}),
                "advanced.agents.a.allowedTools must be an array of tool names",
            ),
            (json!({"maxSubagentDepth": 0}), "advanced.maxSubagentDepth"),
            (
                json!({"maxSubagentDepth": 33}),
                "advanced.maxSubagentDepth must be a positive integer no greater than 32 (got 33)",
            ),
            (
                json!({"maxSubagentCalls": 0}),
                "advanced.maxSubagentCalls must be a positive integer no greater than 10000 (got 0)",
            ),
            (
                json!({"maxSubagentCalls": 10_001}),
                "advanced.maxSubagentCalls must be a positive integer no greater than 10000 (got 10001)",
            ),
            (
                json!({"maxSubagentCalls": 2.5}),
                "advanced.maxSubagentCalls must be a positive integer no greater than 10000 (got 2.5)",
            ),
        ] {
            let error = subagents(value).unwrap_err();
            assert!(
                error.message.starts_with(message),
                "{} does not start with {message}",
                error.message
            );
        }
    }

    #[test]
    fn a_task_names_a_known_sub_agent_and_a_prompt() {
        let read = subagents(json!({"agents": {"a": {"description": "d"}, "b": {"description": "e"}}}))
            .unwrap()
            .unwrap();
        let input = |value: Value| value.as_object().unwrap().clone();
        assert_eq!(
            TaskRequest::read(&input(json!({"subagent_type": "a", "prompt": "go"})), &read),
            Ok(TaskRequest {
                subagent_type: "a".into(),
                prompt: "go".into()
            })
        );
        assert_eq!(
            TaskRequest::read(&input(json!({"subagent_type": "c", "prompt": "go"})), &read),
            Err("Task: no sub-agent named \"c\" (known: a, b)".into())
        );
        assert_eq!(
            TaskRequest::read(&input(json!({"subagent_type": "a"})), &read),
            Err("Task: prompt must be a non-empty string".into())
        );
    }
}
