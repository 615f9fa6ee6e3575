//! One suite, every store: the [`LockStore`] contract (tokens only go up, even
//! across reopening; holders are compare-and-clear by token; a commit is all
//! or nothing, and the group committer batches concurrent commits without
//! letting a bad one fail the rest) and the service's recovery from what a
//! store holds. Each test is a generic async fn over a
//! [`StoreKind`]; the macro at the bottom instantiates it per store. The
//! PostgreSQL instances skip outside CI when no database is configured, and
//! fail in CI.

use std::sync::Arc;
use std::time::Duration;

use fencepost_api::clock::{FakeClock, MonoTime};
use lock_server::store::group::GroupCommit;
use lock_server::store::{self, GrantRecord, LockStore, SessionRecord, Write};
use lock_server::{Limits, LockService};

use crate::support::StoreKind;

fn session(id: &str) -> SessionRecord {
    SessionRecord {
        id: id.into(),
        owner_id: format!("owner-{id}"),
        ttl_ms: 1_000,
        principal: None,
    }
}

async fn tokens_only_go_up_even_after_reopening(kind: StoreKind) {
    let Some(url) = kind.fresh_url().await else {
        return;
    };
    let s = store::open(&url).await.unwrap();
    s.create_session(&session("s1")).await.unwrap();
    assert_eq!(s.grant("k", "s1", 1_000).await.unwrap(), 1);
    assert_eq!(s.grant("k", "s1", 1_000).await.unwrap(), 2);
    assert_eq!(s.grant("other", "s1", 1_000).await.unwrap(), 1);
    s.clear_grant("k", 2).await.unwrap();
    // memory: lives only as long as the process, so it is not reopened.
    let s = if matches!(kind, StoreKind::Memory) {
        s
    } else {
        drop(s);
        store::open(&url).await.unwrap()
    };
    let snap = s.load().await.unwrap();
    let k = snap.keys.iter().find(|k| k.key == "k").unwrap();
    assert_eq!((k.last_token, &k.holder), (2, &None));
    assert_eq!(s.grant("k", "s1", 1_000).await.unwrap(), 3);
}

async fn clear_grant_only_clears_the_matching_token(kind: StoreKind) {
    let Some(url) = kind.fresh_url().await else {
        return;
    };
    let s = store::open(&url).await.unwrap();
    let t = s.grant("k", "s1", 500).await.unwrap();
    s.clear_grant("k", t + 1).await.unwrap();
    s.set_lease("k", t, 700).await.unwrap();
    s.set_lease("k", t + 1, 900).await.unwrap();
    let snap = s.load().await.unwrap();
    assert_eq!(
        snap.keys[0].holder,
        Some(GrantRecord {
            token: t,
            session_id: "s1".into(),
            lease_ms: 700
        })
    );
    s.clear_grant("k", t).await.unwrap();
    assert_eq!(s.load().await.unwrap().keys[0].holder, None);
}

async fn deleting_a_session_clears_every_grant_it_holds(kind: StoreKind) {
    let Some(url) = kind.fresh_url().await else {
        return;
    };
    let s = store::open(&url).await.unwrap();
    s.create_session(&session("a")).await.unwrap();
    s.create_session(&session("b")).await.unwrap();
    s.grant("k1", "a", 1_000).await.unwrap();
    s.grant("k2", "a", 1_000).await.unwrap();
    s.grant("k3", "b", 1_000).await.unwrap();
    s.delete_session("a").await.unwrap();
    let snap = s.load().await.unwrap();
    assert_eq!(snap.sessions, vec![session("b")]);
    let mut held: Vec<_> = snap
        .keys
        .iter()
        .filter_map(|k| {
            k.holder
                .as_ref()
                .map(|h| (k.key.clone(), h.session_id.clone()))
        })
        .collect();
    held.sort();
    assert_eq!(held, vec![("k3".to_string(), "b".to_string())]);
    s.ping().await.unwrap();
}

