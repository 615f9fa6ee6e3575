//! How the lock-server's latency and throughput depend on how much it has
//! ever seen: L2 (heartbeat) p50/p99 and L4+L6 (acquire then release)
//! throughput with 10², 10⁴ and 10⁶ keys ever used and 10², 10⁴ and 10⁵ live
//! sessions, on SQLite and on the memory store. The figures should be flat
//! across the key counts (nothing walks every key: FREE keys are not in
//! memory, expiry reads only the due prefix of a deadline queue); this
//! benchmark is how that is checked. It measures; it asserts nothing.
//!
//! Each cell starts from a store prepared directly (SQL rows for SQLite,
//! `LockStore` calls for memory): `keys` keys with a last token, FREE except
//! `held = min(keys/2, sessions/2)` of them held by the first sessions with a
//! 10-minute lease, and `sessions` sessions with a 10-minute TTL. The server
//! then starts on it as a restarted server would (restoring the sessions and
//! the held grants; the FREE keys stay in the store) and serves on loopback
//! with its sweeper running. `C` closed-loop client tasks then
//! - heartbeat random live sessions for `D` seconds (L2 latency, send to reply);
//! - acquire a random FREE key and release it for `D` seconds (L4+L6 pairs/s:
//!   each acquire of a key not in memory takes its next token from the store).
//!
//! An uncounted warm-up of `D/4` precedes each. Before them, the periodic
//! work is timed in-process: one sweep and one `/metrics` rendering (the
//! gauges), 25 calls each, median and max — CPU work that depends on what the
//! table walks, so it reads the same on a busy machine. Knobs: `FP_BENCH_SECONDS`
//! (default 2), `FP_BENCH_CONCURRENCY` (8), `FP_BENCH_SEED` (1), and to run a
//! part of the grid, repeated round-robin: `FP_BENCH_STORES=sqlite,memory`,
//! `FP_BENCH_KEYS=100,1000000`, `FP_BENCH_SESSIONS=10000`, `FP_BENCH_REPEAT=3`. The seed picks
//! the sessions and keys; it is printed and recorded. `cargo bench -p
//! lock-server --bench scale` runs the grid and writes
//! `$CARGO_TARGET_DIR/fencepost-bench/lock-server-scale.json`; without
//! `--bench` (as `cargo test --benches`) it is a 100-key, 100-session smoke run.

mod common;

use std::sync::Arc;
use std::time::{Duration, Instant};

use common::{
    Pair, Server, acquire_release, env_f64, full_run, heartbeat, http_client, output_path,
    quantile, temp_dir, write_json,
};
use fencepost_api::clock::MonotonicClock;
use lock_server::store::{self, LockStore, SessionRecord};
use lock_server::{Limits, LockService};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use serde_json::{Value, json};

/// TTL of the prepared sessions and leases: longer than any run.
const LONG_MS: u64 = 600_000;

/// One cell of the grid.
#[derive(Clone, Copy, Debug)]
struct Cell {
    store: &'static str,
    keys: usize,
    sessions: usize,
}

impl Cell {
    /// Keys held at the start (key i by session i, i < held): half the keys,
    /// by at most half the sessions, so the acquiring clients have sessions of
    /// their own that hold nothing.
    fn held(&self) -> usize {
        (self.keys / 2).min(self.sessions / 2)
    }
}

/// How a run is shaped.
#[derive(Clone, Debug)]
struct Params {
    duration: Duration,
    concurrency: usize,
    seed: u64,
    full: bool,
}

/// One measured row.
#[derive(Clone, Debug)]
struct Row {
    cell: Cell,
    setup_s: f64,
    l2_ops: u64,
    l2_per_s: f64,
    l2_p50_us: u64,
    l2_p99_us: u64,
    /// L2 p99.9 and max: a closed-loop client only sees a server stall once
    /// per task (coordinated omission), so a stall shows here, not in p99.
    l2_p999_us: u64,
    l2_max_us: u64,
    pairs: u64,
    pairs_per_s: f64,
    pair_p50_us: u64,
    pair_p99_us: u64,
    /// L4s that found their random key taken by another task (retried on another key).
    held_collisions: u64,
    errors: u64,
    /// Keys the server held in memory at the end (held grants; FREE keys are not kept).
    keys_in_memory: usize,
    /// One sweep (the sweeper's periodic task), median and max of [`PERIODIC_CALLS`], µs.
    sweep_us: (u64, u64),
    /// One `/metrics` rendering (the gauges), median and max, µs.
    gauges_us: (u64, u64),
}

/// How many times the periodic work is timed per cell.
const PERIODIC_CALLS: usize = 25;

