//! [`Session`] and [`LockHandle`]: the handle registry, the deadlines, the
//! loss state, the listeners, and the calls that take a handle.
//!
//! Deadlines and loss flags live in atomics ([`Liveness`]), shared between a
//! handle and its session, so [`Session::check_still_held`] is one clock read
//! and a few atomic loads: no lock, no allocation, no network. Anyone may
//! *discover* a loss (a check that finds a deadline reached, a call that gets
//! 404/410/409) and set the flag; only the heartbeat task *reports* it
//! (listeners, `session_lost` / `lease_expired` logs, counters), once.
//!
//! Loss is terminal: a flag once set is never cleared, and a successful reply
//! that arrives after the deadline it would have extended does not revive
//! anything.

use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use fencepost_api::lock::{LockState, validate_key};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use tokio::sync::Notify;
use tracing::{debug, error, warn};

use crate::acquire::{AcquireOptions, Backoff};
use crate::client::{ClientInner, duration_ms};
use crate::clock::{Clock, MonoTime};
use crate::error::{LockError, LockLost, LostReason};
use crate::lease;
use crate::transport::GrantRef;

/// A deadline and a loss flag. A handle has one for its lease; a session has
/// one shared by all its handles.
pub(crate) struct Liveness {
    /// The client deadline, nanoseconds on the client's clock.
    deadline_nanos: AtomicU64,
    /// 0 while live, else a [`LostReason::code`]. Set once, never cleared.
    lost: AtomicU8,
}

impl Liveness {
    fn new(deadline: MonoTime) -> Self {
        Liveness {
            deadline_nanos: AtomicU64::new(deadline.as_nanos()),
            lost: AtomicU8::new(0),
        }
    }

    /// The current client deadline.
    #[inline]
    pub(crate) fn deadline(&self) -> MonoTime {
        MonoTime::from_nanos(self.deadline_nanos.load(Ordering::Acquire))
    }

    /// Stores a deadline computed from a successful exchange.
    pub(crate) fn set_deadline(&self, deadline: MonoTime) {
        self.deadline_nanos
            .store(deadline.as_nanos(), Ordering::Release);
    }

    /// Moves the deadline earlier if `candidate` is earlier (never later).
    pub(crate) fn shrink_deadline(&self, candidate: MonoTime) {
        self.deadline_nanos
            .fetch_min(candidate.as_nanos(), Ordering::AcqRel);
    }

    /// Why this is lost, if it is.
    #[inline]
    pub(crate) fn lost_reason(&self) -> Option<LostReason> {
        LostReason::from_code(self.lost.load(Ordering::Acquire))
    }

    /// Marks it lost for `reason` unless it already is; returns the reason in force.
    pub(crate) fn mark_lost(&self, reason: LostReason) -> LostReason {
        match self
            .lost
            .compare_exchange(0, reason.code(), Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => reason,
            Err(prev) => LostReason::from_code(prev).unwrap_or(reason),
        }
    }
}

/// The state behind a [`LockHandle`], shared with the session's registry and
/// the heartbeat task.
pub(crate) struct HandleShared {
    pub(crate) key: Arc<str>,
    pub(crate) token: u64,
    /// The TTL asked for at acquire; renewals ask for it again.
    pub(crate) requested_ttl_ms: u64,
    /// The lease granted by the latest successful L4/L5.
    pub(crate) lease_ms: AtomicU64,
    /// The handle's own deadline and loss flag.
    pub(crate) own: Liveness,
    /// The session's deadline and loss flag.
    pub(crate) session: Arc<Liveness>,
}

impl HandleShared {
    /// The check at `now`: both deadlines in the future and no loss flag.
    /// No lock, no allocation.
    #[inline]
    pub(crate) fn check_at(&self, now: MonoTime) -> Result<(), LockLost> {
        let flags =
            self.own.lost.load(Ordering::Acquire) | self.session.lost.load(Ordering::Acquire);
        if flags == 0 && !now.has_reached(self.usable_deadline()) {
            return Ok(());
        }
        Err(self.lost_at(now))
    }

    /// `min(own deadline, session deadline)`.
    #[inline]
    pub(crate) fn usable_deadline(&self) -> MonoTime {
        self.own.deadline().min(self.session.deadline())
    }

