//! A payout worker on the SDK, exactly as the ADR's payout executor works:
//! open session → acquire `payout:<id>` → claim (fence 1) →
//! `ensure_time_for(worst-case rail hop)` → submit (fence 2) → release, and
//! abandon (R4) whenever the lease is insufficient or lost. A submit whose
//! outcome is unknown (the read timed out) keeps the lock until the
//! worst-case hop has passed since it was sent (D4's budget for the step),
//! then goes back on the queue like an abandoned payout. Abandoned payouts
//! go back on the queue, to be retried by a later holder under a higher token
//! (ADR-006 D6). A [`crate::cell::Pool`] runs N of these as tasks; the
//! experiments also run them as OS processes (`experiments worker`), which
//! report a [`TallySnapshot`] of their [`Tally`].
//!
//! The worker is written once, generic over the lock service
//! ([`LockBackend`]): the SDK's `LockClient` (fencepost) or the etcd
//! adapter ([`crate::backend::etcd`]). [`build_worker`] picks the one its
//! [`WorkerEnv`] names.
//!
//! Two things only the worker can record (issue 12): every `(payout_id,
//! token)` it submits under *because* `check_still_held` and D4 passed — the
//! client believed it held the lease — which the cell driver joins with the
//! rail's fence-out events (trigger 4); and the rail submit's latency as the
//! worker saw it (`rail_measured_*`), timeouts censored at their give-up time.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fencepost_api::rail::{RailErrorCode, bulk_payout_id};
use fencepost_sdk::{LockClient, LockClientConfig, LockError, MarginPolicy};
use serde::{Deserialize, Serialize};
use tokio::sync::watch;

use crate::backend::etcd::{EtcdBackend, EtcdConfig};
use crate::backend::{BackendKind, BackendSession, HeartbeatStats, LockBackend};
use crate::cell::BoxFuture;
use crate::hist;
use crate::history::{OpKind, Outcome, Pending, Recorder, mono_ns};
use crate::rail::{RailClient, RailOutcome};
use fencepost_sdk::Histogram;
use tokio::time::Instant;

/// A `(payout_id, token)` a worker submitted under after its client check
/// passed: the lease was, as far as the client could tell, held.
pub type Belief = (String, u64);

/// The payouts still to pay: fresh numbers in order, abandoned ones first.
#[derive(Debug)]
pub struct WorkQueue {
    /// The next fresh payout number (1-based, as R7 numbers them).
    next: AtomicU64,
    /// One past the last payout number.
    end: u64,
    /// Abandoned payouts, retried before fresh ones.
    retry: Mutex<VecDeque<u64>>,
    /// The payout numbers in the order to take them (`None`: `next` itself).
    order: Option<Vec<u64>>,
}

impl WorkQueue {
    /// Payouts numbered `first..first + count`.
    pub fn new(first: u64, count: u64) -> Self {
        WorkQueue {
            next: AtomicU64::new(first),
            end: first + count,
            retry: Mutex::new(VecDeque::new()),
            order: None,
        }
    }

    /// Payouts `first..first + count` in an order shuffled within blocks of
    /// `block` (seeded): workers that each take a whole backlog this way
    /// stay in the same stretch of it, so they contend for the same payouts
    /// and take over each other's abandoned ones, and each leads on some
    /// (the chaos experiment's worker processes).
    pub fn block_shuffled(first: u64, count: u64, block: u64, seed: u64) -> Self {
        use rand::SeedableRng as _;
        use rand::seq::SliceRandom as _;
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
        let mut order: Vec<u64> = (first..first + count).collect();
        for chunk in order.chunks_mut(block.max(1) as usize) {
            chunk.shuffle(&mut rng);
        }
        WorkQueue {
            next: AtomicU64::new(0),
            end: count,
            retry: Mutex::new(VecDeque::new()),
            order: Some(order),
        }
    }

