//! `report.md` and the plots.

use std::path::PathBuf;

use bench_analysis::results::write_results;
use bench_analysis::triggers::{D4_UNSATISFIABLE, D4Window, evaluate, evaluate_row};
use bench_core::hist::{Series, save_histogram, save_series};
use bench_report::plots::PLOT_STEMS;
use bench_report::report::write_report;

use super::fixtures::*;

#[test]
fn report_has_the_trigger_table_the_recommendation_and_every_plot() {
    let dir = Scratch::new("report");
    let rows = sweep_rows();
    write_results(dir.path(), &rows).unwrap();
    for (i, r) in rows.iter().enumerate() {
        let median = 1_000.0 + 3_000.0 * i as f64;
        let h = synthetic_histogram(i as u64, median, 5_000);
        save_histogram(dir.path(), &r.cell, &h).unwrap();
        save_series(dir.path(), &r.cell, Series::Corrected, &h).unwrap();
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
    assert!(md.contains("## Recommended margin per TTL"));
    assert!(
        md.find("## Verdict") < md.find("## Results")
            && md.find("## Results") < md.find("## Run configuration"),
        "the verdict first, the configuration last"
    );
    assert!(
        // The margin needed (trigger 1, the pooled p99's upper end) excludes
        // 0.10–0.20 here; 0.30–0.50 tie at one repeat and the larger is taken.
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

/// Without a manifest the report says so; without a cell's histogram it
/// refuses, naming the file: every pooled figure needs the histograms.
#[test]
fn report_needs_every_histogram_and_survives_no_manifest() {
    let dir = Scratch::new("bare");
    write_results(dir.path(), &[healthy("lonely", 0.3, 1000)]).unwrap();
    let e = write_report(dir.path()).unwrap_err();
    let text = bench_core::error::Chain(&e).to_string();
    assert!(text.contains("hgrm/lonely.hdr"), "{text}");
    let h = synthetic_histogram(1, 2_000.0, 5_000);
    save_histogram(dir.path(), "lonely", &h).unwrap();
    save_series(dir.path(), "lonely", Series::Corrected, &h).unwrap();
    write_report(dir.path()).unwrap();
    let md = std::fs::read_to_string(dir.path().join("report.md")).unwrap();
    assert!(md.contains("no manifest.json"));
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
        &summary_of(&rows).rows,
        &Default::default(),
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
    // the earlier check only compared the window right after a heartbeat).
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
    let summary = summary_of(&rows);
    let recs = bench_report::report::recommendations_from(&summary);
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
    };
    let md = render_report(&input);
    assert_eq!(md, render_report(&input), "same input, same report");
    assert!(
        !md.contains("report generated"),
        "no clock is read: re-rendering a directory rewrites the same report"
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
