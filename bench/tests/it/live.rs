//! The generated alerts on live runs: a real Prometheus child
//! (1 s scrape and evaluation) loads `bench rules`, scrapes a live `bench run
//! --metrics-listen` (the SDK's families at /metrics, the cell's lock-server
//! and rail-stub found through its /sd), and:
//!
//! - a run with the lock-server paused (`--server-pause 2s:700ms`) takes the
//!   trigger-1 alert to `firing`, and `bench triggers --prometheus` on it gives
//!   the verdicts `bench triggers DIR` gives on the run's results;
//! - the same run without the pause fires no alert of the five triggers (the
//!   clock check's alert is whatever this host's clock discipline says);
//! - `experiments pause --disable-client-check` fires the fenced-out alert;
//! - two bench processes against one lock-server: Prometheus's fleet p99 of
//!   the corrected RTT agrees with the p99 of their merged HDR histograms to
//!   within one bucket.
//!
//! The runs go one after another in one test, so that they do not share the
//! two cores with each other. Without `prometheus` the test is skipped with a
//! message, except under `CI=true`, where its absence fails it.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use bench_core::hist::{Series, load_series, new_histogram};
use fencepost_api::buckets::heartbeat_bounds;

use super::prometheus::{Prometheus, alert_state, eventually, free_port, get};
use super::promtool::tool;

/// The cells' configuration: 2 s lease and session, margin 0.3. Trigger 1's
/// budget is 2 s × 0.3 / 3 = 200 ms, which a 700 ms pause overruns while the
/// client deadline (1.4 s) survives it; D4's hop is the scaled 7 s × 2 / 30.
const TTL: &str = "2s";
const MARGIN: &str = "0.3";
const HOP: &str = "467ms";
/// The rules' window: long enough for 1,000 corrected samples at 8 workers.
const WINDOW: &str = "30s";
/// The window `bench triggers --prometheus` looks back over after a run: all of it.
const WHOLE_RUN: &str = "3m";

/// The check parameters of these runs, as `bench rules` and `bench triggers` take them.
fn check_args(window: &str) -> Vec<String> {
    [
        "--lease",
        TTL,
        "--session-ttl",
        TTL,
        "--margin",
        MARGIN,
        "--hop",
        HOP,
        "--window",
        window,
    ]
    .map(str::to_owned)
    .to_vec()
}

fn scratch(name: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "fencepost-live-{name}-{}-{}",
        std::process::id(),
        rand::random::<u32>()
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Writes `dir/rules.yaml` with the runs' parameters, a 30 s window and no `for:`.
fn write_rules(dir: &Path) {
    let ok = Command::new(env!("CARGO_BIN_EXE_bench"))
        .arg("rules")
        .args(check_args(WINDOW))
        .args(["--for", "0s", "--out"])
        .arg(dir.join("rules.yaml"))
        .status()
        .unwrap();
    assert!(ok.success());
}

/// Scrape config: the bench processes' /metrics, and their /sd for the services.
fn scrape_config(metrics_ports: &[u16]) -> String {
    let targets: Vec<String> = metrics_ports
        .iter()
        .map(|p| format!("\"127.0.0.1:{p}\""))
        .collect();
    let mut y = format!(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files:\n  - rules.yaml\n\
         scrape_configs:\n  - job_name: payout-worker\n    static_configs:\n      - targets: [{}]\n\
         \x20 - job_name: services\n    http_sd_configs:\n",
        targets.join(", ")
    );
    for p in metrics_ports {
        y.push_str(&format!(
            "      - url: http://127.0.0.1:{p}/sd\n        refresh_interval: 1s\n"
        ));
    }
    y
}

/// Stops a child when dropped (a failed assertion must not leave a run behind).
struct Run(Child);

impl Drop for Run {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Run {
    /// Waits for the child to end; its exit code.
    fn wait(mut self) -> i32 {
        let code = self.0.wait().unwrap().code().unwrap_or(-1);
        std::mem::forget(self);
        code
    }
}

/// `bench run` of the runs' cell, serving its metrics on `port`, results in `out`.
fn bench_run(port: u16, out: &Path, extra: &[&str]) -> Run {
    let log = std::fs::File::create(out.with_extension("log")).unwrap();
    let child = Command::new(env!("CARGO_BIN_EXE_bench"))
        .args([
            "run",
            "--ttl",
            TTL,
            "--session-ttl",
            TTL,
            "--margin",
            MARGIN,
        ])
        .args([
            "--workers",
            "8",
            "--duration",
            "30s",
            "--warmup",
            "0s",
            "--seed",
            "24",
        ])
        .arg("--metrics-listen")
        .arg(format!("127.0.0.1:{port}"))
        .arg("--out")
        .arg(out)
        .args(extra)
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap();
    Run(child)
}

/// Each trigger's verdict word in a `bench triggers` table, in row order.
fn verdicts(table: &str) -> Vec<(String, String)> {
    const WORDS: [&str; 4] = ["FIRED", "ok", "insufficient_data", "not_evaluated"];
    table
        .lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let id = w.next()?;
            let verdict = l.split_whitespace().find(|x| WORDS.contains(x))?;
            (id.contains('_') && id != "trigger").then(|| (id.to_owned(), verdict.to_owned()))
        })
        .collect()
}

