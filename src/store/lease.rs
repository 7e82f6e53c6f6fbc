//! Leases (SPEC §8.3): one process drives a session at a time. A run claims the session, renews
//! the claim while it runs and releases it when it settles; a dead process's claim expires. Every
//! claim takes a fencing token one greater than the last, and every write of run state carries its
//! lease: a write whose lease is no longer live (released, expired or claimed again) is refused,
//! so a stalled process that lost the session cannot overwrite what its successor wrote.
//!
//! Decisions and deferred publications are not fenced: any process may make them, and each is a
//! conditional update with one winner.

/// A live claim on a session, as its holder keeps it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lease {
    pub session_id: String,
    /// Grows by one with every claim of the session, never reused.
    pub token: i64,
}

/// What a claim got.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Claim {
    Granted(Lease),
    /// Another holder's lease is live: who, and how long until it expires unless renewed.
    Held {
        owner: String,
        remaining_ms: i64,
    },
}

/// A session's last claim, as any process reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LeaseState {
    pub token: i64,
    /// Neither released nor expired: its holder may be writing now.
    pub live: bool,
}

/// A TTL as whole milliseconds for the SQL back ends (at least 1).
pub(super) fn ttl_ms(ttl: std::time::Duration) -> i64 {
    i64::try_from(ttl.as_millis()).unwrap_or(i64::MAX).max(1)
}
