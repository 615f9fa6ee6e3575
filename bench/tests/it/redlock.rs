//! The Redlock backend end to end, against three real redis-server children:
//! a lock is granted on a majority, extended by rounds recorded as
//! heartbeats, released on every instance; a second client cannot take a
//! held key; one instance down still grants, two down refuse; and a lock
//! whose extend round loses its majority is reported lost. Without
//! `redis-server` these tests are skipped with a message, except under
//! `CI=true`, where its absence fails them (`.ci/run` installs it).

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bench_driver::backend::redlock::{RedlockBackend, RedlockConfig, RedlockError};
use bench_driver::backend::{BackendError, BackendSession, HeartbeatStats, LockBackend};
use fencepost_sdk::{LockError, LostReason};

const TTL: Duration = Duration::from_secs(1);

/// The redis-server binary: `FENCEPOST_REDIS`, else `redis-server` on PATH.
fn redis_binary() -> String {
    std::env::var("FENCEPOST_REDIS").unwrap_or_else(|_| "redis-server".into())
}

/// Whether redis-server can be started here; under `CI=true` its absence is a failure.
fn redis_here() -> bool {
    let found = Command::new(redis_binary())
        .arg("--version")
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    match found {
        true => true,
        false if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!(
                "CI=true and no {} to test the redlock backend against (apt-get install redis-server)",
                redis_binary()
            )
        }
        false => {
            eprintln!(
                "skipping: no {} (apt-get install redis-server)",
                redis_binary()
            );
            false
        }
    }
}

/// One redis-server child on a free loopback port, without persistence;
/// killed (SIGKILL) on drop.
struct Redis {
    child: Option<Child>,
    port: u16,
}

impl Redis {
    async fn start() -> Redis {
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let child = Command::new(redis_binary())
            .args(["--port", &port.to_string(), "--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no"])
            .stdout(Stdio::null())
            .spawn()
            .expect("redis-server starts");
        let up = eventually(Duration::from_secs(10), || {
            std::net::TcpStream::connect(("127.0.0.1", port)).is_ok()
        })
        .await;
        assert!(up, "redis-server on port {port} never listened");
        Redis {
            child: Some(child),
            port,
        }
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}", self.port)
    }

    /// kill -9: the instance is gone (connections are refused).
    fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Redis {
    fn drop(&mut self) {
        self.kill();
    }
}

async fn three() -> Vec<Redis> {
    vec![
        Redis::start().await,
        Redis::start().await,
        Redis::start().await,
    ]
}

fn client(servers: &[Redis], seed: u64) -> RedlockBackend {
    let mut config = RedlockConfig::new(servers.iter().map(Redis::url));
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
    let servers = three().await;
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
    assert_eq!(
        st.heartbeats, st.hb_replies,
        "every answered round extended"
    );

    a.release(h).await.expect("a releases");
    let h2 = b
        .acquire("payout:x", TTL, Duration::ZERO)
        .await
        .expect("the released key is free on every instance");
    b.release(h2).await.unwrap();
    a.close().await;
    b.close().await;
}

/// With N = 3, one instance killed still leaves a majority (2 of 3); a
/// second one killed leaves none: the lock is refused, naming the counts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_instance_down_still_grants_two_down_refuse() {
    if !redis_here() {
        return;
    }
    let mut servers = three().await;
    let c = client(&servers, 3);
    let s = c.open_session("w").await.unwrap();
    servers[0].kill();
    let h = s
        .acquire("payout:y", TTL, Duration::ZERO)
        .await
        .expect("2 of 3 is a majority");
    s.release(h).await.expect("released on the two live ones");
    servers[1].kill();
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
}

/// A held lock whose extend round finds no majority (two instances killed
/// behind its back) is lost at once: the listener fires once, the session
/// is lost, every check fails, and the loss is counted as expired.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_extend_round_without_a_majority_loses_the_lock() {
    if !redis_here() {
        return;
    }
    let mut servers = three().await;
    let c = client(&servers, 4);
    let s = c.open_session("w").await.unwrap();
    let fired = Arc::new(AtomicU64::new(0));
    let f = fired.clone();
    s.on_lock_lost(Box::new(move || {
        f.fetch_add(1, Ordering::Relaxed);
    }));
    let h = s.acquire("payout:z", TTL, Duration::ZERO).await.unwrap();
    servers[1].kill();
    servers[2].kill();
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
}