fn bench_triggers(args: &[String]) -> String {
    let o = Command::new(env!("CARGO_BIN_EXE_bench"))
        .arg("triggers")
        .args(args)
        .output()
        .unwrap();
    let code = o.status.code().unwrap_or(-1);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    assert!(
        code == 0 || code == 3,
        "bench triggers {args:?} exited {code}: {out}{}",
        String::from_utf8_lossy(&o.stderr)
    );
    out
}

/// Alerts of a fired check (severity page or ticket, not info) firing now, by name.
fn paging(prom: &Prometheus) -> Vec<String> {
    let Some((_, body)) = get(prom.port, "/api/v1/alerts") else {
        return Vec::new();
    };
    let v: serde_json::Value = serde_json::from_str(&body).unwrap_or_default();
    v["data"]["alerts"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter(|a| a["state"] == "firing" && a["labels"]["severity"] != "info")
                .filter_map(|a| a["labels"]["alertname"].as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn live_runs_fire_the_alerts_they_should_and_no_other() {
    let Some(bin) = tool("prometheus") else {
        return;
    };
    let clock_fires = !fencepost_api::clock_discipline::read()
        .map(|d| d.within(Duration::from_millis(50)))
        .unwrap_or(false);
    println!(
        "this host's clock check: {}",
        if clock_fires { "fires" } else { "quiet" }
    );

    // 1. A run with the lock-server paused: trigger 1 fires, live and in the lab table.
    let dir = scratch("pause");
    write_rules(&dir);
    let port = free_port();
    let prom = Prometheus::start(&bin, &dir, &scrape_config(&[port]));
    let run = bench_run(port, &dir.join("run"), &["--server-pause", "2s:700ms"]);
    eventually(
        Duration::from_secs(90),
        "FencepostRttP99VsMargin firing",
        || {
            (alert_state(prom.port, "FencepostRttP99VsMargin").as_deref() == Some("firing"))
                .then_some(())
        },
    );
    assert_eq!(run.wait(), 0, "bench run with --server-pause");
    let mut live_args = vec![
        "--prometheus".to_owned(),
        format!("http://127.0.0.1:{}", prom.port),
    ];
    live_args.extend(check_args(WHOLE_RUN));
    let live = bench_triggers(&live_args);
    let lab = bench_triggers(&[dir.join("run").display().to_string()]);
    println!("bench triggers --prometheus:\n{live}\nbench triggers DIR:\n{lab}");
    let live_v = verdicts(&live);
    let lab_v = verdicts(&lab);
    assert_eq!(lab_v.len(), 5, "{lab}");
    for (id, v) in &lab_v {
        let l = live_v.iter().find(|(i, _)| i == id).map(|(_, v)| v);
        assert_eq!(l, Some(v), "{id}: live {l:?} vs lab {v}\n{live}\n{lab}");
    }
    assert_eq!(lab_v[0], ("rtt_p99_vs_margin".into(), "FIRED".into()));
    drop(prom);

    // 2. The same run without the pause: no trigger's alert fires.
    let dir = scratch("quiet");
    write_rules(&dir);
    let port = free_port();
    let prom = Prometheus::start(&bin, &dir, &scrape_config(&[port]));
    let mut run = bench_run(port, &dir.join("run"), &[]);
    let mut seen = Vec::new();
    let status = eventually(Duration::from_secs(120), "the quiet run ends", || {
        for a in paging(&prom) {
            if a != "FencepostClockOffsetBound" && !seen.contains(&a) {
                seen.push(a);
            }
        }
        run.0.try_wait().ok().flatten()
    });
    assert!(status.success(), "quiet bench run: {status}");
    // Three more evaluations on the whole run's data.
    std::thread::sleep(Duration::from_secs(3));
    seen.extend(
        paging(&prom)
            .into_iter()
            .filter(|a| a != "FencepostClockOffsetBound"),
    );
    assert!(seen.is_empty(), "a quiet run fired {seen:?}");
    let clock = alert_state(prom.port, "FencepostClockOffsetBound");
    assert_eq!(
        clock.as_deref() == Some("firing"),
        clock_fires,
        "the clock alert ({clock:?}) disagrees with this host's adjtimex"
    );
    drop(prom);

    // 3. The pause experiment without the client check: the fences refuse, the alert fires.
    let dir = scratch("fenced");
    write_rules(&dir);
    let port = free_port();
    let prom = Prometheus::start(&bin, &dir, &scrape_config(&[port]));
    let exp = fencepost_harness::binary("experiments", "experiments").unwrap();
    let log = std::fs::File::create(dir.join("pause.log")).unwrap();
    let run = Run(Command::new(exp)
        .args(["pause", "--disable-client-check", "--seed", "24"])
        .arg("--metrics-listen")
        .arg(format!("127.0.0.1:{port}"))
        .arg("--out")
        .arg(dir.join("pause"))
        .stdout(Stdio::null())
        .stderr(log)
        .spawn()
        .unwrap());
    eventually(
        Duration::from_secs(120),
        "FencepostFencedOut firing",
        || {
            (alert_state(prom.port, "FencepostFencedOut").as_deref() == Some("firing"))
                .then_some(())
        },
    );
    let _ = run.wait();
    drop(prom);

    // 4. Two bench processes, one lock-server: the fleet p99 is the merged p99.
    fleet_p99_agrees_with_the_merged_histograms(&bin);
}

fn fleet_p99_agrees_with_the_merged_histograms(bin: &Path) {
    let dir = scratch("fleet");
    write_rules(&dir);
    let lock = fencepost_harness::ChildService::start(
        &fencepost_harness::binary("lock-server", "lock-server").unwrap(),
        [
            "--store",
            "memory:",
            "--default-ttl",
            TTL,
            "--session-ttl",
            TTL,
        ],
        &dir.join("lock-server.log"),
    )
    .unwrap();
    let rail = fencepost_harness::ChildService::start(
        &fencepost_harness::binary("rail-stub", "rail-stub").unwrap(),
        ["--ledger", "memory"],
        &dir.join("rail-stub.log"),
    )
    .unwrap();
    let ports = [free_port(), free_port()];
    let prom = Prometheus::start(bin, &dir, &scrape_config(&ports));
    let external = [
        "--runtime".to_owned(),
        "external".to_owned(),
        "--lock-url".to_owned(),
        lock.url(),
        "--rail-url".to_owned(),
        rail.url(),
    ];
    let ext: Vec<&str> = external.iter().map(String::as_str).collect();
    let runs: Vec<Run> = ports
        .iter()
        .enumerate()
        .map(|(i, p)| bench_run(*p, &dir.join(format!("run{i}")), &ext))
        .collect();
    for r in runs {
        assert_eq!(r.wait(), 0, "fleet bench run");
    }
    // The last scrapes of both processes' final counts.
    std::thread::sleep(Duration::from_secs(3));
    let mut merged = new_histogram();
    for i in 0..2 {
        let run = dir.join(format!("run{i}"));
        let hgrm = run.join("hgrm");
        let cell = std::fs::read_dir(&hgrm)
            .unwrap()
            .filter_map(|e| e.ok()?.file_name().into_string().ok())
            .find_map(|n| n.strip_suffix(".corrected.hdr").map(str::to_owned))
            .expect("a corrected histogram");
        merged
            .add(load_series(&run, &cell, Series::Corrected).unwrap())
            .unwrap();
    }
    let hdr_p99 = merged.value_at_quantile(0.99) as f64 / 1e6;
    let q = format!(
        "histogram_quantile(0.99, sum by (le) (rate(lock_heartbeat_rtt_corrected_seconds_bucket{{job=\"payout-worker\"}}[{WHOLE_RUN}])))"
    );
    let (_, body) = get(prom.port, &format!("/api/v1/query?query={}", urlencode(&q))).unwrap();
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    let prom_p99: f64 = v["data"]["result"][0]["value"][1]
        .as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no fleet p99: {body}"));
    let bounds = heartbeat_bounds(Duration::from_secs(2), Duration::from_secs(2), &[0.3]);
    let bucket = |x: f64| bounds.iter().position(|&b| x <= b).unwrap_or(bounds.len());
    println!(
        "fleet p99: Prometheus {:.3} ms (bucket {}), merged HDR {:.3} ms (bucket {}), {} samples",
        prom_p99 * 1e3,
        bucket(prom_p99),
        hdr_p99 * 1e3,
        bucket(hdr_p99),
        merged.len()
    );
    assert!(
        bucket(prom_p99).abs_diff(bucket(hdr_p99)) <= 1,
        "fleet p99 {prom_p99} s vs merged HDR p99 {hdr_p99} s: more than one bucket apart"
    );
    // `bench adr --rtt-from prometheus:URL` pools the same buckets: every
    // sample, and the p99 in the same bucket.
    let rtt = bench::rtt_from::fetch(
        &format!("prometheus:http://127.0.0.1:{}", prom.port),
        WHOLE_RUN,
        "job=\"payout-worker\"",
    )
    .unwrap();
    let pooled = rtt.histogram();
    let pooled_p99 = pooled.value_at_quantile(0.99) as f64 / 1e6;
    println!(
        "--rtt-from prometheus: {} samples (merged HDR {}), p99 ≤ {:.3} ms (bucket {})",
        rtt.samples(),
        merged.len(),
        pooled_p99 * 1e3,
        bucket(pooled_p99)
    );
    let (a, b) = (rtt.samples() as f64, merged.len() as f64);
    assert!(
        (a - b).abs() <= 0.05 * b,
        "{a} pooled vs {b} merged samples"
    );
    assert!(bucket(pooled_p99).abs_diff(bucket(hdr_p99)) <= 1);
    drop(prom);
    drop(lock);
    drop(rail);
}

/// Percent-encodes a PromQL query for a URL's query string.
fn urlencode(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}
