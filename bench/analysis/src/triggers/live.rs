//! The six checks as production rules over Prometheus: ADR-006 §6.5's five
//! triggers plus the lease-safety essay's clock check, each as PromQL over the
//! metrics the SDK, the lock-server, the rail-stub and cAdvisor export.
//!
//! This module is the one definition both `bench rules` (the recording and
//! alerting rules file, [`super::rules_file`]) and `bench triggers
//! --prometheus` (instant queries, [`super::live_verdict`]) are built from.
//!
//! Each [`Check`] has PromQL for its observed value, its evidence (how many
//! samples stand behind it) and further recorded terms: the recording rules
//! `fencepost:<check>:<term>`. Its fired condition, its insufficient-data
//! condition and optionally a "not evaluated" condition (trigger 1: the SDK's
//! buckets do not carry the budget, "misconfigured"; trigger 5: no cAdvisor
//! series) are written over those recorded names: that is the alert's `expr`.
//! The live query is the same condition with every name replaced by its
//! rule's PromQL ([`super::recorded::expand`]), so the two agree by
//! construction. A condition holds when its query returns a non-empty
//! vector. Thresholds are the constants the lab rules use ([`super::rules`]).

use std::time::Duration;

use bench_core::timebase::{
    D4_EXTRA, PRODUCTION_LEASE, PRODUCTION_RAIL_READ_TIMEOUT, PRODUCTION_SESSION_TTL,
};
use fencepost_api::GraceParams;
use fencepost_api::buckets::{budget_le, trigger1_budget_us};
use fencepost_api::duration::format_duration;
use fencepost_sdk::MarginPolicy;

use super::catalog::Trigger;
use super::rules::D4Window;

/// The production rate window: one SDK client at the production defaults
/// (heartbeat period 3.5 s) sends 1,028 heartbeats an hour, so an hour is the
/// shortest window in which a single worker gives trigger 1 its
/// [`MIN_SAMPLES_P99`](super::rules::MIN_SAMPLES_P99) corrected samples.
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
    pub(super) fn base_secs(&self) -> f64 {
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
    pub(super) fn absent_over_window(&self, metric: &str, extra: &[&str]) -> String {
        format!(
            "absent_over_time({}[{}])",
            self.sel(metric, extra),
            self.range()
        )
    }

    /// `sum(increase(metric{S,extra}[W]))`.
    pub(super) fn sum_increase(&self, metric: &str, extra: &[&str]) -> String {
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
    /// The PromQL; it may name series recorded before it.
    pub expr: String,
}

/// A state of a check in which it says neither fired nor ok because the
/// inputs do not fit it (a separate, non-paging alert).
#[derive(Clone, Debug, PartialEq)]
pub struct NotEvaluated {
    /// The alert's name suffix (`Misconfigured`, `NotEvaluated`).
    pub suffix: &'static str,
    /// Holds when non-empty: the alert's `expr`, over recorded names.
    pub rule: String,
    /// [`NotEvaluated::rule`] self-contained (the live query).
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
    /// Over recorded names: the alert's `expr`.
    pub fired_rule: String,
    /// Insufficient data when non-empty (and not fired). Over recorded names.
    pub insufficient_rule: String,
    /// [`Check::fired_rule`] self-contained (the live query).
    pub fired: String,
    /// [`Check::insufficient_rule`] self-contained (the live query).
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

#[cfg(test)]
mod tests {
    use super::super::rules::P99_TAIL;
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
    fn prometheus_durations() {
        assert_eq!(prom_duration(Duration::ZERO), "0s");
        assert_eq!(prom_duration(Duration::from_secs(600)), "10m");
        assert_eq!(prom_duration(Duration::from_millis(1500)), "1500ms");
    }
}
