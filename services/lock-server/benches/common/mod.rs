//! What the lock-server's benchmarks share: an in-process server on a
//! loopback port (with its sweeper), an HTTP client, the L2 and L4+L6 calls,
//! nearest-rank quantiles, knobs from the environment and where results go.
//! A benchmark measures; it asserts nothing about speed.

#![allow(dead_code)] // each bench uses its own subset

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use fencepost_api::clock::MonotonicClock;
use lock_server::{Limits, LockService};
use serde_json::{Value, json};

/// A positive number from the environment variable `name`, if set.
pub fn env_f64(name: &str) -> Option<f64> {
    let v = std::env::var(name).ok()?;
    match v.trim().parse::<f64>() {
        Ok(x) if x.is_finite() && x > 0.0 => Some(x),
        _ => {
            eprintln!("ignoring {name}={v:?}: not a positive number");
            None
        }
    }
}

/// True under `cargo bench` (which passes `--bench`); otherwise a smoke run.
pub fn full_run() -> bool {
    std::env::args().skip(1).any(|a| a == "--bench")
}

/// The `q` quantile (0..=1) of sorted values, nearest rank.
pub fn quantile(sorted: &[u64], q: f64) -> u64 {
    if sorted.is_empty() {
        return 0;
    }
    let rank = (q * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

/// Sub-second wall-clock nanoseconds: with the pid, enough to name a temp dir or schema.
pub fn unique_nanos() -> u32 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.subsec_nanos())
}

/// A fresh directory under the system temp dir.
pub fn temp_dir(tag: &str) -> Result<PathBuf, String> {
    let dir = std::env::temp_dir().join(format!(
        "fencepost-{tag}-{}-{:x}",
        std::process::id(),
        unique_nanos()
    ));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    Ok(dir)
}

/// Where a bench's JSON goes: `$CARGO_TARGET_DIR` (run time, then build
/// time), else the workspace's `target/`, under `fencepost-bench/`.
pub fn output_path(file: &str) -> PathBuf {
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .or_else(|| option_env!("CARGO_TARGET_DIR").map(PathBuf::from))
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target"));
    target.join("fencepost-bench").join(file)
}

/// Writes `doc` as pretty JSON to `out`, saying where (or why not).
pub fn write_json(out: &std::path::Path, doc: &Value) {
    let written = out
        .parent()
        .map_or(Ok(()), std::fs::create_dir_all)
        .and_then(|_| std::fs::write(out, serde_json::to_string_pretty(doc).expect("json") + "\n"));
    match written {
        Ok(()) => eprintln!("wrote {}", out.display()),
        Err(e) => eprintln!("could not write {}: {e}", out.display()),
    }
}

/// A lock-server serving on loopback until [`Server::stop`] (or until dropped).
pub struct Server {
    /// `http://127.0.0.1:PORT`.
    pub base: String,
    /// Resolving this ends `lock_server::run`.
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    /// The serving task, awaited on stop so the store is closed before the next one opens.
    task: tokio::task::JoinHandle<std::io::Result<()>>,
}

impl Server {
    /// A server on a fresh store at `store_url`, default limits, the monotonic clock.
    pub async fn start(store_url: &str) -> Result<Server, String> {
        let service = lock_server::start_service(
            Limits::default(),
            store_url,
            Arc::new(MonotonicClock::new()),
        )
        .await
        .map_err(|e| format!("store {}: {e}", redact(store_url)))?;
        Self::serve(service).await
    }

    /// Serves an already started `service` (sweeper included) on `127.0.0.1:0`.
    pub async fn serve(service: Arc<LockService>) -> Result<Server, String> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| format!("bind: {e}"))?;
        let addr = listener.local_addr().map_err(|e| e.to_string())?;
        let (tx, rx) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(lock_server::run(listener, service, async move {
            let _ = rx.await;
        }));
        Ok(Server {
            base: format!("http://{addr}"),
            stop: Some(tx),
            task,
        })
    }

    /// Stops serving and waits for the server task.
    pub async fn stop(mut self) {
        if let Some(tx) = self.stop.take() {
            let _ = tx.send(());
        }
        match (&mut self.task).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => eprintln!("server ended with an error: {e}"),
            Err(e) => eprintln!("server task failed: {e}"),
        }
    }
}

