//! A cell's workers: `spawn → stop → join(grace)`, the same for in-process
//! SDK workers (tokio tasks sharing one [`Tally`]) and for workers that run
//! elsewhere — the experiments' worker *processes* — behind [`RemoteWorker`].
//! Whatever a member measured comes back in a [`WorkerReport`] and is summed
//! into the pool's [`PoolReport`]: client-side counts, the SDK's heartbeat
//! counters ([`HeartbeatCounts`]), the merged histograms (raw and corrected
//! RTT, tick lag, rail latency, heartbeat gaps), renewals, the beliefs of trigger 4. A pool
//! can be spawned and joined several times (the pause experiment does once
//! per round); the report covers all of it. [`Pool::reset_measurements`] is
//! the end of a warm-up: every member's figures restart from zero.

use std::error::Error;
use std::sync::Arc;
use std::time::Duration;

use bench_core::error::Chain;
use fencepost_sdk::{ClientStats, MarginSummary};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::backend::HeartbeatStats;
use crate::worker::{
    BoxFuture, BuildError, RunWorker, Tally, TallySnapshot, WorkQueue, WorkerEnv, build_worker,
    sdk_client,
};
use bench_core::hist::{self, Histograms};
use fencepost_sdk::{Histogram, LockClient, Session};

/// The SDK's heartbeat counters of one client or a sum of them (C5
/// `lock.heartbeat.outcomes`, ticks, `lock.session.lost` by reason); what a
/// worker process reports over its pipe.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeartbeatCounts {
    /// L2 exchanges sent (renewals are counted apart, `renew_*`).
    pub attempts: u64,
    /// Of those, answered (any status).
    pub replies: u64,
    /// Of those, given up at their timeout (each a censored RTT sample).
    pub timeouts: u64,
    /// Of those, failed in transport (no sample).
    pub errors: u64,
    /// Scheduled heartbeat ticks that came due.
    pub ticks: u64,
    /// Ticks that sent no L2 of their own (served late, muted, or session lost).
    pub ticks_missed: u64,
    /// Sessions lost to a 410 (`reason="expired"`).
    pub sessions_lost_expired: u64,
    /// Sessions lost to a 404 (`reason="unknown"`).
    pub sessions_lost_unknown: u64,
    /// Sessions lost to the client deadline (`reason="deadline"`).
    pub sessions_lost_deadline: u64,
    /// Heartbeat gaps longer than their window: one per session lost at its
    /// deadline (the SDK's `hb_gaps_over_window`).
    #[serde(default)]
    pub gaps_over_window: u64,
    /// L5 renewals sent (every outcome; the granted ones are the report's `renewals`).
    #[serde(default)]
    pub renew_attempts: u64,
    /// Of those, refused with `LOCK_LOST`.
    #[serde(default)]
    pub renew_refusals: u64,
    /// Of those, given up at their timeout (censored renewal RTT samples).
    #[serde(default)]
    pub renew_timeouts: u64,
    /// Of those, ended any other way (transport, another error, not applied).
    #[serde(default)]
    pub renew_errors: u64,
}

impl From<ClientStats> for HeartbeatCounts {
    fn from(s: ClientStats) -> Self {
        HeartbeatCounts {
            attempts: s.hb_attempts,
            replies: s.hb_replies,
            timeouts: s.hb_timeouts,
            errors: s.hb_errors,
            ticks: s.hb_ticks,
            ticks_missed: s.hb_ticks_missed,
            sessions_lost_expired: s.sessions_lost_expired,
            sessions_lost_unknown: s.sessions_lost_unknown,
            sessions_lost_deadline: s.sessions_lost_deadline,
            gaps_over_window: s.hb_gaps_over_window,
            renew_attempts: s.renew_attempts,
            renew_refusals: s.renew_refusals,
            renew_timeouts: s.renew_timeouts,
            renew_errors: s.renew_errors,
        }
    }
}

impl HeartbeatCounts {
    /// Sessions lost, every reason.
    pub fn sessions_lost(&self) -> u64 {
        self.sessions_lost_expired + self.sessions_lost_unknown + self.sessions_lost_deadline
    }

