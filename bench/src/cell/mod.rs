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
//!    [`Measurement`], which
//!    [`CellRow::from_measurement`](crate::results::CellRow::from_measurement)
//!    turns into a results row.
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
//!   line in `CellRow::from_measurement`; a new per-worker count is a field
//!   of [`WorkerReport`] / [`PoolReport`], read from the SDK client in
//!   [`Pool::join`] for in-process workers and carried in the `done` line of
//!   a worker process;
//! - repeats with seeds `seed + i` (issue 13): [`CellPlan::seed`] is the only
//!   seed a cell uses (stack, workers, schedule), so a repeat is a plan with
//!   another seed and a repeat index;
//! - an etcd backend (issue 15): [`Runtime::Etcd`], started by the
//!   [`Stack`]; [`CellPlan::worker_env`] names the stack's backend and the
//!   pool builds the matching worker (`crate::worker::build_worker`);
//! - chaos fault schedules (issue 16): a [`Schedule`] of their own
//!   (`experiments chaos`) that applies its faults through the stack's
//!   handles ([`Stack::lock_child`], [`Stack::restart_lock`],
//!   [`Stack::proxy_control`]) and the worker pids its spawner sees.

pub mod faults;
pub mod pool;
pub mod stack;
pub mod window;

use std::future::Future;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use fencepost_api::latency::LatencySpec;
use fencepost_api::ledger_check::check_ledger;
use fencepost_sdk::MarginPolicy;
use fencepost_sdk::lease::{PPM, heartbeat_period};
use tokio::sync::watch;
use tokio::time::Instant;

pub use faults::Fault;
pub use pool::{
    BoxFuture, HeartbeatCounts, Pool, PoolReport, RemoteWorker, SpawnRemote, WorkerReport,
};
pub use stack::{Runtime, Stack, StackSpec};
pub use window::FenceTrace;

use crate::cpu::CpuMark;
use crate::grid::{PauseSpec, PolicySpec};
use crate::results::{Measurement, ledger_delta};
use crate::timebase::TimeBase;
use crate::worker::{ClaimHook, StepHook, WorkQueue, WorkerEnv};
use window::OpenWindow;

/// The default warm-up, in heartbeat periods of the cell (connection set-up,
/// the first heartbeats and renewals): [`default_warmup`].
pub const WARMUP_PERIODS: u32 = 3;

/// [`WARMUP_PERIODS`] heartbeat periods of a cell with this session TTL,
/// lease and margin (the SDK's `heartbeat_period`).
pub fn default_warmup(session_ttl: Duration, lease: Duration, margin: f64) -> Duration {
    let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    let ppm = (margin * PPM as f64).round() as u64;
    heartbeat_period(ms(session_ttl), Some(ms(lease)), ppm) * WARMUP_PERIODS
}

/// How long past its grace the driver waits for the last ledger read to matter:
/// the workers finish the payout in hand within one acquire and one rail hop.
const JOIN_SLACK: Duration = Duration::from_secs(5);

/// Faults and delays injected into a cell (configuration, recorded in its row).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Conditions {
    /// Extra round-trip delay between workers and lock-server (the delay proxy).
    pub net_delay: Option<LatencySpec>,
    /// SIGSTOP/SIGCONT the lock-server on this schedule.
    pub server_pause: Option<PauseSpec>,
}

impl Conditions {
    /// The fault schedules the stack runs for these conditions.
    pub fn faults(&self) -> Vec<Fault> {
        self.server_pause
            .map(Fault::ServerPause)
            .into_iter()
            .collect()
    }
}

