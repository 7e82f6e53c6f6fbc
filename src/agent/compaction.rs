//! Context compaction (SPEC §8.5): when the next model call would pass the threshold, older
//! messages are replaced by one summary. What counts as "older", how tokens are counted, and
//! the options; the run (`run.rs`) fires the events and asks for the summary.

use std::sync::Arc;

use serde_json::Value;

use crate::error::{ErrorCode, Result, SdkError};
use crate::host::{Args, Callable, Host, HostCall, Reply, ScopeId};
use crate::js_value::{whole_number, MAX_SAFE_INTEGER, MAX_TIMER_MS};
use crate::model::{Message, Model, ModelRequest, Usage, UserContent};
use crate::options::OptionsObject;

pub const DEFAULT_KEEP_RECENT_TURNS: usize = 2;
/// How long writing a summary may take (`timeoutMs`): a slow model over a long conversation
/// fits; a `summarize` that never settles cannot hold the run for good.
pub const DEFAULT_TIMEOUT_MS: u32 = 300_000;

/// `advanced.compaction`.
#[derive(Debug, Clone, PartialEq)]
pub struct Compaction {
    /// Compact when the next call's prompt would be this many tokens or more.
    pub threshold_tokens: u64,
    /// Model turns (an assistant message with its tool results) kept verbatim.
    pub keep_recent_turns: usize,
    /// `summarize(messages)`; without it the model writes the summary.
    pub summarize: Option<Callable>,
    /// The summary's deadline, whoever writes it: past it the compaction fails.
    pub timeout_ms: u32,
}

impl Compaction {
    /// Reads `advanced.compaction`; the threshold defaults to 80% of `maxContextTokens`.
    pub fn read(advanced: &OptionsObject, max_context_tokens: u64) -> Result<Option<Self>> {
        let Some(value) = advanced.get("compaction") else {
            return Ok(None);
        };
        let options = OptionsObject::of(value, "advanced.compaction", "an object")?;
        options.only(&["thresholdTokens", "keepRecentTurns", "summarize", "timeoutMs"], &[])?;
        let summarize = options.function("summarize")?;
        let keep = match options.get("keepRecentTurns") {
            None => DEFAULT_KEEP_RECENT_TURNS,
            Some(value) => {
                whole_number(value).ok_or_else(|| options.invalid("keepRecentTurns", "a whole number", value))? as usize
            }
        };
        Ok(Some(Compaction {
            threshold_tokens: options
                .positive_integer("thresholdTokens", MAX_SAFE_INTEGER)?
                .unwrap_or(max_context_tokens * 4 / 5),
            keep_recent_turns: keep,
            summarize,
            timeout_ms: options
                .positive_integer("timeoutMs", MAX_TIMER_MS)?
                .map_or(DEFAULT_TIMEOUT_MS, |ms| ms as u32),
        }))
    }
}

/// A rough count for text the model has not reported on yet: about four characters a token.
pub fn estimate_tokens(messages: &[Arc<Message>]) -> u64 {
    let chars: usize = messages
        .iter()
        .map(|message| match message.as_ref() {
            Message::User { content } => content.text().len(),
            Message::Assistant { content, tool_calls } => {
                content.as_deref().map_or(0, str::len)
                    + tool_calls
                        .iter()
                        .map(|call| call.function.name.len() + call.function.arguments.len())
                        .sum::<usize>()
            }
            Message::Tool { content, .. } => content.len(),
        })
        .sum();
    (chars as u64).div_ceil(4)
}

/// Where the kept part begins: at the first of the last `keep` model turns, so that no tool
/// call is split from its result. `None` when there is nothing older to replace.
pub fn split_point(messages: &[Arc<Message>], keep: usize) -> Option<usize> {
    let turns: Vec<usize> = messages
        .iter()
        .enumerate()
        .filter(|(_, message)| matches!(message.as_ref(), Message::Assistant { .. }))
        .map(|(index, _)| index)
        .collect();
    let split = if keep == 0 {
        // Nothing kept verbatim but what follows the last turn (a prompt not yet answered).
        messages
            .iter()
            .rposition(|message| !matches!(message.as_ref(), Message::User { .. }))
            .map_or(0, |last| last + 1)
    } else if turns.len() > keep {
        turns[turns.len() - keep]
    } else {
        return None;
    };
    (split > 0).then_some(split)
}

