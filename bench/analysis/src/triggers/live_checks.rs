//! The six production checks' PromQL ([`checks`]): ADR-006 §6.5's five
//! triggers and the lease-safety essay's clock check, each with its recorded
//! terms, its conditions over the recorded names (the alerts' `expr`) and the
//! same conditions self-contained (the live queries, [`super::recorded`]).

use super::catalog::{CLOCK_CHECK, TRIGGERS};
use super::live::{
    Check, NotEvaluated, Params, RTT_CORRECTED, Term, UNTHROTTLED_SHARE_MAX, num, prom_duration,
};
use super::recorded::{expand, recorded};
use super::rules::{
    BUDGET_DIVISOR, LOST_WORK_MIN, MARGIN_SHARE_MIN, MIN_SAMPLES_P99, OVER_BUDGET_FLOOR, P99_TAIL,
};

/// `(a) and on() (b)`: `a` where `b` holds, both label-free aggregates.
fn and(a: &str, b: &str) -> String {
    format!("({a}) and on() ({b})")
}

/// `(a) or on() (b)`.
fn or(a: &str, b: &str) -> String {
    format!("({a}) or on() ({b})")
}

/// Trigger 1's pieces: samples of the SDKs carrying the budget bucket, those
/// above it, the p99, and the misconfigured count.
struct Rtt {
    n: String,
    over: String,
    p99: String,
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
    let misconfigured = format!(
        "count(last_over_time({}[{w}]) unless ignoring(le) {budget_seen})",
        p.sel(&count, &[])
    );
    Rtt {
        n,
        over,
        p99,
        misconfigured,
        present: format!("{}[{w}]", p.sel(&count, &[])),
    }
}

/// Trigger 1's recorded names: corrected samples, those over the budget, and
/// the samples while trigger 1 says ok (absent otherwise).
struct RttNames {
    samples: String,
    over: String,
    ok: String,
}

impl RttNames {
    fn new() -> Self {
        let id = TRIGGERS[0].id;
        RttNames {
            samples: recorded(id, "evidence"),
            over: recorded(id, "over_budget"),
            ok: recorded(id, "ok_samples"),
        }
    }

    /// Trigger 1 is ok: enough samples, and at most the tail above the
    /// budget (the value is the samples).
    fn ok_expr(&self) -> String {
        let (n, over) = (&self.samples, &self.over);
        and(
            &format!("{n} >= {MIN_SAMPLES_P99}"),
            &format!("{over} <= {} * {n}", num(P99_TAIL)),
        )
    }
}

fn rtt_p99_vs_margin(p: &Params) -> Check {
    let r = rtt(p);
    let names = RttNames::new();
    let id = TRIGGERS[0].id;
    let (n, over) = (&names.samples, &names.over);
    let limit = recorded(id, "over_budget_limit");
    let misconfigured = recorded(id, "misconfigured_sdks");
    let min = MIN_SAMPLES_P99;
    let floor = OVER_BUDGET_FLOOR;
    // How many samples may lie above the budget: the p99's tail of n from
    // `min` samples on; below, the floor (any more and every `min`-sample
    // p99 would exceed the budget).
    let limit_expr = or(
        &and(
            &format!("{} * {n}", num(P99_TAIL)),
            &format!("{n} >= {min}"),
        ),
        &and(&format!("vector({floor})"), &format!("{n} < {min}")),
    );
    let insufficient = or(
        &and(&format!("{n} < {min}"), &format!("{over} <= {floor}")),
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
        extra: vec![
            Term {
                name: "over_budget",
                expr: r.over.clone(),
            },
            Term {
                name: "over_budget_limit",
                expr: limit_expr,
            },
            Term {
                name: "misconfigured_sdks",
                expr: r.misconfigured,
            },
            Term {
                name: "ok_samples",
                expr: names.ok_expr(),
            },
        ],
        fired_rule: and(&recorded(id, "observed"), &format!("{over} > {limit}")),
        insufficient_rule: insufficient,
        fired: String::new(),
        insufficient: String::new(),
        not_evaluated: Some(NotEvaluated {
            suffix: "Misconfigured",
            rule: format!("{misconfigured} > 0"),
            expr: String::new(),
            reason: format!(
                "misconfigured: an SDK's {RTT_CORRECTED} has no le=\"{le}\" bucket (its \
                 buckets were built for another lease, session TTL or margin), so the samples \
                 above the budget cannot be counted"
            ),
        }),
    }
}