/// Everything one cell is: its identity, the numbers after the time-base
/// scaling, its load and its seed. Every field of a results row that is
/// configuration comes from here.
#[derive(Clone, Debug)]
pub struct CellPlan {
    /// The cell id (file names, `--resume`), e.g. `ttl=1s_margin=0.30`.
    pub id: String,
    /// The run (sweep, experiment) the cell belongs to.
    pub run_id: String,
    /// The lease every acquire asks for.
    pub lease: Duration,
    /// The cell's margin (for adaptive: its ceiling, used until warmed up).
    pub margin: f64,
    /// Fixed or adaptive margin.
    pub policy: PolicySpec,
    /// The repetition index of the cell (0 outside `--repeat`; the `repeat` column).
    pub repeat: u32,
    /// The session TTL.
    pub session_ttl: Duration,
    /// The time base the numbers below were scaled with.
    pub time_base: TimeBase,
    /// The rail's latency (scaled).
    pub rail_latency: LatencySpec,
    /// `rail.read.timeout` (scaled).
    pub rail_read_timeout: Duration,
    /// `(rail.read.timeout + 2 s)` scaled: what D4 requires before submitting.
    pub worst_case_hop: Duration,
    /// How long one acquire may wait for a held key.
    pub acquire_budget: Duration,
    /// Whether workers run `check_still_held` + `ensure_time_for` before submitting.
    pub client_check: bool,
    /// Concurrent workers.
    pub workers: u32,
    /// How long the [`Steady`] load runs.
    pub duration: Duration,
    /// How many payouts the [`Steady`] load seeds (R7).
    pub payouts: u64,
    /// R7's id prefix of the backlog.
    pub payout_prefix: String,
    /// The cell's seed: rail latency, proxy, workers (`seed + idx`), schedules.
    pub seed: u64,
    /// Faults and delays injected.
    pub conditions: Conditions,
    /// Run before the measured window opens and excluded from every figure.
    pub warmup: Duration,
    /// The CPU quota the workers run under when the cell is one of a throttled
    /// vs unthrottled pair (the throttle experiment): `"none"` for the
    /// unthrottled run, the quota for the other; `None` outside a pair.
    pub cpu_quota: Option<String>,
}

impl CellPlan {
    /// The SDK margin policy of the cell's workers.
    pub fn margin_policy(&self) -> MarginPolicy {
        self.policy.margin_policy(self.margin)
    }

    /// What a worker of this cell needs, against `stack`'s services.
    pub fn worker_env(&self, stack: &Stack, on_claimed: Option<ClaimHook>) -> WorkerEnv {
        WorkerEnv {
            backend: stack.backend(),
            lock_url: stack.lock_url().to_string(),
            rail_url: stack.rail_url().to_string(),
            lease: self.lease,
            session_ttl: self.session_ttl,
            margin: self.margin_policy(),
            rail_read_timeout: self.rail_read_timeout,
            worst_case_hop: self.worst_case_hop,
            client_check: self.client_check,
            acquire_budget: self.acquire_budget,
            payout_prefix: self.payout_prefix.clone(),
            seed: self.seed,
            on_claimed,
            on_step: None,
            history: None,
        }
    }

    /// How long a worker may take to stop: one acquire and one rail hop, plus slack.
    pub fn join_grace(&self) -> Duration {
        self.lease + self.rail_read_timeout + JOIN_SLACK
    }

    /// The services this cell needs, from `runtime`.
    pub fn stack_spec(&self, runtime: &Runtime) -> StackSpec {
        StackSpec {
            runtime: runtime.clone(),
            lease: self.lease,
            session_ttl: self.session_ttl,
            rail_latency: self.rail_latency,
            seed: self.seed,
            net_delay: self.conditions.net_delay,
            faults: self.conditions.faults(),
            rail_args: Vec::new(),
        }
    }
}

/// A live view of a running cell, for the progress line.
#[derive(Clone, Debug, Default)]
pub struct Live {
    /// Seconds run so far.
    pub elapsed_s: f64,
    /// Submissions the rail answered 200 so far (client side).
    pub paid: u64,
    /// Abandoned for insufficient lease so far.
    pub abandoned: u64,
    /// Handles lost so far.
    pub lock_lost: u64,
}

/// Where a cell's workers run.
#[derive(Clone, Copy, Default)]
pub enum Spawn<'a> {
    /// Tasks in this process, sharing one work queue.
    #[default]
    InProcess,
    /// Workers elsewhere, each given its own slice of the backlog.
    Remote(&'a dyn SpawnRemote),
}

/// What the caller adds to a cell; every field has a do-nothing default.
#[derive(Clone, Default)]
pub struct Hooks<'a> {
    /// Where workers run.
    pub spawn: Spawn<'a>,
    /// Run inside every in-process worker's critical section, after a claim.
    pub on_claimed: Option<ClaimHook>,
    /// Awaited by every in-process worker at each step of a payout (tests).
    pub on_step: Option<StepHook>,
    /// Called about twice a second with live counts.
    pub live: Option<&'a (dyn Fn(&Live) + Sync)>,
    /// Turns true when the cell must stop early (Ctrl-C); the cell is then discarded.
    pub interrupt: Option<watch::Receiver<bool>>,
}

/// How the load of a window ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// It ran its course: the measurement counts.
    Completed,
    /// Interrupted: the partial cell is discarded.
    Interrupted,
}

/// A cell's backlog: payouts `first..first + count` (R7 numbers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backlog {
    /// The first payout number.
    pub first: u64,
    /// How many.
    pub count: u64,
}

