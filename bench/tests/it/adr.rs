//! `bench adr`: the evidence document as a pure function of a pack directory,
//! on fixture files (no workload runs), and the plan it would run.

use std::path::Path;

use bench::adr::{
    ADR_MANIFEST, AdrManifest, EVIDENCE_MD, Features, Status, StepRecord, plan, subcommands,
};
use bench_analysis::results::{CellRow, write_results};
use bench_analysis::triggers::TRIGGERS;
use bench_core::hist::{Series, save_series};
use bench_report::adr::evidence::{load, render};

use super::output::{Scratch, healthy, synthetic_histogram};

/// A scaled cell: session = lease / 2, hop = 7/30 of the lease, corrected
/// p50 2 ms, p99 30 ms [27, 35] on 2,000 samples.
fn scaled(cell: &str, margin: f64, lease_ms: u64) -> CellRow {
    let mut r = healthy(cell, margin, lease_ms);
    r.session_ttl_ms = lease_ms / 2;
    r.worst_case_hop_ms = lease_ms * 7 / 30;
    r.hb_rtt_corrected_p50_us = 2_000;
    r.hb_rtt_corrected_p99_us = 30_000;
    (r.hb_rtt_corrected_p99_lo_us, r.hb_rtt_corrected_p99_hi_us) = (27_000, 35_000);
    r.hb_corrected_count = 2_000;
    r.net_delay = "lognormal:p50=2ms,p99=40ms".into();
    r.throughput_per_s = 100.0 * (1.0 - margin);
    r
}

fn write_sweep(dir: &Path, rows: &[CellRow]) {
    std::fs::create_dir_all(dir).unwrap();
    write_results(dir, rows).unwrap();
    for (i, r) in rows.iter().enumerate() {
        let h = synthetic_histogram(i as u64, 2_000.0, 3_000);
        save_series(dir, &r.cell, Series::Rtt, &h).unwrap();
        save_series(dir, &r.cell, Series::Corrected, &h).unwrap();
    }
}

const CLOCK_JSON: &str = r#"{
  "params": {"lease_ns": 10000000000, "step_ns": 25000000, "margin": 0.0, "theta_ns": 50000000},
  "seed": 1, "bound_ms": 53.0,
  "rows": [
    {"scenario": "offset", "grace_fraction": 0.0, "grace_ms": 0.0, "cases": 100, "violations": 50, "max_overrun_us": 9.0},
    {"scenario": "offset", "grace_fraction": 1.0, "grace_ms": 53.0, "cases": 100, "violations": 0, "max_overrun_us": 0.0},
    {"scenario": "server-step-forward", "grace_fraction": 0.0, "grace_ms": 0.0, "cases": 100, "violations": 70, "max_overrun_us": 9.0},
    {"scenario": "server-step-forward", "grace_fraction": 1.0, "grace_ms": 53.0, "cases": 100, "violations": 21, "max_overrun_us": 9.0},
    {"scenario": "server-step-forward", "grace_fraction": 1.5, "grace_ms": 79.5, "cases": 100, "violations": 0, "max_overrun_us": 0.0},
    {"scenario": "server-step-backward", "grace_fraction": 0.0, "grace_ms": 0.0, "cases": 100, "violations": 25, "max_overrun_us": 9.0},
    {"scenario": "server-step-backward", "grace_fraction": 1.0, "grace_ms": 53.0, "cases": 100, "violations": 0, "max_overrun_us": 0.0}
  ],
  "findings": {"server_hazardous_step": "forward", "client_hazardous_step": "backward",
               "agrees_with_essay_on_server_step": false, "summary": []}
}"#;

const PAUSE_JSON: &str = r#"{"client_check": false, "pauses": 2, "fenced_out": 2,
  "fenced_out_fence1": 0, "fenced_out_fence2": 2, "duplicate_attempted": 0, "paid": 8,
  "payouts": 8, "paid_twice": 0, "stale_paid": 0, "ledger_ok": true, "expectation_met": true,
  "expectation": "fences", "paused": [{"takeover_after_s": 1.04}, {"takeover_after_s": 1.05}]}"#;

