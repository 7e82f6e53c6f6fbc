//! The compaction step (SPEC §8.5): before a model call that would pass the threshold, older
//! messages become one summary, between PreCompact and PostCompact (or CompactFailure).

use std::sync::Arc;

use serde_json::json;
use tracing::Instrument;

use super::model_turn::where_models_run;
use super::Run;
use crate::agent::compaction;
use crate::agent::payloads;
use crate::error::{ErrorCode, Result};
use crate::hooks::output::Action;
use crate::hooks::{EventFields, HookEvent};
use crate::ids;
use crate::model::Message;

impl Run {
    /// The prompt the next model call would send, in tokens: the last call's reported count plus
    /// an estimate for what was added since (all of it estimated before the first report).
    pub(super) fn prompt_tokens(&self, messages: &[Arc<Message>]) -> u64 {
        match self.reported {
            Some((tokens, sent)) if sent <= messages.len() => tokens + compaction::estimate_tokens(&messages[sent..]),
            _ => {
                let system = self.agent.config.system_prompt.as_deref().map_or(0, str::len) as u64;
                compaction::estimate_tokens(messages) + system.div_ceil(4)
            }
        }
    }

    /// Compaction (SPEC §8.5): when the next call would pass the threshold, older messages
    /// become one summary. Only an abort stops the run; a failed summary leaves the
    /// conversation as it was.
    pub(super) async fn compact_if_needed(&mut self) -> Result<()> {
        let Some(compaction) = self.agent.config.compaction.clone() else {
            return Ok(());
        };
        let messages = self.conversation.messages();
        let token_count = self.prompt_tokens(&messages);
        if token_count < compaction.threshold_tokens {
            return Ok(());
        }
        let Some(split) = compaction::split_point(&messages, compaction.keep_recent_turns) else {
            return Ok(());
        };
        let step_index = self.step_index();
        if self.has(HookEvent::PreCompact) {
            let payload = EventFields::of(&payloads::PreCompact {
                event: HookEvent::PreCompact.name(),
                session_id: &self.agent.id,
                operation_id: &self.id,
                step_index,
                message_count: messages.len(),
                token_count,
            });
            let dispatched = self.dispatch(HookEvent::PreCompact, payload, self.caller()).await?;
            if dispatched.outputs.iter().any(|output| output.action == Action::Abort) {
                return Ok(());
            }
            self.checkpoint()?;
        }
        let older = messages[..split].to_vec();
        let config = &self.agent.config;
        let writer = compaction::Writer {
            host: self.agent.host.clone(),
            model: self.settings.model.clone(),
            system_prompt: config.system_prompt.clone(),
            temperature: config.temperature,
            max_output_tokens: config.max_output_tokens,
            turn: self.turns,
            scope: self.scope,
        };
        let by_model = compaction.summarize.is_none();
        let summary = async move { compaction::summarize(&compaction, &writer, &older).await }
            .instrument(tracing::info_span!("compaction", messages = split as i64));
        let summarized = where_models_run(by_model && self.settings.model.is_remote(), summary).await;
        self.checkpoint()?;
        match summarized {
            Ok((summary, usage)) => {
                self.usage.add(usage);
                let mut compacted = Vec::with_capacity(messages.len() - split + 1);
                compacted.push(Arc::new(compaction::summary_message(&summary)));
                compacted.extend(messages[split..].iter().cloned());
                let messages_after = compacted.len();
                self.conversation.replace(Arc::new(compacted));
                self.reported = None;
                self.boundary().await?;
                if self.has(HookEvent::PostCompact) {
                    let group_id = ids::uuid();
                    let payload = EventFields::of(&payloads::PostCompact {
                        event: HookEvent::PostCompact.name(),
                        session_id: &self.agent.id,
                        operation_id: &self.id,
                        step_index,
                        group_id: &group_id,
                        messages_before: messages.len(),
                        messages_after,
                        summary: &summary,
                    });
                    self.lifecycle(HookEvent::PostCompact, payload, self.caller()).await?;
                }
            }
            Err(error) if error.code == ErrorCode::Abort => return Err(error),
            Err(error) => {
                self.agent.log().warn(
                    "compaction failed; the run goes on uncompacted",
                    json!({"error": error.message}),
                );
                if self.has(HookEvent::CompactFailure) {
                    let payload = EventFields::of(&payloads::CompactFailure {
                        event: HookEvent::CompactFailure.name(),
                        session_id: &self.agent.id,
                        operation_id: &self.id,
                        step_index,
                        error: &error.message,
                        token_count,
                    });
                    self.lifecycle(HookEvent::CompactFailure, payload, self.caller())
                        .await?;
                }
            }
        }
        Ok(())
    }
}