impl Backlog {
    /// `n` consecutive slices of equal size, the last one taking the remainder.
    pub fn split(self, n: u64) -> Vec<Backlog> {
        let n = n.max(1);
        let per = self.count / n;
        (0..n)
            .map(|i| Backlog {
                first: self.first + i * per,
                count: if i + 1 == n {
                    self.count - i * per
                } else {
                    per
                },
            })
            .collect()
    }
}

/// The load of a cell: what runs between the window's opening and closing.
pub trait Schedule: Send {
    /// Drives `run`'s pool; returns when the window should close. The driver
    /// stops and joins whatever is still running afterwards.
    fn drive(
        &mut self,
        run: &mut CellRun<'_>,
    ) -> impl Future<Output = anyhow::Result<Ended>> + Send;
}

/// The standard load: seed `plan.payouts`, spawn `plan.workers` workers on
/// them, run `plan.duration` (or until interrupted).
#[derive(Clone, Copy, Debug, Default)]
pub struct Steady;

impl Schedule for Steady {
    async fn drive(&mut self, run: &mut CellRun<'_>) -> anyhow::Result<Ended> {
        let backlog = run.seed_backlog(run.plan.payouts).await?;
        run.spawn_workers(backlog, 0..u64::from(run.plan.workers))?;
        if run.run_for(run.plan.warmup).await == Ended::Interrupted {
            return Ok(Ended::Interrupted);
        }
        run.open_window().await?;
        Ok(run.run_window(run.plan.duration).await)
    }
}

/// A cell while its load runs: what a [`Schedule`] works with.
pub struct CellRun<'a> {
    /// The cell.
    pub plan: &'a CellPlan,
    /// Its services (mutable: the window starts their fault schedules).
    pub stack: &'a mut Stack,
    /// Its workers.
    pub pool: Pool,
    /// The caller's hooks.
    hooks: Hooks<'a>,
    /// When the first worker started.
    started: Option<Instant>,
    /// The measured window, once open.
    window: Option<OpenWindow>,
}

impl CellRun<'_> {
    /// Seeds `count` payouts under the plan's prefix (R7).
    pub async fn seed_backlog(&self, count: u64) -> anyhow::Result<Backlog> {
        let prefix = &self.plan.payout_prefix;
        let created = self.stack.rail().seed_backlog(count, prefix).await?;
        // R7 numbers a backlog after any earlier one under the same prefix.
        let first = created.first_number(prefix)?;
        Ok(Backlog { first, count })
    }

    /// Spawns workers `ids` on `backlog`: in-process ones share one queue,
    /// remote ones each get an equal slice (the last one the remainder).
    pub fn spawn_workers(&mut self, backlog: Backlog, ids: Range<u64>) -> anyhow::Result<()> {
        self.started.get_or_insert_with(Instant::now);
        let mut env = self
            .plan
            .worker_env(self.stack, self.hooks.on_claimed.clone());
        env.on_step = self.hooks.on_step.clone();
        match self.hooks.spawn {
            Spawn::InProcess => {
                let queue = Arc::new(WorkQueue::new(backlog.first, backlog.count));
                for idx in ids {
                    self.pool.spawn_local(idx, env.clone(), queue.clone())?;
                }
            }
            Spawn::Remote(spawner) => {
                let slices = backlog.split(ids.end.saturating_sub(ids.start));
                for (idx, slice) in ids.zip(slices) {
                    let worker = spawner.spawn(idx, &env, slice.first, slice.count)?;
                    self.pool.add_remote(worker);
                }
            }
        }
        Ok(())
    }

    /// When the first worker started (now, if none has yet).
    pub fn started(&self) -> Instant {
        self.started.unwrap_or_else(Instant::now)
    }

    /// Opens the measured window (see the module doc); a second call does
    /// nothing. [`measure`] opens it before the load when the warm-up is
    /// zero; a [`Schedule`] with a warm-up opens it when the warm-up ends.
    pub async fn open_window(&mut self) -> anyhow::Result<()> {
        if self.window.is_some() {
            return Ok(());
        }
        let rail_log_len = self.stack.rail_log().and_then(|p| window::file_len(&p));
        // The client-side figures restart, then the rail snapshots its ledger
        // when R6 arrives, a moment later: the skew is one request's trip,
        // not the transfer of the whole ledger, which the workers overlap.
        self.pool.reset_measurements().await;
        let opened = Instant::now();
        let view = self.stack.rail().ledger().await?;
        // After the R6 read, so the driver's own parsing of it is not counted.
        let cpu = CpuMark::now(self.stack.pids());
        self.window = Some(OpenWindow {
            opened,
            ledger: check_ledger(&view),
            submissions: window::submission_counts(&view),
            rail_log_len,
            cpu,
        });
        self.stack.start_faults();
        Ok(())
    }

    /// Lets the workers run until `duration` after the window opened (from
    /// now if it is not open yet), reporting live counts; ends early when
    /// interrupted.
    pub async fn run_window(&mut self, duration: Duration) -> Ended {
        let from = self.window.as_ref().map_or_else(Instant::now, |w| w.opened);
        self.run_until(from + duration).await
    }

    /// Lets the workers run for `duration` from now, reporting live counts
    /// (elapsed since the first worker started); ends early when interrupted.
    pub async fn run_for(&mut self, duration: Duration) -> Ended {
        self.run_until(Instant::now() + duration).await
    }

    /// Lets the workers run until `deadline` (see [`CellRun::run_for`]).
    async fn run_until(&mut self, deadline: Instant) -> Ended {
        let started = self.started();
        let mut tick = tokio::time::interval(Duration::from_millis(500));
        let mut interrupt = self.hooks.interrupt.clone();
        loop {
            let interrupted = async {
                match interrupt.as_mut() {
                    Some(rx) => {
                        while rx.changed().await.is_ok() {
                            if *rx.borrow() {
                                return;
                            }
                        }
                        std::future::pending().await
                    }
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = tokio::time::sleep_until(deadline) => return Ended::Completed,
                _ = interrupted => return Ended::Interrupted,
                _ = tick.tick() => self.report_live(started),
            }
        }
    }

    fn report_live(&self, started: Instant) {
        if let Some(live) = self.hooks.live {
            let t = self.pool.tally();
            live(&Live {
                elapsed_s: started.elapsed().as_secs_f64(),
                paid: t.paid_replies.load(Ordering::Relaxed),
                abandoned: t.abandoned_insufficient_lease.load(Ordering::Relaxed),
                lock_lost: t.lock_lost.load(Ordering::Relaxed),
            });
        }
    }
}

