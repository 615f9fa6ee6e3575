//! The bench's output half, end to end on synthetic data: the results table,
//! the histogram files, the ADR-006 §6.5 triggers, `bench triggers` exit codes,
//! the report and the plots. Rows and histograms are built here (seeded), never
//! by running a workload.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use bench_analysis::results::{BadInput, COLUMNS, CellRow, read_results, write_results};
use bench_analysis::triggers::{
    AUTOPILOT_THROTTLING, D4_UNSATISFIABLE, D4Window, FENCED_OUT_WITH_CLIENT_CHECK,
    MARGIN_DOMINANT_LIMITER, RTT_P99_VS_MARGIN, TRIGGERS, TriggerResult, TriggersError, Verdict,
    evaluate, evaluate_row, run_triggers_command,
};
use bench_core::hist::{self, load_histogram, save_histogram, summarize};
use bench_report::plots::PLOT_STEMS;
use bench_report::report::{recommendations, write_report};
use hdrhistogram::Histogram;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;

/// A scratch directory under the system temp dir, removed on drop.
pub(crate) struct Scratch(PathBuf);

impl Scratch {
    pub(crate) fn new(name: &str) -> Self {
        static N: AtomicU32 = AtomicU32::new(0);
        let dir = std::env::temp_dir().join(format!(
            "fencepost-output-{}-{}-{name}",
            std::process::id(),
            N.fetch_add(1, Ordering::Relaxed)
        ));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }
    pub(crate) fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        if std::env::var_os("KEEP_SCRATCH").is_none() {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// A healthy cell that fires no trigger: 1 s lease (and session), margin 0.30,
/// corrected p99 5 ms on 2,000 samples (budget 100 ms), usable lease 700 ms,
/// 466 ms left just before a heartbeat > hop 300 ms, 2 % lost work; not part
/// of a throttle pair (trigger 5 not evaluated).
pub(crate) fn healthy(cell: &str, margin: f64, lease_ms: u64) -> CellRow {
    CellRow {
        run_id: "test-run".into(),
        margin,
        margin_policy: "fixed".into(),
        lease_ms,
        session_ttl_ms: lease_ms,
        workers: 4,
        duration_s: 10.0,
        rail_p50_ms: 4.0,
        rail_p99_ms: 40.0,
        hb_count: 1000,
        hb_rtt_p50_us: 800,
        hb_rtt_p90_us: 2_000,
        hb_rtt_p99_us: 5_000,
        hb_rtt_p999_us: 9_000,
        hb_rtt_max_us: 12_345,
        payouts_paid: 196,
        throughput_per_s: 19.6,
        abandoned_insufficient_lease: 1,
        lock_lost: 0,
        renewals: 321,
        fenced_out: 0,
        duplicate_attempted: 0,
        usable_lease_fraction: 1.0 - margin,
        cell: cell.into(),
        seed: 42,
        net_delay: "none".into(),
        server_pause: "none".into(),
        rail_latency: "lognormal:p50=4ms,p99=40ms".into(),
        rail_read_timeout_ms: 100,
        worst_case_hop_ms: 300,
        client_check: true,
        acquire_failed: 2,
        abandoned_lost: 1,
        attempts: 200,
        paid_twice: 0,
        stale_paid: 0,
        ledger_ok: true,
        margin_effective: margin,
        hb_rtt_mean_us: 1_234.5,
        hb_attempts: 1_010,
        hb_timeouts: 0,
        hb_errors: 0,
        session_lost: 0,
        hb_tick_lag_p99_us: 300,
        hb_rtt_corrected_p50_us: 900,
        hb_rtt_corrected_p99_us: 5_000,
        hb_rtt_corrected_p999_us: 9_500,
        fenced_out_fence1: 0,
        fenced_out_fence2: 0,
        fenced_out_believed_held: 0,
        rail_measured_p50_ms: 4.2,
        rail_measured_p99_ms: 41.0,
        cpu_bench_s: 3.5,
        cpu_lock_server_s: 1.25,
        cpu_rail_stub_s: 0.75,
        repeat: 0,
        hb_replies: 1_010,
        hb_ticks: 2_000,
        hb_ticks_missed: 0,
        session_lost_expired: 0,
        session_lost_unknown: 0,
        session_lost_deadline: 0,
        hb_corrected_count: 2_000,
        hb_rtt_corrected_max_us: 13_000,
        hb_rtt_corrected_p99_lo_us: 4_600,
        hb_rtt_corrected_p99_hi_us: 5_400,
        hb_corrected_over_budget: 0,
        hb_tick_lag_max_us: 900,
        rail_measured_count: 196,
        rail_transport_errors: 0,
        believed_held_submits: 196,
        fenced_out_fence1_untraced: 0,
        fenced_out_fence2_untraced: 0,
        cpu_workers_s: 0.0,
        warmup_s: 0.35,
        build_profile: "release".into(),
        cpu_quota: String::new(),
        backend: "fencepost".into(),
        margin_applied_count: 300,
        group: String::new(),
    }
}

/// A throttled vs unthrottled pair (trigger 5): the unthrottled run needs a
/// margin of 3 × 5 ms / 1 s = 0.015 [0.0138, 0.0162], the throttled one
/// 3 × 80 ms / 1 s = 0.24 [0.21, 0.27]; the margin in force is 0.30.
fn throttle_pair() -> [CellRow; 2] {
    let mut none = healthy("throttle=none", 0.30, 1000);
    none.cpu_quota = "none".into();
    let mut thr = healthy("throttle=10%", 0.30, 1000);
    thr.cpu_quota = "10000us/100000us (10.0% of a core)".into();
    thr.hb_rtt_corrected_p99_us = 80_000;
    (
        thr.hb_rtt_corrected_p99_lo_us,
        thr.hb_rtt_corrected_p99_hi_us,
    ) = (70_000, 90_000);
    [none, thr]
}

/// One row per trigger built to fire it (and nothing else), plus a healthy row,
/// a fenced-out row with the client check off and one with only an untraced
/// fence-1 refusal (neither fires), and a throttle pair (fires trigger 5 on both).
fn trigger_rows() -> Vec<CellRow> {
    let none = healthy("none", 0.30, 1000);

    let mut rtt = healthy("rtt", 0.30, 1000);
    rtt.hb_rtt_corrected_p99_us = 150_000; // 150 ms > min(1 s, 1 s) × 0.30 / 3 = 100 ms
    rtt.hb_corrected_over_budget = 40;

    let mut margin = healthy("margin", 0.30, 1000);
    margin.abandoned_insufficient_lease = 30; // 30 of 33 lost; 33 of 200 attempts
    margin.acquire_failed = 2;
    margin.abandoned_lost = 1;

    // 300 ms usable, 100 ms period: 199 ms left before a heartbeat ≤ 300 ms hop.
    let mut d4 = healthy("d4", 0.70, 1000);
    d4.hb_rtt_corrected_p99_us = 50_000; // under the 233 ms budget

    let mut fenced = healthy("fenced", 0.30, 1000);
    (fenced.fenced_out, fenced.fenced_out_fence2) = (2, 2);
    fenced.fenced_out_believed_held = 2;

    let mut demo = healthy("uc03", 0.30, 1000);
    (demo.fenced_out, demo.fenced_out_fence2) = (5, 5);
    demo.client_check = false;

    let mut untraced = healthy("untraced", 0.30, 1000);
    (untraced.fenced_out, untraced.fenced_out_fence1) = (1, 1);
    untraced.fenced_out_fence1_untraced = 1;

    let [thr_none, thr] = throttle_pair();
    vec![none, rtt, margin, d4, fenced, demo, untraced, thr_none, thr]
}

/// A seeded log-normal-ish RTT histogram around `median_us`.
pub(crate) fn synthetic_histogram(seed: u64, median_us: f64, samples: usize) -> Histogram<u64> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut h = hist::new_histogram();
    for _ in 0..samples {
        // Box–Muller: a standard normal from two uniforms.
        let (u1, u2): (f64, f64) = (rng.random::<f64>().max(1e-12), rng.random());
        let z = (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos();
        let v = (median_us * (0.8 * z).exp()).round().max(1.0) as u64;
        h.record(v).unwrap();
    }
    h
}

fn fired(results: &[TriggerResult]) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = results
        .iter()
        .filter(|r| r.fired)
        .map(|r| (r.trigger.clone(), r.cell.clone()))
        .collect();
    v.sort();
    v
}

#[test]
fn results_round_trip_through_parquet_and_csv_in_column_order() {
    let dir = Scratch::new("roundtrip");
    let mut rows = trigger_rows();
    rows[1].margin = 0.1 + 0.2; // not exactly representable: checks float fidelity
    rows[2].throughput_per_s = 1.0 / 3.0;
    rows[3].net_delay = String::new();
    rows[4].rail_latency = "fixed:5ms, \"quoted\"".into();
    write_results(dir.path(), &rows).unwrap();

    assert_eq!(read_results(dir.path()).unwrap(), rows, "parquet");

    let csv = std::fs::read_to_string(dir.path().join("results.csv")).unwrap();
    let header: Vec<&str> = csv.lines().next().unwrap().split(',').collect();
    assert_eq!(header, COLUMNS);
    assert_eq!(&COLUMNS[..3], ["run_id", "margin", "margin_policy"]);
    assert_eq!(COLUMNS[22], "usable_lease_fraction");
    // C4's honest-measurement columns follow, in C4's order.
    assert_eq!(
        &COLUMNS[23..40],
        [
            "hb_attempts",
            "hb_timeouts",
            "hb_errors",
            "session_lost",
            "hb_tick_lag_p99_us",
            "hb_rtt_corrected_p50_us",
            "hb_rtt_corrected_p99_us",
            "hb_rtt_corrected_p999_us",
            "fenced_out_fence1",
            "fenced_out_fence2",
            "fenced_out_believed_held",
            "rail_measured_p50_ms",
            "rail_measured_p99_ms",
            "cpu_bench_s",
            "cpu_lock_server_s",
            "cpu_rail_stub_s",
            "repeat",
        ]
    );

    std::fs::remove_file(dir.path().join("results.parquet")).unwrap();
    assert_eq!(read_results(dir.path()).unwrap(), rows, "csv fallback");
}

/// "Not measured" is NaN, never 0, and survives both formats (a docker
/// runtime's services have no pid to read CPU seconds from).
#[test]
fn not_measured_values_round_trip_as_nan() {
    let dir = Scratch::new("nan");
    let mut row = healthy("docker", 0.3, 1000);
    (row.cpu_lock_server_s, row.cpu_rail_stub_s) = (f64::NAN, f64::NAN);
    (row.rail_measured_p50_ms, row.rail_measured_p99_ms) = (f64::NAN, f64::NAN);
    write_results(dir.path(), std::slice::from_ref(&row)).unwrap();
    for format in ["parquet", "csv"] {
        let back = &read_results(dir.path()).unwrap()[0];
        assert!(
            back.cpu_lock_server_s.is_nan() && back.rail_measured_p99_ms.is_nan(),
            "{format}: {back:?}"
        );
        assert_eq!(back.cpu_bench_s, row.cpu_bench_s, "{format}");
        std::fs::remove_file(dir.path().join("results.parquet")).ok();
    }
}

#[test]
fn histogram_save_then_load_gives_identical_percentiles() {
    let dir = Scratch::new("hist");
    let h = synthetic_histogram(7, 2_000.0, 20_000);
    save_histogram(dir.path(), "ttl=1s_margin=0.30", &h).unwrap();
    let back = load_histogram(dir.path(), "ttl=1s_margin=0.30").unwrap();

    assert_eq!(back.len(), h.len());
    assert_eq!(back.min(), h.min());
    assert_eq!(back.max(), h.max());
    for q in [0.0, 0.1, 0.5, 0.9, 0.99, 0.999, 0.9999, 1.0] {
        assert_eq!(back.value_at_quantile(q), h.value_at_quantile(q), "q={q}");
    }
    assert_eq!(summarize(&back), summarize(&h));
    assert_eq!(back, h);

    let text = std::fs::read_to_string(dir.path().join("hgrm/ttl=1s_margin=0.30.hgrm")).unwrap();
    assert!(text.contains("microseconds"), "unit in a header comment");
    assert!(text.contains("Value     Percentile TotalCount 1/(1-Percentile)"));
    assert!(text.contains("#[Mean    ="));
    assert!(text.contains(&format!("Total count    = {:12}]", h.len())));
    let last = text.lines().rev().find(|l| !l.starts_with('#')).unwrap();
    assert!(
        last.contains("1.000000000000"),
        "ends at percentile 1: {last}"
    );
    let hdr = std::fs::read_to_string(dir.path().join("hgrm/ttl=1s_margin=0.30.hdr")).unwrap();
    assert_eq!(hdr.lines().count(), 1, "base64 on one line");
}

#[test]
fn summarize_of_an_empty_histogram_is_all_zero() {
    let s = summarize(&hist::new_histogram());
    assert_eq!(s.count, 0);
    assert_eq!(s.p99, 0);
    assert_eq!(s.mean, 0.0);
}

#[test]
fn each_trigger_fires_exactly_where_constructed_to() {
    let rows = trigger_rows();
    let results = evaluate(&rows);
    assert_eq!(results.len(), 5 * rows.len(), "five rows per cell");
    assert_eq!(
        fired(&results),
        vec![
            (AUTOPILOT_THROTTLING.to_owned(), "throttle=10%".to_owned()),
            (AUTOPILOT_THROTTLING.to_owned(), "throttle=none".to_owned()),
            (D4_UNSATISFIABLE.to_owned(), "d4".to_owned()),
            (FENCED_OUT_WITH_CLIENT_CHECK.to_owned(), "fenced".to_owned()),
            (MARGIN_DOMINANT_LIMITER.to_owned(), "margin".to_owned()),
            (RTT_P99_VS_MARGIN.to_owned(), "rtt".to_owned()),
        ]
    );
    for r in &results {
        assert_eq!(r.fired, r.verdict == Verdict::Fired, "{r:?}");
    }
    let verdict = |id: &str, cell: &str| {
        results
            .iter()
            .find(|r| r.trigger == id && r.cell == cell)
            .unwrap()
            .verdict
    };
    assert_eq!(
        verdict(FENCED_OUT_WITH_CLIENT_CHECK, "untraced"),
        Verdict::InsufficientData,
        "an untraced fence-1 refusal is not an ok"
    );
    assert_eq!(
        verdict(AUTOPILOT_THROTTLING, "none"),
        Verdict::NotEvaluated,
        "no throttle pair, no trigger 5"
    );
    let rtt = results
        .iter()
        .find(|r| r.trigger == RTT_P99_VS_MARGIN && r.cell == "rtt")
        .unwrap();
    assert_eq!(
        (rtt.observed, rtt.threshold, rtt.unit.as_str()),
        (150.0, 100.0, "ms")
    );
    assert!(
        rtt.action
            .starts_with("Raise the margin or shorten the heartbeat period")
    );
}

#[test]
fn margin_is_dominant_only_when_it_causes_half_the_loss_and_the_loss_is_material() {
    // Exactly at both thresholds: 5 of 10 lost to the margin, 10 of 200 attempts lost.
    let mut edge = healthy("edge", 0.30, 1000);
    (
        edge.abandoned_insufficient_lease,
        edge.acquire_failed,
        edge.abandoned_lost,
    ) = (5, 5, 0);
    // Dominant but immaterial: all 4 lost to the margin, 4 of 200 attempts.
    let mut small = healthy("small", 0.30, 1000);
    (
        small.abandoned_insufficient_lease,
        small.acquire_failed,
        small.abandoned_lost,
    ) = (4, 0, 0);
    // Material but not dominant: 20 of 42 lost to the margin.
    let mut shared = healthy("shared", 0.30, 1000);
    (
        shared.abandoned_insufficient_lease,
        shared.acquire_failed,
        shared.lock_lost,
    ) = (20, 20, 1);
    let results = evaluate(&[edge, small, shared]);
    let margin: Vec<_> = fired(&results);
    assert_eq!(
        margin,
        vec![(MARGIN_DOMINANT_LIMITER.to_owned(), "edge".to_owned())]
    );
}

#[test]
fn fence_outs_without_the_client_check_are_the_uc03_demo_not_a_violation() {
    let results = evaluate(&trigger_rows());
    let demo = results
        .iter()
        .find(|r| r.trigger == FENCED_OUT_WITH_CLIENT_CHECK && r.cell == "uc03")
        .unwrap();
    assert!(!demo.fired);
    assert_eq!(demo.verdict, Verdict::NotEvaluated);
    assert_eq!(demo.observed, 0.0, "nothing was believed");
    assert!(demo.detail.contains("client check off"));
}

/// Trigger 1 says ok only on 1,000 corrected samples; with fewer it says
/// insufficient_data, unless more than 10 of them exceed the budget (then the
/// p99 of any 1,000 samples would too, and it fires).
#[test]
fn trigger_1_needs_a_thousand_samples_to_say_ok() {
    let mut few = healthy("few", 0.30, 1000);
    few.hb_corrected_count = 400;
    let t1 = &evaluate_row(&few, &[])[0];
    assert_eq!(t1.verdict, Verdict::InsufficientData, "{t1:?}");
    few.hb_corrected_over_budget = 10;
    few.hb_rtt_corrected_p99_us = 120_000;
    assert_eq!(
        evaluate_row(&few, &[])[0].verdict,
        Verdict::InsufficientData,
        "10 of 400 above: a 1,000-sample p99 could still be within budget"
    );
    few.hb_corrected_over_budget = 11;
    let t1 = &evaluate_row(&few, &[])[0];
    assert_eq!(t1.verdict, Verdict::Fired, "{t1:?}");
    assert!(
        t1.detail.contains("fewer than 1000 samples"),
        "{}",
        t1.detail
    );
    // The budget is min(lease, session TTL) × margin / 3: a 500 ms session halves it.
    let mut session = healthy("session", 0.30, 1000);
    session.session_ttl_ms = 500;
    session.hb_rtt_corrected_p99_us = 60_000;
    let t1 = &evaluate_row(&session, &[])[0];
    assert_eq!((t1.threshold, t1.verdict), (50.0, Verdict::Fired));
    // The raw p99 alone never decides: the corrected one does.
    let mut raw_only = healthy("raw", 0.30, 1000);
    raw_only.hb_rtt_p99_us = 150_000;
    assert_eq!(evaluate_row(&raw_only, &[])[0].verdict, Verdict::Ok);
}

/// At the ADR's own production defaults (30 s lease, 15 s session, 0.30,
/// 5 s + 2 s hop) the window just before a heartbeat is 7 s − RTT < 7 s:
/// trigger 3 fires, and D4 refuses in a sliver of every period.
#[test]
fn trigger_3_fires_at_the_adr_defaults_and_reports_the_refused_fraction() {
    let mut adr = healthy("adr", 0.30, 30_000);
    adr.session_ttl_ms = 15_000;
    adr.worst_case_hop_ms = 7_000;
    let t3 = &evaluate_row(&adr, &[])[2];
    assert_eq!(t3.verdict, Verdict::Fired, "{t3:?}");
    let w = D4Window::of(&adr);
    assert_eq!((w.usable_ms, w.period_ms), (10_500.0, 3_500.0));
    let f = w.refusal_fraction();
    assert!(f > 0.0 && f < 0.001, "0.9 ms of a 3.5 s period: {f}");
    assert!(t3.detail.contains("D4 refuses in 0.0 %"), "{}", t3.detail);
    // A scaled 1 s cell at margin 0.10: 450 − 150 − 0.9 ms left, above the 233 ms hop.
    let mut ok = healthy("ok", 0.10, 1000);
    ok.session_ttl_ms = 500;
    ok.worst_case_hop_ms = 233;
    let t3 = &evaluate_row(&ok, &[])[2];
    assert_eq!(t3.verdict, Verdict::Ok, "{t3:?}");
    assert_eq!(D4Window::of(&ok).refusal_fraction(), 0.0);
}

/// Trigger 5 reads the pair off the table; it needs both runs, a release
/// build, 1,000 samples each and separated intervals.
#[test]
fn trigger_5_needs_a_resolved_release_pair() {
    let pair = throttle_pair();
    let t5 = &evaluate_row(&pair[1], &pair)[4];
    assert_eq!(t5.verdict, Verdict::Fired, "{t5:?}");
    assert!((t5.observed - 0.24).abs() < 1e-9, "{t5:?}");
    assert!(t5.detail.contains("reducible"), "{}", t5.detail);
    // Alone, a throttled run says nothing.
    assert_eq!(
        evaluate_row(&pair[1], &pair[1..])[4].verdict,
        Verdict::NotEvaluated
    );
    // Overlapping intervals: not resolved.
    let mut close = pair.clone();
    close[1].hb_rtt_corrected_p99_us = 5_200;
    (
        close[1].hb_rtt_corrected_p99_lo_us,
        close[1].hb_rtt_corrected_p99_hi_us,
    ) = (4_800, 5_600);
    let t5 = &evaluate_row(&close[0], &close)[4];
    assert_eq!(t5.verdict, Verdict::InsufficientData, "{t5:?}");
    assert!(t5.detail.contains("not resolved"), "{}", t5.detail);
    // The unthrottled run needs more than the margin in force: not reducible.
    let mut tight = pair.clone();
    tight[0].hb_rtt_corrected_p99_us = 110_000;
    (
        tight[0].hb_rtt_corrected_p99_lo_us,
        tight[0].hb_rtt_corrected_p99_hi_us,
    ) = (105_000, 115_000);
    tight[1].hb_rtt_corrected_p99_us = 200_000;
    (
        tight[1].hb_rtt_corrected_p99_lo_us,
        tight[1].hb_rtt_corrected_p99_hi_us,
    ) = (190_000, 210_000);
    assert_eq!(evaluate_row(&tight[0], &tight)[4].verdict, Verdict::Ok);
    // Too few samples, or a debug build.
    let mut few = pair.clone();
    few[0].hb_corrected_count = 999;
    assert_eq!(
        evaluate_row(&few[1], &few)[4].verdict,
        Verdict::InsufficientData
    );
    let mut debug = pair.clone();
    debug[1].build_profile = "debug".into();
    let t5 = &evaluate_row(&debug[0], &debug)[4];
    assert_eq!(t5.verdict, Verdict::NotEvaluated, "{t5:?}");
    assert!(t5.detail.contains("debug build"));
}

#[test]
fn triggers_command_exits_0_when_none_fires_and_3_when_one_does() {
    let quiet = Scratch::new("quiet");
    write_results(
        quiet.path(),
        &[healthy("a", 0.3, 1000), healthy("b", 0.4, 1000)],
    )
    .unwrap();
    assert_eq!(run_triggers_command(quiet.path()).unwrap(), 0);

    let loud = Scratch::new("loud");
    write_results(loud.path(), &trigger_rows()).unwrap();
    assert_eq!(run_triggers_command(loud.path()).unwrap(), 3);

    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(loud.path().join("triggers.json")).unwrap())
            .unwrap();
    let items = json.as_array().unwrap();
    assert_eq!(items.len(), 5 * trigger_rows().len());
    for key in [
        "trigger",
        "cell",
        "fired",
        "verdict",
        "observed",
        "threshold",
        "action",
    ] {
        assert!(
            items.iter().all(|i| i.get(key).is_some()),
            "{key} in every item"
        );
    }
    assert_eq!(items.iter().filter(|i| i["fired"] == true).count(), 6);
    let verdicts: std::collections::BTreeSet<&str> =
        items.iter().filter_map(|i| i["verdict"].as_str()).collect();
    assert_eq!(
        verdicts.into_iter().collect::<Vec<_>>(),
        ["fired", "insufficient_data", "not_evaluated", "ok"]
    );
    // Every trigger id of C4, five rows per cell.
    for t in TRIGGERS {
        assert_eq!(
            items.iter().filter(|i| i["trigger"] == t.id).count(),
            trigger_rows().len()
        );
    }
}

