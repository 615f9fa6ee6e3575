//! Group commit: the writes of concurrent requests go to the durable store
//! in one transaction, so one fsync makes many replies durable.
//!
//! A request's [`LockStore::commit`] (its *unit*: the writes that must land
//! together) joins a FIFO queue. If a transaction slot is free (SQLite has
//! one, PostgreSQL [`POSTGRES_IN_FLIGHT`]), a drain task is started at once
//! and commits what is queued — a lone request waits for no timer. While
//! every slot is busy, later units queue; when a transaction ends, its drain
//! task takes everything queued (up to [`MAX_BATCH_WRITES`] writes, always at
//! least one unit) into the next one. So the batch window is exactly the
//! duration of a commit in flight (one fsync, ~0.1–10 ms here), and batches
//! grow with the load by themselves. Every unit is answered only after its
//! transaction committed.
//!
//! **A failed batch poisons nobody.** If a transaction of several units fails,
//! nothing of it was persisted (the backend rolls it back); each unit is then
//! retried alone, in queue order, and answered with its own outcome. A unit
//! that fails alone too is answered with its error (the service replies
//! `503` and changes nothing in memory); the others succeed as if they had
//! never been batched. When the store itself is down, every unit fails twice
//! (in the batch, then alone) — the price of not letting one bad write fail
//! its neighbours.
//!
//! **Cancel safety.** The drain task runs on its own: a caller that stops
//! waiting (its client went away) does not stop its unit's transaction, and
//! the lock service applies in memory what the store committed (see
//! [`crate::service`]).

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

use async_trait::async_trait;
use fencepost_api::buckets::server_bounds;
use prometheus_client::metrics::histogram::Histogram;
use tokio::sync::oneshot;

use super::error::StoreError;
use super::lock_store::LockStore;
use super::model::{CommitStats, Committed, Fence, LeaderBid, LeaderRow, Snapshot, Write};

/// The most writes one batch takes from the queue (a single unit may be
/// larger, e.g. a sweep; it is then committed alone).
pub const MAX_BATCH_WRITES: usize = 512;

/// Transactions a PostgreSQL store runs at once: one. Measured with `bench
/// peer --ops grant --concurrency 16 --stores postgres` (3 s windows,
/// interleaved, one 2-core machine): 1 in flight 10,376 and 10,847 grants/s;
/// 2 in flight 7,126 and 6,891; 4 in flight 4,409 and 5,150 (etcd 4,590–4,716/s
/// beside them). More transactions at once mean smaller batches and more
/// backends competing for the cores (with the leader fence switched off, 4 in
/// flight was still slower than 1: 4,341 and 3,730 vs 7,638), and every
/// leader transaction key-share-locks the one leader row, so concurrent ones
/// make PostgreSQL build MultiXacts (23 member pages in one window at 4,
/// none at 1). One transaction at a time is pipelined into one round trip
/// (see [`super::postgres`]); the batch grows with the load instead.
pub const POSTGRES_IN_FLIGHT: usize = 1;

/// A [`LockStore`] that merges concurrent commits into one transaction of
/// the store behind it, with at most `in_flight` transactions at once. Reads
/// go straight through.
pub struct GroupCommit {
    /// The store that runs each transaction.
    inner: Arc<dyn LockStore>,
    /// The queue and the drain task's flag, shared with the drain task.
    shared: Arc<Shared>,
}

/// What callers and the drain task share.
struct Shared {
    /// Units waiting for a transaction, and whether a drain task is running.
    queue: Mutex<Queue>,
    /// Counters for [`CommitStats`].
    transactions: AtomicU64,
    units: AtomicU64,
    retried_alone: AtomicU64,
    largest_batch: AtomicU64,
    /// Each transaction's duration, seconds (`lock_store_commit_duration_seconds`).
    commit_duration: Histogram,
}

impl Default for Shared {
    fn default() -> Self {
        Shared {
            queue: Mutex::default(),
            transactions: AtomicU64::default(),
            units: AtomicU64::default(),
            retried_alone: AtomicU64::default(),
            largest_batch: AtomicU64::default(),
            commit_duration: Histogram::new(server_bounds()),
        }
    }
}

#[derive(Default)]
struct Queue {
    /// Units in arrival order.
    waiting: VecDeque<Unit>,
    /// Drain tasks running (each commits one transaction at a time).
    draining: usize,
    /// At most this many drain tasks.
    in_flight: usize,
}

/// One caller's commit and where its answer goes.
struct Unit {
    writes: Vec<Write>,
    reply: oneshot::Sender<Result<Vec<Committed>, StoreError>>,
}

impl GroupCommit {
    /// Batches the commits of `inner`, one transaction at a time (SQLite:
    /// one connection, one writer).
    pub fn new(inner: Arc<dyn LockStore>) -> Self {
        Self::with_in_flight(inner, 1)
    }

    /// Batches the commits of `inner` with up to `in_flight` transactions
    /// at once (PostgreSQL: one per pooled connection used for writes). A
    /// commit that finds a transaction slot free starts at once; batches form
    /// when every slot is busy.
    pub fn with_in_flight(inner: Arc<dyn LockStore>, in_flight: usize) -> Self {
        let shared = Shared::default();
        shared.lock().in_flight = in_flight.max(1);
        GroupCommit {
            inner,
            shared: Arc::new(shared),
        }
    }

    /// Units queued and not yet taken into a transaction (tests, diagnostics).
    pub fn queued(&self) -> usize {
        self.shared.lock().waiting.len()
    }
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Takes the next batch off the queue; when the queue is empty, the drain
    /// task is done (counted out under the same lock) and `None`.
    fn next_batch(&self) -> Option<Vec<Unit>> {
        let mut q = self.lock();
        let mut batch = Vec::new();
        let mut writes = 0;
        while let Some(unit) = q.waiting.front() {
            if !batch.is_empty() && writes + unit.writes.len() > MAX_BATCH_WRITES {
                break;
            }
            writes += unit.writes.len();
            batch.extend(q.waiting.pop_front());
        }
        if batch.is_empty() {
            q.draining -= 1;
            return None;
        }
        Some(batch)
    }