/// Median and max of `PERIODIC_CALLS` runs of `f`, µs.
async fn time_calls<F, Fut>(mut f: F) -> (u64, u64)
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let mut us = Vec::with_capacity(PERIODIC_CALLS);
    for _ in 0..PERIODIC_CALLS {
        let t = Instant::now();
        f().await;
        us.push(t.elapsed().as_micros() as u64);
    }
    us.sort_unstable();
    (quantile(&us, 0.5), us[us.len() - 1])
}

impl Row {
    fn to_json(&self) -> Value {
        json!({
            "store": self.cell.store,
            "keys_ever": self.cell.keys,
            "live_sessions": self.cell.sessions,
            "held_at_start": self.cell.held(),
            "setup_s": self.setup_s,
            "l2_ops": self.l2_ops,
            "l2_per_s": self.l2_per_s,
            "l2_p50_us": self.l2_p50_us,
            "l2_p99_us": self.l2_p99_us,
            "l2_p999_us": self.l2_p999_us,
            "l2_max_us": self.l2_max_us,
            "l4_l6_pairs": self.pairs,
            "l4_l6_pairs_per_s": self.pairs_per_s,
            "l4_l6_p50_us": self.pair_p50_us,
            "l4_l6_p99_us": self.pair_p99_us,
            "held_collisions": self.held_collisions,
            "errors": self.errors,
            "keys_in_memory_at_end": self.keys_in_memory,
            "sweep_us_median": self.sweep_us.0,
            "sweep_us_max": self.sweep_us.1,
            "gauges_us_median": self.gauges_us.0,
            "gauges_us_max": self.gauges_us.1,
        })
    }
}

fn key(i: usize) -> String {
    format!("payout:{i:07}")
}

fn session_id(i: usize) -> String {
    format!("{i:032x}")
}

/// Builds the cell's store and starts a service on it.
async fn prepare(cell: Cell, dir: &std::path::Path) -> Result<Arc<LockService>, String> {
    let held = cell.held();
    let store: Arc<dyn LockStore> = match cell.store {
        "sqlite" => {
            let path = dir.join("lock.sqlite");
            let url = format!("sqlite:{}", path.display());
            drop(store::open(&url).await.map_err(|e| e.to_string())?); // the schema
            let path2 = path.clone();
            tokio::task::spawn_blocking(move || fill_sqlite(&path2, cell))
                .await
                .map_err(|e| e.to_string())??;
            store::open(&url).await.map_err(|e| e.to_string())?
        }
        _ => {
            let s = store::open("memory:").await.map_err(|e| e.to_string())?;
            for i in 0..cell.sessions {
                s.create_session(&SessionRecord {
                    id: session_id(i),
                    owner_id: "bench".into(),
                    ttl_ms: LONG_MS,
                    principal: None,
                })
                .await
                .map_err(|e| e.to_string())?;
            }
            for i in 0..cell.keys {
                let t = s
                    .grant(&key(i), &session_id(i % cell.sessions), LONG_MS)
                    .await
                    .map_err(|e| e.to_string())?;
                if i >= held {
                    s.clear_grant(&key(i), t).await.map_err(|e| e.to_string())?;
                }
            }
            s
        }
    };
    let limits = Limits {
        session_ttl: Duration::from_millis(LONG_MS),
        ..Limits::default()
    };
    LockService::start(limits, store, Arc::new(MonotonicClock::new()))
        .await
        .map_err(|e| e.to_string())
}

/// The SQLite rows of a cell, in one transaction.
fn fill_sqlite(path: &std::path::Path, cell: Cell) -> Result<(), String> {
    let e = |e: rusqlite::Error| e.to_string();
    let mut c = rusqlite::Connection::open(path).map_err(e)?;
    c.pragma_update(None, "synchronous", "OFF").map_err(e)?;
    let tx = c.transaction().map_err(e)?;
    {
        let mut s = tx
            .prepare("INSERT INTO fp_sessions (id, owner_id, ttl_ms) VALUES (?1, 'bench', ?2)")
            .map_err(e)?;
        for i in 0..cell.sessions {
            s.execute(rusqlite::params![session_id(i), LONG_MS as i64])
                .map_err(e)?;
        }
        let mut k = tx
            .prepare(
                "INSERT INTO fp_locks (key, last_token, holder_session, holder_token, lease_ms)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
            )
            .map_err(e)?;
        for i in 0..cell.keys {
            let last = 1 + (i % 7) as i64;
            let holder = (i < cell.held()).then(|| (session_id(i), last, LONG_MS as i64));
            k.execute(rusqlite::params![
                key(i),
                last,
                holder.as_ref().map(|h| h.0.clone()),
                holder.as_ref().map(|h| h.1),
                holder.as_ref().map(|h| h.2),
            ])
            .map_err(e)?;
        }
    }
    tx.commit().map_err(e)
}

