//! The files Read in a session and what each held then. Write and Edit of an existing file
//! compare the file as it is now with that record: its size and a SHA-256 of its bytes. The
//! modification time alone is not enough, as the kernel stamps it with a coarse clock (two
//! writes a few milliseconds apart can carry the same time).

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

use sha2::{Digest, Sha256};

use super::super::{iso_time, Answer};

/// What identifies a file's content at one moment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Fingerprint {
    pub len: u64,
    pub modified: Option<SystemTime>,
    pub digest: [u8; 32],
}

impl Fingerprint {
    pub fn of_bytes(bytes: &[u8], modified: Option<SystemTime>) -> Fingerprint {
        Fingerprint {
            len: bytes.len() as u64,
            modified,
            digest: Sha256::digest(bytes).into(),
        }
    }

    /// Reads the file through, in pieces, so a large file costs no more memory than a small one.
    pub fn of_file(path: &Path) -> std::io::Result<Fingerprint> {
        let mut file = std::fs::File::open(path)?;
        let modified = file.metadata()?.modified().ok();
        let mut hasher = Sha256::new();
        let mut buffer = vec![0; 64 * 1024];
        let mut len = 0u64;
        loop {
            let read = file.read(&mut buffer)?;
            if read == 0 {
                break;
            }
            hasher.update(&buffer[..read]);
            len += read as u64;
        }
        Ok(Fingerprint {
            len,
            modified,
            digest: hasher.finalize().into(),
        })
    }

    /// Whether `self` (the file now) holds other bytes than `then` (the file when read); the
    /// answer says what differs.
    pub fn changed_since(&self, then: &Fingerprint) -> Option<String> {
        let modified = self
            .modified
            .map(|time| format!(", last modified {}", iso_time(time)))
            .unwrap_or_default();
        if self.len != then.len {
            Some(format!(
                "the file is now {} bytes ({} when read){modified}.",
                self.len, then.len
            ))
        } else if self.digest != then.digest {
            Some(format!(
                "the file's content differs from the read (same size, {} bytes){modified}.",
                self.len
            ))
        } else {
            None
        }
    }
}

/// The files Read in this session, with what they were when read (Write and Edit of an
/// existing file need one, unchanged since). Keyed by canonical path.
#[derive(Default)]
pub(crate) struct ReadFiles {
    files: Mutex<HashMap<PathBuf, Fingerprint>>,
}

impl ReadFiles {
    pub fn record(&self, path: PathBuf, fingerprint: Fingerprint) {
        self.files
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .insert(path, fingerprint);
    }

    pub fn get(&self, path: &Path) -> Option<Fingerprint> {
        self.files
            .lock()
            .unwrap_or_else(|poison| poison.into_inner())
            .get(path)
            .cloned()
    }
}

/// The check before changing an existing file: `then` is the session's record of it, `now` the
/// file as it is; `action` is `writing` or `editing`.
pub(crate) fn guard(then: Option<&Fingerprint>, now: &Fingerprint, action: &str) -> Result<(), Answer> {
    let Some(then) = then else {
        return Err(Answer::error(format!(
            "You must use the Read tool before {action} this existing file."
        )));
    };
    match now.changed_since(then) {
        None => Ok(()),
        Some(details) => Err(Answer::error(format!(
            "The file changed since it was read. Read it again before {action}.\n\nDetails: {details}"
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_guard_names_what_changed() {
        let time = SystemTime::UNIX_EPOCH;
        let then = Fingerprint::of_bytes(b"hello", Some(time));
        assert_eq!(
            guard(None, &then, "writing").unwrap_err().text,
            "You must use the Read tool before writing this existing file."
        );
        assert!(guard(Some(&then), &Fingerprint::of_bytes(b"hello", None), "editing").is_ok());
        assert_eq!(
            guard(Some(&then), &Fingerprint::of_bytes(b"hello!", Some(time)), "editing")
                .unwrap_err()
                .text,
            "The file changed since it was read. Read it again before editing.\n\nDetails: the file is now \
             6 bytes (5 when read), last modified 1970-01-01T00:00:00.000Z."
        );
        assert_eq!(
            guard(Some(&then), &Fingerprint::of_bytes(b"jello", None), "writing")
                .unwrap_err()
                .text,
            "The file changed since it was read. Read it again before writing.\n\nDetails: the file's content \
             differs from the read (same size, 5 bytes)."
        );
    }

    #[test]
    fn a_file_is_fingerprinted_by_its_bytes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("f");
        let bytes: Vec<u8> = (0..200_000u32).map(|n| n as u8).collect();
        std::fs::write(&path, &bytes).unwrap();
        let file = Fingerprint::of_file(&path).unwrap();
        assert_eq!(file.len, 200_000);
        assert_eq!(file.digest, Fingerprint::of_bytes(&bytes, None).digest);
    }
}
