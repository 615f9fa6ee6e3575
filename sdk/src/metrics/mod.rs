//! The SDK's measurements (C5, MEASUREMENT.md). One [`Metrics`] per client,
//! shared by its sessions and their heartbeat tasks:
//!
//! - three HDR histograms (µs, 3 significant digits): the raw heartbeat RTT
//!   (`lock.heartbeat.rtt`: every L2/L5 that got a reply, plus every one that
//!   timed out, recorded at the time it was given up, right-censored "≥"),
//!   the RTT corrected for coordinated omission (measured from the
//!   *scheduled* send, one sample per scheduled tick, see
//!   `session/schedule.rs`), and the tick lag (scheduled → actual send);
//! - the outcome of every heartbeat exchange (`lock.heartbeat.outcomes`:
//!   reply, timeout, error), the scheduled ticks and those that sent no L2
//!   of their own;
//! - `lock.session.lost` by reason, handles lost, `lock.lease.abandoned`;
//! - the margins actually applied at each deadline computation ([`MarginStats`]);
//! - the adaptive margin policy's own RTT view, which
//!   [`reset_measurements`](Metrics::reset_measurements) leaves alone.
//!
//! Counters are relaxed atomics read one by one, never as a consistent set.
//! Histograms sit behind std mutexes held only to record or copy.

mod text;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use hdrhistogram::Histogram;

use crate::error::LostReason;
use crate::lease::{PPM, RttSummary};

/// Largest value the histograms track, µs (one hour); larger values saturate.
const MAX_US: u64 = 3_600_000_000;

/// The outcome of one heartbeat exchange (L2 or L5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The server answered (any status): the RTT is a sample.
    Reply,
    /// No answer within the timeout: a right-censored sample at the give-up time.
    Timeout,
    /// The request failed before any answer (refused, reset): no sample.
    Error,
}

/// A point-in-time copy of the client's counters.
///
/// Every heartbeat exchange (L2 and L5) has exactly one outcome:
/// `hb_attempts == hb_replies + hb_timeouts + hb_errors`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClientStats {
    /// L2 heartbeats answered 200.
    pub heartbeats: u64,
    /// L5 renewals answered 200.
    pub renewals: u64,
    /// Heartbeat exchanges (L2 and L5) sent.
    pub hb_attempts: u64,
    /// Of those, answered by the server (any status; each is an RTT sample).
    pub hb_replies: u64,
    /// Of those, given up at their timeout (each is a censored "≥" RTT sample).
    pub hb_timeouts: u64,
    /// Of those, failed in transport before any answer (no RTT sample).
    pub hb_errors: u64,
    /// Scheduled heartbeat ticks that came due (fixed rate: one per period).
    pub hb_ticks: u64,
    /// Scheduled ticks that sent no L2 of their own: served late by one
    /// exchange with later ticks, muted by a fault, or due when the session
    /// was already lost.
    pub hb_ticks_missed: u64,
    /// Sessions lost because the server said 410 (`reason="expired"`).
    pub sessions_lost_expired: u64,
    /// Sessions lost because the server said 404 (`reason="unknown"`).
    pub sessions_lost_unknown: u64,
    /// Sessions lost because the client deadline passed (`reason="deadline"`),
    /// including a session that lapsed between payouts with no handle.
    pub sessions_lost_deadline: u64,
    /// Handles reported lost to listeners (every reason, incl. session loss).
    pub handles_lost: u64,
    /// `ensure_time_for` refusals (`lock.lease.abandoned`).
    pub leases_abandoned: u64,
}

impl ClientStats {
    /// Sessions lost, every reason.
    pub fn sessions_lost(&self) -> u64 {
        self.sessions_lost_expired + self.sessions_lost_unknown + self.sessions_lost_deadline
    }
}

/// The exchange a client deadline was computed for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DeadlineKind {
    /// L1, the session's first deadline.
    Open,
    /// L2, the session's deadline on every heartbeat.
    Heartbeat,
    /// L4, a new handle's deadline.
    Acquire,
    /// L5, a handle's deadline on every renewal.
    Renew,
    /// L7, the server-confirmed check shrinking a handle's deadline.
    Confirm,
}

impl DeadlineKind {
    /// Every kind, in wire order.
    pub const ALL: [DeadlineKind; 5] = [
        DeadlineKind::Open,
        DeadlineKind::Heartbeat,
        DeadlineKind::Acquire,
        DeadlineKind::Renew,
        DeadlineKind::Confirm,
    ];

