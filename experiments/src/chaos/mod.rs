//! `experiments chaos`: many short runs, each over a fresh live
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
//! `--runtime docker` runs the same over containers (`bench_driver::docker`):
//! the lock-servers always on PostgreSQL — a container of each run's own
//! unless `--pg-url` is given — with SIGSTOP as `docker pause`, kill -9 as
//! `docker kill` and `docker start` of the same container, and a PostgreSQL
//! restart as `docker kill` and `docker start` of its container.
//!
//! `--backend redis` puts one redis-server in the lock-server's place,
//! behind the same delay proxy (workers on the driver's redis adapter: `SET
//! NX PX`, a per-key counter as the fencing token, the rail's fences on):
//! the lock-server faults become the redis-server's SIGSTOP and its kill -9
//! with a restart on the same port and directory, with the persistence
//! `--redis-persistence` names (recorded in `chaos.json`); the flags that
//! name what one redis-server does not have (replicas, containers, a
//! lock-server sabotage) are refused, and the checker runs unchanged.
//!
//! `--sabotage no-fences` starts every rail-stub with both fences off
//! (`rail-stub --sabotage no-fences`): the checker must then find
//! violations — a checker that cannot fail is no checker.

pub mod coverage;
pub mod drive;
pub mod model;
pub mod report;
pub mod schedule;

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use bench_driver::backend::BackendKind;
use bench_driver::cell::{CellError, Hooks, Spawn, Stack, StackError, measure};
use bench_driver::docker::RunCleanup;
use bench_driver::rail::RailError;
use bench_history::check::{HistoryViolation, check};
use bench_history::{HistoryError, Op, OpKind, load, read_events};
use fencepost_api::latency::LatencySpecError;
use fencepost_api::rail::LedgerView;
use tokio::time::Instant;

use crate::failover::faults::fresh_schema;
use crate::output::{RunDir, RunDirError, block_on, exit_code};
use drive::{Applied, ChaosDrive, ChaosSpawner};
use schedule::{FaultKind, draw};

pub use model::{
    ChaosConfig, ChaosInputs, ChaosResult, ChaosRuntime, PAYOUT_PREFIX, RAIL_LATENCY, RunResult,
    SabotageMode,
};

