//! [`Metrics`]: one client's shared measurements, recorded into by its
//! sessions and heartbeat tasks (and by the bench's etcd adapter) and read
//! out as [`ClientStats`], [`MarginStats`], histogram copies and the
//! adaptive margin's RTT summary. Everything it records also goes to its
//! [`PrometheusMetrics`], which the text exposition encodes.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use hdrhistogram::Histogram;

use super::cells::{Counters, MAX_US, MarginCell, Recorder, bump};
use super::prometheus::PrometheusMetrics;
use super::stats::{ClientStats, DeadlineKind, MarginStats, Outcome, RenewOutcome};
use crate::config::{DEFAULT_SESSION_TTL, DEFAULT_TTL, MarginPolicy};
use crate::error::LostReason;
use crate::lease::RttSummary;

/// The client's shared measurements. Public so that a lock client for
/// another service (the bench's etcd adapter) records its
/// keep-alives in the same recorder, and the same columns mean the same.
pub struct Metrics {
    /// Raw L2 RTT: replies, and timeouts at their give-up time ("≥").
    pub(super) rtt: Recorder,
    /// L2 RTT from the scheduled send (coordinated-omission corrected).
    pub(super) corrected: Recorder,
    /// Raw L5 (renewal) RTT: replies, and timeouts at their give-up time ("≥").
    pub(super) renew_rtt: Recorder,
    /// L5 RTT from the scheduled tick that sent it.
    pub(super) renew_corrected: Recorder,
    /// Tick lag: scheduled → actual send of each tick that sent.
    pub(super) tick_lag: Recorder,
    /// Heartbeat gaps: the send of the last acknowledged L1/L2 to the
    /// receipt of the next acknowledgement, plus one censored gap per
    /// session lost at its deadline.
    pub(super) gap: Recorder,
    /// The adaptive margin's RTT view (the same samples as `rtt`), only for
    /// an adaptive policy; [`reset_measurements`](Self::reset_measurements)
    /// leaves it, so a warm-up reset does not throw the policy back to its ceiling.
    pub(super) policy_rtt: Option<Mutex<Histogram<u64>>>,
    /// The counters of [`ClientStats`].
    pub(super) counters: Counters,
    /// The margins applied, per [`DeadlineKind`].
    pub(super) margins: [MarginCell; 5],
    /// The Prometheus instruments everything is also recorded into (maybe
    /// shared with other clients); never reset.
    pub(super) prom: PrometheusMetrics,
}

impl Metrics {
    /// Empty measurements; `adaptive` keeps the policy's own RTT view. The
    /// Prometheus instruments are private ones with the boundaries of the C4
    /// defaults (lease 30 s, session TTL 15 s, margin 0.30); use
    /// [`with_prometheus`](Self::with_prometheus) for a configuration's own.
    pub fn new(adaptive: bool) -> Self {
        Self::with_prometheus(
            adaptive,
            PrometheusMetrics::new(DEFAULT_TTL, DEFAULT_SESSION_TTL, &MarginPolicy::default()),
        )
    }

    /// Empty measurements that also record into `prom` (which may be shared
    /// with other clients); `adaptive` keeps the policy's own RTT view.
    pub fn with_prometheus(adaptive: bool, prom: PrometheusMetrics) -> Self {
        Metrics {
            rtt: Recorder::new(),
            corrected: Recorder::new(),
            renew_rtt: Recorder::new(),
            renew_corrected: Recorder::new(),
            tick_lag: Recorder::new(),
            gap: Recorder::new(),
            policy_rtt: adaptive.then(|| Mutex::new(Recorder::new().snapshot())),
            counters: Counters::default(),
            margins: [(); 5].map(|()| MarginCell::new()),
            prom,
        }
    }

    /// The Prometheus instruments this recorder also records into.
    pub fn prometheus(&self) -> &PrometheusMetrics {
        &self.prom
    }

    /// The classic Prometheus text exposition of [`prometheus`](Self::prometheus)
    /// (every SDK family; shared instruments show every client sharing them).
    pub fn prometheus_text(&self) -> String {
        self.prom.text()
    }

