//! `experiments failover` (issue 14): three lock-server replicas over one
//! PostgreSQL schema, a rail-stub, and SDK payout workers configured with
//! every replica URL (they follow `NOT_LEADER`). While the workers run, one
//! fault after another: kill -9 of the leader; SIGSTOP of the (new) leader
//! until another one serves, then SIGCONT (the thawed one must answer no
//! 2xx); and a restart of PostgreSQL itself (`--pg-dir`). Per fault: the time
//! until a replica serves again (`/readyz` 200, polled every 20 ms), the
//! throughput dip (paid payouts per second in 500 ms buckets against the
//! median before the first fault); over the window: sessions and handles
//! lost, heartbeats without an answer, and the must-be-zero counters (paid
//! twice, stale paid, fenced while believed held, ledger invariant, 2xx from
//! a thawed leader). Written in the experiments' layout: `failover.json`,
//! `results.csv`, `failover.{svg,png}`, `report.md`.
//!
//! The workers run in this process (the cell driver's in-process pool); the
//! services are child processes (the process runtime).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bench_analysis::results::CellRow;
use bench_core::grid::PolicySpec;
use bench_core::timebase::{PRODUCTION_RAIL_LATENCY, PRODUCTION_RAIL_READ_TIMEOUT, TimeBase};
use bench_driver::cell::{
    CellPlan, CellRun, Conditions, Ended, Hooks, Live, Runtime, Schedule, Stack, measure,
};
use fencepost_api::latency::LatencySpec;
use fencepost_harness::ChildService;
use plotters::coord::Shift;
use plotters::prelude::*;
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use crate::cli::FailoverArgs;
use crate::output::{RunDir, block_on, exit_code};
use crate::plots::{DrawError, FONT, Plot, color, render};

/// How long a replica may take to serve again after a fault before the run fails.
const LEADER_PATIENCE: Duration = Duration::from_secs(60);
/// Payouts seeded per worker.
const PAYOUTS_PER_WORKER: u64 = 50_000;
/// The throughput bucket.
const BUCKET_S: f64 = 0.5;

/// One fault and how the replicas came through it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct FaultRecord {
    /// `kill9_leader`, `sigstop_leader` or `restart_postgres`.
    pub fault: String,
    /// Seconds after the window opened.
    pub at_s: f64,
    /// The replica (0–2) that led when the fault hit.
    pub leader_before: Option<usize>,
    /// The replica serving afterwards.
    pub leader_after: Option<usize>,
    /// Fault → first `/readyz` 200 of a replica (`None`: none within the patience).
    pub time_to_leader_ms: Option<f64>,
    /// Throughput (paid/s) of the worst 500 ms bucket from the fault to 3 leader leases after.
    pub min_throughput_per_s: Option<f64>,
    /// How long, from the fault, throughput stayed under half the baseline, s.
    pub below_half_s: Option<f64>,
    /// SIGSTOP only: 2xx replies the thawed old leader gave to L1/L2/L4 probes (must be 0).
    pub thawed_2xx: Option<u64>,
    /// Why the fault did not run, if it did not.
    pub skipped: Option<String>,
}

/// `failover.json`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct FailoverResult {
    /// The seed.
    pub seed: u64,
    /// The leader lease of every replica, ms.
    pub leader_lease_ms: u64,
    /// The faults, in order.
    pub faults: Vec<FaultRecord>,
    /// Median paid/s before the first fault.
    pub baseline_per_s: Option<f64>,
    /// `(seconds after the window opened, paid/s)` per 500 ms bucket.
    pub throughput: Vec<(f64, f64)>,
    /// The window's results row (sessions and handles lost, fences, ledger).
    pub row: CellRow,
    /// Every must-be-zero counter with its value.
    pub must_be_zero: Vec<(String, u64)>,
}