    /// The C1 exchange, as the metrics label: `l1`, `l2`, `l4`, `l5`, `l7`.
    pub fn label(self) -> &'static str {
        match self {
            DeadlineKind::Open => "l1",
            DeadlineKind::Heartbeat => "l2",
            DeadlineKind::Acquire => "l4",
            DeadlineKind::Renew => "l5",
            DeadlineKind::Confirm => "l7",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// The margins applied to one kind of deadline computation (`margin_effective`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MarginSummary {
    /// Deadlines computed (and applied) with a margin.
    pub count: u64,
    /// The sum of their margins, in ppm (parts per million of the grant).
    pub sum_ppm: u64,
    /// The smallest margin applied, ppm (0 when `count` is 0).
    pub min_ppm: u64,
    /// The largest margin applied, ppm (0 when `count` is 0).
    pub max_ppm: u64,
}

impl MarginSummary {
    /// The mean margin applied, as a fraction (0.30), or `None` without samples.
    pub fn mean(&self) -> Option<f64> {
        (self.count > 0).then(|| self.sum_ppm as f64 / self.count as f64 / PPM as f64)
    }

    /// Both summaries together.
    pub fn merge(&self, other: &MarginSummary) -> MarginSummary {
        let pick = |a: u64, b: u64, f: fn(u64, u64) -> u64| match (self.count, other.count) {
            (0, _) => b,
            (_, 0) => a,
            _ => f(a, b),
        };
        MarginSummary {
            count: self.count + other.count,
            sum_ppm: self.sum_ppm + other.sum_ppm,
            min_ppm: pick(self.min_ppm, other.min_ppm, u64::min),
            max_ppm: pick(self.max_ppm, other.max_ppm, u64::max),
        }
    }
}

/// The margins the SDK actually applied, per exchange ([`DeadlineKind`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MarginStats {
    /// Per kind, indexed in [`DeadlineKind::ALL`] order (use [`get`](Self::get)).
    by_kind: [MarginSummary; 5],
}

impl MarginStats {
    /// The margins applied for one kind of exchange.
    pub fn get(&self, kind: DeadlineKind) -> MarginSummary {
        self.by_kind[kind.index()]
    }

    /// Every kind together.
    pub fn all(&self) -> MarginSummary {
        self.by_kind
            .iter()
            .fold(MarginSummary::default(), |acc, m| acc.merge(m))
    }

    /// The lease margins only (L4 and L5): what a handle's deadline used.
    pub fn leases(&self) -> MarginSummary {
        self.get(DeadlineKind::Acquire)
            .merge(&self.get(DeadlineKind::Renew))
    }
}

/// Atomic accumulator behind one [`MarginSummary`].
struct MarginCell {
    count: AtomicU64,
    sum_ppm: AtomicU64,
    /// `u64::MAX` while empty.
    min_ppm: AtomicU64,
    max_ppm: AtomicU64,
}

impl MarginCell {
    fn new() -> Self {
        MarginCell {
            count: AtomicU64::new(0),
            sum_ppm: AtomicU64::new(0),
            min_ppm: AtomicU64::new(u64::MAX),
            max_ppm: AtomicU64::new(0),
        }
    }

    fn record(&self, ppm: u64) {
        self.count.fetch_add(1, Ordering::Relaxed);
        self.sum_ppm.fetch_add(ppm, Ordering::Relaxed);
        self.min_ppm.fetch_min(ppm, Ordering::Relaxed);
        self.max_ppm.fetch_max(ppm, Ordering::Relaxed);
    }

