//! Shared test plumbing: a service on a fake clock behind the router (no
//! socket), one-shot JSON calls, and the stores every suite runs against.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use axum::Router;
use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use fencepost_api::clock::{FakeClock, MonoTime};
use http_body_util::BodyExt;
use lock_server::store::{self, LockStore};
use lock_server::{Limits, LockService};
use serde_json::Value;
use tower::ServiceExt;

/// A lock-server on a fake clock, driven through its router without a socket.
pub struct TestServer {
    /// The service (for digests and direct calls).
    pub service: Arc<LockService>,
    /// The clock every expiry decision reads; advance it to move time.
    pub clock: FakeClock,
    /// The C1 router.
    pub app: Router,
}

impl TestServer {
    /// A server with `limits` over `store`, its fake clock starting at 1 s.
    pub async fn new(limits: Limits, store: Arc<dyn LockStore>) -> Self {
        let clock = FakeClock::new(MonoTime::from_nanos(1_000_000_000));
        let service = LockService::start(limits, store, Arc::new(clock.clone()))
            .await
            .expect("service starts");
        let app = lock_server::http::app(service.clone());
        TestServer {
            service,
            clock,
            app,
        }
    }

    /// A router over an already started `service` whose clock is `clock`.
    pub fn with_service(service: Arc<LockService>, clock: FakeClock) -> Self {
        let app = lock_server::http::app(service.clone());
        TestServer {
            service,
            clock,
            app,
        }
    }

    /// A server with default limits on the memory store.
    pub async fn memory() -> Self {
        Self::new(
            Limits::default(),
            Arc::new(store::memory::MemoryStore::default()),
        )
        .await
    }

    /// Sends one request; returns the status and the JSON body (Null if empty or not JSON).
    pub async fn call(
        &self,
        method: Method,
        uri: &str,
        body: Option<Value>,
    ) -> (StatusCode, Value) {
        let body = body.map(|b| b.to_string()).unwrap_or_default();
        self.call_raw(method, uri, body.into_bytes()).await
    }

    /// Sends raw bytes as the body.
    pub async fn call_raw(&self, method: Method, uri: &str, body: Vec<u8>) -> (StatusCode, Value) {
        let req = Request::builder()
            .method(method)
            .uri(uri)
            .header("content-type", "application/json")
            .header("content-length", body.len())
            .body(Body::from(body))
            .expect("request builds");
        let resp = self.app.clone().oneshot(req).await.expect("router answers");
        let status = resp.status();
        let bytes = resp.into_body().collect().await.expect("body").to_bytes();
        let json = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
        (status, json)
    }

    /// L1 with an owner and a TTL; returns the session id.
    pub async fn open_session(&self, owner: &str, ttl_ms: u64) -> String {
        let (st, body) = self
            .call(
                Method::POST,
                "/v1/sessions",
                Some(serde_json::json!({"owner_id": owner, "ttl_ms": ttl_ms})),
            )
            .await;
        assert_eq!(st, StatusCode::CREATED, "{body}");
        body["session_id"].as_str().expect("session_id").to_string()
    }

    /// L4; returns (status, body).
    pub async fn acquire(&self, key: &str, session: &str, ttl_ms: u64) -> (StatusCode, Value) {
        self.call(
            Method::POST,
            &format!("/v1/locks/{key}/acquire"),
            Some(serde_json::json!({"session_id": session, "ttl_ms": ttl_ms})),
        )
        .await
    }

    /// L7's `state` field, or the error code.
    pub async fn state(&self, key: &str) -> String {
        let (_, body) = self
            .call(Method::GET, &format!("/v1/locks/{key}"), None)
            .await;
        body["state"]
            .as_str()
            .or(body["code"].as_str())
            .unwrap_or("?")
            .to_string()
    }
}

/// A fresh, unique directory under the system temp dir.
pub fn temp_dir(tag: &str) -> PathBuf {
    static N: AtomicU64 = AtomicU64::new(0);
    let dir = std::env::temp_dir().join(format!(
        "fencepost-test-{tag}-{}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed),
        rand::random::<u32>()
    ));
    std::fs::create_dir_all(&dir).expect("temp dir");
    dir
}

/// The PostgreSQL URL for tests (`FENCEPOST_TEST_PG_URL`), or `None` to skip.
/// With `CI=true` a missing PostgreSQL fails the test instead of skipping it.
pub fn pg_url() -> Option<String> {
    match std::env::var("FENCEPOST_TEST_PG_URL") {
        Ok(url) if !url.is_empty() => Some(url),
        _ if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!("CI=true but FENCEPOST_TEST_PG_URL is not set: .ci/run must start PostgreSQL")
        }
        _ => {
            eprintln!(
                "skipping PostgreSQL test: set FENCEPOST_TEST_PG_URL (scripts/pg-test-cluster.sh start)"
            );
            None
        }
    }
}

