//! The heartbeat divisor and the freeze length as sweep axes, end to end: a
//! `bench sweep` over two divisors and two freeze lengths names each cell
//! by them, gives every session of a cell its divisor, counts the freezes
//! applied in the window, records the heartbeat gaps (one over its window
//! per session lost at its deadline), writes the merged gap histogram, and
//! its manifest makes `--resume` refuse another divisor.

use std::process::{Command, Output};

use crate::driver::temp_dir;

/// `bench sweep` at 1 s, margin 0.3, 2 s cells, two workers and 20 idle
/// sessions, with `extra` flags, into `out`.
fn sweep(out: &std::path::Path, extra: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_bench"))
        .args([
            "sweep",
            "--margin",
            "0.3",
            "--ttl",
            "1s",
            "--duration",
            "2s",
        ])
        .args(["--workers", "2", "--sessions", "20", "--payouts", "2000"])
        .args(["--store", "memory:", "--seed", "5"])
        .args(extra)
        .arg("--out")
        .arg(out)
        .output()
        .unwrap()
}

#[test]
fn divisors_and_freeze_lengths_are_cells_with_gaps_and_freezes_counted() {
    let out = temp_dir("axes").join("run");
    let axes = [
        "--heartbeat-divisor",
        "3,4",
        "--server-pause",
        "1500ms:300ms,600ms",
    ];
    let done = sweep(&out, &axes);
    let stderr = String::from_utf8_lossy(&done.stderr);
    assert_eq!(done.status.code(), Some(0), "{stderr}");
    let rows = bench_analysis::results::read_results(&out).unwrap();
    let ids: Vec<&str> = rows.iter().map(|r| r.cell.as_str()).collect();
    assert_eq!(
        ids,
        [
            "ttl=1s_margin=0.30_freeze=300ms",
            "ttl=1s_margin=0.30_freeze=600ms",
            "ttl=1s_margin=0.30_k=4_freeze=300ms",
            "ttl=1s_margin=0.30_k=4_freeze=600ms",
        ]
    );
    for (r, (k, pause)) in rows.iter().zip([
        (3, "1500ms:300ms"),
        (3, "1500ms:600ms"),
        (4, "1500ms:300ms"),
        (4, "1500ms:600ms"),
    ]) {
        assert_eq!((r.heartbeat_divisor, r.server_pause.as_str()), (k, pause));
        // One freeze falls in a 2 s window (at 1.2 s or 0.9 s).
        assert!(r.server_pauses >= 1, "{r:?}");
        assert!(r.hb_gap_count > 0, "{r:?}");
        assert_eq!(r.hb_gaps_over_window, r.session_lost_deadline, "{r:?}");
        assert!(r.hb_gap_p50_us <= r.hb_gap_p99_us && r.hb_gap_p99_us <= r.hb_gap_max_us);
        let gap = out.join("hgrm").join(format!("{}.gap.hdr", r.cell));
        let h = bench_core::hist::load_series(&out, &r.cell, bench_core::hist::Series::Gap)
            .unwrap_or_else(|e| panic!("{}: {e}", gap.display()));
        assert_eq!(h.len(), r.hb_gap_count);
    }
    // A 600 ms freeze of a 500 ms session (U = 350 ms) loses sessions.
    assert!(rows[1].session_lost_deadline > 0, "{:?}", rows[1]);
    // The k = 4 cells heartbeat more often: more gaps, each shorter.
    assert!(rows[2].hb_gap_p50_us < rows[0].hb_gap_p50_us, "{rows:?}");

    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(
        manifest["config"]["heartbeat_divisors"],
        serde_json::json!([3, 4])
    );
    assert_eq!(manifest["config"]["server_pause"], "1500ms:300ms,600ms");
    // Another divisor list is refused on resume, naming the flag.
    let refused = sweep(
        &out,
        &[
            "--heartbeat-divisor",
            "3",
            "--server-pause",
            "1500ms:300ms,600ms",
            "--resume",
        ],
    );
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{stderr}");
    assert!(stderr.contains("--heartbeat-divisor"), "{stderr}");
}
