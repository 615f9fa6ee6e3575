//! One chaos run's load and faults, as the cell driver's [`Schedule`]: the
//! worker processes (each on the whole backlog, block-shuffled, so they
//! contend and take over each other's payouts) are spawned through
//! [`ChaosSpawner`] with their history files and self-freezes, and the
//! driver's faults are applied at their times over the live cell — signals
//! to worker processes and the lock-server, a lock-server restart on its
//! durable store, the proxy's delay and loss; over replicas, a kill -9 or a
//! SIGSTOP of the replica that leads (found by `/readyz`), a kill -9 of a
//! standby, each killed replica restarted in its place when its fault ends,
//! and a PostgreSQL crash restart. Over containers the same faults are
//! `docker pause`/`unpause`, `docker kill`/`start`, and a `docker kill` of
//! the run's PostgreSQL container. Every fault the driver applies is
//! recorded with its start and end on the history's clock
//! ([`bench_history::mono_ns`]) and the replica it hit. When the schedule is
//! done every process runs again (killed replicas restarted) and the proxy
//! is back to no delay, no loss.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bench_driver::cell::{
    CellError, CellRun, Ended, PoolError, RemoteWorker, Schedule, SpawnRemote,
};
use bench_driver::worker::WorkerEnv;
use bench_driver::worker_process::{HistorySpec, WorkerChild, WorkerMode, WorkerSpec};
use bench_history::mono_ns;
use fencepost_api::latency::LatencySpec;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use serde::{Deserialize, Serialize};
use tokio::time::Instant;

use super::schedule::{FaultKind, PlannedFault, RunSchedule};

/// The block size of the workers' shuffled order.
const SHUFFLE_BLOCK: u64 = 8;

/// A fault as it was applied (or, for freezes, as the worker recorded it).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Applied {
    /// What.
    pub kind: FaultKind,
    /// Started, [`mono_ns`].
    pub from_ns: u64,
    /// Ended, [`mono_ns`] (an instant fault: its start).
    pub to_ns: u64,
    /// The worker process it hit, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
}

/// Starts the chaos worker processes: continuous mode with a history
/// file, a block-shuffled backlog and its self-freezes in their spec;
/// remembers every pid by worker index.
pub struct ChaosSpawner {
    /// The run's directory (logs, history files).
    pub dir: PathBuf,
    /// The run's schedule (the freezes per worker).
    pub schedule: RunSchedule,
    /// Worker index → pid.
    pub pids: Arc<Mutex<HashMap<u64, u32>>>,
    /// The clock the workers' lines are stamped from.
    pub t0: Instant,
}

impl ChaosSpawner {
    /// The history files of every worker spawned so far.
    pub fn history_files(&self) -> Vec<PathBuf> {
        let pids = self.pids.lock().unwrap_or_else(|e| e.into_inner());
        let mut idx: Vec<u64> = pids.keys().copied().collect();
        idx.sort_unstable();
        idx.into_iter().map(|i| self.history_file(i)).collect()
    }

    fn history_file(&self, idx: u64) -> PathBuf {
        self.dir.join(format!("history-w{idx}.jsonl"))
    }
}

impl SpawnRemote for ChaosSpawner {
    fn spawn(
        &self,
        idx: u64,
        env: &WorkerEnv,
        first: u64,
        count: u64,
    ) -> Result<Box<dyn RemoteWorker>, PoolError> {
        let spec = WorkerSpec {
            history: Some(HistorySpec {
                path: self.history_file(idx),
                proc_name: format!("w{idx}"),
            }),
            shuffle_block: Some(SHUFFLE_BLOCK),
            freezes: self.schedule.freezes_of(idx),
            ..WorkerSpec::new(idx, env, WorkerMode::Continuous { first, count })
        };
        let log = self.dir.join(format!("worker-{idx}.log"));
        let child = WorkerChild::spawn(&spec, &log, self.t0).map_err(PoolError::remote)?;
        self.pids
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(idx, child.pid() as u32);
        Ok(Box::new(child))
    }
}

