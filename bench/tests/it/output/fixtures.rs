//! Synthetic inputs of the output tests: a scratch directory, rows built to
//! fire (or not fire) each trigger, seeded histograms.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use bench_analysis::results::CellRow;
use bench_analysis::triggers::TriggerResult;
use bench_core::hist::{self};
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
        idle_sessions: 0,
        stopped_by: "duration".into(),
        lock_server_rss_peak_kb: 9000.0,
        idle_reopened: 0,
        tls: "none".into(),
        heartbeat_divisor: 3,
        ..CellRow::default()
    }
}

/// A throttled vs unthrottled pair (trigger 5): the unthrottled run needs a
/// margin of 3 × 5 ms / 1 s = 0.015 [0.0138, 0.0162], the throttled one
/// 3 × 80 ms / 1 s = 0.24 [0.21, 0.27]; the margin in force is 0.30.
pub(crate) fn throttle_pair() -> [CellRow; 2] {
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
pub(crate) fn trigger_rows() -> Vec<CellRow> {
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

pub(crate) fn fired(results: &[TriggerResult]) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = results
        .iter()
        .filter(|r| r.fired)
        .map(|r| (r.trigger.clone(), r.cell.clone()))
        .collect();
    v.sort();
    v
}

/// A 2-TTL sweep: TTL 1s has a recommendation (a near-tie resolved to the larger
/// margin), TTL 300ms has none (every margin leaves too little lease for a rail hop).
pub(crate) fn sweep_rows() -> Vec<CellRow> {
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

/// Three repeats of a 1 s sweep: each margin's throughputs, one per repeat.
pub(crate) fn repeated_rows(throughputs: &[(f64, [f64; 3])]) -> Vec<CellRow> {
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

/// Histograms for `rows` that hold each row's own corrected percentiles:
/// `hb_corrected_count` samples (at least 1,000), 98.9 % at its p50, 1 % at
/// its p99 and 0.1 % at its p99.9; the raw histogram the same. What the one
/// pooling path (`bench_analysis::pool`) reads where a test has no cells.
pub(crate) fn row_samples(
    rows: &[CellRow],
) -> std::collections::BTreeMap<String, bench_analysis::pool::CellSamples> {
    rows.iter()
        .map(|r| {
            let n = r.hb_corrected_count.max(1_000);
            let p50 = r.hb_rtt_corrected_p50_us.max(1);
            let p99 = r.hb_rtt_corrected_p99_us.max(p50);
            let p999 = r.hb_rtt_corrected_p999_us.max(p99);
            let mut h = bench_core::hist::new_histogram();
            h.record_n(p999, (n / 1000).max(1)).unwrap();
            h.record_n(p99, n / 100).unwrap();
            h.record_n(p50, n - n / 100 - (n / 1000).max(1)).unwrap();
            (
                r.cell.clone(),
                bench_analysis::pool::CellSamples {
                    raw: h.clone(),
                    corrected: h,
                    blocks: Vec::new(),
                    block_s: None,
                },
            )
        })
        .collect()
}

/// The recommendation of `rows` over [`row_samples`].
pub(crate) fn recommendations(rows: &[CellRow]) -> Vec<bench_analysis::recommend::Recommendation> {
    bench_analysis::recommend::recommendations(rows, &row_samples(rows)).unwrap()
}

/// The summary of `rows` over [`row_samples`].
pub(crate) fn summary_of(rows: &[CellRow]) -> bench_analysis::summary::Summary {
    bench_analysis::summary::build(rows, &row_samples(rows)).unwrap()
}