    /// The next payout to work on, or `None` when the backlog is empty.
    pub fn take(&self) -> Option<u64> {
        if let Some(n) = self
            .retry
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .pop_front()
        {
            return Some(n);
        }
        let n = self.next.fetch_add(1, Ordering::Relaxed);
        if n >= self.end {
            return None;
        }
        match &self.order {
            Some(order) => order.get(n as usize).copied(),
            None => Some(n),
        }
    }

    /// Puts an abandoned payout back, to be retried under a higher token.
    pub fn give_back(&self, n: u64) {
        self.retry
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push_back(n);
    }
}

/// What the workers did, counted on the client side. The bench reports paid,
/// fenced and duplicate counts from the rail's ledger, never from here; these
/// are the events only the client can see.
#[derive(Debug, Default)]
pub struct Tally {
    /// Payout attempts started (one per payout taken from the queue).
    pub attempts: AtomicU64,
    /// Submissions the rail answered 200.
    pub paid_replies: AtomicU64,
    /// `ensure_time_for` refused: not enough lease left for the rail hop.
    pub abandoned_insufficient_lease: AtomicU64,
    /// The lock was already lost at the check before the irreversible step.
    pub abandoned_lost: AtomicU64,
    /// Acquire gave up within its budget (key held or in grace).
    pub acquire_failed: AtomicU64,
    /// Handles the SDK reported lost (listener calls).
    pub lock_lost: AtomicU64,
    /// Sessions that had to be reopened after being lost.
    pub sessions_reopened: AtomicU64,
    /// Rail refusals the client saw with FENCED_OUT (the ledger's count is authoritative).
    pub fenced_replies: AtomicU64,
    /// Transport errors or timeouts on the rail.
    pub rail_transport_errors: AtomicU64,
    /// Sum over grants of the usable lease fraction at grant time, in ppm.
    pub usable_ppm_sum: AtomicU64,
    /// Grants counted in `usable_ppm_sum`.
    pub grants: AtomicU64,
    /// Every submit made after a passed client check (never reset: the
    /// window's fence-outs are joined on it, whenever the belief was formed).
    pub believed_held: Mutex<Vec<Belief>>,
}

impl Tally {
    fn bump(a: &AtomicU64) {
        a.fetch_add(1, Ordering::Relaxed);
    }

    /// Zeroes every count (the warm-up ends); the beliefs are kept.
    pub fn reset_counts(&self) {
        for a in [
            &self.attempts,
            &self.paid_replies,
            &self.abandoned_insufficient_lease,
            &self.abandoned_lost,
            &self.acquire_failed,
            &self.lock_lost,
            &self.sessions_reopened,
            &self.fenced_replies,
            &self.rail_transport_errors,
            &self.usable_ppm_sum,
            &self.grants,
        ] {
            a.store(0, Ordering::Relaxed);
        }
    }

    fn believe(&self, payout_id: &str, token: u64) {
        self.believed_held
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((payout_id.to_owned(), token));
    }

    /// Mean over grants of (client-side lease left at grant) / lease.
    pub fn usable_lease_fraction(&self) -> f64 {
        let n = self.grants.load(Ordering::Relaxed);
        if n == 0 {
            return 0.0;
        }
        self.usable_ppm_sum.load(Ordering::Relaxed) as f64 / n as f64 / 1e6
    }
}

/// A plain copy of a [`Tally`]: what a worker process reports over its pipe,
/// what a [`crate::cell::Pool`] sums over its members, and what a results row
/// is built from.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TallySnapshot {
    /// Payout attempts started.
    pub attempts: u64,
    /// Submissions answered 200.
    pub paid_replies: u64,
    /// D4 refused: not enough lease for the rail hop.
    pub abandoned_insufficient_lease: u64,
    /// The lock was already lost at the check (no ledger call).
    pub abandoned_lost: u64,
    /// Acquires that gave up.
    pub acquire_failed: u64,
    /// Handles reported lost.
    pub lock_lost: u64,
    /// FENCED_OUT replies seen by the client.
    pub fenced_replies: u64,
    /// Rail transport errors.
    pub rail_transport_errors: u64,
    /// Mean usable lease fraction at grant.
    pub usable_lease_fraction: f64,
    /// Submits made after a passed client check ([`Tally::believed_held`]).
    #[serde(default)]
    pub believed_held: Vec<Belief>,
}