    /// Adds `o` into `self`.
    pub fn add(&mut self, o: &HeartbeatCounts) {
        self.attempts += o.attempts;
        self.replies += o.replies;
        self.timeouts += o.timeouts;
        self.errors += o.errors;
        self.ticks += o.ticks;
        self.ticks_missed += o.ticks_missed;
        self.sessions_lost_expired += o.sessions_lost_expired;
        self.sessions_lost_unknown += o.sessions_lost_unknown;
        self.sessions_lost_deadline += o.sessions_lost_deadline;
        self.gaps_over_window += o.gaps_over_window;
        self.renew_attempts += o.renew_attempts;
        self.renew_refusals += o.renew_refusals;
        self.renew_timeouts += o.renew_timeouts;
        self.renew_errors += o.renew_errors;
    }
}

/// What one worker measured, when it has stopped.
#[derive(Clone, Debug)]
pub struct WorkerReport {
    /// Its client-side counts.
    pub tally: TallySnapshot,
    /// Lease renewals its SDK client was granted.
    pub renewals: u64,
    /// Its SDK client's heartbeat counters.
    pub heartbeat: HeartbeatCounts,
    /// Its histograms, µs.
    pub hists: Histograms,
    /// The margins its SDK applied to lease deadlines (L4, L5) in the window;
    /// empty where a worker process does not report them.
    pub margins: MarginSummary,
    /// CPU seconds its own process used over the window (a worker process;
    /// `None` for an in-process worker, whose CPU is the bench's).
    pub cpu_s: Option<f64>,
}

/// Why a pool could not spawn, reset, stop or join a member.
#[derive(Debug, thiserror::Error)]
pub enum PoolError {
    /// An in-process worker could not be built; [`BuildError`] says what to do.
    #[error(transparent)]
    Build(#[from] BuildError),
    /// A member's histograms could not be merged into the pool's (their
    /// bounds differ: a worker process of another build); rebuild and rerun.
    #[error(transparent)]
    Histograms(Box<dyn Error + Send + Sync>),
    /// Idle sessions ([`Pool::open_idle_sessions`]) could not all be opened:
    /// the lock-server refused or did not answer. Lower `--sessions`, or
    /// look at the lock-server's log (its table, its CPU).
    #[error("{failed} of {asked} idle sessions could not be opened; the first: {first}")]
    IdleSessions {
        /// Sessions asked for.
        asked: u32,
        /// Of those, not opened.
        failed: u32,
        /// The first failure.
        #[source]
        first: Box<dyn Error + Send + Sync>,
    },
    /// A remote worker or its spawner failed: the implementation's own error
    /// (a worker process that died, went silent or could not be started) is
    /// this error's message and causes; what to do is that error's to say.
    #[error(transparent)]
    Remote(Box<dyn Error + Send + Sync>),
}

impl PoolError {
    /// A [`RemoteWorker`]'s or a [`SpawnRemote`]'s own failure.
    pub fn remote(e: impl Into<Box<dyn Error + Send + Sync>>) -> Self {
        PoolError::Remote(e.into())
    }
}

/// A worker that runs outside this process (an `experiments worker` child).
pub trait RemoteWorker: Send + Sync {
    /// The OS process id, for hooks that act on the process (a cgroup, a signal).
    fn pid(&self) -> Option<u32>;
    /// Asks it to stop after the payout in hand.
    fn stop(&mut self) -> BoxFuture<'_, Result<(), PoolError>>;
    /// The warm-up ends: asks it to zero its measurements (SDK, tally, rail
    /// latency, CPU baseline); it applies this when it reads the request.
    fn reset(&mut self) -> BoxFuture<'_, Result<(), PoolError>>;
    /// Waits up to `grace` for its final report.
    fn join(&mut self, grace: Duration) -> BoxFuture<'_, Result<WorkerReport, PoolError>>;

