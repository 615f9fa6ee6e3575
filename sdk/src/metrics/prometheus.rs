//! [`PrometheusMetrics`]: the SDK's metric families as `prometheus-client`
//! instruments, recorded into alongside the HDR histograms and counters of
//! [`Metrics`](super::Metrics), and encoded with the classic Prometheus text
//! encoder (`text/plain; version=0.0.4`, [`CONTENT_TYPE`]).
//!
//! The families and their labels are the shared names of the observability reference (see
//! `docs/reference/observability.md#sdk`). Every counter and every label value
//! exists at 0 from construction, so `increase()` sees the first event. The
//! heartbeat histograms' boundaries are
//! [`fencepost_api::buckets::heartbeat_bounds`] of the configuration; the
//! margin histogram's are 0.05, 0.10, … 0.95. The three clock gauges are read
//! from the kernel (`adjtimex`) at each encode.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use fencepost_api::buckets;
use fencepost_api::clock_discipline::{self, ClockDiscipline, ClockDisciplineError};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

use super::stats::{DeadlineKind, Outcome, RenewOutcome};
use crate::config::{LockClientConfig, MarginPolicy};
use crate::error::LostReason;
use crate::lease::PPM;

/// The `Content-Type` of what [`PrometheusMetrics::text`] and
/// [`LockClient::metrics_text`](crate::LockClient::metrics_text) return:
/// `text/plain; version=0.0.4; charset=utf-8`.
pub const CONTENT_TYPE: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

/// One label pair: the label set of every labelled SDK family.
type Label = [(&'static str, &'static str); 1];
/// A counter family over one label.
type CounterFamily = Family<Label, Counter>;
/// A histogram family over one label (the margins applied, by exchange).
type HistogramFamily = Family<Label, Histogram, fn() -> Histogram>;

/// The heartbeat outcome label values, in [`Outcome`] order.
const OUTCOMES: [&str; 3] = ["reply", "timeout", "error"];
/// The session-loss reason label values.
const REASONS: [&str; 3] = ["expired", "unknown", "deadline"];
/// The acquire outcome label values.
const ACQUIRES: [&str; 2] = ["granted", "failed"];
/// The renewal outcome label values, in [`RenewOutcome::ALL`] order.
const RENEWALS: [&str; 4] = ["ok", "refused", "timeout", "error"];

/// The SDK's Prometheus instruments. Cheap to clone: every clone shares the
/// same instruments, so several [`LockClient`](crate::LockClient)s given one
/// `PrometheusMetrics` (through
/// [`LockClient::with_prometheus`](crate::LockClient::with_prometheus)) record into one set of families,
/// and a process with many clients exports each family once, summed over
/// them. Without it a client builds a private one from its configuration.
///
/// The instruments are monotonic: neither
/// [`reset_measurements`](crate::LockClient::reset_measurements) nor
/// [`reset_rtt`](crate::LockClient::reset_rtt) touches them.
#[derive(Clone)]
pub struct PrometheusMetrics {
    inner: Arc<Instruments>,
}

/// The instruments, and handles on each pre-created label value.
struct Instruments {
    /// The heartbeat histograms' boundaries, seconds.
    bounds: Vec<f64>,
    rtt: Histogram,
    corrected: Histogram,
    tick_lag: Histogram,
    /// Raw renewal (L5) RTT.
    renew_rtt: Histogram,
    /// Renewal RTT from the scheduled tick.
    renew_corrected: Histogram,
    renewals: CounterFamily,
    /// `renewals` per value of [`RENEWALS`].
    renewal: [Counter; 4],
    /// Heartbeat gaps (send of the last acknowledged L2 to the next reply).
    gap: Histogram,
    /// Gaps longer than their window.
    gaps_over_window: Counter,
    outcomes: CounterFamily,
    /// `outcomes` per value of [`OUTCOMES`].
    outcome: [Counter; 3],
    ticks: Counter,
    ticks_missed: Counter,
    session_lost: CounterFamily,
    /// `session_lost` per value of [`REASONS`].
    lost: [Counter; 3],
    handles_lost: Counter,
    abandoned: Counter,
    acquires: CounterFamily,
    /// `acquires` per value of [`ACQUIRES`].
    acquire: [Counter; 2],
    margins: HistogramFamily,
    /// `margins` per [`DeadlineKind`], in [`DeadlineKind::ALL`] order.
    margin: [Histogram; 5],
}

impl fmt::Debug for PrometheusMetrics {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PrometheusMetrics")
            .field("heartbeat_bounds", &self.inner.bounds.len())
            .finish_non_exhaustive()
    }
}

