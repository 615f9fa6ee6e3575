//! Running one cell ([`measure`]): the load a [`Schedule`] drives over a
//! [`CellRun`], the measured window it opens and closes, and the
//! [`Measurement`] that comes out (see the `cell` module's doc for the steps).

use std::error::Error;
use std::future::Future;
use std::ops::Range;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use bench_core::backend::BackendKind;
use bench_core::blocks::{self, BLOCK_S, Blocks};
use bench_core::cpu::{self, CpuMark};
use fencepost_api::ledger_check::check_ledger;
use fencepost_api::rail::UnexpectedBulkId;
use fencepost_sdk::Histogram;
use fencepost_sdk::PrometheusMetrics;
use fencepost_sdk::prometheus_client::registry::Registry;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::cell::faults::FaultNotApplied;
use crate::cell::measurement::{Measurement, ledger_delta};
use crate::cell::plan::{CellPlan, StoppedBy};
use crate::cell::pool::{Pool, PoolError, SpawnRemote};
use crate::cell::stack::Stack;
use crate::cell::window::{self, OpenWindow};
use crate::rail::RailError;
use crate::telemetry::{SCRAPE_WAIT, Telemetry};
use crate::worker::{ClaimHook, StepHook, WorkQueue};

/// Why a cell could not be measured ([`measure`], [`CellRun`], [`Schedule::drive`]).
#[derive(Debug, thiserror::Error)]
pub enum CellError {
    /// The rail-stub failed an R6 or R7 call; [`RailError`] says what to do.
    #[error(transparent)]
    Rail(#[from] RailError),
    /// R7 numbered the backlog in a form the driver does not know (a
    /// rail-stub of another version): rebuild the services.
    #[error(transparent)]
    Backlog(#[from] UnexpectedBulkId),
    /// A worker could not be spawned or joined; [`PoolError`] says what to do.
    #[error(transparent)]
    Pool(#[from] PoolError),
    /// The rail-stub's log could not be read back for the fence-1 trace:
    /// check the stack's directory (the OS error names the problem).
    #[error(transparent)]
    RailLog(std::io::Error),
    /// The schedule returned without opening the measured window: a bug in
    /// the schedule, which must call [`CellRun::open_window`].
    #[error("cell {cell}: the schedule never opened the measured window")]
    NoWindow {
        /// The cell's id.
        cell: String,
    },
    /// A fault schedule of the cell fell due and was never applied.
    #[error(transparent)]
    FaultNotApplied(#[from] FaultNotApplied),
    /// A schedule's own failure (an experiment's rounds, faults or worker
    /// processes): that error is this one's message and causes, and says
    /// what to do.
    #[error(transparent)]
    Schedule(Box<dyn Error + Send + Sync>),
}

impl CellError {
    /// A [`Schedule`]'s own failure.
    pub fn schedule(e: impl Into<Box<dyn Error + Send + Sync>>) -> Self {
        CellError::Schedule(e.into())
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
    /// Turns true when the cell must stop early (Ctrl-C); the cell is then
    /// discarded, unless [`Hooks::keep_partial`] keeps what its window measured.
    pub interrupt: Option<watch::Receiver<bool>>,
    /// With `interrupt`: an interruption after the measured window opened
    /// closes the window early and keeps the cell as a partial one
    /// ([`StoppedBy::Interrupted`]) instead of discarding it. One during the
    /// warm-up still discards it: nothing was measured.
    pub keep_partial: bool,
    /// `--metrics-listen`: the cell's in-process clients share one set of
    /// Prometheus instruments, served there with the cell's services as targets.
    pub telemetry: Option<Telemetry>,
}

/// How the load of a window ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ended {
    /// It ran its course: the measurement counts.
    Completed,
    /// Interrupted: the partial cell is discarded, or kept as a partial
    /// one with [`Hooks::keep_partial`] once its window is open.
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
    ) -> impl Future<Output = Result<Ended, CellError>> + Send;
}

/// The standard load: seed `plan.payouts`, spawn `plan.workers` workers on
/// them, run `plan.duration` (or until interrupted).
#[derive(Clone, Copy, Debug, Default)]
pub struct Steady;

impl Schedule for Steady {
    async fn drive(&mut self, run: &mut CellRun<'_>) -> Result<Ended, CellError> {
        let backlog = run.seed_backlog(run.plan.payouts).await?;
        run.spawn_workers(backlog, 0..u64::from(run.plan.workers))?;
        run.open_idle_sessions().await?;
        if run.run_for(run.plan.warmup).await == Ended::Interrupted {
            return Ok(Ended::Interrupted);
        }
        run.open_window().await?;
        Ok(run.run_sampled().await)
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
    /// The Prometheus instruments the cell's clients share, once built.
    prometheus: Option<PrometheusMetrics>,
    /// Cumulative corrected histograms of the window, one per time block.
    snapshots: Vec<Histogram<u64>>,
    /// While the sequential stop runs: the samples that end the window.
    sample_target: Option<u64>,
    /// Whether time blocks are cut (false once a member is found that runs
    /// elsewhere: its histogram is read only when it joins).
    blocks_live: bool,
    /// Why the window ended.
    stopped_by: StoppedBy,
}

impl CellRun<'_> {
    /// Seeds `count` payouts under the plan's prefix (R7): with
    /// [`CellPlan::steps`] K, `count × K` ledger payouts, leg j of payout n
    /// being ledger payout `(n − 1)·K + j + 1` ([`crate::worker::leg_number`]).
    pub async fn seed_backlog(&self, count: u64) -> Result<Backlog, CellError> {
        let prefix = &self.plan.payout_prefix;
        let steps = u64::from(self.plan.steps.max(1));
        let created = self
            .stack
            .rail()
            .seed_backlog(count * steps, prefix)
            .await?;
        // R7 numbers a backlog after any earlier one under the same prefix.
        let first = created.first_number(prefix)?;
        if (first - 1) % steps != 0 {
            return Err(CellError::schedule(format!(
                "the backlog under {prefix:?} starts at ledger payout {first}, not at the first leg of a {steps}-step payout; use a fresh payout prefix"
            )));
        }
        Ok(Backlog {
            first: (first - 1) / steps + 1,
            count,
        })
    }

    /// Spawns workers `ids` on `backlog`: in-process ones share one queue,
    /// remote ones each get an equal slice (the last one the remainder).
    pub fn spawn_workers(&mut self, backlog: Backlog, ids: Range<u64>) -> Result<(), CellError> {
        self.started.get_or_insert_with(Instant::now);
        let mut env = self
            .plan
            .worker_env(self.stack, self.hooks.on_claimed.clone());
        env.on_step = self.hooks.on_step.clone();
        env.prometheus = self.prometheus();
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

    /// Opens the plan's idle sessions ([`Sampling::sessions`]) on the stack's
    /// lock service, spread over one idle heartbeat period. Refused on etcd
    /// and with worker processes: the sessions are the SDK's, in this process.
    pub async fn open_idle_sessions(&mut self) -> Result<(), CellError> {
        let n = self.plan.sampling.sessions;
        if n == 0 {
            return Ok(());
        }
        if self.stack.backend() != BackendKind::Fencepost
            || !matches!(self.hooks.spawn, Spawn::InProcess)
        {
            return Err(CellError::schedule(
                "idle sessions (--sessions) are fencepost SDK sessions in the bench process: they need the fencepost backend and in-process workers",
            ));
        }
        self.started.get_or_insert_with(Instant::now);
        let mut env = self.plan.worker_env(self.stack, None);
        env.prometheus = self.prometheus();
        let spread = self.plan.session_heartbeat_period();
        self.pool.open_idle_sessions(&env, n, spread).await?;
        Ok(())
    }

    /// Runs the window under the plan's [`Sampling`]: its duration, then,
    /// with a `min_samples`, until the corrected histogram holds that many
    /// samples or `max_duration` has passed since the opening. Records why
    /// it ended ([`StoppedBy`]).
    pub async fn run_sampled(&mut self) -> Ended {
        let ended = self.run_window(self.plan.duration).await;
        let Some(k) = self.plan.sampling.min_samples else {
            self.stopped_by = StoppedBy::Duration;
            return ended;
        };
        if ended == Ended::Interrupted {
            return ended;
        }
        let max = self
            .plan
            .sampling
            .max_duration
            .unwrap_or(self.plan.duration)
            .max(self.plan.duration);
        let from = self.window.as_ref().map_or_else(Instant::now, |w| w.opened);
        self.sample_target = Some(k);
        let ended = self.run_until(from + max).await;
        self.sample_target = None;
        if ended == Ended::Completed && self.stopped_by != StoppedBy::MinSamples {
            self.stopped_by = StoppedBy::MaxDuration;
        }
        ended
    }

    /// The instruments this cell's clients share when `--metrics-listen` is
    /// on: built for the cell's lease, session TTL and margin at the first
    /// spawn, registered and served with the stack's services as targets.
    fn prometheus(&mut self) -> Option<PrometheusMetrics> {
        let telemetry = self.hooks.telemetry.as_ref()?;
        if self.prometheus.is_none() {
            let p = PrometheusMetrics::new(
                self.plan.lease,
                self.plan.session_ttl,
                &self.plan.margin_policy(),
            );
            let mut registry = Registry::default();
            p.register(&mut registry);
            telemetry.start_cell(registry, self.stack.metrics_targets(&self.plan.id));
            self.prometheus = Some(p);
        }
        self.prometheus.clone()
    }

    /// When the first worker started (now, if none has yet).
    pub fn started(&self) -> Instant {
        self.started.unwrap_or_else(Instant::now)
    }

    /// Opens the measured window (see the module doc); a second call does
    /// nothing. [`measure`] opens it before the load when the warm-up is
    /// zero; a [`Schedule`] with a warm-up opens it when the warm-up ends.
    pub async fn open_window(&mut self) -> Result<(), CellError> {
        if self.window.is_some() {
            return Ok(());
        }
        let rail_log_len = self.stack.rail_log().and_then(|p| window::file_len(&p));
        // The client-side figures restart, then the rail snapshots its ledger
        // when R6 arrives, a moment later: the skew is one request's trip,
        // not the transfer of the whole ledger, which the workers overlap.
        self.pool.reset_measurements().await;
        let opened = Instant::now();
        // The fault schedules count from the opening too, not from after the
        // R6 read (seconds for a large backlog in a debug build): a schedule
        // started late would miss its first freeze in a short window.
        self.stack.start_faults();
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
        tracing::info!(event = "window_opened", cell = %self.plan.id);
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

    /// Lets the workers run until `deadline` (see [`CellRun::run_for`]),
    /// cutting a time block every [`BLOCK_S`] of the open window and, while
    /// the sequential stop runs, ending when the corrected samples reach
    /// its target.
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
            let next_block = self.next_block();
            tokio::select! {
                _ = tokio::time::sleep_until(deadline) => return Ended::Completed,
                _ = interrupted => return Ended::Interrupted,
                _ = sleep_until_opt(next_block) => self.cut_block(),
                _ = tick.tick() => {
                    self.report_live(started);
                    if let Some(k) = self.sample_target
                        && self.pool.corrected_now().is_some_and(|h| h.len() >= k)
                    {
                        self.stopped_by = StoppedBy::MinSamples;
                        return Ended::Completed;
                    }
                }
            }
        }
    }

    /// When the next time block ends, while the window is open and every
    /// member's histogram can be read live.
    fn next_block(&self) -> Option<Instant> {
        let w = self.window.as_ref()?;
        if !self.blocks_live {
            return None;
        }
        let n = self.snapshots.len() as f64 + 1.0;
        Some(w.opened + Duration::from_secs_f64(BLOCK_S * n))
    }

    /// Snapshots the cumulative corrected histogram: a time block ends.
    fn cut_block(&mut self) {
        match self.pool.corrected_now() {
            Some(h) => self.snapshots.push(h),
            None => self.blocks_live = false,
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
/// `None` when the load was interrupted (the partial cell is discarded),
/// except with [`Hooks::keep_partial`] once the window was open: then the
/// measurement of the shortened window, its `stopped_by`
/// [`StoppedBy::Interrupted`].
pub async fn measure(
    stack: &mut Stack,
    plan: &CellPlan,
    schedule: &mut impl Schedule,
    hooks: Hooks<'_>,
) -> Result<Option<Measurement>, CellError> {
    let mut run = CellRun {
        plan,
        stack,
        pool: Pool::new(),
        hooks,
        started: None,
        window: None,
        prometheus: None,
        snapshots: Vec::new(),
        sample_target: None,
        blocks_live: true,
        stopped_by: StoppedBy::Schedule,
    };
    if let Some(t) = run.hooks.telemetry.clone() {
        // The cell's families at 0 in Prometheus before its first heartbeat.
        let _ = run.prometheus();
        if !t.scraped(SCRAPE_WAIT).await {
            tracing::info!(event = "metrics_not_scraped", cell = %plan.id, wait = ?SCRAPE_WAIT);
        }
    }
    if plan.warmup.is_zero() {
        run.open_window().await?;
    }
    let ended = schedule.drive(&mut run).await;
    let CellRun {
        stack,
        pool,
        window: opened,
        hooks,
        snapshots,
        blocks_live,
        stopped_by,
        ..
    } = run;
    let idle_sessions = pool.idle_sessions() as u32;
    let idle_reopened = pool.idle_reopened();
    // Read before the join: the services still run (the stack stops them after).
    let rss_peak_kb = stack.pids().and_then(|(lock, _)| cpu::peak_rss_kb(lock));
    // Faults stop before the join, so a paused server cannot hold a worker up.
    let faults = stack.stop_faults().await;
    let workers = pool.finish(plan.join_grace()).await?;
    if let Some(t) = &hooks.telemetry {
        // One scrape of the final counts, then the services leave discovery.
        let _ = t.scraped(SCRAPE_WAIT).await;
        t.end_cell();
    }
    if workers.late > 0 {
        tracing::warn!(late = workers.late, cell = %plan.id, "workers did not stop in time");
    }
    let stopped_by = match ended? {
        Ended::Completed => stopped_by,
        Ended::Interrupted if hooks.keep_partial && opened.is_some() => StoppedBy::Interrupted,
        Ended::Interrupted => return Ok(None),
    };
    // A fault the row names but the window never had: no row at all.
    let server_pauses = faults?;
    let Some(w) = opened else {
        return Err(CellError::NoWindow {
            cell: plan.id.clone(),
        });
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
        (Some(path), Some(from)) => {
            let log = window::log_since(&path, from).map_err(CellError::RailLog)?;
            window::fence1_events(&log)
        }
        _ => Vec::new(),
    };
    let fences = window::trace_fences(
        &ledger,
        &w.submissions,
        &view,
        &fence1,
        &workers.tally.believed_held,
    );
    // The last block ends at the join: the blocks add up to the final histogram.
    let blocks = blocks_live
        .then(|| {
            let mut cumulative = snapshots;
            cumulative.push(workers.hists.corrected.clone());
            blocks::blocks_of(&cumulative).ok()
        })
        .flatten()
        .map(|blocks| Blocks {
            block_s: BLOCK_S,
            blocks,
        });
    Ok(Some(Measurement {
        plan: plan.clone(),
        blocks,
        stopped_by,
        idle_sessions,
        lock_server_rss_peak_kb: rss_peak_kb,
        idle_reopened,
        server_pauses,
        window: elapsed,
        ledger,
        ledger_after: after,
        workers,
        cpu,
        fences,
        backend: stack.backend(),
        rail_fences: stack.rail_fences(),
    }))
}

/// Sleeps until `at`, forever without one.
async fn sleep_until_opt(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
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

    /// An experiment's failure, with its cause, as it reached the user
    /// before: its own message, then its cause, nothing added.
    #[derive(Debug, thiserror::Error)]
    #[error("round 2")]
    struct RoundFailed(#[source] std::io::Error);

    #[test]
    fn a_schedule_failure_shows_as_its_own_message_and_causes() {
        let e = CellError::schedule(RoundFailed(std::io::Error::other("worker gone")));
        assert_eq!(e.to_string(), "round 2");
        assert_eq!(
            bench_core::error::Chain(&e).to_string(),
            "round 2: worker gone"
        );
        let e = CellError::schedule("the failover schedule runs once");
        assert_eq!(
            bench_core::error::Chain(&e).to_string(),
            "the failover schedule runs once"
        );
    }
}
