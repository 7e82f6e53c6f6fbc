//! A stdio server's output as JSON-RPC lines, none longer than `MAX_LINE_BYTES`. rmcp drops an
//! over-long line without a word, which leaves the call it answers waiting forever; here such a
//! line is dropped too, but the call is answered at once with an error naming the limit (and
//! the line's size, once its end is seen). Memory stays bounded however long the line is.

use std::io;
use std::pin::Pin;
use std::task::{ready, Context, Poll};

use serde_json::{json, Map, Value};
use tokio::io::{AsyncRead, ReadBuf};

/// The longest line (one message and its newline) read from a server: rmcp's own cap, and the
/// cap on model answers.
pub const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;
/// Marks the errors written here, so the caller can show their message alone.
pub const LIMIT_MARK: &str = "messageLimitBytes";
/// How many bytes are read from the server at a time.
const CHUNK: usize = 64 * 1024;
/// A top-level member longer than this is not the `id` (which is a number or a short string).
const MEMBER: usize = 256;

/// The server's stdout, line by line, with over-long lines replaced by errors for their ids.
pub struct CappedLines<R> {
    inner: R,
    limit: usize,
    chunk: Vec<u8>,
    /// The line being read, until its end (at most `limit` bytes).
    line: Vec<u8>,
    /// Set while an over-long line is being skipped.
    over: Option<Oversized>,
    /// Whole lines not yet handed on, from `ready_at`.
    ready: Vec<u8>,
    ready_at: usize,
    eof: bool,
}

struct Oversized {
    bytes: usize,
    id: IdScan,
    answered: bool,
}

impl<R> CappedLines<R> {
    pub fn new(inner: R, limit: usize) -> Self {
        CappedLines {
            inner,
            limit,
            chunk: vec![0; CHUNK],
            line: Vec::new(),
            over: None,
            ready: Vec::new(),
            ready_at: 0,
            eof: false,
        }
    }

    /// Sorts `data` into whole lines, the line being read and the over-long line being skipped.
    fn take(&mut self, mut data: &[u8]) {
        while !data.is_empty() {
            let newline = memchr::memchr(b'\n', data);
            let part = &data[..newline.unwrap_or(data.len())];
            let ends = newline.is_some();
            data = &data[part.len() + usize::from(ends)..];
            if self.over.is_none() {
                if self.line.len() + part.len() + usize::from(ends) <= self.limit {
                    self.line.extend_from_slice(part);
                    if ends {
                        self.ready.extend_from_slice(&self.line);
                        self.ready.push(b'\n');
                        self.line.clear();
                    }
                    continue;
                }
                // Over the limit: what was kept of the line is only scanned for its id, then freed.
                let mut id = IdScan::default();
                id.feed(&self.line);
                self.over = Some(Oversized {
                    bytes: self.line.len(),
                    id,
                    answered: false,
                });
                self.line = Vec::new();
            }
            let Some(over) = self.over.as_mut() else { continue };
            over.bytes += part.len() + usize::from(ends);
            over.id.feed(part);
            if !over.answered {
                if let Some(id) = over.id.found.clone() {
                    over.answered = true;
                    let error = too_long(id, ends.then_some(over.bytes), self.limit);
                    self.ready.extend_from_slice(error.as_bytes());
                }
            }
            if ends {
                if !over.answered {
                    tracing::warn!(
                        bytes = over.bytes,
                        limit = self.limit,
                        "an MCP server sent a message over the limit without an id; it was dropped"
                    );
                }
                self.over = None;
            }
        }
    }
}

/// The JSON-RPC error line that answers request `id` in place of its over-long answer.
pub(crate) fn too_long(id: Value, bytes: Option<usize>, limit: usize) -> String {
    let message = match bytes {
        Some(bytes) => format!("its answer is {bytes} bytes, over the limit of {limit} bytes"),
        None => format!("its answer is over the limit of {limit} bytes"),
    };
    let error = json!({
        "jsonrpc": "2.0",
        "id": id,
        "error": {"code": -32603, "message": message, "data": {LIMIT_MARK: limit}},
    });
    format!("{error}\n")
}

impl<R: AsyncRead + Unpin> AsyncRead for CappedLines<R> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        loop {
            if this.ready_at < this.ready.len() {
                let count = buf.remaining().min(this.ready.len() - this.ready_at);
                buf.put_slice(&this.ready[this.ready_at..this.ready_at + count]);
                this.ready_at += count;
                if this.ready_at == this.ready.len() {
                    this.ready.clear();
                    this.ready_at = 0;
                    // A big message's room is not kept for the small ones that follow.
                    if this.ready.capacity() > 4 * CHUNK {
                        this.ready.shrink_to(CHUNK);
                    }
                }
                return Poll::Ready(Ok(()));
            }
            if this.eof {
                // A line cut off by the end is no message: rmcp would drop it too.
                return Poll::Ready(Ok(()));
            }
            let mut chunk = std::mem::take(&mut this.chunk);
            let mut read = ReadBuf::new(&mut chunk);
            let polled = Pin::new(&mut this.inner).poll_read(cx, &mut read);
            let filled = read.filled().len();
            if let Poll::Ready(Ok(())) = polled {
                if filled == 0 {
                    this.eof = true;
                } else {
                    this.take(&chunk[..filled]);
                }
            }
            this.chunk = chunk;
            ready!(polled)?;
        }
    }
}

