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
use rand::SeedableRng as _;
use rand_chacha::ChaCha8Rng;
use tokio::time::Instant;

use crate::backend::etcd::{EtcdBackend, EtcdConfig};
use crate::backend::redis::{RedisBackend, RedisConfig};
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
    /// The etcd or redis adapter refused the configuration (its margin
    /// policy, its URL): fix the cell's parameters.
    #[error(transparent)]
    Etcd(#[from] BackendError),
    /// The backend has no worker in this build yet: pick another `--backend`.
    #[error("{0}: not built yet")]
    NotBuilt(BackendKind),
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
    /// Draws each payout's hold ([`WorkerEnv::hold`]), seeded from the
    /// worker's seed so a run replays.
    hold_rng: Mutex<ChaCha8Rng>,
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

impl Worker<RedisBackend> {
    /// Builds worker `idx` on one Redis instance (`env.lock_url`, a
    /// `redis://` URL): every lock's `PX` is the cell's lease, and its
    /// client-side sessions run on the cell's session TTL. Fails only on
    /// a configuration error (the margin policy, the URL); connects at the
    /// first session.
    pub fn new_redis(idx: u64, env: WorkerEnv) -> Result<Self, BuildError> {
        let mut config = RedisConfig::new(env.lock_url.clone(), env.lease);
        config.session_ttl = env.session_ttl;
        config.margin = env.margin;
        config.heartbeat_divisor = env.heartbeat_divisor;
        config.request_timeout = request_timeout(&env);
        config.seed = env.seed.wrapping_add(idx);
        config.prometheus = env.prometheus.clone();
        let client = RedisBackend::new(config)?;
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
        BackendKind::Redis => Arc::new(Worker::new_redis(idx, env)?),
        b @ BackendKind::Redlock => return Err(BuildError::NotBuilt(b)),
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
            hold_rng: Mutex::new(hold_rng(env.seed, idx)),
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

    /// Records an invocation in the history, if there is one, under the
    /// payout's lock key when it has several steps.
    fn invoke(&self, kind: OpKind, at: &At<'_>, id: &str, token: Option<u64>) -> Option<Pending> {
        let r = self.env.history.as_ref()?;
        Some(r.invoke_keyed(kind, at.session, Some(id), token, at.key))
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
    async fn rail_call(&self, kind: OpKind, at: &At<'_>, id: &str, token: u64) -> RailOutcome {
        let p = self.invoke(kind, at, id, Some(token));
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
        at: &At<'_>,
        id: &str,
    ) {
        let token = B::Session::token(&handle);
        let p = self.invoke(OpKind::Release, at, id, Some(token));
        let outcome = match s.release(handle).await {
            Ok(()) => Outcome::Ok,
            Err(_) => Outcome::Failed,
        };
        self.complete(p, outcome, None, None);
    }

    /// One payout, in its steps: acquire, then per leg ([`WorkerEnv::steps`])
    /// claim (fence 1), the leg's share of the hold, the client check (D4)
    /// and submit (fence 2), then release. True when the payout is done
    /// (every leg paid, by this worker or already), false when it goes back
    /// on the queue (a later holder resumes at its first unpaid leg).
    async fn pay_one(&self, s: &B::Session, sname: &str, n: u64, tally: &Tally) -> bool {
        let steps = self.env.steps.max(1);
        let leg0 = leg_id(&self.env.payout_prefix, n, steps, 0);
        let key = format!("payout:{leg0}");
        let at = At {
            session: sname,
            key: (steps > 1).then_some(key.as_str()),
        };
        let Some(handle) = self.acquire(s, &at, &leg0, &key, tally).await else {
            return false;
        };
        let work = self.draw_hold() / steps;
        let token = <B::Session as BackendSession>::token(&handle);
        let mut done = true;
        for j in 0..steps {
            let id = leg_id(&self.env.payout_prefix, n, steps, j);
            let leg = Leg {
                at: &at,
                id: &id,
                j,
            };
            if !self.pay_leg(s, &handle, &leg, work, tally).await {
                done = false;
                break;
            }
            if j + 1 < steps {
                self.step(Step::LegPaid, s, &id, token).await;
            }
        }
        self.release_lock(s, handle, &at, &leg0).await;
        done
    }

    /// The hold of one payout attempt (zero without `--hold`).
    fn draw_hold(&self) -> Duration {
        match &self.env.hold {
            Some(spec) => {
                spec.sample(&mut *self.hold_rng.lock().unwrap_or_else(|e| e.into_inner()))
            }
            None => Duration::ZERO,
        }
    }

    /// One leg under the held lock: claim, `work`, D4, submit. True when
    /// the leg is paid (by this submit, or already).
    async fn pay_leg(
        &self,
        s: &B::Session,
        handle: &<B::Session as BackendSession>::Handle,
        leg: &Leg<'_>,
        work: Duration,
        tally: &Tally,
    ) -> bool {
        let token = <B::Session as BackendSession>::token(handle);
        match self.claim(leg.at, leg.id, token, tally).await {
            Claimed::Yes => {}
            Claimed::AlreadyPaid => return true,
            Claimed::No => return false,
        }
        if let Some(hook) = &self.env.on_claimed {
            (hook.0)(self.idx, leg.id, token);
        }
        if !work.is_zero() {
            tokio::time::sleep(work).await;
        }
        if self.env.client_check && !self.check(s, handle, leg.at, leg.id, token, tally).await {
            if leg.j > 0 {
                Tally::bump(&tally.abandoned_mid_payout);
            }
            return false;
        }
        self.submit(s, handle, leg.at, leg.id, token, tally).await
    }

    /// The lock on the payout within the acquire budget (recorded as a
    /// grant), with the usable share of the lease it came with; `None` when
    /// the acquire gave up.
    async fn acquire(
        &self,
        s: &B::Session,
        at: &At<'_>,
        id: &str,
        key: &str,
        tally: &Tally,
    ) -> Option<<B::Session as BackendSession>::Handle> {
        let granting = self.invoke(OpKind::Grant, at, id, None);
        let handle = match s
            .acquire(key, self.env.lease, self.env.acquire_budget)
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
    async fn claim(&self, at: &At<'_>, id: &str, token: u64, tally: &Tally) -> Claimed {
        match self.rail_call(OpKind::Claim, at, id, token).await {
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
        at: &At<'_>,
        id: &str,
        token: u64,
        tally: &Tally,
    ) -> bool {
        let checking = self.invoke(OpKind::Check, at, id, Some(token));
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
                let _ = self.rail_call(OpKind::RailRelease, at, id, token).await;
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
        at: &At<'_>,
        id: &str,
        token: u64,
        tally: &Tally,
    ) -> bool {
        let sent = Instant::now();
        let submitted = self.rail_call(OpKind::Submit, at, id, token).await;
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

/// Where an operation is recorded: the history's session, and the lock key
/// of a multi-step payout (`None` for one step).
struct At<'a> {
    /// The session's name in the history.
    session: &'a str,
    /// The payout's lock key, when it has several steps.
    key: Option<&'a str>,
}

/// One leg of a payout: its ledger id and its index.
struct Leg<'a> {
    /// Where its operations are recorded.
    at: &'a At<'a>,
    /// Its ledger payout.
    id: &'a str,
    /// Its index, 0-based.
    j: u32,
}

/// Salt of a worker's hold RNG (its SDK takes `seed + idx` unsalted).
const HOLD_SALT: u64 = 0x686f_6c64_5f72_6e67;

/// The seeded RNG worker `idx` of a run with `seed` draws its holds from.
pub(crate) fn hold_rng(seed: u64, idx: u64) -> ChaCha8Rng {
    ChaCha8Rng::seed_from_u64(seed.wrapping_add(idx) ^ HOLD_SALT)
}

/// The ledger number of leg `j` of logical payout `n` (1-based, as R7
/// numbers) with `steps` legs: `(n − 1)·steps + j + 1`, so one step is the
/// payout itself and a backlog of `count` payouts is exactly the ledger
/// payouts `1..=count·steps` past its first.
pub fn leg_number(n: u64, steps: u32, j: u32) -> u64 {
    (n - 1) * u64::from(steps) + u64::from(j) + 1
}

/// The ledger id of leg `j` of logical payout `n` ([`leg_number`]).
pub fn leg_id(prefix: &str, n: u64, steps: u32, j: u32) -> String {
    bulk_payout_id(prefix, leg_number(n, steps, j))
}

#[cfg(test)]
mod tests {
    use super::*;
    use fencepost_api::latency::LatencySpec;

    #[test]
    fn one_step_legs_are_the_payouts_themselves() {
        for n in [1, 2, 99] {
            assert_eq!(leg_id("p", n, 1, 0), bulk_payout_id("p", n));
        }
    }

    #[test]
    fn legs_of_consecutive_payouts_tile_the_ledger_without_gaps_or_overlap() {
        let mut seen: Vec<u64> = (1..=4)
            .flat_map(|n| (0..3).map(move |j| leg_number(n, 3, j)))
            .collect();
        assert_eq!(seen[..3], [1, 2, 3]);
        seen.sort_unstable();
        seen.dedup();
        assert_eq!(seen, (1..=12).collect::<Vec<_>>());
        assert_eq!(leg_id("x", 2, 3, 0), bulk_payout_id("x", 4));
    }

    #[test]
    fn holds_replay_from_the_seed_and_differ_between_workers() {
        let spec: LatencySpec = "lognormal:p50=20ms,p99=60ms".parse().unwrap();
        let draw = |seed, idx| {
            let mut r = hold_rng(seed, idx);
            (0..5).map(|_| spec.sample(&mut r)).collect::<Vec<_>>()
        };
        assert_eq!(draw(7, 1), draw(7, 1));
        assert_ne!(draw(7, 1), draw(7, 2));
        assert!(draw(7, 1).iter().all(|d| !d.is_zero()));
    }
}
