//! The six checks as production rules over Prometheus: ADR-006 §6.5's five
//! triggers plus the lease-safety essay's clock check, each as PromQL over the
//! metrics the SDK, the lock-server, the rail-stub and cAdvisor export.
//!
//! This module is the one definition both `bench rules` (the recording and
//! alerting rules file, [`super::rules_file`]) and `bench triggers
//! --prometheus` (instant queries, [`super::live_verdict`]) are built from:
//! the alert's `expr` and the live evaluation's query are the same string.
//!
//! Each [`Check`] has PromQL for its observed value, its evidence (how many
//! samples stand behind it), its fired condition and its insufficient-data
//! condition, and optionally a "not evaluated" condition (trigger 1: the SDK's
//! buckets do not carry the budget, "misconfigured"; trigger 5: no cAdvisor
//! series). A condition holds when its query returns a non-empty vector.
//! Thresholds are the constants the lab rules use ([`super::rules`]).

use std::time::Duration;

use bench_core::timebase::{
    D4_EXTRA, PRODUCTION_LEASE, PRODUCTION_RAIL_READ_TIMEOUT, PRODUCTION_SESSION_TTL,
};
use fencepost_api::GraceParams;
use fencepost_api::buckets::{budget_le, trigger1_budget_us};
use fencepost_api::duration::format_duration;
use fencepost_sdk::MarginPolicy;

use super::catalog::{CLOCK_CHECK, TRIGGERS, Trigger};
use super::rules::{
    BUDGET_DIVISOR, D4Window, LOST_WORK_MIN, MARGIN_SHARE_MIN, MIN_SAMPLES_P99, OVER_BUDGET_FLOOR,
    P99_TAIL,
};

/// The production rate window: one SDK client at the production defaults
/// (heartbeat period 3.5 s) sends 1,028 heartbeats an hour, so an hour is the
/// shortest window in which a single worker gives trigger 1 its
/// [`MIN_SAMPLES_P99`] corrected samples.
pub const DEFAULT_WINDOW: Duration = Duration::from_secs(3600);

/// Trigger 5: the share of CFS periods throttled at or below which a
/// container counts as unthrottled (off Autopilot's CPU limits).
pub const UNTHROTTLED_SHARE_MAX: f64 = 0.01;

/// The corrected heartbeat RTT histogram (SDK), without the `_bucket`/`_count` suffix.
pub const RTT_CORRECTED: &str = "lock_heartbeat_rtt_corrected_seconds";

/// What the checks are parametrised by: the lock configuration in force and
/// how the rules look at it.
#[derive(Clone, Debug, PartialEq)]
pub struct Params {
    /// `lock.default.ttl`: the lease every acquire asks for.
    pub lease: Duration,
    /// `lock.session.ttl`.
    pub session_ttl: Duration,
    /// `lock.client.safety-margin` (a fixed margin, `0 ≤ m < 1`).
    pub margin: f64,
    /// The worst-case rail hop D4 requires (`rail.read.timeout + 2 s`).
    pub hop: Duration,
    /// `lock.clock.offset-max` (θ_max).
    pub offset_max: Duration,
    /// The rate window `W` of every `increase`/`rate`/`_over_time`.
    pub window: Duration,
    /// Label matchers added to every selector (`namespace="payments"`), may be empty.
    pub selector: String,
}

impl Default for Params {
    /// The production defaults: ADR-006's 30 s lease, 15 s session, margin
    /// 0.30, hop 5 s + 2 s, C4's 50 ms offset bound, a one-hour window.
    fn default() -> Self {
        let margin = match MarginPolicy::default() {
            MarginPolicy::Fixed(m) => m,
            MarginPolicy::Adaptive { ceiling, .. } => ceiling,
        };
        Params {
            lease: PRODUCTION_LEASE,
            session_ttl: PRODUCTION_SESSION_TTL,
            margin,
            hop: PRODUCTION_RAIL_READ_TIMEOUT + D4_EXTRA,
            offset_max: GraceParams::default().offset_max,
            window: DEFAULT_WINDOW,
            selector: String::new(),
        }
    }
}

impl Params {
    /// Trigger 1's budget in seconds (whole µs, as the SDK's bucket boundary).
    pub fn budget_secs(&self) -> f64 {
        trigger1_budget_us(self.lease, self.session_ttl, self.margin) as f64 / 1e6
    }