/// The margin histogram's boundaries: 0.05, 0.10, … 0.95 (each the `f64`
/// nearest its decimal, so it prints as one).
pub fn margin_bounds() -> Vec<f64> {
    (1..20u32).map(|i| f64::from(i) / 20.0).collect()
}

fn margin_histogram() -> Histogram {
    Histogram::new(margin_bounds())
}

/// The margins whose trigger-1 budgets become boundaries: a fixed policy's
/// margin, or an adaptive policy's floor and ceiling.
fn policy_margins(policy: &MarginPolicy) -> Vec<f64> {
    match *policy {
        MarginPolicy::Fixed(m) => vec![m],
        MarginPolicy::Adaptive { floor, ceiling, .. } => vec![floor, ceiling],
    }
}

/// A counter family with every `values` label pre-created at 0, and handles on them.
fn counter_family<const N: usize>(
    label: &'static str,
    values: [&'static str; N],
) -> (CounterFamily, [Counter; N]) {
    let family = CounterFamily::default();
    let handles = values.map(|v| family.get_or_create_owned(&[(label, v)]));
    (family, handles)
}

impl PrometheusMetrics {
    /// Instruments for a client whose default lease is `lease`, whose
    /// session TTL is `session_ttl` and whose margin policy is `margin`: the
    /// heartbeat histograms get
    /// [`heartbeat_bounds`](fencepost_api::buckets::heartbeat_bounds)`(lease,
    /// session_ttl, margins)`, with margins the fixed margin or the adaptive
    /// floor and ceiling, so each trigger-1 budget is a boundary.
    pub fn new(lease: Duration, session_ttl: Duration, margin: &MarginPolicy) -> Self {
        let bounds = buckets::heartbeat_bounds(lease, session_ttl, &policy_margins(margin));
        let histogram = || Histogram::new(bounds.iter().copied());
        let (outcomes, outcome) = counter_family("outcome", OUTCOMES);
        let (session_lost, lost) = counter_family("reason", REASONS);
        let (acquires, acquire) = counter_family("outcome", ACQUIRES);
        let (renewals, renewal) = counter_family("outcome", RENEWALS);
        let margins = HistogramFamily::new_with_constructor(margin_histogram);
        let margin =
            DeadlineKind::ALL.map(|k| margins.get_or_create_owned(&[("exchange", k.exchange())]));
        PrometheusMetrics {
            inner: Arc::new(Instruments {
                rtt: histogram(),
                corrected: histogram(),
                tick_lag: histogram(),
                renew_rtt: histogram(),
                renew_corrected: histogram(),
                renewals,
                renewal,
                gap: histogram(),
                gaps_over_window: Counter::default(),
                bounds,
                outcomes,
                outcome,
                ticks: Counter::default(),
                ticks_missed: Counter::default(),
                session_lost,
                lost,
                handles_lost: Counter::default(),
                abandoned: Counter::default(),
                acquires,
                acquire,
                margins,
                margin,
            }),
        }
    }

    /// Instruments for `config`: its default TTL, session TTL and margin policy.
    pub fn for_config(config: &LockClientConfig) -> Self {
        Self::new(config.default_ttl, config.session_ttl, &config.margin)
    }

    /// The heartbeat histograms' boundaries, seconds, ascending (the `+Inf`
    /// bucket is implicit). Spelled as `le` labels by
    /// [`fencepost_api::buckets::le_label`].
    pub fn heartbeat_bounds(&self) -> &[f64] {
        &self.inner.bounds
    }

    /// Registers every SDK family (and the clock gauges, read at each encode)
    /// into `registry`, the embedding application's. Register one
    /// `PrometheusMetrics` once per registry: a second registration, or a
    /// second `PrometheusMetrics`, in the same registry would expose each
    /// family twice. To export the SDK's figures of several clients, give
    /// them one `PrometheusMetrics` and register that.
    pub fn register(&self, registry: &mut Registry) {
        let i = &self.inner;
        registry.register(
            "lock_heartbeat_rtt_seconds",
            "Round trip of every heartbeat (L2), send to reply; a timed-out exchange counts at its timeout (>=); renewals are lock_renewal_rtt_seconds",
            i.rtt.clone(),
        );
        registry.register(
            "lock_heartbeat_rtt_corrected_seconds",
            "Heartbeat round trip measured from the scheduled send (coordinated-omission corrected), one sample per scheduled tick",
            i.corrected.clone(),
        );
        registry.register(
            "lock_renewal_rtt_seconds",
            "Round trip of every lease renewal (L5), send to reply; a timed-out renewal counts at its timeout (>=)",
            i.renew_rtt.clone(),
        );
        registry.register(
            "lock_renewal_rtt_corrected_seconds",
            "Lease renewal (L5) round trip measured from the scheduled heartbeat tick that sent it (coordinated-omission corrected)",
            i.renew_corrected.clone(),
        );
        registry.register(
            "lock_renewals",
            "Lease renewals (L5) by outcome: ok (applied), refused (LOCK_LOST), timeout, error",
            i.renewals.clone(),
        );
        registry.register(
            "lock_heartbeat_tick_lag_seconds",
            "Lateness of each heartbeat tick: scheduled to actual send",
            i.tick_lag.clone(),
        );
        registry.register(
            "lock_heartbeat_gap_seconds",
            "Heartbeat gaps: send of the last acknowledged heartbeat (or session create) to the receipt of the next acknowledgement; a session lost at its deadline adds one censored gap (>=) at the moment the loss was found",
            i.gap.clone(),
        );
        // Counters without `_total`: the encoder appends it.
        registry.register(
            "lock_heartbeat_gaps_over_window",
            "Heartbeat gaps longer than the usable window they were exposed to: one per session lost at its deadline",
            i.gaps_over_window.clone(),
        );
        registry.register(
            "lock_heartbeat_outcomes",
            "Heartbeat exchanges (L2) by outcome",
            i.outcomes.clone(),
        );
        registry.register(
            "lock_heartbeat_ticks",
            "Scheduled heartbeat ticks that came due",
            i.ticks.clone(),
        );
        registry.register(
            "lock_heartbeat_ticks_missed",
            "Scheduled heartbeat ticks that sent no L2 of their own (served late, muted, or after the session was lost)",
            i.ticks_missed.clone(),
        );
        registry.register(
            "lock_session_lost",
            "Sessions declared LOST, by reason",
            i.session_lost.clone(),
        );
        registry.register(
            "lock_handles_lost",
            "Lock handles reported lost to the listeners (every reason, session loss included)",
            i.handles_lost.clone(),
        );
        registry.register(
            "lock_lease_abandoned",
            "Steps refused by ensure_time_for (insufficient lease)",
            i.abandoned.clone(),
        );
        registry.register(
            "lock_acquires",
            "Acquire calls (L4, retries included in one call) by how they ended: granted, or failed (busy, timeout, error)",
            i.acquires.clone(),
        );
        registry.register(
            "lock_margin_effective",
            "Safety margin applied at each client-deadline computation, by exchange (fraction of the grant)",
            i.margins.clone(),
        );
        registry.register_collector(Box::new(ClockGauges {
            read: clock_discipline::read,
        }));
    }

    /// The classic Prometheus text exposition ([`CONTENT_TYPE`]) of a private
    /// registry holding these families alone.
    pub fn text(&self) -> String {
        let mut registry = Registry::default();
        self.register(&mut registry);
        encode(&registry)
    }

    /// The three heartbeat histograms: raw RTT, corrected RTT, tick lag.
    pub(super) fn histograms(&self) -> [&Histogram; 3] {
        [&self.inner.rtt, &self.inner.corrected, &self.inner.tick_lag]
    }

    /// The two renewal histograms: raw RTT, RTT from the scheduled tick.
    pub(super) fn renewal_histograms(&self) -> [&Histogram; 2] {
        [&self.inner.renew_rtt, &self.inner.renew_corrected]
    }

    /// Counts one renewal's outcome.
    pub(super) fn renewal(&self, outcome: RenewOutcome) {
        let i = RenewOutcome::ALL
            .iter()
            .position(|o| *o == outcome)
            .unwrap_or(3);
        self.inner.renewal[i].inc();
    }

    /// The heartbeat gap histogram.
    pub(super) fn gap_histogram(&self) -> &Histogram {
        &self.inner.gap
    }

    /// Counts one heartbeat gap over its window.
    pub(super) fn gap_over_window(&self) {
        self.inner.gaps_over_window.inc();
    }

    /// Counts one heartbeat exchange's outcome.
    pub(super) fn outcome(&self, outcome: Outcome) {
        let i = match outcome {
            Outcome::Reply => 0,
            Outcome::Timeout => 1,
            Outcome::Error => 2,
        };
        self.inner.outcome[i].inc();
    }

    /// Counts `count` scheduled ticks, `missed` of them sending no L2.
    pub(super) fn ticks(&self, count: u64, missed: u64) {
        self.inner.ticks.inc_by(count);
        self.inner.ticks_missed.inc_by(missed);
    }

    /// Counts a lost session under its reason (other reasons are not session losses).
    pub(super) fn session_lost(&self, reason: LostReason) {
        let i = match reason {
            LostReason::SessionExpired => 0,
            LostReason::SessionUnknown => 1,
            LostReason::Deadline => 2,
            _ => return,
        };
        self.inner.lost[i].inc();
    }

    /// Counts one handle reported lost.
    pub(super) fn handle_lost(&self) {
        self.inner.handles_lost.inc();
    }

    /// Counts one `ensure_time_for` refusal.
    pub(super) fn abandoned(&self) {
        self.inner.abandoned.inc();
    }

    /// Counts one acquire call's end.
    pub(super) fn acquire(&self, granted: bool) {
        self.inner.acquire[usize::from(!granted)].inc();
    }

    /// Records the margin (ppm) applied to a deadline of `kind`.
    pub(super) fn margin(&self, kind: DeadlineKind, ppm: u64) {
        self.inner.margin[kind.index()].observe(ppm as f64 / PPM as f64);
    }
}

/// Encodes `registry` with the classic text encoder. Writing into a `String`
/// cannot fail, nor can the SDK's own families; should an embedding
/// application's collector fail, what was written so far is returned and
/// the failure logged.
pub(crate) fn encode(registry: &Registry) -> String {
    let mut out = String::with_capacity(8192);
    if let Err(e) = prometheus_client::encoding::prometheus_text::encode(&mut out, registry) {
        tracing::error!(error = %e, "encoding the Prometheus text failed");
    }
    out
}

/// The clock gauges, read from the kernel's clock discipline at each encode.
/// When the read fails (not Linux, or adjtimex denied) the three gauges are
/// left out of the exposition: an absent series, not a made-up value, and
/// the clock check reports "insufficient".
struct ClockGauges {
    read: fn() -> Result<ClockDiscipline, ClockDisciplineError>,
}

impl fmt::Debug for ClockGauges {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ClockGauges")
    }
}