/// A pack: the sweep (TTL 1s and 2s), the server-pause sweep, the clock and
/// UC-03 pause experiments; throttle not available (no cgroup), failover and
/// chaos not in this build, adaptive not run.
fn fixture(dir: &Path) {
    let features = Features {
        sweep_repeat: false,
        experiments: Some("/nonexistent/experiments".into()),
        experiment_commands: subcommands(
            "Usage: experiments <COMMAND>\n\nCommands:\n  pause     x\n  clock     y\n  throttle  z\n  help      h\n\nOptions:\n",
        ),
        etcd: false,
    };
    let steps = plan(true, 7, dir, &features);
    let status = |name: &str| match name {
        "sweep" | "sweep-pause" | "clock" | "pause" => (Status::Ok, ""),
        "pause-uc03" => (Status::Ok, ""),
        "throttle" => (
            Status::NotAvailable,
            "no CPU quota can be applied on this machine (exit 4)",
        ),
        "adaptive" => (Status::NotRun, ""),
        _ => (Status::NotAvailable, "from the plan"),
    };
    let manifest = AdrManifest {
        command: format!("bench adr --quick --seed 7 --out {}", dir.display()),
        seed: 7,
        quick: true,
        net_delay: bench::adr::NET_DELAY.into(),
        server_pause: bench::adr::SERVER_PAUSE.into(),
        started_at: "2026-12-01T00:00:00Z".into(),
        finished_at: Some("2026-12-01T00:05:00Z".into()),
        steps: steps
            .into_iter()
            .map(|s| {
                let (st, note) = status(&s.name);
                StepRecord {
                    note: if note == "from the plan" {
                        s.unavailable.clone().unwrap_or_default()
                    } else {
                        note.into()
                    },
                    step: s,
                    status: st,
                    exit_code: None,
                    seconds: 1.0,
                }
            })
            .collect(),
    };
    std::fs::write(
        dir.join(ADR_MANIFEST),
        serde_json::to_vec_pretty(&manifest).unwrap(),
    )
    .unwrap();
    let mut rows = Vec::new();
    for lease in [1000, 2000] {
        for m in [0.1, 0.3, 0.5] {
            rows.push(scaled(
                &format!("ttl={}s_margin={m:.2}", lease / 1000),
                m,
                lease,
            ));
        }
    }
    write_sweep(&dir.join("sweep"), &rows);
    let mut p = scaled("ttl=2s_margin=0.30", 0.3, 2000);
    p.server_pause = bench::adr::SERVER_PAUSE.into();
    p.hb_rtt_corrected_p999_us = 420_000;
    write_sweep(&dir.join("sweep-pause"), &[p]);
    std::fs::create_dir_all(dir.join("clock")).unwrap();
    std::fs::write(dir.join("clock/clock.json"), CLOCK_JSON).unwrap();
    std::fs::write(dir.join("clock/clock.svg"), "<svg/>").unwrap();
    std::fs::create_dir_all(dir.join("pause-uc03")).unwrap();
    std::fs::write(dir.join("pause-uc03/pause.json"), PAUSE_JSON).unwrap();
}

