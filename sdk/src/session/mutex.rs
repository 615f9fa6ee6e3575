//! [`lock`]: a std mutex locked ignoring poisoning, the one way the session's
//! parts (registry, listeners, RNG) take their short-held locks.

use std::sync::{Mutex, MutexGuard};

/// Locks a std mutex, ignoring poisoning (listeners run outside our locks, so
/// a poisoned guard only means a panic elsewhere; the data is still consistent).
pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}