/// A fault of the one lock-server or its proxy: SIGSTOP (or docker pause;
/// `None` if it failed), a restart on its durable store (its failure is the
/// schedule's error, not the driver's), a delay or loss spike.
async fn start_lock_fault(
    f: &PlannedFault,
    run: &mut CellRun<'_>,
) -> Result<Option<Option<String>>, CellError> {
    match f.kind {
        FaultKind::LockServerSigstop => {
            if !run.stack.pause_replica(0).await {
                return Ok(None);
            }
        }
        FaultKind::LockServerRestart => run
            .stack
            .restart_lock()
            .await
            .map_err(CellError::schedule)?,
        FaultKind::DelaySpike => {
            if let Some(c) = run.stack.proxy_control() {
                let d = Duration::from_millis(f.delay_ms.unwrap_or(0));
                c.set_spike(Some(LatencySpec::Fixed(d)));
            }
        }
        _ => {
            if let Some(c) = run.stack.proxy_control() {
                c.set_loss(f.loss.unwrap_or(0.0));
            }
        }
    }
    Ok(Some(None))
}

/// One step of the driver's timeline.
#[derive(Clone, Copy, Debug)]
enum Action {
    /// Fault `i` of the schedule starts.
    Start(usize),
    /// Fault `i` ends.
    End(usize),
}

/// The chaos run's [`Schedule`].
pub struct ChaosDrive {
    /// The faults.
    schedule: RunSchedule,
    /// Worker processes at the start.
    workers: u64,
    /// The window's length.
    duration: Duration,
    /// Shared with the spawner: worker index → pid.
    pids: Arc<Mutex<HashMap<u64, u32>>>,
    /// The schedule's worker slot → the worker index now filling it (a killed one is replaced).
    slots: HashMap<u64, u64>,
    /// The next index for a replacement worker.
    next_idx: u64,
    /// What the driver applied.
    pub applied: Vec<Applied>,
    /// Start times of faults in progress, by schedule index.
    started: HashMap<usize, (u64, Option<String>)>,
    /// The replica each replica fault in progress hit, by schedule index.
    hit: HashMap<usize, usize>,
    /// The PostgreSQL cluster directory, for its restarts.
    pg_dir: Option<PathBuf>,
    /// Asks the replicas which one serves.
    probe: reqwest::Client,
}

/// How long a leader fault waits for a replica to lead (one may be taking over).
const LEADER_WAIT: Duration = Duration::from_secs(5);

impl ChaosDrive {
    /// The drive of `schedule` with `workers` processes for `duration`.
    pub fn new(
        schedule: RunSchedule,
        workers: u64,
        duration: Duration,
        pids: Arc<Mutex<HashMap<u64, u32>>>,
        pg_dir: Option<PathBuf>,
    ) -> Self {
        ChaosDrive {
            hit: HashMap::new(),
            pg_dir,
            probe: reqwest::Client::builder()
                .timeout(Duration::from_millis(200))
                .build()
                .expect("plain-HTTP client builds"),
            schedule,
            workers,
            duration,
            pids,
            slots: (0..workers).map(|i| (i, i)).collect(),
            next_idx: workers,
            applied: Vec::new(),
            started: HashMap::new(),
        }
    }

    fn pid_of(&self, slot: u64) -> Option<(u64, i32)> {
        let idx = *self.slots.get(&slot)?;
        let pid = *self
            .pids
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(&idx)?;
        Some((idx, pid as i32))
    }

    fn signal_worker(&self, slot: u64, signal: Signal) -> Option<String> {
        let (idx, pid) = self.pid_of(slot)?;
        let _ = kill(Pid::from_raw(pid), signal);
        Some(format!("w{idx}"))
    }