#[test]
fn bad_input_is_an_error_the_cli_maps_to_exit_2() {
    let missing = std::env::temp_dir().join("fencepost-output-does-not-exist");
    let err = run_triggers_command(&missing).unwrap_err();
    assert!(matches!(err, TriggersError::BadInput(BadInput::NoDir(_))));
    assert!(write_report(&missing).is_err());

    let empty = Scratch::new("empty");
    let err = run_triggers_command(empty.path()).unwrap_err();
    assert!(matches!(
        err,
        TriggersError::BadInput(BadInput::NoResults(_))
    ));

    std::fs::write(
        empty.path().join("results.csv"),
        "run_id,margin\nx,notanumber\n",
    )
    .unwrap();
    let err = run_triggers_command(empty.path()).unwrap_err();
    assert!(matches!(
        err,
        TriggersError::BadInput(BadInput::Unreadable { .. })
    ));

    std::fs::write(empty.path().join("results.parquet"), b"PAR1 truncated").unwrap();
    let err = run_triggers_command(empty.path()).unwrap_err();
    assert!(matches!(
        err,
        TriggersError::BadInput(BadInput::Unreadable { .. })
    ));

    let none = Scratch::new("norows");
    write_results(none.path(), &[]).unwrap();
    assert!(read_results(none.path()).unwrap().is_empty());
    let err = run_triggers_command(none.path()).unwrap_err();
    assert!(matches!(err, TriggersError::BadInput(BadInput::Empty(_))));
}