/// Finds the `id` member of a JSON object read in pieces, keeping at most `MEMBER` bytes: each
/// top-level member is collected (cut short past `MEMBER`) and, when it ends, read on its own.
#[derive(Default)]
struct IdScan {
    depth: usize,
    in_string: bool,
    escaped: bool,
    member: Vec<u8>,
    cut: bool,
    found: Option<Value>,
}

impl IdScan {
    fn feed(&mut self, bytes: &[u8]) {
        for &byte in bytes {
            if self.found.is_some() {
                return;
            }
            if self.in_string {
                if self.escaped {
                    self.escaped = false;
                } else if byte == b'\\' {
                    self.escaped = true;
                } else if byte == b'"' {
                    self.in_string = false;
                }
                self.keep(byte);
                continue;
            }
            match byte {
                b'{' | b'[' if self.depth == 0 => self.depth = 1,
                b'}' | b']' if self.depth == 1 => {
                    self.end_member();
                    self.depth = 0;
                }
                b',' if self.depth == 1 => self.end_member(),
                b'{' | b'[' => {
                    self.depth += 1;
                    self.keep(byte);
                }
                b'}' | b']' if self.depth > 1 => {
                    self.depth -= 1;
                    self.keep(byte);
                }
                b'"' => {
                    self.in_string = true;
                    self.keep(byte);
                }
                _ => self.keep(byte),
            }
        }
    }

    fn keep(&mut self, byte: u8) {
        if self.depth == 0 {
            return;
        }
        if self.member.len() < MEMBER {
            self.member.push(byte);
        } else {
            self.cut = true;
        }
    }

