//! [`RedlockSession`]: the client-side session a worker holds on Redlock —
//! its granted locks, their extend tasks, its listeners — and the calls that
//! take, check and give back a lock. The mapping and the differences from
//! fencepost are in the parent module's doc.
//!
//! Redlock has no session on the servers. Here a session is the client's
//! own: it opens without I/O, and it is lost when one of its locks is lost
//! (its client deadline passes, or an extend round gets no majority). The
//! worker then opens a new one, as it does after a lost fencepost session.
//!
//! Each granted lock has its own extend task, the SDK's heartbeat task in
//! miniature (the etcd adapter's, per lock): the fixed-rate schedule
//! ([`schedule::Due`]) from the grant, period `ttl × (1 − m) / k`, one extend
//! round per wake-up, recorded in the SDK's recorder as a heartbeat exchange
//! (outcome, raw and corrected RTT, tick lag, gaps), and the deadline rule of
//! [`LeaseState::apply_keep_alive`] (= `lease::apply_grant`).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use fencepost_sdk::lease::GrantReply;
use fencepost_sdk::metrics::Outcome;
use fencepost_sdk::schedule::{self, Due};
use fencepost_sdk::{Backoff, DeadlineKind, LockError, LockLost, LostReason, MonoTime};
use rand::{RngCore as _, SeedableRng as _};
use rand_chacha::ChaCha8Rng;
use tokio::task::AbortHandle;
use tokio::time::Instant;
use tracing::{debug, warn};

use super::error::RedlockError;
use super::instance::Op;
use super::quorum::{self, Verdict};
use super::round::{self, Attempt};
use super::shared::Inner;
use crate::backend::etcd::lease::LeaseState;
use crate::backend::{BackendError, BackendSession};

/// The first backoff ceiling between lock rounds (the SDK's default).
const BASE_BACKOFF: Duration = Duration::from_millis(25);
/// The largest backoff ceiling (the SDK's default).
const MAX_BACKOFF: Duration = Duration::from_secs(1);
/// A hard cap on rounds per acquire (the SDK's default).
const MAX_ATTEMPTS: u32 = 1000;

/// Locks a std mutex, ignoring poisoning (nothing here is left half-updated).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A listener the worker registered.
type Listener = Box<dyn Fn() + Send + Sync>;

/// One granted lock, shared by its handle and its extend task.
struct Held {
    /// The key.
    key: Arc<str>,
    /// The random value this acquire set: only this value extends or deletes.
    value: String,
    /// The TTL every round of this lock asks for.
    ttl: Duration,
    /// The client deadline and loss flag.
    lease: LeaseState,
    /// The send (ns on the clock) of the last granted round: the start of
    /// the gap in progress.
    last_ack_send_nanos: AtomicU64,
    /// Set once the lock's loss (or end) has been dealt with.
    reported: AtomicBool,
    /// Stops the extend task (on release, drop of the handle, or session end).
    task: OnceLock<AbortHandle>,
}

impl Held {
    fn last_ack_send(&self) -> MonoTime {
        MonoTime::from_nanos(self.last_ack_send_nanos.load(Ordering::Acquire))
    }

    fn stop_task(&self) {
        if let Some(t) = self.task.get() {
            t.abort();
        }
    }
}

/// What a session's calls and its extend tasks share.
struct Shared {
    /// The backend: configuration, instances, recorder.
    inner: Arc<Inner>,
    /// The owner id: the prefix of every lock value.
    owner: String,
    /// Why the session is lost, once it is.
    lost: Mutex<Option<LostReason>>,
    /// Locks granted and not released: reported lost with the session.
    held: Mutex<Vec<Arc<Held>>>,
    /// Lost-lock listeners, called once per lost lock.
    listeners: Mutex<Vec<Listener>>,
    /// Locks reported lost so far (a listener registered later is told of each).
    handles_reported: AtomicU64,
    /// The session's seeded lock values and backoff jitter.
    rng: Mutex<ChaCha8Rng>,
}

impl Shared {
    fn now(&self) -> MonoTime {
        self.inner.config.clock.now()
    }

    /// A fresh lock value: the owner and 128 seeded random bits.
    fn new_value(&self) -> String {
        let mut rng = lock(&self.rng);
        format!(
            "{}:{:016x}{:016x}",
            self.owner,
            rng.next_u64(),
            rng.next_u64()
        )
    }

    /// The extend period of `h`: the SDK's, on the lock's TTL.
    fn period(&self, h: &Held) -> Duration {
        let k = self.inner.config.heartbeat_divisor;
        let ppm = self.inner.margin_ppm(h.ttl);
        fencepost_sdk::lease::heartbeat_period(quorum::ttl_ms(h.ttl), None, ppm, k)
    }

    /// The loss recorded on the session, if any.
    fn lost_reason(&self) -> Option<LostReason> {
        *lock(&self.lost)
    }