/// Relative link targets `](path)` of a Markdown text.
fn links(md: &str) -> Vec<String> {
    md.split("](")
        .skip(1)
        .filter_map(|s| s.split(')').next())
        .filter(|l| !l.starts_with('#') && !l.starts_with("http"))
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_document_covers_every_trigger_and_derives_the_revision() {
    let dir = Scratch::new("adr-pack");
    fixture(dir.path());
    let md = render(&load(dir.path()).unwrap());
    for t in &TRIGGERS {
        assert!(md.contains(t.adr_trigger), "trigger {} missing", t.id);
    }
    // TTL 1s: U = 500 × 0.7 = 350, window at /3 = 350 − 116.7 − 2 ≤ hop 233;
    // at /4 it is 260.5 > 233; production 10 500 − 3 500 − 2 ≤ 7 000, /4 ok.
    assert!(md.contains("default margin **0.30**"), "{md}");
    assert!(md.contains("/ **4**"), "{md}");
    assert!(md.contains("**disagrees**"));
    assert!(
        md.contains("1.5 × bound"),
        "step needs grace beyond the bound"
    );
    // Absent inputs say so, with the reason from the manifest.
    assert!(md.contains("not available: no CPU quota can be applied"));
    assert!(md.contains("`experiments failover` does not exist in this build"));
    assert!(md.contains("`bench sweep` not run"), "adaptive was not run");
    assert!(md.contains("`etcd` is not on PATH"));
    assert!(md.contains("**95 % CIs over repeats: not measured in this pack**"));
    assert!(md.contains("projection.csv`: **not measured in this pack**"));
}

/// Issue 28: the pack states the transport each condition was measured
/// over, read from the rows' `tls` column, never assumed.
#[test]
fn every_condition_names_the_transport_its_cells_ran_over() {
    let dir = Scratch::new("adr-transport");
    fixture(dir.path());
    let md = render(&load(dir.path()).unwrap());
    assert!(md.contains("workers, plain HTTP]"), "{md}");
    assert!(!md.contains(", TLS]"), "no cell ran with --tls: {md}");
    // The same sweep measured with --tls, one cell of the pause sweep plain.
    let mut rows = Vec::new();
    for lease in [1000, 2000] {
        for m in [0.1, 0.3, 0.5] {
            let mut r = scaled(&format!("ttl={}s_margin={m:.2}", lease / 1000), m, lease);
            r.tls = "tls".into();
            rows.push(r);
        }
    }
    write_sweep(&dir.path().join("sweep"), &rows);
    let md = render(&load(dir.path()).unwrap());
    assert!(md.contains("workers, TLS]"), "{md}");
    assert!(
        md.contains("workers, plain HTTP]"),
        "the pause sweep ran plain: {md}"
    );
}

/// §12's machine load is read from each step's own manifest: a recorded
/// reading shows as the step's busy cores, a step without one as "—".
#[test]
fn the_machine_load_of_a_step_is_read_from_its_manifest() {
    let dir = Scratch::new("adr-load");
    fixture(dir.path());
    std::fs::write(
        dir.path().join("sweep/manifest.json"),
        r#"{"machine_load": {"loadavg_start": [1.0, 0.5, 0.2], "loadavg_end": [1.9, 1.0, 0.4],
            "busy_cores": 1.734, "stat_start": [10, 100]}}"#,
    )
    .unwrap();
    let md = render(&load(dir.path()).unwrap());
    let row = |step: &str| {
        md.lines()
            .find(|l| {
                l.starts_with(&format!("| [`{step}`]")) || l.starts_with(&format!("| `{step}`"))
            })
            .unwrap_or_else(|| panic!("no §12 row for {step}"))
            .to_string()
    };
    assert!(row("sweep").contains("| 1.73 |"), "{}", row("sweep"));
    assert!(
        row("sweep-pause").contains("| — |"),
        "{}",
        row("sweep-pause")
    );
}

#[test]
fn every_link_of_the_document_points_at_a_file_of_the_pack() {
    let dir = Scratch::new("adr-links");
    fixture(dir.path());
    let md = render(&load(dir.path()).unwrap());
    let targets = links(&md);
    assert!(targets.len() > 10, "{targets:?}");
    for l in targets {
        assert!(dir.path().join(&l).is_file(), "dangling link {l}");
    }
}

#[test]
fn the_document_is_a_pure_function_of_the_directory() {
    let dir = Scratch::new("adr-pure");
    fixture(dir.path());
    let a = render(&load(dir.path()).unwrap());
    let b = render(&load(dir.path()).unwrap());
    assert_eq!(a, b);
    // A re-render reads the pack the first render wrote into: the document
    // it wrote is not one of the pack's files, so nothing changes (CI checks
    // the committed pack this way).
    std::fs::write(dir.path().join(EVIDENCE_MD), &a).unwrap();
    assert_eq!(render(&load(dir.path()).unwrap()), a);
}

#[test]
fn an_empty_pack_invents_nothing() {
    let dir = Scratch::new("adr-empty");
    let md = render(&load(dir.path()).unwrap());
    assert!(md.contains("No `adr-manifest.json`"));
    assert!(md.contains("None can be derived"));
    assert!(md.matches("Not measured in this pack").count() >= 6, "{md}");
    assert!(!md.contains("default margin **"));
}

