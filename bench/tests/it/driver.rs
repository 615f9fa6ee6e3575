//! The driver half of the bench, end to end against real child processes:
//! the measurement sees an injected delay (and the proxy's own overhead is
//! measured), a short sweep writes every output with zero duplicates and zero
//! fence-outs, and bad flags exit 2 naming the flag. `measurement.rs` holds
//! the measurement rules' end-to-end checks (coordinated omission, trigger 4's trace,
//! the warm-up).

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use bench::runner::{self, RunConfig, Runtime};
use bench_core::grid::{Cell, PolicySpec};
use tokio::sync::watch;

/// A fresh directory under the system temp dir.
pub(crate) fn temp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "fencepost-bench-{tag}-{}-{}",
        std::process::id(),
        rand::random::<u32>()
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A two-worker configuration on an in-memory store, seed 7; `net_delay` through the proxy; shared with `etcd.rs`.
pub(crate) fn config(net_delay: Option<&str>) -> RunConfig {
    RunConfig {
        runtime: Runtime::Process {
            store: Some("memory:".into()),
            replicas: 1,
        },
        workers: 2,
        duration: Duration::from_secs(2),
        payouts: 2_000,
        policies: vec![PolicySpec::Fixed],
        repeat: 1,
        projection: Default::default(),
        session_ttl: None,
        rail_latency: "fixed:30ms".parse().unwrap(),
        rail_read_timeout: Duration::from_secs(5),
        time_scale: true,
        net_delay: net_delay.map(|s| s.parse().unwrap()),
        server_pause: None,
        heartbeat_divisors: vec![3],
        seed: 7,
        client_check: true,
        warmup: None,
        backends: vec![bench_driver::backend::BackendKind::Fencepost],
        etcd_url: None,
        redis_urls: Vec::new(),
        redis_persistence: Default::default(),
        redlock_instances: 3,
        sampling: Default::default(),
        tls: false,
        hold: None,
        steps: 1,
    }
}

/// The bench must see what is there: with a proxy adding a fixed 20 ms to every
/// round trip (10 ms on the request, 10 ms on the reply), the recorded
/// heartbeat RTT p50 and p99 must be at least 20 ms (the proxy only ever adds)
/// and p50 within 15 ms above it. On this 2-core machine the undelayed
/// loopback RTT p50 is ~1–3 ms in a debug build (see a plain `bench run`), so
/// 15 ms leaves room for a loaded machine while still failing if the delay
/// were missed (p50 ≈ 2 ms), applied on one leg only (≈ 12 ms) or twice
/// (≥ 40 ms). The cell also measured the zero-delay proxy's own overhead.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fixed_20ms_proxy_delay_shows_up_in_the_recorded_rtt() {
    let cfg = config(Some("fixed:20ms"));
    let plan = cfg.plan(Cell::fixed(Duration::from_secs(1), 0.3));
    let out = temp_dir("proxy");
    let (_tx, rx) = watch::channel(false);
    let result = runner::run_cell(&cfg, &plan, &out, rx, &|_| {}, true, None)
        .await
        .unwrap()
        .unwrap();
    let overhead = result.proxy_overhead.as_ref().expect("baseline measured");
    assert_eq!(overhead.samples, bench_driver::proxy::BASELINE_PAIRS as u64);
    assert!(
        overhead.direct_p50_us > 0 && overhead.proxied_p50_us > 0,
        "{overhead:?}"
    );
    let r = &result.row;
    assert!(r.hb_count >= 10, "too few heartbeats: {}", r.hb_count);
    assert!(
        r.hb_rtt_p50_us >= 20_000,
        "p50 {} µs below the injected 20 ms",
        r.hb_rtt_p50_us
    );
    assert!(
        r.hb_rtt_p99_us >= 20_000,
        "p99 {} µs below the injected 20 ms",
        r.hb_rtt_p99_us
    );
    assert!(
        r.hb_rtt_p50_us <= 35_000,
        "p50 {} µs: more than 15 ms above the injected 20 ms",
        r.hb_rtt_p50_us
    );
    assert!(
        r.ledger_ok && r.duplicate_attempted == 0 && r.fenced_out == 0,
        "{r:?}"
    );
    assert!(r.payouts_paid > 0, "{r:?}");
}

fn bench() -> Command {
    Command::new(env!("CARGO_BIN_EXE_bench"))
}

