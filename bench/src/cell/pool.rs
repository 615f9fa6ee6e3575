//! A cell's workers: `spawn → stop → join(grace)`, the same for in-process
//! SDK workers (tokio tasks sharing one [`Tally`]) and for workers that run
//! elsewhere — the experiments' worker *processes* — behind [`RemoteWorker`].
//! Whatever a member measured comes back in a [`WorkerReport`] and is summed
//! into the pool's [`PoolReport`]: client-side counts, the merged heartbeat
//! RTT histogram, renewals. A pool can be spawned and joined several times
//! (the pause experiment does once per round); the report covers all of it.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use fencepost_sdk::Histogram;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::hist;
use crate::worker::{RunWorker, Tally, TallySnapshot, WorkQueue, WorkerEnv, build_worker};

/// A boxed, sendable future (the object-safe form of an `async fn` in a trait).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// What one worker measured, when it has stopped.
#[derive(Clone, Debug)]
pub struct WorkerReport {
    /// Its client-side counts.
    pub tally: TallySnapshot,
    /// Lease renewals its SDK client was granted.
    pub renewals: u64,
    /// Its heartbeat RTT histogram, µs.
    pub rtt: Histogram<u64>,
}

/// A worker that runs outside this process (an `experiments worker` child).
pub trait RemoteWorker: Send + Sync {
    /// The OS process id, for hooks that act on the process (a cgroup, a signal).
    fn pid(&self) -> Option<u32>;
    /// Asks it to stop after the payout in hand.
    fn stop(&mut self) -> BoxFuture<'_, anyhow::Result<()>>;
    /// Waits up to `grace` for its final report.
    fn join(&mut self, grace: Duration) -> BoxFuture<'_, anyhow::Result<WorkerReport>>;
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
    ) -> anyhow::Result<Box<dyn RemoteWorker>>;
}

/// Everything the members of a pool measured.
#[derive(Clone, Debug)]
pub struct PoolReport {
    /// Client-side counts, summed over members.
    pub tally: TallySnapshot,
    /// Renewals, summed over members.
    pub renewals: u64,
    /// The members' heartbeat RTT histograms, merged (µs).
    pub rtt: Histogram<u64>,
    /// Members that joined.
    pub members: u32,
    /// Members that did not stop within their grace (aborted or abandoned).
    pub late: u32,
}

impl Default for PoolReport {
    fn default() -> Self {
        PoolReport {
            tally: TallySnapshot::default(),
            renewals: 0,
            rtt: hist::new_histogram(),
            members: 0,
            late: 0,
        }
    }
}

impl PoolReport {
    /// Adds one member's report.
    fn add(&mut self, r: &WorkerReport) -> anyhow::Result<()> {
        self.tally.add(&r.tally);
        self.renewals += r.renewals;
        self.rtt.add(&r.rtt)?;
        self.members += 1;
        Ok(())
    }
}

/// The workers of a cell; see the module doc.
pub struct Pool {
    /// Turns true to stop the in-process members (a fresh one per spawn round).
    stop: watch::Sender<bool>,
    /// The in-process members' shared counts, read live for the progress line.
    tally: Arc<Tally>,
    /// In-process members: the worker (its lock client holds its histogram) and its task.
    local: Vec<(Arc<dyn RunWorker>, JoinHandle<()>)>,
    /// Members running elsewhere.
    remote: Vec<Box<dyn RemoteWorker>>,
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
    ) -> anyhow::Result<()> {
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

    /// Tells every member to stop after the payout in hand.
    pub async fn stop(&mut self) {
        let _ = self.stop.send(true);
        for r in &mut self.remote {
            if let Err(e) = r.stop().await {
                tracing::warn!(error = %format!("{e:#}"), "could not stop a worker process");
            }
        }
    }

    /// Waits, up to `grace` per member, for every running member, and adds
    /// what each measured to the report; a member still running after its
    /// grace is aborted and counted as late. Returns how many were late in
    /// this join. The pool can be spawned again.
    pub async fn join(&mut self, grace: Duration) -> anyhow::Result<u32> {
        let late_before = self.done.late;
        for (worker, mut task) in std::mem::take(&mut self.local) {
            if tokio::time::timeout(grace, &mut task).await.is_err() {
                tracing::warn!("a worker did not stop within {grace:?}; aborted");
                task.abort();
                self.done.late += 1;
            }
            let client = worker.client();
            self.done.renewals += client.stats().renewals;
            self.done.rtt.add(client.rtt_histogram())?;
            self.done.members += 1;
        }
        for mut r in std::mem::take(&mut self.remote) {
            match r.join(grace).await {
                Ok(report) => self.done.add(&report)?,
                Err(e) => {
                    tracing::warn!(error = %format!("{e:#}"), "a worker process did not report");
                    self.done.late += 1;
                }
            }
        }
        // The next spawn round gets a fresh stop signal.
        self.stop = watch::channel(false).0;
        Ok(self.done.late - late_before)
    }

    /// Stops and joins whatever still runs, then returns the report of every
    /// member the pool ever had.
    pub async fn finish(mut self, grace: Duration) -> anyhow::Result<PoolReport> {
        self.stop().await;
        self.join(grace).await?;
        let mut report = self.done;
        let local = TallySnapshot::of(&self.tally);
        // Remote tallies are already in; the shared local one is added once.
        report.tally.add(&local);
        Ok(report)
    }
}
