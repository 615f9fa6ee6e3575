//! `experiments chaos` (issue 16): many short runs, each over a fresh live
//! cell — a lock-server on its durable SQLite store behind the delay proxy,
//! a rail-stub, payout worker processes on the SDK — under a fault schedule
//! drawn from the run's seed ([`schedule`]), applied by the run's
//! [`drive::ChaosDrive`] through the bench's one cell driver
//! (`bench_driver::cell::measure`). Every worker records its operations
//! (`bench_history`); after the run the histories and the rail's final
//! ledger are checked (`bench_history::check`) and written to the run's
//! `history.jsonl` (gzipped when large). `chaos.json` sums the runs: fault
//! counts per kind, operations checked, `paid_twice`, `stale_paid`,
//! `token_regressions`, `history_violations`, and per run its seed and
//! schedule, so `--only-run I` replays one alone. Any violation: exit 1.
//!
//! `--sabotage no-fences` starts every rail-stub with both fences off
//! (`rail-stub --sabotage no-fences`): the checker must then find
//! violations — a checker that cannot fail is no checker.

pub mod drive;
pub mod report;
pub mod schedule;

use std::collections::BTreeMap;
use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bench_core::grid::PolicySpec;
use bench_core::timebase::{PRODUCTION_RAIL_READ_TIMEOUT, TimeBase};
use bench_driver::cell::{CellPlan, Conditions, Hooks, Runtime, Spawn, Stack, measure};
use bench_history::check::{HistoryCheck, HistoryViolation, check};
use bench_history::{Op, OpKind, load, read_events};
use fencepost_api::latency::LatencySpec;
use fencepost_api::rail::LedgerView;
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use crate::cli::{ChaosArgs, ChaosRuntime, SabotageMode};
use crate::output::{RunDir, block_on, exit_code};
use drive::{Applied, ChaosDrive, ChaosSpawner};
use schedule::{FaultKind, RunSchedule, ScheduleParams, draw};

/// The R7 prefix of every run's backlog.
pub const PAYOUT_PREFIX: &str = "chaos";
/// The rail's latency: short and bounded, below the scaled read timeout.
pub const RAIL_LATENCY: &str = "uniform:1ms..5ms";
/// A history larger than this is written gzipped.
const GZIP_ABOVE_BYTES: usize = 256 << 10;

/// The resolved configuration (manifest, `chaos.json`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ChaosConfig {
    /// Runs.
    pub runs: u32,
    /// The base seed; run `i` uses `seed + i`.
    pub seed: u64,
    /// Only this run, if given.
    pub only_run: Option<u32>,
    /// `process` (docker is refused for now).
    pub runtime: String,
    /// Lock-server replicas (1).
    pub replicas: u32,
    /// Lease per acquire, ms (the session TTL too).
    pub ttl_ms: u64,
    /// Each run's window, ms.
    pub duration_ms: u64,
    /// Worker processes per run.
    pub workers: u32,
    /// Payouts seeded per run.
    pub payouts: u64,
    /// The client margin.
    pub margin: f64,
    /// The rail's latency.
    pub rail_latency: String,
    /// R3 read timeout, ms (5 s scaled).
    pub rail_read_timeout_ms: u64,
    /// What D4 requires before a submit, ms.
    pub worst_case_hop_ms: u64,
    /// The acquire budget, ms (lease / 4).
    pub acquire_budget_ms: u64,
    /// `no-fences` when the rail-stub is sabotaged.
    pub sabotage: Option<String>,
    /// Faults drawn per run besides the freeze inside the critical section.
    pub extra_faults: (u64, u64),
}

impl ChaosConfig {
    /// Resolves `args` with `seed`.
    pub fn resolve(args: &ChaosArgs, seed: u64) -> Self {
        let tb = TimeBase::for_lease(args.ttl, true);
        ChaosConfig {
            runs: args.runs,
            seed,
            only_run: args.only_run,
            runtime: "process".into(),
            replicas: args.replicas,
            ttl_ms: args.ttl.as_millis() as u64,
            duration_ms: args.duration.as_millis() as u64,
            workers: args.workers,
            payouts: args.payouts,
            margin: args.margin,
            rail_latency: RAIL_LATENCY.into(),
            rail_read_timeout_ms: tb.scale(PRODUCTION_RAIL_READ_TIMEOUT).as_millis() as u64,
            worst_case_hop_ms: tb.worst_case_hop(PRODUCTION_RAIL_READ_TIMEOUT).as_millis() as u64,
            acquire_budget_ms: (args.ttl / 4).as_millis().max(1) as u64,
            sabotage: args.sabotage.map(|s| s.as_str().to_string()),
            extra_faults: (1, 3),
        }
    }

