//! [`RedlockSession`]: the client-side session a worker holds on Redlock —
//! its granted locks, its heartbeat task, its listeners — and the calls that
//! take, check and give back a lock. The mapping and the differences from
//! fencepost are in the parent module's doc.
//!
//! Redlock has no session on the servers. Here a session is the client's
//! own: it opens without I/O and starts its heartbeat task (the `heartbeat` module:
//! extend rounds for the held locks, a ping round when none is held), and
//! it is lost when one of its locks is (its client deadline passes, or an
//! extend round gets no majority). The worker then opens a new one, as it
//! does after a lost fencepost session.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fencepost_sdk::lease::GrantReply;
use fencepost_sdk::{Backoff, DeadlineKind, LockError, LockLost, LostReason, MonoTime};
use rand::SeedableRng as _;
use rand_chacha::ChaCha8Rng;
use tokio::task::AbortHandle;
use tracing::debug;

use super::error::RedlockError;
use super::heartbeat::heartbeat_task;
use super::instance::Op;
use super::quorum::{self, Verdict};
use super::round::{self, Attempt};
use super::shared::Inner;
use super::state::{Held, Shared, lock};
use crate::backend::etcd::lease::LeaseState;
use crate::backend::{BackendError, BackendSession};

/// The first backoff ceiling between lock rounds (the SDK's default).
const BASE_BACKOFF: Duration = Duration::from_millis(25);
/// The largest backoff ceiling (the SDK's default).
const MAX_BACKOFF: Duration = Duration::from_secs(1);
/// A hard cap on rounds per acquire (the SDK's default).
const MAX_ATTEMPTS: u32 = 1000;

/// A granted Redlock lock: its key (no fencing token: [`Self::token`] is 0).
/// Dropping it without a release ends it silently: the heartbeat stops
/// extending it and the key expires on the servers.
pub struct RedlockHandle {
    /// The lock, shared with the session's heartbeat.
    held: Arc<Held>,
    /// The session, to end the lock on drop.
    shared: Arc<Shared>,
}

impl std::fmt::Debug for RedlockHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedlockHandle")
            .field("key", &self.held.key)
            .field("deadline", &self.held.lease.deadline())
            .finish_non_exhaustive()
    }
}

impl Drop for RedlockHandle {
    fn drop(&mut self) {
        self.shared.end(&self.held);
    }
}

impl RedlockHandle {
    /// The locked key.
    pub fn key(&self) -> &str {
        &self.held.key
    }

    /// Always 0: Redlock has no fencing token (see the module doc).
    pub fn token(&self) -> u64 {
        0
    }

    /// The value this lock set on the instances.
    pub fn value(&self) -> &str {
        &self.held.value
    }

    /// The client deadline.
    pub fn deadline(&self) -> MonoTime {
        self.held.lease.deadline()
    }
}

/// The client-side session of a worker on Redlock; see the module doc.
pub struct RedlockSession {
    shared: Arc<Shared>,
    /// The heartbeat task, aborted on close or drop.
    task: AbortHandle,
}

impl Drop for RedlockSession {
    fn drop(&mut self) {
        self.task.abort();
        self.shared.stop(self.shared.now());
    }
}

impl RedlockSession {
    /// A session for `owner`, drawing from RNG stream `ordinal`, and its
    /// heartbeat task. No I/O until the first beat.
    pub(super) fn open(inner: Arc<Inner>, owner: &str, ordinal: u64) -> RedlockSession {
        let mut rng = ChaCha8Rng::seed_from_u64(inner.config.seed);
        rng.set_stream(ordinal);
        let opened = inner.config.clock.now();
        let shared = Arc::new(Shared {
            inner,
            owner: owner.to_string(),
            lost: Mutex::new(None),
            held: Mutex::new(Vec::new()),
            listeners: Mutex::new(Vec::new()),
            handles_reported: AtomicU64::new(0),
            last_ack_send_nanos: AtomicU64::new(opened.as_nanos()),
            rng: Mutex::new(rng),
        });
        let task = tokio::spawn(heartbeat_task(shared.clone())).abort_handle();
        RedlockSession { shared, task }
    }