    fn summary(&self) -> MarginSummary {
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

    fn reset(&self) {
        self.count.store(0, Ordering::Relaxed);
        self.sum_ppm.store(0, Ordering::Relaxed);
        self.min_ppm.store(u64::MAX, Ordering::Relaxed);
        self.max_ppm.store(0, Ordering::Relaxed);
    }
}

/// One histogram (µs) and the exact sum of what it holds (the Prometheus `_sum`).
struct Recorder {
    /// The samples; a std mutex held only to record or copy.
    histogram: Mutex<Histogram<u64>>,
    /// Exact sum of the recorded values, µs.
    sum_us: AtomicU64,
}

impl Recorder {
    fn new() -> Self {
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

    /// Records every value of `values` (µs, at least `floor_us`) under one lock.
    fn record_all(&self, floor_us: u64, values: impl IntoIterator<Item = Duration>) {
        let mut h = self.lock();
        let mut sum = 0u64;
        for d in values {
            let us = u64::try_from(d.as_micros())
                .unwrap_or(u64::MAX)
                .clamp(floor_us, MAX_US);
            h.saturating_record(us);
            sum = sum.saturating_add(us);
        }
        drop(h);
        self.sum_us.fetch_add(sum, Ordering::Relaxed);
    }

    fn snapshot(&self) -> Histogram<u64> {
        self.lock().clone()
    }

    fn reset(&self) {
        let mut h = self.lock();
        h.reset();
        self.sum_us.store(0, Ordering::Relaxed);
    }
}

/// The counters of [`ClientStats`], as atomics.
#[derive(Default)]
struct Counters {
    heartbeats: AtomicU64,
    renewals: AtomicU64,
    hb_attempts: AtomicU64,
    hb_replies: AtomicU64,
    hb_timeouts: AtomicU64,
    hb_errors: AtomicU64,
    hb_ticks: AtomicU64,
    hb_ticks_missed: AtomicU64,
    lost_expired: AtomicU64,
    lost_unknown: AtomicU64,
    lost_deadline: AtomicU64,
    handles_lost: AtomicU64,
    abandoned: AtomicU64,
}

impl Counters {
    fn all(&self) -> [&AtomicU64; 13] {
        [
            &self.heartbeats,
            &self.renewals,
            &self.hb_attempts,
            &self.hb_replies,
            &self.hb_timeouts,
            &self.hb_errors,
            &self.hb_ticks,
            &self.hb_ticks_missed,
            &self.lost_expired,
            &self.lost_unknown,
            &self.lost_deadline,
            &self.handles_lost,
            &self.abandoned,
        ]
    }
}

/// Adds one to a relaxed counter.
fn bump(c: &AtomicU64, n: u64) {
    c.fetch_add(n, Ordering::Relaxed);
}

/// The client's shared measurements. Public so that a lock client for
/// another service (the bench's etcd adapter, issue 15) records its
/// keep-alives in the same recorder, and the same columns mean the same.
pub struct Metrics {
    /// Raw L2/L5 RTT: replies, and timeouts at their give-up time ("≥").
    rtt: Recorder,
    /// RTT from the scheduled send (coordinated-omission corrected).
    corrected: Recorder,
    /// Tick lag: scheduled → actual send of each tick that sent.
    tick_lag: Recorder,
    /// The adaptive margin's RTT view (the same samples as `rtt`), only for
    /// an adaptive policy; [`reset_measurements`](Self::reset_measurements)
    /// leaves it, so a warm-up reset does not throw the policy back to its ceiling.
    policy_rtt: Option<Mutex<Histogram<u64>>>,
    /// The counters of [`ClientStats`].
    counters: Counters,
    /// The margins applied, per [`DeadlineKind`].
    margins: [MarginCell; 5],
}

impl Metrics {
    /// Empty measurements; `adaptive` keeps the policy's own RTT view.
    pub fn new(adaptive: bool) -> Self {
        Metrics {
            rtt: Recorder::new(),
            corrected: Recorder::new(),
            tick_lag: Recorder::new(),
            policy_rtt: adaptive.then(|| Mutex::new(Recorder::new().snapshot())),
            counters: Counters::default(),
            margins: [(); 5].map(|()| MarginCell::new()),
        }
    }

    /// Records one L2/L5 exchange: its outcome, and for a reply or a
    /// timeout its (raw) RTT `received − send` and its corrected samples
    /// (`corrected`, measured from the scheduled send(s)).
    pub fn record_exchange(
        &self,
        outcome: Outcome,
        rtt: Duration,
        corrected: impl IntoIterator<Item = Duration>,
    ) {
        let c = &self.counters;
        bump(&c.hb_attempts, 1);
        bump(
            match outcome {
                Outcome::Reply => &c.hb_replies,
                Outcome::Timeout => &c.hb_timeouts,
                Outcome::Error => &c.hb_errors,
            },
            1,
        );
        if outcome == Outcome::Error {
            return;
        }
        self.rtt.record_all(1, [rtt]);
        self.corrected.record_all(1, corrected);
        if let Some(view) = &self.policy_rtt {
            let us = u64::try_from(rtt.as_micros())
                .unwrap_or(u64::MAX)
                .clamp(1, MAX_US);
            view.lock()
                .unwrap_or_else(|e| e.into_inner())
                .saturating_record(us);
        }
    }