/// A 2-TTL sweep: TTL 1s has a recommendation (a near-tie resolved to the larger
/// margin), TTL 300ms has none (every margin leaves too little lease for a rail hop).
fn sweep_rows() -> Vec<CellRow> {
    let mut rows = Vec::new();
    for (i, (margin, throughput, p99_us)) in [
        (0.10, 21.0, 40_000), // budget 33 ms: trigger 1 fires
        (0.20, 20.0, 20_000),
        (0.30, 19.9, 20_000), // within 1 % of 20.0: the tie goes here
        (0.40, 17.0, 20_000),
        (0.50, 15.0, 20_000),
    ]
    .into_iter()
    .enumerate()
    {
        let mut r = healthy(&format!("ttl=1s_margin={margin:.2}"), margin, 1000);
        r.throughput_per_s = throughput;
        r.hb_rtt_p99_us = p99_us;
        r.hb_rtt_corrected_p99_us = p99_us;
        r.abandoned_insufficient_lease = (margin * 40.0) as u64;
        r.attempts = 200 + i as u64;
        rows.push(r);
    }
    for margin in [0.10, 0.30, 0.50] {
        let mut r = healthy(&format!("ttl=300ms_margin={margin:.2}"), margin, 300);
        r.worst_case_hop_ms = 300;
        r.hb_rtt_p99_us = 3_000;
        r.hb_rtt_corrected_p99_us = 3_000;
        r.throughput_per_s = 0.5;
        rows.push(r);
    }
    rows
}

