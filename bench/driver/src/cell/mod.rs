//! The one cell driver. A *cell* is one measured run of the payout workload
//! at one configuration ([`CellPlan`]). `bench run|sweep` and every experiment
//! run their cells through [`measure`], which is the only place that opens
//! and closes a measured window:
//!
//! 1. the load starts: a [`Schedule`] drives it — [`Steady`] (seed the plan's
//!    backlog, spawn its workers, warm up, run for its duration or until
//!    interrupted) for the bench and the throttle experiment, the pause
//!    experiment's rounds for that one;
//! 2. the window opens after [`CellPlan::warmup`] ([`CellRun::open_window`];
//!    at once when the warm-up is zero): every worker's figures restart from
//!    zero ([`Pool::reset_measurements`]), the rail's ledger is read and
//!    checked (`before`), the CPU seconds of the bench and the services are
//!    read, the stack's fault schedules start; the load's duration counts
//!    from the opening ([`CellRun::run_window`]);
//! 3. the faults stop (every service running again), the [`Pool`] stops and
//!    joins within [`CellPlan::join_grace`];
//! 4. the window closes: the ledger is read and checked again (`after`), the
//!    window's fence-outs are traced to the workers' beliefs ([`window`]),
//!    the CPU seconds are read again, and everything becomes one
//!    [`Measurement`], which the bench turns into a results row.
//!
//! What an experiment adds is a hook, not a copy: its own [`Schedule`], a
//! [`SpawnRemote`] that starts worker processes (into a cgroup), a claim hook
//! inside the critical section ([`Hooks::on_claimed`]), an awaited step hook
//! (tests' sabotage, [`Hooks::on_step`]). The services come from a [`Stack`],
//! which the caller starts and stops: a stack may serve several cells (the
//! throttle experiment measures two on one).
//!
//! Seams for the issues that change what a cell measures:
//! - a new column: a field of [`Measurement`] (or of what it holds) and one
//!   line where the bench builds a results row from it; a new per-worker count is a field
//!   of [`WorkerReport`] / [`PoolReport`], read from the SDK client in
//!   [`Pool::join`] for in-process workers and carried in the `done` line of
//!   a worker process;
//! - repeats with seeds `seed + i`: [`CellPlan::seed`] is the only
//!   seed a cell uses (stack, workers, schedule), so a repeat is a plan with
//!   another seed and a repeat index;
//! - an etcd backend: [`Runtime::Etcd`], started by the
//!   [`Stack`]; [`CellPlan::worker_env`] names the stack's backend and the
//!   pool builds the matching worker (`build_worker`);
//! - chaos fault schedules: a [`Schedule`] of their own
//!   (`experiments chaos`) that applies its faults through the stack's
//!   handles ([`Stack::lock_child`], [`Stack::restart_lock`],
//!   [`Stack::proxy_control`]) and the worker pids its spawner sees.

//!
//! The module is a facade: [`plan`] (what a cell is), [`run`] (the window
//! and [`measure`]), [`pool`] (its workers), [`stack`] (its services),
//! [`faults`] (what the stack injects), [`window`] (what the window reads),
//! [`measurement`] (what comes out).
//!
//! What fails says why in its own type: [`CellError`] (the run:
//! [`measure`], [`CellRun`], [`Schedule::drive`]; a schedule's own failure
//! is [`CellError::Schedule`]), [`PoolError`] (its workers; a remote
//! worker's own failure is [`PoolError::Remote`]), [`StackError`] (its
//! services), [`WriteError`] (a measurement's files).

pub mod faults;
pub mod measurement;
pub mod plan;
pub mod pool;
pub mod run;
pub mod stack;
pub mod window;

/// The boxed future a [`RemoteWorker`] returns (defined with the worker).
pub use crate::worker::BoxFuture;
pub use faults::{Fault, FaultNotApplied};
pub use measurement::{Measurement, WriteError, ledger_delta, save_blocks};
pub use plan::{CellPlan, Conditions, Sampling, StoppedBy, WARMUP_PERIODS, default_warmup};
pub use pool::{
    HeartbeatCounts, Pool, PoolError, PoolReport, RemoteWorker, SpawnRemote, WorkerReport,
};
pub use run::{Backlog, CellError, CellRun, Ended, Hooks, Live, Schedule, Spawn, Steady, measure};
pub use stack::{Runtime, Stack, StackError, StackSpec};
pub use window::FenceTrace;