    fn lease(&self) -> Duration {
        Duration::from_millis(self.ttl_ms)
    }

    /// The schedule parameters of every run.
    pub fn params(&self) -> ScheduleParams {
        ScheduleParams {
            lease_ms: self.ttl_ms,
            duration_ms: self.duration_ms,
            workers: u64::from(self.workers),
            kinds: FaultKind::PROCESS.to_vec(),
            extra: self.extra_faults.0..=self.extra_faults.1,
        }
    }

    /// The cell of run `run` with seed `seed`.
    pub fn plan(&self, run: u32, seed: u64) -> anyhow::Result<CellPlan> {
        let lease = self.lease();
        Ok(CellPlan {
            id: format!("chaos-run-{run}"),
            run_id: format!("chaos-{}", self.seed),
            lease,
            margin: self.margin,
            policy: PolicySpec::Fixed,
            session_ttl: lease,
            time_base: TimeBase::for_lease(lease, true),
            rail_latency: self.rail_latency.parse()?,
            rail_read_timeout: Duration::from_millis(self.rail_read_timeout_ms),
            worst_case_hop: Duration::from_millis(self.worst_case_hop_ms),
            acquire_budget: Duration::from_millis(self.acquire_budget_ms),
            client_check: true,
            workers: self.workers,
            duration: Duration::from_millis(self.duration_ms),
            payouts: self.payouts,
            payout_prefix: PAYOUT_PREFIX.into(),
            seed,
            repeat: 0,
            // A zero-delay proxy: the delay and loss spikes, and the restart's new port.
            conditions: Conditions {
                net_delay: Some(LatencySpec::Fixed(Duration::ZERO)),
                server_pause: None,
            },
            // Every operation of the run is checked, from the first one.
            warmup: Duration::ZERO,
            cpu_quota: None,
        })
    }
}

/// One run, in `chaos.json`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunResult {
    /// Its index.
    pub run: u32,
    /// Its seed.
    pub seed: u64,
    /// The drawn schedule (replays with `--only-run`).
    pub schedule: RunSchedule,
    /// The faults as applied (freezes: as the workers recorded them).
    pub applied: Vec<Applied>,
    /// Pairs of applied faults that overlapped in time.
    pub overlaps: u64,
    /// Payouts paid (ledger).
    pub paid: u64,
    /// Fence refusals (ledger counters, both fences).
    pub fenced_out: u64,
    /// Worker processes that did not report (killed, or late).
    pub workers_unreported: u32,
    /// The checker's counts and violations.
    pub check: HistoryCheck,
    /// Seconds the run took (start of the stack to its stop).
    pub elapsed_s: f64,
}

/// `chaos.json`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ChaosResult {
    /// Runs done.
    pub runs: u32,
    /// Faults applied, per kind.
    pub faults: BTreeMap<String, u64>,
    /// Fault kinds exercised at least once.
    pub fault_kinds_exercised: u32,
    /// Pairs of faults that overlapped in time, all runs.
    pub overlaps: u64,
    /// Operations in the histories.
    pub operations_checked: u64,
    /// Operations without a completion (killed workers).
    pub indeterminate: u64,
    /// Payouts paid more than once. Must be 0.
    pub paid_twice: u64,
    /// Payouts paid by a stale token. Must be 0.
    pub stale_paid: u64,
    /// Grants whose token did not rise. Must be 0.
    pub token_regressions: u64,
    /// Belief overlaps and unreported trigger-4 fence-outs. Must be 0.
    pub history_violations: u64,
    /// Fence-outs of submits the client believed held (trigger-4 events; not violations).
    pub trigger4_events: u64,
    /// Payouts paid, all runs.
    pub paid: u64,
    /// Fence refusals, all runs.
    pub fenced_out: u64,
    /// Wall seconds of the whole command.
    pub elapsed_s: f64,
    /// The configuration.
    pub config: ChaosConfig,
    /// Per run.
    pub per_run: Vec<RunResult>,
}

impl ChaosResult {
    /// Every violation count summed.
    pub fn violations(&self) -> u64 {
        self.paid_twice + self.stale_paid + self.token_regressions + self.history_violations
    }