/// A store URL for a fresh, empty schema in the test database, so tests
/// running in parallel never see each other's keys.
pub async fn fresh_pg_store_url() -> Option<String> {
    let url = pg_url()?;
    let schema = format!("t_{:016x}", rand::random::<u64>());
    let (client, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap_or_else(|e| panic!("cannot reach PostgreSQL at {url}: {e}"));
    let task = tokio::spawn(conn);
    client
        .batch_execute(&format!("CREATE SCHEMA {schema}"))
        .await
        .expect("create schema");
    drop(client);
    let _ = task.await;
    let sep = if url.contains('?') { '&' } else { '?' };
    Some(format!("{url}{sep}options=-csearch_path%3D{schema}"))
}

/// Which store a suite runs against.
#[derive(Clone, Copy, Debug)]
pub enum StoreKind {
    /// `memory:`
    Memory,
    /// `sqlite:` in a fresh temp dir.
    Sqlite,
    /// `postgres://` in a fresh schema.
    Postgres,
}

impl StoreKind {
    /// A store URL of this kind, fresh and empty; `None` to skip (no PostgreSQL outside CI).
    pub async fn fresh_url(self) -> Option<String> {
        match self {
            StoreKind::Memory => Some("memory:".into()),
            StoreKind::Sqlite => Some(format!(
                "sqlite:{}",
                temp_dir("sqlite").join("lock.sqlite").display()
            )),
            StoreKind::Postgres => fresh_pg_store_url().await,
        }
    }
}

/// A proptest seed: `FP_PROPTEST_SEED` if set (and a number), else `default`.
pub fn proptest_seed(default: u64) -> u64 {
    std::env::var("FP_PROPTEST_SEED")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(default)
}

/// A proptest runner of `cases` cases whose ChaCha generator starts from
/// `seed`, with no failure persistence, so a run replays from its printed seed.
/// `FP_PROPTEST_MAX_SHRINK_ITERS` (a number) overrides `max_shrink_iters`:
/// `scripts/cargo-mutants.sh` sets 0, since it needs the failure, not the
/// minimal case.
pub fn seeded_runner(
    cases: u32,
    max_shrink_iters: u32,
    seed: u64,
) -> proptest::test_runner::TestRunner {
    use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};
    // 32 ChaCha seed bytes from the u64 (splitmix64).
    let mut x = seed;
    let mut bytes = [0u8; 32];
    for chunk in bytes.chunks_mut(8) {
        x = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = x;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        chunk.copy_from_slice(&(z ^ (z >> 31)).to_le_bytes());
    }
    let max_shrink_iters = std::env::var("FP_PROPTEST_MAX_SHRINK_ITERS")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(max_shrink_iters);
    let config = Config {
        cases,
        max_shrink_iters,
        failure_persistence: None,
        rng_algorithm: RngAlgorithm::ChaCha,
        ..Config::default()
    };
    TestRunner::new_with_rng(config, TestRng::from_seed(RngAlgorithm::ChaCha, &bytes))
}

/// What a [`FaultyStore`] does on a commit that holds a write of one kind.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fault {
    /// Commit in the inner store, then wait for [`FaultyStore::open`] (or
    /// [`FaultyStore::pass_held`]) before replying: a write whose reply is
    /// slow, as PostgreSQL's is behind a lock.
    HoldReply,
    /// Fail without touching the inner store: the database is down.
    Fail,
}

/// A store wrapper that injects [`Fault`]s into commits holding chosen kinds
/// of write, and logs how many writes each commit carried.
pub struct FaultyStore {
    inner: Arc<dyn LockStore>,
    /// Write name (`grant`, `delete_session`, `clear_grant`, ...) to its fault.
    faults: std::sync::Mutex<std::collections::HashMap<&'static str, Fault>>,
    /// Bumped to let the replies held so far go.
    gate: tokio::sync::watch::Sender<u64>,
    /// Commits now waiting at the gate.
    held: tokio::sync::watch::Sender<usize>,
    /// Commits ever held (a test waits for the n-th).
    holds: tokio::sync::watch::Sender<u64>,
    /// The writes of every commit, in order, with whether it failed.
    log: std::sync::Mutex<Vec<(Vec<&'static str>, bool)>>,
}

impl FaultyStore {
    /// A wrapper of `inner` with no faults.
    pub fn new(inner: Arc<dyn LockStore>) -> Arc<Self> {
        Arc::new(FaultyStore {
            inner,
            faults: Default::default(),
            gate: tokio::sync::watch::channel(0).0,
            held: tokio::sync::watch::channel(0).0,
            holds: tokio::sync::watch::channel(0).0,
            log: Default::default(),
        })
    }