    /// After a failed [`RemoteWorker::join`] (the process died or went
    /// silent): what it reported while it ran — the beliefs of trigger 4 it
    /// streamed — so a killed worker's believed-held submits stay traceable.
    fn salvage(&mut self) -> TallySnapshot {
        TallySnapshot::default()
    }
}

/// Starts remote workers: the experiments' process spawner implements it.
pub trait SpawnRemote: Send + Sync {
    /// Starts worker `idx` with `env` on payouts `first..first + count`.
    fn spawn(
        &self,
        idx: u64,
        env: &WorkerEnv,
        first: u64,
        count: u64,
    ) -> Result<Box<dyn RemoteWorker>, PoolError>;
}

/// Everything the members of a pool measured.
#[derive(Clone, Debug, Default)]
pub struct PoolReport {
    /// Client-side counts, summed over members.
    pub tally: TallySnapshot,
    /// Renewals, summed over members.
    pub renewals: u64,
    /// The SDK heartbeat counters, summed over members.
    pub heartbeat: HeartbeatCounts,
    /// The members' histograms, merged (µs).
    pub hists: Histograms,
    /// The margins the members' SDKs applied to lease deadlines, merged.
    pub margins: MarginSummary,
    /// CPU seconds of the members' own processes (0 for in-process members).
    pub cpu_workers_s: f64,
    /// Members that joined.
    pub members: u32,
    /// Members that did not stop within their grace (aborted or abandoned).
    pub late: u32,
}

impl PoolReport {
    /// Adds one member's report.
    fn add(&mut self, r: &WorkerReport) -> Result<(), PoolError> {
        self.add_figures(r)?;
        self.members += 1;
        Ok(())
    }

    /// Adds what `r` measured, without counting a member (the idle sessions' client).
    fn add_figures(&mut self, r: &WorkerReport) -> Result<(), PoolError> {
        self.tally.add(&r.tally);
        self.renewals += r.renewals;
        self.heartbeat.add(&r.heartbeat);
        self.hists
            .add(&r.hists)
            .map_err(|e| PoolError::Histograms(e.into()))?;
        self.margins = self.margins.merge(&r.margins);
        self.cpu_workers_s += r.cpu_s.unwrap_or(0.0);
        Ok(())
    }
}

/// Idle sessions opened at once at most ([`Pool::open_idle_sessions`]).
pub const IDLE_OPEN_CONCURRENCY: usize = 64;

/// `--sessions N`: N SDK sessions that only heartbeat, beside the payout
/// workers, on one client of their own (one connection pool, one set of
/// histograms). They are real sessions on the wire: each has its own
/// heartbeat task, schedule and deadline; none acquires a lock. They share
/// one client so that file descriptors do not bound them: the client keeps
/// at most [`fencepost_sdk::http::MAX_IDLE_PER_HOST`] idle connections, and
/// opens more only while that many exchanges are in flight at once.
///
/// They are *kept*: a session that is lost (its client deadline passed, or the
/// server answered 410/404) is counted as lost and replaced by a new one
/// ([`IdleKeeper`]), as a worker that loses its session opens another. So
/// the load a cell is labelled with (`idle_sessions`) is the load it ran
/// under for the whole window, not only until the first fault.
struct IdleSessions {
    client: LockClient,
    keeper: IdleKeeper,
}

/// How often the keeper looks for lost idle sessions.
pub const IDLE_KEEP_TICK: Duration = Duration::from_millis(250);

/// The task that keeps the idle sessions open: every [`IDLE_KEEP_TICK`] it
/// replaces each lost session with a new one (L1), at most
/// [`IDLE_OPEN_CONCURRENCY`] opens in flight; an open that fails is counted
/// and retried at the next tick. The lost session is dropped (no L3: the
/// server expires it). Stopping returns the sessions open then.
struct IdleKeeper {
    stop: watch::Sender<bool>,
    task: JoinHandle<Vec<Session>>,
    counts: Arc<KeeperCounts>,
}

/// What the keeper did since the last reset.
#[derive(Default)]
struct KeeperCounts {
    /// Lost sessions replaced by a new one.
    reopened: std::sync::atomic::AtomicU64,
    /// Replacement opens that failed (retried).
    reopen_failed: std::sync::atomic::AtomicU64,
}

impl IdleKeeper {
    fn start(client: LockClient, sessions: Vec<Session>) -> IdleKeeper {
        let (stop, rx) = watch::channel(false);
        let counts = Arc::new(KeeperCounts::default());
        let task = tokio::spawn(keep(client, sessions, counts.clone(), rx));
        IdleKeeper { stop, task, counts }
    }