/// The message the older part becomes.
pub fn summary_message(summary: &str) -> Message {
    Message::User {
        content: UserContent::Text(format!("Summary of the conversation so far:\n{summary}")),
    }
}

/// What `summarize` returned, which must be text.
pub fn read_summary(returned: Option<&Value>) -> Result<String> {
    match returned {
        Some(Value::String(summary)) if !summary.trim().is_empty() => Ok(summary.clone()),
        other => Err(SdkError::new(
            ErrorCode::Plain,
            format!(
                "summarize returned {}; it must return the summary as a non-empty string",
                other.map_or_else(|| "undefined".into(), crate::js_value::describe)
            ),
        )),
    }
}

/// Who writes a summary: the user's `summarize` through the host, or the run's model with the
/// agent's system prompt and sampling settings.
pub struct Writer {
    pub host: Arc<dyn Host>,
    pub model: Arc<dyn Model>,
    pub system_prompt: Option<String>,
    pub temperature: Option<f64>,
    pub max_output_tokens: Option<u32>,
    pub turn: u32,
    pub scope: ScopeId,
}

/// Writes the summary of `older` within `timeoutMs`: `summarize(messages)` when configured,
/// else one model call without tools over `older` and [`SUMMARY_INSTRUCTION`] (its usage is
/// returned to be counted). At the deadline the call is let go (a promise left to settle on its
/// own, a model request dropped) and the compaction fails, naming the deadline.
pub async fn summarize(compaction: &Compaction, writer: &Writer, older: &[Arc<Message>]) -> Result<(String, Usage)> {
    let deadline = std::time::Duration::from_millis(u64::from(compaction.timeout_ms));
    match tokio::time::timeout(deadline, write_summary(compaction, writer, older)).await {
        Ok(written) => written,
        Err(_) => Err(SdkError::new(ErrorCode::Plain, timed_out(compaction))),
    }
}

/// The failure of a summary not written by `timeoutMs`.
fn timed_out(compaction: &Compaction) -> String {
    let writer = if compaction.summarize.is_some() {
        "summarize did not settle"
    } else {
        "the model did not write the summary"
    };
    format!(
        "{writer} within {}ms (advanced.compaction.timeoutMs)",
        compaction.timeout_ms
    )
}

async fn write_summary(compaction: &Compaction, writer: &Writer, older: &[Arc<Message>]) -> Result<(String, Usage)> {
    let Writer {
        host,
        model,
        system_prompt,
        temperature,
        max_output_tokens,
        turn,
        scope,
    } = writer;
    let (turn, scope) = (*turn, *scope);
    if let Some(function) = compaction.summarize {
        let messages: Vec<&Message> = older.iter().map(Arc::as_ref).collect();
        let call = HostCall {
            reply: Reply::Json,
            ..HostCall::new(function, Args::of(&[&messages]), scope)
        };
        let returned = host.call(call).await.map_err(|error| {
            SdkError::new(ErrorCode::Plain, format!("summarize failed: {}", error.message)).with_thrown(error.thrown)
        })?;
        return Ok((read_summary(returned.as_ref())?, Usage::default()));
    }
    let mut messages = older.to_vec();
    messages.push(Arc::new(Message::User {
        content: UserContent::Text(SUMMARY_INSTRUCTION.into()),
    }));
    let request = ModelRequest {
        system_prompt: system_prompt.as_deref(),
        messages: &messages,
        tools: &[],
        temperature: *temperature,
        max_output_tokens: *max_output_tokens,
        tool_choice: None,
        turn,
        scope,
    };
    // The summary is not part of the answer: its text is not streamed.
    let reply = model.complete(request, &mut |_: &str| {}).await?;
    if reply.text.trim().is_empty() {
        return Err(SdkError::new(ErrorCode::Plain, "the model returned an empty summary"));
    }
    Ok((reply.text, reply.usage))
}