fn margin_dominant_limiter(p: &Params) -> Check {
    let id = TRIGGERS[1].id;
    let abandoned = p.sum_increase("lock_lease_abandoned_total", &[]);
    let lost = format!(
        "({abandoned} + {} + {})",
        p.sum_increase("lock_handles_lost_total", &[]),
        p.sum_increase("lock_acquires_total", &["outcome=\"failed\""])
    );
    let attempts = p.sum_increase("lock_acquires_total", &[]);
    let (share, l, n) = (
        recorded(id, "observed"),
        recorded(id, "lost_work"),
        recorded(id, "evidence"),
    );
    // Where lost work is at least LOST_WORK_MIN (> 0) of the acquires, it is
    // above 0, so the observed share is exactly abandoned / lost work.
    const _: () = assert!(LOST_WORK_MIN > 0.0);
    let fired = and(
        &and(
            &format!("{share} >= {}", num(MARGIN_SHARE_MIN)),
            &format!("{l} / {n} >= {}", num(LOST_WORK_MIN)),
        ),
        &format!("{n} > 0"),
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
        fired_rule: fired,
        insufficient_rule: or(
            &format!("{n} == 0"),
            &p.absent_over_window("lock_acquires_total", &[]),
        ),
        fired: String::new(),
        insufficient: String::new(),
        not_evaluated: None,
    }
}

fn d4_unsatisfiable(p: &Params) -> Check {
    let id = TRIGGERS[2].id;
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
        observed: before,
        value_words: "the window left just before a heartbeat's reply, s",
        evidence: samples,
        evidence_unit: "corrected samples",
        extra: Vec::new(),
        fired_rule: format!("{} <= {hop}", recorded(id, "observed")),
        insufficient_rule: or(
            &format!("{} == 0", recorded(id, "evidence")),
            &p.absent_over_window(&format!("{RTT_CORRECTED}_count"), &[]),
        ),
        fired: String::new(),
        insufficient: String::new(),
        not_evaluated: None,
    }
}

fn fenced_out_with_client_check(p: &Params) -> Check {
    let id = TRIGGERS[3].id;
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
        observed: fenced,
        value_words: "fence-outs",
        evidence: format!(
            "count(last_over_time({}[{}]))",
            p.sel("lock_fenced_out_total", &[]),
            p.range()
        ),
        evidence_unit: "fence counters",
        extra: Vec::new(),
        fired_rule: format!("{} > 0", recorded(id, "observed")),
        insufficient_rule: p.absent_over_window("lock_fenced_out_total", &[]),
        fired: String::new(),
        insufficient: String::new(),
        not_evaluated: None,
    }
}

fn autopilot_throttling(p: &Params) -> Check {
    let id = TRIGGERS[4].id;
    let r = rtt(p);
    let t1 = RttNames::new();
    let cfs = ["container!=\"\""];
    let throttled = p.sum_increase("container_cpu_cfs_throttled_periods_total", &cfs);
    let periods = p.sum_increase("container_cpu_cfs_periods_total", &cfs);
    let needed = format!(
        "{} * {} / {}",
        num(BUDGET_DIVISOR),
        r.p99,
        num(p.base_secs())
    );
    let min = MIN_SAMPLES_P99;
    let (share, n) = (recorded(id, "throttled_share"), recorded(id, "evidence"));
    let fired = and(
        &and(&recorded(id, "observed"), &t1.ok),
        &and(
            &format!("{share} <= {}", num(UNTHROTTLED_SHARE_MAX)),
            &format!("{n} >= {min}"),
        ),
    );
    let insufficient = or(
        &or(&format!("{n} < {min}"), &format!("{} < {min}", t1.samples)),
        &format!("absent({})", t1.samples),
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
            expr: format!("{throttled} / {periods}"),
        }],
        fired_rule: fired,
        insufficient_rule: insufficient,
        fired: String::new(),
        insufficient: String::new(),
        not_evaluated: Some(NotEvaluated {
            suffix: "NotEvaluated",
            rule: p.absent_over_window("container_cpu_cfs_periods_total", &cfs),
            expr: String::new(),
            reason: "no cAdvisor container_cpu_cfs_periods_total series: CPU throttling is \
                     not measured here (a lab run, or cAdvisor not scraped)"
                .to_owned(),
        }),
    }
}

