//! The one way a `Mutex` of the crate is locked.

use std::sync::{Mutex, MutexGuard};

/// Locks `mutex`, poisoned or not. Every mutex of the crate guards plain data whose updates are
/// single assignments: a panic elsewhere while it was held leaves nothing half-written, so the
/// data goes on being served rather than every later caller panicking too.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}
