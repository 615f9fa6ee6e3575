//! The redis backend end to end, against real redis-server children: the
//! server starts, freezes, restarts in place with or without its
//! append-only file; the adapter grants, renews, fences and loses like the
//! SDK does; a bench cell on redis pays with no duplicate. Without `redis-server` on PATH these tests are skipped
//! with a message, except under `CI=true`, where a missing redis-server fails
//! them (`.ci/run` installs `redis-server`).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bench::runner;
use bench_core::grid::Cell;
use bench_driver::backend::redis::server::{self, RedisPersistence, RedisServer, redis_binary};
use bench_driver::backend::redis::{RedisBackend, RedisConfig, RedisHandle, RedisSession};
use bench_driver::backend::{
    BackendError, BackendKind, BackendSession, HeartbeatStats, LockBackend, RailFences,
};
use bench_driver::cell::stack::{Runtime, Stack, StackSpec};
use fencepost_sdk::{LockError, LostReason};
use tokio::sync::watch;

/// Whether redis-server can be started here; under `CI=true` its absence is a failure.
fn redis_here() -> bool {
    match redis_binary() {
        Ok(_) => true,
        Err(e) if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!("CI=true and no redis-server to test the redis backend against: {e:#}")
        }
        Err(e) => {
            eprintln!("skipping: {e:#}");
            false
        }
    }
}

fn temp_dir(tag: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!(
        "fencepost-redis-{tag}-{}-{}",
        std::process::id(),
        rand::random::<u32>()
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}

async fn connect(url: &str) -> redis::aio::MultiplexedConnection {
    redis::Client::open(url)
        .unwrap()
        .get_multiplexed_async_connection()
        .await
        .expect("redis answers")
}

async fn get(url: &str, key: &str) -> Option<String> {
    let mut c = connect(url).await;
    redis::cmd("GET")
        .arg(key)
        .query_async(&mut c)
        .await
        .unwrap()
}

async fn set(url: &str, key: &str, value: &str) {
    let mut c = connect(url).await;
    let () = redis::cmd("SET")
        .arg(key)
        .arg(value)
        .query_async(&mut c)
        .await
        .unwrap();
}

/// A frozen server answers no PING; thawed, it does; killed and started
/// again in place it keeps its URL, and keeps its keys only with an
/// append-only file.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_freezes_and_restarts_in_place_keeping_keys_only_when_persistent() {
    if !redis_here() {
        return;
    }
    let dir = temp_dir("server");
    let mut always = RedisServer::start(&dir.join("always"), RedisPersistence::Always)
        .await
        .expect("redis-server starts");
    let mut none = RedisServer::start(&dir.join("none"), RedisPersistence::None)
        .await
        .expect("redis-server starts");
    assert!(always.args().join(" ").contains("--appendfsync always"));
    let addr = |s: &RedisServer| s.url().trim_start_matches("redis://").parse().unwrap();
    for s in [&always, &none] {
        set(&s.url(), "k", "v").await;
    }

    always.child_mut().pause().unwrap();
    assert!(
        !server::ping(addr(&always)).await,
        "a frozen server answers nothing"
    );
    always.child_mut().resume().unwrap();
    assert!(server::ping(addr(&always)).await);

    let (url_always, url_none) = (always.url(), none.url());
    always.restart(1).await.expect("restarts in place");
    none.restart(1).await.expect("restarts in place");
    assert_eq!((always.url(), none.url()), (url_always, url_none));
    assert_eq!(get(&always.url(), "k").await.as_deref(), Some("v"));
    assert_eq!(
        get(&none.url(), "k").await,
        None,
        "no file: the key is gone"
    );
    assert!(dir.join("none/redis.restart-1.log").is_file());
    drop((always, none));
    let _ = std::fs::remove_dir_all(&dir);
}

/// `start_n` gives N independent servers on N ports.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn start_n_starts_independent_servers() {
    if !redis_here() {
        return;
    }
    let dir = temp_dir("three");
    let servers = server::start_n(&dir, 3, RedisPersistence::None)
        .await
        .expect("three redis-servers start");
    let mut urls: Vec<String> = servers.iter().map(RedisServer::url).collect();
    set(&urls[0], "only-here", "1").await;
    assert_eq!(get(&urls[1], "only-here").await, None);
    urls.dedup();
    assert_eq!(urls.len(), 3);
    assert!(dir.join("redis-2.log").is_file());
    drop(servers);
    let _ = std::fs::remove_dir_all(&dir);
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

