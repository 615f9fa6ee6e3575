//! `bench triggers --prometheus` and the generated alerts against a real
//! Prometheus child: a fake exporter serves the SDK's corrected
//! heartbeat RTT histogram (classic text, `le` as the exposition spells it),
//! Prometheus scrapes it every second and evaluates the rules `bench rules`
//! generated; while every sample is within trigger 1's budget the check is
//! ok, once 10 % are above it `bench triggers --prometheus` says FIRED
//! (exit 3) and the `FencepostRttP99VsMargin` alert reaches `firing`.
//! Without `prometheus` the test is skipped with a message, except under
//! `CI=true`, where its absence fails it.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use bench_analysis::triggers::{Params, RTT_CORRECTED};
use fencepost_api::buckets::le_label;

use super::promtool::tool;

/// A Prometheus child on a free loopback port, with its config and TSDB in a
/// directory of the test's; stopped when dropped. Shared with `live.rs`.
pub(super) struct Prometheus {
    child: Child,
    /// Its HTTP port.
    pub(super) port: u16,
}

impl Prometheus {
    /// Writes `config` to `dir/prometheus.yml` (rule files resolve from
    /// `dir`), starts `bin` on it and waits until it is ready.
    pub(super) fn start(bin: &std::path::Path, dir: &std::path::Path, config: &str) -> Self {
        std::fs::create_dir_all(dir.join("tsdb")).unwrap();
        std::fs::write(dir.join("prometheus.yml"), config).unwrap();
        let port = free_port();
        let log = std::fs::File::create(dir.join("prometheus.log")).unwrap();
        let child = Command::new(bin)
            .arg(format!(
                "--config.file={}",
                dir.join("prometheus.yml").display()
            ))
            .arg(format!(
                "--storage.tsdb.path={}",
                dir.join("tsdb").display()
            ))
            .arg(format!("--web.listen-address=127.0.0.1:{port}"))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .expect("prometheus starts");
        let p = Prometheus { child, port };
        eventually(Duration::from_secs(60), "Prometheus ready", || {
            get(port, "/-/ready").filter(|(s, _)| *s == 200)
        });
        p
    }
}

impl Drop for Prometheus {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The state (`pending`, `firing`) of alert `name` in `/api/v1/alerts`, if listed.
pub(super) fn alert_state(port: u16, name: &str) -> Option<String> {
    let (_, body) = get(port, "/api/v1/alerts")?;
    let v: serde_json::Value = serde_json::from_str(&body).ok()?;
    let states: Vec<&str> = v["data"]["alerts"]
        .as_array()?
        .iter()
        .filter(|a| a["labels"]["alertname"] == name)
        .filter_map(|a| a["state"].as_str())
        .collect();
    if states.contains(&"firing") {
        Some("firing".to_owned())
    } else {
        states.first().map(|s| (*s).to_owned())
    }
}

/// The exposition at `ms` since start: 200 samples a second; with `over`, 10 %
/// of them above the budget (between it and the next bucket).
fn exposition(ms: u64, over_from: Option<u64>, budget: f64) -> String {
    let n = ms / 5;
    let above = over_from.map_or(0, |from| ms.saturating_sub(from) / 50);
    let within = n - above;
    let mut out = format!("# TYPE {RTT_CORRECTED} histogram\n");
    for (le, c) in [
        (0.01, within / 2),
        (0.1, within),
        (budget, within),
        (budget * 2.0, n),
        (63.0, n),
    ] {
        out.push_str(&format!(
            "{RTT_CORRECTED}_bucket{{le=\"{}\"}} {c}\n",
            le_label(le)
        ));
    }
    out.push_str(&format!(
        "{RTT_CORRECTED}_bucket{{le=\"+Inf\"}} {n}\n{RTT_CORRECTED}_sum {}\n{RTT_CORRECTED}_count {n}\n",
        n as f64 * 0.05
    ));
    out
}

/// Serves the exposition on a free port from a thread; returns the port.
fn exporter(over: Arc<AtomicBool>, budget: f64) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let start = Instant::now();
    std::thread::spawn(move || {
        let mut over_from = None;
        for conn in listener.incoming() {
            let Ok(mut conn) = conn else { continue };
            let mut buf = [0u8; 4096];
            let _ = conn.read(&mut buf);
            let ms = start.elapsed().as_millis() as u64;
            if over.load(Ordering::SeqCst) && over_from.is_none() {
                over_from = Some(ms);
            }
            let body = exposition(ms, over_from, budget);
            let _ = write!(
                conn,
                "HTTP/1.1 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: \
                 {}\r\nConnection: close\r\n\r\n{body}",
                body.len()
            );
        }
    });
    port
}

