//! The SDK against three `lock-server` replicas over one PostgreSQL schema
//! (C1 §6): configured with every URL, it follows `NOT_LEADER` (or moves to
//! the next replica) within the same deadline arithmetic. A session whose
//! deadline had room survives a failover; one without room is lost and stays
//! lost. Needs `FENCEPOST_TEST_PG_URL` (fails under `CI=true` without it).
//! Every wait is for a condition with a deadline.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use fencepost_harness::ChildService;
use fencepost_sdk::{
    AcquireOptions, Clock, LockClient, LockClientConfig, LockError, MonotonicClock,
};

/// How long any wait for a condition may take before the test fails.
const PATIENCE: Duration = Duration::from_secs(60);

/// A fresh schema in the test database, or `None` to skip (never under CI).
pub async fn fresh_pg_url() -> Option<String> {
    let url = match std::env::var("FENCEPOST_TEST_PG_URL") {
        Ok(u) if !u.is_empty() => u,
        _ if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!("CI=true but FENCEPOST_TEST_PG_URL is not set: .ci/run must start PostgreSQL")
        }
        _ => {
            eprintln!("skipping: set FENCEPOST_TEST_PG_URL (scripts/pg-test-cluster.sh start)");
            return None;
        }
    };
    let schema = format!("sdk_{:016x}", rand_u64());
    let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .expect("connect to FENCEPOST_TEST_PG_URL");
    tokio::spawn(conn);
    client
        .batch_execute(&format!("CREATE SCHEMA {schema}"))
        .await
        .expect("create schema");
    let sep = if url.contains('?') { '&' } else { '?' };
    Some(format!("{url}{sep}options=-csearch_path%3D{schema}"))
}

/// A seedless unique number (schema names only).
fn rand_u64() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u32(std::process::id());
    h.finish()
}

/// Three replicas (leader lease 1 s, grace 100 ms) on `url`.
async fn start_replicas(url: &str, test: &str) -> Vec<ChildService> {
    let dir = std::env::temp_dir().join("fencepost-sdk-it");
    std::fs::create_dir_all(&dir).unwrap();
    let mut nodes = Vec::new();
    for i in 0..3 {
        let stderr: PathBuf = dir.join(format!("{test}-{}-{i}.log", std::process::id()));
        let url = url.to_string();
        nodes.push(
            tokio::task::spawn_blocking(move || {
                let bin = fencepost_harness::binary("lock-server", "lock-server")
                    .expect("lock-server binary");
                ChildService::start(
                    &bin,
                    ["--store", &url, "--leader-lease", "1s", "--grace", "100ms"],
                    &stderr,
                )
                .expect("replica starts")
            })
            .await
            .unwrap(),
        );
    }
    nodes
}