    /// Remaining usable lease at `now`, or the loss.
    pub(crate) fn remaining_at(&self, now: MonoTime) -> Result<Duration, LockLost> {
        self.check_at(now)?;
        Ok(lease::remaining(now, self.usable_deadline()))
    }

    /// The cold path of [`check_at`](Self::check_at): records a deadline loss
    /// (terminal, so a later successful reply cannot revive it) and builds the error.
    #[cold]
    fn lost_at(&self, now: MonoTime) -> LockLost {
        let reason = if let Some(r) = self.session.lost_reason() {
            r
        } else if let Some(r) = self.own.lost_reason() {
            r
        } else if now.has_reached(self.session.deadline()) {
            self.session.mark_lost(LostReason::Deadline)
        } else {
            self.own.mark_lost(LostReason::Deadline)
        };
        self.lost_error(reason)
    }

    fn lost_error(&self, reason: LostReason) -> LockLost {
        LockLost {
            key: self.key.clone(),
            token: self.token,
            reason,
        }
    }

    /// Whether a loss flag (own or session) is set.
    pub(crate) fn flagged(&self) -> Option<LostReason> {
        self.own
            .lost_reason()
            .or_else(|| self.session.lost_reason())
    }
}

/// A granted lock: its key, fencing token and client deadline.
///
/// The token is what the caller passes downstream (e.g. rail-stub claim and
/// submit bodies `{"token": N}`); it never changes on renewal. There is no
/// ambient "current lock": pass the handle explicitly.
pub struct LockHandle {
    shared: Arc<HandleShared>,
}

impl LockHandle {
    /// The locked key.
    pub fn key(&self) -> &str {
        &self.shared.key
    }

    /// The fencing token of this grant (strictly increasing per key).
    pub fn token(&self) -> u64 {
        self.shared.token
    }

    /// The handle's own client deadline (`send + lease × (1 − margin)` of the
    /// latest successful L4/L5), on the client's clock. The handle is usable
    /// only while this *and* its session's deadline are in the future.
    pub fn client_deadline(&self) -> MonoTime {
        self.shared.own.deadline()
    }

    /// The lease granted by the latest successful acquire or renew, in ms.
    pub fn lease_ms(&self) -> u64 {
        self.shared.lease_ms.load(Ordering::Acquire)
    }
}

impl fmt::Debug for LockHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockHandle")
            .field("key", &self.shared.key)
            .field("token", &self.shared.token)
            .field("lease_ms", &self.lease_ms())
            .field("client_deadline", &self.client_deadline())
            .finish()
    }
}

/// What a lost-lock listener is told.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LockLostEvent {
    /// The lost grant's key.
    pub key: Arc<str>,
    /// The lost grant's fencing token.
    pub token: u64,
    /// The session that held it.
    pub session_id: Arc<str>,
    /// Why it was lost.
    pub reason: LostReason,
}

/// What a listener may return: `()`, or a `Result` whose `Err` is logged.
pub trait ListenerOutcome {
    /// `Some(message)` when the listener reports a failure.
    fn into_failure(self) -> Option<String>;
}

impl ListenerOutcome for () {
    fn into_failure(self) -> Option<String> {
        None
    }
}

impl<E: fmt::Display> ListenerOutcome for Result<(), E> {
    fn into_failure(self) -> Option<String> {
        self.err().map(|e| e.to_string())
    }
}

/// A registered listener, type-erased.
type Listener = Arc<dyn Fn(&LockLostEvent) -> Option<String> + Send + Sync>;

/// Listeners and the losses already reported, under one mutex so that a
/// listener registered concurrently with a report sees each loss exactly once.
#[derive(Default)]
struct ListenerState {
    listeners: Vec<Listener>,
    reported: Vec<LockLostEvent>,
}

/// A fault the heartbeat task can be told to simulate. For tests and the
/// fault experiments; production code has no reason to call this.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeartbeatFault {
    /// Normal operation (clears [`Mute`](Self::Mute)).
    None,
    /// The task keeps ticking and watching deadlines but sends nothing (no
    /// L2, no L5), as if every heartbeat were dropped: "heartbeat stopped".
    Mute,
    /// The task does nothing at all for this long, starting now (a stalled or
    /// paused task), then runs its overdue tick at once.
    Stall(Duration),
}