/// Every refused input exits 2 and names its flag and what is valid: a
/// table of (arguments, what stderr must say).
#[test]
fn bad_flags_exit_2_naming_the_flag() {
    let cases: &[(&[&str], &str)] = &[
        (&["sweep", "--margin", "0.5..0.1"], "--margin"),
        (&["sweep", "--margin", "1.0"], "--margin"),
        (&["sweep", "--margin", "0.1..1.2"], "--margin"),
        (&["run", "--ttl", "1parsec"], "--ttl"),
        (&["run", "--ttl", "5"], "--ttl"),
        (&["run", "--duration", "10"], "--duration"),
        (&["run", "--net-delay", "gaussian:1ms"], "--net-delay"),
        (&["run", "--server-pause", "1s:2s"], "--server-pause"),
        (
            &["sweep", "--server-pause", "3s:300ms,3s"],
            "--server-pause \"3s:300ms,3s\": FOR 3s must be shorter than EVERY 3s",
        ),
        (
            &["run", "--server-pause", "3s:300ms,400ms"],
            "--server-pause",
        ),
        (
            &["sweep", "--heartbeat-divisor", "1"],
            "--heartbeat-divisor \"1\"",
        ),
        (
            &["sweep", "--heartbeat-divisor", "3,11"],
            "--heartbeat-divisor",
        ),
        (
            &["run", "--heartbeat-divisor", "3,4"],
            "--heartbeat-divisor",
        ),
        (&["run", "--margin", "0.1,0.2"], "--margin"),
        (&["run", "--runtime", "external"], "--lock-url"),
        (&["run", "--replicas", "3"], "--replicas"),
        (
            &["run", "--replicas", "3", "--store", "memory:"],
            "--replicas",
        ),
        (&["run", "--replicas", "0"], "--replicas"),
        (&["triggers", "/nonexistent/fencepost-dir"], "nonexistent"),
        (&["run", "--repeat", "0"], "--repeat"),
        (
            &["sweep", "--margin-policy", "fixed,k=3"],
            "--margin-policy",
        ),
        (
            &["sweep", "--margin-policy", "fixed,fixed"],
            "--margin-policy",
        ),
        (
            &["run", "--margin-policy", "fixed,adaptive:k=3"],
            "--margin-policy",
        ),
        (
            &["run", "--projection-margin", "1.5"],
            "--projection-margin",
        ),
        (&["replay", "/nonexistent/fencepost-dir"], "manifest.json"),
        (&["run", "--sessions", "100001"], "--sessions"),
        (&["run", "--min-samples", "0"], "--min-samples"),
        (&["run", "--max-duration", "1m"], "--max-duration"),
        (
            &[
                "run",
                "--min-samples",
                "10",
                "--duration",
                "10s",
                "--max-duration",
                "5s",
            ],
            "--max-duration",
        ),
        (
            &["run", "--sessions", "10", "--backend", "etcd"],
            "--sessions",
        ),
        // A value starting with a hyphen reaches the flag's own check
        // (never clap's "unexpected argument '-1'"), which says what is valid.
        (
            &["run", "--ttl", "-1s"],
            "--ttl \"-1s\": a duration cannot be negative; expected 100ms..10m",
        ),
        (
            &["run", "--margin", "-0.1"],
            "--margin \"-0.1\": a margin must satisfy 0 <= m < 1",
        ),
        (&["sweep", "--margin", "-0.1..0.5"], "0 <= m < 1"),
        (&["run", "--duration", "-5s"], "--duration \"-5s\""),
        (&["run", "--warmup", "-1s"], "--warmup \"-1s\""),
        (&["run", "--session-ttl", "-1s"], "--session-ttl"),
        (
            &["run", "--rail-read-timeout", "-5s"],
            "--rail-read-timeout",
        ),
        (&["run", "--server-pause", "-3s:1s"], "--server-pause"),
        (&["run", "--heartbeat-divisor", "-3"], "2..10"),
        (&["run", "--net-delay", "-1ms"], "--net-delay"),
        (
            &["run", "--projection-margin", "-0.3"],
            "--projection-margin",
        ),
        (
            &["run", "--workers", "-1"],
            "'--workers <WORKERS>': must be a whole number 1..=1024",
        ),
        (
            &["run", "--payouts", "0"],
            "'--payouts <PAYOUTS>': must be a whole number 1..=1000000",
        ),
        (&["run", "--sessions", "-1"], "0..=100000"),
        (&["run", "--min-samples", "-1"], "'--min-samples <K>'"),
        (
            &["run", "--seed", "-1"],
            "'--seed <SEED>': must be a whole number",
        ),
        (&["run", "--replicas", "-1"], "1..=9"),
        (
            &["sweep", "--repeat", "-1"],
            "'--repeat <REPEAT>': must be a whole number 1..=100",
        ),
        // --repeat and --resume are sweep's, not run's.
        (&["run", "--repeat", "2"], "--repeat"),
        (&["run", "--resume"], "--resume"),
        (
            &["run", "--out", "/proc/fencepost/no-such-dir"],
            "--out /proc/fencepost/no-such-dir: cannot write the results directory: ",
        ),
        (
            &["peer", "--out", "/proc/fencepost/x"],
            "--out /proc/fencepost/x",
        ),
        (&["peer", "--repeat", "-1"], "'--repeat <REPEAT>'"),
        (&["peer", "--duration", "-1s"], "--duration \"-1s\""),
        (
            &["peer", "--sessions", "10", "--margin", "-0.2"],
            "--margin \"-0.2\": a number 0 <= m < 1",
        ),
        (
            &["peer", "--sessions", "10", "--connections", "0"],
            "1..=4096",
        ),
        (
            &["adr", "--out", "/proc/fencepost/x"],
            "--out /proc/fencepost/x",
        ),
        (
            &[
                "adr",
                "--out",
                "/proc/fencepost/x",
                "--tolerance-lost-per-freeze",
                "-0.1",
            ],
            "'--tolerance-lost-per-freeze <FRACTION>': expected a fraction in (0, 1)",
        ),
        (
            &[
                "adr",
                "--out",
                "/proc/fencepost/x",
                "--tolerance-freeze",
                "-1s",
            ],
            "'--tolerance-freeze <DURATION>': expected a duration greater than 0",
        ),
        (
            &["adr", "--out", "/proc/fencepost/x", "--seed", "-2"],
            "'--seed <SEED>'",
        ),
        (&["rules", "--margin", "-0.1"], "--margin \"-0.1\""),
        (
            &["rules", "--for", "-1m"],
            "--for \"-1m\": a duration cannot be negative",
        ),
        (
            &["rules", "--out", "/proc/fencepost/x"],
            "--out /proc/fencepost/x: cannot write",
        ),
        (
            &[
                "triggers",
                "--prometheus",
                "http://127.0.0.1:9",
                "--lease",
                "-1s",
            ],
            "--lease \"-1s\"",
        ),
        (
            &["triggers", "--write", "--prometheus", "http://127.0.0.1:9"],
            "--write",
        ),
    ];
    for (args, needle) in cases {
        let out = bench().args(*args).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(
            stderr.contains(needle),
            "{args:?} should name {needle}: {stderr}"
        );
    }
}

