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

/// A freeze cell at TTL 2s: 4 freezes of `freeze_ms` every 3 s over 16
/// workers + 800 idle sessions (3,264 exposures), `lost` of them lost, gaps
/// recorded.
fn freeze_row(cell: &str, margin: f64, divisor: u32, freeze_ms: u64, lost: u64) -> CellRow {
    let mut r = scaled(cell, margin, 2000);
    r.server_pause = format!("3s:{freeze_ms}ms");
    r.heartbeat_divisor = divisor;
    r.workers = 16;
    r.idle_sessions = 800;
    r.server_pauses = 4;
    r.hb_gap_count = 10_000;
    r.hb_gaps_over_window = lost;
    r
}

/// A pack: the sweep (TTL 1s and 2s), the freeze sweep, the clock and
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
        redis: false,
    };
    let steps = plan(true, 7, dir, &features);
    let status = |name: &str| match name {
        "sweep" | "freeze" | "clock" | "pause" => (Status::Ok, ""),
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
    let freezes: Vec<CellRow> = [3, 4]
        .into_iter()
        .map(|k| {
            freeze_row(
                &format!("ttl=2s_margin=0.30_k={k}_pause=400ms"),
                0.3,
                k,
                400,
                0,
            )
        })
        .collect();
    write_sweep(&dir.join("freeze"), &freezes);
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
    // Production: U − U/3 = 10 500 − 3 500 = 7 000 = the hop; a p50 of
    // 2 ms is refused for 2 of each 3 500 ms period, within 1 %: kept. With
    // no refusal tolerated, U/4 (7 875 ms) is needed.
    assert!(
        md.contains(
            "- **§6.2** margin **0.30** (unchanged); heartbeat period U / **3** (unchanged)"
        ),
        "{md}"
    );
    let strict = bench_report::adr::evidence::render_with(
        &load(dir.path()).unwrap(),
        &bench_report::adr::revision::Tolerances {
            d4_refusal: 0.0,
            ..Default::default()
        },
    );
    assert!(
        strict.contains("heartbeat period U / **4** (was U / 3)"),
        "{strict}"
    );
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

/// TLS: the pack states the transport each condition was measured
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
        !md.contains("workers, plain HTTP]"),
        "every condition's cells ran over TLS now: {md}"
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
    assert!(row("freeze").contains("| — |"), "{}", row("freeze"));
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
    assert!(!md.contains("- **§6.2** margin **"));
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
    for step in ["sweep", "freeze", "adaptive"] {
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
    std::fs::create_dir_all(p.join("pause-etcd/etcd-data/member/wal")).unwrap();
    std::fs::write(p.join("pause-etcd/etcd-data/member/wal/0.wal"), [0u8; 7]).unwrap();
    std::fs::create_dir_all(p.join("pause-redis/redis-data/appendonlydir")).unwrap();
    std::fs::write(
        p.join("pause-redis/redis-data/appendonlydir/a.aof"),
        [0u8; 3],
    )
    .unwrap();
    std::fs::write(p.join("pause-redis/pause.json"), "{}").unwrap();
    let freed = bench::adr::prune(p).unwrap();
    assert_eq!(freed, 1 + 4096 + 100 + 10 + 7 + 3);
    assert!(!p.join("pause-etcd/etcd-data").exists());
    assert!(!p.join("pause-redis/redis-data").exists());
    assert!(p.join("pause-redis/pause.json").is_file());
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
        measured.contains("**insufficient data**: p99 5001"),
        "2,100 samples are fewer than a p99 needs, however far above its budget:\n{measured}"
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

/// The part of the document before its guide: the first screen.
fn first_screen(md: &str) -> &str {
    md.split("## How to read this").next().unwrap()
}

/// A copy of the committed reference pack, re-rendered with `extra` flags.
fn reference_copy(name: &str, extra: &[&str]) -> (Scratch, String, String) {
    let dir = Scratch::new(name);
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../data/reference");
    let status = std::process::Command::new("cp")
        .arg("-r")
        .arg(root.as_os_str())
        .arg(dir.path().join("pack"))
        .status()
        .unwrap();
    assert!(status.success());
    let pack = dir.path().join("pack");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_bench"))
        .args(["adr", "--render-only", "--out"])
        .arg(&pack)
        .args(extra)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let md = std::fs::read_to_string(pack.join(EVIDENCE_MD)).unwrap();
    let rev = std::fs::read_to_string(pack.join(bench::adr::REVISION_MD)).unwrap();
    (dir, md, rev)
}

/// The committed pack derives a pair: its freeze cells are judged per
/// (margin, divisor, freeze) (at 0.30 a 400 ms freeze is ridden through at
/// U/4, not at U/3), never pooled into one censored stall; (0.30, U/3) fails D4 (sawtooth) under the CPU quota
/// (43.6 ms of a 3,500 ms period = 1.25 % > 1 %) and U/4 passes. The first
/// screen says which way D4 goes, and the D4 fact at ADR-006's numbers.
#[test]
fn the_reference_pack_derives_margin_0_30_with_a_quarter_period() {
    let (_dir, md, rev) = reference_copy("adr-reference", &[]);
    let top = first_screen(&md);
    assert!(
        top.contains("**Margin 0.30, heartbeat period U/4**"),
        "{top}"
    );
    assert!(
        top.contains("15000 × 0.70 × 2/3 = 7.000 s, exactly the 7000 ms hop"),
        "{top}"
    );
    assert!(top.contains("at U/4 it is 7875 ms − RTT"), "{top}");
    assert!(
        top.contains("D4 (sawtooth) fails once hop + p50 exceeds"),
        "{top}"
    );
    assert!(!top.contains("D4 holds if"), "{top}");
    assert!(top.contains("`--tolerance-lost-per-freeze`"), "{top}");
    assert!(top.contains("| 0.30 | **fail**: D4 saw (quota) 0.751× | **fail**: D4 saw (quota) 0.999× ← ADR-006 | pass (tightest: D4 saw (quota) 1.123×) ← proposed"), "{top}");
    assert!(
        top.lines().count() <= 50,
        "first screen {} lines",
        top.lines().count()
    );
    assert!(
        md.contains("| 1000 | 0.30 | 4 | 400 | 3 | 9792 | 1 | 0.010 % | pass |"),
        "{md}"
    );
    assert!(
        md.contains("| 1000 | 0.30 | 3 | 400 | 3 | 9792 | 11 | 0.112 % | **fail** |"),
        "{md}"
    );
    assert!(rev.contains("/ **4** = 2625 ms"), "{rev}");
    // One definition of the margin needed: the §11 table, the §3 headline
    // and the proposed revision print the same 3 × p99 / base.
    let quota_row = md
        .lines()
        .find(|l| {
            l.starts_with("| production, workers under a CPU quota")
                && l.contains("throttle/results.csv")
        })
        .expect("§11 row");
    let needed = quota_row.split(" | ").nth(8).unwrap().trim().to_owned();
    assert_eq!(needed, "0.035", "{quota_row}");
    assert!(
        md.contains(&format!("margin needed from {needed} to")),
        "§3"
    );
    assert!(
        rev.contains(&format!("under the quota **{needed}**")),
        "{rev}"
    );
    assert!(!md.contains("m needed"), "no second definition");
}

/// The tolerances are flags that work with --render-only and are printed:
/// with no D4 refusal tolerated the fixture needs U/4, with a 9 s freeze
/// to ride through no pair passes; a tolerance out of range is bad input.
#[test]
fn the_tolerances_are_flags_printed_in_the_document() {
    let dir = Scratch::new("adr-tolerance");
    fixture(dir.path());
    let run = |extra: &[&str]| {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_bench"))
            .args(["adr", "--render-only", "--out"])
            .arg(dir.path())
            .args(extra)
            .output()
            .unwrap();
        (
            out.status.code(),
            std::fs::read_to_string(dir.path().join(EVIDENCE_MD)).unwrap_or_default(),
        )
    };
    let (code, md) = run(&["--tolerance-d4-refusal", "0"]);
    assert_eq!(code, Some(0));
    let top = first_screen(&md);
    assert!(top.contains("D4 refusals ≤ 0.00 %"), "{top}");
    assert!(
        top.contains("**Margin 0.30, heartbeat period U/4**"),
        "{top}"
    );
    let (_, md) = run(&["--tolerance-freeze", "9s"]);
    assert!(first_screen(&md).contains("9000 ms (set)"), "{md}");
    assert!(first_screen(&md).contains("None can be derived"), "{md}");
    let (code, _) = run(&["--tolerance-lost-per-freeze", "0"]);
    assert_eq!(code, Some(2));
}

/// The freeze step: margins × divisors × four freeze lengths, each cell
/// sized for the 3,000 exposures a 0.1 % verdict needs.
#[test]
fn the_freeze_step_covers_divisors_and_freeze_lengths_with_enough_exposures() {
    let steps = plan(false, 1, Path::new("/tmp/pack"), &Features::default());
    let f = steps.iter().find(|s| s.name == "freeze").unwrap();
    let arg = |flag: &str| {
        f.args
            .windows(2)
            .find(|w| w[0] == flag)
            .map(|w| w[1].clone())
            .unwrap_or_else(|| panic!("{flag} missing: {:?}", f.args))
    };
    assert_eq!(arg("--heartbeat-divisor"), "3,4");
    assert_eq!(arg("--server-pause"), "3s:300ms,400ms,500ms,600ms");
    assert_eq!(arg("--margin"), "0.2,0.3,0.4");
    let secs = |s: String| humantime::parse_duration(&s).unwrap().as_secs_f64();
    let freezes = (secs(arg("--duration")) / 3.0).floor();
    let open: f64 =
        arg("--workers").parse::<f64>().unwrap() + arg("--sessions").parse::<f64>().unwrap();
    assert!(freezes * open >= 3_000.0, "{freezes} × {open}");
    assert!(!steps.iter().any(|s| s.name == "sweep-pause"));
}

/// The revision file is written beside the document and, like it, is not a
/// file of the pack it is rendered from: a re-render changes neither.
#[test]
fn render_only_writes_the_revision_beside_the_document_reproducibly() {
    let dir = Scratch::new("adr-revision");
    fixture(dir.path());
    let run = || {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_bench"))
            .args(["adr", "--render-only", "--out"])
            .arg(dir.path())
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        (
            std::fs::read(dir.path().join(EVIDENCE_MD)).unwrap(),
            std::fs::read(dir.path().join(bench::adr::REVISION_MD)).unwrap(),
        )
    };
    let a = run();
    assert_eq!(run(), a);
    let md = String::from_utf8(a.0).unwrap();
    assert!(
        md.contains("[adr-006-revision.md](adr-006-revision.md)"),
        "{md}"
    );
    assert!(md.contains("](adr-decision.svg)"));
}