const SEC: Duration = Duration::from_secs(1);

/// A backend on `url` with a 1 s lease, seeded `seed`.
fn backend(url: &str, seed: u64) -> RedisBackend {
    let mut config = RedisConfig::new(url, SEC);
    config.seed = seed;
    RedisBackend::new(config).unwrap()
}

/// The lock key of `payout:x`, as the adapter names it.
const LOCK_X: &str = "lock:{payout:x}";

/// A held key blocks a second session; its release lets it in under a
/// higher token; renew exchanges move the session deadline, are all
/// accounted for, and extend the held key on the server; D4 refuses a step
/// longer than the lease.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_adapter_grants_renews_and_releases_on_a_real_redis() {
    if !redis_here() {
        return;
    }
    let dir = temp_dir("adapter");
    let redis = RedisServer::start(&dir, RedisPersistence::None)
        .await
        .unwrap();
    let (a_client, b_client) = (backend(&redis.url(), 1), backend(&redis.url(), 2));
    let a = a_client.open_session("a").await.expect("session a");
    let b = b_client.open_session("b").await.expect("session b");
    let h1 = a
        .acquire("payout:x", SEC, Duration::ZERO)
        .await
        .expect("a gets the free key");
    assert_eq!(get(&redis.url(), LOCK_X).await.as_deref(), Some(h1.value()));
    let refused = b
        .acquire("payout:x", SEC, Duration::ZERO)
        .await
        .unwrap_err();
    assert!(
        matches!(
            refused,
            BackendError::Lock(LockError::LockHeld { attempts: 1, .. })
        ),
        "{refused:?}"
    );
    let t1 = h1.token();
    // Renewals: at a 1 s lease and margin 0.3 the period is 233 ms.
    let first_deadline = a.client_deadline();
    assert!(
        eventually(10 * SEC, || a_client.stats().renewals >= 3).await,
        "the held key was not renewed: {:?}",
        a_client.stats()
    );
    assert!(
        a.client_deadline() > first_deadline,
        "renewals move the deadline"
    );
    let mut c = connect(&redis.url()).await;
    let pttl: i64 = redis::cmd("PTTL")
        .arg(LOCK_X)
        .query_async(&mut c)
        .await
        .unwrap();
    assert!(
        pttl > 500,
        "the key's expiry was extended on the server: {pttl} ms left"
    );
    a.check_still_held(&h1).expect("held");
    assert!(matches!(
        a.ensure_time_for(&h1, SEC),
        Err(LockError::InsufficientLease { .. })
    ));
    a.release(h1).await.expect("a releases");
    assert_eq!(
        get(&redis.url(), LOCK_X).await,
        None,
        "release deletes the key"
    );
    let h2 = b
        .acquire("payout:x", SEC, Duration::from_millis(200))
        .await
        .expect("b gets the released key");
    assert!(
        h2.token() > t1,
        "tokens only go up: {} after {t1}",
        h2.token()
    );
    let st = a_client.stats();
    assert_eq!(
        st.hb_attempts,
        st.hb_replies + st.hb_timeouts + st.hb_errors
    );
    assert_eq!(
        st.heartbeats, st.hb_replies,
        "every reply renewed the session"
    );
    assert!(a_client.rtt_histogram().len() >= 3);
    assert!(a_client.corrected_rtt_histogram().len() >= a_client.rtt_histogram().len());
    assert_eq!(st.renew_refusals, 0);
    b.release(h2).await.unwrap();
    a.close().await;
    b.close().await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// Holders one after another, across sessions and clients, each get a
