//! [`EtcdSession`]: one etcd lease as a fencepost session — its keep-alive
//! task, its grants, its listeners — and the calls that take a grant. The
//! mapping and the differences from fencepost are in the parent module's doc.
//!
//! The keep-alive task is the SDK's heartbeat task in miniature, on the SDK's
//! own pieces: the fixed-rate schedule ([`schedule::Due`], one exchange per
//! wake-up however many ticks fell due, each tick's corrected sample), the
//! recorder (`record_exchange`, `record_ticks`, `record_unserved`, the gaps
//! `record_gap`/`record_lost_gap`), and the
//! deadline rule ([`LeaseState::apply_keep_alive`] = `lease::apply_grant`).
//! One keep-alive is in flight at a time; one that times out or fails drops
//! the stream (so a late answer cannot be taken for the next one's), and the
//! next tick opens a new one, whose first exchange is that tick's keep-alive.
//! Only the deadline decides: a failed exchange moves nothing (D5).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use etcd_client::{
    Compare, CompareOp, LeaseKeepAliveStream, LeaseKeeper, PutOptions, Txn, TxnOp, TxnOpResponse,
};
use fencepost_sdk::lease::{self, GrantReply};
use fencepost_sdk::metrics::Outcome;
use fencepost_sdk::schedule::{self, Due};
use fencepost_sdk::{Backoff, DeadlineKind, LockError, LockLost, LostReason, MonoTime};
use rand::SeedableRng as _;
use rand_chacha::ChaCha8Rng;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tracing::{debug, warn};

use super::lease::{LeaseState, granted_ms, ttl_request_s};
use crate::backend::etcd::shared::Inner;
use crate::backend::{BackendError, BackendSession};

/// The first backoff ceiling between acquire attempts (the SDK's default).
const BASE_BACKOFF: Duration = Duration::from_millis(25);
/// The largest backoff ceiling (the SDK's default).
const MAX_BACKOFF: Duration = Duration::from_secs(1);
/// A hard cap on txns per acquire (the SDK's default).
const MAX_ATTEMPTS: u32 = 1000;

/// Locks a std mutex, ignoring poisoning (nothing here is left half-updated).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A listener the worker registered.
type Listener = Box<dyn Fn() + Send + Sync>;

/// What the session's calls and its keep-alive task share.
struct Shared {
    /// The backend: configuration, recorder.
    inner: Arc<Inner>,
    /// The etcd client (cheap clones share the connection).
    client: etcd_client::Client,
    /// The etcd lease id.
    lease_id: i64,
    /// The owner id, stored as each key's value.
    owner: String,
    /// The TTL etcd granted, ms.
    granted_ms: u64,
    /// The client deadline and loss flag.
    lease: LeaseState,
    /// The send (ns on the clock) of the last acknowledged LeaseGrant or
    /// keep-alive: the start of the heartbeat gap in progress.
    last_ack_send_nanos: AtomicU64,
    /// Keys granted and not released (`(key, token)`): reported lost with the session.
    handles: Mutex<Vec<(Arc<str>, u64)>>,
    /// Lost-lock listeners, called once per lost handle.
    listeners: Mutex<Vec<Listener>>,
    /// Handles reported lost so far (a listener registered later is told of each).
    handles_reported: AtomicU64,
    /// Set once the session's loss (or close) has been dealt with.
    reported: AtomicBool,
    /// The session's seeded backoff jitter.
    rng: Mutex<ChaCha8Rng>,
}

impl Shared {
    fn now(&self) -> MonoTime {
        self.inner.config.clock.now()
    }

    fn margin_ppm(&self) -> u64 {
        self.inner.margin_ppm(self.granted_ms)
    }

    /// The keep-alive period: the SDK's, with the configured divisor.
    fn period(&self) -> Duration {
        let k = self.inner.config.heartbeat_divisor;
        lease::heartbeat_period(self.granted_ms, None, self.margin_ppm(), k)
    }

    /// The send of the last acknowledged exchange.
    fn last_ack_send(&self) -> MonoTime {
        MonoTime::from_nanos(self.last_ack_send_nanos.load(Ordering::Acquire))
    }