    /// Why the session is lost, if it is: its flag, or a held lock whose
    /// deadline has passed (one clock read, recorded as that lock's loss).
    pub fn lost_reason(&self) -> Option<LostReason> {
        let s = &self.shared;
        if let Some(r) = s.lost_reason() {
            return Some(r);
        }
        let now = s.now();
        lock(&s.held).iter().find_map(|h| h.lease.lost_at(now))
    }

    /// One lock round; a granted one becomes a registered lock the
    /// heartbeat extends, anything else the error to give up with.
    async fn try_lock(
        &self,
        key: &str,
        value: &str,
        ttl: Duration,
    ) -> Result<RedlockHandle, BackendError> {
        let s = &self.shared;
        let ppm = s.inner.margin_ppm(ttl);
        let op = Op::Lock {
            ttl_ms: quorum::ttl_ms(ttl),
        };
        let timeout = s.inner.instance_timeout(ttl);
        let clock = &*s.inner.config.clock;
        let a = round::attempt(&s.inner.instances, clock, op, key, value, (ttl, timeout)).await;
        if !a.granted() {
            return Err(refusal(key, ttl, &a).into());
        }
        let lease = LeaseState::granted(grant_reply(&a, ttl), ppm);
        if lease.lost_at(a.received).is_some() {
            // Granted past the client deadline (a margin above the drift
            // allowance): no usable lease. Give the key back everywhere.
            let _ = round::ask_all(&s.inner.instances, Op::Unlock, key, value, timeout).await;
            return Err(RedlockError::NoValidity {
                key: key.to_string(),
                elapsed: a.elapsed(),
                ttl,
            }
            .into());
        }
        s.inner.metrics.margin_applied(DeadlineKind::Acquire, ppm);
        let registered = self.register(key, value, ttl, lease);
        if registered.is_err() {
            // The session was lost meanwhile: nobody will extend it.
            let _ = round::ask_all(&s.inner.instances, Op::Unlock, key, value, timeout).await;
        }
        registered
    }

    /// Registers a granted lock for the heartbeat to extend; refused when
    /// the session was lost meanwhile.
    fn register(
        &self,
        key: &str,
        value: &str,
        ttl: Duration,
        lease: LeaseState,
    ) -> Result<RedlockHandle, BackendError> {
        let s = &self.shared;
        let held = Arc::new(Held::new(key, value, ttl, lease));
        {
            // Under the registry lock: `stop` marks the session closed and
            // empties the registry under it, so a grant is refused here or
            // ended there, never neither.
            let mut registry = lock(&s.held);
            if let Some(reason) = s.lost_reason() {
                return Err(LockError::SessionLost { reason }.into());
            }
            registry.push(held.clone());
        }
        Ok(RedlockHandle {
            held,
            shared: s.clone(),
        })
    }

    /// [`BackendSession::acquire`]'s retry loop, uncounted.
    async fn acquire_retrying(
        &self,
        key: &str,
        ttl: Duration,
        budget: Duration,
    ) -> Result<RedlockHandle, BackendError> {
        let s = &self.shared;
        let ttl = Duration::from_millis(quorum::ttl_ms(ttl));
        let value = s.new_value();
        let start = s.now();
        let mut slept = Duration::ZERO;
        let mut backoff = Backoff::new(BASE_BACKOFF, MAX_BACKOFF);
        let mut attempts = 0u32;
        loop {
            if let Some(reason) = self.lost_reason() {
                return Err(LockError::SessionLost { reason }.into());
            }
            attempts += 1;
            let err = match self.try_lock(key, &value, ttl).await {
                Ok(handle) => return Ok(handle),
                Err(e) => e,
            };
            let spent = s.now().saturating_duration_since(start).max(slept);
            let left = budget.saturating_sub(spent);
            if attempts >= MAX_ATTEMPTS || left.is_zero() {
                debug!(key, attempts, ?spent, error = %err, "redlock acquire gives up");
                return Err(err);
            }
            let wait = backoff.next_delay(&mut *lock(&s.rng)).min(left);
            tokio::time::sleep(wait).await;
            slept += wait;
        }
    }
}