/// One repeat gives no interval, so no throughput difference is resolved:
/// the recommendation is the largest margin that passes every check (the old
/// rule's "best throughput within 1 %" picked noise).
#[test]
fn one_repeat_resolves_nothing_so_the_largest_qualifying_margin_is_taken() {
    let recs = recommendations(&sweep_rows());
    assert_eq!(recs.len(), 2);
    let short = &recs[0];
    assert_eq!(short.lease_ms, 300);
    assert_eq!(short.margin, None);
    assert!(short.reason.contains("raise the TTL"), "{}", short.reason);
    let long = &recs[1];
    assert_eq!(long.lease_ms, 1000);
    assert_eq!(long.margin, Some(0.50));
    assert_eq!(long.qualifying, 4);
    assert!(!long.resolved);
    assert!(
        long.reason.contains("not resolved at 1 repeat(s)"),
        "{}",
        long.reason
    );
    assert!(
        long.to_string()
            .starts_with("TTL 1s: recommended margin 0.50 (not resolved, the larger margin)"),
        "{long}"
    );
}

/// Three repeats of a 1 s sweep: each margin's throughputs, one per repeat.
fn repeated_rows(throughputs: &[(f64, [f64; 3])]) -> Vec<CellRow> {
    let mut rows = Vec::new();
    for (margin, tps) in throughputs {
        for (rep, tp) in tps.iter().enumerate() {
            let group = format!("ttl=1s_margin={margin:.2}");
            let mut r = healthy(&format!("{group}_rep={rep}"), *margin, 1000);
            r.group = group;
            r.repeat = rep as u32;
            r.seed = 5 + rep as u64;
            r.throughput_per_s = *tp;
            rows.push(r);
        }
    }
    rows
}

