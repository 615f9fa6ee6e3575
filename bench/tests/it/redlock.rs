//! The Redlock backend end to end, against three real redis-server children:
//! a lock is granted on a majority, extended by rounds recorded as
//! heartbeats, released on every instance; a second client cannot take a
//! held key; one instance down still grants, two down refuse; and a lock
//! whose extend round loses its majority is reported lost; a bench cell on
//! redlock pays with the rail's fences off. Without
//! `redis-server` these tests are skipped with a message, except under
//! `CI=true`, where its absence fails them (`.ci/run` installs it).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bench::runner;
use bench_core::grid::Cell;
use bench_driver::backend::redis::server::{self, RedisPersistence, RedisServer, redis_binary};
use bench_driver::backend::redlock::{RedlockBackend, RedlockConfig, RedlockError};
use bench_driver::backend::{
    BackendError, BackendKind, BackendSession, HeartbeatStats, LockBackend, RailFences,
};
use fencepost_sdk::{LockError, LostReason};
use tokio::sync::watch;

const TTL: Duration = Duration::from_secs(1);

/// Whether redis-server can be started here; under `CI=true` its absence is a failure.
fn redis_here() -> bool {
    match redis_binary() {
        Ok(_) => true,
        Err(e) if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!("CI=true and no redis-server to test the redlock backend against: {e:#}")
        }
        Err(e) => {
            eprintln!("skipping: {e:#}");
            false
        }
    }
}

