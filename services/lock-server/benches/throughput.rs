//! A load benchmark of the lock-server over real loopback HTTP: heartbeats/s
//! (L2) and acquire+release/s (L4 then L6) for each store — `memory:`, SQLite
//! in a temp dir, and PostgreSQL in a fresh schema when `FENCEPOST_TEST_PG_URL`
//! is set. It measures; it asserts nothing about speed.
//!
//! The server runs in-process (`start_service` + `run` on `127.0.0.1:0`, the
//! monotonic clock) on the same multi-thread runtime as `C` closed-loop client
//! tasks, each with its own session (and, for L4/L6, its own key), for `D`
//! seconds per measurement, after an uncounted warm-up of `D/5` (0.2–1 s). Latency is per operation (one request for L2, the
//! acquire and the release together for L4+L6), from send to reply; the load is
//! closed-loop, so there is no coordinated omission to correct.
//!
//! Knobs: `FP_BENCH_SECONDS` (default 3), `FP_BENCH_CONCURRENCY` (default 16).
//! `cargo bench -p lock-server --bench throughput` runs it in full and writes
//! `$CARGO_TARGET_DIR/fencepost-bench/lock-server-throughput.json`; run without
//! `--bench` (as `cargo test --benches` does) it is a short smoke run on
//! `memory:` that writes nothing.

mod common;

use std::time::{Duration, Instant};

use common::{
    Pair, Server, acquire_release, env_f64, full_run, heartbeat, http_client, open_session,
    output_path, quantile, redact, temp_dir, unique_nanos, write_json,
};
use serde_json::{Value, json};

/// The operation a measurement loops.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Op {
    /// L2 on the task's own session.
    Heartbeat,
    /// L4 on the task's own key, then L6 with the returned token.
    AcquireRelease,
}

impl Op {
    fn name(self) -> &'static str {
        match self {
            Op::Heartbeat => "heartbeat",
            Op::AcquireRelease => "acquire+release",
        }
    }
}

/// How a run is shaped (from the environment and the command line).
#[derive(Clone, Debug)]
struct Params {
    /// Length of each measurement.
    duration: Duration,
    /// Client tasks per measurement.
    concurrency: usize,
    /// False for the smoke run: memory only, nothing written.
    full: bool,
}

impl Params {
    fn from_env() -> Self {
        // cargo passes `--bench` to a harness-less bench under `cargo bench`
        // (and maybe criterion-style filters); everything else is ignored.
        let full = full_run();
        let secs = env_f64("FP_BENCH_SECONDS").unwrap_or(3.0);
        let concurrency = env_f64("FP_BENCH_CONCURRENCY").map_or(16, |c| c.max(1.0) as usize);
        if full {
            Params {
                duration: Duration::from_secs_f64(secs.max(0.1)),
                concurrency,
                full,
            }
        } else {
            Params {
                duration: Duration::from_millis(300),
                concurrency: concurrency.min(4),
                full,
            }
        }
    }
}

/// One measured row of the table.
#[derive(Clone, Debug)]
struct Row {
    store: String,
    op: Op,
    concurrency: usize,
    ops: u64,
    errors: u64,
    elapsed: Duration,
    p50_us: u64,
    p99_us: u64,
    max_us: u64,
}

impl Row {
    fn ops_per_s(&self) -> f64 {
        self.ops as f64 / self.elapsed.as_secs_f64()
    }

    fn to_json(&self) -> Value {
        json!({
            "store": self.store,
            "op": self.op.name(),
            "concurrency": self.concurrency,
            "ops": self.ops,
            "errors": self.errors,
            "seconds": self.elapsed.as_secs_f64(),
            "ops_per_s": self.ops_per_s(),
            "p50_us": self.p50_us,
            "p99_us": self.p99_us,
            "max_us": self.max_us,
        })
    }
}

/// What one client task did during a measurement.
#[derive(Default)]
struct TaskResult {
    /// Latency of every successful operation, µs.
    latencies_us: Vec<u64>,
    errors: u64,
    /// The first few errors, to print.
    first_errors: Vec<String>,
}

