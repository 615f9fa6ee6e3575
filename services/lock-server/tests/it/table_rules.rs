//! The lock table's rules at their edges, driven directly on [`LockTable`]
//! with explicit instants: what a sweep frees and how much of it at once.
//! (The property test in `proptest_table` checks the invariants over random
//! sequences; these pin the boundaries it reaches only by chance.)

use std::time::Duration;

use fencepost_api::clock::MonoTime;
use fencepost_api::grace::GracePolicy;
use lock_server::Limits;
use lock_server::core::{Caps, LockTable};

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