impl Collector for ClockGauges {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), fmt::Error> {
        let Ok(d) = (self.read)() else {
            return Ok(());
        };
        let seconds = |name: &str, help: &str, v: Duration, e: &mut DescriptorEncoder| {
            let g = ConstGauge::new(v.as_secs_f64());
            g.encode(e.encode_descriptor(name, help, None, g.metric_type())?)
        };
        seconds(
            "lock_clock_maxerror_seconds",
            "The kernel's maximum clock error bound (adjtimex maxerror), read at scrape.",
            d.max_error,
            &mut encoder,
        )?;
        seconds(
            "lock_clock_esterror_seconds",
            "The kernel's estimated clock error (adjtimex esterror), read at scrape.",
            d.est_error,
            &mut encoder,
        )?;
        let g = ConstGauge::new(i64::from(d.synchronised));
        g.encode(encoder.encode_descriptor(
            "lock_clock_synchronised",
            "1 when the kernel's clock discipline says synchronised, 0 when not (STA_UNSYNC or TIME_ERROR), read at scrape.",
            None,
            g.metric_type(),
        )?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text_with(read: fn() -> Result<ClockDiscipline, ClockDisciplineError>) -> String {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(ClockGauges { read }));
        encode(&registry)
    }

    #[test]
    fn clock_gauges_are_read_at_encode_and_absent_when_the_read_fails() {
        let text = text_with(|| {
            Ok(ClockDiscipline {
                max_error: Duration::from_millis(250),
                est_error: Duration::from_micros(1500),
                synchronised: false,
            })
        });
        for line in [
            "# TYPE lock_clock_maxerror_seconds gauge\nlock_clock_maxerror_seconds 0.25\n",
            "lock_clock_esterror_seconds 0.0015\n",
            "# TYPE lock_clock_synchronised gauge\nlock_clock_synchronised 0\n",
        ] {
            assert!(text.contains(line), "{text}");
        }
        assert_eq!(text_with(|| Err(ClockDisciplineError::Unsupported)), "");
    }

    #[test]
    fn margin_bounds_print_as_their_decimals() {
        let labels: Vec<String> = margin_bounds().into_iter().map(buckets::le_label).collect();
        assert_eq!(labels.len(), 19);
        assert_eq!(labels[0], "0.05");
        assert_eq!(labels[2], "0.15");
        assert_eq!(labels[18], "0.95");
        assert!(labels.iter().all(|l| l.len() <= 4), "{labels:?}");
    }

    #[test]
    fn adaptive_budgets_use_floor_and_ceiling() {
        let ms = Duration::from_millis;
        let p = PrometheusMetrics::new(
            ms(5000),
            ms(2000),
            &MarginPolicy::Adaptive {
                k: 4.0,
                floor: 0.05,
                ceiling: 0.5,
            },
        );
        let les: Vec<String> = p
            .heartbeat_bounds()
            .iter()
            .map(|&b| buckets::le_label(b))
            .collect();
        for m in [0.05, 0.5] {
            let want = buckets::budget_le(ms(5000), ms(2000), m);
            assert!(les.contains(&want), "{want} not in {les:?}");
        }
    }
}
