//! The session binding survives what a session survives: a
//! restart on every store (and so a takeover, which loads the store the same
//! way), its tombstone included; and a SQLite file or PostgreSQL schema made
//! before the principal columns existed gets them on open, its old sessions
//! unbound (NULL). PostgreSQL runs where `FENCEPOST_TEST_PG_URL` is set, and
//! fails when `CI=true` without it.

use std::sync::Arc;
use std::time::Duration;

use fencepost_api::clock::{FakeClock, MonoTime};
use fencepost_api::lock::LockErrorCode;
use lock_server::core::Caller;
use lock_server::service::ServiceError;
use lock_server::store::{self, LockStore};
use lock_server::{Limits, LockService};

use crate::support::{StoreKind, temp_dir};

fn code<T>(r: Result<T, ServiceError>) -> Option<LockErrorCode> {
    match r {
        Ok(_) => None,
        Err(ServiceError::Refused(e)) => Some(e.code),
        Err(e) => panic!("not a refusal: {e}"),
    }
}

async fn start(store: Arc<dyn LockStore>, clock: &FakeClock) -> Arc<LockService> {
    LockService::start(Limits::default(), store, Arc::new(clock.clone()))
        .await
        .unwrap()
}

/// Reopens the store at `url` (the same object for `memory:`, which lives
/// only in this process).
async fn reopen(kind: StoreKind, url: &str, old: Arc<dyn LockStore>) -> Arc<dyn LockStore> {
    if matches!(kind, StoreKind::Memory) {
        return old;
    }
    drop(old);
    store::open(url).await.unwrap()
}

async fn the_binding_and_its_tombstone_survive_a_restart(kind: StoreKind) {
    let Some(url) = kind.fresh_url().await else {
        return;
    };
    let alice = Caller::Principal("alice");
    let bob = Caller::Principal("bob");
    let store = store::open(&url).await.unwrap();
    let clock = FakeClock::new(MonoTime::from_nanos(5_000_000_000));
    let first = start(store.clone(), &clock).await;
    let live = first
        .create_session_as(alice, "w", Some(60_000))
        .await
        .unwrap()
        .session_id;
    let expiring = first
        .create_session_as(alice, "w", Some(1_000))
        .await
        .unwrap()
        .session_id;
    let unbound = first
        .create_session_as(Caller::Anyone, "w", Some(60_000))
        .await
        .unwrap()
        .session_id;
    first
        .acquire_as(alice, "payout:1", &live, Some(30_000))
        .await
        .unwrap();
    clock.advance(Duration::from_secs(5));
    first.heartbeat_as(alice, &live).await.unwrap();
    first.sweep().await;
    assert_eq!(
        code(first.heartbeat_as(alice, &expiring).await),
        Some(LockErrorCode::SessionExpired)
    );
    let snap = store.load_live().await.unwrap();
    let bound: Vec<_> = snap
        .sessions
        .iter()
        .map(|s| (s.id.as_str(), s.principal.as_deref()))
        .collect();
    assert!(bound.contains(&(live.as_str(), Some("alice"))), "{bound:?}");
    assert!(bound.contains(&(unbound.as_str(), None)), "{bound:?}");
    assert_eq!(snap.tombstones.len(), 1);
    assert_eq!(snap.tombstones[0].principal.as_deref(), Some("alice"));
    drop(first);

    let store = reopen(kind, &url, store).await;
    let clock = FakeClock::new(MonoTime::from_nanos(1));
    let second = start(store, &clock).await;
    let before = second.state_digest().await;
    // Another principal: 403 on every session operation, nothing changes.
    assert_eq!(
        code(second.heartbeat_as(bob, &live).await),
        Some(LockErrorCode::Forbidden)
    );
    assert_eq!(
        code(second.release_as(bob, "payout:1", &live, 1).await),
        Some(LockErrorCode::Forbidden)
    );
    assert_eq!(
        code(second.renew_as(bob, "payout:1", &live, 1, None).await),
        Some(LockErrorCode::Forbidden)
    );
    assert_eq!(
        code(second.acquire_as(bob, "payout:2", &live, None).await),
        Some(LockErrorCode::Forbidden)
    );
    assert_eq!(
        code(second.delete_session_as(bob, &live).await),
        Some(LockErrorCode::Forbidden)
    );
    assert_eq!(
        code(second.heartbeat_as(bob, &expiring).await),
        Some(LockErrorCode::Forbidden),
        "a tombstone of alice's answers bob 403"
    );
    assert_eq!(
        code(second.heartbeat_as(bob, &unbound).await),
        Some(LockErrorCode::Forbidden),
        "a session opened with auth off is no token's"
    );
    assert_eq!(second.state_digest().await, before);
    // The owner: her session works, her tombstone says 410.
    second.heartbeat_as(alice, &live).await.unwrap();
    assert_eq!(
        code(second.heartbeat_as(alice, &expiring).await),
        Some(LockErrorCode::SessionExpired)
    );
    second
        .release_as(alice, "payout:1", &live, 1)
        .await
        .unwrap();
    // With auth off nothing is checked, as before API tokens existed.
    second.heartbeat_as(Caller::Anyone, &unbound).await.unwrap();
}

