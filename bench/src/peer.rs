//! `bench peer`: fencepost's lock-server (SQLite and PostgreSQL
//! stores) and etcd measured in one run with one driver ([`load`]), each
//! through its native client, at the same concurrency levels, for the
//! heartbeat (L2 vs LeaseKeepAlive) and the durable grant (L4 + L6 vs the
//! acquire txn + the guarded delete).
//!
//! The servers are started once and kept for the whole run: the lock-server
//! as a child on SQLite (`synchronous=FULL`, WAL mode, in the run directory)
//! and, when a PostgreSQL is given, a second one on a fresh schema; etcd as
//! a child from `etcd` on PATH (data dir in the run directory; its WAL is
//! fsynced before every acknowledgement, batched across concurrent writes)
//! or at `--etcd-url`; Redis as one redis-server child per `--redis`
//! persistence mode (default: none, and the append-only file fsynced before
//! every reply, the durability the others give a grant) or at `--redis-url`,
//! driven with the redis backend's own scripts ([`load`]). Every measurement is one (repeat, op, concurrency,
//! system); within a repeat the systems of one (op, concurrency) run back to
//! back in a seeded order, so every ratio is taken between neighbours in
//! time (interleaved A/B, docs/measurement.md) and once per repeat. Each row
//! records the CPU seconds of the server process (lock-server or etcd), of
//! the PostgreSQL backends serving the lock-server, and of this driver over
//! the measured window: on a shared 2-core box a saturated driver measures
//! itself.
//!
//! `--http-client sdk,hyper-legacy` drives every lock-server with both the
//! SDK's client and hyper's pooled one (one system each, sharing the server),
//! so the report can weigh the SDK's hand-written pool against the general
//! client it replaced.
//!
//! Output (`--out`, default `data/runs/<timestamp>-peer/`): `peer.csv` (one
//! row per measurement, written after each), `manifest.json`, `report.md`
//! with the ratios ([`report`]), `peer_throughput.svg|png`, and the servers'
//! logs under `servers/`.

use std::path::PathBuf;
use std::time::Duration;

use bench_core::error::Chain;
use rand::SeedableRng as _;
use rand::seq::SliceRandom as _;
use rand_chacha::ChaCha8Rng;

use crate::cli::PeerArgs;
use bench_analysis::manifest::Manifest;
use bench_analysis::peer::{PeerPlan, PeerRow, fmt_opt, is_native, write_csv};
use bench_core::cpu;
use bench_core::grid::{self, FlagError};
use bench_core::peer::PeerOp;
use bench_driver::backend::redis::server::{RedisPersistence, redis_binary};
use bench_driver::peer::{self as load, WindowProbe};
use bench_driver::peer_http::PeerHttpClient;
use bench_report::peer as report;

pub use crate::peer_error::PeerRunError;
pub(crate) use crate::peer_error::written;
use crate::peer_systems::redis_store;
pub(crate) use crate::peer_systems::{System, start_systems};

fn bad(flag: &'static str, value: &str, why: impl Into<String>) -> FlagError {
    FlagError {
        flag,
        value: value.to_string(),
        why: why.into(),
    }
}

