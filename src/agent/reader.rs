//! A run's events between the run and its caller: kept in order until taken in batches, and
//! when a waiting reader wakes.
//!
//! A text reader (`textStream()`) has no use for `turn`, `tool_use` or `tool_result`: waking it
//! for them costs a crossing into JS per model turn for nothing. So a reader waits for text or
//! the run's end, and the events before them come in the same batch; once any reader asks for
//! every event (`stream()`), every event wakes it, for the rest of the run. Events that wake
//! nobody are only appended: no wake-up, no poll.

use std::collections::VecDeque;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::Notify;

use super::events::StreamEvent;

/// A new run's event log: the run's end to publish, the caller's to read.
pub fn event_log() -> (EventSender, EventReader) {
    let log = Arc::new(Log {
        state: Mutex::new(State::default()),
        every: AtomicBool::new(false),
        senders: AtomicUsize::new(1),
        unread: AtomicBool::new(false),
        arrived: Notify::new(),
    });
    (EventSender(log.clone()), EventReader(log))
}

struct Log {
    state: Mutex<State>,
    /// Every event was asked for, not only text (from then on, for the rest of the run).
    every: AtomicBool,
    senders: AtomicUsize,
    /// The reader is gone: what is published is dropped.
    unread: AtomicBool,
    /// Something a reader waits for was published, the run ended, or a reader widened.
    arrived: Notify,
}

#[derive(Default)]
struct State {
    events: VecDeque<StreamEvent>,
    /// How many of `events` wake a text reader.
    waking: usize,
    /// Every sender is gone: nothing more will come.
    ended: bool,
}

impl Log {
    fn state(&self) -> MutexGuard<'_, State> {
        // A panic while holding the lock leaves plain data behind; keep serving it.
        self.state.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

impl State {
    fn ready(&self, every: bool) -> bool {
        self.ended || self.waking > 0 || (every && !self.events.is_empty())
    }
}

fn wakes_a_text_reader(event: &StreamEvent) -> bool {
    matches!(
        event,
        StreamEvent::Content { .. } | StreamEvent::Result { .. } | StreamEvent::Error { .. }
    )
}

/// Publishes a run's events (clones too: a model turn on a worker publishes its text). The log
/// ends when the last one is dropped.
pub struct EventSender(Arc<Log>);

impl EventSender {
    pub fn send(&self, event: StreamEvent) {
        if self.0.unread.load(Ordering::Acquire) {
            return;
        }
        let wakes = wakes_a_text_reader(&event);
        let mut state = self.0.state();
        state.events.push_back(event);
        state.waking += usize::from(wakes);
        drop(state);
        if wakes || self.0.every.load(Ordering::Acquire) {
            self.0.arrived.notify_one();
        }
    }
}

impl Clone for EventSender {
    fn clone(&self) -> Self {
        self.0.senders.fetch_add(1, Ordering::Relaxed);
        EventSender(self.0.clone())
    }
}

impl Drop for EventSender {
    fn drop(&mut self) {
        if self.0.senders.fetch_sub(1, Ordering::AcqRel) == 1 {
            self.0.state().ended = true;
            // Every waiting pull; a later one finds `ended` set.
            self.0.arrived.notify_waiters();
        }
    }
}

/// Takes a run's events. Pulls are meant to take turns (the JS side keeps one at a time); one
/// that finds the log emptied by another goes back to waiting.
pub struct EventReader(Arc<Log>);

impl Drop for EventReader {
    fn drop(&mut self) {
        self.0.unread.store(true, Ordering::Release);
        self.0.state().events.clear();
    }
}

impl EventReader {
    /// From now on every event wakes a waiting reader, including one already waiting.
    pub fn want_every_event(&self) {
        if !self.0.every.swap(true, Ordering::AcqRel) {
            self.0.arrived.notify_one();
        }
    }

    /// Waits until the log holds what a reader waits for, or has ended.
    async fn ready(&self) {
        loop {
            // Armed before the state is read: what is published in between still wakes it.
            let arrived = self.0.arrived.notified();
            let mut arrived = std::pin::pin!(arrived);
            arrived.as_mut().enable();
            if self.0.state().ready(self.0.every.load(Ordering::Acquire)) {
                return;
            }
            arrived.await;
        }
    }