/// One pooling path: with one cell's histogram gone, the summary (`bench
/// report`), the recommendation and `bench adr --render-only` all fail, and
/// each says which file is missing, instead of falling back to the rows'
/// own percentiles.
#[test]
fn a_missing_histogram_fails_every_pooled_figure_naming_the_file() {
    let dir = Scratch::new("adr-missing-hist");
    fixture(dir.path());
    let sweep = dir.path().join("sweep");
    let rows = bench_analysis::results::read_results(&sweep).unwrap();
    let gone = bench_core::hist::series_hdr_path(&sweep, &rows[0].cell, Series::Corrected);
    std::fs::remove_file(&gone).unwrap();
    let name = gone.file_name().unwrap().to_string_lossy().into_owned();
    let samples = bench_analysis::pool::DirSamples::new(&sweep);
    let e = bench_analysis::recommend::recommendations(&rows, &samples).unwrap_err();
    assert!(e.to_string().contains(&name), "{e}");
    let e = bench_analysis::summary::build(&rows, &samples).unwrap_err();
    assert!(e.to_string().contains(&name), "{e}");
    let bench = env!("CARGO_BIN_EXE_bench");
    for args in [
        vec!["report".to_string(), sweep.display().to_string()],
        vec![
            "adr".into(),
            "--render-only".into(),
            "--out".into(),
            dir.path().display().to_string(),
        ],
    ] {
        let out = std::process::Command::new(bench)
            .args(&args)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_ne!(out.status.code(), Some(0), "{args:?}: {stderr}");
        assert!(stderr.contains(&name), "{args:?}: {stderr}");
    }
}

/// The committed reference pack: every interval the recommendation and the
/// summary build on has width (its data is not constant).
#[test]
fn no_recommendation_interval_of_the_reference_pack_has_zero_width() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../data/reference");
    for step in ["sweep", "sweep-pause", "adaptive"] {
        let dir = root.join(step);
        let rows = bench_analysis::results::read_results(&dir).unwrap();
        let s = bench_analysis::summary::build(&rows, &bench_analysis::pool::DirSamples::new(&dir))
            .unwrap();
        assert!(!s.floors.is_empty());
        for f in &s.floors {
            assert!(f.m_min_hi > f.m_min_lo, "{step}: {f:?}");
            assert!(f.p999.hi_us > f.p999.lo_us, "{step}: {f:?}");
        }
        for r in &s.rows {
            assert!(r.m_min_ci95_hi > r.m_min_ci95_lo, "{step}: {}", r.group);
        }
        for rec in bench_analysis::recommend::recommendations_from(&s) {
            if let Some((_, lo, hi)) = rec.m_min {
                assert!(hi > lo, "{step}: {rec:?}");
            }
        }
    }
}

#[test]
fn render_only_rewrites_the_document_and_refuses_a_non_pack() {
    let dir = Scratch::new("adr-cli");
    fixture(dir.path());
    let bench = env!("CARGO_BIN_EXE_bench");
    let out = std::process::Command::new(bench)
        .args(["adr", "--render-only", "--out"])
        .arg(dir.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(dir.path().join(EVIDENCE_MD).is_file());
    let empty = Scratch::new("adr-cli-empty");
    let out = std::process::Command::new(bench)
        .args(["adr", "--render-only", "--out"])
        .arg(empty.path())
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains(ADR_MANIFEST));
}

#[test]
fn the_plan_marks_what_this_build_cannot_run() {
    let out = Path::new("/tmp/pack");
    let none = plan(false, 1, out, &Features::default());
    let names: Vec<&str> = none.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "sweep",
            "sweep-pause",
            "adaptive",
            "pause",
            "pause-uc03",
            "clock",
            "clock-margin",
            "throttle",
            "failover",
            "chaos",
            "peer"
        ]
    );
    assert!(none[0].unavailable.is_none());
    assert!(
        none[3]
            .unavailable
            .as_deref()
            .unwrap()
            .contains("experiments binary")
    );
    assert!(!none[0].args.iter().any(|a| a == "--repeat"));
    assert!(
        none[0]
            .args
            .windows(2)
            .any(|w| w == ["--margin", "0.1..0.5:0.05"])
    );
    let with = Features {
        sweep_repeat: true,
        ..Features::default()
    };
    let full = plan(false, 1, out, &with);
    assert!(full[0].args.windows(2).any(|w| w == ["--repeat", "3"]));
    let quick = plan(true, 1, out, &with);
    assert!(
        !quick[0].args.iter().any(|a| a == "--repeat"),
        "one repeat when quick"
    );
}