/// A key granted again, to another session, belongs to that session only:
/// deleting the first holder's session leaves the new grant in place.
async fn deleting_a_session_leaves_a_key_granted_since_to_another(kind: StoreKind) {
    let Some(url) = kind.fresh_url().await else {
        return;
    };
    let s = store::open(&url).await.unwrap();
    s.create_session(&session("a")).await.unwrap();
    s.create_session(&session("b")).await.unwrap();
    assert_eq!(s.grant("k", "a", 1_000).await.unwrap(), 1);
    assert_eq!(s.grant("k", "b", 1_000).await.unwrap(), 2);
    s.delete_session("a").await.unwrap();
    let snap = s.load().await.unwrap();
    let k = snap.keys.iter().find(|k| k.key == "k").unwrap();
    let holder = k.holder.as_ref().expect("b still holds k");
    assert_eq!((holder.session_id.as_str(), holder.token), ("b", 2));
    // The live view agrees: only held keys, b's among them.
    let live = s.load_live().await.unwrap();
    assert_eq!(live.keys.len(), 1);
    assert_eq!(s.last_token("k").await.unwrap(), Some(2));
}

async fn a_restarted_service_restores_grants_with_leases_from_its_own_start(kind: StoreKind) {
    let Some(url) = kind.fresh_url().await else {
        return;
    };
    let store: Arc<dyn LockStore> = store::open(&url).await.unwrap();
    let clock = FakeClock::new(MonoTime::from_nanos(5_000_000_000));
    let first = LockService::start(Limits::default(), store.clone(), Arc::new(clock.clone()))
        .await
        .unwrap();
    let sid = first
        .create_session("worker", Some(1_000))
        .await
        .unwrap()
        .session_id;
    let granted = first.acquire("k", &sid, Some(2_000)).await.unwrap();
    drop(first);

    // A new process: its monotonic clock knows nothing of the old one (it even starts lower).
    let store: Arc<dyn LockStore> = if matches!(kind, StoreKind::Memory) {
        store
    } else {
        drop(store); // the old process's connection holds the file's lock
        store::open(&url).await.unwrap()
    };
    let clock2 = FakeClock::new(MonoTime::from_nanos(1));
    let second = LockService::start(Limits::default(), store, Arc::new(clock2.clone()))
        .await
        .unwrap();
    let info = second.info("k").await.unwrap();
    assert_eq!(info.token, granted.token);
    assert_eq!(info.state, fencepost_api::lock::LockState::Held);
    // The restored session lives a full TTL from the takeover, and a heartbeat keeps it.
    clock2.advance(Duration::from_millis(900));
    second.heartbeat(&sid).await.unwrap();
    // The grant renews with the same token.
    let renewed = second
        .renew("k", &sid, granted.token, Some(2_000))
        .await
        .unwrap();
    assert_eq!(renewed.token, granted.token);
    // A rival gets a strictly higher token once the holder releases.
    second.release("k", &sid, granted.token).await.unwrap();
    let rival = second
        .create_session("rival", None)
        .await
        .unwrap()
        .session_id;
    let next = second.acquire("k", &rival, None).await.unwrap();
    assert!(next.token > granted.token);
}

/// The store as a [`GroupCommit`] sees it: `store::open` already batches the
/// durable stores; `memory:` is wrapped here so every kind runs the same test.
async fn batched(url: &str) -> Arc<dyn LockStore> {
    let s = store::open(url).await.unwrap();
    if s.commit_stats().is_some() {
        s
    } else {
        Arc::new(GroupCommit::new(s))
    }
}

async fn a_failed_commit_persists_none_of_its_writes(kind: StoreKind) {
    let Some(url) = kind.fresh_url().await else {
        return;
    };
    let s = store::open(&url).await.unwrap();
    s.create_session(&session("s1")).await.unwrap();
    let t = s.grant("held", "s1", 1_000).await.unwrap();
    let before = s.load().await.unwrap();
    // The last write fails (the session id is taken): the grant, the lease
    // and the clear before it must not be persisted either.
    let failed = s
        .commit(&[
            Write::Grant {
                key: "new".into(),
                session_id: "s1".into(),
                lease_ms: 1_000,
            },
            Write::SetLease {
                key: "held".into(),
                token: t,
                lease_ms: 9_000,
            },
            Write::ClearGrants(vec![("held".into(), t)]),
            Write::CreateSession(session("s1")),
        ])
        .await;
    assert!(
        failed.is_err(),
        "a duplicate session id commits: {failed:?}"
    );
    assert_eq!(s.load().await.unwrap(), before);
    assert_eq!(s.last_token("new").await.unwrap(), None);
}