/// Everything a session's calls and its heartbeat task share.
pub(crate) struct SessionShared {
    pub(crate) client: Arc<ClientInner>,
    /// The client's clock (copied here: one pointer hop less on the hot check).
    pub(crate) clock: Arc<dyn Clock>,
    pub(crate) id: Arc<str>,
    pub(crate) owner_id: String,
    /// The session's deadline and loss flag, shared with every handle.
    pub(crate) live: Arc<Liveness>,
    /// The session TTL granted by the latest L1/L2, ms.
    pub(crate) ttl_ms: AtomicU64,
    /// Live handles, plus lost ones the heartbeat task has not reported yet.
    /// A std mutex, held only to add/remove/copy (never across an await).
    pub(crate) handles: Mutex<Vec<Arc<HandleShared>>>,
    /// Listeners and reported losses.
    listeners: Mutex<ListenerState>,
    /// Set once the session loss has been reported (exactly once).
    loss_reported: AtomicBool,
    /// Wakes the heartbeat task early: a new handle (the period may shrink)
    /// or an injected fault.
    pub(crate) wake: Notify,
    /// The acquire jitter RNG (ChaCha8, client seed, stream = session ordinal).
    rng: Mutex<ChaCha8Rng>,
    /// [`HeartbeatFault::Mute`] in force.
    pub(crate) fault_mute: AtomicBool,
    /// A pending [`HeartbeatFault::Stall`], ns (0 = none).
    fault_stall_nanos: AtomicU64,
    /// The period the task used last, ns (for [`Session::heartbeat_period`]).
    period_nanos: AtomicU64,
}

/// Locks a std mutex, ignoring poisoning (listeners run outside our locks, so
/// a poisoned guard only means a panic elsewhere; the data is still consistent).
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl SessionShared {
    /// The margin (ppm) for a grant of `granted_ms`.
    pub(crate) fn margin_ppm(&self, granted_ms: u64) -> u64 {
        self.client.margin_ppm(granted_ms)
    }

    /// Computes (and remembers) the heartbeat period:
    /// `min(session_ttl, shortest live lease) × (1 − margin) / 3`.
    pub(crate) fn current_period(&self) -> Duration {
        let ttl = self.ttl_ms.load(Ordering::Acquire);
        let shortest = lock(&self.handles)
            .iter()
            .filter(|h| h.flagged().is_none())
            .map(|h| h.lease_ms.load(Ordering::Acquire))
            .min();
        let base = shortest.map_or(ttl, |l| l.min(ttl));
        let period = lease::heartbeat_period(ttl, shortest, self.margin_ppm(base));
        self.period_nanos.store(
            u64::try_from(period.as_nanos()).unwrap_or(u64::MAX),
            Ordering::Relaxed,
        );
        period
    }

    /// Takes a pending stall, if any.
    pub(crate) fn take_stall(&self) -> Option<Duration> {
        match self.fault_stall_nanos.swap(0, Ordering::AcqRel) {
            0 => None,
            n => Some(Duration::from_nanos(n)),
        }
    }

    /// Reports the session loss once: `session_lost` log, counter, every
    /// handle lost, listeners fired. Called by the heartbeat task only.
    pub(crate) fn report_session_loss(&self, now: MonoTime) {
        let reason = self.live.mark_lost(LostReason::Deadline);
        if self.loss_reported.swap(true, Ordering::AcqRel) {
            return;
        }
        let handles = std::mem::take(&mut *lock(&self.handles));
        if reason == LostReason::SessionClosed {
            return;
        }
        let overrun = now.saturating_duration_since(self.live.deadline());
        warn!(
            name: "session_lost",
            event = "session_lost",
            session_id = %self.id,
            owner_id = %self.owner_id,
            reason = reason.session_label().unwrap_or("deadline"),
            overrun_ms = overrun.as_millis() as u64,
            handles = handles.len(),
            "session lost: {reason}"
        );
        self.client.metrics.session_lost(reason);
        for h in handles {
            let r = h.own.mark_lost(reason);
            self.report_handle(&h, r);
        }
    }

    /// Reports every registered handle that is lost (flag set, or its own
    /// deadline reached at `now`) and drops it from the registry: a
    /// `lease_expired` log and the listeners. Called by the heartbeat task only.
    pub(crate) fn report_handle_losses(&self, now: MonoTime) {
        let mut lost = Vec::new();
        lock(&self.handles).retain(|h| {
            let gone = h.own.lost_reason().is_some() || now.has_reached(h.own.deadline());
            if gone {
                lost.push(h.clone());
            }
            !gone
        });
        for h in lost {
            let reason = h.own.mark_lost(LostReason::Deadline);
            let deadline = h.own.deadline();
            let ago_ms = if now >= deadline {
                now.saturating_duration_since(deadline).as_millis() as i64
            } else {
                -(deadline.saturating_duration_since(now).as_millis() as i64)
            };
            warn!(
                name: "lease_expired",
                event = "lease_expired",
                key = %h.key,
                token = h.token,
                session_id = %self.id,
                client_deadline_ms_ago = ago_ms,
                reason = %reason,
                "lease lost: {reason}"
            );
            self.report_handle(&h, reason);
        }
    }

    /// Fires every listener for one lost handle, catching panics and failures.
    fn report_handle(&self, h: &HandleShared, reason: LostReason) {
        self.client.metrics.handle_lost();
        let event = LockLostEvent {
            key: h.key.clone(),
            token: h.token,
            session_id: self.id.clone(),
            reason,
        };
        let listeners = {
            let mut st = lock(&self.listeners);
            st.reported.push(event.clone());
            st.listeners.clone()
        };
        for l in &listeners {
            call_listener(l, &event);
        }
    }
}