/// token above every earlier one for the same key; another key counts on
/// its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tokens_strictly_increase_per_key_across_holders() {
    if !redis_here() {
        return;
    }
    let dir = temp_dir("tokens");
    let redis = RedisServer::start(&dir, RedisPersistence::None)
        .await
        .unwrap();
    let clients = [backend(&redis.url(), 3), backend(&redis.url(), 4)];
    let mut last = 0;
    for round in 0..6 {
        let s = clients[round % 2].open_session("w").await.unwrap();
        let h = s.acquire("payout:t", SEC, SEC).await.unwrap();
        assert!(
            h.token() > last,
            "round {round}: {} after {last}",
            h.token()
        );
        last = h.token();
        s.release(h).await.unwrap();
        s.close().await;
    }
    let s = clients[0].open_session("w").await.unwrap();
    let other = s.acquire("payout:u", SEC, SEC).await.unwrap();
    assert_eq!(other.token(), 1, "each key has its own counter");
    s.close().await;
    assert_eq!(
        get(&redis.url(), "lock:{payout:u}").await,
        None,
        "close releases"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// Listens for lost locks on `s`, counting them.
fn count_losses(s: &RedisSession) -> Arc<AtomicU64> {
    let lost = Arc::new(AtomicU64::new(0));
    let l = lost.clone();
    s.on_lock_lost(Box::new(move || {
        l.fetch_add(1, Ordering::SeqCst);
    }));
    lost
}

/// The key expires behind a's back and b takes it: a's next renew is
/// refused and reported (the session is lost, the listener fires once,
/// every check fails), and a can neither extend nor delete b's key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_owner_loses_its_renew_and_cannot_touch_the_successors_key() {
    if !redis_here() {
        return;
    }
    let dir = temp_dir("stale");
    let redis = RedisServer::start(&dir, RedisPersistence::None)
        .await
        .unwrap();
    let (a_client, b_client) = (backend(&redis.url(), 5), backend(&redis.url(), 6));
    let a = a_client.open_session("a").await.unwrap();
    let b = b_client.open_session("b").await.unwrap();
    let stale: RedisHandle = a.acquire("payout:x", SEC, Duration::ZERO).await.unwrap();
    let lost = count_losses(&a);
    // The key vanishes (as if it had expired during a pause) and b takes it.
    let mut c = connect(&redis.url()).await;
    let () = redis::cmd("DEL")
        .arg(LOCK_X)
        .query_async(&mut c)
        .await
        .unwrap();
    let fresh = b
        .acquire("payout:x", SEC, Duration::ZERO)
        .await
        .expect("b takes the freed key");
    assert!(fresh.token() > stale.token());
    assert!(
        eventually(5 * SEC, || a.is_lost()).await,
        "the refused renew was not reported"
    );
    assert_eq!(a.lost_reason(), Some(LostReason::SessionExpired));
    assert!(
        eventually(5 * SEC, || lost.load(Ordering::SeqCst) == 1).await,
        "the listener fired {} times for one held key",
        lost.load(Ordering::SeqCst)
    );
    let st = a_client.stats();
    assert_eq!(
        (st.renew_refusals, st.sessions_lost_expired, st.handles_lost),
        (1, 1, 1)
    );
    assert_eq!(
        a.check_still_held(&stale).unwrap_err().reason,
        LostReason::SessionExpired
    );
    assert!(
        matches!(
            a.release(stale).await,
            Err(BackendError::Lock(LockError::LockLost(_)))
        ),
        "a lost grant is not released"
    );
    assert_eq!(
        get(&redis.url(), LOCK_X).await.as_deref(),
        Some(fresh.value())
    );
    b.check_still_held(&fresh).expect("b still holds it");
    b.release(fresh).await.unwrap();
    a.close().await;
    b.close().await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// A release that reaches the server after the key changed hands deletes
/// nothing: the compare-value script refuses it (with a 10 s lease, no
/// renew tick tells the stale session first).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stale_release_never_deletes_the_successors_key() {
    if !redis_here() {
        return;
    }
    let dir = temp_dir("release");
    let redis = RedisServer::start(&dir, RedisPersistence::None)
        .await
        .unwrap();
    let long = |seed| {
        let mut config = RedisConfig::new(redis.url(), 10 * SEC);
        config.seed = seed;
        RedisBackend::new(config).unwrap()
    };
    let (a_client, b_client) = (long(8), long(9));
    let a = a_client.open_session("a").await.unwrap();
    let b = b_client.open_session("b").await.unwrap();
    let stale = a.acquire("payout:x", SEC, Duration::ZERO).await.unwrap();
    let mut c = connect(&redis.url()).await;
    let () = redis::cmd("DEL")
        .arg(LOCK_X)
        .query_async(&mut c)
        .await
        .unwrap();
    let fresh = b.acquire("payout:x", SEC, Duration::ZERO).await.unwrap();
    a.check_still_held(&stale).expect("a does not know yet");
    match a.release(stale).await {
        Err(BackendError::Lock(LockError::LockLost(l))) => {
            assert_eq!(l.reason, LostReason::LeaseLost, "refused by the server")
        }
        other => panic!("a stale release went through: {other:?}"),
    }
    assert_eq!(
        get(&redis.url(), LOCK_X).await.as_deref(),
        Some(fresh.value())
    );
    b.release(fresh).await.unwrap();
    a.close().await;
    b.close().await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// A frozen redis-server answers no renew: the session is lost at its
/// deadline (never earlier than the margin allows), and its grant with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_frozen_server_loses_the_session_at_its_deadline() {
    if !redis_here() {
        return;
    }
    let dir = temp_dir("frozen");
    let mut redis = RedisServer::start(&dir, RedisPersistence::None)
        .await
        .unwrap();
    let client = backend(&redis.url(), 7);
    let s = client.open_session("a").await.unwrap();
    let h = s.acquire("payout:x", SEC, Duration::ZERO).await.unwrap();
    let lost = count_losses(&s);
    redis.child_mut().pause().unwrap();
    assert!(
        eventually(5 * SEC, || s.is_lost()).await,
        "the session outlived a frozen server"
    );
    redis.child_mut().resume().unwrap();
    assert_eq!(s.lost_reason(), Some(LostReason::Deadline));
    assert!(eventually(5 * SEC, || lost.load(Ordering::SeqCst) == 1).await);
    assert!(s.check_still_held(&h).is_err());
    let st = client.stats();
    assert_eq!(st.sessions_lost_deadline, 1, "{st:?}");
    assert!(st.hb_timeouts >= 1, "{st:?}");
    s.close().await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// `bench run --backend redis --ttl 2s` in small: payouts are paid, none
/// twice, no fence refuses anything, the ledger holds, and the row says
/// redis with the rail's fences on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bench_cell_on_redis_pays_with_no_duplicate_and_no_fence_out() {
    if !redis_here() {
        return;
    }
    let mut cfg = crate::driver::config(None);
    cfg.workers = 4;
    cfg.duration = Duration::from_secs(3);
    cfg.backends = vec![BackendKind::Redis];
    let cfg = cfg.on_backend(BackendKind::Redis);
    let plan = cfg.plan(Cell::fixed(Duration::from_secs(2), 0.3));
    assert_eq!(plan.id, "backend=redis_ttl=2s_margin=0.30");
    let out = temp_dir("cell");
    let (_tx, rx) = watch::channel(false);
    let result = runner::run_cell(&cfg, &plan, &out, rx, &|_| {}, false, None)
        .await
        .expect("the cell runs")
        .expect("not interrupted");
    let r = &result.row;
    assert_eq!(
        (r.backend.as_str(), r.rail_fences.as_str()),
        ("redis", "on")
    );
    assert!(r.payouts_paid > 0, "{r:?}");
    assert_eq!((r.duplicate_attempted, r.fenced_out), (0, 0), "{r:?}");
    assert_eq!((r.paid_twice, r.stale_paid), (0, 0));
    assert!(r.ledger_ok);
    assert!(
        r.hb_count > 0,
        "renew exchanges recorded as heartbeats: {r:?}"
    );
    assert!(r.hb_gap_count > 0, "{r:?}");
    assert_eq!(r.hb_gaps_over_window, r.session_lost_deadline, "{r:?}");
    let _ = std::fs::remove_dir_all(&out);
}