impl TaskResult {
    fn error(&mut self, what: String) {
        self.errors += 1;
        if self.first_errors.len() < 3 {
            self.first_errors.push(what);
        }
    }
}

/// One operation; `Ok(())` only when every request in it succeeded.
async fn one_op(
    client: &reqwest::Client,
    base: &str,
    op: Op,
    session: &str,
    key: &str,
) -> Result<(), String> {
    match op {
        Op::Heartbeat => heartbeat(client, base, session).await,
        Op::AcquireRelease => match acquire_release(client, base, session, key).await? {
            Pair::Done(_) => Ok(()),
            Pair::Held => Err(format!("L4 {key}: LOCK_HELD on the task's own key")),
        },
    }
}

/// One measurement: `concurrency` tasks loop `op` for `duration` against `base`.
async fn measure(
    client: &reqwest::Client,
    base: &str,
    store: &str,
    op: Op,
    p: &Params,
) -> Result<Row, String> {
    // Set-up (sessions) happens before the clock starts.
    let mut sessions = Vec::with_capacity(p.concurrency);
    for i in 0..p.concurrency {
        sessions.push(open_session(client, base, &format!("bench-{i}")).await?);
    }
    // A warm-up (connections opened, caches and pools filled) that is not counted.
    let warmup = (p.duration / 5).clamp(Duration::from_millis(200), Duration::from_secs(1));
    let start = Instant::now() + warmup;
    let deadline = start + p.duration;
    let mut tasks = Vec::with_capacity(p.concurrency);
    for (i, session) in sessions.iter().enumerate() {
        let client = client.clone();
        let base = base.to_string();
        let session = session.clone();
        let key = format!("bench:{}:{i}", op.name().replace('+', "-"));
        tasks.push(tokio::spawn(async move {
            let mut r = TaskResult::default();
            while Instant::now() < deadline {
                let sent = Instant::now();
                let done = one_op(&client, &base, op, &session, &key).await;
                if sent < start {
                    // Warm-up: not timed, but an error is still an error.
                    if let Err(e) = done {
                        r.error(e);
                    }
                    continue;
                }
                match done {
                    Ok(()) => r.latencies_us.push(sent.elapsed().as_micros() as u64),
                    Err(e) => r.error(e),
                }
            }
            r
        }));
    }
    let mut latencies = Vec::new();
    let mut errors = 0;
    let mut first_errors = Vec::new();
    for t in tasks {
        let r = t.await.map_err(|e| format!("client task failed: {e}"))?;
        latencies.extend(r.latencies_us);
        errors += r.errors;
        first_errors.extend(r.first_errors);
    }
    let elapsed = Instant::now().saturating_duration_since(start);
    if errors > 0 {
        eprintln!("{store} {}: {errors} errors; first ones:", op.name());
        for e in first_errors.iter().take(5) {
            eprintln!("  {e}");
        }
    }
    // Leave nothing behind for the next measurement.
    for s in &sessions {
        let _ = client
            .delete(format!("{base}/v1/sessions/{s}"))
            .send()
            .await;
    }
    latencies.sort_unstable();
    Ok(Row {
        store: store.to_string(),
        op,
        concurrency: p.concurrency,
        ops: latencies.len() as u64,
        errors,
        elapsed,
        p50_us: quantile(&latencies, 0.50),
        p99_us: quantile(&latencies, 0.99),
        max_us: latencies.last().copied().unwrap_or(0),
    })
}

/// A fresh, empty schema in the test database; returns the store URL for it and its name.
async fn fresh_pg_schema(url: &str) -> Result<(String, String), String> {
    let schema = format!("bench_{}_{:x}", std::process::id(), unique_nanos());
    pg_exec(url, &format!("CREATE SCHEMA {schema}")).await?;
    let sep = if url.contains('?') { '&' } else { '?' };
    Ok((
        format!("{url}{sep}options=-csearch_path%3D{schema}"),
        schema,
    ))
}