/// Runs one listener; a panic or an `Err` is logged and goes no further.
fn call_listener(listener: &Listener, event: &LockLostEvent) {
    match catch_unwind(AssertUnwindSafe(|| listener(event))) {
        Ok(None) => {}
        Ok(Some(failure)) => warn!(
            key = %event.key, token = event.token, error = %failure,
            "on_lock_lost listener failed"
        ),
        Err(panic) => {
            let msg = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "non-string panic payload".into());
            error!(key = %event.key, token = event.token, panic = %msg, "on_lock_lost listener panicked");
        }
    }
}

/// One lock-server session: its heartbeat task, its handles, its listeners.
///
/// Safe to share between tasks (`&Session` is enough for every call but
/// [`close`](Self::close)). Dropping it stops the heartbeat task (the server
/// then expires the session after its TTL plus grace); [`close`](Self::close)
/// also deletes it on the server.
pub struct Session {
    shared: Arc<SessionShared>,
    /// The heartbeat task, aborted on close or drop.
    heartbeat: tokio::task::JoinHandle<()>,
}

impl Drop for Session {
    fn drop(&mut self) {
        self.heartbeat.abort();
    }
}

impl fmt::Debug for Session {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Session")
            .field("id", &self.shared.id)
            .field("owner_id", &self.shared.owner_id)
            .field("ttl_ms", &self.ttl_ms())
            .field("client_deadline", &self.client_deadline())
            .finish_non_exhaustive()
    }
}

impl Session {
    /// Builds the session after a successful L1 and spawns its heartbeat task.
    pub(crate) fn start(
        client: Arc<ClientInner>,
        id: String,
        owner_id: &str,
        ttl_ms: u64,
        deadline: MonoTime,
        ordinal: u64,
    ) -> Session {
        let mut rng = ChaCha8Rng::seed_from_u64(client.config.seed);
        rng.set_stream(ordinal);
        let shared = Arc::new(SessionShared {
            clock: client.clock.clone(),
            client,
            id: Arc::from(id),
            owner_id: owner_id.to_string(),
            live: Arc::new(Liveness::new(deadline)),
            ttl_ms: AtomicU64::new(ttl_ms),
            handles: Mutex::new(Vec::new()),
            listeners: Mutex::new(ListenerState::default()),
            loss_reported: AtomicBool::new(false),
            wake: Notify::new(),
            rng: Mutex::new(rng),
            fault_mute: AtomicBool::new(false),
            fault_stall_nanos: AtomicU64::new(0),
            period_nanos: AtomicU64::new(0),
        });
        shared.current_period();
        let heartbeat = tokio::spawn(crate::heartbeat::run(shared.clone()));
        Session { shared, heartbeat }
    }

    /// The session id the server assigned.
    pub fn id(&self) -> &str {
        &self.shared.id
    }

    /// The owner id given at open.
    pub fn owner_id(&self) -> &str {
        &self.shared.owner_id
    }