/// Done-when: the recommendation does not change between two runs whose
/// only difference is noise within the intervals (the same seed twice), and
/// margins whose intervals overlap are reported "not resolved".
#[test]
fn noise_within_the_intervals_does_not_change_the_recommendation() {
    let first = repeated_rows(&[
        (0.10, [30.0, 30.6, 29.4]),
        (0.30, [25.0, 25.4, 24.7]),
        (0.50, [18.0, 18.5, 17.6]),
    ]);
    let second = repeated_rows(&[
        (0.10, [30.3, 29.8, 29.9]),
        (0.30, [24.8, 25.3, 25.1]),
        (0.50, [18.3, 17.9, 18.1]),
    ]);
    let (a, b) = (&recommendations(&first)[0], &recommendations(&second)[0]);
    assert_eq!((a.margin, a.resolved), (Some(0.10), true), "{a}");
    assert_eq!(
        (a.margin, a.resolved, &a.cell),
        (b.margin, b.resolved, &b.cell)
    );
    assert_eq!(recommendations(&first), recommendations(&first.clone()));
    assert_eq!(a.n_repeats, 3);
}

#[test]
fn overlapping_intervals_are_not_resolved_and_the_larger_margin_is_taken() {
    let rows = repeated_rows(&[(0.10, [30.0, 24.0, 27.0]), (0.30, [26.0, 29.0, 23.0])]);
    let r = &recommendations(&rows)[0];
    assert_eq!(r.margin, Some(0.30));
    assert!(!r.resolved);
    assert!(
        r.reason.contains("not resolved at 3 repeat(s)"),
        "{}",
        r.reason
    );
    assert_eq!(
        r.trigger2_sweep,
        bench_analysis::triggers::Verdict::InsufficientData
    );
}