/// `experiments failover`: exit 0, 1 when a must-be-zero counter is not, no
/// replica served again, or a service failed; 2 on bad input.
pub fn main(args: &FailoverArgs) -> i32 {
    let outcome = block_on(run(args));
    exit_code("failover", outcome, |(r, dir)| {
        print!("{}", summary(&r, &dir));
        let bad: Vec<_> = r.must_be_zero.iter().filter(|(_, v)| *v > 0).collect();
        let stuck = r
            .faults
            .iter()
            .any(|f| f.skipped.is_none() && f.time_to_leader_ms.is_none());
        if !bad.is_empty() || stuck {
            eprintln!(
                "experiments failover: FAILED: must-be-zero {bad:?}, a fault without a new leader: {stuck}"
            );
            1
        } else {
            0
        }
    })
}

/// Creates a fresh schema in `pg_url`; returns the store URL that uses it.
async fn fresh_schema(pg_url: &str, seed: u64) -> anyhow::Result<String> {
    let schema = format!("failover_{seed}_{}", std::process::id());
    let (client, conn) = tokio_postgres::connect(pg_url, tokio_postgres::NoTls)
        .await
        .map_err(|e| anyhow::anyhow!("--pg-url {pg_url}: cannot connect: {e}"))?;
    tokio::spawn(conn);
    client
        .batch_execute(&format!(
            "DROP SCHEMA IF EXISTS {schema} CASCADE; CREATE SCHEMA {schema}"
        ))
        .await?;
    let sep = if pg_url.contains('?') { '&' } else { '?' };
    Ok(format!("{pg_url}{sep}options=-csearch_path%3D{schema}"))
}

async fn spawn(
    package: &'static str,
    args: Vec<String>,
    log: PathBuf,
) -> anyhow::Result<ChildService> {
    tokio::task::spawn_blocking(move || -> anyhow::Result<ChildService> {
        let bin = fencepost_harness::binary(package, package)?;
        Ok(ChildService::start(&bin, args, &log)?)
    })
    .await?
}

/// The replicas whose `/readyz` answers 200.
async fn ready(c: &reqwest::Client, urls: &[String]) -> Vec<usize> {
    let mut out = Vec::new();
    for (i, u) in urls.iter().enumerate() {
        if c.get(format!("{u}/readyz"))
            .send()
            .await
            .is_ok_and(|r| r.status() == 200)
        {
            out.push(i);
        }
    }
    out
}