    /// Stops the keeper (replacement opens in flight are abandoned; a session
    /// one of them opened expires on the server) and returns the sessions.
    async fn stop(self) -> Vec<Session> {
        let _ = self.stop.send(true);
        self.task.await.unwrap_or_default()
    }
}

async fn keep(
    client: LockClient,
    mut sessions: Vec<Session>,
    counts: Arc<KeeperCounts>,
    mut stop: watch::Receiver<bool>,
) -> Vec<Session> {
    use std::sync::atomic::Ordering::Relaxed;
    let mut reopening = vec![false; sessions.len()];
    let mut opens = tokio::task::JoinSet::new();
    let mut generation = 0u64;
    let mut tick = tokio::time::interval(IDLE_KEEP_TICK);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = stop.changed() => break,
            _ = tick.tick() => {
                for (i, s) in sessions.iter().enumerate() {
                    if opens.len() >= IDLE_OPEN_CONCURRENCY {
                        break;
                    }
                    if reopening[i] || s.lost_reason().is_none() {
                        continue;
                    }
                    reopening[i] = true;
                    generation += 1;
                    let (client, owner) = (client.clone(), format!("idle-{i}-r{generation}"));
                    opens.spawn(async move { (i, client.open_session(&owner).await) });
                }
            }
            Some(joined) = opens.join_next(), if !opens.is_empty() => {
                // The open tasks never panic; a cancelled one is only at stop.
                let Ok((i, opened)) = joined else { continue };
                reopening[i] = false;
                match opened {
                    Ok(s) => {
                        // The lost one is dropped: its heartbeat task has ended.
                        drop(std::mem::replace(&mut sessions[i], s));
                        counts.reopened.fetch_add(1, Relaxed);
                    }
                    Err(e) => {
                        counts.reopen_failed.fetch_add(1, Relaxed);
                        tracing::debug!(error = %e, "an idle session could not be reopened; retried");
                    }
                }
            }
        }
    }
    opens.abort_all();
    sessions
}

/// A report of what `client` measured (no tally, no rail).
fn client_report(client: &dyn HeartbeatStats, rail: Histogram<u64>) -> WorkerReport {
    let stats = client.stats();
    WorkerReport {
        tally: TallySnapshot::default(),
        renewals: stats.renewals,
        heartbeat: HeartbeatCounts::from(stats),
        hists: Histograms {
            rtt: client.rtt_histogram(),
            corrected: client.corrected_rtt_histogram(),
            tick_lag: client.tick_lag_histogram(),
            rail,
            gap: client.gap_histogram(),
            renew: client.renew_rtt_histogram(),
            renew_corrected: client.renew_corrected_histogram(),
        },
        margins: client.margin_stats().leases(),
        cpu_s: None,
    }
}

/// The workers of a cell; see the module doc.
pub struct Pool {
    /// Turns true to stop the in-process members (a fresh one per spawn round).
    stop: watch::Sender<bool>,
    /// The in-process members' shared counts, read live for the progress line.
    tally: Arc<Tally>,
    /// In-process members: the worker (its lock client holds its histograms) and its task.
    local: Vec<(Arc<dyn RunWorker>, JoinHandle<()>)>,
    /// Members running elsewhere.
    remote: Vec<Box<dyn RemoteWorker>>,
    /// The idle sessions and the one client they share, once opened.
    idle: Option<IdleSessions>,
    /// Idle sessions asked for and opened (kept open until the join).
    idle_asked: usize,
    /// What the members joined so far measured (local counts are added at [`Pool::finish`]).
    done: PoolReport,
}

impl Default for Pool {
    fn default() -> Self {
        Pool::new()
    }
}

impl Pool {
    /// An empty pool.
    pub fn new() -> Self {
        Pool {
            stop: watch::channel(false).0,
            tally: Arc::new(Tally::default()),
            local: Vec::new(),
            remote: Vec::new(),
            idle: None,
            idle_asked: 0,
            done: PoolReport::default(),
        }
    }

    /// The in-process members' counts so far (all rounds).
    pub fn tally(&self) -> &Arc<Tally> {
        &self.tally
    }

