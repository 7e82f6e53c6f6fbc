//! Sub-agents' runs: the factory a run hands its tool calls, so a `Task` call starts a run
//! without the pipeline reaching back into this module.

use std::sync::Arc;

use futures::future::BoxFuture;

use super::{Run, RunParts};
use crate::agent::conversation::Conversation;
use crate::agent::durable::Durable;
use crate::agent::subagents::delegate::{ChildRun, Children};
use crate::agent::tree::Tree;
use crate::error::{ErrorCode, Result, SdkError};
use crate::model::Usage;
use crate::store;

/// Starts sub-agents as runs of the same agent, with a conversation of their own kept in memory
/// only (a sub-agent's run is not resumed on its own), each a task of the root's tree.
pub(super) struct SubRuns(pub Arc<Tree>);

impl Children for SubRuns {
    fn claim(&self) -> bool {
        self.0.claim()
    }

    fn start(&self, child: ChildRun) -> (String, BoxFuture<'static, (Result<String>, Usage)>) {
        let ChildRun {
            agent,
            approvals,
            settings,
            control,
            events,
            scope,
            context,
            prompt,
        } = child;
        let parts = RunParts {
            durable: Arc::new(Durable::new(store::StoreConfig::Memory, agent.id.clone(), 1)),
            agent,
            conversation: Arc::new(Conversation::default()),
            approvals,
            switched: None,
        };
        let run = Run::child(parts, settings, control.clone(), events, scope, context, self.0.clone());
        let id = run.id().to_string();
        // Stopped with its parent's run, or when the `Task` call lets go of it.
        let joined = self.0.run(run.drive_child(prompt), control.token().clone());
        let outcome = async move {
            joined
                .await
                .unwrap_or_else(|| (Err(SdkError::new(ErrorCode::Abort, control.reason())), Usage::default()))
        };
        (id, Box::pin(outcome))
    }
}