/// Waits until one replica other than `not` serves; its index and the wait.
async fn await_leader(
    c: &reqwest::Client,
    urls: &[String],
    not: Option<usize>,
) -> Option<(usize, Duration)> {
    let t = Instant::now();
    while t.elapsed() < LEADER_PATIENCE {
        if let Some(&i) = ready(c, urls).await.iter().find(|&&i| Some(i) != not) {
            return Some((i, t.elapsed()));
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    None
}

/// `pg_ctl restart` of the cluster in `dir` (the layout of scripts/pg-test-cluster.sh).
fn restart_postgres(dir: &Path) -> anyhow::Result<()> {
    let bindir = std::fs::read_dir("/usr/lib/postgresql")?
        .filter_map(|e| e.ok().map(|e| e.path().join("bin")))
        .filter(|p| p.join("pg_ctl").exists())
        .max()
        .ok_or_else(|| anyhow::anyhow!("no pg_ctl under /usr/lib/postgresql"))?;
    let data = dir.join("data");
    let pg_ctl = bindir.join("pg_ctl");
    let root = std::os::unix::fs::MetadataExt::uid(&std::fs::metadata("/proc/self")?) == 0;
    let mut cmd = if root {
        let mut c = std::process::Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(&pg_ctl);
        c
    } else {
        std::process::Command::new(&pg_ctl)
    };
    let out = cmd
        .arg("-D")
        .arg(&data)
        .args(["-m", "fast", "-w", "-t", "60", "restart"])
        .stdout(std::process::Stdio::null())
        .output()?;
    anyhow::ensure!(
        out.status.success(),
        "pg_ctl restart of {}: {}",
        data.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(())
}

/// Probes a thawed old leader with L1, L2 and L4; counts 2xx replies.
async fn probe_thawed(c: &reqwest::Client, url: &str) -> u64 {
    let sid = "00000000000000000000000000000000";
    let probes = [
        (
            format!("{url}/v1/sessions"),
            serde_json::json!({"owner_id": "probe", "ttl_ms": 1000}),
        ),
        (
            format!("{url}/v1/sessions/{sid}/heartbeat"),
            serde_json::json!({}),
        ),
        (
            format!("{url}/v1/locks/probe/acquire"),
            serde_json::json!({"session_id": sid}),
        ),
    ];
    let mut ok = 0;
    for (u, body) in probes {
        if let Ok(r) = c.post(u).json(&body).send().await
            && r.status().is_success()
        {
            ok += 1;
        }
    }
    ok
}

/// What the fault task shares with the run.
struct Faults {
    nodes: Arc<Mutex<Vec<ChildService>>>,
    urls: Vec<String>,
    pg_dir: Option<PathBuf>,
    phase: Duration,
    records: Arc<Mutex<Vec<FaultRecord>>>,
    opened: Instant,
}

impl Faults {
    fn node<T>(&self, i: usize, f: impl FnOnce(&mut ChildService) -> T) -> T {
        f(&mut self.nodes.lock().unwrap_or_else(|e| e.into_inner())[i])
    }

    fn record(&self, r: FaultRecord) {
        println!(
            "  {} at {:.2} s: leader {:?} -> {:?} after {}",
            r.fault,
            r.at_s,
            r.leader_before,
            r.leader_after,
            r.time_to_leader_ms
                .map_or_else(|| "no new leader".into(), |ms| format!("{ms:.0} ms"))
        );
        self.records
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(r);
    }

    async fn run(self) {
        let c = reqwest::Client::builder()
            .timeout(Duration::from_millis(500))
            .build()
            .expect("client");
        let blank = |fault: &str, at: Instant, before| FaultRecord {
            fault: fault.into(),
            at_s: at.duration_since(self.opened).as_secs_f64(),
            leader_before: before,
            leader_after: None,
            time_to_leader_ms: None,
            min_throughput_per_s: None,
            below_half_s: None,
            thawed_2xx: None,
            skipped: None,
        };
        // 1. kill -9 of the leader.
        tokio::time::sleep(self.phase).await;
        let leader = ready(&c, &self.urls).await.first().copied();
        let at = Instant::now();
        let mut r = blank("kill9_leader", at, leader);
        if let Some(l) = leader {
            self.node(l, |n| n.kill9());
            if let Some((new, took)) = await_leader(&c, &self.urls, Some(l)).await {
                r.leader_after = Some(new);
                r.time_to_leader_ms = Some(took.as_secs_f64() * 1e3);
            }
        } else {
            r.skipped = Some("no replica served before the fault".into());
        }
        self.record(r);
        // 2. SIGSTOP of the leader until another serves, then SIGCONT.
        tokio::time::sleep(self.phase).await;
        let leader = ready(&c, &self.urls).await.first().copied();
        let at = Instant::now();
        let mut r = blank("sigstop_leader", at, leader);
        if let Some(l) = leader {
            let _ = self.node(l, |n| n.pause());
            let next = await_leader(&c, &self.urls, Some(l)).await;
            let _ = self.node(l, |n| n.resume());
            r.thawed_2xx = Some(probe_thawed(&c, &self.urls[l]).await);
            if let Some((new, took)) = next {
                r.leader_after = Some(new);
                r.time_to_leader_ms = Some(took.as_secs_f64() * 1e3);
            }
        } else {
            r.skipped = Some("no replica served before the fault".into());
        }
        self.record(r);
        // 3. A restart of PostgreSQL.
        tokio::time::sleep(self.phase).await;
        let leader = ready(&c, &self.urls).await.first().copied();
        let at = Instant::now();
        let mut r = blank("restart_postgres", at, leader);
        match &self.pg_dir {
            None => {
                r.skipped = Some("no --pg-dir (FENCEPOST_PG_DIR): PostgreSQL not restarted".into())
            }
            Some(dir) => {
                let dir = dir.clone();
                match tokio::task::spawn_blocking(move || restart_postgres(&dir)).await {
                    Ok(Ok(())) => {
                        if let Some((new, took)) = await_leader(&c, &self.urls, None).await {
                            r.leader_after = Some(new);
                            r.time_to_leader_ms = Some(at.elapsed().max(took).as_secs_f64() * 1e3);
                        }
                    }
                    Ok(Err(e)) => r.skipped = Some(format!("{e}")),
                    Err(e) => r.skipped = Some(format!("{e}")),
                }
            }
        }
        self.record(r);
        tokio::time::sleep(self.phase).await;
    }
}

/// The load: seed, spawn the workers, warm up, open the window, run the
/// fault task to its end while the workers run.
struct FailoverSchedule {
    faults: Option<Faults>,
    opened: Arc<Mutex<Option<Instant>>>,
}

impl Schedule for FailoverSchedule {
    async fn drive(&mut self, run: &mut CellRun<'_>) -> anyhow::Result<Ended> {
        let backlog = run.seed_backlog(run.plan.payouts).await?;
        run.spawn_workers(backlog, 0..u64::from(run.plan.workers))?;
        if run.run_for(run.plan.warmup).await == Ended::Interrupted {
            return Ok(Ended::Interrupted);
        }
        run.open_window().await?;
        let opened = Instant::now();
        *self.opened.lock().unwrap_or_else(|e| e.into_inner()) = Some(opened);
        let Some(mut faults) = self.faults.take() else {
            anyhow::bail!("the failover schedule runs once");
        };
        faults.opened = opened;
        let task = tokio::spawn(faults.run());
        while !task.is_finished() {
            if run.run_for(Duration::from_millis(200)).await == Ended::Interrupted {
                task.abort();
                return Ok(Ended::Interrupted);
            }
        }
        task.await?;
        Ok(Ended::Completed)
    }
}

async fn run(args: &FailoverArgs) -> anyhow::Result<(FailoverResult, PathBuf)> {
    let seed = args.seed.unwrap_or_else(rand::random);
    let tb = TimeBase::for_lease(args.ttl, true);
    let session_ttl = tb.session_ttl();
    let latency: LatencySpec = PRODUCTION_RAIL_LATENCY.parse()?;
    let config = serde_json::json!({
        "ttl_ms": args.ttl.as_millis() as u64, "session_ttl_ms": session_ttl.as_millis() as u64,
        "leader_lease_ms": args.leader_lease.as_millis() as u64, "workers": args.workers,
        "margin": args.margin, "phase_ms": args.phase.as_millis() as u64,
        "pg_dir": args.pg_dir, "replicas": 3, "seed": seed,
    });
    let run_dir = RunDir::create("failover", args.out.as_deref(), seed, &config)?;
    let dir = run_dir.dir.clone();
    let store = fresh_schema(&args.pg_url, seed).await?;
    let lease = fencepost_api::format_duration(args.leader_lease);
    let mut nodes = Vec::new();
    for i in 0..3 {
        let a = vec![
            "--store".into(),
            store.clone(),
            "--leader-lease".into(),
            lease.clone(),
            "--default-ttl".into(),
            fencepost_api::format_duration(args.ttl),
            "--session-ttl".into(),
            fencepost_api::format_duration(session_ttl),
        ];
        nodes.push(spawn("lock-server", a, dir.join(format!("lock-server-{i}.log"))).await?);
    }
    let rail_latency = tb.latency(latency);
    let rail = spawn(
        "rail-stub",
        vec![
            "--latency".into(),
            rail_latency.to_string(),
            "--seed".into(),
            seed.to_string(),
            "--ledger".into(),
            "memory".into(),
        ],
        dir.join("rail-stub.log"),
    )
    .await?;
    let urls: Vec<String> = nodes.iter().map(|n| n.url()).collect();
    let probe = reqwest::Client::builder()
        .timeout(Duration::from_millis(500))
        .build()?;
    let first = await_leader(&probe, &urls, None)
        .await
        .ok_or_else(|| anyhow::anyhow!("no replica became leader"))?;
    println!(
        "3 replicas, leader {} after {:?}; {} workers",
        first.0, first.1, args.workers
    );
    let plan = CellPlan {
        id: format!("failover_leader_lease={}", lease),
        run_id: format!("failover-{seed}"),
        lease: args.ttl,
        margin: args.margin,
        policy: PolicySpec::Fixed,
        session_ttl,
        time_base: tb,
        rail_latency,
        rail_read_timeout: tb.scale(PRODUCTION_RAIL_READ_TIMEOUT),
        worst_case_hop: tb.worst_case_hop(PRODUCTION_RAIL_READ_TIMEOUT),
        acquire_budget: args.ttl / 4,
        client_check: true,
        workers: args.workers,
        duration: args.phase * 4,
        payouts: PAYOUTS_PER_WORKER * u64::from(args.workers),
        payout_prefix: "fo".into(),
        seed,
        repeat: 0,
        conditions: Conditions::default(),
        warmup: bench_driver::cell::default_warmup(session_ttl, args.ttl, args.margin),
        cpu_quota: None,
    };
    let runtime = Runtime::External {
        lock_url: urls.join(","),
        rail_url: rail.url(),
    };
    let mut stack = Stack::start(&plan.stack_spec(&runtime), &dir).await?;
    let nodes = Arc::new(Mutex::new(nodes));
    let records: Arc<Mutex<Vec<FaultRecord>>> = Arc::default();
    let opened: Arc<Mutex<Option<Instant>>> = Arc::default();
    let samples: Arc<Mutex<Vec<(Instant, u64)>>> = Arc::default();
    let mut schedule = FailoverSchedule {
        faults: Some(Faults {
            nodes: nodes.clone(),
            urls: urls.clone(),
            pg_dir: args.pg_dir.clone(),
            phase: args.phase,
            records: records.clone(),
            opened: Instant::now(),
        }),
        opened: opened.clone(),
    };
    let live = {
        let samples = samples.clone();
        move |l: &Live| {
            samples
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .push((Instant::now(), l.paid))
        }
    };
    let hooks = Hooks {
        live: Some(&live),
        ..Hooks::default()
    };
    let measured = measure(&mut stack, &plan, &mut schedule, hooks).await;
    stack.stop().await;
    drop(rail);
    drop(nodes);
    let m = measured?.ok_or_else(|| anyhow::anyhow!("interrupted"))?;
    let row = bench::row::cell_row(&m);
    bench_analysis::results::write_results(&dir, std::slice::from_ref(&row))?;
    let opened = opened
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .ok_or_else(|| anyhow::anyhow!("the window never opened"))?;
    let samples = samples.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let throughput = buckets(&samples, opened);
    let mut faults = records.lock().unwrap_or_else(|e| e.into_inner()).clone();
    let first_fault = faults.first().map_or(f64::INFINITY, |f| f.at_s);
    let mut before: Vec<f64> = throughput
        .iter()
        .filter(|(t, _)| *t < first_fault)
        .map(|p| p.1)
        .collect();
    before.sort_by(f64::total_cmp);
    let baseline = (!before.is_empty()).then(|| before[before.len() / 2]);
    let window_s = 3.0 * args.leader_lease.as_secs_f64();
    for f in faults.iter_mut().filter(|f| f.skipped.is_none()) {
        let after: Vec<&(f64, f64)> = throughput
            .iter()
            .filter(|(t, _)| *t >= f.at_s && *t < f.at_s + window_s.max(BUCKET_S * 2.0))
            .collect();
        f.min_throughput_per_s = after.iter().map(|p| p.1).min_by(f64::total_cmp);
        if let Some(b) = baseline {
            let recovered = throughput.iter().find(|(t, v)| {
                *t > f.at_s
                    && *v >= b / 2.0
                    && throughput
                        .iter()
                        .any(|(u, w)| *u >= f.at_s && *u < *t && *w < b / 2.0)
            });
            f.below_half_s = recovered
                .map(|(t, _)| t - f.at_s)
                .or(Some(0.0).filter(|_| after.iter().all(|p| p.1 >= b / 2.0)));
        }
    }
    let thawed: u64 = faults.iter().filter_map(|f| f.thawed_2xx).sum();
    let must_be_zero = vec![
        ("paid_twice".to_string(), row.paid_twice),
        ("stale_paid".to_string(), row.stale_paid),
        (
            "fenced_out_believed_held".to_string(),
            row.fenced_out_believed_held,
        ),
        (
            "ledger_invariant_broken".to_string(),
            u64::from(!row.ledger_ok),
        ),
        ("thawed_leader_2xx".to_string(), thawed),
    ];
    let result = FailoverResult {
        seed,
        leader_lease_ms: args.leader_lease.as_millis() as u64,
        faults,
        baseline_per_s: baseline,
        throughput,
        row,
        must_be_zero,
    };
    run_dir.write_json("failover.json", &result)?;
    render(&dir, "failover", &ThroughputPlot { r: &result })?;
    let section = report_section(&result);
    let dir = run_dir.finish(&section)?;
    Ok((result, dir))
}

/// Paid payouts per second in [`BUCKET_S`] buckets from cumulative samples.
fn buckets(samples: &[(Instant, u64)], opened: Instant) -> Vec<(f64, f64)> {
    let pts: Vec<(f64, u64)> = samples
        .iter()
        .filter(|(t, _)| *t >= opened)
        .map(|(t, n)| (t.duration_since(opened).as_secs_f64(), *n))
        .collect();
    let mut out = Vec::new();
    let mut edge = 0usize;
    for (i, p) in pts.iter().enumerate().skip(1) {
        if p.0 - pts[edge].0 >= BUCKET_S || i == pts.len() - 1 {
            let dt = p.0 - pts[edge].0;
            if dt > 0.0 {
                out.push((p.0, p.1.saturating_sub(pts[edge].1) as f64 / dt));
            }
            edge = i;
        }
    }
    out
}

/// The lines printed at the end.
pub fn summary(r: &FailoverResult, dir: &Path) -> String {
    let mut s = String::new();
    for f in &r.faults {
        s.push_str(&format!(
            "{:<17} new leader after {} | min throughput {} /s (baseline {}) | under half for {} s{}\n",
            f.fault,
            f.time_to_leader_ms.map_or_else(|| f.skipped.clone().unwrap_or_else(|| "NEVER".into()), |v| format!("{v:.0} ms")),
            f.min_throughput_per_s.map_or("-".into(), |v| format!("{v:.1}")),
            r.baseline_per_s.map_or("-".into(), |v| format!("{v:.1}")),
            f.below_half_s.map_or("-".into(), |v| format!("{v:.1}")),
            f.thawed_2xx.map_or(String::new(), |n| format!(" | thawed leader 2xx: {n}")),
        ));
    }
    let w = &r.row;
    s.push_str(&format!(
        "window: paid {} ({:.1}/s), sessions lost {}, handles lost {}, abandoned (D4) {}, acquire failed {}, heartbeats timed out {} / errors {} of {}\n",
        w.payouts_paid, w.throughput_per_s, w.session_lost, w.lock_lost, w.abandoned_insufficient_lease, w.acquire_failed, w.hb_timeouts, w.hb_errors, w.hb_attempts
    ));
    s.push_str(&format!(
        "must be zero: {:?}\nresults: {}\n",
        r.must_be_zero,
        dir.display()
    ));
    s
}

/// `replica N`, or `none`.
fn replica(i: Option<usize>) -> String {
    i.map_or_else(|| "none".into(), |i| format!("replica {i}"))
}

/// The `report.md` section.
pub fn report_section(r: &FailoverResult) -> String {
    let mut s = format!(
        "## Failover experiment (issue 14)\n\nThree lock-server replicas over one PostgreSQL \
         schema (leader lease {} ms), SDK payout workers given every URL. Seed {}. Baseline \
         throughput (median 500 ms bucket before the first fault): {} payouts/s.\n\n\
         | fault | at s | leader before → after | time to a serving leader ms | min payouts/s | under half s | thawed 2xx |\n|---|---|---|---|---|---|---|\n",
        r.leader_lease_ms,
        r.seed,
        r.baseline_per_s
            .map_or("insufficient data".into(), |v| format!("{v:.1}"))
    );
    for f in &r.faults {
        s.push_str(&format!(
            "| {} | {:.2} | {} → {} | {} | {} | {} | {} |\n",
            f.fault,
            f.at_s,
            replica(f.leader_before),
            replica(f.leader_after),
            f.time_to_leader_ms.map_or_else(
                || f.skipped.clone().unwrap_or_else(|| "none".into()),
                |v| format!("{v:.0}")
            ),
            f.min_throughput_per_s
                .map_or("-".into(), |v| format!("{v:.1}")),
            f.below_half_s.map_or("-".into(), |v| format!("{v:.1}")),
            f.thawed_2xx.map_or("-".into(), |n| n.to_string()),
        ));
    }
    let w = &r.row;
    s.push_str(&format!(
        "\nOver the window: paid {} ({:.1}/s); sessions lost {} (expired {}, unknown {}, deadline {}); \
         handles lost {}; abandoned for insufficient lease {}; acquires failed {}; heartbeats \
         without an answer: {} timed out, {} errors, of {}.\n\nMust be zero: {}.\n\n\
         ![throughput](failover.svg)\n\nData: failover.json, results.csv, lock-server-*.log.\n",
        w.payouts_paid, w.throughput_per_s, w.session_lost, w.session_lost_expired, w.session_lost_unknown,
        w.session_lost_deadline, w.lock_lost, w.abandoned_insufficient_lease, w.acquire_failed,
        w.hb_timeouts, w.hb_errors, w.hb_attempts,
        r.must_be_zero.iter().map(|(k, v)| format!("{k} = {v}")).collect::<Vec<_>>().join(", ")
    ));
    s
}

/// Throughput over the window, a line per fault.
struct ThroughputPlot<'a> {
    r: &'a FailoverResult,
}

impl Plot for ThroughputPlot<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), DrawError>
    where
        DB::ErrorType: 'static,
    {
        let font = |size: u32| -> TextStyle<'static> { (FONT, size).into_font().into() };
        let xmax = self.r.throughput.last().map_or(1.0, |p| p.0).max(1.0);
        let ymax = self.r.throughput.iter().map(|p| p.1).fold(1.0, f64::max) * 1.15;
        let mut chart = ChartBuilder::on(root)
            .caption(
                format!(
                    "failover: payouts/s, leader lease {} ms (seed {})",
                    self.r.leader_lease_ms, self.r.seed
                ),
                font(22),
            )
            .margin(16)
            .x_label_area_size(50)
            .y_label_area_size(70)
            .build_cartesian_2d(0.0..xmax, 0.0..ymax)?;
        chart
            .configure_mesh()
            .x_desc("seconds after the window opened")
            .y_desc("payouts paid per second (500 ms buckets)")
            .label_style(font(15))
            .axis_desc_style(font(18))
            .draw()?;
        chart
            .draw_series(LineSeries::new(
                self.r.throughput.clone(),
                color(0).stroke_width(3),
            ))?
            .label("throughput")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color(0).stroke_width(3)));
        for (i, f) in self
            .r
            .faults
            .iter()
            .enumerate()
            .filter(|(_, f)| f.skipped.is_none())
        {
            let col = color(i + 1);
            chart
                .draw_series(LineSeries::new(
                    vec![(f.at_s, 0.0), (f.at_s, ymax)],
                    col.stroke_width(2),
                ))?
                .label(&f.fault)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], col.stroke_width(2))
                });
            if let Some(ms) = f.time_to_leader_ms {
                let t = f.at_s + ms / 1e3;
                chart.draw_series(LineSeries::new(
                    vec![(t, 0.0), (t, ymax)],
                    col.mix(0.5).stroke_width(1),
                ))?;
            }
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.9))
            .border_style(BLACK)
            .label_font(font(15))
            .position(SeriesLabelPosition::UpperRight)
            .draw()?;
        Ok(())
    }
}
