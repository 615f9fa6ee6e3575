//! The etcd adapter's lease arithmetic: fencepost's own rules
//! (`fencepost_sdk::lease`) applied to an etcd lease, as plain functions and
//! one small atomic state, [`LeaseState`], that the keep-alive task and the
//! worker's checks share. No I/O; every time is a [`MonoTime`] the caller
//! read from its `Clock` (tests drive a fake one).
//!
//! - etcd leases are whole seconds: [`ttl_request_s`] rounds the TTL asked
//!   for *up* (a client deadline is computed from the granted TTL in the
//!   reply, never from the request, so rounding up is safe; it does give the
//!   holder a longer lease than fencepost's server would).
//! - The deadline of a grant (LeaseGrant) and of every keep-alive is
//!   `send + ttl × (1 − margin)` with `send` read immediately before the
//!   request was written (D1, D2), through [`lease::apply_grant`]: a reply
//!   read at or after the deadline it would extend is refused (D5).
//! - A keep-alive answered with TTL ≤ 0 means etcd no longer knows the lease
//!   (it expired and its keys were deleted): the session is lost, like a
//!   fencepost `410`.
//! - A key is attached to the session's lease and has no lease of its own,
//!   so a handle is usable exactly while its session is: `check_still_held`
//!   and `ensure_time_for` compare one clock read with the session deadline.

use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::time::Duration;

use fencepost_sdk::lease::{self, GrantRefused, GrantReply};
use fencepost_sdk::{LockError, LockLost, LostReason, MonoTime};

/// The TTL to ask etcd for, in whole seconds: `ttl` rounded up, at least 1.
pub fn ttl_request_s(ttl: Duration) -> i64 {
    let ms = ttl.as_millis().max(1);
    i64::try_from(ms.div_ceil(1000)).unwrap_or(i64::MAX)
}

/// An etcd TTL (seconds, from a reply) as the milliseconds the SDK's rules
/// take; `None` for TTL ≤ 0 ("lease not found").
pub fn granted_ms(ttl_s: i64) -> Option<u64> {
    u64::try_from(ttl_s)
        .ok()
        .filter(|&s| s > 0)
        .map(|s| s.saturating_mul(1000))
}

/// The loss reasons in the order of their stored codes: reason `i` is stored as `i + 1` (0 = live).
const REASONS: [LostReason; 6] = [
    LostReason::Deadline,
    LostReason::SessionExpired,
    LostReason::SessionUnknown,
    LostReason::LeaseLost,
    LostReason::NotHeldOnServer,
    LostReason::SessionClosed,
];

/// A loss reason as the byte stored in [`LeaseState`].
fn code(reason: LostReason) -> u8 {
    REASONS
        .iter()
        .position(|r| *r == reason)
        .map_or(1, |i| i as u8 + 1)
}

/// The inverse of [`code`]; `None` for 0 (live).
fn reason(code: u8) -> Option<LostReason> {
    REASONS.get(usize::from(code).checked_sub(1)?).copied()
}

/// One etcd lease as the client believes it: a client deadline and a
/// terminal loss flag, in atomics (the keep-alive task writes, the worker's
/// checks read; no lock).
#[derive(Debug)]
pub struct LeaseState {
    /// The client deadline, nanoseconds on the client's clock.
    deadline_nanos: AtomicU64,
    /// 0 while live, else a loss [`code`]. Set once, never cleared.
    lost: AtomicU8,
}

impl LeaseState {
    /// The state after the LeaseGrant `reply`: deadline `send + ttl × (1 − margin)`.
    pub fn granted(reply: GrantReply, margin_ppm: u64) -> Self {
        LeaseState {
            deadline_nanos: AtomicU64::new(
                lease::client_deadline(reply.send, reply.granted_ms, margin_ppm).as_nanos(),
            ),
            lost: AtomicU8::new(0),
        }
    }

    /// The current client deadline.
    pub fn deadline(&self) -> MonoTime {
        MonoTime::from_nanos(self.deadline_nanos.load(Ordering::Acquire))
    }

