//! The mutable part a run touches: the conversation, and which run is active. A run pushes its
//! messages here and, as it ends, releases the session for the next `send`.

use std::sync::{Arc, Mutex};

use super::approvals::{Decision, PausedTurn};
use super::control::RunControl;
use crate::model::Message;
use crate::sync::lock;

#[derive(Default)]
pub struct Conversation {
    state: Mutex<State>,
}

#[derive(Default)]
struct State {
    /// Shared with in-flight model requests: a snapshot is an `Arc` clone, and a push copies
    /// the list only while a snapshot is still held.
    messages: Arc<Vec<Arc<Message>>>,
    active: Option<Arc<RunControl>>,
    /// The turn a run paused in, waiting for decisions.
    paused: Option<PausedTurn>,
}

impl Conversation {
    /// The conversation so far, without the system prompt.
    pub fn messages(&self) -> Arc<Vec<Arc<Message>>> {
        lock(&self.state).messages.clone()
    }

    pub(crate) fn push(&self, message: Message) {
        Arc::make_mut(&mut lock(&self.state).messages).push(Arc::new(message));
    }

    /// `fork()`: the messages become `messages`.
    pub(crate) fn replace(&self, messages: Arc<Vec<Arc<Message>>>) {
        lock(&self.state).messages = messages;
    }

    /// The text of the last prompt (a resumed run's `taskDescription`).
    pub(crate) fn last_prompt(&self) -> String {
        let messages = self.messages();
        messages
            .iter()
            .rev()
            .find_map(|message| match message.as_ref() {
                Message::User { content } => Some(content.text()),
                _ => None,
            })
            .unwrap_or_default()
    }

    /// The turn waiting for decisions, if any.
    pub(crate) fn paused(&self) -> Option<PausedTurn> {
        lock(&self.state).paused.clone()
    }

    /// A run paused in `turn`.
    pub(crate) fn pause(&self, turn: PausedTurn) {
        lock(&self.state).paused = Some(turn);
    }

    /// Takes the paused turn for a run that goes on with it.
    pub(crate) fn take_paused(&self) -> Option<PausedTurn> {
        lock(&self.state).paused.take()
    }

    /// Records `decision` on the paused call `tool_call_id`, at any depth of the tree; `false`
    /// when it is not waiting for one (unknown, decided already, or a `Task` call waiting for
    /// its sub-agent).
    pub(crate) fn decide(&self, tool_call_id: &str, decision: Decision) -> bool {
        let mut state = lock(&self.state);
        let call = state.paused.as_mut().and_then(|turn| turn.leaf_mut(tool_call_id));
        match call {
            Some(call) if call.decision.is_none() => {
                call.decision = Some(decision);
                true
            }
            _ => false,
        }
    }

    /// The active run, if any.
    pub(crate) fn active(&self) -> Option<Arc<RunControl>> {
        lock(&self.state).active.clone()
    }

    /// Makes `control` the active run; `false` (and nothing changes) when one already is.
    pub(crate) fn begin(&self, control: &Arc<RunControl>) -> bool {
        let mut state = lock(&self.state);
        if state.active.is_some() {
            return false;
        }
        state.active = Some(control.clone());
        true
    }

    /// Called by the run as it ends, before its last event is published, so a caller that sees
    /// the result can send again at once. An aborted run's unanswered tool calls get results.
    pub(crate) fn finish(&self, control: &Arc<RunControl>, aborted: Option<&str>) {
        let mut state = lock(&self.state);
        // A paused turn keeps its calls open: they are answered when it is resumed.
        if let (Some(reason), None) = (aborted, &state.paused) {
            answer_open_calls(Arc::make_mut(&mut state.messages), reason);
        }
        if state.active.as_ref().is_some_and(|active| Arc::ptr_eq(active, control)) {
            state.active = None;
        }
    }
}

/// Gives every tool call of the last assistant message without a result the result
/// `Tool execution aborted: <reason>`, so the conversation stays valid for the next `send`.
fn answer_open_calls(messages: &mut Vec<Arc<Message>>, reason: &str) {
    let Some(position) = messages
        .iter()
        .rposition(|message| matches!(message.as_ref(), Message::Assistant { .. }))
    else {
        return;
    };
    let Message::Assistant { tool_calls, .. } = messages[position].as_ref() else {
        return;
    };
    let answered: Vec<&str> = messages[position + 1..]
        .iter()
        .filter_map(|message| match message.as_ref() {
            Message::Tool { tool_call_id, .. } => Some(tool_call_id.as_str()),
            _ => None,
        })
        .collect();
    let missing: Vec<Message> = tool_calls
        .iter()
        .filter(|call| !answered.contains(&call.id.as_str()))
        .map(|call| Message::Tool {
            tool_call_id: call.id.clone(),
            content: format!("Tool execution aborted: {reason}"),
            is_error: true,
        })
        .collect();
    messages.extend(missing.into_iter().map(Arc::new));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{AssistantToolCall, UserContent};

    #[test]
    fn aborted_calls_get_a_result_each() {
        let mut messages = vec![
            Arc::new(Message::User {
                content: UserContent::Text("go".into()),
            }),
            Arc::new(Message::Assistant {
                content: None,
                tool_calls: vec![
                    AssistantToolCall::new("a".into(), "t".into(), "{}".into()),
                    AssistantToolCall::new("b".into(), "t".into(), "{}".into()),
                ],
            }),
            Arc::new(Message::Tool {
                tool_call_id: "a".into(),
                content: "done".into(),
                is_error: false,
            }),
        ];
        answer_open_calls(&mut messages, "stop now");
        assert_eq!(messages.len(), 4);
        assert_eq!(
            *messages[3],
            Message::Tool {
                tool_call_id: "b".into(),
                content: "Tool execution aborted: stop now".into(),
                is_error: true,
            }
        );
    }
}