    /// The `le` label of trigger 1's budget bucket, as the exposition spells it.
    pub fn budget_le(&self) -> String {
        budget_le(self.lease, self.session_ttl, self.margin)
    }

    /// Trigger 3's static part (no RTT): usable window and heartbeat period.
    pub fn d4(&self) -> D4Window {
        D4Window::from_parts(
            self.lease.as_millis() as u64,
            self.session_ttl.as_millis() as u64,
            self.margin,
            0.0,
            self.hop.as_secs_f64() * 1e3,
            fencepost_sdk::lease::HEARTBEAT_DIVISOR,
        )
    }

    /// `min(lease, session TTL)` in seconds.
    fn base_secs(&self) -> f64 {
        self.lease.min(self.session_ttl).as_secs_f64()
    }

    /// The window as PromQL spells a range (`1h`, `5m`, `30s`).
    pub fn range(&self) -> String {
        prom_duration(self.window)
    }

    /// `metric{S,extra}`: a selector with the user's matchers and `extra`.
    pub fn sel(&self, metric: &str, extra: &[&str]) -> String {
        let mut m: Vec<&str> = Vec::new();
        if !self.selector.trim().is_empty() {
            m.push(self.selector.trim());
        }
        m.extend_from_slice(extra);
        if m.is_empty() {
            metric.to_owned()
        } else {
            format!("{metric}{{{}}}", m.join(","))
        }
    }

    /// `absent_over_time(metric{S,extra}[W])`: no such series was scraped at
    /// any time in the window (a target that has gone still counts for the
    /// window it was scraped in, where an instant `absent()` would not).
    fn absent_over_window(&self, metric: &str, extra: &[&str]) -> String {
        format!(
            "absent_over_time({}[{}])",
            self.sel(metric, extra),
            self.range()
        )
    }

    /// `sum(increase(metric{S,extra}[W]))`.
    fn sum_increase(&self, metric: &str, extra: &[&str]) -> String {
        format!(
            "sum(increase({}[{}]))",
            self.sel(metric, extra),
            self.range()
        )
    }
}

/// A duration as Prometheus writes one (`1h`, `10m`, `1500ms`, `0s`).
pub fn prom_duration(d: Duration) -> String {
    if d.is_zero() {
        "0s".to_owned()
    } else {
        format_duration(d)
    }
}

/// A number as PromQL literal (Rust's shortest round-trip decimal: `1.5`, `0.01`, `1000`).
pub fn num(v: f64) -> String {
    format!("{v}")
}

/// One recorded series of a check: `fencepost:<check>:<name>`.
#[derive(Clone, Debug, PartialEq)]
pub struct Term {
    /// The last part of the recording rule's name (`observed`, `evidence`, …).
    pub name: &'static str,
    /// The PromQL.
    pub expr: String,
}

/// A state of a check in which it says neither fired nor ok because the
/// inputs do not fit it (a separate, non-paging alert).
#[derive(Clone, Debug, PartialEq)]
pub struct NotEvaluated {
    /// The alert's name suffix (`Misconfigured`, `NotEvaluated`).
    pub suffix: &'static str,
    /// Holds when non-empty.
    pub expr: String,
    /// Why, in words (the live table's detail, the alert's description).
    pub reason: String,
}

/// One production check: PromQL for each part and the words around it.
#[derive(Clone, Debug, PartialEq)]
pub struct Check {
    /// The catalog entry: id, the ADR's (or essay's) wording, the action verbatim.
    pub trigger: &'static Trigger,
    /// Where the check comes from (`ADR-006 §6.5 trigger 1`, `the lease-safety essay`).
    pub source: &'static str,
    /// The alert's base name (`FencepostRttP99VsMargin`).
    pub alert: &'static str,
    /// The production rule in words, with this configuration's numbers.
    pub rule: String,
    /// Unit of the live table's observed and threshold.
    pub unit: &'static str,
    /// observed (PromQL, base units: seconds, fractions) × scale = observed in `unit`.
    pub scale: f64,
    /// The threshold in `unit`.
    pub threshold: f64,
    /// The observed value.
    pub observed: String,
    /// What the observed value (and the fired alert's `$value`) is, with its base unit.
    pub value_words: &'static str,
    /// How much data stands behind it (samples, attempts, periods, series).
    pub evidence: String,
    /// What `evidence` counts.
    pub evidence_unit: &'static str,
    /// Further recorded terms.
    pub extra: Vec<Term>,
    /// Fired when non-empty; its value is the observed value (base units).
    pub fired: String,
    /// Insufficient data when non-empty (and not fired).
    pub insufficient: String,
    /// The check's not-evaluated state, if it has one.
    pub not_evaluated: Option<NotEvaluated>,
}