    fn bump(counter: &AtomicU64, n: usize) {
        counter.fetch_add(n as u64, Ordering::Relaxed);
    }

    /// One transaction of `writes` on `store`, counted and timed.
    async fn transaction(
        &self,
        store: &dyn LockStore,
        writes: &[Write],
    ) -> Result<Vec<Committed>, StoreError> {
        Self::bump(&self.transactions, 1);
        // A latency figure for `lock_store_commit_duration_seconds`, no expiry
        // decision: the store's real elapsed time, whatever clock the service's
        // expiry runs on (the committer holds no Clock).
        let started = Instant::now();
        let outcome = store.commit(writes).await;
        self.commit_duration
            .observe(started.elapsed().as_secs_f64());
        outcome
    }
}

/// Commits batches until the queue is empty. Owns a handle on the store only
/// while it runs: it lets go of it before answering the last batch, so a
/// caller that drops the store after its last answer closes it at once.
async fn drain(inner: Arc<dyn LockStore>, shared: Arc<Shared>) {
    let mut inner = Some(inner);
    let mut batch = shared.next_batch();
    while let Some(units) = batch {
        let store = inner.as_ref().expect("held until the last batch").clone();
        let outcomes = commit_units(&*store, &shared, &units).await;
        drop(store);
        batch = shared.next_batch();
        if batch.is_none() {
            inner = None;
        }
        Shared::bump(&shared.units, units.len());
        for (unit, outcome) in units.into_iter().zip(outcomes) {
            // A caller that stopped waiting dropped its receiver; its write
            // is committed all the same, and the service applies it.
            let _ = unit.reply.send(outcome);
        }
    }
    drop(inner);
}

/// One transaction for every unit; if it fails, each unit alone.
async fn commit_units(
    store: &dyn LockStore,
    shared: &Shared,
    units: &[Unit],
) -> Vec<Result<Vec<Committed>, StoreError>> {
    shared
        .largest_batch
        .fetch_max(units.len() as u64, Ordering::Relaxed);
    if let [unit] = units {
        return vec![shared.transaction(store, &unit.writes).await];
    }
    let all: Vec<Write> = units.iter().flat_map(|u| u.writes.clone()).collect();
    match shared.transaction(store, &all).await {
        Ok(mut committed) => {
            let mut out = Vec::with_capacity(units.len());
            for unit in units {
                let rest = committed.split_off(unit.writes.len());
                out.push(Ok(std::mem::replace(&mut committed, rest)));
            }
            out
        }
        Err(e) => {
            tracing::warn!(units = units.len(), error = %e,
                "a batched store commit failed (nothing of it was written); retrying each request's write alone");
            let mut out = Vec::with_capacity(units.len());
            for unit in units {
                Shared::bump(&shared.retried_alone, 1);
                out.push(shared.transaction(store, &unit.writes).await);
            }
            out
        }
    }
}

#[async_trait]
impl LockStore for GroupCommit {
    fn kind(&self) -> &'static str {
        self.inner.kind()
    }

    fn path(&self) -> Option<PathBuf> {
        self.inner.path()
    }

    fn durable(&self) -> bool {
        self.inner.durable()
    }

    async fn load(&self) -> Result<Snapshot, StoreError> {
        self.inner.load().await
    }

    async fn load_live(&self) -> Result<Snapshot, StoreError> {
        self.inner.load_live().await
    }

    async fn last_token(&self, key: &str) -> Result<Option<u64>, StoreError> {
        self.inner.last_token(key).await
    }

    /// Queues `writes` as one unit and waits until a transaction holding
    /// them committed (or failed: then nothing of them is persisted).
    async fn commit(&self, writes: &[Write]) -> Result<Vec<Committed>, StoreError> {
        if writes.is_empty() {
            return Ok(Vec::new());
        }
        let (reply, answer) = oneshot::channel();
        let start = {
            let mut q = self.shared.lock();
            q.waiting.push_back(Unit {
                writes: writes.to_vec(),
                reply,
            });
            let start = q.draining < q.in_flight;
            if start {
                q.draining += 1;
            }
            start
        };
        if start {
            tokio::spawn(drain(self.inner.clone(), self.shared.clone()));
        }
        answer.await.unwrap_or(Err(StoreError::CommitterGone))
    }

    fn commit_stats(&self) -> Option<CommitStats> {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        Some(CommitStats {
            transactions: get(&self.shared.transactions),
            units: get(&self.shared.units),
            retried_alone: get(&self.shared.retried_alone),
            largest_batch: get(&self.shared.largest_batch),
        })
    }

    fn commit_duration(&self) -> Option<Histogram> {
        Some(self.shared.commit_duration.clone())
    }

    async fn ping(&self) -> Result<(), StoreError> {
        self.inner.ping().await
    }

    // Leadership is the inner store's: a replicated store behind the group
    // committer must still say so, fence its batches and take the leader row
    // (the defaults would make it single-node, unfenced).

    fn replicated(&self) -> bool {
        self.inner.replicated()
    }

    fn set_fence(&self, fence: Fence) {
        self.inner.set_fence(fence)
    }

    async fn claim_leadership(&self, bid: &LeaderBid) -> Result<LeaderRow, StoreError> {
        self.inner.claim_leadership(bid).await
    }

    async fn resign_leadership(&self, node: &str, epoch: u64) -> Result<(), StoreError> {
        self.inner.resign_leadership(node, epoch).await
    }
}