    /// Records the session's loss unless one is recorded.
    fn mark_lost(&self, why: LostReason) {
        lock(&self.lost).get_or_insert(why);
    }

    /// Reports the loss of `h` once: counters, the `session_lost` log, the
    /// session's loss, and every listener once.
    fn report_loss(&self, h: &Held, now: MonoTime) {
        let Some(reason) = h.lease.lost_at(now) else {
            return;
        };
        if h.reported.swap(true, Ordering::AcqRel) {
            return;
        }
        h.stop_task();
        let metrics = &self.inner.metrics;
        if reason == LostReason::Deadline {
            metrics.record_lost_gap(now.saturating_duration_since(h.last_ack_send()));
        }
        metrics.session_lost(reason);
        self.mark_lost(reason);
        lock(&self.held).retain(|x| !std::ptr::eq(&**x, h));
        warn!(
            name: "session_lost",
            event = "session_lost",
            backend = "redlock",
            key = %h.key,
            reason = %reason,
            "redlock lock lost: {reason}"
        );
        metrics.handle_lost();
        self.handles_reported.fetch_add(1, Ordering::Relaxed);
        for l in lock(&self.listeners).iter() {
            l();
        }
    }

    /// The session ends (close or drop): every extend task stops; a loss in
    /// force is reported; the other locks end silently as closed. Returns
    /// the locks that were still held.
    fn stop(&self, now: MonoTime) -> Vec<Arc<Held>> {
        let held = lock(&self.held).clone();
        for h in &held {
            h.stop_task();
            match h.lease.lost_at(now) {
                Some(r) if r != LostReason::SessionClosed => self.report_loss(h, now),
                _ => {
                    h.lease.mark_lost(LostReason::SessionClosed);
                    h.reported.store(true, Ordering::Release);
                }
            }
        }
        lock(&self.held).clear();
        self.mark_lost(LostReason::SessionClosed);
        held
    }

    /// The per-instance timeout of a round on `h` sent at `now`: bounded by
    /// the lease left (at least 1 ms).
    fn timeout_at(&self, h: &Held, now: MonoTime) -> Duration {
        let left = fencepost_sdk::lease::remaining(now, h.lease.deadline());
        self.inner
            .instance_timeout(h.ttl)
            .min(left)
            .max(Duration::from_millis(1))
    }
}

/// A granted Redlock lock: its key (no fencing token: [`Self::token`] is 0).
/// Dropping it stops its extend task; the key then expires on the servers.
pub struct RedlockHandle {
    held: Arc<Held>,
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
        self.held.stop_task();
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
}

impl Drop for RedlockSession {
    fn drop(&mut self) {
        self.shared.stop(self.shared.now());
    }
}

impl RedlockSession {
    /// A session for `owner`, drawing from RNG stream `ordinal`. No I/O.
    pub(super) fn open(inner: Arc<Inner>, owner: &str, ordinal: u64) -> RedlockSession {
        let mut rng = ChaCha8Rng::seed_from_u64(inner.config.seed);
        rng.set_stream(ordinal);
        RedlockSession {
            shared: Arc::new(Shared {
                inner,
                owner: owner.to_string(),
                lost: Mutex::new(None),
                held: Mutex::new(Vec::new()),
                listeners: Mutex::new(Vec::new()),
                handles_reported: AtomicU64::new(0),
                rng: Mutex::new(rng),
            }),
        }
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

    /// One lock round; a granted one becomes a registered lock with its
    /// extend task running, anything else the error to give up with.
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
        self.register(key, value, ttl, lease, a.send)
    }