impl Check {
    /// The id (`rtt_p99_vs_margin`).
    pub fn id(&self) -> &'static str {
        self.trigger.id
    }

    /// The ADR's (or essay's) action, verbatim.
    pub fn action(&self) -> &'static str {
        self.trigger.action
    }

    /// Every recorded term: observed, evidence, then the extras.
    pub fn terms(&self) -> Vec<Term> {
        let mut t = vec![
            Term {
                name: "observed",
                expr: self.observed.clone(),
            },
            Term {
                name: "evidence",
                expr: self.evidence.clone(),
            },
        ];
        t.extend(self.extra.iter().cloned());
        t
    }
}

/// `(a) and on() (b)`: `a` where `b` holds, both label-free aggregates.
fn and(a: &str, b: &str) -> String {
    format!("({a}) and on() ({b})")
}

/// `(a) or on() (b)`.
fn or(a: &str, b: &str) -> String {
    format!("({a}) or on() ({b})")
}

/// Trigger 1's pieces: samples of the SDKs carrying the budget bucket, those
/// above it, the p99, and the misconfigured condition.
struct Rtt {
    n: String,
    over: String,
    p99: String,
    ok: String,
    misconfigured: String,
    present: String,
}

fn rtt(p: &Params) -> Rtt {
    let w = p.range();
    let le = format!("le=\"{}\"", p.budget_le());
    let bucket = format!("{RTT_CORRECTED}_bucket");
    let count = format!("{RTT_CORRECTED}_count");
    let budget_bucket = p.sel(&bucket, &[&le]);
    // The series that carried the budget's bucket at any time in the window
    // (not only now: a worker that has exited still counts for its window).
    let budget_seen = format!("last_over_time({budget_bucket}[{w}])");
    let n = format!(
        "sum(increase({}[{w}]) and ignoring(le) {budget_seen})",
        p.sel(&count, &[])
    );
    let within = format!("sum(increase({budget_bucket}[{w}]))");
    let over = format!("({n} - {within})");
    let p99 = format!(
        "histogram_quantile({}, sum by (le) (rate({}[{w}]) and ignoring(le) {budget_seen}))",
        num(1.0 - P99_TAIL),
        p.sel(&bucket, &[])
    );
    let min = MIN_SAMPLES_P99;
    let ok = and(
        &format!("{n} >= {min}"),
        &format!("{over} <= {} * {n}", num(P99_TAIL)),
    );
    let misconfigured = format!(
        "count(last_over_time({}[{w}]) unless ignoring(le) {budget_seen})",
        p.sel(&count, &[])
    );
    Rtt {
        n,
        over,
        p99,
        ok,
        misconfigured,
        present: format!("{}[{w}]", p.sel(&count, &[])),
    }
}