/// What one client task saw.
#[derive(Default)]
struct Tally {
    latencies_us: Vec<u64>,
    collisions: u64,
    errors: u64,
    first_error: Option<String>,
}

/// `C` tasks loop L2 (`pairs == false`) or L4+L6 for `p.duration` after a warm-up.
async fn measure(
    client: &reqwest::Client,
    base: &str,
    cell: Cell,
    p: &Params,
    pairs: bool,
) -> Result<(Tally, Duration), String> {
    let warmup = p.duration / 4;
    let start = Instant::now() + warmup;
    let deadline = start + p.duration;
    let mut tasks = Vec::new();
    for t in 0..p.concurrency {
        let (client, base) = (client.clone(), base.to_string());
        let mut rng = StdRng::seed_from_u64(p.seed ^ ((t as u64 + 1) << 32) ^ u64::from(pairs));
        // Task t acquires with a session holding nothing, so it is never its own rival.
        let own = session_id(cell.held() + t % (cell.sessions - cell.held()));
        tasks.push(tokio::spawn(async move {
            let mut tally = Tally::default();
            while Instant::now() < deadline {
                let sent = Instant::now();
                let done = if pairs {
                    let k = key(rng.random_range(cell.held()..cell.keys));
                    acquire_release(&client, &base, &own, &k).await
                } else {
                    let s = session_id(rng.random_range(0..cell.sessions));
                    heartbeat(&client, &base, &s).await.map(|()| Pair::Done(0))
                };
                let timed = sent >= start;
                match done {
                    Ok(Pair::Done(_)) if timed => {
                        tally.latencies_us.push(sent.elapsed().as_micros() as u64)
                    }
                    Ok(Pair::Done(_)) => {}
                    Ok(Pair::Held) => tally.collisions += u64::from(timed),
                    Err(e) => {
                        tally.errors += 1;
                        tally.first_error.get_or_insert(e);
                    }
                }
            }
            tally
        }));
    }
    let mut all = Tally::default();
    for t in tasks {
        let r = t.await.map_err(|e| format!("client task: {e}"))?;
        all.latencies_us.extend(r.latencies_us);
        all.collisions += r.collisions;
        all.errors += r.errors;
        if all.first_error.is_none() {
            all.first_error = r.first_error;
        }
    }
    let elapsed = Instant::now().saturating_duration_since(start);
    all.latencies_us.sort_unstable();
    Ok((all, elapsed))
}

async fn run_cell(cell: Cell, p: &Params) -> Result<Row, String> {
    let dir = temp_dir("scale")?;
    let t0 = Instant::now();
    let service = prepare(cell, &dir).await?;
    let setup_s = t0.elapsed().as_secs_f64();
    let server = Server::serve(service.clone()).await?;
    let client = http_client(p.concurrency)?;
    let result = async {
        // The periodic work, timed directly (nothing is due: what it costs is
        // what it reads to find that out).
        let sweep_us = time_calls(|| service.sweep()).await;
        let gauges_us = time_calls(|| async {
            std::hint::black_box(service.metrics_text());
        })
        .await;
        let (l2, l2_elapsed) = measure(&client, &server.base, cell, p, false).await?;
        let (pairs, pairs_elapsed) = measure(&client, &server.base, cell, p, true).await?;
        for (what, t) in [("L2", &l2), ("L4+L6", &pairs)] {
            if let Some(e) = &t.first_error {
                eprintln!("  {cell:?} {what}: {} errors, first: {e}", t.errors);
            }
        }
        Ok::<Row, String>(Row {
            cell,
            setup_s,
            l2_ops: l2.latencies_us.len() as u64,
            l2_per_s: l2.latencies_us.len() as f64 / l2_elapsed.as_secs_f64(),
            l2_p50_us: quantile(&l2.latencies_us, 0.50),
            l2_p99_us: quantile(&l2.latencies_us, 0.99),
            l2_p999_us: quantile(&l2.latencies_us, 0.999),
            l2_max_us: l2.latencies_us.last().copied().unwrap_or(0),
            pairs: pairs.latencies_us.len() as u64,
            pairs_per_s: pairs.latencies_us.len() as f64 / pairs_elapsed.as_secs_f64(),
            pair_p50_us: quantile(&pairs.latencies_us, 0.50),
            pair_p99_us: quantile(&pairs.latencies_us, 0.99),
            held_collisions: pairs.collisions,
            errors: l2.errors + pairs.errors,
            keys_in_memory: service.table_sizes().keys,
            sweep_us,
            gauges_us,
        })
    }
    .await;
    server.stop().await;
    drop(service);
    let _ = std::fs::remove_dir_all(&dir);
    result
}