    /// From now on, commits holding a `write` (a [`store::Write::name`])
    /// suffer `fault` (`None`: pass through).
    pub fn set(&self, write: &'static str, fault: Option<Fault>) {
        let mut f = self.faults.lock().unwrap();
        match fault {
            Some(fault) => f.insert(write, fault),
            None => f.remove(write),
        };
    }

    /// Resolves once a commit is waiting at the gate (its write is committed).
    pub async fn held_call(&self) {
        let mut rx = self.held.subscribe();
        let _ = rx.wait_for(|n| *n > 0).await;
    }

    /// Resolves once `n` commits in all have been held.
    pub async fn held_calls(&self, n: u64) {
        let mut rx = self.holds.subscribe();
        let _ = rx.wait_for(|h| *h >= n).await;
    }

    /// Lets the replies held now go; the faults stay.
    pub fn pass_held(&self) {
        self.gate.send_modify(|g| *g += 1);
    }

    /// Lets every held reply go, and stops holding.
    pub fn open(&self) {
        self.faults
            .lock()
            .unwrap()
            .retain(|_, f| *f != Fault::HoldReply);
        self.pass_held();
    }

    /// The write names of every commit so far, and whether it failed.
    pub fn commits(&self) -> Vec<(Vec<&'static str>, bool)> {
        self.log.lock().unwrap().clone()
    }

    /// The fault for a commit of `writes`: `Fail` over `HoldReply` over none.
    fn fault_for(&self, writes: &[store::Write]) -> Option<Fault> {
        let faults = self.faults.lock().unwrap();
        let found: Vec<Fault> = writes
            .iter()
            .filter_map(|w| faults.get(w.name()).copied())
            .collect();
        [Fault::Fail, Fault::HoldReply]
            .into_iter()
            .find(|f| found.contains(f))
    }
}

#[async_trait::async_trait]
impl LockStore for FaultyStore {
    fn kind(&self) -> &'static str {
        self.inner.kind()
    }

    fn path(&self) -> Option<PathBuf> {
        self.inner.path()
    }

    fn durable(&self) -> bool {
        self.inner.durable()
    }

    async fn load(&self) -> Result<store::Snapshot, store::StoreError> {
        self.inner.load().await
    }

    async fn load_live(&self) -> Result<store::Snapshot, store::StoreError> {
        self.inner.load_live().await
    }

    async fn last_token(&self, key: &str) -> Result<Option<u64>, store::StoreError> {
        self.inner.last_token(key).await
    }

    async fn commit(
        &self,
        writes: &[store::Write],
    ) -> Result<Vec<store::Committed>, store::StoreError> {
        let fault = self.fault_for(writes);
        let names = writes.iter().map(store::Write::name).collect();
        self.log
            .lock()
            .unwrap()
            .push((names, fault == Some(Fault::Fail)));
        match fault {
            None => self.inner.commit(writes).await,
            Some(Fault::Fail) => Err(store::StoreError::Sqlite(rusqlite::Error::SqliteFailure(
                rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_IOERR),
                Some(format!("injected failure of {writes:?}")),
            ))),
            Some(Fault::HoldReply) => {
                let mut gate = self.gate.subscribe();
                let entered = *gate.borrow_and_update();
                let out = self.inner.commit(writes).await;
                self.held.send_modify(|n| *n += 1);
                self.holds.send_modify(|n| *n += 1);
                let _ = gate.wait_for(|g| *g > entered).await;
                self.held.send_modify(|n| *n -= 1);
                out
            }
        }
    }

    async fn ping(&self) -> Result<(), store::StoreError> {
        self.inner.ping().await
    }
}

/// POSTs `body` as JSON to a real lock-server: status and JSON body (`Null`
/// when the body is not JSON).
pub async fn post(
    c: &reqwest::Client,
    url: String,
    body: serde_json::Value,
) -> Result<(u16, serde_json::Value), reqwest::Error> {
    let r = c.post(url).json(&body).send().await?;
    let st = r.status().as_u16();
    Ok((st, r.json().await.unwrap_or(serde_json::Value::Null)))
}

/// L1 against a real lock-server at `base`; panics unless `201`.
pub async fn open_session_over_http(c: &reqwest::Client, base: &str, ttl_ms: u64) -> String {
    let (st, body) = post(
        c,
        format!("{base}/v1/sessions"),
        serde_json::json!({"owner_id": "test", "ttl_ms": ttl_ms}),
    )
    .await
    .expect("L1");
    assert_eq!(st, 201, "{body}");
    body["session_id"].as_str().unwrap().to_string()
}
