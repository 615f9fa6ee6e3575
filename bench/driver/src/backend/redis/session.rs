//! [`RedisSession`]: the client-side session of the redis adapter — its
//! renew task, its grants, its listeners — and the calls that take and give
//! back a grant. The mapping and the differences from fencepost are in the
//! parent module's doc.
//!
//! Redis has no session: this one lives in the client only. It has a
//! deadline of its own, moved by every acknowledged renew exchange (sent
//! every period, with every key it holds, or none), and each grant has its
//! own deadline, from its acquire's send and then from each renew that
//! extended it. The session is lost when its deadline or a held grant's
//! passes, or when a renew is refused (the key expired or changed hands);
//! a lost session reports each held grant lost, once.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fencepost_sdk::lease::GrantReply;
use fencepost_sdk::{Backoff, DeadlineKind, LockError, LockLost, LostReason, MonoTime};
use rand::{RngCore as _, SeedableRng as _};
use rand_chacha::ChaCha8Rng;
use tokio::task::JoinHandle;
use tracing::debug;

use super::scripts::{self, Acquired};
use super::shared::{ACQUIRE, Grant, Inner, RELEASE, RENEW, Shared, eval, lock};
use crate::backend::etcd::lease::LeaseState;
use crate::backend::{BackendError, BackendSession};

/// The first backoff ceiling between acquire attempts (the SDK's default).
const BASE_BACKOFF: Duration = Duration::from_millis(25);
/// The largest backoff ceiling (the SDK's default).
const MAX_BACKOFF: Duration = Duration::from_secs(1);
/// A hard cap on attempts per acquire (the SDK's default).
const MAX_ATTEMPTS: u32 = 1000;

/// A granted redis lock: its key and fencing token (the key's counter).
#[derive(Debug)]
pub struct RedisHandle {
    /// The grant, shared with the session's renew task.
    grant: Arc<Grant>,
}

impl RedisHandle {
    /// The locked key.
    pub fn key(&self) -> &str {
        &self.grant.key
    }

    /// The fencing token: the value `INCR` gave the key's counter.
    pub fn token(&self) -> u64 {
        self.grant.token
    }

    /// The value stored in Redis for this grant, `OWNER:TOKEN`.
    pub fn value(&self) -> &str {
        &self.grant.value
    }
}

/// One client-side session on Redis; see the module doc.
pub struct RedisSession {
    pub(super) shared: Arc<Shared>,
    /// The renew task, aborted on close or drop.
    task: JoinHandle<()>,
}

impl Drop for RedisSession {
    fn drop(&mut self) {
        self.task.abort();
        self.shared.stop(self.shared.now());
    }
}

impl RedisSession {
    /// Opens a session (L1): one renew exchange without keys, whose send
    /// sets the first deadline, `send + session TTL × (1 − m)`; then the renew task.
    pub(super) async fn open(
        inner: Arc<Inner>,
        owner: &str,
        ordinal: u64,
    ) -> Result<RedisSession, BackendError> {
        let mut rng = ChaCha8Rng::seed_from_u64(inner.config.seed);
        rng.set_stream(ordinal);
        // Unique per session, and reproducible from the seed.
        let owner = format!("{owner}#{ordinal}.{:016x}", rng.next_u64());
        let (clock, lease_ms) = (inner.config.clock.clone(), inner.config.lease_ms());
        let send = clock.now();
        let lease_arg = lease_ms.to_string();
        let timeout = inner.config.request_timeout;
        let reply = eval(&inner, &RENEW, &[], &[&lease_arg], timeout).await?;
        scripts::decode_renew(&reply, 0)
            .ok_or(BackendError::Unexpected("a renew reply of another shape"))?;
        let first = GrantReply {
            send,
            received: clock.now(),
            granted_ms: inner.config.session_ms(),
        };
        let ppm = inner.margin_ppm();
        inner.metrics.margin_applied(DeadlineKind::Open, ppm);
        let shared = Arc::new(Shared {
            owner,
            lease: LeaseState::granted(first, ppm),
            last_ack_send_nanos: AtomicU64::new(send.as_nanos()),
            grants: Mutex::new(Vec::new()),
            unconfirmed: Mutex::new(Vec::new()),
            listeners: Mutex::new(Vec::new()),
            handles_reported: AtomicU64::new(0),
            reported: AtomicBool::new(false),
            rng: Mutex::new(rng),
            inner,
        });
        let task = tokio::spawn(super::renew::renew_task(shared.clone()));
        Ok(RedisSession { shared, task })
    }