fn print_table(rows: &[Row]) {
    println!(
        "| store | keys ever used | live sessions | L2 p50 µs | L2 p99 µs | L2 p99.9 / max µs | L2/s | L4+L6 pairs/s | pair p50 / p99 ms | keys in memory | setup s | sweep µs med/max | gauges µs med/max |"
    );
    println!("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|");
    for r in rows {
        println!(
            "| {} | {} | {} | {} | {} | {} / {} | {:.0} | {:.0} | {:.1} / {:.1} | {} | {:.1} | {} / {} | {} / {} |",
            r.cell.store,
            r.cell.keys,
            r.cell.sessions,
            r.l2_p50_us,
            r.l2_p99_us,
            r.l2_p999_us,
            r.l2_max_us,
            r.l2_per_s,
            r.pairs_per_s,
            r.pair_p50_us as f64 / 1e3,
            r.pair_p99_us as f64 / 1e3,
            r.keys_in_memory,
            r.setup_s,
            r.sweep_us.0,
            r.sweep_us.1,
            r.gauges_us.0,
            r.gauges_us.1,
        );
    }
}

/// A comma-separated list from the environment, else `default` (names must be known).
fn list(name: &str, default: &[&'static str]) -> Vec<&'static str> {
    match std::env::var(name) {
        Ok(v) => v
            .split(',')
            .filter_map(|x| ["sqlite", "memory"].into_iter().find(|k| *k == x.trim()))
            .collect(),
        Err(_) => default.to_vec(),
    }
}

/// Comma-separated counts from the environment, else `default`.
fn numbers(name: &str, default: &[usize]) -> Vec<usize> {
    match std::env::var(name) {
        Ok(v) => v.split(',').filter_map(|x| x.trim().parse().ok()).collect(),
        Err(_) => default.to_vec(),
    }
}

fn main() {
    let full = full_run();
    let p = Params {
        duration: Duration::from_secs_f64(if full {
            env_f64("FP_BENCH_SECONDS").unwrap_or(2.0).max(0.2)
        } else {
            0.2
        }),
        concurrency: env_f64("FP_BENCH_CONCURRENCY").map_or(8, |c| c.max(1.0) as usize),
        seed: env_f64("FP_BENCH_SEED").map_or(1, |s| s as u64),
        full,
    };
    let cells: Vec<Cell> = if full {
        let stores = list("FP_BENCH_STORES", &["sqlite", "memory"]);
        let sessions_list = numbers("FP_BENCH_SESSIONS", &[100, 10_000, 100_000]);
        let keys_list = numbers("FP_BENCH_KEYS", &[100, 10_000, 1_000_000]);
        let repeat = env_f64("FP_BENCH_REPEAT").map_or(1, |r| r as usize);
        let mut v = Vec::new();
        // Repeats go round the whole grid (A B A B), never A A B B.
        for _ in 0..repeat {
            for store in &stores {
                for &sessions in &sessions_list {
                    for &keys in &keys_list {
                        v.push(Cell {
                            store,
                            keys,
                            sessions,
                        });
                    }
                }
            }
        }
        v
    } else {
        vec![Cell {
            store: "memory",
            keys: 100,
            sessions: 100,
        }]
    };
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    eprintln!(
        "lock-server scale: {} cells, {} s per measurement, {} client tasks, seed {}, {cores} cores{}",
        cells.len(),
        p.duration.as_secs_f64(),
        p.concurrency,
        p.seed,
        if p.full {
            ""
        } else {
            " (smoke run: pass --bench for the grid)"
        }
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let mut rows = Vec::new();
    for cell in cells {
        match rt.block_on(run_cell(cell, &p)) {
            Ok(r) => {
                eprintln!(
                    "  {:<6} keys {:>7} sessions {:>6}: L2 p50 {} µs p99 {} µs, {:.0} pairs/s",
                    cell.store, cell.keys, cell.sessions, r.l2_p50_us, r.l2_p99_us, r.pairs_per_s
                );
                rows.push(r);
            }
            Err(e) => {
                eprintln!("lock-server scale: {cell:?}: {e}");
                std::process::exit(1);
            }
        }
    }
    print_table(&rows);
    if !p.full {
        return;
    }
    let doc = json!({
        "bench": "lock-server-scale",
        "seconds_per_measurement": p.duration.as_secs_f64(),
        "concurrency": p.concurrency,
        "seed": p.seed,
        "cores": cores,
        "note": "server (with its sweeper) and clients in one process, loopback HTTP/1.1, closed loop; L2 on random live sessions, L4+L6 on random FREE keys",
        "rows": rows.iter().map(Row::to_json).collect::<Vec<_>>(),
    });
    write_json(&output_path("lock-server-scale.json"), &doc);
}
