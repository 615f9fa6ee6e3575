//! The SDK's measurements (C5): the L2/L5 round-trip histogram
//! (`lock.heartbeat.rtt`), `lock.session.lost` by reason,
//! `lock.lease.abandoned`, and a few counters the bench reports. One
//! [`Metrics`] per client, shared by its sessions and their heartbeat tasks.

use std::fmt::Write as _;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use hdrhistogram::Histogram;

use crate::error::LostReason;
use crate::lease::RttSummary;

/// Largest RTT the histogram tracks, µs (one hour); larger values saturate.
const RTT_MAX_US: u64 = 3_600_000_000;

/// A point-in-time copy of the client's counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClientStats {
    /// L2 heartbeats answered 200.
    pub heartbeats: u64,
    /// L5 renewals answered 200.
    pub renewals: u64,
    /// Sessions lost because the server said 410 (`reason="expired"`).
    pub sessions_lost_expired: u64,
    /// Sessions lost because the server said 404 (`reason="unknown"`).
    pub sessions_lost_unknown: u64,
    /// Sessions lost because the client deadline passed (`reason="deadline"`).
    pub sessions_lost_deadline: u64,
    /// Handles reported lost to listeners (every reason, incl. session loss).
    pub handles_lost: u64,
    /// `ensure_time_for` refusals (`lock.lease.abandoned`).
    pub leases_abandoned: u64,
}

/// The client's shared measurements.
pub(crate) struct Metrics {
    /// RTT of every L2/L5 exchange that got a reply, µs, 3 significant digits.
    /// Behind a mutex held only to record or copy (never across an await).
    rtt: Mutex<Histogram<u64>>,
    /// Exact sum of the recorded RTTs, µs (the Prometheus `_sum`).
    rtt_sum_us: AtomicU64,
    // The counters below are plain relaxed atomics: each is read on its own
    // (stats, metrics text), never as a consistent set.
    /// L2 answered 200.
    heartbeats: AtomicU64,
    /// L5 answered 200.
    renewals: AtomicU64,
    /// `lock.session.lost{reason="expired"}`.
    lost_expired: AtomicU64,
    /// `lock.session.lost{reason="unknown"}`.
    lost_unknown: AtomicU64,
    /// `lock.session.lost{reason="deadline"}`.
    lost_deadline: AtomicU64,
    /// Handles reported to listeners as lost.
    handles_lost: AtomicU64,
    /// `lock.lease.abandoned`: ensure_time_for refusals.
    abandoned: AtomicU64,
}

impl Metrics {
    pub(crate) fn new() -> Self {
        Metrics {
            rtt: Mutex::new(empty_histogram()),
            rtt_sum_us: AtomicU64::new(0),
            heartbeats: AtomicU64::new(0),
            renewals: AtomicU64::new(0),
            lost_expired: AtomicU64::new(0),
            lost_unknown: AtomicU64::new(0),
            lost_deadline: AtomicU64::new(0),
            handles_lost: AtomicU64::new(0),
            abandoned: AtomicU64::new(0),
        }
    }

    /// Records one L2/L5 round trip (send to reply).
    pub(crate) fn record_rtt(&self, rtt: Duration) {
        let us = u64::try_from(rtt.as_micros())
            .unwrap_or(u64::MAX)
            .clamp(1, RTT_MAX_US);
        self.rtt_histogram_lock().saturating_record(us);
        self.rtt_sum_us.fetch_add(us, Ordering::Relaxed);
    }

    /// A copy of the RTT histogram (µs).
    pub(crate) fn rtt_snapshot(&self) -> Histogram<u64> {
        self.rtt_histogram_lock().clone()
    }

    /// Empties the RTT histogram (the bench does this per cell). This also puts
    /// an adaptive margin back into warm-up.
    pub(crate) fn reset_rtt(&self) {
        let mut h = self.rtt_histogram_lock();
        h.reset();
        self.rtt_sum_us.store(0, Ordering::Relaxed);
    }

    /// Sample count and p99 for the adaptive margin.
    pub(crate) fn rtt_summary(&self) -> RttSummary {
        let h = self.rtt_histogram_lock();
        RttSummary {
            samples: h.len(),
            p99_us: h.value_at_quantile(0.99),
        }
    }