    /// The replica that serves now (`/readyz` 200), waiting up to
    /// [`LEADER_WAIT`] for one; `None` if none did.
    async fn leader(&self, run: &CellRun<'_>) -> Option<usize> {
        let urls = run.stack.replica_urls();
        let t = Instant::now();
        while t.elapsed() < LEADER_WAIT {
            for (i, u) in urls.iter().enumerate() {
                let ok = self.probe.get(format!("{u}/readyz")).send().await;
                if ok.is_ok_and(|r| r.status() == 200) {
                    return Some(i);
                }
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        None
    }

    /// Starts fault `i` of the schedule and records it (an instant one as
    /// applied, one with a length as started); a fault that could not be
    /// applied (no leader, no proxy, a service already gone) is not recorded.
    async fn start(
        &mut self,
        i: usize,
        run: &mut CellRun<'_>,
        backlog: bench_driver::cell::Backlog,
    ) -> Result<(), CellError> {
        let f = self.schedule.faults[i].clone();
        let now = mono_ns();
        let applied = match f.kind {
            // The worker freezes itself; its history records when.
            FaultKind::WorkerFreezeInCs
            | FaultKind::WorkerFreezeOutsideCs
            | FaultKind::WorkerFreezeBetweenLegs => None,
            FaultKind::WorkerSigstop | FaultKind::WorkerKill9 => {
                Some(self.start_worker_fault(&f, run, backlog)?)
            }
            FaultKind::LockServerSigstop
            | FaultKind::LockServerRestart
            | FaultKind::DelaySpike
            | FaultKind::LossSpike => start_lock_fault(&f, run).await?,
            FaultKind::LeaderKill9
            | FaultKind::LeaderSigstop
            | FaultKind::LeaderDbCut
            | FaultKind::LeaderDbDelay
            | FaultKind::StandbyKill9 => self.start_replica_fault(i, &f, run).await,
            FaultKind::PostgresRestart => self.restart_postgres(run).await?,
        };
        // Not applied: not recorded.
        let Some(target) = applied else {
            return Ok(());
        };
        if f.for_ms == 0 {
            self.applied.push(Applied {
                kind: f.kind,
                from_ns: now,
                to_ns: mono_ns(),
                target,
            });
        } else {
            self.started.insert(i, (now, target));
        }
        Ok(())
    }

    /// A worker SIGSTOPped, or killed and replaced by a new worker on the
    /// whole backlog; the target is the worker it hit.
    fn start_worker_fault(
        &mut self,
        f: &PlannedFault,
        run: &mut CellRun<'_>,
        backlog: bench_driver::cell::Backlog,
    ) -> Result<Option<String>, CellError> {
        let Some(slot) = f.worker else {
            return Ok(None);
        };
        if f.kind == FaultKind::WorkerSigstop {
            return Ok(self.signal_worker(slot, Signal::SIGSTOP));
        }
        let target = self.signal_worker(slot, Signal::SIGKILL);
        // A new worker takes the slot, on the whole backlog again.
        let idx = self.next_idx;
        self.next_idx += 1;
        run.spawn_workers(backlog, idx..idx + 1)?;
        self.slots.insert(slot, idx);
        Ok(target)
    }

    /// A fault of a replica found when it starts: the leader (killed,
    /// frozen, cut off from or delayed on its database) or a standby
    /// (killed); `None` when no replica led or the fault did not take.
    async fn start_replica_fault(
        &mut self,
        i: usize,
        f: &PlannedFault,
        run: &mut CellRun<'_>,
    ) -> Option<Option<String>> {
        let r = if f.kind == FaultKind::StandbyKill9 {
            let leader = self.leader(run).await;
            let standbys: Vec<usize> = (0..run.stack.replica_urls().len())
                .filter(|r| Some(*r) != leader)
                .collect();
            let pick = f.worker.unwrap_or(0) as usize;
            let &s = standbys.get(pick % standbys.len().max(1))?;
            run.stack.kill_replica(s).await.then_some(s)?
        } else {
            // No replica led for LEADER_WAIT: nothing to hit, not counted.
            let l = self.leader(run).await?;
            let db = run.stack.replica_db(l);
            let done = match f.kind {
                FaultKind::LeaderKill9 => run.stack.kill_replica(l).await,
                FaultKind::LeaderSigstop => run.stack.pause_replica(l).await,
                FaultKind::LeaderDbCut => db.map(|c| c.set_cut(true)).is_some(),
                _ => db
                    .map(|c| {
                        let d = Duration::from_millis(f.delay_ms.unwrap_or(0));
                        c.set_spike(Some(LatencySpec::Fixed(d)))
                    })
                    .is_some(),
            };
            done.then_some(l)?
        };
        self.hit.insert(i, r);
        Some(Some(format!("r{r}")))
    }

    /// PostgreSQL crash-restarted: its container killed and started, or
    /// (with a cluster directory) restarted in immediate mode; `None`
    /// without either.
    async fn restart_postgres(
        &self,
        run: &mut CellRun<'_>,
    ) -> Result<Option<Option<String>>, CellError> {
        if let Some(addr) = run.stack.postgres_container_addr() {
            // docker kill + docker start; done when it accepts again.
            run.stack
                .crash_postgres_container()
                .await
                .map_err(CellError::schedule)?;
            crate::failover::faults::await_postgres(addr)
                .await
                .map_err(CellError::schedule)?;
        } else {
            let Some(dir) = self.pg_dir.clone() else {
                return Ok(None);
            };
            tokio::task::spawn_blocking(move || {
                crate::failover::faults::restart_postgres(&dir, "immediate")
            })
            .await
            .map_err(CellError::schedule)?
            .map_err(CellError::schedule)?;
        }
        Ok(Some(Some("postgres".into())))
    }

    async fn end(&mut self, i: usize, run: &mut CellRun<'_>) -> Result<(), CellError> {
        let Some((from_ns, target)) = self.started.remove(&i) else {
            return Ok(());
        };
        let hit = self.hit.remove(&i);
        let f = self.schedule.faults[i].clone();
        // Another fault of the same kind on the same target (worker, or
        // replica) still runs: it keeps its hold, and its own end lifts it.
        let still = self.started.keys().any(|&j| {
            let g = &self.schedule.faults[j];
            g.kind == f.kind
                && match hit {
                    Some(r) => self.hit.get(&j) == Some(&r),
                    None => g.worker == f.worker,
                }
        });
        match f.kind {
            _ if still => {}
            FaultKind::WorkerSigstop => {
                if let Some(w) = f.worker {
                    self.signal_worker(w, Signal::SIGCONT);
                }
            }
            FaultKind::LockServerSigstop => {
                run.stack.resume_replica(0).await;
            }
            FaultKind::DelaySpike => {
                if let Some(c) = run.stack.proxy_control() {
                    c.set_spike(None);
                }
            }
            FaultKind::LossSpike => {
                if let Some(c) = run.stack.proxy_control() {
                    c.set_loss(0.0);
                }
            }
            FaultKind::LeaderSigstop => {
                if let Some(r) = hit {
                    run.stack.resume_replica(r).await;
                }
            }
            FaultKind::LeaderDbCut => {
                if let Some(c) = hit.and_then(|r| run.stack.replica_db(r)) {
                    c.set_cut(false);
                }
            }
            FaultKind::LeaderDbDelay => {
                if let Some(c) = hit.and_then(|r| run.stack.replica_db(r)) {
                    c.set_spike(None);
                }
            }
            FaultKind::LeaderKill9 | FaultKind::StandbyKill9 => {
                if let Some(r) = hit {
                    // A replica starts only once it reaches its database:
                    // a cut or delay of that database ends here, or the
                    // restart would wait on a fault whose end waits on it.
                    self.end_db_faults_of(r, run);
                    run.stack
                        .restart_replica(r)
                        .await
                        .map_err(CellError::schedule)?;
                }
            }
            _ => {}
        }
        self.applied.push(Applied {
            kind: f.kind,
            from_ns,
            to_ns: mono_ns(),
            target,
        });
        Ok(())
    }

    /// Ends, now, every database cut or delay in progress on replica `r`
    /// (recorded as ending now; their own ends then find nothing to do).
    fn end_db_faults_of(&mut self, r: usize, run: &mut CellRun<'_>) {
        let db: Vec<usize> = self
            .hit
            .iter()
            .filter(|&(j, &hit)| {
                hit == r
                    && matches!(
                        self.schedule.faults[*j].kind,
                        FaultKind::LeaderDbCut | FaultKind::LeaderDbDelay
                    )
            })
            .map(|(j, _)| *j)
            .collect();
        if db.is_empty() {
            return;
        }
        if let Some(c) = run.stack.replica_db(r) {
            c.set_cut(false);
            c.set_spike(None);
        }
        for j in db {
            self.hit.remove(&j);
            if let Some((from_ns, target)) = self.started.remove(&j) {
                self.applied.push(Applied {
                    kind: self.schedule.faults[j].kind,
                    from_ns,
                    to_ns: mono_ns(),
                    target,
                });
            }
        }
    }

    /// Every process running again, the proxy clean (also after an error).
    async fn heal(&mut self, run: &mut CellRun<'_>) -> Result<(), CellError> {
        let pending: Vec<usize> = self.started.keys().copied().collect();
        let mut failed = Ok(());
        for i in pending {
            if let Err(e) = self.end(i, run).await {
                failed = Err(e);
            }
        }
        // The workers that fill a slot now: a killed one's pid may be reused.
        let slots: Vec<u64> = self.slots.keys().copied().collect();
        for slot in slots {
            if let Some((_, pid)) = self.pid_of(slot) {
                let _ = kill(Pid::from_raw(pid), Signal::SIGCONT);
            }
        }
        if let Some(c) = run.stack.proxy_control() {
            c.set_spike(None);
            c.set_loss(0.0);
        }
        for r in 0..run.stack.replica_urls().len() {
            // SIGCONT of each process (a dead one's is refused), or docker
            // unpause of each container still paused.
            run.stack.resume_replica(r).await;
            if let Some(c) = run.stack.replica_db(r) {
                c.set_cut(false);
                c.set_spike(None);
            }
        }
        failed
    }

    async fn apply_all(
        &mut self,
        run: &mut CellRun<'_>,
        backlog: bench_driver::cell::Backlog,
    ) -> Result<Ended, CellError> {
        let opened = Instant::now();
        let mut timeline: Vec<(u64, Action)> = Vec::new();
        for (i, f) in self.schedule.faults.iter().enumerate() {
            if f.kind.is_freeze() {
                continue;
            }
            timeline.push((f.at_ms, Action::Start(i)));
            if f.for_ms > 0 {
                timeline.push((f.at_ms + f.for_ms, Action::End(i)));
            }
        }
        // Ends before starts at the same instant; then in schedule order.
        timeline.sort_by_key(|(t, a)| (*t, matches!(a, Action::Start(_))));
        for (t_ms, action) in timeline {
            let due = opened + Duration::from_millis(t_ms);
            if run
                .run_for(due.saturating_duration_since(Instant::now()))
                .await
                == Ended::Interrupted
            {
                return Ok(Ended::Interrupted);
            }
            match action {
                Action::Start(i) => self.start(i, run, backlog).await?,
                Action::End(i) => self.end(i, run).await?,
            }
        }
        let rest = (opened + self.duration).saturating_duration_since(Instant::now());
        Ok(run.run_for(rest).await)
    }
}

impl Schedule for ChaosDrive {
    async fn drive(&mut self, run: &mut CellRun<'_>) -> Result<Ended, CellError> {
        let backlog = run.seed_backlog(run.plan.payouts).await?;
        // Each worker gets the whole backlog (a slice of one): they contend.
        for idx in 0..self.workers {
            run.spawn_workers(backlog, idx..idx + 1)?;
        }
        run.open_window().await?;
        let ended = self.apply_all(run, backlog).await;
        let healed = self.heal(run).await;
        let ended = ended?;
        healed.map(|()| ended)
    }
}
