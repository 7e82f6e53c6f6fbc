//! Reads a `text/event-stream` body under the request deadline, with every line and event
//! capped. Our own parser rather than `eventsource-stream`: that crate appends each chunk to one
//! buffer and re-parses it from the start, so a long line costs quadratic time, and it has no
//! bound on a line. This one looks at each byte once and holds at most one line and one event.

use std::time::Duration;

use bytes::Bytes;
use reqwest::Response;
use tokio::time::Instant;

use super::http::{chain, timed_out, too_large, Opened};
use super::secrets::Secrets;
use crate::error::{Result, SdkError};

/// Why the bytes could not be parsed as an event stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SseError {
    /// A line, or one event's data, is longer than the cap.
    TooLong,
    /// An event's data is not UTF-8.
    NotUtf8,
}

/// The event-stream parser of the HTML standard, fed chunk by chunk; it keeps only the `data`
/// of events (the model APIs name their events inside the data too).
pub(crate) struct SseParser {
    max: usize,
    /// A line cut by the end of a chunk.
    line: Vec<u8>,
    /// The current event's data: its `data` lines, each followed by `\n`.
    data: Vec<u8>,
    /// The last byte fed was CR: an LF right after it ends no second line.
    after_cr: bool,
    /// The first bytes (and a BOM there) have been seen.
    started: bool,
    /// `data` holds a dispatched event; it is cleared before more bytes are taken.
    dispatched: bool,
}

impl SseParser {
    pub fn new(max: usize) -> Self {
        SseParser {
            max,
            line: Vec::new(),
            data: Vec::new(),
            after_cr: false,
            started: false,
            dispatched: false,
        }
    }

    /// Takes bytes of `input` from `*at` until an event is complete (`Ok(true)`: read it with
    /// `data()`) or `input` is used up (`Ok(false)`).
    pub fn feed(&mut self, input: &[u8], at: &mut usize) -> Result<bool, SseError> {
        if self.dispatched {
            self.data.clear();
            self.dispatched = false;
        }
        let mut rest = &input[*at..];
        if !self.started && !rest.is_empty() {
            // A BOM may arrive cut across chunks; it is only skipped when whole in the first.
            self.started = true;
            if let Some(after) = rest.strip_prefix("\u{feff}".as_bytes()) {
                *at += rest.len() - after.len();
                rest = after;
            }
        }
        while !rest.is_empty() {
            if self.after_cr {
                self.after_cr = false;
                if rest[0] == b'\n' {
                    *at += 1;
                    rest = &rest[1..];
                    continue;
                }
            }
            let Some(end) = memchr::memchr2(b'\n', b'\r', rest) else {
                if self.line.len() + rest.len() > self.max {
                    return Err(SseError::TooLong);
                }
                self.line.extend_from_slice(rest);
                *at += rest.len();
                return Ok(false);
            };
            self.after_cr = rest[end] == b'\r';
            *at += end + 1;
            let dispatch = if self.line.is_empty() {
                self.take_line(&rest[..end])?
            } else {
                if self.line.len() + end > self.max {
                    return Err(SseError::TooLong);
                }
                let mut line = std::mem::take(&mut self.line);
                line.extend_from_slice(&rest[..end]);
                let dispatch = self.take_line(&line);
                line.clear();
                self.line = line;
                dispatch?
            };
            if dispatch {
                return Ok(true);
            }
            rest = &rest[end + 1..];
        }
        Ok(false)
    }