    /// Reports the session's loss once: counters, the `session_lost` log,
    /// and every listener once per handle still held.
    fn report_loss(&self, now: MonoTime) {
        let Some(reason) = self.lease.lost_at(now) else {
            return;
        };
        if self.reported.swap(true, Ordering::AcqRel) {
            return;
        }
        let metrics = &self.inner.metrics;
        if reason == LostReason::Deadline {
            // The SDK's censored gap: one over-window gap per deadline loss.
            metrics.record_lost_gap(now.saturating_duration_since(self.last_ack_send()));
        }
        metrics.session_lost(reason);
        let handles = std::mem::take(&mut *lock(&self.handles));
        warn!(
            name: "session_lost",
            event = "session_lost",
            backend = "etcd",
            lease_id = self.lease_id,
            reason = %reason,
            handles = handles.len(),
            "etcd session lost: {reason}"
        );
        let listeners = lock(&self.listeners);
        for _ in &handles {
            metrics.handle_lost();
            self.handles_reported.fetch_add(1, Ordering::Relaxed);
            for l in listeners.iter() {
                l();
            }
        }
    }

    /// The session ends (close or drop): a loss in force is reported;
    /// otherwise the session and its handles end silently as closed.
    fn stop(&self, now: MonoTime) {
        match self.lease.lost_at(now) {
            Some(r) if r != LostReason::SessionClosed => self.report_loss(now),
            _ => {
                self.lease.mark_lost(LostReason::SessionClosed);
                if !self.reported.swap(true, Ordering::AcqRel) {
                    lock(&self.handles).clear();
                }
            }
        }
    }

    /// The timeout for a request sent at `now`: the request timeout, bounded
    /// by the time left on the lease (at least 1 ms); `None` once it has passed.
    fn timeout_at(&self, now: MonoTime) -> Option<Duration> {
        let deadline = self.lease.deadline();
        (!now.has_reached(deadline)).then(|| {
            self.inner
                .config
                .request_timeout
                .min(lease::remaining(now, deadline))
                .max(Duration::from_millis(1))
        })
    }
}

/// A granted etcd lock: its key and fencing token (the key's create revision).
#[derive(Debug)]
pub struct EtcdHandle {
    /// The locked key.
    key: Arc<str>,
    /// The key's create revision.
    token: u64,
}

impl EtcdHandle {
    /// The locked key.
    pub fn key(&self) -> &str {
        &self.key
    }

    /// The fencing token: the key's create revision.
    pub fn token(&self) -> u64 {
        self.token
    }
}

/// One etcd lease kept alive as a fencepost session; see the module doc.
pub struct EtcdSession {
    shared: Arc<Shared>,
    /// The keep-alive task, aborted on close or drop.
    task: JoinHandle<()>,
}

impl Drop for EtcdSession {
    fn drop(&mut self) {
        self.task.abort();
        self.shared.stop(self.shared.now());
    }
}

/// Why a keep-alive exchange produced no TTL.
enum KeepAliveFailure {
    /// No answer within the timeout.
    Timeout,
    /// The stream or the connection failed.
    Error(BackendError),
}

impl EtcdSession {
    /// LeaseGrant (L1): the session's deadline is `send + ttl × (1 − m)`.
    pub(super) async fn open(
        inner: Arc<Inner>,
        owner: &str,
        ordinal: u64,
    ) -> Result<EtcdSession, BackendError> {
        let mut client = inner.client().await?;
        let clock = inner.config.clock.clone();
        let timeout = inner.config.request_timeout;
        let send = clock.now();
        let resp = tokio::time::timeout(
            timeout,
            client.lease_grant(ttl_request_s(inner.config.ttl), None),
        )
        .await
        .map_err(|_| LockError::Timeout { after: timeout })??;
        let received = clock.now();
        let granted = granted_ms(resp.ttl()).ok_or(BackendError::Unexpected(
            "LeaseGrant answered with a TTL <= 0",
        ))?;
        let ppm = inner.margin_ppm(granted);
        inner.metrics.margin_applied(DeadlineKind::Open, ppm);
        let state = LeaseState::granted(
            GrantReply {
                send,
                received,
                granted_ms: granted,
            },
            ppm,
        );
        let mut rng = ChaCha8Rng::seed_from_u64(inner.config.seed);
        rng.set_stream(ordinal);
        let shared = Arc::new(Shared {
            inner,
            client,
            lease_id: resp.id(),
            owner: owner.to_string(),
            granted_ms: granted,
            lease: state,
            last_ack_send_nanos: AtomicU64::new(send.as_nanos()),
            handles: Mutex::new(Vec::new()),
            listeners: Mutex::new(Vec::new()),
            handles_reported: AtomicU64::new(0),
            reported: AtomicBool::new(false),
            rng: Mutex::new(rng),
        });
        let task = tokio::spawn(keep_alive_task(shared.clone()));
        Ok(EtcdSession { shared, task })
    }