/// One 1 s-TTL cell of [`config`] with a 1 s duration under `sampling`.
async fn sampled_cell(tag: &str, sampling: bench_driver::cell::Sampling) -> runner::CellResult {
    let mut cfg = config(None);
    cfg.duration = Duration::from_secs(1);
    cfg.sampling = sampling;
    let plan = cfg.plan(Cell::fixed(Duration::from_secs(1), 0.3));
    let (_tx, rx) = watch::channel(false);
    runner::run_cell(&cfg, &plan, &temp_dir(tag), rx, &|_| {}, false, None)
        .await
        .unwrap()
        .unwrap()
}

/// `--sessions` adds idle sessions whose heartbeats count, and
/// `--min-samples` keeps the window open until the corrected histogram holds
/// that many: 2 workers alone record ~17 corrected samples a second at
/// `--ttl 1s` (500 ms sessions), so 600 within the 20 s bound needs the 40
/// idle sessions (~340 a second). The window's time blocks add up to its
/// corrected histogram, and the sessions are closed after it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_sessions_and_the_sequential_stop_gather_the_samples_asked_for() {
    let result = sampled_cell(
        "sessions",
        bench_driver::cell::Sampling {
            sessions: 40,
            min_samples: Some(600),
            max_duration: Some(Duration::from_secs(20)),
        },
    )
    .await;
    let r = &result.row;
    assert_eq!(r.idle_sessions, 40);
    assert_eq!(r.stopped_by, "min_samples", "{r:?}");
    assert!(r.hb_corrected_count >= 600, "{}", r.hb_corrected_count);
    assert!(r.duration_s < 20.0, "{}", r.duration_s);
    assert!(
        r.lock_server_rss_peak_kb > 0.0,
        "{}",
        r.lock_server_rss_peak_kb
    );
    let blocks = result
        .blocks
        .as_ref()
        .expect("in-process cells cut time blocks");
    assert!(blocks.blocks.len() >= 2, "{} blocks", blocks.blocks.len());
    assert_eq!(blocks.len(), result.histograms.corrected.len());
}