    /// One whole line; `Ok(true)` when it ends an event that has data.
    fn take_line(&mut self, line: &[u8]) -> Result<bool, SseError> {
        if line.is_empty() {
            if self.data.is_empty() {
                return Ok(false);
            }
            self.data.pop(); // the last line's `\n`
            std::str::from_utf8(&self.data).map_err(|_| SseError::NotUtf8)?;
            self.dispatched = true;
            return Ok(true);
        }
        let (field, value) = match line.iter().position(|&byte| byte == b':') {
            Some(colon) => {
                let value = &line[colon + 1..];
                (&line[..colon], value.strip_prefix(b" ").unwrap_or(value))
            }
            None => (line, &b""[..]),
        };
        // Comments (an empty field name), `event`, `id`, `retry` and unknown fields are ignored.
        if field == b"data" {
            if self.data.len() + value.len() + 1 > self.max {
                return Err(SseError::TooLong);
            }
            self.data.extend_from_slice(value);
            self.data.push(b'\n');
        }
        Ok(false)
    }

    /// The data of the event `feed` just completed.
    pub fn data(&self) -> &str {
        // Checked as UTF-8 when the event was dispatched.
        std::str::from_utf8(&self.data).unwrap_or_default()
    }
}

/// An SSE body being read: the parser, the chunk it is in, and the answer's deadline.
pub(crate) struct SseReader<'a> {
    response: Response,
    parser: SseParser,
    chunk: Bytes,
    at: usize,
    deadline: Instant,
    timeout: Duration,
    /// How long the body may send nothing (`streamIdleTimeoutMs`).
    idle: Option<Duration>,
    max: usize,
    secrets: &'a Secrets,
}

/// What a request that asked for a stream was answered with.
pub(crate) enum Opening<'a> {
    Stream(Box<SseReader<'a>>),
    /// A JSON body (at most `max` bytes), and the content type it came under: some servers
    /// answer a streamed request with the whole reply (LiteLLM's proxy on its Anthropic route).
    Json {
        body: Vec<u8>,
        kind: String,
    },
}