    fn add(&mut self, r: RunResult) {
        for a in &r.applied {
            *self.faults.entry(a.kind.as_str().to_string()).or_default() += 1;
        }
        self.fault_kinds_exercised = self.faults.values().filter(|n| **n > 0).count() as u32;
        self.overlaps += r.overlaps;
        let c = &r.check;
        self.operations_checked += c.operations_checked;
        self.indeterminate += c.indeterminate;
        self.paid_twice += c.paid_twice;
        self.stale_paid += c.stale_paid;
        self.token_regressions += c.token_regressions;
        self.history_violations += c.history_violations();
        self.trigger4_events += c.believed_fence_outs;
        self.paid += r.paid;
        self.fenced_out += r.fenced_out;
        self.runs += 1;
        self.per_run.push(r);
    }
}

/// The freezes the workers recorded, as applied faults.
fn recorded_freezes(ops: &[Op]) -> Vec<Applied> {
    ops.iter()
        .filter(|o| o.kind == OpKind::Freeze)
        .map(|o| Applied {
            // A freeze with a payout in hand is the in-CS one (Checked); idle has none.
            kind: if o.payout.is_some() {
                FaultKind::WorkerFreezeInCs
            } else {
                FaultKind::WorkerFreezeOutsideCs
            },
            from_ns: o.inv_ns,
            to_ns: o.ok_ns.unwrap_or(o.inv_ns),
            target: Some(o.proc.clone()),
        })
        .collect()
}

fn overlaps(applied: &[Applied]) -> u64 {
    let mut n = 0;
    for (i, a) in applied.iter().enumerate() {
        for b in &applied[i + 1..] {
            if a.from_ns <= b.to_ns && b.from_ns <= a.to_ns {
                n += 1;
            }
        }
    }
    n
}

/// Writes the run's history: every operation, then the final ledger, one
/// JSON value per line; gzipped (`history.jsonl.gz`) when large.
fn write_history(dir: &Path, ops: &[Op], ledger: &LedgerView) -> anyhow::Result<PathBuf> {
    let mut text = Vec::new();
    for op in ops {
        serde_json::to_writer(&mut text, op)?;
        text.push(b'\n');
    }
    serde_json::to_writer(&mut text, &serde_json::json!({ "ledger": ledger }))?;
    text.push(b'\n');
    if text.len() > GZIP_ABOVE_BYTES {
        let path = dir.join("history.jsonl.gz");
        let mut gz = flate2::write::GzEncoder::new(
            std::fs::File::create(&path)?,
            flate2::Compression::fast(),
        );
        gz.write_all(&text)?;
        gz.finish()?;
        Ok(path)
    } else {
        let path = dir.join("history.jsonl");
        std::fs::write(&path, text)?;
        Ok(path)
    }
}

/// Runs run `run` with seed `seed` under `cfg`, in `dir`.
async fn one_run(
    cfg: &ChaosConfig,
    run: u32,
    seed: u64,
    dir: &Path,
    interrupt: &tokio::sync::watch::Receiver<bool>,
) -> anyhow::Result<Option<RunResult>> {
    let started = Instant::now();
    let schedule = draw(run, seed, &cfg.params());
    let plan = cfg.plan(run, seed)?;
    let mut spec = plan.stack_spec(&Runtime::Process {
        store: None,
        replicas: 1,
    });
    if let Some(s) = &cfg.sabotage {
        spec.rail_args = vec!["--sabotage".into(), s.clone()];
    }
    let mut stack = Stack::start(&spec, dir).await?;
    let pids = Arc::new(Mutex::new(Default::default()));
    let spawner = ChaosSpawner {
        dir: dir.to_path_buf(),
        schedule: schedule.clone(),
        pids: pids.clone(),
        t0: started,
    };
    let mut drive = ChaosDrive::new(
        schedule.clone(),
        u64::from(cfg.workers),
        plan.duration,
        pids,
    );
    let hooks = Hooks {
        spawn: Spawn::Remote(&spawner),
        interrupt: Some(interrupt.clone()),
        ..Hooks::default()
    };
    let measured = measure(&mut stack, &plan, &mut drive, hooks).await;
    let ledger = match &measured {
        Ok(Some(_)) => Some(stack.rail().ledger().await),
        _ => None,
    };
    stack.stop().await;
    let Some(m) = measured? else {
        return Ok(None);
    };
    let ledger = ledger.expect("read after a measured run")?;
    let ops = load(&read_events(&spawner.history_files())?)?;
    let check = check(&ops, &ledger, m.fences.believed_held());
    write_history(dir, &ops, &ledger)?;
    for f in spawner.history_files() {
        let _ = std::fs::remove_file(f);
    }
    if check.holds() {
        // The lock store is only evidence when something is wrong.
        for f in ["lock.sqlite", "lock.sqlite-wal", "lock.sqlite-shm"] {
            let _ = std::fs::remove_file(dir.join(f));
        }
    }
    let mut applied = drive.applied.clone();
    applied.extend(recorded_freezes(&ops));
    applied.sort_by_key(|a| a.from_ns);
    Ok(Some(RunResult {
        run,
        seed,
        schedule,
        overlaps: overlaps(&applied),
        applied,
        paid: m.ledger.paid,
        fenced_out: m.ledger.fenced_out_total,
        workers_unreported: m.workers.late,
        check,
        elapsed_s: started.elapsed().as_secs_f64(),
    }))
}

