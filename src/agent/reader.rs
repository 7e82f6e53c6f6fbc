//! The caller's side of a run's events: batches taken in order, and when a waiting reader wakes.
//!
//! A text reader (`textStream()`) has no use for `turn`, `tool_use` or `tool_result`: waking it
//! for them costs a crossing into JS per model turn for nothing. So a reader waits for text or
//! the run's end, and the events before them come in the same batch; once any reader asks for
//! every event (`stream()`), every event wakes it, for the rest of the run.

use std::future::Future;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::{mpsc, Mutex, Notify};

use super::events::StreamEvent;

pub struct EventReader {
    events: Mutex<mpsc::UnboundedReceiver<StreamEvent>>,
    every: AtomicBool,
    widened: Notify,
}

impl EventReader {
    pub fn new(events: mpsc::UnboundedReceiver<StreamEvent>) -> Self {
        EventReader {
            events: Mutex::new(events),
            every: AtomicBool::new(false),
            widened: Notify::new(),
        }
    }

    /// From now on every event wakes a waiting reader, including one already waiting.
    pub fn want_every_event(&self) {
        if !self.every.swap(true, Ordering::AcqRel) {
            self.widened.notify_waiters();
        }
    }

    /// The next event, whatever it is (a Rust consumer reading one at a time).
    pub async fn recv(&self) -> Option<StreamEvent> {
        self.events.lock().await.recv().await
    }

    /// Takes the events published since the last batch: waits for one that wakes the reader,
    /// then for more until `window` completes (or the run ends), so a chatty run reaches its
    /// consumer in a few batches rather than one crossing per event. `None` once every event
    /// was taken.
    pub async fn next_batch(&self, window: impl Future<Output = ()>) -> Option<Vec<StreamEvent>> {
        let mut events = self.events.lock().await;
        let mut batch: Vec<StreamEvent> = Vec::new();
        // Armed before the flag is read: a widening in between still wakes this reader.
        let widened = self.widened.notified();
        let mut widened = std::pin::pin!(widened);
        widened.as_mut().enable();
        let mut every = self.every.load(Ordering::Acquire);
        // Until text or the end arrives; for a reader of every event, until anything does.
        while !every || batch.is_empty() {
            tokio::select! {
                biased;
                event = events.recv() => match event {
                    Some(event) => {
                        let wakes = wakes_a_text_reader(&event);
                        batch.push(event);
                        if wakes {
                            break;
                        }
                    }
                    None if batch.is_empty() => return None,
                    None => return Some(batch),
                },
                _ = &mut widened, if !every => every = true,
            }
        }
        let mut window = std::pin::pin!(window);
        loop {
            while let Ok(event) = events.try_recv() {
                batch.push(event);
            }
            let ended = matches!(
                batch.last(),
                Some(StreamEvent::Result { .. } | StreamEvent::Error { .. })
            );
            if ended || events.is_closed() {
                return Some(batch);
            }
            tokio::select! {
                biased;
                event = events.recv() => match event {
                    Some(event) => batch.push(event),
                    None => return Some(batch),
                },
                _ = &mut window => {
                    while let Ok(event) = events.try_recv() {
                        batch.push(event);
                    }
                    return Some(batch);
                }
            }
        }
    }
}

fn wakes_a_text_reader(event: &StreamEvent) -> bool {
    matches!(
        event,
        StreamEvent::Content { .. } | StreamEvent::Result { .. } | StreamEvent::Error { .. }
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::SdkError;
    use std::sync::Arc;
    use std::time::Duration;

    fn content(delta: &str) -> StreamEvent {
        StreamEvent::Content { delta: delta.into() }
    }

    #[tokio::test]
    async fn batches_gather_what_arrives_within_the_window_and_end_at_the_last_event() {
        let (sender, events) = mpsc::unbounded_channel();
        let reader = EventReader::new(events);
        sender.send(StreamEvent::Turn { index: 1 }).unwrap();
        let later = sender.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(2)).await;
            later.send(content("a")).unwrap();
            tokio::time::sleep(Duration::from_millis(100)).await;
            later.send(content("late")).unwrap();
        });
        let window = Duration::from_millis(20);
        let first = reader.next_batch(tokio::time::sleep(window)).await.unwrap();
        assert_eq!(first, vec![StreamEvent::Turn { index: 1 }, content("a")]);
        let started = tokio::time::Instant::now();
        let error = StreamEvent::Error {
            error: SdkError::model("x"),
        };
        tokio::time::sleep(Duration::from_millis(150)).await;
        sender.send(error.clone()).unwrap();
        let second = reader.next_batch(tokio::time::sleep(window)).await.unwrap();
        // The last event ends the batch at once, without waiting out the window.
        assert_eq!(second, vec![content("late"), error]);
        assert!(started.elapsed() < Duration::from_millis(165));
        drop(sender);
        assert_eq!(reader.next_batch(tokio::time::sleep(window)).await, None);
    }

    #[tokio::test]
    async fn a_text_reader_sleeps_through_tool_events_and_gets_them_with_the_next_text() {
        let (sender, events) = mpsc::unbounded_channel();
        let reader = Arc::new(EventReader::new(events));
        sender.send(StreamEvent::Turn { index: 1 }).unwrap();
        let waiting = tokio::spawn({
            let reader = reader.clone();
            async move { reader.next_batch(std::future::ready(())).await }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiting.is_finished(), "a turn alone must not wake a text reader");
        sender.send(StreamEvent::Turn { index: 2 }).unwrap();
        sender.send(content("hi")).unwrap();
        let batch = waiting.await.unwrap().unwrap();
        assert_eq!(
            batch,
            vec![
                StreamEvent::Turn { index: 1 },
                StreamEvent::Turn { index: 2 },
                content("hi")
            ]
        );
    }

    #[tokio::test]
    async fn the_end_of_the_run_wakes_a_text_reader_with_what_is_left() {
        let (sender, events) = mpsc::unbounded_channel();
        let reader = EventReader::new(events);
        sender.send(StreamEvent::Turn { index: 1 }).unwrap();
        drop(sender);
        let batch = reader.next_batch(std::future::pending()).await.unwrap();
        assert_eq!(batch, vec![StreamEvent::Turn { index: 1 }]);
        assert_eq!(reader.next_batch(std::future::pending()).await, None);
    }

    #[tokio::test]
    async fn asking_for_every_event_wakes_a_reader_already_waiting() {
        let (sender, events) = mpsc::unbounded_channel();
        let reader = Arc::new(EventReader::new(events));
        sender.send(StreamEvent::Turn { index: 1 }).unwrap();
        let waiting = tokio::spawn({
            let reader = reader.clone();
            async move { reader.next_batch(std::future::ready(())).await }
        });
        tokio::time::sleep(Duration::from_millis(20)).await;
        assert!(!waiting.is_finished());
        reader.want_every_event();
        let batch = tokio::time::timeout(Duration::from_secs(1), waiting).await.unwrap();
        assert_eq!(batch.unwrap().unwrap(), vec![StreamEvent::Turn { index: 1 }]);
        // And from then on, any event wakes the next one.
        sender.send(StreamEvent::Turn { index: 2 }).unwrap();
        let next = reader.next_batch(std::future::ready(())).await.unwrap();
        assert_eq!(next, vec![StreamEvent::Turn { index: 2 }]);
        drop(sender);
    }
}