    /// `count` scheduled ticks came due; the one that sent did so `lag` late
    /// (`None`: none sent, all `count` are missed).
    pub fn record_ticks(&self, count: u64, lag: Option<Duration>) {
        bump(&self.counters.hb_ticks, count);
        match lag {
            Some(lag) => {
                bump(&self.counters.hb_ticks_missed, count.saturating_sub(1));
                self.tick_lag.record_all(0, [lag]);
            }
            None => bump(&self.counters.hb_ticks_missed, count),
        }
    }

    /// Ticks that were still needed when the session was found lost: each
    /// lateness is a censored corrected sample.
    pub fn record_unserved(&self, lateness: impl IntoIterator<Item = Duration>) {
        self.corrected.record_all(1, lateness);
    }

    /// A copy of the raw RTT histogram (µs).
    pub fn rtt_snapshot(&self) -> Histogram<u64> {
        self.rtt.snapshot()
    }

    /// A copy of the corrected RTT histogram (µs).
    pub fn corrected_snapshot(&self) -> Histogram<u64> {
        self.corrected.snapshot()
    }

    /// A copy of the tick-lag histogram (µs).
    pub fn tick_lag_snapshot(&self) -> Histogram<u64> {
        self.tick_lag.snapshot()
    }

    /// Empties the three histograms and the adaptive policy's view (which
    /// puts an adaptive margin back into warm-up).
    pub fn reset_rtt(&self) {
        self.rtt.reset();
        self.corrected.reset();
        self.tick_lag.reset();
        if let Some(view) = &self.policy_rtt {
            view.lock().unwrap_or_else(|e| e.into_inner()).reset();
        }
    }

    /// Zeroes every measurement (histograms, counters, margin stats) except
    /// the adaptive policy's RTT view: for the bench's warm-up.
    pub fn reset_measurements(&self) {
        self.rtt.reset();
        self.corrected.reset();
        self.tick_lag.reset();
        for c in self.counters.all() {
            c.store(0, Ordering::Relaxed);
        }
        for m in &self.margins {
            m.reset();
        }
    }

    /// Sample count and p99 for the adaptive margin (its own view).
    pub fn rtt_summary(&self) -> RttSummary {
        let Some(view) = &self.policy_rtt else {
            return RttSummary::default();
        };
        let h = view.lock().unwrap_or_else(|e| e.into_inner());
        RttSummary {
            samples: h.len(),
            p99_us: h.value_at_quantile(0.99),
        }
    }

    /// Records the margin (ppm) applied to a deadline of `kind`.
    pub fn margin_applied(&self, kind: DeadlineKind, ppm: u64) {
        self.margins[kind.index()].record(ppm);
    }

    /// The margins applied so far.
    pub fn margin_stats(&self) -> MarginStats {
        MarginStats {
            by_kind: [0, 1, 2, 3, 4].map(|i| self.margins[i].summary()),
        }
    }

    /// Counts one L2 (or other backend's keep-alive) answered with a grant.
    pub fn heartbeat_ok(&self) {
        bump(&self.counters.heartbeats, 1);
    }

    /// Counts one L5 renewal granted.
    pub fn renewal_ok(&self) {
        bump(&self.counters.renewals, 1);
    }

    /// Counts one handle reported lost to the listeners.
    pub fn handle_lost(&self) {
        bump(&self.counters.handles_lost, 1);
    }

    /// Counts one `ensure_time_for` refusal (`lock.lease.abandoned`).
    pub fn abandoned(&self) {
        bump(&self.counters.abandoned, 1);
    }

    /// Counts a lost session under its C5 reason label.
    pub fn session_lost(&self, reason: LostReason) {
        let counter = match reason {
            LostReason::SessionExpired => &self.counters.lost_expired,
            LostReason::SessionUnknown => &self.counters.lost_unknown,
            LostReason::Deadline => &self.counters.lost_deadline,
            _ => return,
        };
        bump(counter, 1);
    }

