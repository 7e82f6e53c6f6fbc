//! A stream's output in bounded memory. A foreground command keeps its first and its last
//! bytes and counts the rest (enough for any truncation tier to be exact); a background shell
//! keeps its most recent bytes until TaskOutput takes them.

use tokio::io::{AsyncRead, AsyncReadExt};

use super::truncate::Text;

/// A foreground stream's first bytes kept, and its last. 128 KiB hold at least 32 768
/// characters, more than the largest tier keeps from either end.
const HEAD_BYTES: usize = 128 * 1024;
const TAIL_BYTES: usize = 128 * 1024;
const READ_CHUNK: usize = 64 * 1024;

/// The most recent `limit` bytes of a stream, and how many before them were dropped.
pub(super) struct Recent {
    /// Up to twice `limit`, so dropping the front is one move per `limit` bytes.
    bytes: Vec<u8>,
    limit: usize,
    dropped: u64,
}

impl Recent {
    pub fn new(limit: usize) -> Recent {
        Recent {
            bytes: Vec::new(),
            limit,
            dropped: 0,
        }
    }

    pub fn push(&mut self, chunk: &[u8]) {
        if chunk.len() >= self.limit {
            self.dropped += (self.bytes.len() + chunk.len() - self.limit) as u64;
            self.bytes.clear();
            self.bytes.extend_from_slice(&chunk[chunk.len() - self.limit..]);
            return;
        }
        if self.bytes.len() + chunk.len() > 2 * self.limit {
            let excess = self.bytes.len() + chunk.len() - self.limit;
            self.bytes.drain(..excess);
            self.dropped += excess as u64;
        }
        self.bytes.extend_from_slice(chunk);
    }

    /// The bytes kept (the last `limit`) and how many were dropped before them.
    fn into_parts(mut self) -> (Vec<u8>, u64) {
        let excess = self.bytes.len().saturating_sub(self.limit);
        self.bytes.drain(..excess);
        (self.bytes, self.dropped + excess as u64)
    }

    /// Takes the text held, and the count of bytes dropped since the last take. With
    /// `more_to_come`, a character cut in the middle by the pipe stays for the next take.
    pub fn take(&mut self, more_to_come: bool) -> (String, u64) {
        let excess = self.bytes.len().saturating_sub(self.limit);
        let mut dropped = self.dropped + excess as u64;
        let mut start = excess;
        if dropped > 0 {
            let skipped = continuation_prefix(&self.bytes[start..]);
            start += skipped;
            dropped += skipped as u64;
        }
        let end = if more_to_come {
            self.bytes.len() - incomplete_suffix(&self.bytes[start..])
        } else {
            self.bytes.len()
        };
        let text = String::from_utf8_lossy(&self.bytes[start..end]).into_owned();
        self.bytes.drain(..end);
        self.dropped = 0;
        (text, dropped)
    }
}

/// A foreground stream: its first bytes, its last, and counts over all of it.
pub(super) struct Capture {
    head: Vec<u8>,
    tail: Recent,
    newlines: u64,
    /// UTF-8 characters (bytes that start one).
    chars: u64,
}

impl Capture {
    pub fn new() -> Capture {
        Capture {
            head: Vec::new(),
            tail: Recent::new(TAIL_BYTES),
            newlines: 0,
            chars: 0,
        }
    }

    pub fn push(&mut self, chunk: &[u8]) {
        self.newlines += memchr::memchr_iter(b'\n', chunk).count() as u64;
        self.chars += chunk.iter().filter(|byte| !is_continuation(**byte)).count() as u64;
        let room = (HEAD_BYTES - self.head.len()).min(chunk.len());
        self.head.extend_from_slice(&chunk[..room]);
        if room < chunk.len() {
            self.tail.push(&chunk[room..]);
        }
    }

    /// The output trimmed, as the truncation tiers see it.
    pub fn finish(self) -> Text {
        let (tail, dropped) = self.tail.into_parts();
        if dropped == 0 {
            let mut whole = self.head;
            whole.extend_from_slice(&tail);
            return Text::Whole(String::from_utf8_lossy(&whole).trim().to_string());
        }
        let head_end = self.head.len() - incomplete_suffix(&self.head);
        let head = String::from_utf8_lossy(&self.head[..head_end]).into_owned();
        let tail = String::from_utf8_lossy(&tail[continuation_prefix(&tail)..]).into_owned();
        let (head_kept, tail_kept) = (head.trim_start(), tail.trim_end());
        let (head_cut, tail_cut) = (&head[..head.len() - head_kept.len()], &tail[tail_kept.len()..]);
        let trimmed_newlines = head_cut.matches('\n').count() + tail_cut.matches('\n').count();
        let trimmed_chars = head_cut.chars().count() + tail_cut.chars().count();
        Text::Ends {
            head: head_kept.to_string(),
            tail: tail_kept.to_string(),
            lines: (self.newlines as usize).saturating_sub(trimmed_newlines) + 1,
            chars: (self.chars as usize).saturating_sub(trimmed_chars),
        }
    }
}