async fn concurrent_commits_share_a_transaction_and_a_bad_one_fails_alone(kind: StoreKind) {
    let Some(url) = kind.fresh_url().await else {
        return;
    };
    let s = batched(&url).await;
    s.create_session(&session("s1")).await.unwrap();
    let before = s.commit_stats().unwrap();
    let grants = (0..32).map(|i| {
        let s = s.clone();
        async move { s.grant(&format!("k{i}"), "s1", 1_000).await }
    });
    let taken = session("s1");
    let duplicate = s.create_session(&taken);
    // All 33 queue before the committer runs (one task polls them all at once).
    let (tokens, duplicate) = tokio::join!(futures_util::future::join_all(grants), duplicate);
    assert!(duplicate.is_err(), "a duplicate session id commits");
    for (i, token) in tokens.into_iter().enumerate() {
        assert_eq!(token.unwrap(), 1, "k{i}: its own token, once");
    }
    let after = s.commit_stats().unwrap();
    assert!(
        after.largest_batch > 1,
        "no two commits shared a transaction: {after:?}"
    );
    assert_eq!(after.units - before.units, 33, "{after:?}");
    assert_eq!(
        after.retried_alone - before.retried_alone,
        33,
        "the batch with the bad write failed and each write was retried alone: {after:?}"
    );
    let snap = s.load().await.unwrap();
    assert_eq!(snap.sessions, vec![session("s1")]);
    assert_eq!(snap.keys.iter().filter(|k| k.holder.is_some()).count(), 32);
}

async fn a_second_server_on_the_same_sqlite_file_is_refused() {
    let url = StoreKind::Sqlite.fresh_url().await.unwrap();
    let first = store::open(&url).await.unwrap();
    let second = store::open(&url).await;
    assert!(
        matches!(&second, Err(store::StoreError::Sqlite(e)) if e.to_string().contains("locked")),
        "{:?}",
        second.err()
    );
    drop(first);
    store::open(&url)
        .await
        .expect("free once the first is closed");
}

/// A seeded sequence of writes over a few keys and sessions, every kind of
/// write, with the same key and session named again and again (so a batch of
/// them has conflicts that must keep their order) and no write that fails.
fn random_writes(seed: u64, n: usize) -> Vec<Write> {
    let mut x = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let mut next = |m: u64| {
        x = x
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (x >> 33) % m
    };
    let mut created = 0;
    (0..n)
        .map(|_| {
            let key = format!("k{}", next(3));
            let sess = format!("s{}", next(3));
            match next(7) {
                6 => {
                    // An id is expired once, so always with the same principal.
                    let ids = vec![sess, format!("s{}", next(3))];
                    Write::RecordExpired {
                        principals: ids
                            .iter()
                            .map(|id| (id != "s1").then(|| format!("p-{id}")))
                            .collect(),
                        ids,
                        keep_ms: 3_600_000,
                    }
                }
                0 => {
                    created += 1;
                    Write::CreateSession(session(&format!("new{created}")))
                }
                1 => Write::DeleteSessions(vec![sess, format!("s{}", next(3))]),
                2 | 3 => Write::Grant {
                    key,
                    session_id: sess,
                    lease_ms: 100 + next(900),
                },
                4 => Write::SetLease {
                    key,
                    token: 1 + next(4),
                    lease_ms: 100 + next(900),
                },
                _ => Write::ClearGrants(vec![
                    (key, 1 + next(4)),
                    (format!("k{}", next(3)), 1 + next(4)),
                ]),
            }
        })
        .collect()
}