fn rtt_p99_vs_margin(p: &Params) -> Check {
    let r = rtt(p);
    let min = MIN_SAMPLES_P99;
    let floor = OVER_BUDGET_FLOOR;
    let tail = num(P99_TAIL);
    let fired_cond = or(
        &and(
            &format!("{} >= {min}", r.n),
            &format!("{} > {tail} * {}", r.over, r.n),
        ),
        &and(
            &format!("{} < {min}", r.n),
            &format!("{} > {floor}", r.over),
        ),
    );
    let insufficient = or(
        &and(
            &format!("{} < {min}", r.n),
            &format!("{} <= {floor}", r.over),
        ),
        &format!("absent_over_time({})", r.present),
    );
    let le = p.budget_le();
    Check {
        trigger: &TRIGGERS[0],
        source: "ADR-006 §6.5 trigger 1",
        alert: "FencepostRttP99VsMargin",
        rule: format!(
            "budget = min(lease {}, session TTL {}) × margin {} / {} = {} s (bucket le=\"{le}\"); \
             over the last {}, n = corrected heartbeat samples of the SDKs whose histogram has \
             that bucket, over = those above it; fired when n ≥ {min} and over > {} % of n, or \
             n < {min} and over > {floor} (any {min}-sample p99 would exceed the budget); ok \
             when n ≥ {min} and over ≤ {} % of n; insufficient_data otherwise; misconfigured \
             when an SDK's histogram has no le=\"{le}\" bucket (built for another configuration)",
            prom_duration(p.lease),
            prom_duration(p.session_ttl),
            num(p.margin),
            num(BUDGET_DIVISOR),
            num(p.budget_secs()),
            p.range(),
            num(P99_TAIL * 100.0),
            num(P99_TAIL * 100.0),
        ),
        unit: "ms",
        scale: 1e3,
        threshold: p.budget_secs() * 1e3,
        observed: r.p99.clone(),
        value_words: "the corrected p99 heartbeat RTT, s",
        evidence: r.n.clone(),
        evidence_unit: "corrected samples",
        extra: vec![Term {
            name: "over_budget",
            expr: r.over.clone(),
        }],
        fired: and(&r.p99, &fired_cond),
        insufficient,
        not_evaluated: Some(NotEvaluated {
            suffix: "Misconfigured",
            expr: r.misconfigured,
            reason: format!(
                "misconfigured: an SDK's {RTT_CORRECTED} has no le=\"{le}\" bucket (its \
                 buckets were built for another lease, session TTL or margin), so the samples \
                 above the budget cannot be counted"
            ),
        }),
    }
}

fn margin_dominant_limiter(p: &Params) -> Check {
    let abandoned = p.sum_increase("lock_lease_abandoned_total", &[]);
    let lost = format!(
        "({abandoned} + {} + {})",
        p.sum_increase("lock_handles_lost_total", &[]),
        p.sum_increase("lock_acquires_total", &["outcome=\"failed\""])
    );
    let attempts = p.sum_increase("lock_acquires_total", &[]);
    let share = format!("{abandoned} / {lost}");
    let fired = and(
        &and(
            &format!("{share} >= {}", num(MARGIN_SHARE_MIN)),
            &format!("{lost} / {attempts} >= {}", num(LOST_WORK_MIN)),
        ),
        &format!("{attempts} > 0"),
    );
    Check {
        trigger: &TRIGGERS[1],
        source: "ADR-006 §6.5 trigger 2",
        alert: "FencepostMarginDominantLimiter",
        rule: format!(
            "over the last {}: lost work = lock_lease_abandoned (the margin's refusals) + \
             lock_handles_lost + lock_acquires{{outcome=\"failed\"}}; fired when the abandoned \
             are ≥ {} % of lost work and lost work ≥ {} % of lock_acquires; insufficient_data \
             without acquires",
            p.range(),
            num(MARGIN_SHARE_MIN * 100.0),
            num(LOST_WORK_MIN * 100.0),
        ),
        unit: "% of lost work",
        scale: 100.0,
        threshold: MARGIN_SHARE_MIN * 100.0,
        observed: or(
            &format!("{abandoned} / ({lost} > 0)"),
            &format!("{attempts} * 0"),
        ),
        value_words: "the margin's share of lost work (0 to 1)",
        evidence: attempts.clone(),
        evidence_unit: "acquires",
        extra: vec![Term {
            name: "lost_work",
            expr: lost.clone(),
        }],
        fired,
        insufficient: or(
            &format!("{attempts} == 0"),
            &p.absent_over_window("lock_acquires_total", &[]),
        ),
        not_evaluated: None,
    }
}