    fn end_member(&mut self) {
        if !self.cut {
            let mut object = Vec::with_capacity(self.member.len() + 2);
            object.push(b'{');
            object.extend_from_slice(&self.member);
            object.push(b'}');
            if let Ok(mut member) = serde_json::from_slice::<Map<String, Value>>(&object) {
                if let Some(id @ (Value::Number(_) | Value::String(_))) = member.remove("id") {
                    self.found = Some(id);
                }
            }
        }
        self.member.clear();
        self.cut = false;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    fn id_of(text: &str) -> Option<Value> {
        let mut scan = IdScan::default();
        // Fed a byte at a time: the scan must not depend on where reads are cut.
        for byte in text.as_bytes() {
            scan.feed(std::slice::from_ref(byte));
        }
        scan.found
    }

    #[test]
    fn the_id_is_found_before_or_after_a_long_result_and_never_inside_it() {
        let long = "x".repeat(10_000);
        assert_eq!(
            id_of(&format!(r#"{{"result":{{"text":"{long}"}},"jsonrpc":"2.0","id":7}}"#)),
            Some(json!(7))
        );
        assert_eq!(
            id_of(&format!(r#"{{"jsonrpc":"2.0","id":"a-1","result":"{long}"}}"#)),
            Some(json!("a-1"))
        );
        assert_eq!(id_of(r#"{"result":{"id":99,"s":"}\",{"},"jsonrpc":"2.0"}"#), None);
        assert_eq!(id_of(r#"{"result":"\"id\":5,","id" : 6 }"#), Some(json!(6)));
        assert_eq!(id_of(r#"{"method":"notifications/message","params":{}}"#), None);
        assert_eq!(id_of(r#"{"id":null,"error":{}}"#), None);
    }

    async fn read_all(input: Vec<u8>, limit: usize) -> String {
        let mut output = String::new();
        CappedLines::new(&input[..], limit)
            .read_to_string(&mut output)
            .await
            .unwrap();
        output
    }

    #[tokio::test]
    async fn lines_within_the_limit_pass_whole_and_a_longer_one_is_answered_by_an_error() {
        let small = "{\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\n";
        let big = format!(
            "{{\"result\":{{\"t\":\"{}\"}},\"jsonrpc\":\"2.0\",\"id\":2}}\n",
            "y".repeat(500)
        );
        let output = read_all(format!("{small}{big}{small}").into_bytes(), 100).await;
        let lines: Vec<&str> = output.lines().collect();
        assert_eq!(lines.len(), 3);
        assert_eq!(lines[0], small.trim_end());
        let error: Value = serde_json::from_str(lines[1]).unwrap();
        assert_eq!(
            error,
            json!({"jsonrpc": "2.0", "id": 2, "error": {"code": -32603,
                "message": format!("its answer is {} bytes, over the limit of 100 bytes", big.len()),
                "data": {LIMIT_MARK: 100}}})
        );
        assert_eq!(lines[2], small.trim_end());
        // A line of exactly the limit (newline included) passes.
        let exact = format!("{{\"id\":3,\"r\":\"{}\"}}\n", "z".repeat(100 - 16));
        assert_eq!(exact.len(), 100);
        assert_eq!(read_all(exact.clone().into_bytes(), 100).await, exact);
    }

    #[tokio::test]
    async fn an_id_seen_before_the_limit_is_answered_before_the_line_ends() {
        let (mut server, client) = tokio::io::duplex(1024);
        let mut lines = tokio::io::BufReader::new(CappedLines::new(client, 100));
        use tokio::io::{AsyncBufReadExt, AsyncWriteExt};
        server
            .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":4,\"result\":\"")
            .await
            .unwrap();
        server.write_all(&[b'a'; 300]).await.unwrap();
        // No end of line yet: the answer comes anyway.
        let mut line = String::new();
        lines.read_line(&mut line).await.unwrap();
        let error: Value = serde_json::from_str(&line).unwrap();
        assert_eq!(error["id"], json!(4));
        assert_eq!(
            error["error"]["message"],
            json!("its answer is over the limit of 100 bytes")
        );
        // The rest of the long line is skipped; the next line passes.
        server.write_all(b"\"}\n{\"id\":5}\n").await.unwrap();
        line.clear();
        lines.read_line(&mut line).await.unwrap();
        assert_eq!(line, "{\"id\":5}\n");
    }

    /// A reader that hands `data` over in pieces of the given sizes (then the rest at once).
    struct Pieces {
        data: Vec<u8>,
        at: usize,
        sizes: Vec<usize>,
    }

    impl AsyncRead for Pieces {
        fn poll_read(mut self: Pin<&mut Self>, _: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
            let this = &mut *self;
            let size = if this.sizes.is_empty() {
                usize::MAX
            } else {
                this.sizes.remove(0).max(1)
            };
            let end = this.data.len().min(this.at + size.min(buf.remaining()));
            buf.put_slice(&this.data[this.at..end]);
            this.at = end;
            Poll::Ready(Ok(()))
        }
    }

    fn pieced(data: Vec<u8>, sizes: Vec<usize>, limit: usize) -> Vec<u8> {
        let mut output = Vec::new();
        let reader = CappedLines::new(Pieces { data, at: 0, sizes }, limit);
        futures::executor::block_on(tokio::io::BufReader::new(reader).read_to_end(&mut output)).unwrap();
        output
    }

    proptest::proptest! {
        /// However the server's output is cut into reads: every line within the limit passes
        /// whole and in order, and every longer one with an id is replaced by one error for
        /// that id (its size named when the end was seen with it), never by a part of itself.
        #[test]
        fn lines_pass_or_are_answered_wherever_reads_are_cut(
            lines in proptest::collection::vec((0u32..1000, 0usize..200, proptest::bool::ANY), 0..12),
            sizes in proptest::collection::vec(1usize..90, 0..40),
        ) {
            let limit = 100;
            let mut input = Vec::new();
            let mut expected = Vec::new();
            for (id, len, id_first) in &lines {
                let payload = "x".repeat(*len);
                let line = if *id_first {
                    format!("{{\"jsonrpc\":\"2.0\",\"id\":{id},\"result\":\"{payload}\"}}\n")
                } else {
                    format!("{{\"result\":\"{payload}\",\"jsonrpc\":\"2.0\",\"id\":{id}}}\n")
                };
                expected.push((*id, line.len(), (line.len() <= limit).then(|| line.clone())));
                input.extend_from_slice(line.as_bytes());
            }
            let output = String::from_utf8(pieced(input, sizes, limit)).unwrap();
            let got: Vec<&str> = output.lines().collect();
            proptest::prop_assert_eq!(got.len(), expected.len());
            for (line, (id, bytes, whole)) in got.iter().zip(&expected) {
                match whole {
                    Some(whole) => proptest::prop_assert_eq!(*line, whole.trim_end()),
                    None => {
                        let error: Value = serde_json::from_str(line).unwrap();
                        proptest::prop_assert_eq!(&error["id"], &json!(id));
                        let message = error["error"]["message"].as_str().unwrap().to_string();
                        let sized = format!("its answer is {bytes} bytes, over the limit of {limit} bytes");
                        let unsized_ = format!("its answer is over the limit of {limit} bytes");
                        proptest::prop_assert!(message == sized || message == unsized_, "{}", message);
                    }
                }
            }
        }

        /// Arbitrary bytes never panic, and nothing handed on is a line over the limit.
        #[test]
        fn any_bytes_are_read_without_a_line_over_the_limit(
            data in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..600),
            sizes in proptest::collection::vec(1usize..90, 0..20),
        ) {
            let output = pieced(data, sizes, 64);
            for line in output.split_inclusive(|byte| *byte == b'\n') {
                let ours = serde_json::from_slice::<Value>(line)
                    .is_ok_and(|error| error["error"]["data"][LIMIT_MARK] == json!(64));
                proptest::prop_assert!(line.len() <= 64 || ours, "{} bytes", line.len());
            }
        }
    }

    #[tokio::test]
    async fn a_line_cut_by_the_end_is_not_passed_on() {
        assert_eq!(read_all(b"{\"id\":1}\n{\"id\":2".to_vec(), 100).await, "{\"id\":1}\n");
    }
}