/// A store URL without its password, for messages.
pub fn redact(url: &str) -> String {
    match (url.find("://"), url.find('@')) {
        (Some(s), Some(at)) if url[s + 3..at].contains(':') => {
            let user_end = s + 3 + url[s + 3..at].find(':').unwrap_or(0);
            format!("{}:***{}", &url[..user_end], &url[at..])
        }
        _ => url.split('?').next().unwrap_or(url).to_string(),
    }
}

/// An HTTP client for `concurrency` closed-loop tasks against one server.
pub fn http_client(concurrency: usize) -> Result<reqwest::Client, String> {
    reqwest::Client::builder()
        .no_proxy()
        .tcp_nodelay(true)
        .pool_max_idle_per_host(concurrency * 2)
        .timeout(Duration::from_secs(10))
        .build()
        .map_err(|e| format!("HTTP client: {e}"))
}

/// L1: a session with a 60 s TTL.
pub async fn open_session(
    client: &reqwest::Client,
    base: &str,
    owner: &str,
) -> Result<String, String> {
    let resp = client
        .post(format!("{base}/v1/sessions"))
        .json(&json!({"owner_id": owner, "ttl_ms": 60_000}))
        .send()
        .await
        .map_err(|e| format!("L1: {e}"))?;
    let status = resp.status();
    let body: Value = resp.json().await.map_err(|e| format!("L1 body: {e}"))?;
    if status.as_u16() != 201 {
        return Err(format!("L1: {status} {body}"));
    }
    body["session_id"]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| format!("L1: no session_id in {body}"))
}

/// L2 on `session`; `Ok` only on 200.
pub async fn heartbeat(client: &reqwest::Client, base: &str, session: &str) -> Result<(), String> {
    let resp = client
        .post(format!("{base}/v1/sessions/{session}/heartbeat"))
        .send()
        .await
        .map_err(|e| format!("L2: {e}"))?;
    let status = resp.status();
    let body = resp.bytes().await.map_err(|e| format!("L2 body: {e}"))?;
    if status.as_u16() != 200 {
        return Err(format!("L2: {status} {}", String::from_utf8_lossy(&body)));
    }
    Ok(())
}

/// How an L4 then L6 went.
pub enum Pair {
    /// Both succeeded, with this token.
    Done(u64),
    /// L4 answered LOCK_HELD (someone else has the key): nothing to release.
    Held,
}

/// L4 on `key` for `session`, then L6 with the returned token.
pub async fn acquire_release(
    client: &reqwest::Client,
    base: &str,
    session: &str,
    key: &str,
) -> Result<Pair, String> {
    let resp = client
        .post(format!("{base}/v1/locks/{key}/acquire"))
        .json(&json!({"session_id": session}))
        .send()
        .await
        .map_err(|e| format!("L4: {e}"))?;
    let status = resp.status();
    let body: Value = resp.json().await.map_err(|e| format!("L4 body: {e}"))?;
    let token = match (status.as_u16(), body["token"].as_u64()) {
        (200, Some(t)) => t,
        (409, _) if body["code"] == "LOCK_HELD" => return Ok(Pair::Held),
        _ => return Err(format!("L4: {status} {body}")),
    };
    let resp = client
        .post(format!("{base}/v1/locks/{key}/release"))
        .json(&json!({"session_id": session, "token": token}))
        .send()
        .await
        .map_err(|e| format!("L6: {e}"))?;
    let status = resp.status();
    let body = resp.bytes().await.map_err(|e| format!("L6 body: {e}"))?;
    if status.as_u16() != 204 {
        return Err(format!("L6: {status} {}", String::from_utf8_lossy(&body)));
    }
    Ok(Pair::Done(token))
}