impl TallySnapshot {
    /// Copies `t`.
    pub fn of(t: &Tally) -> Self {
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        TallySnapshot {
            attempts: g(&t.attempts),
            paid_replies: g(&t.paid_replies),
            abandoned_insufficient_lease: g(&t.abandoned_insufficient_lease),
            abandoned_lost: g(&t.abandoned_lost),
            acquire_failed: g(&t.acquire_failed),
            lock_lost: g(&t.lock_lost),
            fenced_replies: g(&t.fenced_replies),
            rail_transport_errors: g(&t.rail_transport_errors),
            usable_lease_fraction: t.usable_lease_fraction(),
            believed_held: t
                .believed_held
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .clone(),
        }
    }

    /// Adds `o` into `self` (the lease fraction is averaged by attempts).
    pub fn add(&mut self, o: &TallySnapshot) {
        let total = self.attempts + o.attempts;
        if total > 0 {
            self.usable_lease_fraction = (self.usable_lease_fraction * self.attempts as f64
                + o.usable_lease_fraction * o.attempts as f64)
                / total as f64;
        }
        self.attempts = total;
        self.paid_replies += o.paid_replies;
        self.abandoned_insufficient_lease += o.abandoned_insufficient_lease;
        self.abandoned_lost += o.abandoned_lost;
        self.acquire_failed += o.acquire_failed;
        self.lock_lost += o.lock_lost;
        self.fenced_replies += o.fenced_replies;
        self.rail_transport_errors += o.rail_transport_errors;
        self.believed_held.extend(o.believed_held.iter().cloned());
    }
}

/// Everything one worker needs to know.
#[derive(Clone, Debug)]
pub struct WorkerEnv {
    /// The lock service `lock_url` points at.
    pub backend: BackendKind,
    /// The lock-server (or the delay proxy in front of it), or etcd's client URL.
    pub lock_url: String,
    /// The rail-stub.
    pub rail_url: String,
    /// The lease each acquire asks for.
    pub lease: Duration,
    /// The session TTL.
    pub session_ttl: Duration,
    /// The margin policy.
    pub margin: MarginPolicy,
    /// `rail.read.timeout` (scaled): R3's read timeout.
    pub rail_read_timeout: Duration,
    /// `rail.read.timeout + 2 s` (scaled): what `ensure_time_for` requires.
    pub worst_case_hop: Duration,
    /// When false, the worker skips `check_still_held`/`ensure_time_for` (UC-03).
    pub client_check: bool,
    /// How long one acquire may wait for a held key.
    pub acquire_budget: Duration,
    /// R7's id prefix of the backlog.
    pub payout_prefix: String,
    /// The run's seed; worker `i` seeds its SDK with `seed + i`.
    pub seed: u64,
    /// Called after every successful claim, before the D4 check: the point in
    /// the critical section where the pause experiment freezes a worker.
    pub on_claimed: Option<ClaimHook>,
    /// Awaited at the [`Step`]s of every payout (tests' sabotage: a stall
    /// between the check and the submit, or before the claim).
    pub on_step: Option<StepHook>,
    /// Records every operation with its invocation and completion (issue
    /// 16's history, [`crate::history`]); `None` records nothing.
    pub history: Option<Arc<Recorder>>,
}