#[test]
fn report_has_the_trigger_table_the_recommendation_and_every_plot() {
    let dir = Scratch::new("report");
    let rows = sweep_rows();
    write_results(dir.path(), &rows).unwrap();
    for (i, r) in rows.iter().enumerate() {
        let median = 1_000.0 + 3_000.0 * i as f64;
        save_histogram(
            dir.path(),
            &r.cell,
            &synthetic_histogram(i as u64, median, 5_000),
        )
        .unwrap();
    }
    std::fs::write(
        dir.path().join("manifest.json"),
        r#"{"command":"bench sweep","seed":42,"git_commit":"abc123","config":{"workers":4},
            "versions":{"fencepost":"0.1.0","rustc":"rustc 1.95.0","profile":"debug"},
            "machine":{"hostname":"box","cpus":2},"started_at":"2026-11-30T00:00:00Z"}"#,
    )
    .unwrap();

    write_report(dir.path()).unwrap();

    let md = std::fs::read_to_string(dir.path().join("report.md")).unwrap();
    assert!(md.contains("## ADR-006 §6.5 revisit triggers"));
    assert!(md.contains("| trigger | cell | observed | threshold | verdict | detail | action |"));
    assert!(md.contains(
        "| `rtt_p99_vs_margin` | `ttl=1s_margin=0.10` | 40 ms | 33.333 ms | **FIRED** |"
    ));
    assert!(md.contains("Raise the margin or shorten the heartbeat period"));
    assert!(md.contains("## Summary: recommended margin per TTL"));
    assert!(
        md.contains("| 1s | **0.50** | no, at 1 repeat(s) | `ttl=1s_margin=0.50` | 15.00 |"),
        "{md}"
    );
    assert!(md.contains("| 300ms | **none** |"));
    assert!(md.contains("`abc123`"), "git commit from the manifest");
    assert!(md.contains("](rtt_cdf.svg)"));
    assert!(
        md.contains("percentile spectrum"),
        "the spectrum next to the CDF"
    );
    assert!(md.contains("](rtt_spectrum.svg)"));
    assert!(md.contains("### Heartbeats: every exchange and tick"));
    assert!(md.contains("### Fences, rail latency, CPU"));
    assert!(md.contains("**Time base.**"));
    assert!(md.contains("## Repeats: median and 95 % interval per point"));
    assert!(dir.path().join("triggers.json").is_file());
    assert!(dir.path().join("summary.csv").is_file());
    assert!(dir.path().join("summary.parquet").is_file());
    assert!(dir.path().join("projection.csv").is_file());

    for stem in PLOT_STEMS {
        for ext in ["svg", "png"] {
            let path = dir.path().join(format!("{stem}.{ext}"));
            let bytes = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            assert!(bytes.len() > 1000, "{} is too small", path.display());
            if ext == "png" {
                assert_eq!(&bytes[..8], b"\x89PNG\r\n\x1a\n", "{}", path.display());
            } else {
                assert!(String::from_utf8_lossy(&bytes).contains("<svg"));
            }
        }
    }
    if let Some(keep) = std::env::var_os("KEEP_REPORT") {
        let keep = PathBuf::from(keep);
        let _ = std::fs::create_dir_all(&keep);
        for entry in std::fs::read_dir(dir.path()).unwrap() {
            let entry = entry.unwrap();
            if entry.path().is_file() {
                std::fs::copy(entry.path(), keep.join(entry.file_name())).unwrap();
            }
        }
    }
}

