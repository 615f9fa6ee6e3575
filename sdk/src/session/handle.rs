//! The state of one grant and of one session's deadline: [`Liveness`] (a
//! deadline and a terminal loss flag in atomics), [`HandleShared`] (a grant:
//! key, token, lease, its own liveness and its session's) and the public
//! [`LockHandle`] that wraps it.
//!
//! Deadlines move only through [`Liveness::apply_grant`], the thin atomic
//! wrapper around the pure rule [`lease::apply_grant`]: `send + granted ×
//! (1 − margin)` from the reply's send, refused for a reply read at or after
//! the deadline it would extend. The hot check ([`HandleShared::check_at`])
//! is one comparison of a clock reading with two atomics: no lock, no
//! allocation.

use std::fmt;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::time::Duration;

use crate::clock::MonoTime;
use crate::error::{LockLost, LostReason};
use crate::lease::{self, GrantRefused, GrantReply};

/// A deadline and a loss flag. A handle has one for its lease; a session has
/// one shared by all its handles.
pub(crate) struct Liveness {
    /// The client deadline, nanoseconds on the client's clock.
    deadline_nanos: AtomicU64,
    /// 0 while live, else a [`LostReason::code`]. Set once, never cleared.
    lost: AtomicU8,
}

impl Liveness {
    /// A live state whose deadline is `deadline`.
    pub(crate) fn new(deadline: MonoTime) -> Self {
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

    /// Applies a successful reply ([`lease::apply_grant`]): the new deadline
    /// is `send + granted × (1 − margin)`, unless the reply was read at or
    /// after the current deadline, which refuses it (and moves nothing).
    /// Compare-and-swap, so a concurrent [`shrink_deadline`](Self::shrink_deadline)
    /// is never judged against a stale value.
    pub(crate) fn apply_grant(
        &self,
        reply: GrantReply,
        margin_ppm: u64,
    ) -> Result<MonoTime, GrantRefused> {
        let mut current = self.deadline_nanos.load(Ordering::Acquire);
        loop {
            let next = lease::apply_grant(MonoTime::from_nanos(current), reply, margin_ppm)?;
            match self.deadline_nanos.compare_exchange_weak(
                current,
                next.as_nanos(),
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => return Ok(next),
                Err(seen) => current = seen,
            }
        }
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

    /// The raw flag (0 = live), for the hot check.
    #[inline]
    fn lost_code(&self) -> u8 {
        self.lost.load(Ordering::Acquire)
    }

    /// The loss in force at `now`: the flag, or (recorded as such, terminal)
    /// the deadline once `now` has reached it.
    pub(crate) fn lost_at(&self, now: MonoTime) -> Option<LostReason> {
        if let Some(r) = self.lost_reason() {
            return Some(r);
        }
        now.has_reached(self.deadline())
            .then(|| self.mark_lost(LostReason::Deadline))
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
    /// The locked key (shared, so building a [`LockLost`] never allocates).
    pub(crate) key: Arc<str>,
    /// The fencing token of the grant; renewals never change it.
    pub(crate) token: u64,
    /// The TTL asked for at acquire; renewals ask for it again. Never used
    /// for a deadline (the reply's granted TTL is).
    pub(crate) requested_ttl_ms: u64,
    /// The lease granted by the latest successful L4/L5.
    lease_ms: AtomicU64,
    /// The handle's own deadline and loss flag.
    pub(crate) own: Liveness,
    /// The session's deadline and loss flag.
    pub(crate) session: Arc<Liveness>,
}

impl HandleShared {
    /// A handle for the L4 grant `reply` of `key` with `token`, in `session`:
    /// its deadline is `send + granted × (1 − margin)`.
    pub(crate) fn granted(
        key: &str,
        token: u64,
        requested_ttl_ms: u64,
        reply: GrantReply,
        margin_ppm: u64,
        session: Arc<Liveness>,
    ) -> Self {
        HandleShared {
            key: Arc::from(key),
            token,
            requested_ttl_ms,
            lease_ms: AtomicU64::new(reply.granted_ms),
            own: Liveness::new(lease::client_deadline(
                reply.send,
                reply.granted_ms,
                margin_ppm,
            )),
            session,
        }
    }

    /// Applies a successful L5 (or a holder's re-acquire) to this handle:
    /// the pure rule [`lease::apply_grant`] on its own deadline; on success
    /// the granted lease becomes the handle's `lease_ms`. A refused reply
    /// moves nothing; the caller marks the handle lost.
    pub(crate) fn apply_grant(
        &self,
        reply: GrantReply,
        margin_ppm: u64,
    ) -> Result<MonoTime, GrantRefused> {
        let deadline = self.own.apply_grant(reply, margin_ppm)?;
        self.lease_ms.store(reply.granted_ms, Ordering::Release);
        Ok(deadline)
    }

    /// The lease granted by the latest successful acquire or renew, ms.
    #[inline]
    pub(crate) fn lease_ms(&self) -> u64 {
        self.lease_ms.load(Ordering::Acquire)
    }

    /// The check at `now`: both deadlines in the future and no loss flag.
    /// No lock, no allocation.
    #[inline]
    pub(crate) fn check_at(&self, now: MonoTime) -> Result<(), LockLost> {
        let flags = self.own.lost_code() | self.session.lost_code();
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

    /// The [`LockLost`] of this grant for `reason`.
    pub(crate) fn lost_error(&self, reason: LostReason) -> LockLost {
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
    pub(crate) shared: Arc<HandleShared>,
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
        self.shared.lease_ms()
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

/// Properties of the handle's deadline updates: whatever the
/// requested TTL and however late the reply, a handle's deadline comes from
/// the granted TTL and the send, and a refused reply moves nothing.
#[cfg(test)]
mod proptests {
    use super::*;
    use crate::test_support::proptest_config;
    use proptest::prelude::*;

    /// An L4 or L5 exchange: send, RTT, granted TTL, and a requested TTL at
    /// least as large (a server that clamped down).
    fn exchange() -> impl Strategy<Value = (GrantReply, u64)> {
        (
            prop_oneof![any::<u64>(), 0u64..=86_400_000_000_000],
            prop_oneof![0u64..=5_000_000_000, any::<u64>()],
            0u64..=3_600_000,
            0u64..=3_600_000,
        )
            .prop_map(|(send, rtt, granted, extra)| {
                let reply = GrantReply {
                    send: MonoTime::from_nanos(send),
                    received: MonoTime::from_nanos(send.saturating_add(rtt)),
                    granted_ms: granted,
                };
                (reply, granted.saturating_add(extra))
            })
    }

    proptest! {
        #![proptest_config(proptest_config("handle::apply_grant"))]
        #[test]
        fn handle_deadline_comes_from_the_granted_ttl_and_the_send(
            (first, requested) in exchange(),
            (second, _) in exchange(),
            m in 0..lease::PPM,
        ) {
            let session = Arc::new(Liveness::new(MonoTime::MAX));
            let h = HandleShared::granted("k", 7, requested, first, m, session);
            let d1 = h.own.deadline();
            prop_assert_eq!(d1, lease::client_deadline(first.send, first.granted_ms, m));
            prop_assert!(u128::from(d1.as_nanos())
                <= u128::from(first.send.as_nanos()) + u128::from(first.granted_ms) * 1_000_000);
            prop_assert_eq!(h.lease_ms(), first.granted_ms);

            // A renew: applied from its send, or refused (late) moving nothing.
            match h.apply_grant(second, m) {
                Ok(d2) => {
                    prop_assert!(!second.received.has_reached(d1));
                    prop_assert_eq!(d2, h.own.deadline());
                    prop_assert_eq!(d2, lease::client_deadline(second.send, second.granted_ms, m));
                    prop_assert_eq!(h.lease_ms(), second.granted_ms);
                }
                Err(_) => {
                    prop_assert!(second.received.has_reached(d1));
                    prop_assert_eq!(h.own.deadline(), d1);
                    prop_assert_eq!(h.lease_ms(), first.granted_ms);
                }
            }
            prop_assert_eq!(h.token, 7, "a renew never changes the token");
        }
    }
}
