//! `experiments pause` (T-042, UC-03): a payout worker in its own OS process
//! is frozen with SIGSTOP inside its critical section — after fence 1 accepted
//! its claim, before the D4 check and the submit — for longer than its lease,
//! while other workers take its payout over under a higher token; then it is
//! SIGCONTed. `--pauses N` rounds.
//!
//! One round, deterministically:
//! 1. R7 seeds `--payouts-per-pause` payouts; the worker process is told to
//!    work them and to freeze on its k-th successful claim (k from the seed);
//! 2. the driver sees the `pausing` line and waits until `/proc/PID/stat`
//!    says the process is stopped (`T`);
//! 3. the other workers (in-process `bench_driver::worker::Worker`s, client check
//!    on) start on the same backlog; they re-acquire the frozen payout once the
//!    server says FREE (lease/session + grace) and pay it;
//! 4. after at least `--pause-factor × lease` *and* once R5 shows the payout
//!    PAID under a higher token, the driver SIGCONTs the process;
//! 5. with the client check on, the resumed worker's `check_still_held` fails
//!    and it abandons without touching the ledger; with `--disable-client-check`
//!    it submits under its stale token and fence 2 refuses it.
//!
//! The experiment is one cell of the bench's cell driver (`bench_driver::cell`): a
//! [`bench_driver::cell::Stack`] of a lock-server and a rail-stub, the others as the
//! driver's in-process pool, and the rounds as the cell's
//! [`bench_driver::cell::Schedule`] (`rounds.rs`). Everything counted in `pause.json`
//! (paid, fenced, duplicates, paid twice, stale paid) is the driver's ledger
//! difference over the window, from the rail's R6 ledger through
//! `fencepost_api::ledger_check::check_ledger`; the workers' own lines only
//! place events on the timeline. [`report`] renders the report section and
//! the printed summary.

pub mod model;
pub mod report;
mod rounds;

use std::net::SocketAddr;
use std::path::PathBuf;

use bench_driver::telemetry::{ListenError, Telemetry};

use bench_driver::cell::{CellError, Hooks, Stack, StackError, WriteError, measure};
use fencepost_api::latency::LatencySpecError;

use crate::output::{RunDir, RunDirError, block_on, exit_code};
use crate::plots::PlotError;
use crate::timeline::{Event, EventKind};

pub use model::{
    PAUSED_WORKER, PAYOUT_PREFIX, PauseConfig, PauseInputs, PauseRecord, PauseResult, RAIL_LATENCY,
};
pub use rounds::RoundError;

/// Why `experiments pause` failed (exit 1).
#[derive(Debug, thiserror::Error)]
pub enum PauseError {
    /// The output directory could not be made or written; [`RunDirError`] says what to do.
    #[error(transparent)]
    RunDir(#[from] RunDirError),
    /// The rail latency of the configuration is not a spec: a bug (it is a constant).
    #[error(transparent)]
    Latency(#[from] LatencySpecError),
    /// The lock service and rail-stub could not start; [`StackError`] says what to do.
    #[error(transparent)]
    Stack(#[from] StackError),
    /// The cell failed, a round included ([`RoundError`] in
    /// [`CellError::Schedule`]); its own doc says what to do.
    #[error(transparent)]
    Cell(#[from] CellError),
    /// `--metrics-listen` could not bind its address; pick another.
    #[error(transparent)]
    MetricsListen(#[from] ListenError),
    /// Ctrl-C ended the rounds before the last one: nothing is reported; rerun.
    #[error("the pause rounds were interrupted")]
    Interrupted,
    /// The ledger check could not be written into the output directory; check it.
    #[error(transparent)]
    LedgerCheck(#[from] WriteError),
    /// The timeline plot could not be drawn; [`PlotError`] says what to do.
    #[error(transparent)]
    Plot(#[from] PlotError),
}

/// One `experiments pause` run: what it measures, its seed (random if
/// `None`), where it writes and serves metrics. The command line builds it.
#[derive(Clone, Debug)]
pub struct PauseRun {
    /// The experiment's inputs.
    pub inputs: PauseInputs,
    /// The seed; random if absent (printed and recorded).
    pub seed: Option<u64>,
    /// Results directory; default data/runs/<timestamp>-pause/.
    pub out: Option<PathBuf>,
    /// Serve Prometheus metrics during the rounds at this address.
    pub metrics_listen: Option<SocketAddr>,
}

/// Runs the experiment; returns the result and the output directory.
pub async fn run(args: &PauseRun) -> Result<(PauseResult, PathBuf), PauseError> {
    let seed = args.seed.unwrap_or_else(rand::random);
    let cfg = model::resolve(&args.inputs, seed);
    let run_dir = RunDir::create("pause", args.out.as_deref(), seed, &cfg)?;
    let dir = run_dir.dir.clone();
    let plan = model::plan(&cfg)?;
    let mut stack = Stack::start(&plan.stack_spec(&model::runtime(&cfg)), &dir).await?;
    let mut rounds = rounds::Rounds::new(&cfg);
    let telemetry = Telemetry::listen(args.metrics_listen, "experiments pause").await?;
    let hooks = Hooks {
        on_claimed: Some(rounds.claim_hook()),
        telemetry,
        ..Hooks::default()
    };
    let measured = measure(&mut stack, &plan, &mut rounds, hooks).await;
    stack.stop().await;
    let m = measured?.ok_or(PauseError::Interrupted)?;
    m.write_ledger_check(&dir)?;
    let (expectation_met, expectation) =
        PauseResult::judge(&m.ledger, cfg.client_check, cfg.rail_fences, cfg.pauses);
    let l = &m.ledger;
    let events = rounds.take_events();
    for r in &mut rounds.records {
        r.takeover_after_s = takeover_after(r, &events);
    }
    run_dir.write_json("events.json", &events)?;
    let result = PauseResult {
        client_check: cfg.client_check,
        pauses: rounds.records.len() as u32,
        fenced_out: l.fenced_out_total,
        fenced_out_fence1: l.fenced_out_fence1,
        fenced_out_fence2: l.fenced_out_fence2,
        duplicate_attempted: l.duplicate_attempted,
        paid: l.paid,
        payouts: l.payouts,
        paid_twice: l.paid_twice,
        stale_paid: l.stale_paid,
        ledger_ok: l.holds(),
        expectation_met,
        expectation,
        paused: std::mem::take(&mut rounds.records),
        paused_worker: rounds.paused_tally.clone(),
        other_workers: m.workers.tally.clone(),
        config: cfg.clone(),
    };
    crate::plots::timeline(&dir, &report::timeline_input(&result, events))?;
    run_dir.write_json("pause.json", &result)?;
    let dir = run_dir.finish(&report::report_section(&result))?;
    Ok((result, dir))
}

/// Seconds from `r`'s freeze to the first claim of its payout by another
/// worker, from the timeline.
fn takeover_after(r: &PauseRecord, events: &[Event]) -> Option<f64> {
    events
        .iter()
        .find(|e| {
            e.kind == EventKind::Claimed
                && e.worker != PAUSED_WORKER
                && e.payout.as_deref() == Some(r.payout.as_str())
                && e.t_s >= r.stopped_at_s
        })
        .map(|e| e.t_s - r.stopped_at_s)
}

/// `experiments pause`: runs, prints the summary, returns the exit code
/// (0 expectation met, 1 failed or not met).
pub fn main(args: &PauseRun) -> i32 {
    exit_code("pause", block_on(run(args)), |(r, dir)| {
        print!("{}", report::summary(&r, &dir));
        if r.expectation_met { 0 } else { 1 }
    })
}