#[test]
fn report_survives_missing_histograms_and_no_manifest() {
    let dir = Scratch::new("bare");
    write_results(dir.path(), &[healthy("lonely", 0.3, 1000)]).unwrap();
    write_report(dir.path()).unwrap();
    let md = std::fs::read_to_string(dir.path().join("report.md")).unwrap();
    assert!(md.contains("no manifest.json"));
    assert!(md.contains("Cells missing from the RTT CDF"));
    assert!(dir.path().join("rtt_cdf.png").is_file());
}

#[test]
fn plots_of_a_large_grid_are_drawn() {
    let dir = Scratch::new("grid");
    let mut rows = Vec::new();
    for (t, lease_ms) in [500, 1000, 2000, 5000, 10_000].into_iter().enumerate() {
        for m in 1..=8 {
            let margin = f64::from(m) * 0.05;
            let mut r = healthy(
                &format!("ttl={lease_ms}ms_margin={margin:.2}"),
                margin,
                lease_ms,
            );
            r.throughput_per_s = 10.0 + t as f64 - margin * 5.0;
            let h = synthetic_histogram((t * 10 + m as usize) as u64, 500.0 * (m as f64), 500);
            save_histogram(dir.path(), &r.cell, &h).unwrap();
            rows.push(r);
        }
    }
    let out = bench_report::plots::draw_plots(
        dir.path(),
        &rows,
        &bench_analysis::summary::build(&rows, &|_| None).rows,
    )
    .unwrap();
    assert_eq!(out.files.len(), 2 * PLOT_STEMS.len());
    assert!(out.skipped_cells.is_empty());
    if let Some(keep) = std::env::var_os("KEEP_GRID") {
        std::fs::copy(dir.path().join("rtt_cdf.png"), keep).unwrap();
    }
}