/// The instruction the model is given when it writes the summary.
pub const SUMMARY_INSTRUCTION: &str = "Summarize the conversation so far for your own later use: the user's goals, \
what was done (tool calls and their results), decisions and open questions. Be brief and keep every fact \
needed to continue.";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::AssistantToolCall;

    fn user(text: &str) -> Arc<Message> {
        Arc::new(Message::User {
            content: UserContent::Text(text.into()),
        })
    }

    fn turn(id: &str) -> [Arc<Message>; 2] {
        [
            Arc::new(Message::Assistant {
                content: None,
                tool_calls: vec![AssistantToolCall::new(id.into(), "t".into(), "{}".into())],
            }),
            Arc::new(Message::Tool {
                tool_call_id: id.into(),
                content: "ok".into(),
                is_error: false,
            }),
        ]
    }

    #[test]
    fn the_kept_part_starts_at_a_turn_and_never_splits_a_call_from_its_result() {
        let mut messages = vec![user("go")];
        for id in ["a", "b", "c"] {
            messages.extend(turn(id));
        }
        // [go, a, a', b, b', c, c']: keeping 2 turns starts at b.
        assert_eq!(split_point(&messages, 2), Some(3));
        assert_eq!(split_point(&messages, 1), Some(5));
        // Keeping every turn leaves only the first prompt older: not worth a summary.
        assert_eq!(split_point(&messages, 3), None);
        // Keeping none replaces everything, up to a prompt not yet answered.
        messages.push(user("next"));
        assert_eq!(split_point(&messages, 0), Some(7));
    }

    #[test]
    fn tokens_are_estimated_at_four_characters_each() {
        assert_eq!(estimate_tokens(&[user("12345678")]), 2);
        assert_eq!(estimate_tokens(&[user("123456789")]), 3);
    }

    /// A host whose functions never settle, and a model that never answers.
    struct Never;

    impl Host for Never {
        fn call(&self, _call: HostCall) -> crate::host::HostFuture {
            Box::pin(std::future::pending())
        }

        fn abort(
            &self,
            _scope: ScopeId,
            _dispatch: crate::host::DispatchId,
            _reason: crate::host::AbortReason,
        ) -> crate::host::AbortFuture {
            Box::pin(async {})
        }
    }

    impl Model for Never {
        fn complete<'a>(
            &'a self,
            _request: ModelRequest<'a>,
            _on_text: crate::model::TextSink<'a>,
        ) -> futures::future::BoxFuture<'a, Result<crate::model::ModelReply>> {
            Box::pin(std::future::pending())
        }
    }

    #[tokio::test]
    async fn a_summary_not_written_by_timeout_ms_fails_naming_the_deadline() {
        let never = Arc::new(Never);
        let writer = Writer {
            host: never.clone(),
            model: never,
            system_prompt: None,
            temperature: None,
            max_output_tokens: None,
            turn: 1,
            scope: ScopeId::NONE,
        };
        let older = [user("go")];
        for (function, expected) in [
            (
                Some(Callable(0)),
                "summarize did not settle within 30ms (advanced.compaction.timeoutMs)",
            ),
            (
                None,
                "the model did not write the summary within 30ms (advanced.compaction.timeoutMs)",
            ),
        ] {
            let compaction = Compaction {
                threshold_tokens: 1,
                keep_recent_turns: 0,
                summarize: function,
                timeout_ms: 30,
            };
            let failed = summarize(&compaction, &writer, &older).await.unwrap_err();
            assert_eq!(failed.message, expected);
        }
    }

    #[test]
    fn a_summary_must_be_text() {
        assert_eq!(read_summary(Some(&Value::String("s".into()))).unwrap(), "s");
        assert_eq!(
            read_summary(Some(&serde_json::json!(3))).unwrap_err().message,
            "summarize returned 3; it must return the summary as a non-empty string"
        );
    }
}