    /// Starts in-process worker `idx` on `queue`.
    pub fn spawn_local(
        &mut self,
        idx: u64,
        env: WorkerEnv,
        queue: Arc<WorkQueue>,
    ) -> Result<(), PoolError> {
        let worker = build_worker(idx, env)?;
        let (w, t, s) = (worker.clone(), self.tally.clone(), self.stop.subscribe());
        let task = tokio::spawn(async move { w.run(queue, t, s).await });
        self.local.push((worker, task));
        Ok(())
    }

    /// Adds a member that runs elsewhere.
    pub fn add_remote(&mut self, worker: Box<dyn RemoteWorker>) {
        self.remote.push(worker);
    }

    /// Members currently running.
    pub fn len(&self) -> usize {
        self.local.len() + self.remote.len()
    }

    /// True when no member is running.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Opens `n` idle sessions on the services of `env` (see
    /// [`IdleSessions`]), their opens spread evenly over `spread` (one
    /// heartbeat period: their heartbeats then fall evenly over the period
    /// instead of in one burst), at most [`IDLE_OPEN_CONCURRENCY`] at a
    /// time. Their client is seeded `seed + u32::MAX + 1` (no worker's).
    /// Fails, after closing the ones that opened, if any could not be opened.
    pub async fn open_idle_sessions(
        &mut self,
        env: &WorkerEnv,
        n: u32,
        spread: Duration,
    ) -> Result<(), PoolError> {
        if n == 0 {
            return Ok(());
        }
        let client = sdk_client(env, u64::from(u32::MAX) + 1)?;
        let gate = Arc::new(tokio::sync::Semaphore::new(IDLE_OPEN_CONCURRENCY));
        let start = tokio::time::Instant::now();
        let mut tasks = tokio::task::JoinSet::new();
        for i in 0..n {
            let (client, gate) = (client.clone(), gate.clone());
            let at = start + spread.mul_f64(f64::from(i) / f64::from(n));
            tasks.spawn(async move {
                tokio::time::sleep_until(at).await;
                let _permit = gate.acquire_owned().await;
                client.open_session(&format!("idle-{i}")).await
            });
        }
        let mut sessions = Vec::with_capacity(n as usize);
        let (mut failed, mut first) = (0u32, None);
        while let Some(joined) = tasks.join_next().await {
            match joined {
                Ok(Ok(s)) => sessions.push(s),
                Ok(Err(e)) => {
                    failed += 1;
                    first.get_or_insert_with(|| Box::new(e) as Box<dyn Error + Send + Sync>);
                }
                Err(e) => {
                    failed += 1;
                    first.get_or_insert_with(|| Box::new(e) as Box<dyn Error + Send + Sync>);
                }
            }
        }
        if let Some(first) = first {
            close_all(sessions).await;
            return Err(PoolError::IdleSessions {
                asked: n,
                failed,
                first,
            });
        }
        tracing::info!(sessions = n, ?spread, "idle sessions open");
        self.idle_asked = sessions.len();
        let keeper = IdleKeeper::start(client.clone(), sessions);
        self.idle = Some(IdleSessions { client, keeper });
        Ok(())
    }

    /// Idle sessions the cell keeps open (asked for and opened; a lost one is
    /// replaced, see [`IdleSessions`]).
    pub fn idle_sessions(&self) -> usize {
        self.idle_asked
    }

    /// Lost idle sessions replaced by a new one since the window opened.
    pub fn idle_reopened(&self) -> u64 {
        self.idle.as_ref().map_or(0, |i| {
            i.keeper
                .counts
                .reopened
                .load(std::sync::atomic::Ordering::Relaxed)
        })
    }

    /// The corrected heartbeat RTT histogram of every in-process member and
    /// the idle sessions, merged now (µs); `None` when a member runs
    /// elsewhere (a worker process reports only when it joins). What the
    /// sequential stop counts and the time blocks are cut from.
    pub fn corrected_now(&self) -> Option<Histogram<u64>> {
        if !self.remote.is_empty() {
            return None;
        }
        let mut h = hist::new_histogram();
        let clients = self
            .local
            .iter()
            .map(|(w, _)| w.client())
            .chain(self.idle.iter().map(|i| &i.client as &dyn HeartbeatStats));
        for c in clients {
            // Every client's histogram has the bench's bounds.
            let _ = h.add(c.corrected_rtt_histogram());
        }
        Some(h)
    }

