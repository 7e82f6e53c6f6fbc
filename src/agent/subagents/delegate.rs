//! Delegation (`Task`): a call runs the named sub-agent to the end under the parent's hooks,
//! between SubagentStart / SubagentStarted and (when it fails) SubagentFailure on the parent.
//! The run is started through [`Children`], which the run module implements: this module does
//! not reach back into the loop.

use std::sync::{Arc, Mutex};

use futures::future::BoxFuture;
use serde_json::{json, Map, Value};

use super::{Child, SubagentSpec, TaskRequest};
use crate::agent::approvals::PausedChild;
use crate::agent::confirm::Remembered;
use crate::agent::control::RunControl;
use crate::agent::definition::Agent;
use crate::agent::payloads;
use crate::agent::reader::EventSender;
use crate::agent::settings::RunSettings;
use crate::agent::subagents;
use crate::agent::tools::CallResult;
use crate::error::{ErrorCode, Result, SdkError};
use crate::hooks::dispatch::{Caller, EventInput, HookContext, HookError};
use crate::hooks::{EventFields, HookEvent};
use crate::host::ScopeId;
use crate::model::Usage;
use crate::sync::lock;

/// Everything a sub-agent's run is made of.
pub(crate) struct ChildRun {
    pub agent: Arc<Agent>,
    pub approvals: Arc<Remembered>,
    pub settings: RunSettings,
    pub control: Arc<RunControl>,
    pub events: EventSender,
    pub scope: ScopeId,
    pub context: HookContext,
    pub start: ChildStart,
}

/// How a sub-agent's run begins: on the `Task` call's prompt, or where it paused (§8.7).
pub(crate) enum ChildStart {
    Prompt(String),
    Resume(Box<PausedChild>),
}

/// How a sub-agent's run ended, when it did not fail.
pub(crate) enum ChildEnd {
    /// Its final text: the `Task` call's result.
    Answered(String),
    /// A person's `reject` with `stop` ended it there: the stop text, the `Task` call's failed
    /// result (the parent's model sees it and the parent goes on).
    Stopped(String),
    /// It paused for approvals: all of it, kept in its parent's paused turn.
    Paused(Box<PausedChild>),
}

/// What a `Task` call came to: a result, or its sub-agent paused.
pub(crate) enum Delegated {
    Done(CallResult),
    Paused(Box<PausedChild>),
}

/// Starts sub-agents' runs, handed in by the run module: a run's tool call may start a run, and
/// this module does not reach back into that one.
pub(crate) trait Children: Sync {
    /// Counts one more `Task` call against the tree's budget: `false` once it is spent.
    fn claim(&self) -> bool;

    /// The child's run id, and its run to its end (or its pause), or why it failed. With its
    /// outcome, the tokens it used.
    fn start(&self, child: ChildRun) -> (String, BoxFuture<'static, (Result<ChildEnd>, Usage)>);
}

/// What a `Task` call needs of its run.
pub(crate) struct Delegation<'a> {
    pub agent: &'a Arc<Agent>,
    pub approvals: &'a Arc<Remembered>,
    pub settings: &'a RunSettings,
    pub caller: Caller<'a>,
    pub operation_id: &'a str,
    pub events: &'a EventSender,
    pub children: &'a dyn Children,
    pub tool_call_id: &'a str,
    /// Tokens the sub-agent used, counted on the call.
    pub spent: &'a Mutex<Usage>,
}

