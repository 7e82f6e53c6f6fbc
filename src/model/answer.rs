//! Reading a model's answer once the request was answered: the whole body, or a stream of
//! events put together by the wire format's `Assembler`. Above `http.rs` (the request) and
//! `sse.rs` (the event stream), which it joins.

use super::http::{error_message, read_body, Connection, Opened};
use super::secrets::Secrets;
use super::sse::{Opening, SseReader};
use super::{ModelReply, TextSink};
use crate::error::{Detail, Result, SdkError};

/// Puts a streamed reply together from its events (one per wire format).
pub(crate) trait Assembler: Sized {
    fn new(max: usize) -> Self;
    /// One event's data; `Ok(true)` when it ends the reply.
    fn event(&mut self, data: &str, secrets: &Secrets, on_text: TextSink<'_>) -> Result<bool>;
    /// The end of the body.
    fn finish(self, on_text: TextSink<'_>) -> Result<ModelReply>;
}

/// Reads the answer to a request: a stream event by event with `A`, a whole body with
/// `parse`. Whatever goes wrong once the answer came has its status (2xx included).
pub(crate) async fn read_answer<A: Assembler>(
    opened: Opened,
    connection: &Connection,
    on_text: TextSink<'_>,
    parse: fn(&[u8], &Secrets) -> Result<ModelReply>,
) -> Result<ModelReply> {
    let status = opened.response.status().as_u16();
    let max = connection.settings.max_response_bytes;
    let secrets = &connection.secrets;
    let read = async {
        if !connection.settings.stream {
            let bytes = read_body(opened, max, secrets, false).await?;
            return whole(parse(&bytes, secrets)?, on_text);
        }
        let mut reader = match SseReader::open(opened, max, secrets).await? {
            Opening::Stream(reader) => reader,
            // The whole reply at once: read as the unstreamed answer it is. A body that is not
            // one (an error object under 200) is quoted.
            Opening::Json { body, kind } => {
                return match parse(&body, secrets) {
                    Ok(reply) => whole(reply, on_text),
                    Err(_) => Err(SdkError::model(format!(
                        "Model answer is not the event stream that was asked for ({kind}): {}",
                        error_message(&body, secrets)
                    ))),
                }
            }
        };
        reader.idle_timeout(connection.settings.stream_idle_timeout);
        let mut assembler = A::new(max);
        while let Some(data) = reader.next().await? {
            if assembler.event(data, secrets, on_text)? {
                break;
            }
        }
        assembler.finish(on_text)
    };
    read.await.map_err(|error| match error.detail {
        Detail::None => error.with_status(status),
        _ => error,
    })
}

/// A reply read whole: its text reaches the stream in one piece.
fn whole(reply: ModelReply, on_text: TextSink<'_>) -> Result<ModelReply> {
    if !reply.text.is_empty() {
        on_text(&reply.text);
    }
    Ok(reply)
}