/// Reads a stream to its end into a [`Capture`]; a read error ends it like an end of file.
pub(super) async fn capture(stream: Option<impl AsyncRead + Unpin>) -> Capture {
    let mut capture = Capture::new();
    let Some(mut stream) = stream else {
        return capture;
    };
    let mut buffer = vec![0; READ_CHUNK];
    loop {
        match stream.read(&mut buffer).await {
            Ok(0) => break,
            Ok(read) => capture.push(&buffer[..read]),
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    capture
}

/// Reads a stream to its end, handing each chunk to `sink`.
pub(super) async fn pump(stream: Option<impl AsyncRead + Unpin>, mut sink: impl FnMut(&[u8])) {
    let Some(mut stream) = stream else {
        return;
    };
    let mut buffer = vec![0; READ_CHUNK];
    loop {
        match stream.read(&mut buffer).await {
            Ok(0) => break,
            Ok(read) => sink(&buffer[..read]),
            Err(error) if error.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
}

fn is_continuation(byte: u8) -> bool {
    byte & 0xC0 == 0x80
}

/// The bytes at the start that continue a character begun before them (at most 3).
fn continuation_prefix(bytes: &[u8]) -> usize {
    bytes.iter().take(3).take_while(|byte| is_continuation(**byte)).count()
}

/// The bytes at the end that begin a character not complete yet.
fn incomplete_suffix(bytes: &[u8]) -> usize {
    for back in 1..=bytes.len().min(3) {
        let byte = bytes[bytes.len() - back];
        if is_continuation(byte) {
            continue;
        }
        let needed = match byte {
            0xF0.. => 4,
            0xE0.. => 3,
            0xC0.. => 2,
            _ => 1,
        };
        return if needed > back { back } else { 0 };
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recent_keeps_the_last_bytes_and_counts_the_rest() {
        let mut recent = Recent::new(4);
        recent.push(b"abc");
        recent.push(b"def");
        recent.push(b"g");
        assert_eq!(recent.take(false), ("defg".to_string(), 3));
        assert_eq!(recent.take(false), (String::new(), 0));
        recent.push(b"0123456789");
        assert_eq!(recent.take(false), ("6789".to_string(), 6));
        assert_eq!(recent.take(false), (String::new(), 0));
    }

    #[test]
    fn a_character_split_between_reads_waits_for_its_end() {
        let mut recent = Recent::new(64);
        let euro = "€".as_bytes();
        recent.push(b"a");
        recent.push(&euro[..2]);
        assert_eq!(recent.take(true), ("a".to_string(), 0));
        recent.push(&euro[2..]);
        assert_eq!(recent.take(true), ("€".to_string(), 0));
        // Dropping the front mid-character skips what is left of it.
        let mut recent = Recent::new(3);
        recent.push("x€€".as_bytes());
        assert_eq!(recent.take(false), ("€".to_string(), 4));
    }

    #[test]
    fn a_short_output_is_kept_whole() {
        let mut capture = Capture::new();
        capture.push(b"  one\n");
        capture.push(b"two \xff\n\n");
        let Text::Whole(text) = capture.finish() else {
            panic!("a short output is whole");
        };
        assert_eq!(text, "one\ntwo \u{FFFD}");
    }

    #[test]
    fn a_long_output_keeps_its_ends_and_counts() {
        let mut capture = Capture::new();
        capture.push(b"\n\n");
        let line = "é".repeat(99) + "\n";
        for _ in 0..10_000 {
            capture.push(line.as_bytes());
        }
        let Text::Ends {
            head,
            tail,
            lines,
            chars,
        } = capture.finish()
        else {
            panic!("two megabytes are not kept whole");
        };
        assert_eq!(lines, 10_000);
        assert_eq!(chars, 10_000 * 100 - 1);
        assert!(head.starts_with("éé") && !head.contains('\u{FFFD}'));
        assert!(tail.ends_with("éé") && !tail.contains('\u{FFFD}'));
        assert!(head.len() <= HEAD_BYTES && tail.len() <= TAIL_BYTES);
    }
}
