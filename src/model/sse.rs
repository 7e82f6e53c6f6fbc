//! Reads a `text/event-stream` body (parsing by `eventsource-stream`) under the request deadline.

use std::pin::Pin;
use std::time::Duration;

use eventsource_stream::{Event, EventStreamError, Eventsource};
use futures::{Stream, StreamExt};
use tokio::time::Instant;

use super::http::{chain, timed_out, Opened};
use crate::error::{Result, SdkError};

type Events = Pin<Box<dyn Stream<Item = Result<Event, EventStreamError<reqwest::Error>>> + Send>>;

pub(crate) struct SseReader {
    events: Events,
    deadline: Instant,
    timeout: Duration,
}

impl SseReader {
    pub fn new(opened: Opened) -> Self {
        SseReader {
            events: Box::pin(opened.response.bytes_stream().eventsource()),
            deadline: opened.deadline,
            timeout: opened.timeout,
        }
    }

    /// The next event, or `None` at the end of the body.
    pub async fn next(&mut self) -> Result<Option<Event>> {
        match tokio::time::timeout_at(self.deadline, self.events.next()).await {
            Err(_) => Err(timed_out(self.timeout)),
            Ok(None) => Ok(None),
            Ok(Some(Ok(event))) => Ok(Some(event)),
            Ok(Some(Err(EventStreamError::Transport(error)))) => {
                Err(SdkError::model(format!("Model stream broke off: {}", chain(&error))))
            }
            Ok(Some(Err(error))) => Err(SdkError::model(format!("Model stream is malformed: {error}"))),
        }
    }
}

/// Parses one event's JSON data.
pub(crate) fn parse_data<T: serde::de::DeserializeOwned>(event: &Event) -> Result<T> {
    serde_json::from_str(&event.data).map_err(|error| {
        SdkError::model(format!(
            "Model stream is malformed: {error} in {}",
            super::http::excerpt(&event.data, 200)
        ))
    })
}