/// Idle sessions are kept: a server pause longer than their 500 ms session
/// TTL (a `--ttl 1s` cell) loses every one of them, and each is replaced by a
/// new session, so the cell's load after the pause is what its
/// `idle_sessions` says. The losses stay counted in `session_lost`. Without
/// the keeper `idle_reopened` is 0 and the time blocks from 5 s on hold only
/// the two workers' heartbeats (~17 a second, against ~200 with 24 sessions).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn lost_idle_sessions_are_replaced_and_their_losses_counted() {
    let mut cfg = config(None);
    cfg.duration = Duration::from_secs(6);
    // One pause, from 2.8 s to 4 s into the window (the next would be at 6.8 s).
    cfg.server_pause = Some(bench_core::grid::parse_pause_axis("4s:1200ms").unwrap());
    cfg.sampling = bench_driver::cell::Sampling {
        sessions: 24,
        ..Default::default()
    };
    let plan = cfg.plan(Cell::fixed(Duration::from_secs(1), 0.3));
    let (_tx, rx) = watch::channel(false);
    let result = runner::run_cell(&cfg, &plan, &temp_dir("keep"), rx, &|_| {}, false, None)
        .await
        .unwrap()
        .unwrap();
    let r = &result.row;
    assert_eq!(r.idle_sessions, 24);
    assert!(r.session_lost >= 24, "every idle session is lost: {r:?}");
    assert!(r.idle_reopened >= 24, "and replaced: {}", r.idle_reopened);
    // The one freeze in the window is counted, and every session lost at its
    // deadline (workers' and idle ones) left exactly one gap over its window.
    assert_eq!(r.server_pauses, 1, "{r:?}");
    assert!(r.session_lost_deadline >= 24, "{r:?}");
    assert_eq!(r.hb_gaps_over_window, r.session_lost_deadline, "{r:?}");
    assert!(r.hb_gap_count > r.hb_gaps_over_window, "{r:?}");
    // A lost session's censored gap is at least its window, 0.5 s × 0.7.
    assert!(r.hb_gap_max_us >= 350_000, "{r:?}");
    let blocks = result
        .blocks
        .as_ref()
        .expect("in-process cells cut time blocks");
    // From the fifth 1 s cut to the join (at least a second, a second after
    // the pause ended): the kept fleet's heartbeats. The last block alone
    // may be a sliver between the last cut and the join.
    let sizes: Vec<u64> = blocks.blocks.iter().map(|b| b.len()).collect();
    let after: u64 = sizes.iter().skip(5).sum();
    assert!(
        after >= 100,
        "from 5 s on the blocks hold the kept fleet's heartbeats: {sizes:?}"
    );
}

/// Without enough samples by `--max-duration`, the window ends there and
/// says so: the row is not mistaken for one that met its floor.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sequential_stop_that_runs_out_of_time_says_max_duration() {
    let r = sampled_cell(
        "max-duration",
        bench_driver::cell::Sampling {
            sessions: 0,
            min_samples: Some(1_000_000),
            max_duration: Some(Duration::from_secs(2)),
        },
    )
    .await
    .row;
    assert_eq!(r.stopped_by, "max_duration");
    assert_eq!(r.idle_sessions, 0);
    assert!(r.duration_s >= 2.0, "{}", r.duration_s);
    assert!(r.hb_corrected_count < 1_000_000);
}