/// Runs the experiment; returns the result and the output directory.
pub async fn run(args: &ChaosArgs) -> anyhow::Result<(ChaosResult, PathBuf)> {
    if args.runtime == ChaosRuntime::Docker {
        anyhow::bail!(
            "--runtime docker is not supported by chaos yet (PostgreSQL restart and docker pause \
             are not implemented); use --runtime process"
        );
    }
    if args.replicas > 1 {
        anyhow::bail!(
            "--replicas {} is refused: lock-server replicas are not in this build yet \
             (leader kill/freeze faults come with them); use --replicas 1",
            args.replicas
        );
    }
    if let Some(i) = args.only_run {
        anyhow::ensure!(
            i < args.runs,
            "--only-run {i} is not a run of --runs {} (runs are numbered 0..{})",
            args.runs,
            args.runs
        );
    }
    let seed = args.seed.unwrap_or_else(rand::random);
    let cfg = ChaosConfig::resolve(args, seed);
    let run_dir = RunDir::create("chaos", args.out.as_deref(), seed, &cfg)?;
    if let Some(s) = &cfg.sabotage {
        println!(
            "SABOTAGE {s}: every rail-stub runs with both fences off; the checker must report violations"
        );
    }
    let (tx, rx) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            let _ = tx.send(true);
        }
    });
    let t0 = Instant::now();
    let mut result = ChaosResult {
        runs: 0,
        faults: FaultKind::PROCESS
            .iter()
            .map(|k| (k.as_str().to_string(), 0))
            .collect(),
        fault_kinds_exercised: 0,
        overlaps: 0,
        operations_checked: 0,
        indeterminate: 0,
        paid_twice: 0,
        stale_paid: 0,
        token_regressions: 0,
        history_violations: 0,
        trigger4_events: 0,
        paid: 0,
        fenced_out: 0,
        elapsed_s: 0.0,
        config: cfg.clone(),
        per_run: Vec::new(),
    };
    let runs: Vec<u32> = match args.only_run {
        Some(i) => vec![i],
        None => (0..args.runs).collect(),
    };
    let total = runs.len();
    for (n, i) in runs.into_iter().enumerate() {
        let run_seed = seed.wrapping_add(u64::from(i));
        let dir = run_dir.path(&format!("runs/run-{i:04}"));
        let Some(r) = one_run(&cfg, i, run_seed, &dir, &rx).await? else {
            println!(
                "interrupted: {} run(s) done; chaos.json covers them",
                result.runs
            );
            break;
        };
        println!("{}", report::progress_line(n + 1, total, &r));
        for v in &r.check.violations {
            println!("    VIOLATION {}", describe(v));
        }
        result.add(r);
        result.elapsed_s = t0.elapsed().as_secs_f64();
        // Written after every run: an interrupted command keeps what it did.
        run_dir.write_json("chaos.json", &result)?;
    }
    result.elapsed_s = t0.elapsed().as_secs_f64();
    run_dir.write_json("chaos.json", &result)?;
    let dir = run_dir.finish(&report::report_section(&result))?;
    Ok((result, dir))
}

fn describe(v: &HistoryViolation) -> String {
    format!("{:?}: {}", v.rule, v.detail)
}

/// `experiments chaos`: runs, prints the table, returns the exit code
/// (0 no violation, 1 a violation or a failure).
pub fn main(args: &ChaosArgs) -> i32 {
    exit_code("chaos", block_on(run(args)), |(r, dir)| {
        print!("{}", report::summary(&r, &dir));
        if r.violations() > 0 { 1 } else { 0 }
    })
}

/// The sabotage flag's value on the command line.
impl SabotageMode {
    /// As the rail-stub spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            SabotageMode::NoFences => "no-fences",
        }
    }
}