    pub(crate) fn heartbeat_ok(&self) {
        self.heartbeats.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn renewal_ok(&self) {
        self.renewals.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn handle_lost(&self) {
        self.handles_lost.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn abandoned(&self) {
        self.abandoned.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a lost session under its C5 reason label.
    pub(crate) fn session_lost(&self, reason: LostReason) {
        let counter = match reason {
            LostReason::SessionExpired => &self.lost_expired,
            LostReason::SessionUnknown => &self.lost_unknown,
            LostReason::Deadline => &self.lost_deadline,
            _ => return,
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn stats(&self) -> ClientStats {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        ClientStats {
            heartbeats: get(&self.heartbeats),
            renewals: get(&self.renewals),
            sessions_lost_expired: get(&self.lost_expired),
            sessions_lost_unknown: get(&self.lost_unknown),
            sessions_lost_deadline: get(&self.lost_deadline),
            handles_lost: get(&self.handles_lost),
            leases_abandoned: get(&self.abandoned),
        }
    }

    /// The Prometheus text exposition of the C5 SDK metrics.
    pub(crate) fn prometheus_text(&self) -> String {
        let h = self.rtt_snapshot();
        let sum_us = self.rtt_sum_us.load(Ordering::Relaxed);
        let s = self.stats();
        let mut out = String::with_capacity(1024);
        // Infallible: writing to a String.
        let _ = writeln!(
            out,
            "# HELP lock_heartbeat_rtt_seconds Round trip of every heartbeat (L2) and renew (L5), send to reply."
        );
        let _ = writeln!(out, "# TYPE lock_heartbeat_rtt_seconds summary");
        for q in [0.5, 0.9, 0.99, 0.999] {
            let v = if h.is_empty() {
                0
            } else {
                h.value_at_quantile(q)
            };
            let _ = writeln!(
                out,
                "lock_heartbeat_rtt_seconds{{quantile=\"{q}\"}} {}",
                v as f64 * 1e-6
            );
        }
        let _ = writeln!(
            out,
            "lock_heartbeat_rtt_seconds_sum {}",
            sum_us as f64 * 1e-6
        );
        let _ = writeln!(out, "lock_heartbeat_rtt_seconds_count {}", h.len());
        let _ = writeln!(
            out,
            "# HELP lock_session_lost_total Sessions declared LOST, by reason."
        );
        let _ = writeln!(out, "# TYPE lock_session_lost_total counter");
        for (reason, n) in [
            ("expired", s.sessions_lost_expired),
            ("unknown", s.sessions_lost_unknown),
            ("deadline", s.sessions_lost_deadline),
        ] {
            let _ = writeln!(out, "lock_session_lost_total{{reason=\"{reason}\"}} {n}");
        }
        let _ = writeln!(
            out,
            "# HELP lock_lease_abandoned_total Steps refused by ensure_time_for (insufficient lease)."
        );
        let _ = writeln!(out, "# TYPE lock_lease_abandoned_total counter");
        let _ = writeln!(out, "lock_lease_abandoned_total {}", s.leases_abandoned);
        out
    }

    fn rtt_histogram_lock(&self) -> std::sync::MutexGuard<'_, Histogram<u64>> {
        // A panic while recording cannot leave the histogram half-updated in a
        // way that matters; keep measuring.
        self.rtt.lock().unwrap_or_else(|e| e.into_inner())
    }
}

/// A histogram for 1 µs to one hour at 3 significant digits.
fn empty_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, RTT_MAX_US, 3).expect("static histogram bounds are valid")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rtt_is_recorded_summarised_exported_and_reset() {
        let m = Metrics::new();
        for ms in 1..=100u64 {
            m.record_rtt(Duration::from_millis(ms));
        }
        let s = m.rtt_summary();
        assert_eq!(s.samples, 100);
        assert!((98_000..=100_000).contains(&s.p99_us), "{}", s.p99_us);
        m.session_lost(LostReason::Deadline);
        m.abandoned();
        let text = m.prometheus_text();
        assert!(
            text.contains("lock_heartbeat_rtt_seconds_count 100"),
            "{text}"
        );
        assert!(
            text.contains("lock_session_lost_total{reason=\"deadline\"} 1"),
            "{text}"
        );
        assert!(text.contains("lock_lease_abandoned_total 1"), "{text}");
        m.reset_rtt();
        assert_eq!(m.rtt_summary().samples, 0);
        assert!(
            m.prometheus_text()
                .contains("lock_heartbeat_rtt_seconds_sum 0\n")
        );
    }
}