/// `bench sweep` over three margins at 1 s, one second per cell, into `out`,
/// with `extra` flags appended.
fn short_sweep(out: &std::path::Path, duration: &str, extra: &[&str]) -> Option<i32> {
    bench()
        .args([
            "sweep",
            "--margin",
            "0.1..0.5:0.2",
            "--ttl",
            "1s",
            "--duration",
            duration,
        ])
        .args(["--workers", "2", "--payouts", "2000", "--store", "memory:"])
        .args(extra)
        .arg("--out")
        .arg(out)
        .status()
        .unwrap()
        .code()
}

#[test]
fn a_short_sweep_writes_every_output_with_zero_duplicates_and_resumes() {
    let out = temp_dir("sweep").join("run");
    assert_eq!(short_sweep(&out, "1s", &["--seed", "11"]), Some(0));
    for f in [
        "results.parquet",
        "results.csv",
        "manifest.json",
        "triggers.json",
        "report.md",
        "rtt_cdf.svg",
        "rtt_cdf.png",
        "throughput_vs_margin.png",
        "abandonment_vs_margin.svg",
        "p99_vs_budget.png",
    ] {
        let p = out.join(f);
        assert!(
            p.metadata().map(|m| m.len() > 0).unwrap_or(false),
            "{f} missing or empty"
        );
    }
    let rows = bench_analysis::results::read_results(&out).unwrap();
    assert_eq!(
        rows.iter().map(|r| r.cell.as_str()).collect::<Vec<_>>(),
        [
            "ttl=1s_margin=0.10",
            "ttl=1s_margin=0.30",
            "ttl=1s_margin=0.50"
        ]
    );
    for r in &rows {
        assert_eq!(
            (
                r.duplicate_attempted,
                r.fenced_out,
                r.paid_twice,
                r.stale_paid
            ),
            (0, 0, 0, 0),
            "{r:?}"
        );
        assert!(r.ledger_ok && r.payouts_paid > 0 && r.seed == 11, "{r:?}");
        assert!(out.join("hgrm").join(format!("{}.hgrm", r.cell)).exists());
    }
    // Resuming a finished sweep runs nothing and keeps the rows.
    assert_eq!(
        short_sweep(&out, "1s", &["--seed", "11", "--resume"]),
        Some(0)
    );
    assert_eq!(bench_analysis::results::read_results(&out).unwrap(), rows);
    // A different configuration is refused on resume.
    assert_eq!(short_sweep(&out, "2s", &["--resume"]), Some(2));
    // triggers reads it back: 0 (none fired) or 3 (one fired), never 2.
    let code = bench().arg("triggers").arg(&out).status().unwrap().code();
    assert!(matches!(code, Some(0) | Some(3)), "{code:?}");
}

/// `(cell, seed, repeat)` of every row of a results directory.
fn cell_seeds(dir: &std::path::Path) -> Vec<(String, u64, u32)> {
    bench_analysis::results::read_results(dir)
        .unwrap()
        .into_iter()
        .map(|r| (r.cell, r.seed, r.repeat))
        .collect()
}