#[test]
fn prune_keeps_the_results_and_drops_the_working_files() {
    let dir = Scratch::new("adr-prune");
    fixture(dir.path());
    let p = dir.path();
    std::fs::create_dir_all(p.join("sweep/cells/ttl=1s_margin=0.10")).unwrap();
    std::fs::write(
        p.join("sweep/cells/ttl=1s_margin=0.10/lock-server.log"),
        "x",
    )
    .unwrap();
    std::fs::write(p.join("pause-uc03/lock.sqlite-wal"), vec![0u8; 4096]).unwrap();
    std::fs::create_dir_all(p.join("peer/servers/etcd")).unwrap();
    std::fs::write(p.join("peer/servers/etcd/wal"), vec![0u8; 100]).unwrap();
    std::fs::create_dir_all(p.join("chaos/runs/run-0000")).unwrap();
    std::fs::write(
        p.join("chaos/runs/run-0000/history.jsonl.gz"),
        vec![0u8; 10],
    )
    .unwrap();
    std::fs::write(p.join("chaos/chaos.json"), "{}").unwrap();
    let freed = bench::adr::prune(p).unwrap();
    assert_eq!(freed, 1 + 4096 + 100 + 10);
    assert!(!p.join("chaos/runs").exists());
    assert!(p.join("chaos/chaos.json").is_file());
    assert!(!p.join("sweep/cells").exists());
    assert!(!p.join("peer/servers").exists());
    assert!(!p.join("pause-uc03/lock.sqlite-wal").exists());
    assert!(p.join("sweep/results.parquet").is_file());
    assert!(p.join("pause-uc03/pause.json").is_file());
    assert!(
        p.join("sweep/hgrm/ttl=1s_margin=0.10.corrected.hdr")
            .is_file()
    );
}

/// `--rtt-from FILE`: a distribution measured in production replaces the
/// lab's RTTs in the production condition; a slow production tail (5 % of the
/// heartbeats near 5 s, above 30 s / 15 s × 0.30 / 3 = 1.5 s) changes the
/// proposal, and the document says where the numbers came from.
#[test]
fn rtt_from_a_scrape_drives_the_production_condition() {
    let dir = Scratch::new("adr-rtt-from");
    fixture(dir.path());
    let bench = env!("CARGO_BIN_EXE_bench");
    let render = |extra: &[&str]| {
        let out = std::process::Command::new(bench)
            .args(["adr", "--render-only", "--out"])
            .arg(dir.path())
            .args(extra)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        std::fs::read_to_string(dir.path().join(EVIDENCE_MD)).unwrap()
    };
    let lab = render(&[]);
    let scrape = dir.path().join("workers.prom");
    let family = "lock_heartbeat_rtt_corrected_seconds_bucket";
    std::fs::write(
        &scrape,
        format!(
            "{family}{{job=\"w1\",le=\"0.01\"}} 1000\n{family}{{job=\"w1\",le=\"5\"}} 1050\n\
             {family}{{job=\"w1\",le=\"+Inf\"}} 1050\n{family}{{job=\"w2\",le=\"0.01\"}} 1000\n\
             {family}{{job=\"w2\",le=\"5\"}} 1050\n{family}{{job=\"w2\",le=\"+Inf\"}} 1050\n"
        ),
    )
    .unwrap();
    let measured = render(&["--rtt-from", scrape.to_str().unwrap()]);
    assert!(dir.path().join("production-rtt.json").is_file());
    assert!(measured.contains("measured in production"), "{measured}");
    assert!(measured.contains("2100 samples"), "{measured}");
    assert_ne!(lab, measured);
    assert!(
        measured.contains("**fails**: trigger 1: p99 5001"),
        "the production condition fails trigger 1 at 0.30 on the measured tail:\n{measured}"
    );
    // A missing file is bad input, named.
    let out = std::process::Command::new(bench)
        .args(["adr", "--render-only", "--out"])
        .arg(dir.path())
        .args(["--rtt-from", "/nonexistent/w.prom"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("/nonexistent/w.prom"));
}