/// Where in a payout a [`StepHook`] runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// The lock was granted; the claim (fence 1) comes next.
    Acquired,
    /// `check_still_held` and D4 passed (the belief is recorded); the submit
    /// (fence 2) comes next. Not reached with the client check off.
    Checked,
    /// Between payouts, no lock held (outside the critical section): the
    /// context's `payout_id` is empty and its `token` 0.
    Idle,
}

/// What a [`StepHook`] is given.
pub struct StepCtx<'a> {
    /// Where the payout is.
    pub step: Step,
    /// The worker's SDK session, on the fencepost backend (a hook may inject
    /// a heartbeat fault into it); `None` on etcd.
    pub session: Option<&'a fencepost_sdk::Session>,
    /// The worker's index.
    pub worker: u64,
    /// The payout.
    pub payout_id: &'a str,
    /// The fencing token held.
    pub token: u64,
}

/// The signature of a [`StepHook`]: it may act on the session at once and
/// returns what the worker then awaits.
pub type StepFn = dyn for<'a> Fn(StepCtx<'a>) -> BoxFuture<'static, ()> + Send + Sync;

/// An awaited callback at the [`Step`]s of a payout (see [`WorkerEnv::on_step`]).
#[derive(Clone)]
pub struct StepHook(pub Arc<StepFn>);

impl std::fmt::Debug for StepHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StepHook")
    }
}

/// The signature of a [`ClaimHook`]: `(worker index, payout_id, token)`.
pub type ClaimFn = dyn Fn(u64, &str, u64) + Send + Sync;

/// A callback `(worker index, payout_id, token)` run inside the critical
/// section (see [`WorkerEnv::on_claimed`]).
#[derive(Clone)]
pub struct ClaimHook(pub Arc<ClaimFn>);

impl std::fmt::Debug for ClaimHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClaimHook")
    }
}

/// One worker: its own lock client (own heartbeat task, own RTT histogram).
pub struct Worker<B: LockBackend = LockClient> {
    /// Its index, for the owner id and the seed.
    idx: u64,
    /// The lock client.
    client: B,
    /// The rail client.
    rail: RailClient,
    /// R3 submit latencies as this worker saw them, µs (held only to record or copy).
    rail_latency: Mutex<Histogram<u64>>,
    /// The configuration.
    env: WorkerEnv,
}

impl Worker<LockClient> {
    /// Builds worker `idx` on fencepost's SDK. Fails only on an SDK configuration error.
    pub fn new(idx: u64, env: WorkerEnv) -> anyhow::Result<Self> {
        // Several lock-server replicas (issue 14): a comma-separated list.
        let config = LockClientConfig::new(env.lock_url.clone())
            .with_urls(
                env.lock_url
                    .split(',')
                    .map(str::trim)
                    .filter(|u| !u.is_empty()),
            )
            .with_margin(env.margin)
            .with_session_ttl(env.session_ttl)
            .with_default_ttl(env.lease)
            .with_request_timeout(request_timeout(&env))
            .with_seed(env.seed.wrapping_add(idx));
        let client = LockClient::new(config)?;
        Ok(Worker::with_backend(idx, env, client))
    }
}

impl Worker<EtcdBackend> {
    /// Builds worker `idx` on etcd (`env.lock_url` is etcd's client URL).
    /// Its sessions are etcd leases of `min(lease, session TTL)`, rounded up
    /// to whole seconds. Fails only on a configuration error; connects at
    /// the first session.
    pub fn new_etcd(idx: u64, env: WorkerEnv) -> anyhow::Result<Self> {
        let mut config = EtcdConfig::new(env.lock_url.clone(), env.lease.min(env.session_ttl));
        config.margin = env.margin;
        config.request_timeout = request_timeout(&env);
        config.seed = env.seed.wrapping_add(idx);
        let client = EtcdBackend::new(config)?;
        Ok(Worker::with_backend(idx, env, client))
    }
}

/// The per-request timeout of a worker's lock client: the lease, at least 1 s.
fn request_timeout(env: &WorkerEnv) -> Duration {
    env.lease.max(Duration::from_secs(1))
}