/// Runs one cell on `stack` under `schedule` (see the module doc). Returns
/// `None` when the load was interrupted (the partial cell is discarded).
pub async fn measure(
    stack: &mut Stack,
    plan: &CellPlan,
    schedule: &mut impl Schedule,
    hooks: Hooks<'_>,
) -> anyhow::Result<Option<Measurement>> {
    let mut run = CellRun {
        plan,
        stack,
        pool: Pool::new(),
        hooks,
        started: None,
        window: None,
    };
    if plan.warmup.is_zero() {
        run.open_window().await?;
    }
    let ended = schedule.drive(&mut run).await;
    let CellRun {
        stack,
        pool,
        window: opened,
        ..
    } = run;
    // Faults stop before the join, so a paused server cannot hold a worker up.
    stack.stop_faults().await;
    let workers = pool.finish(plan.join_grace()).await?;
    if workers.late > 0 {
        tracing::warn!(late = workers.late, cell = %plan.id, "workers did not stop in time");
    }
    if ended? == Ended::Interrupted {
        return Ok(None);
    }
    let Some(w) = opened else {
        anyhow::bail!(
            "cell {}: the schedule never opened the measured window",
            plan.id
        );
    };
    // From the window's opening to the last worker's stop: the span the
    // ledger difference covers payments in.
    let elapsed = w.opened.elapsed();
    let cpu = CpuMark::now(stack.pids()).since(&w.cpu);
    // The window closes: everything that counts comes from the ledger.
    let view = stack.rail().ledger().await?;
    let after = check_ledger(&view);
    let ledger = ledger_delta(&w.ledger, &after);
    let fence1 = match (stack.rail_log(), w.rail_log_len) {
        (Some(path), Some(from)) => window::fence1_events(&window::log_since(&path, from)?),
        _ => Vec::new(),
    };
    let fences = window::trace_fences(
        &ledger,
        &w.submissions,
        &view,
        &fence1,
        &workers.tally.believed_held,
    );
    Ok(Some(Measurement {
        plan: plan.clone(),
        window: elapsed,
        ledger,
        ledger_after: after,
        workers,
        cpu,
        fences,
        backend: stack.backend(),
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_backlog_splits_into_consecutive_slices_covering_it_once() {
        let b = Backlog {
            first: 7,
            count: 10,
        };
        let s = b.split(3);
        assert_eq!(
            s.iter().map(|x| (x.first, x.count)).collect::<Vec<_>>(),
            [(7, 3), (10, 3), (13, 4)]
        );
        assert_eq!(
            b.split(0),
            vec![b],
            "zero workers still get the whole backlog"
        );
    }
}
