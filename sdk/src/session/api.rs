//! [`Session`], the public face of one lock-server session: how it starts
//! (after L1, spawning its heartbeat task), what it tells about itself, and
//! the calls on its handles — the local checks (D3, D4), the
//! server-confirmed check (L7), release (L6), close (L3) — and listener
//! registration. Acquire (L4) is in [`acquire`](super::acquire).

use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fencepost_api::lock::LockState;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use tokio::sync::Notify;
use tracing::debug;

use super::fault::HeartbeatFault;
use super::handle::{Liveness, LockHandle};
use super::heartbeat;
use super::listeners::{ListenerOutcome, Listeners, LockLostEvent};
use super::mutex::lock;
use super::renewals::RenewalObserver;
use super::shared::SessionShared;
use crate::clock::MonoTime;
use crate::error::{LockError, LockLost, LostReason};
use crate::inner::ClientInner;
use crate::lease;
use crate::metrics::DeadlineKind;
use crate::transport::GrantRef;

/// One lock-server session: its heartbeat task, its handles, its listeners.
///
/// Safe to share between tasks (`&Session` is enough for every call but
/// [`close`](Self::close)). Dropping it stops the heartbeat task (the server
/// then expires the session after its TTL plus grace); [`close`](Self::close)
/// also deletes it on the server.
pub struct Session {
    /// What the calls and the heartbeat task share.
    pub(super) shared: Arc<SessionShared>,
    /// The heartbeat task, aborted on close or drop.
    pub(super) heartbeat: tokio::task::JoinHandle<()>,
}

impl Drop for Session {
    /// Stops the heartbeat task; like [`close`](Session::close), reports a
    /// loss the task had not reported yet (no L3 is sent).
    fn drop(&mut self) {
        self.heartbeat.abort();
        self.shared.stop(self.shared.clock.now());
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
    /// Builds the session after a successful L1 (sent at `opened_send`, which
    /// gave `deadline`) and spawns its heartbeat task.
    pub(crate) fn start(
        client: Arc<ClientInner>,
        id: String,
        owner_id: &str,
        ttl_ms: u64,
        (opened_send, deadline): (MonoTime, MonoTime),
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
            last_ack_send_nanos: AtomicU64::new(opened_send.as_nanos()),
            handles: Mutex::new(Vec::new()),
            listeners: Listeners::default(),
            loss_reported: AtomicBool::new(false),
            wake: Notify::new(),
            rng: Mutex::new(rng),
            faults: Default::default(),
            renewals: Default::default(),
        });
        let heartbeat = tokio::spawn(heartbeat::run(shared.clone()));
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
    /// `min(session_ttl, shortest live lease) × (1 − margin) / k` (k: the
    /// configured heartbeat divisor, 3 by default).
    pub fn heartbeat_period(&self) -> Duration {
        self.shared.current_period()
    }

    /// Whether this session is lost, and why: a loss flag, or its client
    /// deadline passed (one clock read; recorded as the loss). A terminal
    /// state: `Some` never goes back to `None`. A worker that checks this
    /// between payouts sees a session that lapsed with no handle and no call
    /// in flight. (A critical section checks its handle with
    /// [`check_still_held`](Self::check_still_held).)
    pub fn lost_reason(&self) -> Option<LostReason> {
        self.shared.live.lost_at(self.shared.clock.now())
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
                    let ppm = s.margin_ppm(h.lease_ms());
                    h.own
                        .shrink_deadline(lease::client_deadline(reply.send, rem_ms, ppm));
                    s.client.metrics.margin_applied(DeadlineKind::Confirm, ppm);
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
    /// reported, it is called at once (on this thread) for each of them. A
    /// loss the task had not reported when the session is closed or dropped
    /// is reported then, on the closing task.
    ///
    /// Not called for handles the caller gave up itself ([`release`](Self::release),
    /// [`close`](Self::close)).
    pub fn on_lock_lost<F, R>(&self, listener: F)
    where
        F: Fn(&LockLostEvent) -> R + Send + Sync + 'static,
        R: ListenerOutcome,
    {
        self.shared.listeners.register(listener);
    }

    /// Sets the observer of this session's renewals (L5): told just before
    /// each is sent and once more with its outcome ([`RenewalObserver`]).
    /// Set it before the first acquire to see every renewal. One per
    /// session: `false` (and nothing changed) when one is set already.
    pub fn set_renewal_observer(&self, observer: Arc<dyn RenewalObserver>) -> bool {
        self.shared.renewals.set(observer).is_ok()
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
    /// A session that was already lost (a flag, or its deadline passed) and
    /// not yet reported by the heartbeat task is reported here instead:
    /// `session_lost` logged and counted, listeners fired on this task for
    /// its handles. Never fails: a transport error is logged at debug level.
    pub async fn close(self) {
        let s = &self.shared;
        self.heartbeat.abort();
        s.stop(s.clock.now());
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
        self.shared.faults.inject(fault);
        self.shared.wake.notify_one();
    }
}
