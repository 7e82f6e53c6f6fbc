//! Blade's steering: what `session.send(message, { priority })` does while a request runs.
//! `next` waits for the request's next safe point (the end of a model or tool step), `now`
//! also interrupts the model step in flight, `later` waits for a request of its own (the next
//! `stream()`). The session holds the inbox; its runs claim from it at their safe points.

use std::sync::Mutex;

use serde::Serialize;
use tokio_util::sync::CancellationToken;

use crate::error::{ErrorCode, Result, SdkError};
use crate::ids;
use crate::model::UserContent;
use crate::sync::lock;

/// Blade's bounds on the inbox.
const MAX_INPUTS: usize = 32;
const MAX_BYTES: usize = 1024 * 1024;

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Priority {
    Now,
    Next,
    Later,
}

impl Priority {
    /// `priority` of `send`'s options; absent is `next`, Blade's default.
    pub fn parse(text: Option<&str>) -> Option<Priority> {
        match text {
            None | Some("next") => Some(Priority::Next),
            Some("now") => Some(Priority::Now),
            Some("later") => Some(Priority::Later),
            Some(_) => None,
        }
    }
}

/// An input waiting to be applied: `getPendingInputs()`'s entries.
#[derive(Debug, Clone, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PendingInput {
    pub input_id: String,
    pub content: UserContent,
    pub priority: Priority,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target_request_id: Option<String>,
    /// Milliseconds since the epoch.
    pub accepted_at: u64,
}

/// What `send` did with an input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Submitted {
    /// No request is active: the input starts one.
    Idle,
    Steered {
        input_id: String,
        request_id: String,
        priority: Priority,
    },
    Queued {
        input_id: String,
    },
}

/// The request inputs may steer.
struct Active {
    request_id: String,
    /// The request passed its last safe point: `now` and `next` become `later`.
    sealed: bool,
    /// The model step in flight: a `now` cancels it.
    step: CancellationToken,
    /// The first `now` input that interrupted the current step.
    interrupted_by: Option<String>,
}

#[derive(Default)]
struct State {
    pending: Vec<(PendingInput, usize)>,
    active: Option<Active>,
}

#[derive(Default)]
pub struct Inputs {
    state: Mutex<State>,
}

impl Inputs {
    /// Request `request_id` starts: inputs steer it until it is sealed or closed.
    pub fn open(&self, request_id: &str) {
        lock(&self.state).active = Some(Active {
            request_id: request_id.to_string(),
            sealed: false,
            step: CancellationToken::new(),
            interrupted_by: None,
        });
    }

    /// Request `request_id` ended: what still waited for it waits for the next request.
    pub fn close(&self, request_id: &str) {
        let mut state = lock(&self.state);
        if state
            .active
            .as_ref()
            .is_some_and(|active| active.request_id == request_id)
        {
            state.active = None;
        }
        for (input, _) in &mut state.pending {
            if input.target_request_id.as_deref() == Some(request_id) {
                input.priority = Priority::Later;
                input.target_request_id = None;
            }
        }
    }

    /// Takes `content` at `priority`; `expected` is `expectedRequestId`, which must be the
    /// active request; `starting_options`: the send has options only a request that starts
    /// takes, refused while one is active. Nothing is kept when it fails.
    pub fn submit(
        &self,
        content: UserContent,
        priority: Priority,
        expected: Option<&str>,
        starting_options: bool,
    ) -> Result<Submitted> {
        let mut state = lock(&self.state);
        if starting_options && state.active.is_some() {
            return Err(SdkError::new(
                ErrorCode::SessionInputOptionsUnsupported,
                "signal, maxTurns, and context can only be set when starting an idle request",
            ));
        }
        let Some(active) = &state.active else {
            if let Some(expected) = expected {
                return Err(SdkError::new(
                    ErrorCode::SessionRequestMismatch,
                    format!("No active request matches \"{expected}\""),
                ));
            }
            return Ok(Submitted::Idle);
        };
        if let Some(expected) = expected.filter(|expected| *expected != active.request_id) {
            return Err(SdkError::new(
                ErrorCode::SessionRequestMismatch,
                format!(
                    "Expected request \"{expected}\" but \"{}\" is active",
                    active.request_id
                ),
            ));
        }
        let bytes = size_of(&content);
        let held: usize = state.pending.iter().map(|(_, bytes)| bytes).sum();
        if state.pending.len() >= MAX_INPUTS || held + bytes > MAX_BYTES {
            return Err(SdkError::new(
                ErrorCode::SessionInputQueueFull,
                format!("Session input queue capacity exceeded ({MAX_INPUTS} inputs, {MAX_BYTES} bytes)"),
            ));
        }
        let steers = priority != Priority::Later && !active.sealed;
        let priority = if steers { priority } else { Priority::Later };
        let input_id = ids::uuid();
        let request_id = active.request_id.clone();
        if priority == Priority::Now {
            let active = state.active.as_mut().expect("checked above");
            active.interrupted_by.get_or_insert_with(|| input_id.clone());
            active.step.cancel();
        }
        state.pending.push((
            PendingInput {
                input_id: input_id.clone(),
                content,
                priority,
                target_request_id: steers.then(|| request_id.clone()),
                accepted_at: now_ms(),
            },
            bytes,
        ));
        Ok(if steers {
            Submitted::Steered {
                input_id,
                request_id,
                priority,
            }
        } else {
            Submitted::Queued { input_id }
        })
    }