    /// The owner id this session writes into its values.
    pub fn owner(&self) -> &str {
        &self.shared.owner
    }

    /// The session's client deadline.
    pub fn client_deadline(&self) -> MonoTime {
        self.shared.lease.deadline()
    }

    /// Why the session is lost, if it is (one clock read, recorded as the loss).
    pub fn lost_reason(&self) -> Option<LostReason> {
        self.shared.lost_at(self.shared.now())
    }

    /// One acquire attempt, bounded by `timeout` from its own send.
    async fn try_acquire(&self, key: &str, timeout: Duration) -> Result<Acquired, BackendError> {
        let s = &self.shared;
        let (lock_key, fence_key) = (scripts::lock_key(key), scripts::fence_key(key));
        let lease = s.lease_ms().to_string();
        let reply = s
            .eval(
                &ACQUIRE,
                &[&lock_key, &fence_key],
                &[&s.owner, &lease],
                timeout,
            )
            .await?;
        scripts::decode_acquire(&reply).ok_or(BackendError::Unexpected(
            "an acquire reply that is neither a token nor a value",
        ))
    }

    /// Registers a grant whose deadline counts from `send`; refused if the
    /// session was lost meanwhile.
    fn register(&self, key: &str, token: u64, send: MonoTime) -> Result<RedisHandle, BackendError> {
        let s = &self.shared;
        let ppm = s.inner.margin_ppm();
        let reply = GrantReply {
            send,
            received: s.now(),
            granted_ms: s.lease_ms(),
        };
        let grant = Arc::new(Grant {
            key: Arc::from(key),
            lock_key: scripts::lock_key(key),
            token,
            value: scripts::grant_value(&s.owner, token),
            lease: LeaseState::granted(reply, ppm),
        });
        {
            // Under the registry lock: a loss report empties the registry
            // after setting the flag, so a grant is refused here or reported.
            let mut grants = lock(&s.grants);
            if let Some(reason) = s.lease.lost_reason() {
                return Err(LockError::SessionLost { reason }.into());
            }
            grants.push(grant.clone());
        }
        s.inner.metrics.margin_applied(DeadlineKind::Acquire, ppm);
        Ok(RedisHandle { grant })
    }

    /// Our own token in a held `value`, when an earlier attempt of this
    /// call may have set it (its reply was lost) and no unconfirmed release
    /// left it behind.
    fn ours(&self, value: &str, maybe_ours: bool) -> Option<u64> {
        let s = &self.shared;
        if !maybe_ours || lock(&s.unconfirmed).iter().any(|v| v == value) {
            return None;
        }
        scripts::own_token(value, &s.owner)
    }

    /// [`BackendSession::acquire`]'s retry loop, uncounted. Each attempt's
    /// deadline counts from its own send; a grant recovered after a lost
    /// reply counts from the send of the first attempt whose reply was lost.
    async fn acquire_retrying(
        &self,
        key: &str,
        budget: Duration,
    ) -> Result<RedisHandle, BackendError> {
        let s = &self.shared;
        let start = s.now();
        let (mut slept, mut attempts) = (Duration::ZERO, 0u32);
        let mut backoff = Backoff::new(BASE_BACKOFF, MAX_BACKOFF);
        // The send of the first attempt whose outcome is unknown (timed out).
        let mut unknown_since: Option<MonoTime> = None;
        loop {
            let now = s.now();
            if let Some(reason) = s.lost_at(now) {
                return Err(LockError::SessionLost { reason }.into());
            }
            let timeout = s.timeout_at(now).unwrap_or(Duration::from_millis(1));
            attempts += 1;
            let send = s.now();
            let err: BackendError = match self.try_acquire(key, timeout).await {
                Ok(Acquired::Granted(token)) => return self.register(key, token, send),
                Ok(Acquired::Held(v)) => match self.ours(&v, unknown_since.is_some()) {
                    Some(token) => {
                        let since = unknown_since.unwrap_or(send);
                        return self.register(key, token, since);
                    }
                    None => LockError::LockHeld {
                        key: key.to_string(),
                        retry_after_ms: None,
                        attempts,
                    }
                    .into(),
                },
                Err(e) => {
                    if matches!(e, BackendError::Lock(LockError::Timeout { .. })) {
                        unknown_since.get_or_insert(send);
                    }
                    e
                }
            };
            let spent = s.now().saturating_duration_since(start).max(slept);
            let left = budget.saturating_sub(spent);
            if attempts >= MAX_ATTEMPTS || left.is_zero() {
                debug!(key, attempts, ?spent, error = %err, "redis acquire gives up");
                return Err(err);
            }
            let wait = backoff.next_delay(&mut *lock(&s.rng)).min(left);
            tokio::time::sleep(wait).await;
            slept += wait;
        }
    }