/// A worker of any backend, as the pool and the worker process hold it.
pub trait RunWorker: Send + Sync {
    /// Works payouts from `queue` until `stop` turns true or the backlog is empty.
    fn run(
        &self,
        queue: Arc<WorkQueue>,
        tally: Arc<Tally>,
        stop: watch::Receiver<bool>,
    ) -> BoxFuture<'_, ()>;

    /// The worker's lock client's heartbeat measurements.
    fn client(&self) -> &dyn HeartbeatStats;

    /// A copy of the R3 submit latencies this worker measured, µs.
    fn rail_histogram(&self) -> Histogram<u64>;

    /// The warm-up ends: empties the lock client's and this worker's figures.
    fn reset_measurements(&self);
}

impl<B: LockBackend> RunWorker for Worker<B> {
    fn run(
        &self,
        queue: Arc<WorkQueue>,
        tally: Arc<Tally>,
        stop: watch::Receiver<bool>,
    ) -> BoxFuture<'_, ()> {
        Box::pin(Worker::run(self, queue, tally, stop))
    }

    fn client(&self) -> &dyn HeartbeatStats {
        &self.client
    }

    fn rail_histogram(&self) -> Histogram<u64> {
        Worker::rail_histogram(self)
    }

    fn reset_measurements(&self) {
        Worker::reset_measurements(self)
    }
}

/// Builds worker `idx` on the backend `env` names.
pub fn build_worker(idx: u64, env: WorkerEnv) -> anyhow::Result<Arc<dyn RunWorker>> {
    Ok(match env.backend {
        BackendKind::Fencepost => Arc::new(Worker::new(idx, env)?),
        BackendKind::Etcd => Arc::new(Worker::new_etcd(idx, env)?),
    })
}

impl<B: LockBackend> Worker<B> {
    /// Worker `idx` on an already built lock `client`.
    pub fn with_backend(idx: u64, env: WorkerEnv, client: B) -> Self {
        let rail = RailClient::new(&env.rail_url, env.rail_read_timeout);
        Worker {
            idx,
            client,
            rail,
            rail_latency: Mutex::new(hist::new_histogram()),
            env,
        }
    }

    /// The worker's lock client (its RTT histogram and stats).
    pub fn client(&self) -> &B {
        &self.client
    }