/// The grant a granted round stands for: sent at its send, for the full TTL.
fn grant_reply(a: &Attempt, ttl: Duration) -> GrantReply {
    GrantReply {
        send: a.send,
        received: a.received,
        granted_ms: quorum::ttl_ms(ttl),
    }
}

/// The error of a lock round that was not granted.
fn refusal(key: &str, ttl: Duration, a: &Attempt) -> RedlockError {
    match a.verdict {
        Verdict::Expired | Verdict::Granted { .. } => RedlockError::NoValidity {
            key: key.to_string(),
            elapsed: a.elapsed(),
            ttl,
        },
        Verdict::Minority => RedlockError::NoQuorum {
            key: key.to_string(),
            yes: a.votes.yes,
            no: a.votes.no,
            failed: a.votes.timeouts + a.votes.errors,
            instances: a.votes.instances(),
            needed: quorum::majority(a.votes.instances()),
        },
    }
}

impl BackendSession for RedlockSession {
    type Handle = RedlockHandle;

    /// Always 0: Redlock has no fencing token.
    fn token(_handle: &RedlockHandle) -> u64 {
        0
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

    /// Lock rounds with one random value, retried (minority, no validity)
    /// after the SDK's full-jitter backoff, never past `budget`. Counted as
    /// the SDK counts its acquires (`lock_acquires_total`).
    async fn acquire(
        &self,
        key: &str,
        ttl: Duration,
        budget: Duration,
    ) -> Result<RedlockHandle, BackendError> {
        let r = self.acquire_retrying(key, ttl, budget).await;
        self.shared.inner.metrics.acquire_finished(r.is_ok());
        r
    }

    fn remaining(&self, h: &RedlockHandle) -> Result<Duration, LockLost> {
        h.held.lease.remaining(self.shared.now(), &h.held.key, 0)
    }

    fn check_still_held(&self, h: &RedlockHandle) -> Result<(), LockLost> {
        self.remaining(h).map(|_| ())
    }

    fn ensure_time_for(
        &self,
        h: &RedlockHandle,
        worst_case_cost: Duration,
    ) -> Result<(), LockError> {
        let s = &self.shared;
        let verdict = h
            .held
            .lease
            .ensure_time_for(s.now(), &h.held.key, 0, worst_case_cost);
        if verdict.is_err() {
            s.inner.metrics.abandoned();
        }
        verdict
    }

    /// Ends the lock (no more extends) and deletes the key on ALL instances where its
    /// value is still ours (sent also when the lock is lost: it frees the
    /// key sooner and can delete nothing of a successor's). `Ok` when the
    /// lock was held and a majority deleted it.
    async fn release(&self, h: RedlockHandle) -> Result<(), BackendError> {
        let s = &self.shared;
        let now = s.now();
        let held_now = h.held.lease.remaining(now, &h.held.key, 0);
        match held_now {
            // Ended first: the heartbeat leaves it alone from here on.
            Ok(_) => {
                s.end(&h.held);
            }
            // Lost before the heartbeat noticed: reported here, once.
            Err(_) => s.report_loss(&h.held, now),
        }
        let timeout = s.inner.instance_timeout(h.held.ttl);
        let key = &*h.held.key;
        let votes =
            round::ask_all(&s.inner.instances, Op::Unlock, key, &h.held.value, timeout).await;
        held_now.map_err(LockError::LockLost)?;
        if votes.yes >= quorum::majority(s.inner.instances.len()) {
            return Ok(());
        }
        Err(LockError::LockLost(LockLost {
            key: h.held.key.clone(),
            token: 0,
            reason: LostReason::LeaseLost,
        })
        .into())
    }

    /// Stops the heartbeat task, ends the session (a loss in force is
    /// reported), and unlocks what was still held on every instance. Never
    /// fails.
    async fn close(self) {
        self.task.abort();
        let s = self.shared.clone();
        for h in s.stop(s.now()) {
            let timeout = s.inner.instance_timeout(h.ttl);
            let _ = round::ask_all(&s.inner.instances, Op::Unlock, &h.key, &h.value, timeout).await;
        }
    }
}
