//! The payout loop of one worker ([`Worker`]), generic over the lock
//! service, and [`build_worker`], which picks the backend a [`WorkerEnv`]
//! names.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fencepost_api::rail::{RailErrorCode, bulk_payout_id};
use fencepost_sdk::{ConfigError, LockClient, LockClientConfig, LockError};
use tokio::sync::watch;

use bench_core::backend::BackendKind;
use bench_core::hist;
use bench_history::{OpKind, Outcome, Pending, mono_ns};
use fencepost_sdk::Histogram;
use tokio::time::Instant;

use crate::backend::etcd::{EtcdBackend, EtcdConfig};
use crate::backend::{BackendError, BackendSession, HeartbeatStats, LockBackend};
use crate::rail::{RailClient, RailOutcome, history_outcome};
use crate::worker::env::{BoxFuture, Step, StepCtx, WorkerEnv};
use crate::worker::renewals::HistoryRenewals;
use crate::worker::tally::{Tally, WorkQueue};

/// Why a worker could not be built: its configuration is refused. Nothing
/// is connected yet, so retrying the same configuration fails the same way.
#[derive(Debug, thiserror::Error)]
pub enum BuildError {
    /// The SDK refused the configuration (a margin, TTL or URL out of range):
    /// fix the cell's parameters.
    #[error(transparent)]
    Sdk(#[from] ConfigError),
    /// The etcd adapter refused the configuration (its margin policy): fix
    /// the cell's parameters.
    #[error(transparent)]
    Etcd(#[from] BackendError),
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
    pub fn new(idx: u64, env: WorkerEnv) -> Result<Self, BuildError> {
        let client = sdk_client(&env, idx)?;
        Ok(Worker::with_backend(idx, env, client))
    }
}

/// The SDK client of worker `idx` of `env` (seeded `seed + idx`), recording
/// into the cell's shared Prometheus instruments when it has them: what every
/// in-process fencepost worker and the cell's idle sessions
/// ([`crate::cell::Pool::open_idle_sessions`]) run on. Several lock-server
/// replicas are a comma-separated `lock_url`.
pub fn sdk_client(env: &WorkerEnv, idx: u64) -> Result<LockClient, BuildError> {
    let config = LockClientConfig::new(env.lock_url.clone())
        .with_urls(
            env.lock_url
                .split(',')
                .map(str::trim)
                .filter(|u| !u.is_empty()),
        )
        .with_margin(env.margin)
        .with_session_ttl(env.session_ttl)
        .with_heartbeat_divisor(env.heartbeat_divisor)
        .with_default_ttl(env.lease)
        .with_request_timeout(request_timeout(env))
        .with_seed(env.seed.wrapping_add(idx));
    let config = match &env.tls_ca {
        Some(ca) => config.with_tls_ca(ca),
        None => config,
    };
    Ok(match &env.prometheus {
        Some(p) => LockClient::with_prometheus(config, p.clone())?,
        None => LockClient::new(config)?,
    })
}

impl Worker<EtcdBackend> {
    /// Builds worker `idx` on etcd (`env.lock_url` is etcd's client URL).
    /// Its sessions are etcd leases of `min(lease, session TTL)`, rounded up
    /// to whole seconds. Fails only on a configuration error; connects at
    /// the first session.
    pub fn new_etcd(idx: u64, env: WorkerEnv) -> Result<Self, BuildError> {
        let mut config = EtcdConfig::new(env.lock_url.clone(), env.lease.min(env.session_ttl));
        config.margin = env.margin;
        config.heartbeat_divisor = env.heartbeat_divisor;
        config.request_timeout = request_timeout(&env);
        config.seed = env.seed.wrapping_add(idx);
        config.prometheus = env.prometheus.clone();
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
pub fn build_worker(idx: u64, env: WorkerEnv) -> Result<Arc<dyn RunWorker>, BuildError> {
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
                                    if let Some(sdk) = s.as_sdk() {
                                        HistoryRenewals::observe(sdk, r.clone(), &name);
                                    }
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
        self.complete(p, history_outcome(&out), None, None);
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
    /// One payout, in its steps: acquire, claim (fence 1), the client
    /// check (D4), submit (fence 2), release. True when the payout is done
    /// (paid, by this worker or already), false when it goes back on the queue.
    async fn pay_one(&self, s: &B::Session, sname: &str, n: u64, tally: &Tally) -> bool {
        let id = bulk_payout_id(&self.env.payout_prefix, n);
        let Some(handle) = self.acquire(s, sname, &id, tally).await else {
            return false;
        };
        let token = <B::Session as BackendSession>::token(&handle);
        let held = match self.claim(sname, &id, token, tally).await {
            Claimed::Yes => {
                if let Some(hook) = &self.env.on_claimed {
                    (hook.0)(self.idx, &id, token);
                }
                !self.env.client_check || self.check(s, &handle, sname, &id, token, tally).await
            }
            Claimed::AlreadyPaid => {
                self.release_lock(s, handle, sname, &id).await;
                return true;
            }
            Claimed::No => false,
        };
        if !held {
            self.release_lock(s, handle, sname, &id).await;
            return false;
        }
        let done = self.submit(s, &handle, sname, &id, token, tally).await;
        self.release_lock(s, handle, sname, &id).await;
        done
    }

    /// The lock on the payout within the acquire budget (recorded as a
    /// grant), with the usable share of the lease it came with; `None` when
    /// the acquire gave up.
    async fn acquire(
        &self,
        s: &B::Session,
        sname: &str,
        id: &str,
        tally: &Tally,
    ) -> Option<<B::Session as BackendSession>::Handle> {
        let granting = self.invoke(OpKind::Grant, sname, id, None);
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
                return None;
            }
        };
        let token = <B::Session as BackendSession>::token(&handle);
        self.complete(
            granting,
            Outcome::Ok,
            Some(token),
            Some(s.remaining(&handle).unwrap_or_default()),
        );
        self.step(Step::Acquired, s, id, token).await;
        if let Ok(left) = s.remaining(&handle) {
            let ppm = (left.as_secs_f64() / self.env.lease.as_secs_f64() * 1e6) as u64;
            tally.usable_ppm_sum.fetch_add(ppm, Ordering::Relaxed);
            Tally::bump(&tally.grants);
        }
        Some(handle)
    }

    /// Fence 1: the ledger claim under `token`.
    async fn claim(&self, sname: &str, id: &str, token: u64, tally: &Tally) -> Claimed {
        match self.rail_call(OpKind::Claim, sname, id, token).await {
            RailOutcome::Ok => Claimed::Yes,
            RailOutcome::Refused(RailErrorCode::AlreadyPaid) => Claimed::AlreadyPaid,
            RailOutcome::Refused(code) => {
                if code == RailErrorCode::FencedOut {
                    Tally::bump(&tally.fenced_replies);
                }
                Claimed::No
            }
            RailOutcome::Transport(_) => {
                Tally::bump(&tally.rail_transport_errors);
                Claimed::No
            }
        }
    }

    /// ADR-006 D4, do not start what you cannot finish: the lock still held
    /// with time for the worst-case hop. True: the client believes it holds
    /// the lease (trigger 4's trace); false: it abandons (insufficient
    /// lease: the ledger claim released; lost: the ledger not touched).
    async fn check(
        &self,
        s: &B::Session,
        handle: &<B::Session as BackendSession>::Handle,
        sname: &str,
        id: &str,
        token: u64,
        tally: &Tally,
    ) -> bool {
        let checking = self.invoke(OpKind::Check, sname, id, Some(token));
        let verdict = s
            .check_still_held(handle)
            .map_err(LockError::from)
            .and_then(|()| s.ensure_time_for(handle, self.env.worst_case_hop));
        match verdict {
            Ok(()) => {
                self.complete(checking, Outcome::Ok, None, s.remaining(handle).ok());
                // The client believes it holds the lease: trigger 4's trace.
                tally.believe(id, token);
                self.step(Step::Checked, s, id, token).await;
                true
            }
            Err(LockError::InsufficientLease { .. }) => {
                self.complete(checking, Outcome::InsufficientLease, None, None);
                Tally::bump(&tally.abandoned_insufficient_lease);
                let _ = self.rail_call(OpKind::RailRelease, sname, id, token).await;
                false
            }
            Err(_) => {
                self.complete(checking, Outcome::Lost, None, None);
                // Lost: we are no longer the holder, so we do not touch the
                // ledger (a release under our token could only be fenced out).
                Tally::bump(&tally.abandoned_lost);
                false
            }
        }
    }

    /// Fence 2: the irreversible step, timed as the worker sees it. True
    /// when the payout is paid (by this submit, or a duplicate of a paid one).
    async fn submit(
        &self,
        s: &B::Session,
        handle: &<B::Session as BackendSession>::Handle,
        sname: &str,
        id: &str,
        token: u64,
        tally: &Tally,
    ) -> bool {
        let sent = Instant::now();
        let submitted = self.rail_call(OpKind::Submit, sname, id, token).await;
        let _ = self
            .rail_latency
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .record(sent.elapsed().as_micros().max(1) as u64);
        match submitted {
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
                // step is not over before that; and while the lease is ours no
                // successor can claim, so keep the lock until the later of the
                // two: the hop, and the client deadline. Released sooner, a
                // successor's claim can land before a late decision (a rail
                // stalled past the hop), and fence 2 refuses a submit this
                // client believed it held the lease for. Afterwards a later
                // holder's claim finds it PAID or takes it over.
                Tally::bump(&tally.rail_transport_errors);
                let hop_end = sent + self.env.worst_case_hop;
                let held_until = s
                    .remaining(handle)
                    .map_or(hop_end, |left| Instant::now() + left);
                tokio::time::sleep_until(hop_end.max(held_until)).await;
                false
            }
        }
    }
}

/// What fence 1 said to a claim.
enum Claimed {
    /// Accepted: the payout is this worker's to pay.
    Yes,
    /// The payout is paid already: done.
    AlreadyPaid,
    /// Refused (fenced out, or another code) or unknown (a transport error).
    No,
}