    /// A copy of the R3 submit latencies this worker measured, µs; a
    /// submit that timed out is recorded at its give-up time ("≥").
    pub fn rail_histogram(&self) -> Histogram<u64> {
        self.rail_latency
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// The warm-up ends: empties every histogram and counter the lock client
    /// and this worker keep (`reset_measurements`, the rail latencies). The
    /// caller resets the [`Tally`].
    pub fn reset_measurements(&self) {
        self.client.reset_measurements();
        self.rail_latency
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .reset();
    }

    /// Awaits the step hook, if any.
    async fn step(&self, step: Step, session: &B::Session, payout_id: &str, token: u64) {
        if let Some(hook) = &self.env.on_step {
            let wait = (hook.0)(StepCtx {
                step,
                session: session.as_sdk(),
                worker: self.idx,
                payout_id,
                token,
            });
            wait.await;
        }
    }

    async fn open_session(
        &self,
        tally: &Arc<Tally>,
    ) -> Result<B::Session, crate::backend::BackendError> {
        let session = self
            .client
            .open_session(&format!("bench-worker-{}", self.idx))
            .await?;
        let t = tally.clone();
        session.on_lock_lost(Box::new(move || {
            t.lock_lost.fetch_add(1, Ordering::Relaxed);
        }));
        Ok(session)
    }

    /// Works payouts from `queue` until `stop` turns true or the backlog is empty.
    pub async fn run(
        &self,
        queue: Arc<WorkQueue>,
        tally: Arc<Tally>,
        mut stop: watch::Receiver<bool>,
    ) {
        let mut session: Option<(B::Session, String)> = None;
        while !*stop.borrow() {
            let (s, name) = match &session {
                Some((s, name)) if !s.is_lost() => (s, name),
                _ => {
                    if let Some((old, _)) = session.take() {
                        old.close().await;
                        Tally::bump(&tally.sessions_reopened);
                    }
                    let inv_ns = mono_ns();
                    match self.open_session(&tally).await {
                        Ok(s) => {
                            let name = match &self.env.history {
                                Some(r) => {
                                    let name = r.session_name();
                                    r.session(&name, self.env.client_check, inv_ns);
                                    name
                                }
                                None => String::new(),
                            };
                            let (s, name) = session.insert((s, name));
                            (&*s, &*name)
                        }
                        Err(_) => {
                            // The server is stalled or gone; try again shortly, unless stopping.
                            tokio::select! {
                                _ = tokio::time::sleep(Duration::from_millis(20)) => {}
                                _ = stop.changed() => {}
                            }
                            continue;
                        }
                    }
                }
            };
            if self.env.on_step.is_some() {
                self.step(Step::Idle, s, "", 0).await;
            }
            let Some(n) = queue.take() else { break };
            Tally::bump(&tally.attempts);
            if !self.pay_one(s, name, n, &tally).await {
                queue.give_back(n);
            }
        }
        if let Some((s, _)) = session {
            s.close().await;
        }
    }

    /// Records an invocation in the history, if there is one.
    fn invoke(&self, kind: OpKind, session: &str, id: &str, token: Option<u64>) -> Option<Pending> {
        let r = self.env.history.as_ref()?;
        Some(r.invoke(kind, session, Some(id), token))
    }

    /// Records the completion of `p`, if the history records.
    fn complete(
        &self,
        p: Option<Pending>,
        outcome: Outcome,
        token: Option<u64>,
        remaining: Option<Duration>,
    ) {
        if let (Some(r), Some(p)) = (&self.env.history, p) {
            r.complete(p, outcome, token, remaining);
        }
    }

    /// A rail call (claim, submit, R4), recorded.
    async fn rail_call(&self, kind: OpKind, session: &str, id: &str, token: u64) -> RailOutcome {
        let p = self.invoke(kind, session, id, Some(token));
        let out = match kind {
            OpKind::Claim => self.rail.claim(id, token).await,
            OpKind::Submit => self.rail.submit(id, token).await,
            _ => self.rail.release(id, token).await,
        };
        self.complete(p, Outcome::of_rail(&out), None, None);
        out
    }

    /// Releases the lock (L6), recorded: the end of the client's belief.
    async fn release_lock(
        &self,
        s: &B::Session,
        handle: <B::Session as BackendSession>::Handle,
        session: &str,
        id: &str,
    ) {
        let token = B::Session::token(&handle);
        let p = self.invoke(OpKind::Release, session, id, Some(token));
        let outcome = match s.release(handle).await {
            Ok(()) => Outcome::Ok,
            Err(_) => Outcome::Failed,
        };
        self.complete(p, outcome, None, None);
    }

    /// One payout. Returns false when it must be retried later (abandoned).
    async fn pay_one(&self, s: &B::Session, sname: &str, n: u64, tally: &Tally) -> bool {
        let id = bulk_payout_id(&self.env.payout_prefix, n);
        let granting = self.invoke(OpKind::Grant, sname, &id, None);
        let handle = match s
            .acquire(
                &format!("payout:{id}"),
                self.env.lease,
                self.env.acquire_budget,
            )
            .await
        {
            Ok(h) => h,
            Err(_) => {
                self.complete(granting, Outcome::Failed, None, None);
                Tally::bump(&tally.acquire_failed);
                return false;
            }
        };
        let token = B::Session::token(&handle);
        self.complete(
            granting,
            Outcome::Ok,
            Some(token),
            Some(s.remaining(&handle).unwrap_or_default()),
        );
        self.step(Step::Acquired, s, &id, token).await;
        if let Ok(left) = s.remaining(&handle) {
            let ppm = (left.as_secs_f64() / self.env.lease.as_secs_f64() * 1e6) as u64;
            tally.usable_ppm_sum.fetch_add(ppm, Ordering::Relaxed);
            Tally::bump(&tally.grants);
        }
        // Fence 1: the ledger claim.
        match self.rail_call(OpKind::Claim, sname, &id, token).await {
            RailOutcome::Ok => {}
            RailOutcome::Refused(RailErrorCode::AlreadyPaid) => {
                self.release_lock(s, handle, sname, &id).await;
                return true;
            }
            RailOutcome::Refused(code) => {
                if code == RailErrorCode::FencedOut {
                    Tally::bump(&tally.fenced_replies);
                }
                self.release_lock(s, handle, sname, &id).await;
                return false;
            }
            RailOutcome::Transport(_) => {
                Tally::bump(&tally.rail_transport_errors);
                self.release_lock(s, handle, sname, &id).await;
                return false;
            }
        }
        if let Some(hook) = &self.env.on_claimed {
            (hook.0)(self.idx, &id, token);
        }
        // ADR-006 D4: do not start what you cannot finish.
        if self.env.client_check {
            let checking = self.invoke(OpKind::Check, sname, &id, Some(token));
            let verdict = s
                .check_still_held(&handle)
                .map_err(LockError::from)
                .and_then(|()| s.ensure_time_for(&handle, self.env.worst_case_hop));
            match verdict {
                Ok(()) => {
                    self.complete(checking, Outcome::Ok, None, s.remaining(&handle).ok());
                    // The client believes it holds the lease: trigger 4's trace.
                    tally.believe(&id, token);
                    self.step(Step::Checked, s, &id, token).await;
                }
                Err(LockError::InsufficientLease { .. }) => {
                    self.complete(checking, Outcome::InsufficientLease, None, None);
                    Tally::bump(&tally.abandoned_insufficient_lease);
                    let _ = self.rail_call(OpKind::RailRelease, sname, &id, token).await;
                    self.release_lock(s, handle, sname, &id).await;
                    return false;
                }
                Err(_) => {
                    self.complete(checking, Outcome::Lost, None, None);
                    // Lost: we are no longer the holder, so we do not touch the
                    // ledger (a release under our token could only be fenced out).
                    Tally::bump(&tally.abandoned_lost);
                    self.release_lock(s, handle, sname, &id).await;
                    return false;
                }
            }
        }
        // Fence 2: the irreversible step, timed as the worker sees it.
        let sent = Instant::now();
        let submitted = self.rail_call(OpKind::Submit, sname, &id, token).await;
        let _ = self
            .rail_latency
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .record(sent.elapsed().as_micros().max(1) as u64);
        let done = match submitted {
            RailOutcome::Ok => {
                Tally::bump(&tally.paid_replies);
                true
            }
            RailOutcome::Refused(RailErrorCode::DuplicateSubmission) => true,
            RailOutcome::Refused(code) => {
                if code == RailErrorCode::FencedOut {
                    Tally::bump(&tally.fenced_replies);
                }
                false
            }
            RailOutcome::Transport(_) => {
                // Unknown outcome: the rail may still be deciding it. D4 budgets
                // the step at the worst-case hop (read timeout + 2 s), so the
                // step is not over before that: keep the lock until then, or a
                // successor's claim lands before the late decision and fence 2
                // refuses a submit this client believed it held the lease for.
                // Afterwards a later holder's claim finds it PAID or takes it over.
                Tally::bump(&tally.rail_transport_errors);
                tokio::time::sleep_until(sent + self.env.worst_case_hop).await;
                false
            }
        };
        self.release_lock(s, handle, sname, &id).await;
        done
    }
}