fn d4_unsatisfiable(p: &Params) -> Check {
    let w = p.range();
    let d4 = p.d4();
    let p50 = format!(
        "histogram_quantile(0.5, sum by (le) (rate({}[{w}])))",
        p.sel(&format!("{RTT_CORRECTED}_bucket"), &[])
    );
    let usable = num(d4.usable_ms / 1e3);
    let period = num(d4.period_ms / 1e3);
    let before = format!("{usable} - {period} - {p50}");
    let hop = num(p.hop.as_secs_f64());
    let samples = p.sum_increase(&format!("{RTT_CORRECTED}_count"), &[]);
    Check {
        trigger: &TRIGGERS[2],
        source: "ADR-006 §6.5 trigger 3",
        alert: "FencepostD4Unsatisfiable",
        rule: format!(
            "usable U = min(lease, session TTL) × (1 − margin) = {usable} s; heartbeat period P \
             = {period} s (the SDK's); just before a heartbeat's reply U − P − corrected p50 \
             (over the last {w}); fired when that is ≤ the worst-case rail hop {hop} s (D4 then \
             refuses in part of every period); insufficient_data without corrected samples"
        ),
        unit: "ms",
        scale: 1e3,
        threshold: p.hop.as_secs_f64() * 1e3,
        observed: before.clone(),
        value_words: "the window left just before a heartbeat's reply, s",
        evidence: samples.clone(),
        evidence_unit: "corrected samples",
        extra: Vec::new(),
        fired: format!("{before} <= {hop}"),
        insufficient: or(
            &format!("{samples} == 0"),
            &p.absent_over_window(&format!("{RTT_CORRECTED}_count"), &[]),
        ),
        not_evaluated: None,
    }
}

fn fenced_out_with_client_check(p: &Params) -> Check {
    let fenced = p.sum_increase("lock_fenced_out_total", &[]);
    Check {
        trigger: &TRIGGERS[3],
        source: "ADR-006 §6.5 trigger 4",
        alert: "FencepostFencedOut",
        rule: format!(
            "fired when the rail-stub's lock_fenced_out (fence 1 and 2) grew over the last {}: \
             production cannot trace a refusal to a worker that believed it held the lease, so \
             any fence-out fires; insufficient_data when no lock_fenced_out series is scraped",
            p.range()
        ),
        unit: "fence-outs",
        scale: 1.0,
        threshold: 0.0,
        observed: fenced.clone(),
        value_words: "fence-outs",
        evidence: format!(
            "count(last_over_time({}[{}]))",
            p.sel("lock_fenced_out_total", &[]),
            p.range()
        ),
        evidence_unit: "fence counters",
        extra: Vec::new(),
        fired: format!("{fenced} > 0"),
        insufficient: p.absent_over_window("lock_fenced_out_total", &[]),
        not_evaluated: None,
    }
}

fn autopilot_throttling(p: &Params) -> Check {
    let r = rtt(p);
    let cfs = ["container!=\"\""];
    let throttled = p.sum_increase("container_cpu_cfs_throttled_periods_total", &cfs);
    let periods = p.sum_increase("container_cpu_cfs_periods_total", &cfs);
    let share = format!("{throttled} / {periods}");
    let needed = format!(
        "{} * {} / {}",
        num(BUDGET_DIVISOR),
        r.p99,
        num(p.base_secs())
    );
    let min = MIN_SAMPLES_P99;
    let fired = and(
        &and(&needed, &r.ok),
        &and(
            &format!("{share} <= {}", num(UNTHROTTLED_SHARE_MAX)),
            &format!("{periods} >= {min}"),
        ),
    );
    let insufficient = or(
        &or(&format!("{periods} < {min}"), &format!("{} < {min}", r.n)),
        &format!("absent({})", r.n),
    );
    Check {
        trigger: &TRIGGERS[4],
        source: "ADR-006 §6.5 trigger 5",
        alert: "FencepostAutopilotThrottling",
        rule: format!(
            "from cAdvisor over the last {}: the containers' throttled share of CFS periods; \
             margin needed = {} × corrected p99 / min(lease, session TTL); fired when the \
             containers run unthrottled (≤ {} % of ≥ {min} CFS periods throttled) and trigger 1 \
             is ok (the margin in force {} covers more than the RTT needs: it may be reducible); \
             insufficient_data below {min} periods or {min} corrected samples; not_evaluated \
             without cAdvisor series",
            p.range(),
            num(BUDGET_DIVISOR),
            num(UNTHROTTLED_SHARE_MAX * 100.0),
            num(p.margin),
        ),
        unit: "margin",
        scale: 1.0,
        threshold: p.margin,
        observed: needed,
        value_words: "the margin trigger 1's budget needs for the corrected p99",
        evidence: periods.clone(),
        evidence_unit: "CFS periods",
        extra: vec![Term {
            name: "throttled_share",
            expr: share,
        }],
        fired,
        insufficient,
        not_evaluated: Some(NotEvaluated {
            suffix: "NotEvaluated",
            expr: p.absent_over_window("container_cpu_cfs_periods_total", &cfs),
            reason: "no cAdvisor container_cpu_cfs_periods_total series: CPU throttling is \
                     not measured here (a lab run, or cAdvisor not scraped)"
                .to_owned(),
        }),
    }
}

