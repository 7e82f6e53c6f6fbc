//! Admission: before `send` resolves, the run claims its session, reads it again when another
//! agent drove it since, and checks that this start is possible now; a refused run releases.

use futures::FutureExt;
use serde_json::json;

use super::{Run, Start};
use crate::agent::durable;
use crate::error::{ErrorCode, Result, SdkError};

impl Run {
    /// Prepares the run at once when nothing in it waits (the memory store's operations are a
    /// lock and a map): `Some(Ok)` and the run is accepted, `Some(Err)` and it was refused (and is
    /// over), `None` when it must be driven to know.
    pub fn prepare_now(&mut self, start: &Start) -> Option<Result<()>> {
        if self.durable.survives() {
            return None;
        }
        let prepared = self.prepare(start).now_or_never()?;
        match prepared {
            Ok(()) => self.control.admit(Ok(())),
            Err(ref refusal) => {
                // The memory store releases in place too.
                let _ = self.refuse(refusal.clone()).now_or_never();
            }
        }
        Some(prepared)
    }

    /// A refused run: its claim (if it got one) released, the session free for the next `send`.
    pub(super) async fn refuse(&self, refusal: SdkError) {
        if let Err(error) = self.durable.release().await {
            self.release_failed(&error);
        }
        self.conversation.finish(&self.control, None);
        self.control.admit(Err(refusal));
        self.control.finish();
    }

    /// Before `send` resolves: the session's claim, a fresh copy of the session when another
    /// agent drove it since this one last did (or when a paused turn may have been decided
    /// elsewhere), and whether this start is possible now.
    pub(super) async fn prepare(&self, start: &Start) -> Result<()> {
        let claimed = self.durable.claim().await?;
        let recovered = self.durable.take_recovered();
        if claimed.stale && self.durable.survives() {
            // Another agent drove the session since: its state, read again (and recovered).
            self.refresh().await?;
        } else {
            if recovered {
                // The turn rebuilt after a crash replaces what the store holds (its old decisions).
                let paused = self.conversation.paused();
                self.save(paused.as_ref()).await?;
            }
            if self
                .conversation
                .paused()
                .is_some_and(|turn| !turn.undecided().is_empty())
            {
                // Decisions may have been taken elsewhere: any process may decide.
                for (tool_call_id, decision) in self.durable.decisions().await? {
                    self.conversation.decide(&tool_call_id, decision);
                }
            }
        }
        let paused = self.conversation.paused();
        match (start, paused) {
            (Start::Prompt(_), Some(turn)) => Err(turn.pending_error("send")),
            (Start::Resume, None) => Err(SdkError::new(
                ErrorCode::NothingToResume,
                "There is nothing to resume: no run is paused",
            )),
            (Start::Resume, Some(turn)) if !turn.undecided().is_empty() => Err(turn.pending_error("resume")),
            _ => Ok(()),
        }
    }

    /// The session as the store has it, under this run's claim: decisions taken elsewhere, and
    /// what another agent's runs did (recovered when one of them died mid-turn).
    pub(super) async fn refresh(&self) -> Result<()> {
        let Some(stored) = self.durable.reload().await? else {
            // Never saved: nothing anyone else did is kept.
            return Ok(());
        };
        let resumed = durable::resumed_turn(&stored, &self.agent.config.tools, true)?;
        let changed = resumed.as_ref().is_some_and(|resumed| resumed.changed);
        let turn = resumed.map(|resumed| resumed.turn);
        durable::install(&self.conversation, stored.record.messages, turn.clone());
        if changed {
            self.save(turn.as_ref()).await?;
        }
        Ok(())
    }

    pub(super) fn release_failed(&self, error: &SdkError) {
        self.agent.log().warn(
            "The session's lease could not be released: it expires on its own",
            json!({"sessionId": self.agent.id, "error": error.message}),
        );
    }
}