pub(super) fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// A plain HTTP/1.0 GET (so no chunked body): (status, body), or None when nothing answers.
pub(super) fn get(port: u16, path: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(s, "GET {path} HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n").ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let status = text.split_whitespace().nth(1)?.parse().ok()?;
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b.to_owned())?;
    Some((status, body))
}

/// Polls `cond` every 500 ms until it gives a value or `limit` passes.
pub(super) fn eventually<T>(limit: Duration, what: &str, mut cond: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + limit;
    loop {
        if let Some(v) = cond() {
            return v;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {limit:?}: {what}"
        );
        std::thread::sleep(Duration::from_millis(500));
    }
}

/// `bench triggers --prometheus URL --window 10s`: (exit code, stdout).
fn bench_triggers(port: u16, out: &std::path::Path) -> (i32, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_bench"))
        .args(["triggers", "--prometheus"])
        .arg(format!("http://127.0.0.1:{port}"))
        .args(["--window", "10s", "--out"])
        .arg(out)
        .output()
        .unwrap();
    (
        o.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&o.stdout).into_owned(),
    )
}

/// The verdict word of trigger 1's row.
fn trigger1_word(table: &str) -> Option<String> {
    let row = table.lines().find(|l| l.starts_with("rtt_p99_vs_margin"))?;
    row.split_whitespace()
        .find(|w| ["FIRED", "ok", "insufficient_data", "not_evaluated"].contains(w))
        .map(str::to_owned)
}

#[test]
fn trigger1_fires_live_and_its_alert_reaches_firing() {
    let Some(prom) = tool("prometheus") else {
        return;
    };
    let params = Params {
        window: Duration::from_secs(10),
        ..Params::default()
    };
    let budget = params.budget_secs();
    let over = Arc::new(AtomicBool::new(false));
    let exporter_port = exporter(over.clone(), budget);
    let dir = std::env::temp_dir().join(format!(
        "fencepost-prometheus-{}-{}",
        std::process::id(),
        rand::random::<u32>()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    // The rules exactly as `bench rules` writes them, with a 10 s window and no `for:`.
    let rules = Command::new(env!("CARGO_BIN_EXE_bench"))
        .args(["rules", "--window", "10s", "--for", "0s", "--out"])
        .arg(dir.join("rules.yaml"))
        .status()
        .unwrap();
    assert!(rules.success());
    let config = format!(
        "global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\nrule_files:\n  - \
         rules.yaml\nscrape_configs:\n  - job_name: payout-worker\n    static_configs:\n      \
         - targets: [\"127.0.0.1:{exporter_port}\"]\n"
    );
    let prom = Prometheus::start(&prom, &dir, &config);
    let port = prom.port;

    // Within budget, on ~2,000 samples a window: trigger 1 is ok.
    eventually(Duration::from_secs(60), "trigger 1 ok", || {
        let (_, table) = bench_triggers(port, &dir);
        (trigger1_word(&table)? == "ok").then_some(())
    });

    // 10 % above the budget: fired, exit 3, in triggers.json too.
    over.store(true, Ordering::SeqCst);
    let (code, table) = eventually(Duration::from_secs(60), "trigger 1 FIRED", || {
        let (code, table) = bench_triggers(port, &dir);
        (trigger1_word(&table)? == "FIRED").then_some((code, table))
    });
    assert_eq!(code, 3, "{table}");
    let rows = table
        .lines()
        .filter(|l| l.split_whitespace().nth(1) == Some("prometheus:10s"))
        .count();
    assert_eq!(rows, 6, "{table}");
    println!("{table}");
    let json = std::fs::read_to_string(dir.join("triggers.json")).unwrap();
    assert!(json.contains("\"verdict\": \"fired\""), "{json}");

    // And the generated alert on the same expression reaches `firing`.
    eventually(
        Duration::from_secs(60),
        "FencepostRttP99VsMargin firing",
        || {
            let (_, body) = get(port, "/api/v1/alerts")?;
            let v: serde_json::Value = serde_json::from_str(&body).ok()?;
            v["data"]["alerts"].as_array()?.iter().find(|a| {
                a["labels"]["alertname"] == "FencepostRttP99VsMargin" && a["state"] == "firing"
            })?;
            Some(())
        },
    );
    let _ = std::fs::remove_dir_all(&dir);
}