impl Delegation<'_> {
    /// Runs the sub-agent `input` names to its end or its pause: the `Task` call's result,
    /// `None` when the agent has no sub-agents or none of that name (the call is not found).
    pub async fn run(&self, input: &Map<String, Value>) -> Option<Delegated> {
        let site = self;
        let agent = site.agent;
        let subagents = agent.config.subagents.as_deref()?;
        let task = match TaskRequest::read(input, subagents) {
            Ok(task) => task,
            Err(problem) => return Some(Delegated::Done(CallResult::failed(problem, None))),
        };
        let spec = subagents.get(&task.subagent_type)?;
        if !site.children.claim() {
            return Some(Delegated::Done(CallResult::failed(
                subagents::calls_spent(subagents.max_calls),
                None,
            )));
        }
        let (agent_path, _) = subagents::lineage(site.settings.child.as_ref());
        let start = payloads::SubagentStart {
            event: HookEvent::SubagentStart.name(),
            session_id: &agent.id,
            operation_id: site.operation_id,
            agent_id: &spec.name,
            instruction: &task.prompt,
            tool_call_id: self.tool_call_id,
            agent_path,
        };
        if let Err(error) = self
            .parent_event(HookEvent::SubagentStart, EventFields::of(&start))
            .await
        {
            let thrown = error.thrown();
            return Some(Delegated::Done(CallResult::failed(error.message, thrown)));
        }
        let started = |sub_operation_id: &str, success: bool| payloads::SubagentStarted {
            event: HookEvent::SubagentStarted.name(),
            session_id: &agent.id,
            operation_id: site.operation_id,
            agent_id: &spec.name,
            sub_operation_id: sub_operation_id.to_string(),
            success,
            agent_path,
        };
        let settings = match self.child_settings(spec) {
            Ok(settings) => settings,
            Err(error) => {
                self.parent_observer(HookEvent::SubagentStarted, EventFields::of(&started("", false)))
                    .await;
                return Some(Delegated::Done(
                    self.subagent_failed(&spec.name, agent_path, error).await,
                ));
            }
        };
        let (sub_operation_id, run) = site
            .children
            .start(self.child_run(settings, ChildStart::Prompt(task.prompt)));
        self.parent_observer(
            HookEvent::SubagentStarted,
            EventFields::of(&started(&sub_operation_id, true)),
        )
        .await;
        Some(self.ended(&spec.name, run).await)
    }

    /// Goes on with the sub-agent that paused in this `Task` call (§8.7), where it stood: its
    /// conversation, turn count and run id are its own again; SubagentStart and
    /// SubagentStarted do not fire again.
    pub async fn resume(&self, paused: Box<PausedChild>) -> Delegated {
        let agent_id = paused.agent_path.last().cloned().unwrap_or_default();
        let spec = self
            .agent
            .config
            .subagents
            .as_deref()
            .and_then(|subagents| subagents.get(&agent_id));
        let (agent_path, _) = subagents::lineage(self.settings.child.as_ref());
        let Some(spec) = spec else {
            // The agent resumed with other options than it paused with: nothing to go on with.
            let missing = SdkError::new(
                ErrorCode::InvalidInput,
                format!("The paused sub-agent \"{agent_id}\" is not in advanced.agents: it cannot go on"),
            );
            return Delegated::Done(self.subagent_failed(&agent_id, agent_path, missing).await);
        };
        let settings = match self.child_settings(spec) {
            Ok(settings) => settings,
            Err(error) => return Delegated::Done(self.subagent_failed(&spec.name, agent_path, error).await),
        };
        let (_, run) = self
            .children
            .start(self.child_run(settings, ChildStart::Resume(paused)));
        self.ended(&spec.name, run).await
    }

    /// What the sub-agent `spec` runs with under this call: its model (`model`, or the
    /// parent's), turns, place in the tree and tools.
    fn child_settings(&self, spec: &SubagentSpec) -> Result<RunSettings> {
        let agent = self.agent;
        let model = match &spec.model {
            None => self.settings.model.clone(),
            Some(value) => agent
                .config
                .model
                .child(value, &format!("advanced.agents.{}.model", spec.name))
                .map(|choice| choice.build(agent.host.clone()))?,
        };
        let max_depth = agent
            .config
            .subagents
            .as_deref()
            .map_or(0, |subagents| subagents.max_depth);
        let child = Child::new(
            spec,
            self.settings.child.as_deref(),
            self.tool_call_id,
            agent.tools(),
            max_depth,
        );
        Ok(RunSettings {
            model,
            max_turns: spec.max_turns.unwrap_or(self.settings.max_turns),
            child: Some(Arc::new(child)),
            ..self.settings.clone()
        })
    }

    fn child_run(&self, settings: RunSettings, start: ChildStart) -> ChildRun {
        ChildRun {
            agent: self.agent.clone(),
            approvals: self.approvals.clone(),
            settings,
            control: Arc::new(RunControl::under(self.caller.cancel)),
            events: self.events.clone(),
            scope: self.caller.scope,
            context: self.caller.context.clone(),
            start,
        }
    }

    /// The sub-agent's run awaited: what the `Task` call comes to.
    async fn ended(&self, agent_id: &str, run: BoxFuture<'static, (Result<ChildEnd>, Usage)>) -> Delegated {
        let (outcome, usage) = run.await;
        lock(self.spent).add(usage);
        let (agent_path, _) = subagents::lineage(self.settings.child.as_ref());
        Delegated::Done(match outcome {
            Ok(ChildEnd::Answered(text)) => CallResult::success(text),
            Ok(ChildEnd::Stopped(text)) => CallResult::failed_as(text, None),
            Ok(ChildEnd::Paused(paused)) => return Delegated::Paused(paused),
            Err(error) if error.code == ErrorCode::Abort => CallResult::aborted(error.message),
            Err(error) => self.subagent_failed(agent_id, agent_path, error).await,
        })
    }

    /// SubagentFailure on the parent; the `Task` call fails with the sub-agent's error.
    async fn subagent_failed(&self, agent_id: &str, agent_path: &[String], error: SdkError) -> CallResult {
        let failure = payloads::SubagentFailure {
            event: HookEvent::SubagentFailure.name(),
            session_id: &self.agent.id,
            operation_id: self.operation_id,
            agent_id,
            error: &error.message,
            agent_path,
        };
        self.parent_observer(HookEvent::SubagentFailure, EventFields::of(&failure))
            .await;
        let thrown = error.thrown();
        CallResult::failed(error.message, thrown)
    }

    /// Dispatches a sub-agent event of the parent's; a failure fails the `Task` call.
    async fn parent_event(&self, event: HookEvent, payload: EventFields) -> Result<(), SdkError> {
        if !self.agent.dispatcher.has(event, None, self.caller.context) {
            return Ok(());
        }
        self.agent
            .dispatcher
            .dispatch(EventInput::of(event, payload), self.caller)
            .await
            .map(drop)
            .map_err(HookError::into_sdk)
    }

    /// As [`Self::parent_event`], for events that come after the fact: a failure is logged.
    async fn parent_observer(&self, event: HookEvent, payload: EventFields) {
        if let Err(error) = self.parent_event(event, payload).await {
            self.agent.log().warn(
                &format!("{} hook failed; the sub-agent's outcome stands", event.name()),
                json!({"error": error.message}),
            );
        }
    }
}