/// Checks every flag of `bench peer`.
pub fn resolve(args: &PeerArgs) -> Result<PeerPlan, FlagError> {
    let duration = grid::parse_positive_duration("--duration", &args.duration)?;
    let w = &args.warmup;
    let warmup = grid::parse_flag_duration("--warmup", w, w, "expected 0s or more, e.g. 1s")?;
    let mut concurrency = Vec::new();
    for part in args.concurrency.split(',') {
        let c: usize = part
            .trim()
            .parse()
            .ok()
            .filter(|c| (1..=1024).contains(c))
            .ok_or_else(|| bad("--concurrency", &args.concurrency, "a list of 1..1024"))?;
        concurrency.push(c);
    }
    if !(1..=100).contains(&args.repeat) {
        return Err(bad("--repeat", &args.repeat.to_string(), "must be 1..100"));
    }
    let mut ops = Vec::new();
    for part in args.ops.split(',') {
        ops.push(
            part.parse::<PeerOp>()
                .map_err(|why| bad("--ops", &args.ops, why))?,
        );
    }
    let mut http_clients = Vec::new();
    for part in args.http_client.split(',') {
        let c = part
            .parse::<PeerHttpClient>()
            .map_err(|why| bad("--http-client", &args.http_client, why))?;
        if !http_clients.contains(&c) {
            http_clients.push(c);
        }
    }
    let pg_url = args
        .pg_url
        .clone()
        .or_else(|| std::env::var("FENCEPOST_TEST_PG_URL").ok())
        .filter(|u| !u.is_empty());
    let (mut stores, mut skipped) = (Vec::new(), Vec::new());
    let named = args.stores.as_deref();
    for part in named.unwrap_or("sqlite,postgres").split(',') {
        match part.trim() {
            "sqlite" => stores.push("sqlite".to_string()),
            "postgres" if pg_url.is_some() => stores.push("postgres".to_string()),
            "postgres" if named.is_none() => skipped.push(
                "fencepost/postgres: no PostgreSQL given (--pg-url or FENCEPOST_TEST_PG_URL)"
                    .to_string(),
            ),
            "postgres" => {
                return Err(bad(
                    "--stores",
                    &args.stores.clone().unwrap_or_default(),
                    "postgres needs --pg-url or FENCEPOST_TEST_PG_URL",
                ));
            }
            other => {
                return Err(bad(
                    "--stores",
                    other,
                    "expected a list of sqlite, postgres",
                ));
            }
        }
    }
    if let Some(u) = &args.etcd_url
        && !u.starts_with("http://")
    {
        return Err(bad("--etcd-url", u, "expected http://HOST:PORT"));
    }
    let redis_stores = redis_stores(args, &mut skipped)?;
    let out = args.out.clone().unwrap_or_else(|| {
        PathBuf::from("data/runs").join(format!(
            "{}-peer",
            bench_analysis::manifest::now_rfc3339().replace(':', "")
        ))
    });
    Ok(PeerPlan {
        argv: crate::runner::recorded_argv(),
        duration_s: duration.as_secs_f64(),
        warmup_s: warmup.as_secs_f64(),
        concurrency,
        repeats: args.repeat,
        ops,
        stores,
        skipped,
        pg_url,
        etcd_url: args.etcd_url.clone(),
        redis_stores,
        redis_url: args.redis_url.clone(),
        pg_dir: args.pg_dir.clone(),
        http_clients,
        seed: args.seed.unwrap_or_else(rand::random),
        out,
        // `bench peer --sessions`: crate::peer_sessions::resolve adds it.
        sessions: None,
    })
}

/// The redis-server children `--redis` asks for, by store name; by
/// default `memory` and `aof-always` when redis-server is found, else none
/// (and said so in `skipped`). None with `--redis-url` (that Redis is measured instead).
fn redis_stores(args: &PeerArgs, skipped: &mut Vec<String>) -> Result<Vec<String>, FlagError> {
    if let Some(u) = &args.redis_url {
        if !u.starts_with("redis://") {
            return Err(bad("--redis-url", u, "expected redis://HOST:PORT"));
        }
        return Ok(Vec::new());
    }
    let Some(list) = &args.redis else {
        return Ok(match redis_binary() {
            Ok(_) => [RedisPersistence::None, RedisPersistence::Always]
                .map(redis_store)
                .into(),
            Err(e) => {
                skipped.push(format!("redis: {}", Chain(&e)));
                Vec::new()
            }
        });
    };
    if list.trim() == "off" {
        return Ok(Vec::new());
    }
    let mut stores = Vec::new();
    for part in list.split(',') {
        let mode = RedisPersistence::ALL
            .into_iter()
            .find(|m| m.as_str() == part.trim())
            .ok_or_else(|| {
                bad(
                    "--redis",
                    list,
                    "expected a list of none, everysec, always, or off",
                )
            })?;
        if !stores.contains(&redis_store(mode)) {
            stores.push(redis_store(mode));
        }
    }
    Ok(stores)
}

/// CPU counters read at the window's ends: the server, its PostgreSQL
/// backends, this driver.
pub(crate) struct CpuProbe<'a> {
    /// The system measured.
    pub(crate) system: &'a System,
    /// The PostgreSQL backend pids at the window's start.
    pub(crate) pg_pids: Vec<i32>,
    /// (server, PostgreSQL backends, bench) CPU seconds at the start.
    pub(crate) start: (Option<f64>, Option<f64>, Option<f64>),
    /// The same differences over the window.
    pub(crate) used: (Option<f64>, Option<f64>, Option<f64>),
    /// The store's (flushes, writes) counters at the start.
    pub(crate) store_start: (Option<u64>, Option<u64>),
    /// Their differences over the window.
    pub(crate) store_used: (Option<u64>, Option<u64>),
}