/// Repeats, shortened: two repeats of a fixed and an adaptive
/// cell write one row per (cell, repeat) with seeds seed + repeat, a summary
/// row per point with lo ≤ median ≤ hi, and projection.csv; `bench replay`
/// runs the same (cell, seed) pairs; `--resume` with another `--margin` is
/// refused, naming the flag.
#[test]
fn repeats_and_policies_summarise_replay_and_refuse_a_changed_resume() {
    let base = temp_dir("repeat");
    let out = base.join("run");
    let sweep = |out: &std::path::Path, margin: &str, extra: &[&str]| {
        bench()
            .args([
                "sweep",
                "--margin",
                margin,
                "--ttl",
                "1s",
                "--duration",
                "1s",
            ])
            .args(["--repeat", "2", "--margin-policy"])
            .arg("fixed,adaptive:k=4,floor=0.05,ceiling=0.5")
            .args(["--workers", "2", "--payouts", "2000", "--store", "memory:"])
            .args(extra)
            .arg("--out")
            .arg(out)
            .output()
            .unwrap()
    };
    let first = sweep(&out, "0.3", &["--seed", "21"]);
    assert_eq!(
        first.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&first.stderr)
    );
    let rows = cell_seeds(&out);
    assert_eq!(
        rows,
        [
            ("ttl=1s_margin=0.30_rep=0".to_owned(), 21, 0),
            (
                "ttl=1s_adaptive_k=4_floor=0.05_ceiling=0.50_rep=0".to_owned(),
                21,
                0
            ),
            ("ttl=1s_margin=0.30_rep=1".to_owned(), 22, 1),
            (
                "ttl=1s_adaptive_k=4_floor=0.05_ceiling=0.50_rep=1".to_owned(),
                22,
                1
            ),
        ]
    );
    let summary = std::fs::read_to_string(out.join("summary.csv")).unwrap();
    let lines: Vec<&str> = summary.lines().collect();
    assert_eq!(lines.len(), 3, "{summary}");
    let header: Vec<&str> = lines[0].split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    for line in &lines[1..] {
        // The adaptive policy's name is quoted (it holds commas): read from the right.
        let cells: Vec<&str> = line.rsplitn(header.len() - 1, ',').collect();
        let get =
            |name: &str| -> f64 { cells[header.len() - 2 - (col(name) - 1)].parse().unwrap() };
        let (lo, med, hi) = (
            get("throughput_ci95_lo"),
            get("throughput_median"),
            get("throughput_ci95_hi"),
        );
        assert!(lo <= med && med <= hi, "{line}");
        assert_eq!(get("n_repeats"), 2.0);
    }
    let projection = std::fs::read_to_string(out.join("projection.csv")).unwrap();
    assert!(projection.lines().count() >= 2, "{projection}");
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["grid"].as_array().unwrap().len(), 4);
    assert!(manifest["argv"].as_array().unwrap().len() > 5);

    let refused = sweep(&out, "0.1", &["--resume"]);
    assert_eq!(refused.status.code(), Some(2));
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("--margin"), "{err}");

    let replay_dir = base.join("replay");
    let replay = bench()
        .arg("replay")
        .arg(&out)
        .arg("--out")
        .arg(&replay_dir)
        .output()
        .unwrap();
    assert_eq!(
        replay.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&replay.stderr)
    );
    assert_eq!(cell_seeds(&replay_dir), rows, "the same (cell, seed) pairs");
    let again: serde_json::Value =
        serde_json::from_slice(&std::fs::read(replay_dir.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(again["grid"], manifest["grid"]);
}

/// `--replicas 3` on PostgreSQL: three lock-servers per cell, the workers
/// given every URL; the cell pays with a sound ledger. Needs
/// `FENCEPOST_TEST_PG_URL` (fails under `CI=true` without it).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replicas_on_postgres_serve_a_cell() {
    let url = match std::env::var("FENCEPOST_TEST_PG_URL") {
        Ok(u) if !u.is_empty() => u,
        _ if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!("CI=true but FENCEPOST_TEST_PG_URL is not set: .ci/run must start PostgreSQL")
        }
        _ => {
            eprintln!("skipping: set FENCEPOST_TEST_PG_URL (scripts/pg-test-cluster.sh start)");
            return;
        }
    };
    let schema = format!("bench_replicas_{}", std::process::id());
    let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .expect("connect");
    tokio::spawn(conn);
    client
        .batch_execute(&format!(
            "DROP SCHEMA IF EXISTS {schema} CASCADE; CREATE SCHEMA {schema}"
        ))
        .await
        .expect("schema");
    let sep = if url.contains('?') { '&' } else { '?' };
    let mut cfg = config(None);
    cfg.runtime = Runtime::Process {
        store: Some(format!("{url}{sep}options=-csearch_path%3D{schema}")),
        replicas: 3,
    };
    let plan = cfg.plan(Cell::fixed(Duration::from_secs(1), 0.3));
    let out = temp_dir("replicas");
    let (_tx, rx) = watch::channel(false);
    let result = runner::run_cell(&cfg, &plan, &out, rx, &|_| {}, true, None)
        .await
        .unwrap()
        .unwrap();
    let r = &result.row;
    assert!(r.payouts_paid > 0, "{r:?}");
    assert!(
        r.ledger_ok && r.duplicate_attempted == 0 && r.paid_twice == 0,
        "{r:?}"
    );
    let logs: Vec<_> = walk(&out)
        .into_iter()
        .filter(|p| {
            p.file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("lock-server"))
        })
        .collect();
    assert_eq!(logs.len(), 3, "one log per replica: {logs:?}");
}

/// Every file under `dir`.
fn walk(dir: &std::path::Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    for e in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(walk(&p));
        } else {
            out.push(p);
        }
    }
    out
}