#[test]
fn trigger_3_uses_the_shorter_of_lease_and_session_ttl() {
    // A 1 s lease with margin 0.5 leaves 500 ms, but a 500 ms session only
    // 250 ms, and 250 − 83.3 (period) − 0.9 (RTT) ms just before a heartbeat:
    // the session deadline binds and D4 refuses.
    let mut row = healthy("session-binds", 0.5, 1000);
    row.session_ttl_ms = 500;
    let t3 = &evaluate_row(&row, &[])[2];
    assert_eq!(t3.trigger, D4_UNSATISFIABLE);
    assert!(t3.fired, "{t3:?}");
    assert_eq!((t3.observed, t3.threshold), (165.767, 300.0));
    assert!(t3.detail.contains("session TTL binds"), "{}", t3.detail);
    assert!(t3.detail.contains("every payout"), "{}", t3.detail);
    // With a 1 s session 500 − 166.7 − 0.9 = 332.4 ms are left before a
    // heartbeat (> 300): ok. At a 420 ms hop D4 refuses just before each
    // heartbeat, about half of every period: the trigger fires (it did not
    // before issue 12, which only compared the window right after a heartbeat).
    row.session_ttl_ms = 1000;
    assert!(!evaluate_row(&row, &[])[2].fired);
    row.worst_case_hop_ms = 420;
    let t3 = &evaluate_row(&row, &[])[2];
    assert!(t3.fired, "{t3:?}");
    let f = D4Window::of(&row).refusal_fraction();
    assert!((f - 0.5254).abs() < 0.001, "{f}");
    assert!(!t3.detail.contains("every payout"), "{}", t3.detail);
}

/// `render_report` is the report: the same input gives the same text, and
/// everything it shows comes from the input (an unreadable manifest is a note).
#[test]
fn the_report_is_a_pure_function_of_its_input() {
    use bench_report::report::{ManifestError, ReportInput, render_report};
    let rows = sweep_rows();
    let triggers = evaluate(&rows);
    let summary = bench_analysis::summary::build(&rows, &|_| None);
    let recs = bench_report::report::recommendations_from(&summary);
    let at = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_700_000_000);
    let bad: Result<Option<serde_json::Value>, ManifestError> =
        Err(serde_json::from_str::<serde_json::Value>("{")
            .unwrap_err()
            .into());
    let input = ReportInput {
        rows: &rows,
        manifest: &bad,
        triggers: &triggers,
        skipped_cells: &[("ttl=1s_margin=0.10".into(), "no .hdr file".into())],
        recommendations: &recs,
        summary: &summary,
        projection: &[],
        generated_at: at,
    };
    let md = render_report(&input);
    assert_eq!(md, render_report(&input), "same input, same report");
    assert!(
        md.contains("2023-11-14T22:13:20Z"),
        "the given time, not now"
    );
    assert!(md.contains("manifest.json is unreadable"), "{md}");
    assert!(md.contains("`ttl=1s_margin=0.10`: no .hdr file"));
    for r in &rows {
        assert!(
            md.contains(&format!("`{}`", r.cell)),
            "row {} missing",
            r.cell
        );
    }
}