/// The index of the one replica whose `/readyz` is 200, among `among`.
async fn await_leader(nodes: &[ChildService], among: &[usize]) -> usize {
    let c = reqwest::Client::builder()
        .timeout(Duration::from_millis(500))
        .build()
        .unwrap();
    let deadline = Instant::now() + PATIENCE;
    loop {
        let mut ready = Vec::new();
        for &i in among {
            let r = c.get(format!("{}/readyz", nodes[i].url())).send().await;
            if r.is_ok_and(|r| r.status() == 200) {
                ready.push(i);
            }
        }
        if let [one] = ready[..] {
            return one;
        }
        assert!(Instant::now() < deadline, "no single leader: {ready:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A client given every replica, a standby's URL first (so the very first
/// exchange already has to follow NOT_LEADER).
fn client(
    nodes: &[ChildService],
    leader: usize,
    clock: Arc<dyn Clock>,
    ttl: Duration,
) -> LockClient {
    let mut urls: Vec<String> = nodes.iter().map(|n| n.url()).collect();
    let n = urls.len();
    urls.rotate_left((leader + 1) % n);
    LockClient::new(
        LockClientConfig::new("http://unused")
            .with_urls(urls)
            .with_clock(clock)
            .with_session_ttl(ttl)
            .with_default_ttl(ttl)
            .with_request_timeout(Duration::from_millis(400)),
    )
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_with_room_survives_a_kill9_failover_and_keeps_its_lock() {
    crate::init_tracing();
    let Some(url) = fresh_pg_url().await else {
        return;
    };
    let mut nodes = start_replicas(&url, "failover-room").await;
    let leader = await_leader(&nodes, &[0, 1, 2]).await;
    let clock: Arc<dyn Clock> = Arc::new(MonotonicClock::new());
    // 10 s: the usable 7 s is far more than a takeover (about 1.1 s) needs.
    let ttl = Duration::from_secs(10);
    let c = client(&nodes, leader, clock.clone(), ttl);
    let session = c.open_session("room").await.expect("L1 through a standby");
    let handle = session
        .acquire("room:lock", AcquireOptions::default())
        .await
        .expect("L4");
    let lost = crate::count_losses(&session);
    let deadline_before = handle.client_deadline();
    let hb_before = c.stats().heartbeats;

    nodes[leader].kill9();
    let rest: Vec<usize> = (0..3).filter(|&i| i != leader).collect();
    let new = await_leader(&nodes, &rest).await;
    // Heartbeats and renewals reach the new leader and move the deadlines on.
    let deadline = Instant::now() + PATIENCE;
    while session.remaining(&handle).is_ok()
        && !(handle.client_deadline() > deadline_before && c.stats().heartbeats >= hb_before + 2)
    {
        assert!(Instant::now() < deadline, "never renewed on the new leader");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    session
        .check_still_held(&handle)
        .expect("held across the failover");
    assert_eq!(lost.load(std::sync::atomic::Ordering::SeqCst), 0);
    let token = handle.token();
    session.release(handle).await.expect("L6 on the new leader");
    // The new leader issues the next token above the old leader's.
    let next = session
        .acquire("room:lock", AcquireOptions::default())
        .await
        .expect("L4 again");
    assert!(next.token() > token, "{} after {token}", next.token());
    let _ = new;
    session.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_without_room_is_lost_across_a_sigstop_failover_and_stays_lost() {
    crate::init_tracing();
    let Some(url) = fresh_pg_url().await else {
        return;
    };
    let mut nodes = start_replicas(&url, "failover-none").await;
    let leader = await_leader(&nodes, &[0, 1, 2]).await;
    let clock: Arc<dyn Clock> = Arc::new(MonotonicClock::new());
    // 1 s: usable 700 ms, less than any takeover (the leader lease, 1 s, less
    // one leader renew period, 233 ms, plus grace): no room.
    let ttl = Duration::from_secs(1);
    let c = client(&nodes, leader, clock.clone(), ttl);
    let session = c.open_session("none").await.expect("L1");
    let handle = session
        .acquire("none:lock", AcquireOptions::default())
        .await
        .expect("L4");
    let lost = crate::count_losses(&session);

    nodes[leader].pause().expect("SIGSTOP");
    let rest: Vec<usize> = (0..3).filter(|&i| i != leader).collect();
    let _new = await_leader(&nodes, &rest).await;
    let deadline = Instant::now() + PATIENCE;
    while lost.load(std::sync::atomic::Ordering::SeqCst) == 0 {
        assert!(Instant::now() < deadline, "the loss was never reported");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    nodes[leader].resume().expect("SIGCONT");
    assert!(session.check_still_held(&handle).is_err());
    assert!(session.lost_reason().is_some(), "the session is lost");
    // Nothing revives it: L4 on the lost session is refused locally.
    let again = session
        .acquire("none:lock", AcquireOptions::default())
        .await;
    assert!(
        matches!(
            again,
            Err(LockError::SessionLost { .. })
                | Err(LockError::SessionExpired)
                | Err(LockError::SessionUnknown)
        ),
        "{again:?}"
    );
    assert_eq!(lost.load(std::sync::atomic::Ordering::SeqCst), 1);
}

/// Two mocks, no database: the first answers L4 `503 NOT_LEADER` after
/// 300 ms, the second grants. The hop is followed within the same exchange,
/// and the handle's deadline counts from the *first* send: the time spent
/// finding the leader is taken from the lease, never added to it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn following_not_leader_counts_the_hop_against_the_lease() {
    use crate::mock::{Ep, Mock, Scripted};
    let clock: Arc<dyn Clock> = Arc::new(MonotonicClock::new());
    let (a, b) = (
        Mock::start(clock.clone()).await,
        Mock::start(clock.clone()).await,
    );
    let ttl = Duration::from_secs(10);
    let c = LockClient::new(
        LockClientConfig::new("http://unused")
            .with_urls([a.url.clone(), b.url.clone()])
            .with_clock(clock.clone())
            .with_session_ttl(ttl)
            .with_default_ttl(ttl)
            .with_request_timeout(Duration::from_secs(2)),
    )
    .unwrap();
    let session = c.open_session("hop").await.expect("L1 on the first URL");
    let hop = Duration::from_millis(300);
    a.script(
        Ep::Acquire,
        [Scripted {
            delay: hop,
            ..Scripted::err(503, "NOT_LEADER")
        }],
    );
    let t0 = clock.now();
    let handle = session
        .acquire("k", AcquireOptions::default())
        .await
        .expect("granted by the second replica");
    assert_eq!((a.count(Ep::Acquire), b.count(Ep::Acquire)), (1, 1));
    let second_arrival = b.arrivals(Ep::Acquire)[0];
    assert!(second_arrival >= t0.saturating_add(hop));
    let usable = fencepost_sdk::lease::usable(ttl, 300_000);
    // The second send came at least `hop` after t0: a deadline from it would
    // be at least t0 + hop + usable. From the first send it is below that.
    assert!(
        handle.client_deadline() < t0.saturating_add(hop + usable),
        "the deadline counts from the second send: {:?} ≥ {:?}",
        handle.client_deadline(),
        t0.saturating_add(hop + usable)
    );
    // The next exchange goes straight to the replica that served.
    session.release(handle).await.expect("L6");
    assert_eq!(b.count(Ep::Release), 1);
    assert_eq!(a.count(Ep::Release), 0);
}