    /// The next event, whatever it is (a Rust consumer reading one at a time). `None` once the
    /// log ended and every event was taken.
    pub async fn recv(&self) -> Option<StreamEvent> {
        self.want_every_event();
        loop {
            self.ready().await;
            let mut state = self.0.state();
            match state.events.pop_front() {
                Some(event) => {
                    state.waking = state.waking.saturating_sub(usize::from(wakes_a_text_reader(&event)));
                    return Some(event);
                }
                None if state.ended => return None,
                // Another pull took it first.
                None => {}
            }
        }
    }

    /// The run's last event, if it is its result or error and still in the log: read where it
    /// is, leaving every event for later batches. `result()` needs that event alone, and most
    /// runs are read no other way, so the rest are never serialized for it.
    pub fn outcome<R>(&self, read: impl FnOnce(&StreamEvent) -> R) -> Option<R> {
        match self.0.state().events.back() {
            Some(event @ (StreamEvent::Result { .. } | StreamEvent::Error { .. })) => Some(read(event)),
            _ => None,
        }
    }

    /// Takes the events published since the last batch: waits for one that wakes the reader,
    /// then lets `window` pass (unless the run is over: it ended, or its last event is out) and
    /// takes everything published by then, so a chatty run reaches its consumer in a few
    /// batches rather than one crossing per event. `None` once the log ended and every event
    /// was taken.
    pub async fn next_batch(&self, window: impl Future<Output = ()>) -> Option<Vec<StreamEvent>> {
        // The window is not waited out once the run is over: nothing more will come.
        let over = |state: &State| {
            state.ended
                || matches!(
                    state.events.back(),
                    Some(StreamEvent::Result { .. } | StreamEvent::Error { .. })
                )
        };
        let mut window = std::pin::pin!(window);
        let mut waited = false;
        loop {
            self.ready().await;
            if !waited && !over(&self.0.state()) {
                window.as_mut().await;
                waited = true;
            }
            let mut state = self.0.state();
            if !state.events.is_empty() {
                state.waking = 0;
                return Some(state.events.drain(..).collect());
            }
            if state.ended {
                return None;
            }
            // Another pull took them first.
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::SdkError;
    use crate::model::FinishReason;
    use std::sync::Arc;
    use std::time::Duration;

    fn content(delta: &str) -> StreamEvent {
        StreamEvent::Content { delta: delta.into() }
    }

    /// A pull started on its own task, given 20 ms to take what wakes it.
    async fn pull(reader: &Arc<EventReader>) -> tokio::task::JoinHandle<Option<Vec<StreamEvent>>> {
        let reader = reader.clone();
        let waiting = tokio::spawn(async move { reader.next_batch(std::future::ready(())).await });
        tokio::time::sleep(Duration::from_millis(20)).await;
        waiting
    }

    /// A log holding one turn, and a pull waiting on it that the turn did not wake.
    async fn a_text_reader_waiting_after_a_turn() -> (
        EventSender,
        Arc<EventReader>,
        tokio::task::JoinHandle<Option<Vec<StreamEvent>>>,
    ) {
        let (sender, reader) = event_log();
        let reader = Arc::new(reader);
        sender.send(StreamEvent::TurnStart { turn: 1 });
        let waiting = pull(&reader).await;
        assert!(!waiting.is_finished(), "a turn alone must not wake a text reader");
        (sender, reader, waiting)
    }

    #[tokio::test]
    async fn batches_gather_what_arrives_within_the_window_and_end_at_the_last_event() {
        let (sender, reader) = event_log();
        sender.send(StreamEvent::TurnStart { turn: 1 });
        let later = sender.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(2)).await;
            later.send(content("a"));
            tokio::time::sleep(Duration::from_millis(100)).await;
            later.send(content("late"));
        });
        let window = Duration::from_millis(20);
        let first = reader.next_batch(tokio::time::sleep(window)).await.unwrap();
        assert_eq!(first, vec![StreamEvent::TurnStart { turn: 1 }, content("a")]);
        let started = tokio::time::Instant::now();
        let error = StreamEvent::error(SdkError::model("x"));
        tokio::time::sleep(Duration::from_millis(150)).await;
        sender.send(error.clone());
        let second = reader.next_batch(tokio::time::sleep(window)).await.unwrap();
        // The last event ends the batch at once, without waiting out the window.
        assert_eq!(second, vec![content("late"), error]);
        assert!(started.elapsed() < Duration::from_millis(165));
        drop(sender);
        assert_eq!(reader.next_batch(tokio::time::sleep(window)).await, None);
    }