fn temp_dir(tag: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!(
        "fencepost-redlock-{tag}-{}-{}",
        std::process::id(),
        rand::random::<u32>()
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Three redis-server children without persistence, in a fresh directory.
async fn three(tag: &str) -> (Vec<RedisServer>, std::path::PathBuf) {
    let dir = temp_dir(tag);
    let servers = server::start_n(&dir, 3, RedisPersistence::None)
        .await
        .expect("three redis-servers start");
    (servers, dir)
}

fn client(servers: &[RedisServer], seed: u64) -> RedlockBackend {
    let mut config = RedlockConfig::new(servers.iter().map(RedisServer::url), TTL);
    config.seed = seed;
    RedlockBackend::new(config).expect("a valid config")
}

/// Waits for `cond` to hold, up to `limit`, polling; false if it never did.
async fn eventually(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + limit;
    while tokio::time::Instant::now() < deadline {
        if cond() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    cond()
}

/// A held key blocks a second client (every instance says no); extend
/// rounds move the deadline and are counted as heartbeats; D4 refuses a step
/// longer than the lease; release frees the key on every instance.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redlock_grants_extends_blocks_and_releases_on_three_instances() {
    if !redis_here() {
        return;
    }
    let (servers, dir) = three("grant").await;
    let (a_client, b_client) = (client(&servers, 1), client(&servers, 2));
    let a = a_client.open_session("a").await.unwrap();
    let b = b_client.open_session("b").await.unwrap();
    let h = a
        .acquire("payout:x", TTL, Duration::ZERO)
        .await
        .expect("a gets the free key");
    assert_eq!(h.token(), 0, "Redlock has no fencing token");
    let refused = b
        .acquire("payout:x", TTL, Duration::ZERO)
        .await
        .expect_err("b must not get a held key");
    assert!(
        matches!(
            &refused,
            BackendError::Redlock(RedlockError::NoQuorum { yes: 0, no: 3, .. })
        ),
        "{refused:?}"
    );

    // Extend rounds: at a 1 s TTL and margin 0.3 the period is 233 ms.
    let first = h.deadline();
    assert!(
        eventually(Duration::from_secs(10), || a_client.stats().hb_replies >= 3).await,
        "no extend round answered: {:?}",
        a_client.stats()
    );
    assert!(h.deadline() > first, "extend rounds move the deadline");
    assert!(a.check_still_held(&h).is_ok());
    assert!(matches!(
        a.ensure_time_for(&h, Duration::from_secs(5)),
        Err(LockError::InsufficientLease { .. })
    ));
    let st = a_client.stats();
    assert_eq!(
        st.hb_attempts, st.hb_replies,
        "every round answered: {st:?}"
    );
    assert!(st.heartbeats >= 3, "the held lock was extended: {st:?}");

    a.release(h).await.expect("a releases");
    let h2 = b
        .acquire("payout:x", TTL, Duration::ZERO)
        .await
        .expect("the released key is free on every instance");
    b.release(h2).await.unwrap();
    a.close().await;
    b.close().await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// With N = 3, one instance killed still leaves a majority (2 of 3); a
/// second one killed leaves none: the lock is refused, naming the counts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_instance_down_still_grants_two_down_refuse() {
    if !redis_here() {
        return;
    }
    let (mut servers, dir) = three("down").await;
    let c = client(&servers, 3);
    let s = c.open_session("w").await.unwrap();
    servers[0].child_mut().kill9();
    let h = s
        .acquire("payout:y", TTL, Duration::ZERO)
        .await
        .expect("2 of 3 is a majority");
    s.release(h).await.expect("released on the two live ones");
    servers[1].child_mut().kill9();
    let refused = s
        .acquire("payout:y", TTL, Duration::from_millis(300))
        .await
        .expect_err("1 of 3 is no majority");
    assert!(
        matches!(
            &refused,
            BackendError::Redlock(RedlockError::NoQuorum {
                yes: 1,
                failed: 2,
                needed: 2,
                ..
            })
        ),
        "{refused:?}"
    );
    assert!(!s.is_lost(), "a refused acquire loses nothing");
    assert_eq!(c.stats().acquires_failed, 1);
    let _ = std::fs::remove_dir_all(&dir);
}

/// A held lock whose extend round finds no majority (two instances killed
/// behind its back) is lost at once: the listener fires once, the session
/// is lost, every check fails, and the loss is counted as expired.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_extend_round_without_a_majority_loses_the_lock() {
    if !redis_here() {
        return;
    }
    let (mut servers, dir) = three("extend").await;
    let c = client(&servers, 4);
    let s = c.open_session("w").await.unwrap();
    let fired = Arc::new(AtomicU64::new(0));
    let f = fired.clone();
    s.on_lock_lost(Box::new(move || {
        f.fetch_add(1, Ordering::Relaxed);
    }));
    let h = s.acquire("payout:z", TTL, Duration::ZERO).await.unwrap();
    servers[1].child_mut().kill9();
    servers[2].child_mut().kill9();
    assert!(
        eventually(Duration::from_secs(5), || fired.load(Ordering::Relaxed)
            == 1)
        .await,
        "the lost lock was never reported: {:?}",
        c.stats()
    );
    assert!(s.is_lost());
    assert!(matches!(
        s.check_still_held(&h),
        Err(fencepost_sdk::LockLost {
            reason: LostReason::SessionExpired,
            ..
        })
    ));
    let st = c.stats();
    assert_eq!(st.sessions_lost_expired, 1, "{st:?}");
    assert_eq!(st.handles_lost, 1, "{st:?}");
    assert!(
        s.release(h).await.is_err(),
        "a lost lock is not released as held"
    );
    assert_eq!(fired.load(Ordering::Relaxed), 1, "reported once");
    let _ = std::fs::remove_dir_all(&dir);
}

/// `bench run --backend redlock` in small: three redis-servers and a rail
/// with its fences off; payouts are paid, nothing is fenced, a payout is
/// paid twice only through a submit whose outcome the worker never learnt,
/// and the row says redlock, fences off, and the lease as its session TTL.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bench_cell_on_redlock_pays_with_no_duplicate_and_fences_off() {
    if !redis_here() {
        return;
    }
    let mut cfg = crate::driver::config(None);
    cfg.workers = 4;
    cfg.duration = Duration::from_secs(3);
    cfg.backends = vec![BackendKind::Redlock];
    let cfg = cfg.on_backend(BackendKind::Redlock);
    let plan = cfg.plan(Cell::fixed(Duration::from_secs(1), 0.3));
    assert_eq!(plan.id, "backend=redlock_ttl=1s_margin=0.30");
    let out = temp_dir("cell");
    let (_tx, rx) = watch::channel(false);
    let result = runner::run_cell(&cfg, &plan, &out, rx, &|_| {}, false, None)
        .await
        .expect("the cell runs")
        .expect("not interrupted");
    let r = &result.row;
    assert_eq!(r.backend, "redlock");
    assert_eq!(r.rail_fences, RailFences::Off.to_string());
    assert_eq!(r.session_ttl_ms, 1_000, "no session: the lease");
    assert!(r.payouts_paid > 0, "{r:?}");
    assert_eq!(r.fenced_out, 0, "no fence to refuse anything: {r:?}");
    // With no token, a submit whose answer never came (a rail stalled past
    // the hop, as on a loaded machine) can be decided after the next
    // holder's and pay again: every double payment needs one such submit.
    assert!(
        r.paid_twice <= r.rail_transport_errors,
        "a double payment without an unknown-outcome submit: {r:?}"
    );
    assert_eq!(r.ledger_ok, r.paid_twice == 0 && r.stale_paid == 0, "{r:?}");
    let _ = std::fs::remove_dir_all(&out);
}