    /// The etcd lease id.
    pub fn lease_id(&self) -> i64 {
        self.shared.lease_id
    }

    /// The TTL etcd granted, ms.
    pub fn granted_ms(&self) -> u64 {
        self.shared.granted_ms
    }

    /// The session's client deadline.
    pub fn client_deadline(&self) -> MonoTime {
        self.shared.lease.deadline()
    }

    /// Why the session is lost, if it is (one clock read, recorded as the loss).
    pub fn lost_reason(&self) -> Option<LostReason> {
        self.shared.lease.lost_at(self.shared.now())
    }

    /// One acquire txn: `Ok(Some(token))` when granted (or, after a timed-out
    /// attempt of the same call, when the key is already on our lease),
    /// `Ok(None)` when another lease holds it.
    async fn try_acquire(
        &self,
        key: &str,
        maybe_ours: bool,
        timeout: Duration,
    ) -> Result<Option<u64>, BackendError> {
        let s = &self.shared;
        let txn = Txn::new()
            .when([Compare::create_revision(key, CompareOp::Equal, 0)])
            .and_then([TxnOp::put(
                key,
                s.owner.as_str(),
                Some(PutOptions::new().with_lease(s.lease_id)),
            )])
            .or_else([TxnOp::get(key, None)]);
        let mut kv = s.client.clone();
        let resp = tokio::time::timeout(timeout, kv.txn(txn))
            .await
            .map_err(|_| LockError::Timeout { after: timeout })??;
        if resp.succeeded() {
            let rev = resp
                .header()
                .map(|h| h.revision())
                .ok_or(BackendError::Unexpected("a txn reply without a header"))?;
            return Ok(Some(
                u64::try_from(rev).map_err(|_| BackendError::Unexpected("a negative revision"))?,
            ));
        }
        // Held. After a lost reply, the holder may be this very call.
        let held_by_us = resp.op_responses().iter().find_map(|r| match r {
            TxnOpResponse::Get(g) => g
                .kvs()
                .first()
                .filter(|kv| maybe_ours && kv.lease() == s.lease_id)
                .map(|kv| kv.create_revision()),
            _ => None,
        });
        Ok(held_by_us.and_then(|rev| u64::try_from(rev).ok()))
    }
}

impl EtcdSession {
    /// [`BackendSession::acquire`]'s retry loop, uncounted.
    async fn acquire_retrying(
        &self,
        key: &str,
        budget: Duration,
    ) -> Result<EtcdHandle, BackendError> {
        let s = &self.shared;
        let start = s.now();
        let mut slept = Duration::ZERO;
        let mut backoff = Backoff::new(BASE_BACKOFF, MAX_BACKOFF);
        let mut attempts = 0u32;
        let mut maybe_ours = false;
        loop {
            let now = s.now();
            if let Some(reason) = s.lease.lost_at(now) {
                return Err(LockError::SessionLost { reason }.into());
            }
            // `now` is before the deadline here, so this is at least 1 ms.
            let timeout = s.timeout_at(now).unwrap_or(Duration::from_millis(1));
            attempts += 1;
            let err: BackendError = match self.try_acquire(key, maybe_ours, timeout).await {
                Ok(Some(token)) => {
                    let key: Arc<str> = Arc::from(key);
                    {
                        // Under the registry lock: a loss report empties the
                        // registry after setting the flag, so a grant is
                        // either refused here or reported, never neither.
                        let mut handles = lock(&s.handles);
                        if let Some(reason) = s.lease.lost_reason() {
                            return Err(LockError::SessionLost { reason }.into());
                        }
                        handles.push((key.clone(), token));
                    }
                    // The key's usable lease is the session's, with its margin.
                    s.inner
                        .metrics
                        .margin_applied(DeadlineKind::Acquire, s.margin_ppm());
                    return Ok(EtcdHandle { key, token });
                }
                Ok(None) => LockError::LockHeld {
                    key: key.to_string(),
                    retry_after_ms: None,
                    attempts,
                }
                .into(),
                Err(e) => {
                    maybe_ours |= matches!(e, BackendError::Lock(LockError::Timeout { .. }));
                    e
                }
            };
            let spent = s.now().saturating_duration_since(start).max(slept);
            let left = budget.saturating_sub(spent);
            if attempts >= MAX_ATTEMPTS || left.is_zero() {
                debug!(key, attempts, ?spent, error = %err, "etcd acquire gives up");
                return Err(err);
            }
            let wait = backoff.next_delay(&mut *lock(&s.rng)).min(left);
            tokio::time::sleep(wait).await;
            slept += wait;
        }
    }
}