/// The PostgreSQL store turns a batch into a few array statements, reordering
/// the writes that commute (`pg_batch`): a batch must mean exactly what its
/// writes mean one by one — the same tokens, the same rows — on every store.
async fn a_batch_means_what_its_writes_mean_one_by_one(kind: StoreKind) {
    for seed in 0..10 {
        let (Some(u1), Some(u2)) = (kind.fresh_url().await, kind.fresh_url().await) else {
            return;
        };
        let (alone, together) = (
            store::open(&u1).await.unwrap(),
            store::open(&u2).await.unwrap(),
        );
        let writes = random_writes(seed, 40);
        let mut one_by_one = Vec::new();
        for w in &writes {
            one_by_one.extend(alone.commit(std::slice::from_ref(w)).await.unwrap());
        }
        let batched = together.commit(&writes).await.unwrap();
        assert_eq!(batched, one_by_one, "seed {seed}: tokens of {writes:?}");
        // A snapshot's order is the store's (memory: a hash map's); a
        // tombstone's age is when it was read, and the same id twice is one.
        let sorted = |mut s: store::Snapshot| {
            s.sessions.sort_by(|a, b| a.id.cmp(&b.id));
            s.keys.sort_by(|a, b| a.key.cmp(&b.key));
            s.tombstones.iter_mut().for_each(|t| t.age_ms = 0);
            s.tombstones.sort_by(|a, b| a.id.cmp(&b.id));
            s.tombstones.dedup();
            s
        };
        assert_eq!(
            sorted(together.load().await.unwrap()),
            sorted(alone.load().await.unwrap()),
            "seed {seed}: rows after {writes:?}"
        );
        assert_eq!(
            sorted(together.load_live().await.unwrap()),
            sorted(alone.load_live().await.unwrap()),
            "seed {seed}: held rows"
        );
    }
}

#[tokio::test]
async fn sqlite_refuses_a_second_server_on_the_same_file() {
    a_second_server_on_the_same_sqlite_file_is_refused().await;
}