/// How long each fsync ceiling measurement loops.
const FSYNC_WINDOW: Duration = Duration::from_secs(1);

/// One counter's value in a Prometheus text exposition (no labels).
fn counter(text: &str, name: &str) -> Option<u64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|l| {
            let (n, v) = l.split_once(' ')?;
            (n == name).then(|| v.trim().parse::<f64>().ok())?
        })
        .map(|v| v as u64)
}

/// The server's own store counters: (flushes, writes). fencepost:
/// `lock_store_transactions_total` (one fsync each) and
/// `lock_store_writes_total`; etcd: its WAL fsyncs.
async fn store_counters(url: Option<&str>) -> (Option<u64>, Option<u64>) {
    let Some(url) = url else {
        return (None, None);
    };
    static CLIENT: std::sync::OnceLock<reqwest::Client> = std::sync::OnceLock::new();
    let text = match CLIENT
        .get_or_init(reqwest::Client::new)
        .get(url)
        .timeout(Duration::from_secs(2))
        .send()
        .await
    {
        Ok(r) => r.text().await.unwrap_or_default(),
        Err(_) => return (None, None),
    };
    match counter(&text, "lock_store_transactions_total") {
        Some(tx) => (Some(tx), counter(&text, "lock_store_writes_total")),
        None => (
            counter(&text, "etcd_disk_wal_fsync_duration_seconds_count"),
            None,
        ),
    }
}

impl CpuProbe<'_> {
    fn read(&self) -> (Option<f64>, Option<f64>, Option<f64>) {
        let server = cpu::cpu_seconds(self.system.pid);
        let pg = self.system.pg.as_ref().map(|_| {
            self.pg_pids
                .iter()
                .filter_map(|&p| cpu::cpu_seconds(Some(p)))
                .sum::<f64>()
        });
        (server, pg, cpu::cpu_seconds(None))
    }
}

impl WindowProbe for CpuProbe<'_> {
    async fn opened(&mut self) {
        if let Some(pg) = &self.system.pg {
            self.pg_pids = pg.pids().await;
        }
        self.store_start = store_counters(self.system.metrics.as_deref()).await;
        self.start = self.read();
    }

    async fn closed(&mut self) {
        let end = self.read();
        let store_end = store_counters(self.system.metrics.as_deref()).await;
        let du = |a: Option<u64>, b: Option<u64>| b?.checked_sub(a?);
        self.store_used = (
            du(self.store_start.0, store_end.0),
            du(self.store_start.1, store_end.1),
        );
        let d = |a: Option<f64>, b: Option<f64>| Some(b? - a?).filter(|v| *v >= 0.0);
        self.used = (
            d(self.start.0, end.0),
            d(self.start.1, end.1),
            d(self.start.2, end.2),
        );
    }
}