    /// Records one L2 exchange (or another backend's keep-alive): its
    /// outcome, and for a reply or a timeout its (raw) RTT `received − send`
    /// and its corrected samples (`corrected`, measured from the scheduled
    /// send(s)). Renewals are [`record_renewal`](Self::record_renewal)'s.
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
        self.prom.outcome(outcome);
        if outcome == Outcome::Error {
            return;
        }
        let [p_rtt, p_corrected, _] = self.prom.histograms();
        self.rtt.record_all(1, [rtt], p_rtt);
        self.corrected.record_all(1, corrected, p_corrected);
        self.policy_view(rtt);
    }

    /// Records one L5 renewal: its outcome, and when it has an RTT (a reply
    /// of any status, or a timeout at its give-up time, "≥") its `sample`:
    /// the raw RTT and the RTT from the scheduled tick that sent it. The
    /// adaptive margin's view takes the raw RTT as it takes an L2's.
    pub fn record_renewal(&self, outcome: RenewOutcome, sample: Option<(Duration, Duration)>) {
        let c = &self.counters;
        bump(&c.renew_attempts, 1);
        bump(
            match outcome {
                RenewOutcome::Ok => &c.renewals,
                RenewOutcome::Refused => &c.renew_refusals,
                RenewOutcome::Timeout => &c.renew_timeouts,
                RenewOutcome::Error => &c.renew_errors,
            },
            1,
        );
        self.prom.renewal(outcome);
        if let Some((rtt, corrected)) = sample {
            let [p_rtt, p_corrected] = self.prom.renewal_histograms();
            self.renew_rtt.record_all(1, [rtt], p_rtt);
            self.renew_corrected.record_all(1, [corrected], p_corrected);
            self.policy_view(rtt);
        }
    }

    /// Adds one raw RTT to the adaptive policy's own view, if it keeps one.
    fn policy_view(&self, rtt: Duration) {
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
        let missed = match lag {
            Some(lag) => {
                let [_, _, p_lag] = self.prom.histograms();
                self.tick_lag.record_all(0, [lag], p_lag);
                count.saturating_sub(1)
            }
            None => count,
        };
        bump(&self.counters.hb_ticks_missed, missed);
        self.prom.ticks(count, missed);
    }

    /// Ticks that were still needed when the session was found lost: each
    /// lateness is a censored corrected sample.
    pub fn record_unserved(&self, lateness: impl IntoIterator<Item = Duration>) {
        let [_, p_corrected, _] = self.prom.histograms();
        self.corrected.record_all(1, lateness, p_corrected);
    }

    /// Records one heartbeat gap of a session: from the send of its last
    /// acknowledged L1/L2 to the receipt of the reply that acknowledged the
    /// next one; `window` is how long the deadline in force before that reply
    /// left it (deadline − that send). A gap longer than its window counts
    /// in `hb_gaps_over_window`.
    pub fn record_gap(&self, gap: Duration, window: Duration) {
        self.gap.record_all(1, [gap], self.prom.gap_histogram());
        if gap > window {
            self.gap_over_window();
        }
    }

    /// Records the censored gap (≥) of a session found lost at its deadline:
    /// from the send of its last acknowledged L1/L2 to the moment the loss
    /// was found. It outlasted its window by definition and always counts in
    /// `hb_gaps_over_window`: one per session lost at its deadline.
    pub fn record_lost_gap(&self, gap: Duration) {
        self.gap.record_all(1, [gap], self.prom.gap_histogram());
        self.gap_over_window();
    }

    /// Counts one gap over its window.
    fn gap_over_window(&self) {
        bump(&self.counters.gaps_over_window, 1);
        self.prom.gap_over_window();
    }

    /// A copy of the heartbeat gap histogram (µs): every gap recorded by
    /// [`record_gap`](Self::record_gap) and [`record_lost_gap`](Self::record_lost_gap).
    pub fn gap_snapshot(&self) -> Histogram<u64> {
        self.gap.snapshot()
    }

    /// A copy of the raw RTT histogram (µs).
    pub fn rtt_snapshot(&self) -> Histogram<u64> {
        self.rtt.snapshot()
    }

    /// A copy of the corrected RTT histogram (µs).
    pub fn corrected_snapshot(&self) -> Histogram<u64> {
        self.corrected.snapshot()
    }

    /// A copy of the raw renewal (L5) RTT histogram (µs).
    pub fn renew_rtt_snapshot(&self) -> Histogram<u64> {
        self.renew_rtt.snapshot()
    }

    /// A copy of the renewal RTT histogram measured from the scheduled tick (µs).
    pub fn renew_corrected_snapshot(&self) -> Histogram<u64> {
        self.renew_corrected.snapshot()
    }

    /// A copy of the tick-lag histogram (µs).
    pub fn tick_lag_snapshot(&self) -> Histogram<u64> {
        self.tick_lag.snapshot()
    }

    /// Empties the six histograms (heartbeat raw and corrected, renewal raw
    /// and corrected, tick lag, gaps) and the adaptive policy's view (which
    /// puts an adaptive margin back into warm-up). Not the Prometheus
    /// instruments, which are monotonic.
    pub fn reset_rtt(&self) {
        self.rtt.reset();
        self.corrected.reset();
        self.renew_rtt.reset();
        self.renew_corrected.reset();
        self.tick_lag.reset();
        self.gap.reset();
        if let Some(view) = &self.policy_rtt {
            view.lock().unwrap_or_else(|e| e.into_inner()).reset();
        }
    }

    /// Zeroes every measurement (histograms, counters, margin stats) except
    /// the adaptive policy's RTT view: for the bench's warm-up. Not the
    /// Prometheus instruments, which are monotonic (a scraper takes
    /// `increase()` over its own window).
    pub fn reset_measurements(&self) {
        self.rtt.reset();
        self.corrected.reset();
        self.renew_rtt.reset();
        self.renew_corrected.reset();
        self.tick_lag.reset();
        self.gap.reset();
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
        self.prom.margin(kind, ppm);
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

    /// Counts one handle reported lost to the listeners.
    pub fn handle_lost(&self) {
        bump(&self.counters.handles_lost, 1);
        self.prom.handle_lost();
    }

    /// Counts one `ensure_time_for` refusal (`lock.lease.abandoned`).
    pub fn abandoned(&self) {
        bump(&self.counters.abandoned, 1);
        self.prom.abandoned();
    }

    /// Counts one acquire call's end: `granted` a handle, or failed (any
    /// other end).
    pub fn acquire_finished(&self, granted: bool) {
        let c = &self.counters;
        bump(
            if granted {
                &c.acquires_granted
            } else {
                &c.acquires_failed
            },
            1,
        );
        self.prom.acquire(granted);
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
        self.prom.session_lost(reason);
    }

    /// A point-in-time copy of the counters.
    pub fn stats(&self) -> ClientStats {
        let c = &self.counters;
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        ClientStats {
            heartbeats: get(&c.heartbeats),
            renewals: get(&c.renewals),
            renew_attempts: get(&c.renew_attempts),
            renew_refusals: get(&c.renew_refusals),
            renew_timeouts: get(&c.renew_timeouts),
            renew_errors: get(&c.renew_errors),
            hb_attempts: get(&c.hb_attempts),
            hb_replies: get(&c.hb_replies),
            hb_timeouts: get(&c.hb_timeouts),
            hb_errors: get(&c.hb_errors),
            hb_ticks: get(&c.hb_ticks),
            hb_ticks_missed: get(&c.hb_ticks_missed),
            sessions_lost_expired: get(&c.lost_expired),
            sessions_lost_unknown: get(&c.lost_unknown),
            sessions_lost_deadline: get(&c.lost_deadline),
            hb_gaps_over_window: get(&c.gaps_over_window),
            handles_lost: get(&c.handles_lost),
            leases_abandoned: get(&c.abandoned),
            acquires_granted: get(&c.acquires_granted),
            acquires_failed: get(&c.acquires_failed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::stats::MarginSummary;

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
        // The exported `_sum` is the recorder's exact sum (the same µs values).
        let sum: f64 = text
            .lines()
            .find_map(|l| l.strip_prefix("lock_heartbeat_rtt_seconds_sum "))
            .and_then(|v| v.parse().ok())
            .expect("a _sum line");
        let exact = m.rtt.sum_us.load(Ordering::Relaxed) as f64 * 1e-6;
        assert!((sum - exact).abs() < 1e-9, "{sum} vs {exact}");
        assert!((exact - 5.05).abs() < 1e-9, "1 + 2 + … + 100 ms");
        m.reset_rtt();
        assert_eq!(m.rtt_summary().samples, 0);
        assert_eq!(m.rtt_snapshot().len(), 0);
        assert!(
            m.prometheus_text()
                .contains("lock_heartbeat_rtt_seconds_count 100\n"),
            "the exported histogram is monotonic"
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

    /// Renewals are an exchange of their own: their RTTs go to the renewal
    /// histograms (a timeout censored, a transport error none), never to
    /// the heartbeat's, and every one has one outcome.
    #[test]
    fn renewals_have_their_own_histograms_and_outcomes() {
        let m = Metrics::new(false);
        m.record_exchange(Outcome::Reply, MS, [MS]);
        m.record_renewal(RenewOutcome::Ok, Some((3 * MS, 5 * MS)));
        m.record_renewal(RenewOutcome::Refused, Some((2 * MS, 2 * MS)));
        m.record_renewal(RenewOutcome::Timeout, Some((400 * MS, 450 * MS)));
        m.record_renewal(RenewOutcome::Error, None);
        let s = m.stats();
        assert_eq!(
            (
                s.renew_attempts,
                s.renewals,
                s.renew_refusals,
                s.renew_timeouts,
                s.renew_errors
            ),
            (4, 1, 1, 1, 1)
        );
        assert_eq!((s.hb_attempts, m.rtt_snapshot().len()), (1, 1), "L2 only");
        let (raw, corrected) = (m.renew_rtt_snapshot(), m.renew_corrected_snapshot());
        assert_eq!((raw.len(), corrected.len()), (3, 3));
        assert!(raw.max() >= 399_000 && corrected.max() >= 449_000);
        let text = m.prometheus_text();
        for needle in [
            "lock_renewal_rtt_seconds_count 3",
            "lock_renewal_rtt_corrected_seconds_count 3",
            "lock_heartbeat_rtt_seconds_count 1",
            "lock_renewals_total{outcome=\"ok\"} 1",
            "lock_renewals_total{outcome=\"refused\"} 1",
            "lock_renewals_total{outcome=\"timeout\"} 1",
            "lock_renewals_total{outcome=\"error\"} 1",
        ] {
            assert!(text.contains(needle), "{needle}: {text}");
        }
        m.reset_measurements();
        assert_eq!(m.stats(), ClientStats::default());
        assert_eq!(m.renew_rtt_snapshot().len(), 0);
        assert_eq!(m.renew_corrected_snapshot().len(), 0);
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
    fn gaps_over_their_window_count_and_a_lost_gap_always_does() {
        let m = Metrics::new(false);
        m.record_gap(233 * MS, 700 * MS);
        m.record_gap(700 * MS, 700 * MS);
        assert_eq!(
            m.stats().hb_gaps_over_window,
            0,
            "a gap equal to its window"
        );
        m.record_gap(701 * MS, 700 * MS);
        m.record_lost_gap(700 * MS);
        assert_eq!(m.stats().hb_gaps_over_window, 2);
        let gaps = m.gap_snapshot();
        assert_eq!(gaps.len(), 4);
        assert!(gaps.max() >= 700_000, "{}", gaps.max());
        let text = m.prometheus_text();
        assert!(
            text.contains("lock_heartbeat_gap_seconds_count 4"),
            "{text}"
        );
        assert!(
            text.contains("lock_heartbeat_gaps_over_window_total 2"),
            "{text}"
        );
        m.reset_measurements();
        assert_eq!(m.gap_snapshot().len(), 0);
        assert_eq!(m.stats().hb_gaps_over_window, 0);
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
                .contains("lock_margin_effective_count{exchange=\"renew\"} 2")
        );
    }
}