    /// The compare-value `DEL` of `grant`: `Ok(true)` deleted, `Ok(false)`
    /// not ours any more; an unconfirmed one is remembered.
    async fn delete(&self, grant: &Grant) -> Result<bool, BackendError> {
        let s = &self.shared;
        let timeout = s.inner.config.request_timeout;
        match s
            .eval(&RELEASE, &[&grant.lock_key], &[&grant.value], timeout)
            .await
        {
            Ok(v) => Ok(v == ::redis::Value::Int(1)),
            Err(e) => {
                lock(&s.unconfirmed).push(grant.value.clone());
                Err(e)
            }
        }
    }
}

impl BackendSession for RedisSession {
    type Handle = RedisHandle;

    fn token(handle: &RedisHandle) -> u64 {
        handle.grant.token
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

    /// The acquire script, retried (held key, timeout, transient error)
    /// with the SDK's full-jitter backoff, never past `budget`; the lease is
    /// the backend's (`ttl` is the same lease on every call the worker
    /// makes). Counted as the SDK counts its acquires.
    async fn acquire(
        &self,
        key: &str,
        _ttl: Duration,
        budget: Duration,
    ) -> Result<RedisHandle, BackendError> {
        let r = self.acquire_retrying(key, budget).await;
        self.shared.inner.metrics.acquire_finished(r.is_ok());
        r
    }

    /// D3: the usable lease left, the earlier of the grant's and the session's.
    fn remaining(&self, h: &RedisHandle) -> Result<Duration, LockLost> {
        let s = &self.shared;
        let now = s.now();
        let (key, token) = (&*h.grant.key, h.grant.token);
        if let Some(reason) = s.lost_at(now) {
            return Err(LockLost {
                key: key.into(),
                token,
                reason,
            });
        }
        let own = h.grant.lease.remaining(now, key, token)?;
        Ok(own.min(s.lease.remaining(now, key, token)?))
    }

    fn check_still_held(&self, h: &RedisHandle) -> Result<(), LockLost> {
        self.remaining(h).map(|_| ())
    }

    fn ensure_time_for(&self, h: &RedisHandle, worst_case_cost: Duration) -> Result<(), LockError> {
        let verdict = match self.remaining(h) {
            Ok(left) if left > worst_case_cost => Ok(()),
            Ok(left) => Err(LockError::InsufficientLease {
                remaining: left,
                needed: worst_case_cost,
            }),
            Err(lost) => Err(LockError::LockLost(lost)),
        };
        if verdict.is_err() {
            self.shared.inner.metrics.abandoned();
        }
        verdict
    }

    /// Deletes the key if it still holds this grant's value. Refused locally
    /// (nothing sent) once the grant is lost: the key expires on its own.
    async fn release(&self, h: RedisHandle) -> Result<(), BackendError> {
        self.remaining(&h).map_err(LockError::LockLost)?;
        let s = &self.shared;
        lock(&s.grants).retain(|g| !Arc::ptr_eq(g, &h.grant));
        if self.delete(&h.grant).await? {
            return Ok(());
        }
        Err(LockError::LockLost(LockLost {
            key: h.grant.key.clone(),
            token: h.grant.token,
            reason: LostReason::LeaseLost,
        })
        .into())
    }

    /// Stops the renew task, ends the session (a loss in force is
    /// reported), and deletes every key it still holds (compare-value, so
    /// never a successor's). Never fails.
    async fn close(self) {
        self.task.abort();
        let s = self.shared.clone();
        let held: Vec<Arc<Grant>> = lock(&s.grants).clone();
        s.stop(s.now());
        for g in held {
            if let Err(e) = self.delete(&g).await {
                debug!(key = %g.key, error = %e, "release at close failed");
            }
        }
    }
}