    /// The session TTL granted by the latest L1/L2, in ms.
    pub fn ttl_ms(&self) -> u64 {
        self.shared.ttl_ms.load(Ordering::Acquire)
    }

    /// The session's client deadline (`send + ttl × (1 − margin)` of the latest
    /// successful L1/L2).
    pub fn client_deadline(&self) -> MonoTime {
        self.shared.live.deadline()
    }

    /// The heartbeat period currently in force:
    /// `min(session_ttl, shortest live lease) × (1 − margin) / 3`.
    pub fn heartbeat_period(&self) -> Duration {
        self.shared.current_period()
    }

    /// Whether this session is lost, and why. A terminal state: `Some` never
    /// goes back to `None`. (For dashboards; a critical section checks its
    /// handle with [`check_still_held`](Self::check_still_held).)
    pub fn lost_reason(&self) -> Option<LostReason> {
        self.shared.live.lost_reason()
    }

    /// ADR-006 D3: `Ok(())` while both the handle's and the session's client
    /// deadlines are in the future and nothing reported a loss; otherwise
    /// [`LockLost`], and from then on always `LockLost`.
    ///
    /// Local: one monotonic clock read, a few atomic loads, no lock, no
    /// allocation, no network. `Ok` is a liveness narrowing, not a permission:
    /// the lease can lapse right after it returns; the fencing token, checked
    /// downstream, is the safety mechanism.
    #[inline]
    pub fn check_still_held(&self, handle: &LockHandle) -> Result<(), LockLost> {
        handle.shared.check_at(self.shared.clock.now())
    }

    /// The configured form of D3. With `confirm_with_server` off (the
    /// default) it is [`check_still_held`](Self::check_still_held). With it on,
    /// after the local check it asks the server (one L7 hop): the key must be
    /// HELD with this token by this session, else the handle is lost. The
    /// server's `remaining_ms` may only shrink the client deadline, and the
    /// hop's cost counts: the deadline is checked again after the reply.
    /// A failed hop (503, timeout, transport) is returned as that error; it
    /// does not lose the handle and moves no deadline.
    pub async fn check_still_held_confirmed(&self, handle: &LockHandle) -> Result<(), LockError> {
        let s = &self.shared;
        let h = &handle.shared;
        let now = s.clock.now();
        let left = h.remaining_at(now)?;
        if !s.client.config.confirm_with_server {
            return Ok(());
        }
        let timeout = s.client.config.request_timeout.min(left);
        let reply = s.client.http.info(&*s.clock, &h.key, timeout).await;
        match reply.result {
            Ok(info) => {
                // Tokens are unique per key: HELD with our token is our grant.
                let ours = info.state == LockState::Held && info.token == h.token;
                if !ours {
                    let reason = h.own.mark_lost(LostReason::NotHeldOnServer);
                    return Err(h.lost_error(reason).into());
                }
                if let Some(rem_ms) = info.remaining_ms {
                    let ppm = s.margin_ppm(h.lease_ms.load(Ordering::Acquire));
                    h.own
                        .shrink_deadline(lease::client_deadline(reply.send, rem_ms, ppm));
                }
                Ok(self.check_still_held(handle)?)
            }
            Err(LockError::LockUnknown) => {
                let reason = h.own.mark_lost(LostReason::NotHeldOnServer);
                Err(h.lost_error(reason).into())
            }
            Err(e) => Err(e),
        }
    }

    /// The usable lease left on `handle`: `min(handle, session deadline) − now`.
    pub fn remaining(&self, handle: &LockHandle) -> Result<Duration, LockLost> {
        handle.shared.remaining_at(self.shared.clock.now())
    }

    /// ADR-006 D4, do not start what you cannot finish: `Ok(())` only if the
    /// remaining client-side lease is strictly greater than `worst_case_cost`.
    /// Every refusal ([`LockError::InsufficientLease`], or
    /// [`LockError::LockLost`]) counts one `lock.lease.abandoned`; the caller
    /// then abandons the step (cheap and always allowed, D6).
    pub fn ensure_time_for(
        &self,
        handle: &LockHandle,
        worst_case_cost: Duration,
    ) -> Result<(), LockError> {
        let now = self.shared.clock.now();
        let refused = match handle.shared.remaining_at(now) {
            Ok(left) if left > worst_case_cost => return Ok(()),
            Ok(left) => LockError::InsufficientLease {
                remaining: left,
                needed: worst_case_cost,
            },
            Err(lost) => LockError::LockLost(lost),
        };
        self.shared.client.metrics.abandoned();
        debug!(key = %handle.shared.key, token = handle.shared.token, error = %refused, "step abandoned");
        Err(refused)
    }