/// A stack on `runtime` with a 1 s lease and a zero-latency rail.
fn stack_spec(runtime: Runtime) -> StackSpec {
    StackSpec {
        runtime,
        lease: SEC,
        session_ttl: SEC,
        rail_latency: "fixed:0ms".parse().unwrap(),
        seed: 1,
        net_delay: None,
        faults: Vec::new(),
        rail_args: Vec::new(),
        lock_args: Vec::new(),
        db_relays: false,
        tls: false,
    }
}

fn redis_runtime(instances: u32, redlock: bool) -> Runtime {
    Runtime::Redis {
        urls: Vec::new(),
        instances,
        persistence: RedisPersistence::EverySec,
        redlock,
    }
}

/// The stack starts redis-server beside a rail-stub with its fences on,
/// records the server's flags, and restarts it in place: same URL, and
/// (append-only file) the same keys.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_stack_records_its_flags_and_restarts_redis_in_place() {
    if !redis_here() {
        return;
    }
    let dir = temp_dir("stack");
    let mut stack = Stack::start(&stack_spec(redis_runtime(1, false)), &dir)
        .await
        .expect("the redis stack starts");
    assert_eq!(stack.backend(), BackendKind::Redis);
    assert_eq!(stack.rail_fences(), RailFences::On);
    let url = stack.lock_url().to_string();
    assert!(url.starts_with("redis://127.0.0.1:"), "{url}");
    assert_eq!(stack.replica_urls(), std::slice::from_ref(&url));
    let record: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.join("redis-server.json")).unwrap())
            .unwrap();
    assert_eq!(record["persistence"], "everysec");
    assert!(
        record["instances"][0]["args"]
            .to_string()
            .contains("--appendonly")
    );
    set(&url, "k", "v").await;
    let pid = stack.pids().unwrap().0;
    stack.restart_lock().await.expect("redis-server restarts");
    assert_ne!(stack.pids().unwrap().0, pid, "a new process");
    assert_eq!(stack.lock_url(), url);
    assert_eq!(
        get(&url, "k").await.as_deref(),
        Some("v"),
        "replayed from its file"
    );
    stack.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}

