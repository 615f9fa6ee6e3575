//! The redis backend end to end, against real redis-server children: the
//! server starts, freezes, restarts in place with or without its
//! append-only file. Without `redis-server` on PATH these tests are skipped
//! with a message, except under `CI=true`, where a missing redis-server fails
//! them (`.ci/run` installs `redis-server`).

use bench_driver::backend::redis::server::{self, RedisPersistence, RedisServer, redis_binary};

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
