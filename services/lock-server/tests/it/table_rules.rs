//! The lock table's rules at their edges, driven directly on [`LockTable`]
//! with explicit instants: what a sweep frees and how much of it at once.
//! (The property test in `proptest_table` checks the invariants over random
//! sequences; these pin the boundaries it reaches only by chance.)

use std::time::Duration;

use fencepost_api::clock::MonoTime;
use fencepost_api::grace::GracePolicy;
use fencepost_api::lock::LockErrorCode;
use lock_server::Limits;
use lock_server::core::{Caps, LockTable, Sabotage, SessionStatus};

const T0: MonoTime = MonoTime::from_nanos(1_000_000_000);

fn ms(n: u64) -> Duration {
    Duration::from_millis(n)
}

fn at(d: Duration) -> MonoTime {
    T0.saturating_add(d)
}

/// Limits with a fixed 10 ms grace, leases clamped to [100 ms, 60 s].
fn limits() -> Limits {
    Limits {
        default_ttl: ms(1_000),
        session_ttl: ms(10_000),
        ttl_min: ms(100),
        ttl_max: ms(60_000),
        grace: GracePolicy::Fixed(ms(10)),
        sabotage: None,
    }
}

fn table_with_batch(batch: usize) -> LockTable {
    LockTable::with_caps(
        limits(),
        Caps {
            sweep_batch: batch,
            ..Caps::default()
        },
    )
}

/// Grants `key` to `session` for `lease_ms` from `now`, with `token`.
fn grant(t: &mut LockTable, key: &str, session: &str, lease_ms: u64, token: u64, now: MonoTime) {
    let plan = t
        .begin_acquire(key, session, Some(lease_ms), now)
        .expect("acquire");
    t.finish_acquire(key, session, token, &plan, now)
        .expect("finish");
}

#[test]
fn a_sweep_frees_at_most_a_batch_of_grants() {
    let mut t = table_with_batch(2);
    t.insert_session("s".into(), "o".into(), None, ms(60_000), T0);
    for (i, key) in ["a", "b", "c", "d", "e"].iter().enumerate() {
        grant(&mut t, key, "s", 100, i as u64 + 1, T0);
    }
    // Past lease + grace of every grant, the session still live.
    let now = at(ms(111));
    let first = t.sweep(now);
    assert!(first.expired_sessions.is_empty());
    assert_eq!(first.expired_grants.len(), 2, "{first:?}");
    assert_eq!(t.sweep(now).expired_grants.len(), 2);
    assert_eq!(t.sweep(now).expired_grants.len(), 1);
    assert!(t.sweep(now).is_empty());
}

#[test]
fn a_sweep_expires_at_most_a_batch_of_sessions() {
    let mut t = table_with_batch(2);
    for id in ["s1", "s2", "s3"] {
        t.insert_session(id.into(), "o".into(), None, ms(100), T0);
    }
    // Past ttl + grace of every session.
    let now = at(ms(111));
    assert_eq!(t.due(now).expired_sessions.len(), 2);
    assert_eq!(t.sweep(now).expired_sessions.len(), 2);
    assert_eq!(t.sweep(now).expired_sessions, vec!["s3".to_string()]);
}

#[test]
fn a_swept_grant_is_dropped_only_if_it_is_still_free_at_the_apply() {
    let mut t = table_with_batch(100);
    t.insert_session("s".into(), "o".into(), None, ms(60_000), T0);
    grant(&mut t, "k", "s", 100, 1, T0);
    let late = at(ms(111));
    let swept = t.due(late);
    assert_eq!(swept.expired_grants, vec![("k".to_string(), 1)]);
    // Applied at an instant it is still HELD: nothing goes.
    assert!(t.apply_swept(&swept, at(ms(50))).is_empty());
    assert_eq!(t.info("k", at(ms(50))).expect("kept").token, 1);
    // At an instant it is FREE: it goes, and the key leaves memory.
    t.apply_swept(&swept, late);
    assert!(t.info("k", late).is_err());
}

#[test]
fn an_expiring_session_reports_only_the_grants_the_sweep_did_not_list() {
    let mut t = table_with_batch(100);
    t.insert_session("s".into(), "o".into(), None, ms(100), T0);
    grant(&mut t, "listed", "s", 1_000, 1, T0);
    // An acquire begun while the session was live, finished after the sweep
    // decided (as a slow store write would).
    let plan = t
        .begin_acquire("late", "s", Some(1_000), at(ms(50)))
        .expect("acquire");
    let now = at(ms(111));
    let swept = t.due(now);
    assert_eq!(swept.expired_sessions, vec!["s".to_string()]);
    assert_eq!(swept.expired_grants, vec![("listed".to_string(), 1)]);
    t.finish_acquire("late", "s", 2, &plan, at(ms(50)))
        .expect("finish");
    let unlisted = t.apply_swept(&swept, now);
    assert_eq!(unlisted, vec![("late".to_string(), 2)]);
    assert!(t.info("listed", now).is_err());
    assert!(t.info("late", now).is_err());
}

#[test]
fn a_committed_sweep_leaves_memory_even_when_not_due_here() {
    let mut t = table_with_batch(100);
    t.insert_session("s".into(), "o".into(), None, ms(10_000), T0);
    grant(&mut t, "k", "s", 1_000, 1, T0);
    // Loaded at a takeover: the store already cleared these.
    let swept = lock_server::core::Swept {
        expired_sessions: vec!["s".to_string()],
        expired_grants: vec![("k".to_string(), 1)],
    };
    t.apply_swept_committed(&swept, at(ms(1)));
    assert!(t.info("k", at(ms(1))).is_err());
    assert!(!t.has_session("s"));
    assert_eq!(t.session_status("s", at(ms(1))), SessionStatus::Expired);
}

