//! A streamable-HTTP server's event streams, no event longer than `MAX_LINE_BYTES` (the stdio
//! cap). rmcp's SSE parser holds a whole event however long it is; here an event is passed on
//! only once complete, and one over the limit is dropped. On the stream that answers a request,
//! the request is answered at once in its place by the error `lines` writes for stdio, naming the
//! limit, and the stream ends; elsewhere the event is dropped with a warning.

use bytes::Bytes;
use futures::stream::{self, BoxStream, Stream, StreamExt};
use serde_json::Value;

use super::lines::too_long;

/// Where one event's bytes end, fed byte by byte: an event ends at an empty line, whichever of
/// LF, CR or CRLF ends the lines.
#[derive(Default)]
struct Boundary {
    at_line_start: bool,
    after_cr: bool,
}

impl Boundary {
    /// `true` when `byte` ends an event.
    fn ends(&mut self, byte: u8) -> bool {
        if std::mem::take(&mut self.after_cr) && byte == b'\n' {
            // The LF of a CRLF: the line already ended at the CR.
            return false;
        }
        match byte {
            b'\r' | b'\n' => {
                self.after_cr = byte == b'\r';
                std::mem::replace(&mut self.at_line_start, true)
            }
            _ => {
                self.at_line_start = false;
                false
            }
        }
    }
}

struct Capped<S> {
    body: S,
    /// The request this stream answers, if any.
    answers: Option<Value>,
    limit: usize,
    /// The event being read.
    event: Vec<u8>,
    boundary: Boundary,
    /// An event over the limit is being skipped to its end.
    skipping: bool,
    ended: bool,
}

/// `body` with each event passed on whole, none over `limit` bytes. `answers`: the id of the
/// request whose answer this stream carries.
pub(crate) fn capped<S, E>(body: S, answers: Option<Value>, limit: usize) -> BoxStream<'static, Result<Bytes, E>>
where
    S: Stream<Item = Result<Bytes, E>> + Send + Unpin + 'static,
    E: Send + 'static,
{
    let state = Capped {
        body,
        answers,
        limit,
        event: Vec::new(),
        boundary: Boundary::default(),
        skipping: false,
        ended: false,
    };
    stream::unfold(state, |mut state| async move {
        loop {
            if state.ended {
                return None;
            }
            let chunk = match state.body.next().await {
                Some(Ok(chunk)) => chunk,
                Some(Err(error)) => return Some((Err(error), state)),
                None => {
                    state.ended = true;
                    // An event cut by the end of the body: passed on as it is, for the parser to judge.
                    let rest = std::mem::take(&mut state.event);
                    return (!rest.is_empty()).then(|| (Ok(Bytes::from(rest)), state));
                }
            };
            let mut whole = Vec::new();
            for &byte in chunk.iter() {
                if !state.skipping {
                    state.event.push(byte);
                }
                let ends = state.boundary.ends(byte);
                if ends {
                    if !std::mem::take(&mut state.skipping) {
                        whole.append(&mut state.event);
                    }
                    continue;
                }
                if !state.skipping && state.event.len() > state.limit {
                    state.event = Vec::new();
                    state.skipping = true;
                    if let Some(id) = state.answers.take() {
                        state.ended = true;
                        whole.extend_from_slice(b"data: ");
                        whole.extend_from_slice(too_long(id, None, state.limit).as_bytes());
                        whole.push(b'\n');
                        return Some((Ok(Bytes::from(whole)), state));
                    }
                    tracing::warn!(
                        limit = state.limit,
                        "an MCP server sent an event over the limit; it was dropped"
                    );
                }
            }
            if !whole.is_empty() {
                return Some((Ok(Bytes::from(whole)), state));
            }
        }
    })
    .boxed()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn run(pieces: &[&[u8]], answers: Option<Value>, limit: usize) -> Vec<u8> {
        let body = stream::iter(
            pieces
                .iter()
                .map(|piece| Ok::<_, ()>(Bytes::copy_from_slice(piece)))
                .collect::<Vec<_>>(),
        );
        let out = futures::executor::block_on(capped(body, answers, limit).collect::<Vec<_>>());
        out.into_iter().flat_map(|chunk| chunk.unwrap().to_vec()).collect()
    }

    #[test]
    fn events_under_the_limit_pass_unchanged_whatever_ends_their_lines() {
        for body in [
            &b"data: a\n\ndata: b\n\n"[..],
            b"data: a\r\n\r\ndata: b\r\n\r\n",
            b"data: a\r\rdata: b\r\r",
            b"id: 1\ndata: {\"x\":1}\ndata: more\n\n",
        ] {
            assert_eq!(run(&[body], Some(json!(1)), 64), body);
        }
    }

    #[test]
    fn an_answer_over_the_limit_is_an_error_for_its_request_and_ends_the_stream() {
        let big = format!("data: {}\n\n", "x".repeat(100));
        let out = run(
            &[b"data: {\"note\":1}\n\n", big.as_bytes(), b"data: after\n\n"],
            Some(json!(7)),
            64,
        );
        let text = String::from_utf8(out).unwrap();
        let (first, error) = text.split_once("\n\n").unwrap();
        assert_eq!(first, "data: {\"note\":1}");
        let error: Value = serde_json::from_str(error.trim().strip_prefix("data: ").unwrap()).unwrap();
        assert_eq!(error["id"], 7);
        assert_eq!(error["error"]["message"], "its answer is over the limit of 64 bytes");
        assert!(!text.contains("after"));
    }

    #[test]
    fn elsewhere_an_event_over_the_limit_is_dropped_and_the_stream_goes_on() {
        let big = format!("data: {}\n\n", "x".repeat(100));
        let out = run(&[b"data: a\n\n", big.as_bytes(), b"data: b\n\n"], None, 64);
        assert_eq!(out, b"data: a\n\ndata: b\n\n");
    }

    proptest! {
        /// However the body is cut into chunks, what comes out is the same.
        #[test]
        fn cutting_the_body_anywhere_changes_nothing(
            events in proptest::collection::vec(("[a-z]{0,90}", prop_oneof![Just("\n"), Just("\r\n"), Just("\r")]), 0..6),
            cuts in proptest::collection::vec(any::<usize>(), 0..8),
        ) {
            let body: String = events.iter().map(|(data, end)| format!("data: {data}{end}{end}")).collect();
            let whole = run(&[body.as_bytes()], None, 64);
            let mut points: Vec<usize> = cuts.iter().map(|cut| cut % (body.len() + 1)).collect();
            points.sort_unstable();
            let mut pieces = Vec::new();
            let mut start = 0;
            for point in points.into_iter().chain([body.len()]) {
                pieces.push(&body.as_bytes()[start..point]);
                start = point;
            }
            prop_assert_eq!(run(&pieces, None, 64), whole);
        }
    }
}