    /// Registers a listener called once for every handle of this session that
    /// is lost, on the heartbeat task, in registration order. A panic or an
    /// `Err` from it is caught and logged. Registered after losses were
    /// reported, it is called at once (on this thread) for each of them.
    ///
    /// Not called for handles the caller gave up itself ([`release`](Self::release),
    /// [`close`](Self::close)).
    pub fn on_lock_lost<F, R>(&self, listener: F)
    where
        F: Fn(&LockLostEvent) -> R + Send + Sync + 'static,
        R: ListenerOutcome,
    {
        let listener: Listener = Arc::new(move |e: &LockLostEvent| listener(e).into_failure());
        let already = {
            let mut st = lock(&self.shared.listeners);
            st.listeners.push(listener.clone());
            st.reported.clone()
        };
        for event in &already {
            call_listener(&listener, event);
        }
    }

    /// L4, bounded (T-041). Tries at once; on `LOCK_HELD`, a 503 or a
    /// transport failure, waits `max(retry_after, jitter)` (full-jitter
    /// exponential backoff from the session's seeded RNG), never past
    /// `opts.wait_budget`, and tries again, at most `opts.max_attempts` times.
    /// Gives up with [`LockError::LockHeld`] (or the last transient error)
    /// when the budget is spent, or at once when `retry_after` says the key
    /// cannot be free within what is left.
    ///
    /// The handle's deadline is `send + granted × (1 − margin)` with `send`
    /// read just before the successful request was written.
    pub async fn acquire(&self, key: &str, opts: AcquireOptions) -> Result<LockHandle, LockError> {
        let s = &self.shared;
        validate_key(key).map_err(|e| LockError::BadRequest {
            message: e.to_string(),
        })?;
        let ttl_ms = duration_ms(opts.ttl.unwrap_or(s.client.config.default_ttl));
        let start = s.clock.now();
        let mut slept = Duration::ZERO;
        let mut backoff = Backoff::new(opts.base_backoff, opts.max_backoff);
        let mut attempts: u32 = 0;
        loop {
            if let Some(reason) = s.live.lost_reason() {
                return Err(LockError::SessionLost { reason });
            }
            attempts += 1;
            let reply = s
                .client
                .http
                .acquire(
                    &*s.clock,
                    key,
                    &s.id,
                    ttl_ms,
                    s.client.config.request_timeout,
                )
                .await;
            let err = match reply.result {
                Ok(granted) => return self.register_grant(key, ttl_ms, reply.send, granted),
                Err(e) => e,
            };
            if let Some(reason) = err.session_loss() {
                s.live.mark_lost(reason);
                s.wake.notify_one();
                return Err(err);
            }
            let hint = match &err {
                LockError::LockHeld { retry_after_ms, .. } => {
                    Duration::from_millis(retry_after_ms.unwrap_or(0))
                }
                e if e.is_transient() => Duration::ZERO,
                _ => return Err(err),
            };
            let give_up = |err: LockError| match err {
                LockError::LockHeld { retry_after_ms, .. } => LockError::LockHeld {
                    key: key.to_string(),
                    retry_after_ms,
                    attempts,
                },
                other => other,
            };
            // Both are lower bounds of the time spent; the larger one counts
            // (a fake clock may not move while the timers do).
            let spent = s.clock.now().saturating_duration_since(start).max(slept);
            let left = opts.wait_budget.saturating_sub(spent);
            if attempts >= opts.max_attempts || left.is_zero() || hint > left {
                debug!(key, attempts, ?spent, error = %err, "acquire gives up");
                return Err(give_up(err));
            }
            let jitter = {
                let mut rng = lock(&s.rng);
                backoff.next_delay(&mut *rng)
            };
            let wait = hint.max(jitter).min(left);
            debug!(key, attempts, ?wait, error = %err, "acquire retries");
            tokio::time::sleep(wait).await;
            slept += wait;
        }
    }