fn clock_offset_bound(p: &Params) -> Check {
    let w = p.range();
    let maxerr = format!(
        "max(max_over_time({}[{w}]))",
        p.sel("lock_clock_maxerror_seconds", &[])
    );
    let unsync = format!(
        "min(min_over_time({}[{w}])) == 0",
        p.sel("lock_clock_synchronised", &[])
    );
    let theta = num(p.offset_max.as_secs_f64());
    Check {
        trigger: &CLOCK_CHECK,
        source: "the lease-safety essay's clock check (not ADR-006's)",
        alert: "FencepostClockOffsetBound",
        rule: format!(
            "the lease-safety essay's check, observed maxerror > lock.clock.offset-max: fired \
             when the largest lock_clock_maxerror_seconds any SDK or lock-server reported over \
             the last {w} exceeds {theta} s, or one reported lock_clock_synchronised 0; \
             insufficient_data when none reports it"
        ),
        unit: "ms",
        scale: 1e3,
        threshold: p.offset_max.as_secs_f64() * 1e3,
        observed: maxerr.clone(),
        value_words: "the largest clock maxerror, s",
        evidence: format!(
            "count(max_over_time({}[{w}]))",
            p.sel("lock_clock_maxerror_seconds", &[])
        ),
        evidence_unit: "clocks",
        extra: Vec::new(),
        fired: or(&format!("{maxerr} > {theta}"), &and(&maxerr, &unsync)),
        insufficient: format!(
            "absent_over_time({}[{w}])",
            p.sel("lock_clock_maxerror_seconds", &[])
        ),
        not_evaluated: None,
    }
}

/// The six checks for `p`, in order: ADR-006 §6.5's five, then the clock check.
pub fn checks(p: &Params) -> Vec<Check> {
    vec![
        rtt_p99_vs_margin(p),
        margin_dominant_limiter(p),
        d4_unsatisfiable(p),
        fenced_out_with_client_check(p),
        autopilot_throttling(p),
        clock_offset_bound(p),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_are_production_and_budget_is_a_bucket() {
        let p = Params::default();
        assert_eq!(p.lease, Duration::from_secs(30));
        assert_eq!(p.session_ttl, Duration::from_secs(15));
        assert_eq!(p.margin, 0.3);
        assert_eq!(p.hop, Duration::from_secs(7));
        assert_eq!(p.offset_max, Duration::from_millis(50));
        assert_eq!(p.budget_le(), "1.5");
        assert_eq!(num(1.0 - P99_TAIL), "0.99");
        assert_eq!(p.range(), "1h");
        let d4 = p.d4();
        assert_eq!((d4.usable_ms, d4.period_ms), (10_500.0, 3_500.0));
    }

    #[test]
    fn six_checks_with_ids_in_order_and_the_selector_everywhere() {
        let p = Params {
            selector: "namespace=\"pay\"".to_owned(),
            ..Params::default()
        };
        let c = checks(&p);
        let ids: Vec<&str> = c.iter().map(Check::id).collect();
        let mut want: Vec<&str> = TRIGGERS.iter().map(|t| t.id).collect();
        want.push(CLOCK_CHECK.id);
        assert_eq!(ids, want);
        for check in &c {
            for e in [&check.observed, &check.fired, &check.insufficient] {
                assert!(e.contains("namespace=\"pay\""), "{}: {e}", check.id());
            }
        }
        assert!(c[0].fired.contains("le=\"1.5\""));
        assert_eq!(c[0].action(), TRIGGERS[0].action);
    }

    #[test]
    fn prometheus_durations() {
        assert_eq!(prom_duration(Duration::ZERO), "0s");
        assert_eq!(prom_duration(Duration::from_secs(600)), "10m");
        assert_eq!(prom_duration(Duration::from_millis(1500)), "1500ms");
    }
}