/// PostgreSQL: a release, and a re-grant to the key's last holder, change no
/// indexed column, so they are HOT updates (no index entry, no dead version
/// left for lookups to walk). With the partial holder index of the shared
/// schema none of them was: 0 of 37,014 in a `bench peer` run.
#[tokio::test]
async fn postgres_grant_release_cycles_are_hot_updates() {
    let Some(url) = StoreKind::Postgres.fresh_url().await else {
        return;
    };
    let schema = url.rsplit("search_path%3D").next().unwrap().to_string();
    let s = store::open(&url).await.unwrap();
    s.create_session(&session("s1")).await.unwrap();
    const CYCLES: i64 = 100;
    for _ in 0..CYCLES {
        let t = s.grant("hot", "s1", 1_000).await.unwrap();
        s.clear_grant("hot", t).await.unwrap();
    }
    // Backends report their counters when idle (within seconds): wait for all.
    let base = crate::support::pg_url().unwrap();
    let (pg, conn) = tokio_postgres::connect(&base, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    let started = std::time::Instant::now();
    let (upd, hot) = loop {
        let row = pg
            .query_opt(
                "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables \
                 WHERE schemaname = $1 AND relname = 'fp_locks'",
                &[&schema],
            )
            .await
            .unwrap();
        let (upd, hot): (i64, i64) = row.map_or((0, 0), |r| (r.get(0), r.get(1)));
        // The first grant inserts; every later grant and every release updates.
        if upd >= 2 * CYCLES - 1 || started.elapsed() > Duration::from_secs(30) {
            break (upd, hot);
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert!(upd >= 2 * CYCLES - 1, "only {upd} updates reported in 30 s");
    assert!(hot * 10 >= upd * 9, "{hot} of {upd} updates were HOT");
}

/// C1: an expired session's id answers `410 SESSION_EXPIRED` — on the server
/// that expired it and on the next one to load the store (a restart here; a
/// new leader in `replicas`): the sweeper's expiry leaves a tombstone in the
/// store, which the next start restores. A session closed by L3 leaves none
/// and stays `404 SESSION_UNKNOWN`. Before tombstones were persisted, the
/// restarted server answered 404 for both.
async fn an_expired_session_answers_410_after_a_restart(kind: StoreKind) {
    use fencepost_api::lock::LockErrorCode;
    let Some(url) = kind.fresh_url().await else {
        return;
    };
    let code = |r: Result<_, lock_server::service::ServiceError>| match r {
        Err(lock_server::service::ServiceError::Refused(e)) => Some(e.code),
        _ => None,
    };
    let store: Arc<dyn LockStore> = store::open(&url).await.unwrap();
    let clock = FakeClock::new(MonoTime::from_nanos(5_000_000_000));
    let first = LockService::start(Limits::default(), store.clone(), Arc::new(clock.clone()))
        .await
        .unwrap();
    let expired = first
        .create_session("w1", Some(1_000))
        .await
        .unwrap()
        .session_id;
    let closed = first
        .create_session("w2", Some(1_000))
        .await
        .unwrap()
        .session_id;
    first.delete_session(&closed).await.unwrap();
    clock.advance(Duration::from_secs(10));
    first.sweep().await;
    assert_eq!(
        code(first.heartbeat(&expired).await),
        Some(LockErrorCode::SessionExpired)
    );
    let snap = store.load_live().await.unwrap();
    assert!(snap.sessions.is_empty(), "{:?}", snap.sessions);
    let ids: Vec<&str> = snap.tombstones.iter().map(|t| t.id.as_str()).collect();
    assert_eq!(ids, [expired.as_str()]);
    drop(first);

    let store: Arc<dyn LockStore> = if matches!(kind, StoreKind::Memory) {
        store
    } else {
        drop(store);
        store::open(&url).await.unwrap()
    };
    let clock2 = FakeClock::new(MonoTime::from_nanos(1));
    let second = LockService::start(Limits::default(), store, Arc::new(clock2.clone()))
        .await
        .unwrap();
    assert_eq!(
        code(second.heartbeat(&expired).await),
        Some(LockErrorCode::SessionExpired),
        "the restarted server knows the id expired"
    );
    assert_eq!(
        code(second.heartbeat(&closed).await),
        Some(LockErrorCode::SessionUnknown),
        "a closed session left no tombstone"
    );
}

/// The SQL stores age their tombstones on the database's clock: an expiry
/// that keeps tombstones for 0 ms forgets every older one (waited for, with
/// a deadline: two expiries in the same millisecond keep both).
async fn tombstones_older_than_the_keep_are_forgotten(kind: StoreKind) {
    if matches!(kind, StoreKind::Memory) {
        return; // memory: has no clock; it keeps the newest 100,000.
    }
    let Some(url) = kind.fresh_url().await else {
        return;
    };
    let s = store::open(&url).await.unwrap();
    s.expire_sessions(&[("old".to_string(), None)], Duration::from_secs(3600))
        .await
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    let mut n = 0;
    loop {
        n += 1;
        s.expire_sessions(&[(format!("new-{n}"), None)], Duration::ZERO)
            .await
            .unwrap();
        let ids: Vec<String> = s
            .load_live()
            .await
            .unwrap()
            .tombstones
            .into_iter()
            .map(|t| t.id)
            .collect();
        if !ids.contains(&"old".to_string()) {
            assert!(ids.contains(&format!("new-{n}")), "{ids:?}");
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "never pruned: {ids:?}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

macro_rules! store_suite {
    ($($test:ident),* $(,)?) => {
        mod memory { $( #[tokio::test] async fn $test() { super::$test(super::StoreKind::Memory).await } )* }
        mod sqlite { $( #[tokio::test] async fn $test() { super::$test(super::StoreKind::Sqlite).await } )* }
        mod postgres { $( #[tokio::test] async fn $test() { super::$test(super::StoreKind::Postgres).await } )* }
    };
}

store_suite!(
    tokens_only_go_up_even_after_reopening,
    clear_grant_only_clears_the_matching_token,
    deleting_a_session_clears_every_grant_it_holds,
    deleting_a_session_leaves_a_key_granted_since_to_another,
    a_restarted_service_restores_grants_with_leases_from_its_own_start,
    a_failed_commit_persists_none_of_its_writes,
    concurrent_commits_share_a_transaction_and_a_bad_one_fails_alone,
    a_batch_means_what_its_writes_mean_one_by_one,
    an_expired_session_answers_410_after_a_restart,
    tombstones_older_than_the_keep_are_forgotten,
);
