//! Sub-agents' runs: the factory a run hands its tool calls, so a `Task` call starts a run (or
//! continues a paused one) without the pipeline reaching back into this module.

use std::sync::Arc;

use futures::future::BoxFuture;

use super::{Run, RunParts, Start};
use crate::agent::conversation::Conversation;
use crate::agent::durable::Durable;
use crate::agent::subagents::delegate::{ChildEnd, ChildRun, ChildStart, Children};
use crate::agent::tree::Tree;
use crate::error::{ErrorCode, Result, SdkError};
use crate::model::{Message, Usage, UserContent};

/// Starts sub-agents as runs of the same agent, each a task of the root's tree, with a
/// conversation of their own: a paused sub-agent is kept whole inside its parent's paused turn,
/// and one at work at its turn boundaries beside the root's session, so it goes on with the root
/// and never on its own.
pub(super) struct SubRuns {
    pub tree: Arc<Tree>,
    /// The root's store: the tree's calls are ledgered there, its sub-agents' boundaries kept.
    pub durable: Arc<Durable>,
}

impl Children for SubRuns {
    fn claim(&self) -> bool {
        self.tree.claim()
    }

    fn start(&self, child: ChildRun) -> (String, BoxFuture<'static, (Result<ChildEnd>, Usage)>) {
        let ChildRun {
            agent,
            approvals,
            settings,
            control,
            events,
            scope,
            context,
            start,
        } = child;
        let conversation = Arc::new(Conversation::default());
        let (start, paused) = match start {
            ChildStart::Prompt(prompt) => (Start::Prompt(UserContent::Text(prompt)), None),
            ChildStart::Resume(paused) => {
                let messages: Vec<Arc<Message>> = paused.messages.iter().cloned().map(Arc::new).collect();
                conversation.replace(Arc::new(messages));
                conversation.pause(paused.turn.clone());
                (Start::Resume, Some(paused))
            }
        };
        let parts = RunParts {
            durable: self.durable.clone(),
            agent,
            conversation,
            approvals,
            switched: None,
        };
        let mut run = Run::child(
            parts,
            settings,
            control.clone(),
            events,
            scope,
            context,
            self.tree.clone(),
        );
        if let Some(paused) = paused {
            // The same run, going on: its id and the turns it has taken stay its own.
            run.continue_as(&paused.operation_id, paused.turns);
        }
        let id = run.id().to_string();
        // Stopped with its parent's run, or when the `Task` call lets go of it.
        let joined = self.tree.run(run.drive_child(start), control.token().clone());
        let outcome = async move {
            joined
                .await
                .unwrap_or_else(|| (Err(SdkError::new(ErrorCode::Abort, control.reason())), Usage::default()))
        };
        (id, Box::pin(outcome))
    }
}