    /// The `now` and `next` inputs waiting for `request_id` (`now` first, then in the order
    /// they came), taken. With none and `seal_if_none`, the request is sealed: from now on such
    /// inputs wait for the next request, so none is accepted that nobody applies.
    pub fn claim(&self, request_id: &str, seal_if_none: bool) -> Vec<PendingInput> {
        let mut state = lock(&self.state);
        let (mut claimed, kept): (Vec<_>, Vec<_>) = std::mem::take(&mut state.pending)
            .into_iter()
            .partition(|(input, _)| input.target_request_id.as_deref() == Some(request_id));
        state.pending = kept;
        claimed.sort_by_key(|(input, _)| (input.priority != Priority::Now, input.accepted_at));
        if let Some(active) = state.active.as_mut().filter(|active| active.request_id == request_id) {
            if claimed.is_empty() && seal_if_none {
                active.sealed = true;
            }
        }
        claimed.into_iter().map(|(input, _)| input).collect()
    }

    /// The model step `request_id` starts now: cancelled by a `now` input.
    pub fn step(&self, request_id: &str) -> CancellationToken {
        let mut state = lock(&self.state);
        match state.active.as_mut().filter(|active| active.request_id == request_id) {
            Some(active) => {
                if active.step.is_cancelled() && active.interrupted_by.is_none() {
                    active.step = CancellationToken::new();
                }
                active.step.clone()
            }
            None => CancellationToken::new(),
        }
    }

    /// The `now` input that interrupted `request_id`'s step, taken (the next step is not
    /// interrupted by it).
    pub fn take_interruption(&self, request_id: &str) -> Option<String> {
        let mut state = lock(&self.state);
        let active = state.active.as_mut().filter(|active| active.request_id == request_id)?;
        let input = active.interrupted_by.take()?;
        active.step = CancellationToken::new();
        Some(input)
    }

    /// The first `later` input (left waiting until [`Inputs::cancel`] takes it: a request it
    /// starts may yet be refused).
    pub fn first_later(&self) -> Option<PendingInput> {
        let state = lock(&self.state);
        let (input, _) = state
            .pending
            .iter()
            .find(|(input, _)| input.target_request_id.is_none())?;
        Some(input.clone())
    }

    /// Puts claimed inputs that were not applied back in front, in their order: a request that
    /// failed or could not start loses none (its end turns them into inputs for later).
    pub fn restore(&self, inputs: Vec<PendingInput>) {
        let mut state = lock(&self.state);
        let mut restored: Vec<(PendingInput, usize)> = inputs
            .into_iter()
            .map(|input| {
                let bytes = size_of(&input.content);
                (input, bytes)
            })
            .collect();
        restored.append(&mut state.pending);
        state.pending = restored;
    }

    /// `cancelInput(id)`: whether the input was still waiting (and now is not).
    pub fn cancel(&self, input_id: &str) -> bool {
        let mut state = lock(&self.state);
        let before = state.pending.len();
        state.pending.retain(|(input, _)| input.input_id != input_id);
        state.pending.len() != before
    }

    /// `getPendingInputs()`.
    pub fn pending(&self) -> Vec<PendingInput> {
        lock(&self.state)
            .pending
            .iter()
            .map(|(input, _)| input.clone())
            .collect()
    }
}

fn size_of(content: &UserContent) -> usize {
    match content {
        UserContent::Text(text) => text.len(),
        UserContent::Parts(_) => serde_json::to_string(content).map_or(0, |text| text.len()),
    }
}

fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |elapsed| elapsed.as_millis() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(value: &str) -> UserContent {
        UserContent::Text(value.into())
    }

    #[test]
    fn without_an_active_request_an_input_starts_one() {
        let inputs = Inputs::default();
        assert_eq!(
            inputs.submit(text("a"), Priority::Next, None, false).unwrap(),
            Submitted::Idle
        );
        let error = inputs.submit(text("a"), Priority::Next, Some("r0"), false).unwrap_err();
        assert_eq!(error.code, ErrorCode::SessionRequestMismatch);
        assert_eq!(error.message, "No active request matches \"r0\"");
        assert!(inputs.pending().is_empty());
    }

    #[test]
    fn next_and_now_steer_the_active_request_and_later_waits() {
        let inputs = Inputs::default();
        inputs.open("r1");
        let step = inputs.step("r1");
        let Submitted::Steered {
            priority, request_id, ..
        } = inputs.submit(text("n"), Priority::Next, None, false).unwrap()
        else {
            panic!("steered")
        };
        assert_eq!((priority, request_id.as_str()), (Priority::Next, "r1"));
        assert!(!step.is_cancelled(), "next does not interrupt");
        assert!(matches!(
            inputs.submit(text("l"), Priority::Later, Some("r1"), false).unwrap(),
            Submitted::Queued { .. }
        ));
        let Submitted::Steered { input_id: now, .. } = inputs.submit(text("w"), Priority::Now, None, false).unwrap()
        else {
            panic!("steered")
        };
        assert!(step.is_cancelled(), "now interrupts the step in flight");
        assert_eq!(inputs.take_interruption("r1").as_deref(), Some(now.as_str()));
        assert!(!inputs.step("r1").is_cancelled(), "the next step starts clean");
        let claimed: Vec<_> = inputs
            .claim("r1", true)
            .into_iter()
            .map(|input| input.content.text())
            .collect();
        assert_eq!(claimed, ["w", "n"], "now first, then in the order they came");
        assert_eq!(inputs.pending().len(), 1);
        let later = inputs.first_later().unwrap();
        assert_eq!(later.content.text(), "l");
        assert_eq!(inputs.pending().len(), 1, "looked at, not taken");
        assert!(inputs.cancel(&later.input_id));
    }

    #[test]
    fn a_stale_expected_request_id_is_refused_and_nothing_is_kept() {
        let inputs = Inputs::default();
        inputs.open("r2");
        let error = inputs.submit(text("a"), Priority::Next, Some("r1"), false).unwrap_err();
        assert_eq!(error.message, "Expected request \"r1\" but \"r2\" is active");
        assert!(inputs.pending().is_empty());
    }

    #[test]
    fn a_sealed_or_ended_request_sends_steering_to_the_next_request() {
        let inputs = Inputs::default();
        inputs.open("r1");
        assert!(inputs.claim("r1", true).is_empty());
        assert!(matches!(
            inputs.submit(text("a"), Priority::Now, None, false).unwrap(),
            Submitted::Queued { .. }
        ));
        inputs.open("r2");
        inputs.submit(text("b"), Priority::Next, None, false).unwrap();
        inputs.close("r2");
        let pending = inputs.pending();
        assert!(pending
            .iter()
            .all(|input| input.priority == Priority::Later && input.target_request_id.is_none()));
        assert_eq!(
            inputs.submit(text("c"), Priority::Next, None, false).unwrap(),
            Submitted::Idle
        );
    }

    #[test]
    fn a_cancelled_input_is_gone_and_cancelling_twice_says_so() {
        let inputs = Inputs::default();
        inputs.open("r1");
        let Submitted::Queued { input_id } = inputs.submit(text("a"), Priority::Later, None, false).unwrap() else {
            panic!("queued")
        };
        assert!(inputs.cancel(&input_id));
        assert!(!inputs.cancel(&input_id));
        assert!(inputs.first_later().is_none());
    }

    #[test]
    fn restored_inputs_wait_in_front_and_become_later_when_their_request_ends() {
        let inputs = Inputs::default();
        inputs.open("r1");
        inputs.submit(text("a"), Priority::Next, None, false).unwrap();
        inputs.submit(text("b"), Priority::Later, None, false).unwrap();
        let claimed = inputs.claim("r1", false);
        inputs.restore(claimed);
        inputs.close("r1");
        let texts: Vec<_> = inputs
            .pending()
            .into_iter()
            .map(|input| (input.content.text(), input.priority))
            .collect();
        assert_eq!(
            texts,
            [("a".to_string(), Priority::Later), ("b".to_string(), Priority::Later)]
        );
    }

    #[test]
    fn the_inbox_is_bounded() {
        let inputs = Inputs::default();
        inputs.open("r1");
        for _ in 0..MAX_INPUTS {
            inputs.submit(text("a"), Priority::Later, None, false).unwrap();
        }
        let error = inputs.submit(text("a"), Priority::Later, None, false).unwrap_err();
        assert_eq!(
            error.message,
            "Session input queue capacity exceeded (32 inputs, 1048576 bytes)"
        );
        assert_eq!(inputs.pending().len(), MAX_INPUTS);
    }
}