impl BackendSession for EtcdSession {
    type Handle = EtcdHandle;

    fn token(handle: &EtcdHandle) -> u64 {
        handle.token
    }

    fn on_lock_lost(&self, listener: Box<dyn Fn() + Send + Sync>) {
        // Losses already reported are reported to a late listener at once.
        for _ in 0..self.shared.handles_reported.load(Ordering::Relaxed) {
            listener();
        }
        lock(&self.shared.listeners).push(listener);
    }

    fn is_lost(&self) -> bool {
        self.lost_reason().is_some()
    }

    /// The acquire txn, retried (held key, timeout, transient error) with the
    /// SDK's full-jitter backoff, never past `budget`; `ttl` is the session's
    /// (etcd keys live on the session lease). Counted as the SDK counts its
    /// acquires (`lock_acquires_total`: granted, or failed).
    async fn acquire(
        &self,
        key: &str,
        _ttl: Duration,
        budget: Duration,
    ) -> Result<EtcdHandle, BackendError> {
        let r = self.acquire_retrying(key, budget).await;
        self.shared.inner.metrics.acquire_finished(r.is_ok());
        r
    }

    fn remaining(&self, h: &EtcdHandle) -> Result<Duration, LockLost> {
        self.shared
            .lease
            .remaining(self.shared.now(), &h.key, h.token)
    }

    fn check_still_held(&self, h: &EtcdHandle) -> Result<(), LockLost> {
        self.remaining(h).map(|_| ())
    }

    fn ensure_time_for(&self, h: &EtcdHandle, worst_case_cost: Duration) -> Result<(), LockError> {
        let s = &self.shared;
        let verdict = s
            .lease
            .ensure_time_for(s.now(), &h.key, h.token, worst_case_cost);
        if verdict.is_err() {
            s.inner.metrics.abandoned();
        }
        verdict
    }

    /// Deletes the key if its create revision is still the token. Refused
    /// locally (nothing sent) once the session is lost.
    async fn release(&self, h: EtcdHandle) -> Result<(), BackendError> {
        let s = &self.shared;
        let now = s.now();
        s.lease
            .remaining(now, &h.key, h.token)
            .map_err(LockError::LockLost)?;
        lock(&s.handles).retain(|(k, t)| !(*t == h.token && **k == *h.key));
        let token = i64::try_from(h.token).unwrap_or(i64::MAX);
        let txn = Txn::new()
            .when([Compare::create_revision(&*h.key, CompareOp::Equal, token)])
            .and_then([TxnOp::delete(&*h.key, None)]);
        let timeout = s.inner.config.request_timeout;
        let mut kv = s.client.clone();
        let resp = tokio::time::timeout(timeout, kv.txn(txn))
            .await
            .map_err(|_| LockError::Timeout { after: timeout })??;
        if resp.succeeded() {
            Ok(())
        } else {
            Err(LockError::LockLost(LockLost {
                key: h.key.clone(),
                token: h.token,
                reason: LostReason::LeaseLost,
            })
            .into())
        }
    }

    /// Stops the keep-alive task, ends the session (a loss in force is
    /// reported), and revokes the lease, which deletes its keys at once.
    /// Never fails.
    async fn close(self) {
        self.task.abort();
        let s = self.shared.clone();
        s.stop(s.now());
        let mut lease = s.client.clone();
        let timeout = s.inner.config.request_timeout;
        match tokio::time::timeout(timeout, lease.lease_revoke(s.lease_id)).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => debug!(lease_id = s.lease_id, error = %e, "LeaseRevoke failed"),
            Err(_) => debug!(lease_id = s.lease_id, "LeaseRevoke timed out"),
        }
    }
}

/// The keep-alive stream of a session, opened by the first exchange after
/// a failure.
type Stream = Option<(LeaseKeeper, LeaseKeepAliveStream)>;