    /// Applies a successful keep-alive (the SDK's [`lease::apply_grant`]):
    /// the deadline becomes `send + ttl × (1 − margin)`, unless the reply was
    /// read at or after the current deadline, which refuses it and moves
    /// nothing (the caller then marks the lease lost: a late reply revives
    /// nothing).
    pub fn apply_keep_alive(
        &self,
        reply: GrantReply,
        margin_ppm: u64,
    ) -> Result<MonoTime, GrantRefused> {
        let apply = |nanos: u64| lease::apply_grant(MonoTime::from_nanos(nanos), reply, margin_ppm);
        // Judged against the value it replaces, so a concurrent update is never skipped.
        match self
            .deadline_nanos
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |cur| {
                apply(cur).ok().map(MonoTime::as_nanos)
            }) {
            Ok(prev) => apply(prev),
            Err(cur) => apply(cur),
        }
    }

    /// Why the lease is lost, if a loss was recorded.
    pub fn lost_reason(&self) -> Option<LostReason> {
        reason(self.lost.load(Ordering::Acquire))
    }

    /// The loss in force at `now`: the flag, or (recorded, terminal) the
    /// deadline once `now` has reached it.
    pub fn lost_at(&self, now: MonoTime) -> Option<LostReason> {
        if let Some(r) = self.lost_reason() {
            return Some(r);
        }
        now.has_reached(self.deadline())
            .then(|| self.mark_lost(LostReason::Deadline))
    }

    /// Records a loss unless one is recorded; returns the reason in force.
    pub fn mark_lost(&self, why: LostReason) -> LostReason {
        match self
            .lost
            .compare_exchange(0, code(why), Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => why,
            Err(prev) => reason(prev).unwrap_or(why),
        }
    }

    /// D3 for a grant (`key`, `token`) on this lease: the usable lease left
    /// at `now`, or the terminal [`LockLost`].
    pub fn remaining(&self, now: MonoTime, key: &str, token: u64) -> Result<Duration, LockLost> {
        match self.lost_at(now) {
            None => Ok(lease::remaining(now, self.deadline())),
            Some(reason) => Err(LockLost {
                key: key.into(),
                token,
                reason,
            }),
        }
    }

    /// D4: `Ok` only if the lease left at `now` is strictly greater than
    /// `worst_case_cost` (the SDK's `ensure_time_for`, same errors).
    pub fn ensure_time_for(
        &self,
        now: MonoTime,
        key: &str,
        token: u64,
        worst_case_cost: Duration,
    ) -> Result<(), LockError> {
        match self.remaining(now, key, token) {
            Ok(left) if left > worst_case_cost => Ok(()),
            Ok(left) => Err(LockError::InsufficientLease {
                remaining: left,
                needed: worst_case_cost,
            }),
            Err(lost) => Err(LockError::LockLost(lost)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use fencepost_sdk::lease::ppm_nearest;
    use fencepost_sdk::{Clock, FakeClock};

    const MS: Duration = Duration::from_millis(1);

    /// A reply to a request sent at `send_ms` and read at `recv_ms`, granting `ttl_s`.
    fn reply(send: MonoTime, recv: MonoTime, ttl_s: i64) -> GrantReply {
        GrantReply {
            send,
            received: recv,
            granted_ms: granted_ms(ttl_s).expect("a live TTL"),
        }
    }

    #[test]
    fn etcd_ttls_are_whole_seconds_rounded_up_and_zero_means_not_found() {
        assert_eq!(ttl_request_s(Duration::from_millis(500)), 1);
        assert_eq!(ttl_request_s(Duration::from_secs(1)), 1);
        assert_eq!(ttl_request_s(Duration::from_millis(1_001)), 2);
        assert_eq!(ttl_request_s(Duration::ZERO), 1);
        assert_eq!(granted_ms(2), Some(2_000));
        assert_eq!(granted_ms(0), None, "TTL 0: etcd does not know the lease");
        assert_eq!(granted_ms(-1), None);
    }

    #[test]
    fn the_deadline_counts_from_the_send_of_the_grant_not_its_reply() {
        let clock = FakeClock::new(MonoTime::ZERO);
        let send = clock.now();
        clock.advance(300 * MS); // a slow LeaseGrant
        let m = ppm_nearest(0.30);
        let s = LeaseState::granted(reply(send, clock.now(), 1), m);
        // 1 s × 0.7 from the send, not from the reply 300 ms later.
        assert_eq!(s.deadline(), send.saturating_add(700 * MS));
        assert_eq!(s.remaining(clock.now(), "k", 9), Ok(400 * MS));
    }

    #[test]
    fn a_keep_alive_moves_the_deadline_from_its_own_send() {
        let clock = FakeClock::new(MonoTime::ZERO);
        let m = ppm_nearest(0.30);
        let s = LeaseState::granted(reply(clock.now(), clock.now(), 1), m);
        clock.advance(200 * MS);
        let send = clock.now();
        clock.advance(50 * MS);
        assert_eq!(
            s.apply_keep_alive(reply(send, clock.now(), 1), m),
            Ok(send.saturating_add(700 * MS))
        );
        assert_eq!(
            s.deadline(),
            MonoTime::from_nanos(0).saturating_add(900 * MS)
        );
    }

    #[test]
    fn a_keep_alive_read_after_the_deadline_revives_nothing() {
        let clock = FakeClock::new(MonoTime::ZERO);
        let m = ppm_nearest(0.30);
        let s = LeaseState::granted(reply(clock.now(), clock.now(), 1), m);
        let send = clock.now().saturating_add(600 * MS);
        clock.advance(700 * MS); // read exactly at the deadline
        let before = s.deadline();
        assert!(s.apply_keep_alive(reply(send, clock.now(), 1), m).is_err());
        assert_eq!(s.deadline(), before, "a refused reply moves nothing");
        assert_eq!(s.lost_at(clock.now()), Some(LostReason::Deadline));
    }

    #[test]
    fn loss_is_terminal_and_the_first_reason_stays() {
        let clock = FakeClock::new(MonoTime::ZERO);
        let s = LeaseState::granted(reply(clock.now(), clock.now(), 5), 0);
        assert_eq!(s.lost_at(clock.now()), None);
        assert_eq!(
            s.mark_lost(LostReason::SessionExpired),
            LostReason::SessionExpired
        );
        assert_eq!(
            s.mark_lost(LostReason::Deadline),
            LostReason::SessionExpired
        );
        let lost = s.remaining(clock.now(), "payout:1", 42).unwrap_err();
        assert_eq!((lost.token, lost.reason), (42, LostReason::SessionExpired));
        // A keep-alive that arrives later still moves the number, but the
        // flag decides: the handle stays lost.
        let now = clock.now();
        let _ = s.apply_keep_alive(reply(now, now, 5), 0);
        assert!(s.remaining(now, "payout:1", 42).is_err());
    }

    #[test]
    fn ensure_time_for_needs_strictly_more_than_the_step() {
        let clock = FakeClock::new(MonoTime::ZERO);
        let s = LeaseState::granted(reply(clock.now(), clock.now(), 1), ppm_nearest(0.30));
        clock.advance(200 * MS); // 500 ms left
        let now = clock.now();
        assert!(s.ensure_time_for(now, "k", 1, 499 * MS).is_ok());
        assert!(matches!(
            s.ensure_time_for(now, "k", 1, 500 * MS),
            Err(LockError::InsufficientLease { remaining, needed })
                if remaining == 500 * MS && needed == 500 * MS
        ));
        clock.advance(500 * MS);
        assert!(matches!(
            s.ensure_time_for(clock.now(), "k", 1, MS),
            Err(LockError::LockLost(LockLost {
                reason: LostReason::Deadline,
                ..
            }))
        ));
    }
}
