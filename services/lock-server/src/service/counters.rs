//! [`Counters`]: the C5 counters a serving lock-server keeps, bumped by the
//! operations and read by `/metrics` (the gauges are computed at scrape time
//! from the table).

use std::sync::atomic::{AtomicU64, Ordering};

/// The C5 counters the server keeps (gauges are computed at scrape time).
#[derive(Debug, Default)]
pub struct Counters {
    /// `lock.grants`: new grants (L4 with a fresh token).
    pub grants: AtomicU64,
    /// Re-acquires by the holding session (L4 answered with its current grant).
    pub reacquires: AtomicU64,
    /// `lock.renewals`
    pub renewals: AtomicU64,
    /// `lock.releases` (L6, L3 and L8)
    pub releases: AtomicU64,
    /// `lock.expired{kind="session"}`
    pub expired_sessions: AtomicU64,
    /// `lock.expired{kind="lease"}`
    pub expired_leases: AtomicU64,
    /// Heartbeats answered (not in C5; useful next to the bench's count).
    pub heartbeats: AtomicU64,
}

/// Adds `n` to a relaxed counter.
pub(super) fn bump(counter: &AtomicU64, n: usize) {
    counter.fetch_add(n as u64, Ordering::Relaxed);
}