    /// Registers a granted lock and starts its extend task; refused when the
    /// session was lost meanwhile.
    fn register(
        &self,
        key: &str,
        value: &str,
        ttl: Duration,
        lease: LeaseState,
        send: MonoTime,
    ) -> Result<RedlockHandle, BackendError> {
        let s = &self.shared;
        let held = Arc::new(Held {
            key: Arc::from(key),
            value: value.to_string(),
            ttl,
            lease,
            last_ack_send_nanos: AtomicU64::new(send.as_nanos()),
            reported: AtomicBool::new(false),
            task: OnceLock::new(),
        });
        {
            // Under the registry lock: `stop` empties the registry after
            // setting the flag, so a grant is refused here or stopped there.
            let mut registry = lock(&s.held);
            if let Some(reason) = s.lost_reason() {
                return Err(LockError::SessionLost { reason }.into());
            }
            registry.push(held.clone());
        }
        let task = tokio::spawn(extend_task(s.clone(), held.clone()));
        let _ = held.task.set(task.abort_handle());
        Ok(RedlockHandle { held })
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

    /// Stops the extend task and deletes the key on ALL instances where its
    /// value is still ours (sent also when the lock is lost: it frees the
    /// key sooner and can delete nothing of a successor's). `Ok` when the
    /// lock was held and a majority deleted it.
    async fn release(&self, h: RedlockHandle) -> Result<(), BackendError> {
        let s = &self.shared;
        h.held.stop_task();
        let now = s.now();
        let held_now = h.held.lease.remaining(now, &h.held.key, 0);
        match held_now {
            Ok(_) => h.held.reported.store(true, Ordering::Release),
            // Lost before the task noticed: reported here, once.
            Err(_) => s.report_loss(&h.held, now),
        }
        lock(&s.held).retain(|x| !Arc::ptr_eq(x, &h.held));
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

    /// Stops every extend task, ends the session (a loss in force is
    /// reported), and unlocks what was still held on every instance. Never
    /// fails.
    async fn close(self) {
        let s = self.shared.clone();
        for h in s.stop(s.now()) {
            let timeout = s.inner.instance_timeout(h.ttl);
            let _ = round::ask_all(&s.inner.instances, Op::Unlock, &h.key, &h.value, timeout).await;
        }
    }
}

/// How one extend round reads as a heartbeat exchange: a reply when a
/// majority answered (yes or no), else a timeout when one timed out, else an
/// error.
fn exchange_outcome(a: &Attempt) -> Outcome {
    let v = &a.votes;
    if v.yes + v.no >= quorum::majority(v.instances()) {
        Outcome::Reply
    } else if v.timeouts > 0 {
        Outcome::Timeout
    } else {
        Outcome::Error
    }
}

/// Applies one extend round to `h`: granted moves the deadline from the
/// round's send (refused if read at or after the current deadline: lost at
/// the deadline); anything else loses the lock (the round unlocked it).
fn apply_extend(s: &Shared, h: &Held, a: &Attempt, ppm: u64) {
    let metrics = &s.inner.metrics;
    if !a.granted() {
        debug!(key = %h.key, votes = ?a.votes, verdict = ?a.verdict, "redlock extend failed");
        h.lease.mark_lost(LostReason::SessionExpired);
        return;
    }
    let before = h.lease.deadline();
    match h.lease.apply_keep_alive(grant_reply(a, h.ttl), ppm) {
        Ok(_) => {
            let last = MonoTime::from_nanos(
                h.last_ack_send_nanos
                    .swap(a.send.as_nanos(), Ordering::AcqRel),
            );
            metrics.record_gap(
                a.received.saturating_duration_since(last),
                before.saturating_duration_since(last),
            );
            metrics.heartbeat_ok();
            metrics.margin_applied(DeadlineKind::Heartbeat, ppm);
        }
        Err(refused) => {
            debug!(key = %h.key, %refused, "redlock extend read too late");
            h.lease.mark_lost(LostReason::Deadline);
        }
    }
}

/// The extend task of one lock: one round per wake-up at a fixed rate of
/// `ttl × (1 − m) / k`, until the lock is lost (or the task is aborted).
async fn extend_task(s: Arc<Shared>, h: Arc<Held>) {
    let metrics = &s.inner.metrics;
    let origin = Instant::now();
    let offset = |t: Instant| t.saturating_duration_since(origin);
    let op = Op::Extend {
        ttl_ms: quorum::ttl_ms(h.ttl),
    };
    let mut period = s.period(&h);
    let mut next_due = period;
    loop {
        tokio::time::sleep_until(origin + next_due).await;
        let due = Due::at(next_due, period, offset(Instant::now()));
        let now = s.now();
        if let Some(reason) = h.lease.lost_at(now) {
            // Ticks due before the deadline were needed and never served.
            metrics.record_ticks(due.count, None);
            if reason == LostReason::Deadline {
                let overrun = now.saturating_duration_since(h.lease.deadline());
                metrics.record_unserved(due.unserved(offset(Instant::now()), overrun));
            }
            s.report_loss(&h, now);
            return;
        }
        let timeout = s.timeout_at(&h, now);
        let lag = due.lag(offset(Instant::now()));
        let ppm = s.inner.margin_ppm(h.ttl);
        let clock = &*s.inner.config.clock;
        let a = round::attempt(
            &s.inner.instances,
            clock,
            op,
            &h.key,
            &h.value,
            (h.ttl, timeout),
        )
        .await;
        metrics.record_ticks(due.count, Some(lag));
        metrics.record_exchange(
            exchange_outcome(&a),
            a.elapsed(),
            due.corrected(a.elapsed(), lag),
        );
        apply_extend(&s, &h, &a, ppm);
        if h.lease.lost_reason().is_some() {
            s.report_loss(&h, s.now());
            return;
        }
        next_due = due.next();
        let p = s.period(&h);
        if p != period {
            next_due = schedule::rebase(next_due, period, p, offset(Instant::now()));
            period = p;
        }
    }
}