    /// A point-in-time copy of the counters.
    pub fn stats(&self) -> ClientStats {
        let c = &self.counters;
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        ClientStats {
            heartbeats: get(&c.heartbeats),
            renewals: get(&c.renewals),
            hb_attempts: get(&c.hb_attempts),
            hb_replies: get(&c.hb_replies),
            hb_timeouts: get(&c.hb_timeouts),
            hb_errors: get(&c.hb_errors),
            hb_ticks: get(&c.hb_ticks),
            hb_ticks_missed: get(&c.hb_ticks_missed),
            sessions_lost_expired: get(&c.lost_expired),
            sessions_lost_unknown: get(&c.lost_unknown),
            sessions_lost_deadline: get(&c.lost_deadline),
            handles_lost: get(&c.handles_lost),
            leases_abandoned: get(&c.abandoned),
        }
    }

    /// The Prometheus text exposition of the C5 SDK metrics.
    pub fn prometheus_text(&self) -> String {
        text::render(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn rtt_is_recorded_summarised_exported_and_reset() {
        let m = Metrics::new(true);
        for ms in 1..=100u32 {
            m.record_exchange(Outcome::Reply, MS * ms, [MS * ms]);
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

    #[test]
    fn every_exchange_has_one_outcome_and_timeouts_are_censored_samples() {
        let m = Metrics::new(false);
        m.record_exchange(Outcome::Reply, 2 * MS, [2 * MS]);
        m.record_exchange(Outcome::Timeout, 400 * MS, [400 * MS, 300 * MS]);
        m.record_exchange(Outcome::Error, Duration::ZERO, [Duration::ZERO]);
        let s = m.stats();
        assert_eq!(
            (s.hb_attempts, s.hb_replies, s.hb_timeouts, s.hb_errors),
            (3, 1, 1, 1)
        );
        let raw = m.rtt_snapshot();
        assert_eq!(raw.len(), 2, "the reply and the censored timeout");
        assert!(raw.max() >= 399_000);
        assert_eq!(m.corrected_snapshot().len(), 3);
        let text = m.prometheus_text();
        for outcome in ["reply", "timeout", "error"] {
            assert!(
                text.contains(&format!(
                    "lock_heartbeat_outcomes_total{{outcome=\"{outcome}\"}} 1"
                )),
                "{text}"
            );
        }
        // A fixed policy keeps no view of its own.
        assert_eq!(m.rtt_summary(), RttSummary::default());
    }

    #[test]
    fn reset_measurements_zeroes_everything_but_the_policy_view() {
        let m = Metrics::new(true);
        for _ in 0..30 {
            m.record_exchange(Outcome::Reply, 5 * MS, [5 * MS]);
        }
        m.record_ticks(3, Some(250 * MS));
        m.margin_applied(DeadlineKind::Renew, 300_000);
        m.session_lost(LostReason::SessionExpired);
        assert_eq!(m.stats().hb_ticks_missed, 2);
        assert_eq!(m.tick_lag_snapshot().len(), 1);
        m.reset_measurements();
        assert_eq!(m.stats(), ClientStats::default());
        assert_eq!(m.rtt_snapshot().len(), 0);
        assert_eq!(m.corrected_snapshot().len(), 0);
        assert_eq!(m.tick_lag_snapshot().len(), 0);
        assert_eq!(m.margin_stats(), MarginStats::default());
        assert_eq!(m.rtt_summary().samples, 30, "the policy keeps its view");
    }

    #[test]
    fn margin_stats_count_mean_and_merge_by_kind() {
        let m = Metrics::new(false);
        m.margin_applied(DeadlineKind::Acquire, 300_000);
        m.margin_applied(DeadlineKind::Renew, 100_000);
        m.margin_applied(DeadlineKind::Renew, 200_000);
        let s = m.margin_stats();
        assert_eq!(s.get(DeadlineKind::Heartbeat), MarginSummary::default());
        assert_eq!(s.get(DeadlineKind::Heartbeat).mean(), None);
        let renew = s.get(DeadlineKind::Renew);
        assert_eq!(
            (renew.count, renew.min_ppm, renew.max_ppm),
            (2, 100_000, 200_000)
        );
        assert!((renew.mean().unwrap() - 0.15).abs() < 1e-12);
        let leases = s.leases();
        assert_eq!(
            (leases.count, leases.min_ppm, leases.max_ppm),
            (3, 100_000, 300_000)
        );
        assert!((leases.mean().unwrap() - 0.2).abs() < 1e-12);
        assert_eq!(s.all(), leases);
        assert!(
            m.prometheus_text()
                .contains("lock_margin_effective_count{exchange=\"l5\"} 2")
        );
    }
}