/// Runs the plan: every (repeat, op, concurrency) group, its systems in a
/// seeded order; writes `peer.csv` after each measurement and the report at
/// the end. Returns the exit code.
pub async fn execute(plan: PeerPlan) -> Result<i32, PeerRunError> {
    written(&plan.out, std::fs::create_dir_all(&plan.out))?;
    if plan.out.join("peer.csv").exists() {
        eprintln!(
            "bench peer: {} already holds a peer run; pass a new --out",
            plan.out.display()
        );
        return Ok(2);
    }
    let config = serde_json::to_value(&plan).map_err(PeerRunError::Plan)?;
    let mut manifest = Manifest::new("bench peer", plan.seed, config);
    manifest.write(&plan.out)?;
    eprintln!(
        "bench peer: seed {} (rerun with --seed {}), results in {}",
        plan.seed,
        plan.seed,
        plan.out.display()
    );
    for s in &plan.skipped {
        eprintln!("bench peer: skipped {s}");
    }
    let systems = start_systems(&plan).await?;
    let (duration, warmup) = (
        Duration::from_secs_f64(plan.duration_s),
        Duration::from_secs_f64(plan.warmup_s),
    );
    let mut rng = ChaCha8Rng::seed_from_u64(plan.seed);
    let mut rows: Vec<PeerRow> = Vec::new();
    let total = plan.repeats as usize * plan.ops.len() * plan.concurrency.len() * systems.len();
    for repeat in 1..=plan.repeats {
        for &op in &plan.ops {
            for &conc in &plan.concurrency {
                let mut order: Vec<&System> = systems.iter().collect();
                order.shuffle(&mut rng);
                for (position, sys) in order.into_iter().enumerate() {
                    let mut probe = CpuProbe {
                        system: sys,
                        pg_pids: Vec::new(),
                        start: (None, None, None),
                        used: (None, None, None),
                        store_start: (None, None),
                        store_used: (None, None),
                    };
                    let sample = if op == PeerOp::Fsync {
                        // Once per repeat and store directory: at the first
                        // concurrency, on the system driven by its own client.
                        let Some((dir, block)) = sys.data_dir.clone() else {
                            continue;
                        };
                        if conc != plan.concurrency[0] || !is_native(sys.system, sys.client) {
                            continue;
                        }
                        tokio::task::spawn_blocking(move || {
                            bench_core::fsync::ceiling(&dir, block, FSYNC_WINDOW)
                        })
                        .await?
                        .map_err(PeerRunError::Fsync)?
                    } else {
                        load::measure(&sys.target, op, conc, warmup, duration, &mut probe)
                            .await
                            .map_err(|source| PeerRunError::Measure {
                                label: sys.label(),
                                op: op.as_str(),
                                conc,
                                source,
                            })?
                    };
                    if sample.errors > 0 {
                        eprintln!(
                            "  {} {}: {} errors; first: {}",
                            sys.label(),
                            op.as_str(),
                            sample.errors,
                            sample.first_error.as_deref().unwrap_or("?")
                        );
                    }
                    let row = PeerRow::new(
                        sys.system,
                        &sys.store,
                        sys.client,
                        op,
                        conc,
                        repeat,
                        position as u32,
                        &sample,
                        probe.used,
                        probe.store_used,
                    );
                    eprintln!(
                        "[{}/{total}] repeat {repeat} {:<9} c={conc:<3} {:<29} {:>9.0} ops/s  p50 {:>7.2} ms  p99 {:>7.2} ms  cpu server {} bench {}",
                        rows.len() + 1,
                        op.as_str(),
                        sys.label(),
                        row.ops_per_s,
                        row.p50_us as f64 / 1e3,
                        row.p99_us as f64 / 1e3,
                        fmt_opt(row.cpu_server_s, 2),
                        fmt_opt(row.cpu_bench_s, 2),
                    );
                    rows.push(row);
                    written(&plan.out.join("peer.csv"), write_csv(&plan.out, &rows))?;
                }
            }
        }
    }
    drop(systems);
    // The servers' data (etcd's, SQLite's files) is scratch; their logs stay.
    bench_core::peer::remove_server_data(&plan.out.join("servers"));
    let text = report::render(&plan, &rows);
    let path = plan.out.join("report.md");
    written(&path, std::fs::write(&path, &text))?;
    if let Err(e) = report::plot(&plan.out, &rows) {
        eprintln!("bench peer: plotting failed: {}", Chain(&e));
    }
    manifest.finish();
    manifest.write(&plan.out)?;
    print!("{}", report::summary(&plan, &rows));
    println!("\nreport: {}", plan.out.join("report.md").display());
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser as _;

    fn plan(extra: &[&str]) -> Result<PeerPlan, FlagError> {
        let mut argv = vec!["bench", "peer"];
        argv.extend_from_slice(extra);
        match crate::cli::Cli::parse_from(argv).command {
            crate::cli::Command::Peer(a) => resolve(&a),
            _ => unreachable!("a peer command"),
        }
    }

    #[test]
    fn redis_modes_become_stores_and_a_bad_one_is_named() {
        let p = plan(&["--redis", "always,none,always"]).unwrap();
        assert_eq!(p.redis_stores, ["aof-always", "memory"]);
        assert!(plan(&["--redis", "off"]).unwrap().redis_stores.is_empty());
        let p = plan(&["--redis-url", "redis://127.0.0.1:6379"]).unwrap();
        assert!(p.redis_stores.is_empty() && p.redis_url.is_some());
        let e = plan(&["--redis", "none,fsync"]).unwrap_err();
        assert_eq!((e.flag, e.value.as_str()), ("--redis", "none,fsync"));
        let e = plan(&["--redis-url", "127.0.0.1:6379"]).unwrap_err();
        assert_eq!(e.flag, "--redis-url");
    }
}