/// A redlock stack starts N redis-servers and its rail-stub with the fences
/// off (`--fences off`), and says so; the single-instance backend refuses
/// more than one instance.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redlock_stack_runs_the_rail_without_fences() {
    if !redis_here() {
        return;
    }
    let dir = temp_dir("redlock-stack");
    let stack = Stack::start(&stack_spec(redis_runtime(3, true)), &dir)
        .await
        .expect("the redlock stack starts");
    assert_eq!(stack.backend(), BackendKind::Redlock);
    assert_eq!(stack.rail_fences(), RailFences::Off);
    assert_eq!(stack.replica_urls().len(), 3);
    assert_eq!(stack.lock_url().split(',').count(), 3);
    let health: serde_json::Value = reqwest::get(format!("{}/healthz", stack.rail_url()))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(health["fences"], "off");
    stack.stop().await;
    let Err(e) = Stack::start(&stack_spec(redis_runtime(2, false)), &dir).await else {
        panic!("the redis backend started on two instances");
    };
    assert!(
        e.to_string()
            .contains("redis backend runs on one redis-server, not 2"),
        "{e}"
    );
    let _ = std::fs::remove_dir_all(&dir);
}

/// The client-side session runs on the session TTL, as the SDK's does: a
/// 1 s session under a 2 s lease ends its first deadline `send + 1 s × 0.7`
/// after the open, not `2 s × 0.7`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_session_deadline_counts_the_session_ttl_not_the_lease() {
    if !redis_here() {
        return;
    }
    let dir = temp_dir("session-ttl");
    let redis = RedisServer::start(&dir, RedisPersistence::None)
        .await
        .unwrap();
    let mut config = RedisConfig::new(redis.url(), 2 * SEC);
    config.session_ttl = SEC;
    let clock = config.clock.clone();
    let client = RedisBackend::new(config).unwrap();
    let before = clock.now();
    let s = client.open_session("a").await.unwrap();
    let left = s.client_deadline().saturating_duration_since(before);
    // The send is at or after `before`; the lease would give 1.4 s.
    assert!(left >= Duration::from_millis(700), "{left:?}");
    assert!(left < SEC, "{left:?}");
    s.close().await;
    let _ = std::fs::remove_dir_all(&dir);
}