    #[tokio::test]
    async fn a_text_reader_sleeps_through_tool_events_and_gets_them_with_the_next_text() {
        let (sender, _reader, waiting) = a_text_reader_waiting_after_a_turn().await;
        sender.send(StreamEvent::TurnEnd {
            turn: 1,
            finish_reason: FinishReason::Stop,
        });
        sender.send(StreamEvent::TurnStart { turn: 2 });
        sender.send(content("hi"));
        let batch = waiting.await.unwrap().unwrap();
        assert_eq!(
            batch,
            vec![
                StreamEvent::TurnStart { turn: 1 },
                StreamEvent::TurnEnd {
                    turn: 1,
                    finish_reason: FinishReason::Stop,
                },
                StreamEvent::TurnStart { turn: 2 },
                content("hi")
            ]
        );
    }

    #[tokio::test]
    async fn the_outcome_is_read_in_place_and_every_event_is_still_taken_after_it() {
        let (sender, reader) = event_log();
        sender.send(StreamEvent::TurnStart { turn: 1 });
        assert_eq!(
            reader.outcome(StreamEvent::clone),
            None,
            "no outcome before the last event"
        );
        let error = StreamEvent::error(SdkError::model("x"));
        sender.send(error.clone());
        drop(sender);
        assert_eq!(reader.outcome(StreamEvent::clone), Some(error.clone()));
        let batch = reader.next_batch(std::future::pending()).await.unwrap();
        assert_eq!(batch, vec![StreamEvent::TurnStart { turn: 1 }, error]);
        assert_eq!(reader.outcome(StreamEvent::clone), None, "taken events are gone");
    }

    #[tokio::test]
    async fn the_end_of_the_run_wakes_a_text_reader_with_what_is_left() {
        let (sender, reader) = event_log();
        sender.send(StreamEvent::TurnStart { turn: 1 });
        drop(sender);
        let batch = reader.next_batch(std::future::pending()).await.unwrap();
        assert_eq!(batch, vec![StreamEvent::TurnStart { turn: 1 }]);
        assert_eq!(reader.next_batch(std::future::pending()).await, None);
    }

    #[tokio::test]
    async fn pulls_that_overlap_share_the_events_and_all_see_the_end() {
        let (sender, reader) = event_log();
        let reader = Arc::new(reader);
        let first = pull(&reader).await;
        let second = pull(&reader).await;
        sender.send(content("a"));
        tokio::time::sleep(Duration::from_millis(20)).await;
        drop(sender);
        let mut batches = vec![first.await.unwrap(), second.await.unwrap()];
        batches.sort_by_key(Option::is_none);
        assert_eq!(batches, vec![Some(vec![content("a")]), None]);
    }

    #[test]
    fn what_is_published_after_the_reader_is_gone_is_dropped() {
        let (sender, reader) = event_log();
        sender.send(content("before"));
        drop(reader);
        sender.send(content("dropped"));
        assert_eq!(sender.0.state().events.len(), 0);
    }

    #[tokio::test]
    async fn the_log_ends_when_its_last_sender_is_gone() {
        let (sender, reader) = event_log();
        let model_turn = sender.clone();
        drop(sender);
        model_turn.send(content("still open"));
        assert_eq!(reader.recv().await, Some(content("still open")));
        let reading = tokio::spawn(async move { reader.recv().await });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!reading.is_finished(), "a sender is still there");
        drop(model_turn);
        assert_eq!(reading.await.unwrap(), None);
    }

    #[tokio::test]
    async fn asking_for_every_event_wakes_a_reader_already_waiting() {
        let (sender, reader, waiting) = a_text_reader_waiting_after_a_turn().await;
        reader.want_every_event();
        let batch = tokio::time::timeout(Duration::from_secs(1), waiting).await.unwrap();
        assert_eq!(batch.unwrap().unwrap(), vec![StreamEvent::TurnStart { turn: 1 }]);
        // And from then on, any event wakes the next one.
        sender.send(StreamEvent::TurnStart { turn: 2 });
        let next = reader.next_batch(std::future::ready(())).await.unwrap();
        assert_eq!(next, vec![StreamEvent::TurnStart { turn: 2 }]);
        drop(sender);
    }
}
