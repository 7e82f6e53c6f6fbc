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

    /// Gives the host's event loop a turn when the slice is spent; otherwise returns at once. A
    /// slice is spent when the session has held the loop that long since its own last turn and,
    /// where the host can tell, the loop has been busy that long since it last had one: a run
    /// that waited for a model's answer was woken on a turn of its own.
    pub async fn step(&self, host: &dyn Host) {
        let now = Instant::now();
        if !self.is_due(now) {
            return;
        }
        if let Some(held) = host.loop_held_for().filter(|held| *held < self.slice) {
            self.restart(now.checked_sub(held).unwrap_or(now));
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

    /// A host whose loop has been busy for `held` (or cannot say), counting the turns it gives.
    struct Loop {
        held: Option<Duration>,
        turns: std::sync::atomic::AtomicUsize,
    }

    impl Host for Loop {
        fn call(&self, _call: crate::host::HostCall) -> crate::host::HostFuture {
            unreachable!("the pace calls no function")
        }

        fn abort(
            &self,
            _scope: crate::host::ScopeId,
            _dispatch: crate::host::DispatchId,
            _reason: crate::host::AbortReason,
        ) -> crate::host::AbortFuture {
            Box::pin(async {})
        }

        fn next_turn(&self) -> crate::host::AbortFuture {
            self.turns.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            Box::pin(async {})
        }

        fn loop_held_for(&self) -> Option<Duration> {
            self.held
        }
    }

    fn turns_given(slice_spent_by_session: bool, held: Option<Duration>) -> usize {
        let pace = Pace::new(Duration::from_millis(10));
        if slice_spent_by_session {
            pace.restart(Instant::now() - Duration::from_millis(50));
        }
        let host = Loop {
            held,
            turns: Default::default(),
        };
        futures::executor::block_on(pace.step(&host));
        host.turns.load(std::sync::atomic::Ordering::SeqCst)
    }

    #[test]
    fn a_session_past_its_slice_gives_a_turn_unless_the_loop_itself_just_had_one() {
        // The host cannot tell: the session's own count decides.
        assert_eq!(turns_given(true, None), 1);
        assert_eq!(turns_given(false, None), 0);
        // The run waited (for a model's answer) and was woken 2 ms into a fresh turn: none owed.
        assert_eq!(turns_given(true, Some(Duration::from_millis(2))), 0);
        // The loop has been busy for a whole slice, with this session's runs or others': one.
        assert_eq!(turns_given(true, Some(Duration::from_millis(10))), 1);
        // Within the session's own slice the loop is not asked.
        assert_eq!(turns_given(false, Some(Duration::from_secs(1))), 0);
    }

    #[test]
    fn the_slice_counts_from_when_the_loop_last_had_a_turn() {
        let pace = Pace::new(Duration::from_millis(10));
        pace.restart(Instant::now() - Duration::from_millis(50));
        let host = Loop {
            held: Some(Duration::from_millis(4)),
            turns: Default::default(),
        };
        futures::executor::block_on(pace.step(&host));
        let since = *pace.since();
        assert!(!pace.is_due(since + Duration::from_millis(9)));
        assert!(Instant::now().saturating_duration_since(since) >= Duration::from_millis(4));
    }
}
