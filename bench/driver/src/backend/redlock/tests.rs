//! The session's checks on scripted instances and a fake clock: a majority
//! read past the client deadline is refused and unlocked everywhere; a lock
//! whose deadline passes fails D3/D4 and is reported lost once; extend
//! rounds move the deadline from their send; an extend refused by a majority
//! loses the lock at once.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use fencepost_sdk::{Clock, FakeClock, LockError, LostReason, MonoTime};

use super::error::RedlockError;
use super::fake::{Script, Scripted, dyns, extends, instances, pings, unlocks};
use super::session::RedlockSession;
use super::shared::{Inner, RedlockConfig};
use crate::backend::{BackendError, BackendSession};

const MS: Duration = Duration::from_millis(1);
const TTL: Duration = Duration::from_secs(1);

/// A session over `set` on `clock` (margin 0.30, period 233 ms), and a
/// counter of the locks it reported lost.
fn session(clock: &Arc<FakeClock>, set: &[Arc<Scripted>]) -> (RedlockSession, Arc<AtomicU64>) {
    let mut config = RedlockConfig::new(["redis://scripted"], TTL);
    config.clock = clock.clone();
    let inner = Arc::new(Inner::with_instances(config, dyns(set).into()));
    let s = RedlockSession::open(inner, "w", 0);
    let lost = Arc::new(AtomicU64::new(0));
    let l = lost.clone();
    s.on_lock_lost(Box::new(move || {
        l.fetch_add(1, Ordering::Relaxed);
    }));
    (s, lost)
}

/// Waits (real time) for `cond`, up to `limit`.
async fn eventually(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + limit;
    while tokio::time::Instant::now() < deadline {
        if cond() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    cond()
}

#[tokio::test]
async fn a_majority_read_after_the_client_deadline_is_refused_and_unlocked_everywhere() {
    let clock = Arc::new(FakeClock::new(MonoTime::ZERO));
    // 3 × 240 ms = 720 ms: Redlock's validity is 268 ms, but the deadline
    // at margin 0.30 (700 ms from the send) has passed.
    let set = instances(&clock, &[(Script::Yes, 240 * MS); 3]);
    let (s, _) = session(&clock, &set);
    let refused = s.acquire("k", TTL, Duration::ZERO).await.unwrap_err();
    assert!(
        matches!(refused, BackendError::Redlock(RedlockError::NoValidity { elapsed, .. })
            if elapsed == 720 * MS),
        "{refused:?}"
    );
    assert!(set.iter().all(|i| unlocks(i) == 1));
    assert!(!s.is_lost(), "a refused acquire loses nothing");
}

#[tokio::test]
async fn a_lock_past_its_deadline_fails_the_checks_and_is_reported_lost_once() {
    let clock = Arc::new(FakeClock::new(MonoTime::ZERO));
    let set = instances(&clock, &[(Script::Yes, MS); 3]);
    let (s, lost) = session(&clock, &set);
    let h = s.acquire("k", TTL, Duration::ZERO).await.unwrap();
    // Sent at 0, answered at 3 ms: deadline 700 ms, 697 ms left.
    assert_eq!(s.remaining(&h), Ok(697 * MS));
    assert!(s.ensure_time_for(&h, 696 * MS).is_ok());
    assert!(matches!(
        s.ensure_time_for(&h, 697 * MS),
        Err(LockError::InsufficientLease { .. })
    ));
    clock.advance(697 * MS);
    let gone = s.check_still_held(&h).unwrap_err();
    assert_eq!((gone.reason, gone.token), (LostReason::Deadline, 0));
    assert!(s.is_lost());
    assert!(
        s.release(h).await.is_err(),
        "a lost lock is not released as held"
    );
    assert_eq!(lost.load(Ordering::Relaxed), 1, "reported once");
    assert!(
        set.iter().all(|i| unlocks(i) == 1),
        "the key is still freed"
    );
}

#[tokio::test]
async fn an_extend_round_moves_the_deadline_from_its_send() {
    let clock = Arc::new(FakeClock::new(MonoTime::ZERO));
    let set = instances(&clock, &[(Script::Yes, MS); 3]);
    let (s, lost) = session(&clock, &set);
    let h = s.acquire("k", TTL, Duration::ZERO).await.unwrap();
    assert_eq!(h.deadline(), MonoTime::ZERO.saturating_add(700 * MS));
    clock.advance(100 * MS);
    assert!(eventually(Duration::from_secs(3), || extends(&set[0]) >= 1).await);
    // The round was sent at 103 ms: deadline 803 ms.
    assert!(
        eventually(Duration::from_secs(1), || h.deadline()
            == MonoTime::ZERO.saturating_add(803 * MS))
        .await,
        "deadline {:?}",
        h.deadline()
    );
    assert!(s.check_still_held(&h).is_ok());
    s.release(h).await.expect("held and released on a majority");
    assert_eq!(lost.load(Ordering::Relaxed), 0);
    assert!(!s.is_lost());
}

#[tokio::test]
async fn an_extend_refused_by_a_majority_loses_the_lock_at_once() {
    let clock = Arc::new(FakeClock::new(MonoTime::ZERO));
    let set = instances(&clock, &[(Script::Yes, MS); 3]);
    let (s, lost) = session(&clock, &set);
    let h = s.acquire("k", TTL, Duration::ZERO).await.unwrap();
    set[0].set(Script::No);
    set[1].set(Script::No);
    assert!(eventually(Duration::from_secs(3), || lost.load(Ordering::Relaxed) == 1).await);
    assert!(s.is_lost());
    let gone = s.check_still_held(&h).unwrap_err();
    assert_eq!(gone.reason, LostReason::SessionExpired);
    assert!(clock.now() < h.deadline(), "lost before its deadline");
    assert!(
        set.iter().all(|i| unlocks(i) == 1),
        "unlocked on every instance"
    );
    assert!(matches!(
        s.acquire("k2", TTL, Duration::ZERO).await,
        Err(BackendError::Lock(LockError::SessionLost { .. }))
    ));
}

#[tokio::test]
async fn a_session_holding_nothing_pings_every_instance_and_moves_nothing() {
    let clock = Arc::new(FakeClock::new(MonoTime::ZERO));
    let set = instances(
        &clock,
        &[(Script::Yes, MS), (Script::No, MS), (Script::Hang, MS)],
    );
    let (s, lost) = session(&clock, &set);
    assert!(eventually(Duration::from_secs(3), || pings(&set[1]) >= 2).await);
    assert!(
        set.iter()
            .all(|i| pings(i) >= 1 && extends(i) == 0 && unlocks(i) == 0)
    );
    assert!(!s.is_lost(), "a ping moves nothing and loses nothing");
    assert_eq!(lost.load(Ordering::Relaxed), 0);
}
