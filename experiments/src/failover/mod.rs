//! `experiments failover`: three lock-server replicas over one
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

//!
//! [`model`] is what it records, [`faults`] what it does to the replicas,
//! [`report`] what it prints and draws.

pub mod error;
pub(crate) mod faults;
pub mod model;
pub mod report;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bench_analysis::results::CellRow;
use bench_core::timebase::{PRODUCTION_RAIL_LATENCY, TimeBase};
use bench_driver::cell::plan::PlanInputs;
use bench_driver::cell::{CellPlan, Hooks, Live, Measurement, Runtime, Stack, measure};
use fencepost_harness::ChildService;
use tokio::time::Instant;

use crate::output::{RunDir, block_on, exit_code};
use crate::plots::render;
use faults::{FailoverSchedule, Faults, await_leader, fresh_schema, spawn};
use model::{BACKLOG_SLACK_S, BUCKET_S, PAYOUT_RATE_CEILING_PER_S};
use report::{ThroughputPlot, buckets};

pub use error::{FailoverError, PgRestartError};

/// What `experiments failover` is asked (the command line's flags; see
/// `crate::cli::FailoverArgs` for each one's meaning and default).
#[derive(Clone, Debug)]
pub struct FailoverInputs {
    /// The PostgreSQL the replicas share.
    pub pg_url: String,
    /// That PostgreSQL's cluster directory (its restart), if given.
    pub pg_dir: Option<PathBuf>,
    /// Every replica's leader lease.
    pub leader_lease: Duration,
    /// Lease TTL of every acquire.
    pub ttl: Duration,
    /// In-process SDK payout workers.
    pub workers: u32,
    /// The client margin.
    pub margin: f64,
    /// Steady running before, between and after the faults.
    pub phase: Duration,
    /// The seed; random if absent.
    pub seed: Option<u64>,
    /// Results directory.
    pub out: Option<PathBuf>,
}
pub use model::{FailoverResult, FaultRecord};
pub use report::{report_section, summary};