impl<'a> SseReader<'a> {
    /// Starts reading an answer to a request that asked for a stream. A JSON body is read whole
    /// for the caller to parse; an HTML page is a `MODEL_ERROR` quoting it (`read_answer` adds
    /// the status).
    pub async fn open(opened: Opened, max: usize, secrets: &'a Secrets) -> Result<Opening<'a>> {
        let mut reader = SseReader {
            response: opened.response,
            parser: SseParser::new(max),
            chunk: Bytes::new(),
            at: 0,
            deadline: opened.deadline,
            timeout: opened.timeout,
            idle: None,
            max,
            secrets,
        };
        let content_type = reader
            .response
            .headers()
            .get(reqwest::header::CONTENT_TYPE)
            .and_then(|value| value.to_str().ok())
            .map(|value| value.split(';').next().unwrap_or("").trim().to_ascii_lowercase());
        if content_type.as_deref() == Some("text/event-stream") {
            return Ok(Opening::Stream(Box::new(reader)));
        }
        // Without the header, or with another (servers that stream under a wrong one exist),
        // the first bytes decide: a page or a JSON body starts with `<`, `{` or `[`, which no
        // event-stream field does in practice.
        let mut head = Vec::new();
        while head.iter().all(u8::is_ascii_whitespace) && head.len() <= max {
            match reader.chunk().await? {
                Some(chunk) => head.extend_from_slice(&chunk),
                None => break,
            }
        }
        let first = head.iter().find(|byte| !byte.is_ascii_whitespace());
        let kind = content_type.as_deref().unwrap_or("no content-type").to_string();
        if matches!(first, Some(b'{' | b'[')) {
            while let Some(chunk) = reader.chunk().await? {
                if head.len() + chunk.len() > max {
                    return Err(too_large("the response body", max));
                }
                head.extend_from_slice(&chunk);
            }
            return Ok(Opening::Json { body: head, kind });
        }
        if first == Some(&b'<') {
            // Enough of the body to quote: what came, and a little more if it is quick.
            const QUOTED: usize = 64 * 1024;
            while head.len() < QUOTED {
                match tokio::time::timeout(Duration::from_millis(100), reader.chunk()).await {
                    Ok(Ok(Some(chunk))) => head.extend_from_slice(&chunk),
                    _ => break,
                }
            }
            let detail = super::http::error_message(&head, reader.secrets);
            return Err(SdkError::model(format!(
                "Model answer is not the event stream that was asked for ({kind}): {detail}"
            )));
        }
        reader.chunk = Bytes::from(head);
        Ok(Opening::Stream(Box::new(reader)))
    }

    /// From now on, waiting longer than `idle` for the next bytes fails the answer.
    pub fn idle_timeout(&mut self, idle: Option<Duration>) {
        self.idle = idle;
    }

    /// The next chunk of the body, under the deadline (and the idle limit). The deadline is
    /// checked before each chunk too: a body that never makes the reader wait would otherwise
    /// never see its timer.
    async fn chunk(&mut self) -> Result<Option<Bytes>> {
        let now = Instant::now();
        if now >= self.deadline {
            return Err(timed_out(self.timeout));
        }
        // A body whose bytes are always ready never returns `Pending`; spending the task's
        // budget makes it yield now and then, so an abort (dropping the task) lands at once.
        tokio::task::coop::consume_budget().await;
        let idle_until = self.idle.map(|idle| now + idle).filter(|until| *until < self.deadline);
        match tokio::time::timeout_at(idle_until.unwrap_or(self.deadline), self.response.chunk()).await {
            Err(_) if idle_until.is_some() => Err(SdkError::model(format!(
                "Model stream was idle for more than {}ms (advanced.connection.streamIdleTimeoutMs)",
                self.idle.unwrap_or_default().as_millis()
            ))),
            Err(_) => Err(timed_out(self.timeout)),
            Ok(Ok(chunk)) => Ok(chunk),
            Ok(Err(error)) => Err(SdkError::model(format!(
                "Model stream broke off: {}",
                chain(&error.without_url())
            ))),
        }
    }

    /// The next event's data, or `None` at the end of the body.
    pub async fn next(&mut self) -> Result<Option<&str>> {
        loop {
            match self.parser.feed(&self.chunk, &mut self.at) {
                Ok(true) => break,
                Ok(false) => {}
                Err(SseError::TooLong) => return Err(too_large("an event-stream line", self.max)),
                Err(SseError::NotUtf8) => {
                    return Err(SdkError::model("Model stream is malformed: an event is not UTF-8"))
                }
            }
            match self.chunk().await? {
                Some(chunk) => {
                    self.chunk = chunk;
                    self.at = 0;
                }
                None => return Ok(None),
            }
        }
        Ok(Some(self.parser.data()))
    }
}

/// Parses one event's JSON data; a parse failure quotes the data (masked).
pub(crate) fn parse_data<'d, T: serde::Deserialize<'d>>(data: &'d str, secrets: &Secrets) -> Result<T> {
    serde_json::from_str(data).map_err(|error| {
        SdkError::model(format!(
            "Model stream is malformed: {error} in {}",
            secrets.excerpt(data, 200)
        ))
    })
}

/// What the parser and assembler tests share.
#[cfg(test)]
pub(crate) mod testing {
    use super::*;
    use crate::model::answer::Assembler;
    use crate::model::ModelReply;

    /// Every event's data in `pieces` fed one after the other, or the error.
    pub fn events(pieces: &[&[u8]], max: usize) -> Result<Vec<String>, SseError> {
        let mut parser = SseParser::new(max);
        let mut out = Vec::new();
        for piece in pieces {
            let mut at = 0;
            while parser.feed(piece, &mut at)? {
                out.push(parser.data().to_string());
            }
            assert_eq!(at, piece.len());
        }
        Ok(out)
    }