/// Why `experiments chaos` failed (exit 1, as a violation does; the message
/// tells them apart).
#[derive(Debug, thiserror::Error)]
pub enum ChaosError {
    /// Replicas without a PostgreSQL to share: give `--pg-url`.
    #[error(
        "--replicas {replicas} runs the replicas on PostgreSQL: give --pg-url (or \
         FENCEPOST_TEST_PG_URL; scripts/pg-test-cluster.sh start prints one), or use --replicas 1"
    )]
    ReplicasNeedPostgres {
        /// The replicas asked for.
        replicas: u32,
    },
    /// A backend chaos does not run on: use fencepost or redis.
    #[error(
        "--backend {backend}: chaos runs on fencepost (the lock-server) or redis (one \
         redis-server with counter tokens); use one of those"
    )]
    Backend {
        /// The backend asked for.
        backend: BackendKind,
    },
    /// A flag that has no meaning on one redis-server: drop it.
    #[error(
        "{flag} has no meaning with --backend redis (one redis-server behind the delay proxy: \
         no lock-server, no replicas, no PostgreSQL, no containers); drop it"
    )]
    NotOnRedis {
        /// The flag, as typed.
        flag: &'static str,
    },
    /// `--redis-persistence` without `--backend redis`: add it, or drop the flag.
    #[error("--redis-persistence is a redis-server setting: add --backend redis, or drop it")]
    PersistenceWithoutRedis,
    /// `--only-run` names a run past `--runs`: pick one of `0..runs`.
    #[error("--only-run {run} is not a run of --runs {runs} (runs are numbered 0..{runs})")]
    OnlyRun {
        /// The run asked for.
        run: u32,
        /// The runs there are.
        runs: u32,
    },
    /// The output directory could not be made or written; [`RunDirError`] says what to do.
    #[error(transparent)]
    RunDir(#[from] RunDirError),
    /// `--sabotage skip-epoch-fence` on one lock-server, which has no epoch: add `--replicas 3`.
    #[error(
        "--sabotage skip-epoch-fence breaks the replicas' epoch fence: add --replicas 3 (and --pg-url)"
    )]
    FenceSabotageNeedsReplicas,
    /// A replicated run's fresh schema could not be made; the error names the URL.
    #[error(transparent)]
    Schema(#[from] crate::failover::FailoverError),
    /// The rail latency of the configuration is not a spec: a bug (it is a constant).
    #[error(transparent)]
    Latency(#[from] LatencySpecError),
    /// A run's lock-server and rail-stub could not start; [`StackError`] says what to do.
    #[error(transparent)]
    Stack(#[from] StackError),
    /// A run's cell failed (its faults and worker processes included); its doc says what to do.
    #[error(transparent)]
    Cell(#[from] CellError),
    /// The rail's final ledger could not be read; [`RailError`] says what to do.
    #[error(transparent)]
    Rail(#[from] RailError),
    /// The workers' history files could not be read back; [`HistoryError`] says which and why.
    #[error(transparent)]
    History(#[from] HistoryError),
    /// The run's `history.jsonl[.gz]` could not be written: check the disk
    /// and the run's directory.
    #[error("{error}")]
    WriteHistory {
        /// The file.
        path: PathBuf,
        /// The OS error (in the message, so not also a `source()`).
        error: std::io::Error,
    },
    /// The store's epoch breach audit could not be read after a run: the
    /// run's PostgreSQL is down or its schema is gone; the error says which.
    #[error("the epoch breach audit: {what}: {error}")]
    Audit {
        /// What failed.
        what: &'static str,
        /// The driver's error (in the message, so not also a `source()`).
        error: tokio_postgres::Error,
    },
    /// An operation could not be serialised into the history: a bug, report it.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
}

/// The PostgreSQL of replicated runs (neither is recorded: the URL may hold a password).
struct PgTarget {
    /// Each run makes a fresh schema in it.
    url: Option<String>,
    /// Its cluster directory, when PostgreSQL restarts are drawn.
    dir: Option<PathBuf>,
}

/// A history larger than this is written gzipped.
const GZIP_ABOVE_BYTES: usize = 256 << 10;

/// The freezes the workers recorded, as applied faults.
fn recorded_freezes(ops: &[Op]) -> Vec<Applied> {
    ops.iter()
        .filter(|o| o.kind == OpKind::Freeze)
        .map(|o| Applied {
            // A freeze at a leg boundary says so in its session's name;
            // otherwise one with a payout in hand is the in-CS one
            // (Checked); idle has none.
            kind: if o.session.starts_with("freeze-leg/") {
                FaultKind::WorkerFreezeBetweenLegs
            } else if o.payout.is_some() {
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
fn write_history(dir: &Path, ops: &[Op], ledger: &LedgerView) -> Result<PathBuf, ChaosError> {
    let mut text = Vec::new();
    for op in ops {
        serde_json::to_writer(&mut text, op)?;
        text.push(b'\n');
    }
    serde_json::to_writer(&mut text, &serde_json::json!({ "ledger": ledger }))?;
    text.push(b'\n');
    let gzip = text.len() > GZIP_ABOVE_BYTES;
    let path = dir.join(if gzip {
        "history.jsonl.gz"
    } else {
        "history.jsonl"
    });
    let written = if gzip {
        std::fs::File::create(&path).and_then(|f| {
            let mut gz = flate2::write::GzEncoder::new(f, flate2::Compression::fast());
            gz.write_all(&text)?;
            gz.finish().map(drop)
        })
    } else {
        std::fs::write(&path, text)
    };
    match written {
        Ok(()) => Ok(path),
        Err(error) => Err(ChaosError::WriteHistory { path, error }),
    }
}

/// Runs run `run` with seed `seed` under `cfg`, in `dir`.
async fn one_run(
    cfg: &ChaosConfig,
    pg: &PgTarget,
    run: u32,
    seed: u64,
    dir: &Path,
    interrupt: &tokio::sync::watch::Receiver<bool>,
) -> Result<Option<RunResult>, ChaosError> {
    let started = Instant::now();
    let schedule = draw(run, seed, &cfg.params());
    let plan = cfg.plan(run, seed)?;
    let store = match (&pg.url, cfg.on_postgres()) {
        (Some(url), true) => Some(fresh_schema(url, "chaos", seed).await?),
        _ => None,
    };
    let store_url = store.clone();
    let runtime = cfg.runtime(store);
    let mut spec = plan.stack_spec(&runtime);
    spec.db_relays = cfg.replicated();
    match cfg.sabotage.as_deref() {
        Some(s @ ("early-expiry" | "skip-epoch-fence")) => {
            spec.lock_args = vec!["--sabotage".into(), s.into()]
        }
        Some(s) => spec.rail_args = vec!["--sabotage".into(), s.into()],
        None => {}
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
        pg.dir.clone(),
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
    // Read while the store still runs (a run's own PostgreSQL container goes with the stack).
    let breaches = match (&measured, audit_url(store_url.as_deref(), &stack)) {
        (Ok(Some(_)), Some(url)) => Some(read_breaches(&url).await),
        _ => None,
    };
    stack.stop().await;
    let Some(m) = measured? else {
        return Ok(None);
    };
    let ledger = ledger.expect("read after a measured run")?;
    let ops = load(&read_events(&spawner.history_files())?)?;
    let check = check(&ops, &ledger, m.fences.believed_held());
    let mut applied = drive.applied.clone();
    applied.extend(recorded_freezes(&ops));
    applied.sort_by_key(|a| a.from_ns);
    let mut covered = coverage::from_history(&ops, &applied);
    coverage::from_logs(&mut covered, dir);
    let epoch_conflicts = coverage::epoch_conflicts(dir);
    let epoch_breaches = breaches.transpose()?.unwrap_or_default();
    write_history(dir, &ops, &ledger)?;
    for f in spawner.history_files() {
        let _ = std::fs::remove_file(f);
    }
    if check.holds() && epoch_conflicts.is_empty() && epoch_breaches.is_empty() {
        // The lock store is only evidence when something is wrong.
        for f in ["lock.sqlite", "lock.sqlite-wal", "lock.sqlite-shm"] {
            let _ = std::fs::remove_file(dir.join(f));
        }
    }
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
        coverage: covered,
        epoch_conflicts,
        epoch_breaches,
        elapsed_s: started.elapsed().as_secs_f64(),
    }))
}

/// Runs the experiment; returns the result and the output directory.
pub async fn run(args: &ChaosInputs) -> Result<(ChaosResult, PathBuf), ChaosError> {
    check_backend(args)?;
    if args.sabotage == Some(SabotageMode::SkipEpochFence) && args.replicas < 2 {
        return Err(ChaosError::FenceSabotageNeedsReplicas);
    }
    if args.replicas > 1 && args.pg_url.is_none() && args.runtime == ChaosRuntime::Process {
        return Err(ChaosError::ReplicasNeedPostgres {
            replicas: args.replicas,
        });
    }
    if let Some(run) = args.only_run
        && run >= args.runs
    {
        return Err(ChaosError::OnlyRun {
            run,
            runs: args.runs,
        });
    }
    let seed = args.seed.unwrap_or_else(rand::random);
    let cfg = ChaosConfig::resolve(args, seed);
    let pg = PgTarget {
        url: args.pg_url.clone(),
        dir: args.pg_dir.clone().filter(|_| cfg.pg_restart),
    };
    let run_dir = RunDir::create("chaos", args.out.as_deref(), seed, &cfg)?;
    // Whatever a run left in the engine (an interrupted one) goes at the end.
    let _docker_cleanup = (args.runtime == ChaosRuntime::Docker).then_some(RunCleanup);
    if let Some(s) = &cfg.sabotage {
        let what = match s.as_str() {
            "early-expiry" => "every lock-server ends its grants at half the lease it answers",
            "skip-epoch-fence" => "every replica writes without the epoch fence after a takeover",
            _ => "every rail-stub runs with both fences off",
        };
        println!("SABOTAGE {s}: {what}; the checker must report violations");
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
        faults: cfg
            .kinds()
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
        grant_overlaps: 0,
        late_renewals: 0,
        shortened_renewals: 0,
        early_refusals: 0,
        renewals_acknowledged: 0,
        epoch_conflicts: 0,
        epoch_breaches: 0,
        coverage: Default::default(),
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
        let Some(r) = one_run(&cfg, &pg, i, run_seed, &dir, &rx).await? else {
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
        for c in &r.epoch_conflicts {
            println!("    VIOLATION EpochConflict: {c}");
        }
        for b in &r.epoch_breaches {
            println!("    VIOLATION EpochBreach: {b}");
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

/// Refuses a backend chaos does not run on, and the flags that make no
/// sense with the one it runs on.
fn check_backend(args: &ChaosInputs) -> Result<(), ChaosError> {
    match args.backend {
        BackendKind::Fencepost if args.redis_persistence.is_some() => {
            Err(ChaosError::PersistenceWithoutRedis)
        }
        BackendKind::Fencepost => Ok(()),
        BackendKind::Redis => {
            let flag = if args.replicas > 1 {
                Some("--replicas")
            } else if args.runtime == ChaosRuntime::Docker {
                Some("--runtime docker")
            } else {
                match args.sabotage {
                    Some(SabotageMode::EarlyExpiry) => Some("--sabotage early-expiry"),
                    Some(SabotageMode::SkipEpochFence) => Some("--sabotage skip-epoch-fence"),
                    Some(SabotageMode::NoFences) | None => None,
                }
            };
            flag.map_or(Ok(()), |flag| Err(ChaosError::NotOnRedis { flag }))
        }
        backend => Err(ChaosError::Backend { backend }),
    }
}

/// The store whose breach audit a run reads: its fresh schema on the
/// PostgreSQL it was given, or its own PostgreSQL container; `None` for
/// SQLite (one lock-server, no epochs).
fn audit_url(store: Option<&str>, stack: &Stack) -> Option<String> {
    match (store, stack.postgres_container_addr()) {
        (Some(url), _) => Some(url.to_string()),
        (None, Some(addr)) => Some(format!("postgres://postgres@{addr}/postgres")),
        (None, None) => None,
    }
}

/// The store's epoch breach audit (`fp_epoch_breaches`, written by each
/// leader's write transactions): one line per write a deposed epoch
/// committed after another replica took over. A store that cannot be read
/// fails the run: no answer is not "no breach".
async fn read_breaches(url: &str) -> Result<Vec<String>, ChaosError> {
    let connect = |error| ChaosError::Audit {
        what: "connect",
        error,
    };
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .map_err(connect)?;
    let conn = tokio::spawn(conn);
    let rows = client
        .query(
            "SELECT writer_epoch, row_epoch, count(*), min(at)::text FROM fp_epoch_breaches \
             GROUP BY 1, 2 ORDER BY 1, 2",
            &[],
        )
        .await
        .map_err(|error| ChaosError::Audit {
            what: "read fp_epoch_breaches",
            error,
        })?;
    conn.abort();
    Ok(rows
        .iter()
        .map(|r| {
            format!(
                "{} write transaction(s) of epoch {} committed while the leader row had epoch {} (first at {})",
                r.get::<_, i64>(2),
                r.get::<_, i64>(0),
                r.get::<_, i64>(1),
                r.get::<_, String>(3),
            )
        })
        .collect())
}

fn describe(v: &HistoryViolation) -> String {
    format!("{:?}: {}", v.rule, v.detail)
}

/// `experiments chaos`: runs, prints the table, returns the exit code
/// (0 no violation, 1 a violation or a failure).
pub fn main(args: &ChaosInputs) -> i32 {
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
            SabotageMode::EarlyExpiry => "early-expiry",
            SabotageMode::SkipEpochFence => "skip-epoch-fence",
        }
    }
}
