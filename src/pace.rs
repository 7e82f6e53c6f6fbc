//! How long the core may keep calling user code before the host's event loop gets a turn.
//!
//! A run is polled on the JS thread, and a tool, hook or scripted model that answers
//! synchronously is answered within the same poll: a run (or a generator tool) whose every step
//! is synchronous would never give the event loop back, so no timer, abort or `toolTimeoutMs`
//! could fire, and nothing it made could be released. The run therefore gives the loop a turn
//! ([`crate::host::Host::next_turn`]) between steps once it has held the loop for a slice.
//!
//! A time slice rather than a count of steps: steps cost anything from a microsecond to
//! seconds, and the clock is read for about 20 ns a step. A turn of the loop costs tens of
//! microseconds, so one per slice is well under 1% of a fully synchronous run.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use crate::host::Host;

/// How long a run may hold the event loop before it gives the loop a turn: timers, aborts and
/// `toolTimeoutMs` are seen within about this, and a turn per slice costs under 1%.
pub const SLICE: Duration = Duration::from_millis(10);

/// When the host last had a turn, as far as the core knows; shared by a session's runs.
#[derive(Debug)]
pub struct Pace {
    slice: Duration,
    since: Mutex<Instant>,
}

impl Default for Pace {
    fn default() -> Self {
        Pace::new(SLICE)
    }
}

impl Pace {
    pub fn new(slice: Duration) -> Self {
        Pace {
            slice,
            since: Mutex::new(Instant::now()),
        }
    }

    fn since(&self) -> std::sync::MutexGuard<'_, Instant> {
        self.since.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The slice is spent at `now`: the host should get a turn before the next step.
    pub fn is_due(&self, now: Instant) -> bool {
        now.saturating_duration_since(*self.since()) >= self.slice
    }

    /// The host just had a turn: a new slice starts at `now`.
    pub fn restart(&self, now: Instant) {
        *self.since() = now;
    }

    /// Gives the host's event loop a turn when the slice is spent; otherwise returns at once.
    pub async fn step(&self, host: &dyn Host) {
        if !self.is_due(Instant::now()) {
            return;
        }
        host.next_turn().await;
        self.restart(Instant::now());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_turn_is_due_once_the_slice_is_spent_and_a_turn_starts_a_new_slice() {
        let pace = Pace::new(Duration::from_millis(10));
        let start = *pace.since();
        assert!(!pace.is_due(start));
        assert!(!pace.is_due(start + Duration::from_millis(9)));
        assert!(pace.is_due(start + Duration::from_millis(10)));
        pace.restart(start + Duration::from_millis(10));
        assert!(!pace.is_due(start + Duration::from_millis(19)));
        assert!(pace.is_due(start + Duration::from_millis(25)));
        // A clock read before the slice began is not a spent slice.
        assert!(!pace.is_due(start));
    }
}