/// One keep-alive exchange: `Ok(Some(ttl_ms))` answered with a live TTL,
/// `Ok(None)` "lease not found" (TTL 0), or the failure.
async fn keep_alive_once(
    s: &Shared,
    stream: &mut Stream,
    timeout: Duration,
) -> Result<Option<u64>, KeepAliveFailure> {
    let exchange = async {
        match stream {
            Some((keeper, replies)) => {
                keeper.keep_alive().await?;
                match replies.message().await? {
                    Some(r) if r.id() == s.lease_id => Ok(granted_ms(r.ttl())),
                    Some(_) => Err(BackendError::Unexpected(
                        "a keep-alive answer for another lease",
                    )),
                    None => Err(BackendError::Unexpected("the keep-alive stream ended")),
                }
            }
            None => {
                let mut c = s.client.clone();
                // Opening sends one keep-alive and reads its answer; the
                // crate keeps the TTL to itself, which etcd sets to the
                // lease's granted TTL on every renewal.
                match c.lease_keep_alive(s.lease_id).await {
                    Ok(pair) => {
                        *stream = Some(pair);
                        Ok(Some(s.granted_ms))
                    }
                    Err(etcd_client::Error::LeaseKeepAliveError(m)) if m == "lease not found" => {
                        Ok(None)
                    }
                    Err(e) => Err(e.into()),
                }
            }
        }
    };
    match tokio::time::timeout(timeout, exchange).await {
        Ok(Ok(ttl)) => Ok(ttl),
        Ok(Err(e)) => Err(KeepAliveFailure::Error(e)),
        Err(_) => Err(KeepAliveFailure::Timeout),
    }
}

/// The keep-alive task: one exchange per wake-up at a fixed rate of
/// `ttl × (1 − m) / k`, until the session is lost (or the task is aborted).
async fn keep_alive_task(s: Arc<Shared>) {
    let metrics = &s.inner.metrics;
    let origin = Instant::now();
    let offset = |t: Instant| t.saturating_duration_since(origin);
    let mut stream: Stream = None;
    let mut period = s.period();
    let mut next_due = period;
    loop {
        tokio::time::sleep_until(origin + next_due).await;
        let due = Due::at(next_due, period, offset(Instant::now()));
        let now = s.now();
        if let Some(reason) = s.lease.lost_at(now) {
            // Ticks due before the deadline were needed and never served.
            metrics.record_ticks(due.count, None);
            if reason == LostReason::Deadline {
                let overrun = now.saturating_duration_since(s.lease.deadline());
                metrics.record_unserved(due.unserved(offset(Instant::now()), overrun));
            }
            s.report_loss(now);
            return;
        }
        // `now` is before the deadline here, so this is at least 1 ms.
        let timeout = s.timeout_at(now).unwrap_or(Duration::from_millis(1));
        let lag = due.lag(offset(Instant::now()));
        let ppm = s.margin_ppm();
        let send = s.now();
        let result = keep_alive_once(&s, &mut stream, timeout).await;
        let received = s.now();
        let rtt = received.saturating_duration_since(send);
        metrics.record_ticks(due.count, Some(lag));
        let outcome = match &result {
            Ok(_) => Outcome::Reply,
            Err(KeepAliveFailure::Timeout) => Outcome::Timeout,
            Err(KeepAliveFailure::Error(_)) => Outcome::Error,
        };
        metrics.record_exchange(outcome, rtt, due.corrected(rtt, lag));
        match result {
            Ok(Some(ttl_ms)) => {
                let grant = GrantReply {
                    send,
                    received,
                    granted_ms: ttl_ms,
                };
                let before = s.lease.deadline();
                match s.lease.apply_keep_alive(grant, ppm) {
                    Ok(_) => {
                        // The SDK's gap: last acknowledged send to this receipt.
                        let last = MonoTime::from_nanos(
                            s.last_ack_send_nanos
                                .swap(send.as_nanos(), Ordering::AcqRel),
                        );
                        metrics.record_gap(
                            received.saturating_duration_since(last),
                            before.saturating_duration_since(last),
                        );
                        metrics.heartbeat_ok();
                        metrics.margin_applied(DeadlineKind::Heartbeat, ppm);
                    }
                    Err(refused) => {
                        debug!(lease_id = s.lease_id, %refused, "keep-alive reply refused");
                        s.lease.mark_lost(LostReason::Deadline);
                    }
                }
            }
            Ok(None) => {
                s.lease.mark_lost(LostReason::SessionExpired);
            }
            Err(failure) => {
                if let KeepAliveFailure::Error(e) = &failure {
                    debug!(lease_id = s.lease_id, error = %e, "keep-alive failed; retrying next tick");
                }
                // A late answer must not be read as the next exchange's.
                stream = None;
            }
        }
        if s.lease.lost_reason().is_some() {
            s.report_loss(s.now());
            return;
        }
        next_due = due.next();
        let p = s.period();
        if p != period {
            next_due = schedule::rebase(next_due, period, p, offset(Instant::now()));
            period = p;
        }
    }
}