#[test]
fn a_session_is_live_then_lapsed_for_its_grace_then_expired_to_the_nanosecond() {
    let mut t = table_with_batch(100);
    t.insert_session("s".into(), "o".into(), None, ms(100), T0);
    let ns = Duration::from_nanos(1);
    let status = |t: &LockTable, d: Duration| t.session_status("s", at(d));
    assert_eq!(status(&t, ms(100) - ns), SessionStatus::Live);
    assert_eq!(status(&t, ms(100)), SessionStatus::Lapsed);
    assert_eq!(status(&t, ms(110) - ns), SessionStatus::Lapsed);
    // Past ttl + grace it is expired, swept or not: a delete is refused.
    assert_eq!(status(&t, ms(110)), SessionStatus::Expired);
    assert!(t.check_delete_session("s", at(ms(110))).is_err());
    assert!(t.check_delete_session("s", at(ms(110) - ns)).is_ok());
    assert_eq!(t.session_status("never", T0), SessionStatus::Unknown);
}

#[test]
fn a_session_ttl_is_the_default_or_the_request_clamped() {
    let t = table_with_batch(100);
    assert_eq!(t.session_ttl_for(None), ms(10_000));
    assert_eq!(t.session_ttl_for(Some(2_500)), ms(2_500));
    assert_eq!(t.session_ttl_for(Some(1)), ms(100));
    assert_eq!(t.session_ttl_for(Some(u64::MAX)), ms(60_000));
}

#[test]
fn a_held_key_says_so_and_asks_for_a_retry_within_a_second_a_key_in_grace_until_free() {
    let mut t = table_with_batch(100);
    t.insert_session("a".into(), "o".into(), None, ms(60_000), T0);
    t.insert_session("b".into(), "o".into(), None, ms(60_000), T0);
    grant(&mut t, "k", "a", 10_000, 1, T0);
    // HELD by another grant for 10 s: the hint is capped at one second, so
    // a waiter notices an early release.
    let held = t
        .begin_acquire("k", "b", Some(1_000), at(ms(1)))
        .expect_err("held");
    assert_eq!(held.code, LockErrorCode::LockHeld);
    assert_eq!(held.retry_after_ms, Some(1_000));
    assert!(
        held.message.contains("held by another grant"),
        "{}",
        held.message
    );
    // In grace (10 ms after the lease end): free when the grace ends.
    let grace = t
        .begin_acquire("k", "b", Some(1_000), at(ms(10_004)))
        .expect_err("grace");
    assert_eq!(grace.retry_after_ms, Some(6));
    assert!(grace.message.contains("in grace"), "{}", grace.message);
}

#[test]
fn a_grant_committed_across_a_takeover_is_adopted_only_if_it_is_this_tables_or_the_key_is_free() {
    let mut t = table_with_batch(100);
    t.insert_session("a".into(), "o".into(), None, ms(60_000), T0);
    t.insert_session("b".into(), "o".into(), None, ms(60_000), T0);
    grant(&mut t, "k", "a", 10_000, 1, T0);
    // The table holds this very grant: nothing to do.
    assert!(t.adopt_grant("k", "a", 1, ms(10_000), T0).is_ok());
    // Another token, or another session, on a key granted here: refused.
    let other_token = t
        .adopt_grant("k", "a", 2, ms(10_000), T0)
        .expect_err("token");
    assert_eq!(other_token.code, LockErrorCode::LockHeld);
    let other_session = t
        .adopt_grant("k", "b", 1, ms(10_000), T0)
        .expect_err("session");
    assert_eq!(other_session.code, LockErrorCode::LockHeld);
    assert_eq!(t.info("k", T0).expect("held").token, 1);
    // A free key is adopted, leased from the instant given.
    t.adopt_grant("free", "b", 7, ms(1_000), T0)
        .expect("adopted");
    let info = t.info("free", at(ms(1))).expect("adopted grant");
    assert_eq!((info.token, info.remaining_ms), (7, Some(999)));
    // A session that is not live adopts nothing.
    let gone = t
        .adopt_grant("x", "nobody", 1, ms(1_000), T0)
        .expect_err("unknown");
    assert_eq!(gone.code, LockErrorCode::SessionUnknown);
}

#[test]
fn the_early_expiry_sabotage_ends_a_grant_at_half_its_lease() {
    let mut t = LockTable::new(Limits {
        sabotage: Some(Sabotage::EarlyExpiry),
        ..limits()
    });
    t.insert_session("s".into(), "o".into(), None, ms(60_000), T0);
    grant(&mut t, "k", "s", 1_000, 1, T0);
    let info = t.info("k", T0).expect("held");
    assert_eq!(info.remaining_ms, Some(500));
}

#[test]
fn only_a_lease_longer_than_every_earlier_one_is_written_to_the_store() {
    let mut t = table_with_batch(100);
    t.insert_session("s".into(), "o".into(), None, ms(60_000), T0);
    grant(&mut t, "k", "s", 1_000, 1, T0);
    // A plain renew (the same lease, or a shorter one) touches no disk.
    assert_eq!(t.lease_to_persist("k", 1, ms(1_000)), None);
    assert_eq!(t.lease_to_persist("k", 1, ms(500)), None);
    assert_eq!(t.lease_to_persist("k", 1, ms(1_001)), Some(ms(1_001)));
    assert_eq!(t.lease_to_persist("k", 2, ms(5_000)), None, "another token");
}