    /// The warm-up ends: every running member's figures restart from zero
    /// (SDK histograms and counters, rail latency, the shared tally's counts,
    /// worker processes' CPU baseline). Beliefs (trigger 4) are kept, and
    /// members that already joined are dropped from the report.
    pub async fn reset_measurements(&mut self) {
        for (worker, _) in &self.local {
            worker.reset_measurements();
        }
        if let Some(idle) = &self.idle {
            idle.client.reset_measurements();
            let c = &idle.keeper.counts;
            c.reopened.store(0, std::sync::atomic::Ordering::Relaxed);
            c.reopen_failed
                .store(0, std::sync::atomic::Ordering::Relaxed);
        }
        self.tally.reset_counts();
        for r in &mut self.remote {
            if let Err(e) = r.reset().await {
                tracing::warn!(error = %Chain(&e), "could not reset a worker process");
            }
        }
        let beliefs = std::mem::take(&mut self.done.tally.believed_held);
        self.done = PoolReport::default();
        self.done.tally.believed_held = beliefs;
    }

    /// Tells every member to stop after the payout in hand.
    pub async fn stop(&mut self) {
        let _ = self.stop.send(true);
        for r in &mut self.remote {
            if let Err(e) = r.stop().await {
                tracing::warn!(error = %Chain(&e), "could not stop a worker process");
            }
        }
    }

    /// Waits, up to `grace` per member, for every running member, and adds
    /// what each measured to the report; a member still running after its
    /// grace is aborted and counted as late. Returns how many were late in
    /// this join. The pool can be spawned again.
    pub async fn join(&mut self, grace: Duration) -> Result<u32, PoolError> {
        let late_before = self.done.late;
        for (worker, mut task) in std::mem::take(&mut self.local) {
            if tokio::time::timeout(grace, &mut task).await.is_err() {
                tracing::warn!("a worker did not stop within {grace:?}; aborted");
                task.abort();
                self.done.late += 1;
            }
            self.done
                .add(&client_report(worker.client(), worker.rail_histogram()))?;
        }
        if let Some(idle) = self.idle.take() {
            // Measured up to now, then closed (L3, which the figures do not
            // count), at most `grace` for all of them.
            let failed = idle
                .keeper
                .counts
                .reopen_failed
                .load(std::sync::atomic::Ordering::Relaxed);
            if failed > 0 {
                tracing::warn!(failed, "idle session reopens failed (each retried)");
            }
            self.done
                .add_figures(&client_report(&idle.client, hist::new_histogram()))?;
            let sessions = idle.keeper.stop().await;
            if tokio::time::timeout(grace, close_all(sessions))
                .await
                .is_err()
            {
                tracing::warn!("the idle sessions were not all closed within {grace:?}");
            }
        }
        for mut r in std::mem::take(&mut self.remote) {
            match r.join(grace).await {
                Ok(report) => self.done.add(&report)?,
                Err(e) => {
                    tracing::warn!(error = %Chain(&e), "a worker process did not report");
                    self.done.late += 1;
                    // Its counts are lost (it is late), but not its beliefs.
                    self.done.tally.add(&r.salvage());
                }
            }
        }
        // The next spawn round gets a fresh stop signal.
        self.stop = watch::channel(false).0;
        Ok(self.done.late - late_before)
    }

    /// Stops and joins whatever still runs, then returns the report of every
    /// member the pool ever had.
    pub async fn finish(mut self, grace: Duration) -> Result<PoolReport, PoolError> {
        self.stop().await;
        self.join(grace).await?;
        let mut report = self.done;
        let local = self.tally.snapshot();
        // Remote tallies are already in; the shared local one is added once.
        report.tally.add(&local);
        Ok(report)
    }
}

/// Closes `sessions` (L3), [`IDLE_OPEN_CONCURRENCY`] at a time.
async fn close_all(sessions: Vec<Session>) {
    let gate = Arc::new(tokio::sync::Semaphore::new(IDLE_OPEN_CONCURRENCY));
    let mut tasks = tokio::task::JoinSet::new();
    for s in sessions {
        let gate = gate.clone();
        tasks.spawn(async move {
            let _permit = gate.acquire_owned().await;
            s.close().await;
        });
    }
    while tasks.join_next().await.is_some() {}
}