fn clock_offset_bound(p: &Params) -> Check {
    let id = CLOCK_CHECK.id;
    let w = p.range();
    let maxerr = format!(
        "max(max_over_time({}[{w}]))",
        p.sel("lock_clock_maxerror_seconds", &[])
    );
    let theta = num(p.offset_max.as_secs_f64());
    let observed = recorded(id, "observed");
    let synchronised = recorded(id, "synchronised_min");
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
        observed: maxerr,
        value_words: "the largest clock maxerror, s",
        evidence: format!(
            "count(max_over_time({}[{w}]))",
            p.sel("lock_clock_maxerror_seconds", &[])
        ),
        evidence_unit: "clocks",
        extra: vec![Term {
            name: "synchronised_min",
            expr: format!(
                "min(min_over_time({}[{w}]))",
                p.sel("lock_clock_synchronised", &[])
            ),
        }],
        fired_rule: or(
            &format!("{observed} > {theta}"),
            &and(&observed, &format!("{synchronised} == 0")),
        ),
        insufficient_rule: format!(
            "absent_over_time({}[{w}])",
            p.sel("lock_clock_maxerror_seconds", &[])
        ),
        fired: String::new(),
        insufficient: String::new(),
        not_evaluated: None,
    }
}

/// The six checks for `p`, in order: ADR-006 §6.5's five, then the clock
/// check; each condition both over recorded names (the alerts) and
/// self-contained (the live queries).
pub fn checks(p: &Params) -> Vec<Check> {
    let mut checks = vec![
        rtt_p99_vs_margin(p),
        margin_dominant_limiter(p),
        d4_unsatisfiable(p),
        fenced_out_with_client_check(p),
        autopilot_throttling(p),
        clock_offset_bound(p),
    ];
    let rules: Vec<(String, String)> = checks
        .iter()
        .flat_map(|c| {
            c.terms()
                .into_iter()
                .map(move |t| (recorded(c.id(), t.name), t.expr))
        })
        .collect();
    for c in &mut checks {
        c.fired = expand(&c.fired_rule, &rules);
        c.insufficient = expand(&c.insufficient_rule, &rules);
        if let Some(n) = &mut c.not_evaluated {
            n.expr = expand(&n.rule, &rules);
        }
    }
    checks
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn every_alert_is_a_short_condition_over_recorded_names() {
        for check in checks(&Params::default()) {
            let mut rules = vec![&check.fired_rule, &check.insufficient_rule];
            rules.extend(check.not_evaluated.as_ref().map(|n| &n.rule));
            for rule in rules {
                assert!(
                    rule.len() <= 250,
                    "{}: {} characters: {rule}",
                    check.id(),
                    rule.len()
                );
                assert!(
                    rule.contains("fencepost:") || rule.starts_with("absent_over_time("),
                    "{}: {rule}",
                    check.id()
                );
            }
        }
    }

    #[test]
    fn the_live_queries_name_no_recorded_series() {
        for check in checks(&Params::default()) {
            let mut queries = vec![&check.fired, &check.insufficient];
            queries.extend(check.not_evaluated.as_ref().map(|n| &n.expr));
            for q in queries {
                assert!(!q.contains("fencepost:"), "{}: {q}", check.id());
            }
        }
    }
}