#[tokio::test]
async fn memory_the_binding_and_its_tombstone_survive_a_restart() {
    the_binding_and_its_tombstone_survive_a_restart(StoreKind::Memory).await;
}

#[tokio::test]
async fn sqlite_the_binding_and_its_tombstone_survive_a_restart() {
    the_binding_and_its_tombstone_survive_a_restart(StoreKind::Sqlite).await;
}

#[tokio::test]
async fn postgres_the_binding_and_its_tombstone_survive_a_restart() {
    the_binding_and_its_tombstone_survive_a_restart(StoreKind::Postgres).await;
}

/// The schema of a SQLite file written before API tokens existed.
const OLD_SQLITE_SCHEMA: &str = "
CREATE TABLE fp_sessions (id TEXT PRIMARY KEY, owner_id TEXT NOT NULL, ttl_ms BIGINT NOT NULL);
CREATE TABLE fp_locks (key TEXT PRIMARY KEY, last_token BIGINT NOT NULL, holder_session TEXT,
    holder_token BIGINT, lease_ms BIGINT) WITHOUT ROWID;
CREATE TABLE fp_tombstones (id TEXT PRIMARY KEY, expired_at_ms BIGINT NOT NULL);
INSERT INTO fp_sessions VALUES ('old', 'w', 60000);
INSERT INTO fp_locks VALUES ('k', 7, 'old', 7, 30000);
INSERT INTO fp_tombstones VALUES ('gone', CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER));
";

#[tokio::test]
async fn sqlite_a_file_from_before_the_principal_columns_is_migrated_on_open() {
    let path = temp_dir("auth-migrate").join("lock.sqlite");
    {
        let c = rusqlite::Connection::open(&path).unwrap();
        c.execute_batch(OLD_SQLITE_SCHEMA).unwrap();
    }
    let url = format!("sqlite:{}", path.display());
    let store = store::open(&url).await.unwrap();
    let snap = store.load_live().await.unwrap();
    assert_eq!(snap.sessions.len(), 1);
    assert_eq!(snap.sessions[0].principal, None);
    assert_eq!(snap.tombstones[0].principal, None);
    let clock = FakeClock::new(MonoTime::from_nanos(1));
    let svc = start(store.clone(), &clock).await;
    // The old session is no token's; with auth off it works as before.
    assert_eq!(
        code(svc.heartbeat_as(Caller::Principal("alice"), "old").await),
        Some(LockErrorCode::Forbidden)
    );
    svc.heartbeat("old").await.unwrap();
    let sid = svc
        .create_session_as(Caller::Principal("alice"), "w", None)
        .await
        .unwrap()
        .session_id;
    drop(svc);
    drop(store);
    // Opened again (the columns are there now): nothing is added twice.
    let store = store::open(&url).await.unwrap();
    let snap = store.load_live().await.unwrap();
    let alice = snap.sessions.iter().find(|s| s.id == sid).unwrap();
    assert_eq!(alice.principal.as_deref(), Some("alice"));
}

#[tokio::test]
async fn postgres_a_schema_from_before_the_principal_columns_is_migrated_on_open() {
    let Some(url) = StoreKind::Postgres.fresh_url().await else {
        return;
    };
    let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    let task = tokio::spawn(conn);
    client
        .batch_execute(
            "CREATE TABLE fp_sessions (id TEXT PRIMARY KEY, owner_id TEXT NOT NULL, ttl_ms BIGINT NOT NULL);
             CREATE TABLE fp_tombstones (id TEXT PRIMARY KEY, expired_at_ms BIGINT NOT NULL);
             INSERT INTO fp_sessions VALUES ('old', 'w', 60000);",
        )
        .await
        .unwrap();
    drop(client);
    let _ = task.await;
    let store = store::open(&url).await.unwrap();
    let snap = store.load_live().await.unwrap();
    assert_eq!(snap.sessions.len(), 1);
    assert_eq!(snap.sessions[0].principal, None);
    let clock = FakeClock::new(MonoTime::from_nanos(1));
    let svc = start(store, &clock).await;
    let sid = svc
        .create_session_as(Caller::Principal("alice"), "w", None)
        .await
        .unwrap()
        .session_id;
    drop(svc);
    let store = store::open(&url).await.unwrap();
    let snap = store.load_live().await.unwrap();
    let alice = snap.sessions.iter().find(|s| s.id == sid).unwrap();
    assert_eq!(alice.principal.as_deref(), Some("alice"));
}