    /// `bytes` cut at the given points (taken modulo its length, in any order).
    pub fn cut<'a>(bytes: &'a [u8], cuts: &[usize]) -> Vec<&'a [u8]> {
        let mut points: Vec<usize> = cuts.iter().map(|cut| cut % (bytes.len() + 1)).collect();
        points.sort_unstable();
        let mut pieces = Vec::new();
        let mut start = 0;
        for point in points.into_iter().chain([bytes.len()]) {
            pieces.push(&bytes[start..point]);
            start = point;
        }
        pieces
    }

    /// Feeds `datas` to an `A` as events: the reply (or error) and the text deltas.
    pub fn assemble<A: Assembler>(datas: &[String], max: usize) -> (Result<ModelReply>, Vec<String>) {
        let mut deltas = Vec::new();
        let mut on_text = |delta: &str| deltas.push(delta.to_string());
        let mut assembler = A::new(max);
        let secrets = Secrets::default();
        for data in datas {
            match assembler.event(data, &secrets, &mut on_text) {
                Ok(true) => break,
                Ok(false) => {}
                Err(error) => return (Err(error), deltas),
            }
        }
        let reply = assembler.finish(&mut on_text);
        (reply, deltas)
    }

    /// An SSE body cut into `pieces`, parsed and assembled by an `A`.
    pub fn assemble_bytes<A: Assembler>(pieces: &[&[u8]], max: usize) -> Result<ModelReply> {
        let datas = events(pieces, max).map_err(|error| SdkError::model(format!("{error:?}")))?;
        assemble::<A>(&datas, max).0
    }
}

#[cfg(test)]
mod tests {
    use super::testing::{cut, events};
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn events_follow_the_html_standard() {
        let body = "\u{feff}: comment\nevent: x\ndata: a\ndata:b\r\nid: 1\r\rdata\n\ndata: c\r\n\r\nretry: 5\n\ndata: unfinished";
        assert_eq!(events(&[body.as_bytes()], 100).unwrap(), ["a\nb", "", "c"]);
    }

    #[test]
    fn a_line_or_an_event_over_the_cap_is_refused_wherever_it_is_cut() {
        let long = format!("data: {}\n\n", "x".repeat(20));
        assert_eq!(events(&[long.as_bytes()], 20), Err(SseError::TooLong));
        let (a, b) = long.as_bytes().split_at(9);
        assert_eq!(events(&[a, b], 20), Err(SseError::TooLong));
        // Short lines, but one event too large.
        let many = "data: 123456\n".repeat(4) + "\n";
        assert_eq!(events(&[many.as_bytes()], 20), Err(SseError::TooLong));
        assert_eq!(events(&[b"data: 1234567890123\n\n"], 20).unwrap(), ["1234567890123"]);
    }

    #[test]
    fn data_that_is_not_utf8_is_refused() {
        assert_eq!(events(&[b"data: \xff\n\n"], 20), Err(SseError::NotUtf8));
        // A character cut between chunks is whole again.
        assert_eq!(events(&[b"data: \xc3", b"\xa9\n\n"], 20).unwrap(), ["é"]);
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

        #[test]
        fn arbitrary_bytes_in_arbitrary_pieces_never_panic(
            bytes in proptest::collection::vec(prop_oneof![Just(b'\n'), Just(b'\r'), Just(b':'), any::<u8>()], 0..300),
            cuts in proptest::collection::vec(any::<usize>(), 0..8),
            max in 1usize..64,
        ) {
            let _ = events(&cut(&bytes, &cuts), max);
        }

        #[test]
        fn cutting_a_stream_anywhere_changes_nothing(
            datas in proptest::collection::vec("[^\r\n]{0,20}", 0..6),
            newline in prop_oneof![Just("\n"), Just("\r\n"), Just("\r")],
            cuts in proptest::collection::vec(any::<usize>(), 0..10),
        ) {
            let body: String = datas
                .iter()
                .map(|data| format!("data: {data}{newline}: note{newline}{newline}"))
                .collect();
            let whole = events(&[body.as_bytes()], 1 << 20).unwrap();
            prop_assert_eq!(&whole, &datas);
            prop_assert_eq!(events(&cut(body.as_bytes(), &cuts), 1 << 20).unwrap(), whole);
        }
    }
}