/// `experiments failover`: exit 0, 1 when a must-be-zero counter is not, no
/// replica served again, or a service failed; 2 on bad input.
pub fn main(args: &FailoverInputs) -> i32 {
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

async fn run(args: &FailoverInputs) -> Result<(FailoverResult, PathBuf), FailoverError> {
    let seed = args.seed.unwrap_or_else(rand::random);
    let plan = plan(args, seed)?;
    let config = serde_json::json!({
        "ttl_ms": args.ttl.as_millis() as u64, "session_ttl_ms": plan.session_ttl.as_millis() as u64,
        "leader_lease_ms": args.leader_lease.as_millis() as u64, "workers": args.workers,
        "margin": args.margin, "phase_ms": args.phase.as_millis() as u64,
        "pg_dir": args.pg_dir, "replicas": 3, "seed": seed,
    });
    let run_dir = RunDir::create("failover", args.out.as_deref(), seed, &config)?;
    let dir = run_dir.dir.clone();
    let services = start_services(args, &plan, &dir).await?;
    let measured = measure_under_faults(args, &plan, services, &dir).await?;
    let row = bench_driver::row::cell_row(&measured.m);
    bench_analysis::results::write_results(&dir, std::slice::from_ref(&row))?;
    let throughput = buckets(&measured.samples, measured.opened);
    let mut faults = measured.faults;
    let baseline = baseline_before_first_fault(&throughput, &faults);
    let window_s = 3.0 * args.leader_lease.as_secs_f64();
    for f in faults.iter_mut().filter(|f| f.skipped.is_none()) {
        dip_after(f, &throughput, baseline, window_s);
    }
    let must_be_zero = must_be_zero(&row, &faults);
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

/// The cell: the driver's plan at `--ttl`, the production numbers scaled;
/// the backlog sized to the run.
fn plan(args: &FailoverInputs, seed: u64) -> Result<CellPlan, FailoverError> {
    let tb = TimeBase::for_lease(args.ttl, true);
    let lease = fencepost_api::format_duration(args.leader_lease);
    let plan = CellPlan::new(PlanInputs {
        time_base: tb,
        rail_latency: PRODUCTION_RAIL_LATENCY.parse()?,
        workers: args.workers,
        duration: args.phase * 4,
        // Sized to the run, not far beyond it: the window opens and closes
        // with an R6 read of the whole ledger, which holds the rail's lock
        // while it copies every payout; 100,000 of them (the old fixed
        // size) stalled a debug-build rail past the submit's read timeout.
        payouts: PAYOUT_RATE_CEILING_PER_S
            * ((args.phase.as_secs_f64() * 4.0).ceil() as u64 + BACKLOG_SLACK_S)
            * u64::from(args.workers),
        payout_prefix: "fo".into(),
        seed,
        ..PlanInputs::new(
            format!("failover_leader_lease={lease}"),
            args.ttl,
            tb.session_ttl(),
            args.margin,
        )
    });
    Ok(plan.in_run(&format!("failover-{seed}")))
}

/// The replicas (on a fresh schema of `--pg-url`) and the rail-stub, once
/// a replica leads.
struct Services {
    nodes: Vec<ChildService>,
    rail: ChildService,
    urls: Vec<String>,
}

async fn start_services(
    args: &FailoverInputs,
    plan: &CellPlan,
    dir: &Path,
) -> Result<Services, FailoverError> {
    let store = fresh_schema(&args.pg_url, "failover", plan.seed).await?;
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
            fencepost_api::format_duration(plan.session_ttl),
        ];
        nodes.push(spawn("lock-server", a, dir.join(format!("lock-server-{i}.log"))).await?);
    }
    let rail = spawn(
        "rail-stub",
        vec![
            "--latency".into(),
            plan.rail_latency.to_string(),
            "--seed".into(),
            plan.seed.to_string(),
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
        .ok_or(FailoverError::NoLeader)?;
    println!(
        "3 replicas, leader {} after {:?}; {} workers",
        first.0, first.1, args.workers
    );
    Ok(Services { nodes, rail, urls })
}

/// What the window measured, with the faults as applied and the paid
/// count sampled about twice a second.
struct Measured {
    m: Measurement,
    faults: Vec<FaultRecord>,
    opened: Instant,
    samples: Vec<(Instant, u64)>,
}

/// The cell's window with the faults one after another (the
/// [`FailoverSchedule`]); the services stop at its end.
async fn measure_under_faults(
    args: &FailoverInputs,
    plan: &CellPlan,
    services: Services,
    dir: &Path,
) -> Result<Measured, FailoverError> {
    let Services { nodes, rail, urls } = services;
    let runtime = Runtime::External {
        lock_url: urls.join(","),
        rail_url: rail.url(),
    };
    let mut stack = Stack::start(&plan.stack_spec(&runtime), dir).await?;
    let nodes = Arc::new(Mutex::new(nodes));
    let records: Arc<Mutex<Vec<FaultRecord>>> = Arc::default();
    let opened: Arc<Mutex<Option<Instant>>> = Arc::default();
    let samples: Arc<Mutex<Vec<(Instant, u64)>>> = Arc::default();
    let mut schedule = FailoverSchedule {
        faults: Some(Faults {
            nodes: nodes.clone(),
            urls,
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
    let measured = measure(&mut stack, plan, &mut schedule, hooks).await;
    stack.stop().await;
    drop(rail);
    drop(nodes);
    let m = measured?.ok_or(FailoverError::Interrupted)?;
    let opened = take(&opened).ok_or(FailoverError::NeverOpened)?;
    Ok(Measured {
        m,
        faults: take(&records),
        opened,
        samples: take(&samples),
    })
}

/// What a shared slot holds, taken out.
fn take<T: Default>(m: &Mutex<T>) -> T {
    std::mem::take(&mut *m.lock().unwrap_or_else(|e| e.into_inner()))
}

/// The median paid/s before the first fault.
fn baseline_before_first_fault(throughput: &[(f64, f64)], faults: &[FaultRecord]) -> Option<f64> {
    let first_fault = faults.first().map_or(f64::INFINITY, |f| f.at_s);
    let mut before: Vec<f64> = throughput
        .iter()
        .filter(|(t, _)| *t < first_fault)
        .map(|p| p.1)
        .collect();
    before.sort_by(f64::total_cmp);
    (!before.is_empty()).then(|| before[before.len() / 2])
}

/// The dip after fault `f`: its lowest throughput within `window_s` (at
/// least two buckets), and how long the throughput stayed under half the
/// `baseline`.
fn dip_after(f: &mut FaultRecord, throughput: &[(f64, f64)], baseline: Option<f64>, window_s: f64) {
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

/// Every must-be-zero counter of the run with its value.
fn must_be_zero(row: &CellRow, faults: &[FaultRecord]) -> Vec<(String, u64)> {
    let thawed: u64 = faults.iter().filter_map(|f| f.thawed_2xx).sum();
    vec![
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
    ]
}
