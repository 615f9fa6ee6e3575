//! The results table and the histogram files: round trips, "not measured".

use bench_analysis::results::{COLUMNS, read_results, write_results};
use bench_core::hist::{self, load_histogram, save_histogram, summarize};

use super::fixtures::*;

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

/// A table written before the `tls` column reads as plain HTTP;
/// one from before the divisor, gap and freeze columns reads divisor 3 and
/// 0 (not recorded) in the others; one from before long holds reads one
/// step, no hold, nothing abandoned mid-payout.
#[test]
fn a_table_without_the_tls_column_reads_as_plain_http() {
    let dir = Scratch::new("no-tls");
    let mut rows = trigger_rows();
    for r in &mut rows {
        r.tls = "tls".into();
        (r.heartbeat_divisor, r.hb_gap_count, r.server_pauses) = (4, 100, 2);
        (r.hold, r.steps, r.abandoned_mid_payout) = ("fixed:1s".into(), 3, 5);
    }
    write_results(dir.path(), &rows).unwrap();
    // The csv up to `idle_reopened` (without `tls` and every column after
    // it), as an older bench wrote it.
    // (Cut from the end: a quoted field earlier in a line may hold commas.)
    let after = COLUMNS.len() - 1 - COLUMNS.iter().position(|c| *c == "idle_reopened").unwrap();
    let csv = dir.path().join("results.csv");
    let text = std::fs::read_to_string(&csv).unwrap();
    let old: Vec<String> = text
        .lines()
        .map(|l| {
            let cut: Vec<&str> = l.split(',').collect();
            cut[..cut.len() - after].join(",")
        })
        .collect();
    assert!(old[0].ends_with("idle_reopened"), "{}", old[0]);
    std::fs::write(&csv, old.join("\n") + "\n").unwrap();
    std::fs::remove_file(dir.path().join("results.parquet")).unwrap();
    let back = read_results(dir.path()).unwrap();
    assert_eq!(back.len(), rows.len());
    assert!(back.iter().all(|r| r.tls == "none"), "{:?}", back[0].tls);
    assert_eq!(back[0].idle_reopened, rows[0].idle_reopened);
    // Before the divisor was an axis every cell heartbeat at U/3; gaps and
    // freezes read 0: not recorded.
    for r in &back {
        assert_eq!(r.heartbeat_divisor, 3);
        assert_eq!(
            (
                r.hb_gap_count,
                r.hb_gap_max_us,
                r.hb_gaps_over_window,
                r.server_pauses
            ),
            (0, 0, 0, 0)
        );
        assert_eq!(
            (r.hold.as_str(), r.steps, r.abandoned_mid_payout),
            ("none", 1, 0)
        );
    }
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