/// Runs one statement on PostgreSQL.
async fn pg_exec(url: &str, sql: &str) -> Result<(), String> {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .map_err(|e| format!("cannot reach PostgreSQL at {}: {e}", redact(url)))?;
    let task = tokio::spawn(conn);
    let done = client
        .batch_execute(sql)
        .await
        .map_err(|e| format!("{sql}: {e}"));
    drop(client);
    let _ = task.await;
    done
}

/// Benchmarks one store: both operations, on one server.
async fn bench_store(store: &str, url: &str, p: &Params) -> Result<Vec<Row>, String> {
    // A client per server, so no pooled connection outlives the server it was for.
    let client = &http_client(p.concurrency)?;
    let server = Server::start(url).await?;
    let mut rows = Vec::new();
    for op in [Op::Heartbeat, Op::AcquireRelease] {
        let row = measure(client, &server.base, store, op, p).await;
        match row {
            Ok(r) => {
                eprintln!(
                    "  {store:<9} {:<16} {:>8.0} ops/s",
                    op.name(),
                    r.ops_per_s()
                );
                rows.push(r);
            }
            Err(e) => {
                server.stop().await;
                return Err(e);
            }
        }
    }
    server.stop().await;
    Ok(rows)
}

fn print_table(rows: &[Row]) {
    println!(
        "{:<9} {:<16} {:>5} {:>9} {:>10} {:>8} {:>8} {:>9} {:>6}",
        "store", "op", "conc", "ops", "ops/s", "p50 µs", "p99 µs", "max µs", "errors"
    );
    for r in rows {
        println!(
            "{:<9} {:<16} {:>5} {:>9} {:>10.0} {:>8} {:>8} {:>9} {:>6}",
            r.store,
            r.op.name(),
            r.concurrency,
            r.ops,
            r.ops_per_s(),
            r.p50_us,
            r.p99_us,
            r.max_us,
            r.errors
        );
    }
}

async fn run(p: Params) -> Result<Vec<Row>, String> {
    let mut rows = Vec::new();

    rows.extend(bench_store("memory", "memory:", &p).await?);
    if !p.full {
        return Ok(rows);
    }

    let dir = temp_dir("bench")?;
    let sqlite = format!("sqlite:{}", dir.join("lock.sqlite").display());
    let result = bench_store("sqlite", &sqlite, &p).await;
    let _ = std::fs::remove_dir_all(&dir);
    rows.extend(result?);

    match std::env::var("FENCEPOST_TEST_PG_URL") {
        Ok(url) if !url.is_empty() => {
            let (store_url, schema) = fresh_pg_schema(&url).await?;
            let result = bench_store("postgres", &store_url, &p).await;
            if let Err(e) = pg_exec(&url, &format!("DROP SCHEMA {schema} CASCADE")).await {
                eprintln!("could not drop schema {schema}: {e}");
            }
            rows.extend(result?);
        }
        _ => eprintln!("skipping postgres: set FENCEPOST_TEST_PG_URL to include it"),
    }
    Ok(rows)
}

fn main() {
    let p = Params::from_env();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    eprintln!(
        "lock-server throughput: {} s per measurement, {} client tasks, {cores} cores{}",
        p.duration.as_secs_f64(),
        p.concurrency,
        if p.full {
            ""
        } else {
            " (smoke run: pass --bench, as `cargo bench` does, for the full run)"
        }
    );
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let rows = match rt.block_on(run(p.clone())) {
        Ok(rows) => rows,
        Err(e) => {
            eprintln!("lock-server throughput: {e}");
            std::process::exit(1);
        }
    };
    print_table(&rows);
    if !p.full {
        return;
    }
    let doc = json!({
        "bench": "lock-server-throughput",
        "seconds_per_measurement": p.duration.as_secs_f64(),
        "concurrency": p.concurrency,
        "cores": cores,
        "note": "server and clients in one process on one multi-thread tokio runtime, loopback HTTP/1.1, closed loop",
        "rows": rows.iter().map(Row::to_json).collect::<Vec<_>>(),
    });
    write_json(&output_path("lock-server-throughput.json"), &doc);
}