    /// Turns a successful L4 into a registered handle.
    fn register_grant(
        &self,
        key: &str,
        requested_ttl_ms: u64,
        send: MonoTime,
        granted: fencepost_api::lock::LeaseGranted,
    ) -> Result<LockHandle, LockError> {
        let s = &self.shared;
        if granted.key != key {
            return Err(LockError::UnexpectedReply {
                status: 200,
                detail: format!("acquire of {key:?} was answered for {:?}", granted.key),
            });
        }
        let ppm = s.margin_ppm(granted.lease_ms);
        let shared = Arc::new(HandleShared {
            key: Arc::from(key),
            token: granted.token,
            requested_ttl_ms,
            lease_ms: AtomicU64::new(granted.lease_ms),
            own: Liveness::new(lease::client_deadline(send, granted.lease_ms, ppm)),
            session: s.live.clone(),
        });
        {
            // Checked under the registry lock: the heartbeat task sets the
            // session flag before it empties the registry, so a handle is
            // either refused here or reported by the task, never neither.
            let mut handles = lock(&s.handles);
            if let Some(reason) = s.live.lost_reason() {
                return Err(LockError::SessionLost { reason });
            }
            handles.push(shared.clone());
        }
        // The period may have shrunk with this lease.
        s.wake.notify_one();
        Ok(LockHandle { shared })
    }

    /// L6: releases the grant. A lost handle (flag set or a deadline reached)
    /// fails with [`LockError::LockLost`] without a round trip. The handle
    /// leaves the registry first, so it is never renewed again: if the
    /// exchange fails (503, timeout), the lease lapses on the server after
    /// its end plus grace.
    pub async fn release(&self, handle: LockHandle) -> Result<(), LockError> {
        let s = &self.shared;
        let h = &handle.shared;
        if !Arc::ptr_eq(&h.session, &s.live) {
            return Err(LockError::ForeignHandle);
        }
        // A lost handle stays registered so the heartbeat task reports it.
        h.check_at(s.clock.now())?;
        lock(&s.handles).retain(|x| !Arc::ptr_eq(x, h));
        let grant = GrantRef {
            key: &h.key,
            token: h.token,
        };
        let reply = s
            .client
            .http
            .release(&*s.clock, grant, &s.id, s.client.config.request_timeout)
            .await;
        match reply.result {
            Ok(()) => Ok(()),
            Err(e) => {
                if let Some(reason) = e.session_loss() {
                    s.live.mark_lost(reason);
                    s.wake.notify_one();
                } else if matches!(e, LockError::LockLost(_)) {
                    h.own.mark_lost(LostReason::LeaseLost);
                }
                Err(e)
            }
        }
    }

    /// L3, best effort: stops the heartbeat task, marks the session (and
    /// every handle) lost as `SessionClosed` without firing listeners, and
    /// deletes the session on the server (which releases its locks at once).
    /// Never fails: a transport error is logged at debug level.
    pub async fn close(self) {
        let s = &self.shared;
        self.heartbeat.abort();
        s.live.mark_lost(LostReason::SessionClosed);
        if s.live.lost_reason() == Some(LostReason::SessionClosed) {
            s.loss_reported.store(true, Ordering::Release);
        }
        let handles = std::mem::take(&mut *lock(&s.handles));
        for h in &handles {
            h.own.mark_lost(LostReason::SessionClosed);
        }
        let reply = s
            .client
            .http
            .delete_session(&*s.clock, &s.id, s.client.config.request_timeout)
            .await;
        if let Err(e) = reply.result {
            debug!(session_id = %s.id, error = %e, "closing the session on the server failed");
        }
    }

    /// Makes the heartbeat task simulate `fault` (see [`HeartbeatFault`]).
    /// For tests and fault experiments only.
    pub fn inject_heartbeat_fault(&self, fault: HeartbeatFault) {
        let s = &self.shared;
        match fault {
            HeartbeatFault::None => s.fault_mute.store(false, Ordering::Release),
            HeartbeatFault::Mute => s.fault_mute.store(true, Ordering::Release),
            HeartbeatFault::Stall(d) => {
                let n = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX).max(1);
                s.fault_stall_nanos.store(n, Ordering::Release);
            }
        }
        s.wake.notify_one();
    }
}
