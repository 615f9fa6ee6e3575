//! The accumulators behind [`Metrics`](super::Metrics): a histogram with its
//! exact sum ([`Recorder`]), the atomic cell behind one margin summary
//! ([`MarginCell`]) and the counters of a
//! [`ClientStats`](super::ClientStats), as relaxed atomics.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use hdrhistogram::Histogram;

use super::stats::MarginSummary;

/// Largest value the histograms track, µs (one hour); larger values saturate.
pub(super) const MAX_US: u64 = 3_600_000_000;

/// Atomic accumulator behind one [`MarginSummary`].
pub(super) struct MarginCell {
    count: AtomicU64,
    sum_ppm: AtomicU64,
    /// `u64::MAX` while empty.
    min_ppm: AtomicU64,
    max_ppm: AtomicU64,
}

impl MarginCell {
    /// An empty cell.
    pub(super) fn new() -> Self {
        MarginCell {
            count: AtomicU64::new(0),
            sum_ppm: AtomicU64::new(0),
            min_ppm: AtomicU64::new(u64::MAX),
            max_ppm: AtomicU64::new(0),
        }
    }

    /// Adds one margin applied, ppm.
    pub(super) fn record(&self, ppm: u64) {
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum_ppm.fetch_add(ppm, Ordering::Relaxed);
        self.min_ppm.fetch_min(ppm, Ordering::Relaxed);
        self.max_ppm.fetch_max(ppm, Ordering::Relaxed);
    }

    /// What the cell holds now.
    pub(super) fn summary(&self) -> MarginSummary {
        let count = self.count.load(Ordering::Relaxed);
        MarginSummary {
            count,
            sum_ppm: self.sum_ppm.load(Ordering::Relaxed),
            min_ppm: if count == 0 {
                0
            } else {
                self.min_ppm.load(Ordering::Relaxed)
            },
            max_ppm: self.max_ppm.load(Ordering::Relaxed),
        }
    }

    /// Empties it.
    pub(super) fn reset(&self) {
        self.count.store(0, Ordering::Relaxed);
        self.sum_ppm.store(0, Ordering::Relaxed);
        self.min_ppm.store(u64::MAX, Ordering::Relaxed);
        self.max_ppm.store(0, Ordering::Relaxed);
    }
}

/// One histogram (µs) and the exact sum of what it holds (the Prometheus `_sum`).
pub(super) struct Recorder {
    /// The samples; a std mutex held only to record or copy.
    histogram: Mutex<Histogram<u64>>,
    /// Exact sum of the recorded values, µs.
    pub(super) sum_us: AtomicU64,
}

impl Recorder {
    /// An empty histogram (1 µs to [`MAX_US`], 3 significant digits).
    pub(super) fn new() -> Self {
        Recorder {
            histogram: Mutex::new(
                Histogram::new_with_bounds(1, MAX_US, 3)
                    .expect("static histogram bounds are valid"),
            ),
            sum_us: AtomicU64::new(0),
        }
    }

    /// A panic while recording cannot leave the histogram half-updated in a
    /// way that matters; keep measuring.
    fn lock(&self) -> MutexGuard<'_, Histogram<u64>> {
        self.histogram.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Records every value of `values` (µs, at least `floor_us`) under one
    /// lock, and the same values (in seconds) into `exported`, the
    /// Prometheus histogram of the same name, so both count alike.
    pub(super) fn record_all(
        &self,
        floor_us: u64,
        values: impl IntoIterator<Item = Duration>,
        exported: &prometheus_client::metrics::histogram::Histogram,
    ) {
        let mut h = self.lock();
        let mut sum = 0u64;
        for d in values {
            let us = u64::try_from(d.as_micros())
                .unwrap_or(u64::MAX)
                .clamp(floor_us, MAX_US);
            h.saturating_record(us);
            exported.observe(us as f64 * 1e-6);
            sum = sum.saturating_add(us);
        }
        drop(h);
        self.sum_us.fetch_add(sum, Ordering::Relaxed);
    }

    /// A copy of the histogram.
    pub(super) fn snapshot(&self) -> Histogram<u64> {
        self.lock().clone()
    }

    /// Empties it.
    pub(super) fn reset(&self) {
        let mut h = self.lock();
        h.reset();
        self.sum_us.store(0, Ordering::Relaxed);
    }
}

/// The counters of [`ClientStats`](super::ClientStats), as atomics.
#[derive(Default)]
pub(super) struct Counters {
    pub(super) heartbeats: AtomicU64,
    pub(super) renewals: AtomicU64,
    pub(super) renew_attempts: AtomicU64,
    pub(super) renew_refusals: AtomicU64,
    pub(super) renew_timeouts: AtomicU64,
    pub(super) renew_errors: AtomicU64,
    pub(super) hb_attempts: AtomicU64,
    pub(super) hb_replies: AtomicU64,
    pub(super) hb_timeouts: AtomicU64,
    pub(super) hb_errors: AtomicU64,
    pub(super) hb_ticks: AtomicU64,
    pub(super) hb_ticks_missed: AtomicU64,
    pub(super) lost_expired: AtomicU64,
    pub(super) lost_unknown: AtomicU64,
    pub(super) lost_deadline: AtomicU64,
    pub(super) gaps_over_window: AtomicU64,
    pub(super) handles_lost: AtomicU64,
    pub(super) abandoned: AtomicU64,
    pub(super) acquires_granted: AtomicU64,
    pub(super) acquires_failed: AtomicU64,
}

impl Counters {
    /// Every counter, to zero them together.
    pub(super) fn all(&self) -> [&AtomicU64; 20] {
        [
            &self.heartbeats,
            &self.renewals,
            &self.renew_attempts,
            &self.renew_refusals,
            &self.renew_timeouts,
            &self.renew_errors,
            &self.hb_attempts,
            &self.hb_replies,
            &self.hb_timeouts,
            &self.hb_errors,
            &self.hb_ticks,
            &self.hb_ticks_missed,
            &self.lost_expired,
            &self.lost_unknown,
            &self.lost_deadline,
            &self.gaps_over_window,
            &self.handles_lost,
            &self.abandoned,
            &self.acquires_granted,
            &self.acquires_failed,
        ]
    }
}

/// Adds one to a relaxed counter.
pub(super) fn bump(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Ordering::Relaxed);
}
