//! The recommendation's rules on hand-built summaries: intervals, ties, the
//! margin needed (trigger 1), adaptive points.

use super::*;
use crate::stats::QuantileCi;

fn point(margin: f64, tps: &[f64]) -> SummaryRow {
    let i = Interval::of(tps, 0.0, f64::INFINITY);
    SummaryRow {
        backend: "fencepost".into(),
        margin_policy: "fixed".into(),
        lease_ms: 1000,
        session_ttl_ms: 500,
        margin,
        group: format!("ttl=1s_margin={margin:.2}"),
        n_repeats: tps.len() as u32,
        seeds: String::new(),
        margin_effective_mean: margin,
        throughput_median: i.median,
        throughput_mean: i.mean,
        throughput_min: i.min,
        throughput_max: i.max,
        throughput_ci95_lo: i.lo,
        throughput_ci95_hi: i.hi,
        ci_method: "t".into(),
        abandonment_median: 0.0,
        abandonment_ci95_lo: 0.0,
        abandonment_ci95_hi: 0.0,
        abandoned_insufficient_lease: 0,
        attempts: 100,
        payouts_paid: 100,
        hb_attempts: 100,
        hb_timeouts: 0,
        session_lost: 0,
        hb_corrected_count: 20_000,
        hb_rtt_corrected_p50_us: 500,
        hb_rtt_corrected_p99_us: 2_000,
        hb_rtt_corrected_p999_us: 5_000,
        hb_rtt_corrected_p999_lo_us: 4_000,
        hb_rtt_corrected_p999_hi_us: 6_000,
        hb_rtt_p99_us: 2_000,
        hb_rtt_p999_us: 5_000,
        quantile_ci_method: "test".into(),
        m_min: 0.03,
        m_min_ci95_lo: 0.024,
        m_min_ci95_hi: 0.036,
        m_min_verdict: "ok".into(),
        trigger1_fired: 0,
        trigger3_fired: 0,
        trigger4_fired: 0,
        ledger_ok: true,
    }
}

fn floor() -> Floor {
    Floor {
        backend: "fencepost".into(),
        lease_ms: 1000,
        session_ttl_ms: 500,
        cells: 6,
        p999: QuantileCi {
            n: 20_000,
            q: 0.999,
            value_us: 5_000,
            lo_us: 4_000,
            hi_us: 6_000,
        },
        p99: QuantileCi {
            n: 20_000,
            q: 0.99,
            value_us: 5_000,
            lo_us: 4_000,
            hi_us: 6_000,
        },
        m_min: 0.03,
        m_min_lo: 0.024,
        m_min_hi: 0.036,
        enough: true,
        quantile_ci_method: "test".into(),
    }
}

fn summary(rows: Vec<SummaryRow>) -> Summary {
    Summary {
        rows,
        floors: vec![floor()],
    }
}

#[test]
fn overlapping_intervals_are_not_resolved_and_take_the_larger_margin() {
    let s = summary(vec![
        point(0.10, &[20.0, 22.0, 18.0]),
        point(0.30, &[19.0, 21.5, 17.5]),
    ]);
    let r = &recommendations_from(&s)[0];
    assert_eq!(r.margin, Some(0.30));
    assert!(!r.resolved);
    assert!(
        r.reason.contains("not resolved at 3 repeat(s)"),
        "{}",
        r.reason
    );
    assert_eq!(r.trigger2_sweep, Verdict::InsufficientData, "{}", r.reason);
}

#[test]
fn separated_intervals_pick_the_best_and_trigger_2_fires_on_a_costly_margin() {
    let s = summary(vec![
        point(0.10, &[30.0, 30.5, 29.5]),
        point(0.30, &[20.0, 20.5, 19.5]),
    ]);
    let r = &recommendations_from(&s)[0];
    assert_eq!((r.margin, r.resolved), (Some(0.10), true), "{}", r.reason);
    assert_eq!(r.trigger2_sweep, Verdict::Ok);
    // The best margin fails D4 on one repeat: the costly one is chosen, trigger 2 fires.
    let mut rows = s.rows.clone();
    rows[0].trigger3_fired = 1;
    let r = &recommendations_from(&summary(rows))[0];
    assert_eq!(r.margin, Some(0.30));
    assert_eq!(r.trigger2_sweep, Verdict::Fired, "{}", r.reason);
    assert!(r.reason.contains("D4 sawtooth"), "{}", r.reason);
}

#[test]
fn the_derived_floor_excludes_margins_below_its_upper_end() {
    let mut f = floor();
    f.m_min_hi = 0.2;
    let s = Summary {
        rows: vec![
            point(0.10, &[30.0, 30.5, 29.5]),
            point(0.30, &[20.0, 20.5, 19.5]),
        ],
        floors: vec![f],
    };
    let r = &recommendations_from(&s)[0];
    assert_eq!(r.margin, Some(0.30));
    assert!(
        r.reason.contains("below the margin needed (trigger 1)"),
        "{}",
        r.reason
    );
}

#[test]
fn the_same_data_gives_the_same_recommendation() {
    let s = summary(vec![
        point(0.10, &[20.0, 22.0, 18.0]),
        point(0.30, &[19.0, 21.5, 17.5]),
    ]);
    assert_eq!(recommendations_from(&s), recommendations_from(&s.clone()));
}

#[test]
fn adaptive_is_compared_with_the_best_fixed_margin() {
    let mut a = point(0.5, &[25.0, 25.5, 24.5]);
    a.margin_policy = "adaptive:k=4,floor=0.05,ceiling=0.5".into();
    a.margin_effective_mean = 0.08;
    let s = summary(vec![point(0.30, &[20.0, 20.5, 19.5]), a]);
    let r = &recommendations_from(&s)[0];
    assert_eq!(r.cells, 1, "adaptive is not a fixed margin to choose");
    assert_eq!(r.adaptive.len(), 1);
    assert!(
        r.adaptive[0].contains("resolved: adaptive is higher"),
        "{}",
        r.adaptive[0]
    );
}

#[test]
fn each_backend_of_a_ttl_gets_its_own_recommendation_in_report_order() {
    let on = |backend: &str, margin: f64| SummaryRow {
        backend: backend.into(),
        ..point(margin, &[20.0, 22.0, 18.0])
    };
    let s = summary(vec![
        on("redis", 0.10),
        on("fencepost", 0.10),
        on("redis", 0.30),
        on("etcd", 0.10),
    ]);
    let r = recommendations_from(&s);
    let backends: Vec<&str> = r.iter().map(|r| r.backend.as_str()).collect();
    assert_eq!(backends, ["fencepost", "etcd", "redis"], "never pooled");
    assert_eq!(ttl_label(&r[2]), "TTL 1s on redis");
}
