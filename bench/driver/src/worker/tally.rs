//! What a cell's workers share and count: the [`WorkQueue`] of payouts still
//! to pay, and the [`Tally`] of client-side events (the events only a client
//! can see; the ledger counts the rest), with its serialisable
//! [`TallySnapshot`] that a worker process reports.

use std::collections::VecDeque;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

pub use bench_core::tally::{Belief, TallySnapshot};

/// The payouts still to pay: fresh numbers in order, abandoned ones first.
#[derive(Debug)]
pub struct WorkQueue {
    /// The next fresh payout number (1-based, as R7 numbers them).
    next: AtomicU64,
    /// One past the last payout number.
    end: u64,
    /// Abandoned payouts, retried before fresh ones.
    retry: Mutex<VecDeque<u64>>,
    /// The payout numbers in the order to take them (`None`: `next` itself).
    order: Option<Vec<u64>>,
}

impl WorkQueue {
    /// Payouts numbered `first..first + count`.
    pub fn new(first: u64, count: u64) -> Self {
        WorkQueue {
            next: AtomicU64::new(first),
            end: first + count,
            retry: Mutex::new(VecDeque::new()),
            order: None,
        }
    }

    /// Payouts `first..first + count` in an order shuffled within blocks of
    /// `block` (seeded): workers that each take a whole backlog this way
    /// stay in the same stretch of it, so they contend for the same payouts
    /// and take over each other's abandoned ones, and each leads on some
    /// (the chaos experiment's worker processes).
    pub fn block_shuffled(first: u64, count: u64, block: u64, seed: u64) -> Self {
        use rand::SeedableRng as _;
        use rand::seq::SliceRandom as _;
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let mut order: Vec<u64> = (first..first + count).collect();
        for chunk in order.chunks_mut(block.max(1) as usize) {
            chunk.shuffle(&mut rng);
        }
        WorkQueue {
            next: AtomicU64::new(0),
            end: count,
            retry: Mutex::new(VecDeque::new()),
            order: Some(order),
        }
    }

    /// The next payout to work on, or `None` when the backlog is empty.
    pub fn take(&self) -> Option<u64> {
        if let Some(n) = self
            .retry
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop_front()
        {
            return Some(n);
        }
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        if n >= self.end {
            return None;
        }
        match &self.order {
            Some(order) => order.get(n as usize).copied(),
            None => Some(n),
        }
    }

    /// Puts an abandoned payout back, to be retried under a higher token.
    pub fn give_back(&self, n: u64) {
        self.retry
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push_back(n);
    }
}

/// What the workers did, counted on the client side. The bench reports paid,
/// fenced and duplicate counts from the rail's ledger, never from here; these
/// are the events only the client can see.
#[derive(Debug, Default)]
pub struct Tally {
    /// Payout attempts started (one per payout taken from the queue).
    pub attempts: AtomicU64,
    /// Submissions the rail answered 200.
    pub paid_replies: AtomicU64,
    /// `ensure_time_for` refused: not enough lease left for the rail hop.
    pub abandoned_insufficient_lease: AtomicU64,
    /// The lock was already lost at the check before the irreversible step.
    pub abandoned_lost: AtomicU64,
    /// D4 refused before a step after the first of a multi-step payout
    /// (counted also as one of the two abandonments above).
    pub abandoned_mid_payout: AtomicU64,
    /// Acquire gave up within its budget (key held or in grace).
    pub acquire_failed: AtomicU64,
    /// Handles the SDK reported lost (listener calls).
    pub lock_lost: AtomicU64,
    /// Sessions that had to be reopened after being lost.
    pub sessions_reopened: AtomicU64,
    /// Rail refusals the client saw with FENCED_OUT (the ledger's count is authoritative).
    pub fenced_replies: AtomicU64,
    /// Transport errors or timeouts on the rail.
    pub rail_transport_errors: AtomicU64,
    /// Sum over grants of the usable lease fraction at grant time, in ppm.
    pub usable_ppm_sum: AtomicU64,
    /// Grants counted in `usable_ppm_sum`.
    pub grants: AtomicU64,
    /// Every submit made after a passed client check (never reset: the
    /// window's fence-outs are joined on it, whenever the belief was formed).
    pub believed_held: Mutex<Vec<Belief>>,
}

impl Tally {
    pub(crate) fn bump(a: &AtomicU64) {
        a.fetch_add(1, Ordering::Relaxed);
    }

    /// Zeroes every count (the warm-up ends); the beliefs are kept.
    pub fn reset_counts(&self) {
        for a in [
            &self.attempts,
            &self.paid_replies,
            &self.abandoned_insufficient_lease,
            &self.abandoned_lost,
            &self.abandoned_mid_payout,
            &self.acquire_failed,
            &self.lock_lost,
            &self.sessions_reopened,
            &self.fenced_replies,
            &self.rail_transport_errors,
            &self.usable_ppm_sum,
            &self.grants,
        ] {
            a.store(0, Ordering::Relaxed);
        }
    }

    pub(crate) fn believe(&self, payout_id: &str, token: u64) {
        self.believed_held
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((payout_id.to_owned(), token));
    }

    /// Mean over grants of (client-side lease left at grant) / lease.
    pub fn usable_lease_fraction(&self) -> f64 {
        let n = self.grants.load(Ordering::Relaxed);
        if n == 0 {
            return 0.0;
        }
        self.usable_ppm_sum.load(Ordering::Relaxed) as f64 / n as f64 / 1e6
    }
}

impl Tally {
    /// A plain copy of the counts ([`TallySnapshot`]).
    pub fn snapshot(&self) -> TallySnapshot {
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        TallySnapshot {
            attempts: g(&self.attempts),
            paid_replies: g(&self.paid_replies),
            abandoned_insufficient_lease: g(&self.abandoned_insufficient_lease),
            abandoned_lost: g(&self.abandoned_lost),
            abandoned_mid_payout: g(&self.abandoned_mid_payout),
            acquire_failed: g(&self.acquire_failed),
            lock_lost: g(&self.lock_lost),
            fenced_replies: g(&self.fenced_replies),
            rail_transport_errors: g(&self.rail_transport_errors),
            usable_lease_fraction: self.usable_lease_fraction(),
            believed_held: self
                .believed_held
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
        }
    }
}
