//! The real `lock-server` binary as a child process: tokens survive kill -9 on
//! each durable store (under 20 concurrent grant loops, so the group committer
//! batches), and 32 sessions contending for one key never overlap.
//! Waits are for conditions with deadlines, never fixed sleeps that hope.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fencepost_harness::ChildService;
use serde_json::{Value, json};

use crate::support::{StoreKind, open_session_over_http as open_session, post, temp_dir};

/// How long any wait for a condition may take before the test fails.
const PATIENCE: Duration = Duration::from_secs(90);

/// Starts the binary and waits until it serves (`/readyz`): on PostgreSQL it
/// is a replica that must first take the leader row, which after a kill -9
/// waits out the dead one's leader lease (1 s here) plus grace.
async fn start(store_url: &str, extra: &[&str]) -> ChildService {
    let bin = fencepost_harness::binary("lock-server", "lock-server").expect("lock-server binary");
    let log = temp_dir("ls-log").join("stderr.log");
    let mut args = vec!["--store", store_url, "--leader-lease", "1s"];
    args.extend_from_slice(extra);
    let server = ChildService::start(&bin, args, &log).expect("lock-server starts");
    let c = reqwest::Client::new();
    let deadline = Instant::now() + PATIENCE;
    loop {
        let ready = c.get(format!("{}/readyz", server.url())).send().await;
        if ready.is_ok_and(|r| r.status() == 200) {
            return server;
        }
        assert!(
            Instant::now() < deadline,
            "lock-server never ready:\n{}",
            server.stderr_tail(20)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// `GET url` as JSON.
async fn get_json(c: &reqwest::Client, url: String) -> Value {
    c.get(url)
        .send()
        .await
        .expect("GET")
        .json()
        .await
        .expect("JSON body")
}

/// The highest token any grant reply carried, per key.
type Highest = Arc<Mutex<HashMap<String, u64>>>;

/// Grants and releases `keys` in a loop until the server stops answering,
/// recording the highest token any grant reply carried for each key.
async fn churn(base: String, keys: Vec<String>, highest: Highest, grants: Arc<AtomicU64>) {
    let c = reqwest::Client::new();
    let Ok((201, s)) = post(
        &c,
        format!("{base}/v1/sessions"),
        json!({"owner_id": "churn", "ttl_ms": 1_000}),
    )
    .await
    else {
        return;
    };
    let sid = s["session_id"].as_str().unwrap().to_string();
    loop {
        for key in &keys {
            let Ok((st, body)) = post(
                &c,
                format!("{base}/v1/locks/{key}/acquire"),
                json!({"session_id": sid, "ttl_ms": 1_000}),
            )
            .await
            else {
                return;
            };
            if st != 200 {
                continue;
            }
            let token = body["token"].as_u64().unwrap();
            {
                let mut h = highest.lock().unwrap();
                let top = h.entry(key.clone()).or_default();
                *top = (*top).max(token);
            }
            grants.fetch_add(1, Ordering::SeqCst);
            if post(
                &c,
                format!("{base}/v1/locks/{key}/release"),
                json!({"session_id": sid, "token": token}),
            )
            .await
            .is_err()
            {
                return;
            }
        }
    }
}

/// Workers contending for the shared keys (the old test) and workers each
/// on keys of their own (concurrent grants the group committer batches).
const SHARED_WORKERS: usize = 4;
const SOLO_WORKERS: usize = 16;

/// Acknowledged grants to wait for before the kill.
const GRANTS_BEFORE_KILL: u64 = 300;

/// The server's `lock_store_*` counters, for the log (how much was batched).
async fn store_counters(c: &reqwest::Client, base: &str) -> String {
    let Ok(r) = c.get(format!("{base}/metrics")).send().await else {
        return "no /metrics".into();
    };
    let text = r.text().await.unwrap_or_default();
    text.lines()
        .filter(|l| l.starts_with("lock_store_"))
        .collect::<Vec<_>>()
        .join(", ")
}

async fn kill9_mid_run_then_the_next_grant_is_above_every_earlier_token(kind: StoreKind) {
    let Some(url) = kind.fresh_url().await else {
        return;
    };
    let shared: Vec<String> = (0..4).map(|i| format!("payout:{i}")).collect();
    let highest: Highest = Arc::default();
    let grants = Arc::new(AtomicU64::new(0));
    let mut server = start(&url, &[]).await;
    let base = server.url();
    let churn_on = |keys: Vec<String>| {
        tokio::spawn(churn(base.clone(), keys, highest.clone(), grants.clone()))
    };
    let mut workers: Vec<_> = (0..SHARED_WORKERS)
        .map(|_| churn_on(shared.clone()))
        .collect();
    workers.extend((0..SOLO_WORKERS).map(|i| churn_on(vec![format!("solo:{i}")])));
    // Kill it mid-run, once plenty of grants have been replied: every key
    // granted several times, by many concurrent grants and releases.
    let deadline = Instant::now() + PATIENCE;
    while grants.load(Ordering::SeqCst) < GRANTS_BEFORE_KILL {
        assert!(
            Instant::now() < deadline,
            "only {} grants before the deadline",
            grants.load(Ordering::SeqCst)
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    let batching = store_counters(&reqwest::Client::new(), &base).await;
    server.kill9();
    for w in workers {
        let _ = w.await;
    }
    let highest = highest.lock().unwrap().clone();
    eprintln!(
        "{kind:?}: {} grants acknowledged before the kill over {} keys; {batching}",
        grants.load(Ordering::SeqCst),
        highest.len()
    );
    assert!(
        highest.values().sum::<u64>() >= GRANTS_BEFORE_KILL,
        "tokens issued before the kill: {highest:?}"
    );
    let keys: Vec<String> = highest.keys().cloned().collect();
    assert_eq!(keys.len(), shared.len() + SOLO_WORKERS, "{highest:?}");

    // Restart on the same store. Grants that were held at the kill are restored
    // (with fresh leases), so each key may stay HELD or in GRACE for a while.
    let server = start(&url, &[]).await;
    let base = server.url();
    let c = reqwest::Client::new();
    // No acknowledged grant is lost: the store's last token of every key is
    // at least the highest token a reply carried.
    for key in &keys {
        let info = get_json(&c, format!("{base}/v1/locks/{key}")).await;
        let stored = info["token"].as_u64().unwrap_or(0);
        assert!(
            stored >= highest[key],
            "{key}: the restarted server's last token is {stored} but a grant of {} was acknowledged: {info}",
            highest[key]
        );
    }
    let sid = open_session(&c, &base, 10_000).await;
    for key in &keys {
        let before = highest[key];
        let deadline = Instant::now() + PATIENCE;
        loop {
            let (st, body) = post(
                &c,
                format!("{base}/v1/locks/{key}/acquire"),
                json!({"session_id": sid, "ttl_ms": 5_000}),
            )
            .await
            .unwrap();
            if st == 200 {
                let token = body["token"].as_u64().unwrap();
                assert!(
                    token > before,
                    "{key}: token {token} after a kill that had issued up to {before}"
                );
                break;
            }
            assert_eq!(body["code"], "LOCK_HELD", "{body}");
            assert!(
                Instant::now() < deadline,
                "{key} never became free after the restart"
            );
            let wait = body["retry_after_ms"].as_u64().unwrap_or(10).clamp(1, 200);
            tokio::time::sleep(Duration::from_millis(wait)).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_kill9_mid_run_then_the_next_grant_is_above_every_earlier_token() {
    kill9_mid_run_then_the_next_grant_is_above_every_earlier_token(StoreKind::Sqlite).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_kill9_mid_run_then_the_next_grant_is_above_every_earlier_token() {
    kill9_mid_run_then_the_next_grant_is_above_every_earlier_token(StoreKind::Postgres).await;
}

/// One holder's interval: from "grant reply received" to "release sent".
#[derive(Debug, Clone, Copy)]
struct Held {
    token: u64,
    from: Instant,
    to: Instant,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thirty_two_sessions_hammering_one_key_never_overlap_and_tokens_increase() {
    let url = StoreKind::Sqlite.fresh_url().await.unwrap();
    let server = start(&url, &[]).await;
    let base = server.url();
    let rounds_each = 8;
    let tasks: Vec<_> = (0..32u64)
        .map(|i| {
            let base = base.clone();
            tokio::spawn(async move {
                let c = reqwest::Client::new();
                let sid = open_session(&c, &base, 30_000).await;
                let mut held = Vec::new();
                let deadline = Instant::now() + Duration::from_secs(120);
                let mut backoff = 1 + i % 3;
                while held.len() < rounds_each {
                    assert!(Instant::now() < deadline, "worker {i} starved");
                    let (st, body) = post(
                        &c,
                        format!("{base}/v1/locks/hot/acquire"),
                        json!({"session_id": sid, "ttl_ms": 10_000}),
                    )
                    .await
                    .unwrap();
                    if st != 200 {
                        assert_eq!(body["code"], "LOCK_HELD", "{body}");
                        tokio::time::sleep(Duration::from_millis(backoff)).await;
                        backoff = (backoff * 2).min(8);
                        continue;
                    }
                    let from = Instant::now();
                    let token = body["token"].as_u64().unwrap();
                    tokio::task::yield_now().await;
                    let to = Instant::now();
                    let (st, body) = post(
                        &c,
                        format!("{base}/v1/locks/hot/release"),
                        json!({"session_id": sid, "token": token}),
                    )
                    .await
                    .unwrap();
                    assert_eq!(st, 204, "{body}");
                    held.push(Held { token, from, to });
                    backoff = 1;
                }
                held
            })
        })
        .collect();
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    assert_eq!(all.len(), 32 * rounds_each);
    all.sort_by_key(|h| h.from);
    for pair in all.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        assert!(
            b.from >= a.to,
            "overlap: token {} held until {:?} but token {} granted at {:?}",
            a.token,
            a.to,
            b.token,
            b.from
        );
        assert!(
            b.token > a.token,
            "token {} granted after {}",
            b.token,
            a.token
        );
    }
}

/// Takes an ACCESS EXCLUSIVE lock on `fp_locks` from a second connection and
/// holds it for `hold`: every grant, release and session delete blocks behind it.
async fn lock_fp_locks_for(url: &str, hold: Duration) -> tokio::task::JoinHandle<()> {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .expect("second PostgreSQL connection");
    tokio::spawn(conn);
    client
        .batch_execute("BEGIN; LOCK TABLE fp_locks IN ACCESS EXCLUSIVE MODE")
        .await
        .expect("table lock");
    tokio::spawn(async move {
        tokio::time::sleep(hold).await;
        client.batch_execute("COMMIT").await.expect("unlock");
    })
}

/// Acquires `key` for `session` until it is granted, or panics after `within`.
async fn acquire_within(
    c: &reqwest::Client,
    base: &str,
    key: &str,
    session: &str,
    within: Duration,
) -> u64 {
    let deadline = Instant::now() + within;
    loop {
        let (st, body) = post(
            c,
            format!("{base}/v1/locks/{key}/acquire"),
            json!({"session_id": session, "ttl_ms": 30_000}),
        )
        .await
        .expect("L4");
        if st == 200 {
            return body["token"].as_u64().expect("token");
        }
        assert_eq!(body["code"], "LOCK_HELD", "{key}: {body}");
        assert!(
            Instant::now() < deadline,
            "{key} still answers {body} {within:?} after the store recovered: the key is wedged"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_a_table_lock_outlasting_the_clients_wedges_no_key_and_memory_agrees_with_the_store()
 {
    let Some(url) = StoreKind::Postgres.fresh_url().await else {
        return;
    };
    let server = start(&url, &[]).await;
    let base = server.url();
    let c = reqwest::Client::new();
    let a = open_session(&c, &base, 60_000).await;
    let doomed = open_session(&c, &base, 60_000).await;
    let b = open_session(&c, &base, 60_000).await;
    let grant = |key: &'static str, session: String, ttl_ms: u64| {
        let (c, base) = (c.clone(), base.clone());
        async move {
            let (st, body) = post(
                &c,
                format!("{base}/v1/locks/{key}/acquire"),
                json!({"session_id": session, "ttl_ms": ttl_ms}),
            )
            .await
            .expect("L4");
            assert_eq!(st, 200, "{body}");
            body["token"].as_u64().unwrap()
        }
    };
    let released = grant("k-release", a.clone(), 30_000).await;
    grant("k-delete", doomed.clone(), 30_000).await;

    // Three clients give up after 0.5 s, as the SDK does, while their writes wait 3 s.
    let impatient = reqwest::Client::builder()
        .timeout(Duration::from_millis(500))
        .build()
        .unwrap();
    let unlock = lock_fp_locks_for(&url, Duration::from_secs(3)).await;
    let gave_up = [
        impatient
            .post(format!("{base}/v1/locks/k-acquire/acquire"))
            .json(&json!({"session_id": a, "ttl_ms": 1_000}))
            .send()
            .await,
        impatient
            .post(format!("{base}/v1/locks/k-release/release"))
            .json(&json!({"session_id": a, "token": released}))
            .send()
            .await,
        impatient
            .delete(format!("{base}/v1/sessions/{doomed}"))
            .send()
            .await,
    ];
    for r in gave_up {
        assert!(
            r.as_ref().is_err_and(|e| e.is_timeout()),
            "the request should have timed out behind the table lock: {r:?}"
        );
    }
    unlock.await.unwrap();

    // The release and the delete were carried through: both keys are free at
    // once (their 30 s leases are far off). The abandoned grant lapses after
    // its 1 s lease and grace, then the key is grantable too.
    let patience = Duration::from_secs(10);
    acquire_within(&c, &base, "k-release", &b, patience).await;
    acquire_within(&c, &base, "k-delete", &b, patience).await;
    acquire_within(&c, &base, "k-acquire", &b, patience).await;

    // Memory (L7) and the store (fp_locks) agree on every key.
    let (pg, conn) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    for row in pg
        .query("SELECT key, last_token, holder_session FROM fp_locks", &[])
        .await
        .unwrap()
    {
        let (key, last, holder): (String, i64, Option<String>) =
            (row.get(0), row.get(1), row.get(2));
        let info = get_json(&c, format!("{base}/v1/locks/{key}")).await;
        assert_eq!(info["token"].as_u64(), Some(last as u64), "{key}: {info}");
        assert_eq!(info["state"], "HELD", "{key}: {info}");
        assert_eq!(
            holder.as_deref(),
            Some(b.as_str()),
            "{key}: the store's holder"
        );
    }
    let (_, hb) = post(
        &c,
        format!("{base}/v1/sessions/{doomed}/heartbeat"),
        json!({}),
    )
    .await
    .unwrap();
    assert_eq!(hb["code"], "SESSION_UNKNOWN", "the deleted session: {hb}");
}

/// A `lock-server` started with a chosen environment (the harness passes
/// only arguments); killed when dropped.
struct EnvServer {
    child: std::process::Child,
    base: String,
    stderr: std::path::PathBuf,
}

impl EnvServer {
    /// Starts the binary with `args`, `XDG_STATE_HOME=state` (and no `LOCK_STORE`,
    /// `HOME` kept), and waits for its `listening on` line.
    fn start(state: &std::path::Path, args: &[&str]) -> EnvServer {
        use std::io::BufRead;
        let bin =
            fencepost_harness::binary("lock-server", "lock-server").expect("lock-server binary");
        let stderr = temp_dir("ls-env-log").join("stderr.log");
        let mut child = std::process::Command::new(bin)
            .args(["--listen", "127.0.0.1:0"])
            .args(args)
            .env("XDG_STATE_HOME", state)
            .env_remove("LOCK_STORE")
            .stdout(std::process::Stdio::piped())
            .stderr(std::fs::File::create(&stderr).unwrap())
            .spawn()
            .expect("lock-server starts");
        let stdout = child.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in std::io::BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if let Some(addr) = fencepost_harness::parse_listening_line(&line) {
                    let _ = tx.send(addr);
                }
            }
        });
        let addr = rx.recv_timeout(PATIENCE).unwrap_or_else(|_| {
            panic!(
                "no `listening on` line; stderr: {:?}",
                std::fs::read_to_string(&stderr)
            )
        });
        EnvServer {
            child,
            base: format!("http://{addr}"),
            stderr,
        }
    }

    fn stderr(&self) -> String {
        std::fs::read_to_string(&self.stderr).unwrap_or_default()
    }
}

impl Drop for EnvServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Grants and releases `key` once; returns the token.
async fn grant_and_release(c: &reqwest::Client, base: &str, key: &str) -> u64 {
    let sid = open_session(c, base, 10_000).await;
    let (st, body) = post(
        c,
        format!("{base}/v1/locks/{key}/acquire"),
        json!({"session_id": sid, "ttl_ms": 1_000}),
    )
    .await
    .unwrap();
    assert_eq!(st, 200, "{body}");
    let token = body["token"].as_u64().unwrap();
    let (st, body) = post(
        c,
        format!("{base}/v1/locks/{key}/release"),
        json!({"session_id": sid, "token": token}),
    )
    .await
    .unwrap();
    assert_eq!(st, 204, "{body}");
    token
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn restarted_with_its_default_store_the_server_keeps_tokens_rising() {
    let state = temp_dir("xdg-state");
    let c = reqwest::Client::new();
    let mut tokens = Vec::new();
    for run in 0..2 {
        let server = EnvServer::start(&state, &[]);
        let cfg = get_json(&c, format!("{}/v1/config", server.base)).await;
        let file = state.join("fencepost").join("lock.sqlite");
        assert_eq!(
            (
                cfg["store"].as_str(),
                cfg["durable"].as_bool(),
                cfg["store_path"].as_str()
            ),
            (
                Some("sqlite"),
                Some(true),
                Some(file.display().to_string().as_str())
            ),
            "run {run}: {cfg}"
        );
        for _ in 0..3 {
            tokens.push(grant_and_release(&c, &server.base, "k1").await);
        }
        assert!(file.exists(), "{} was not created", file.display());
        drop(server); // SIGKILL: tokens are on disk before each grant's reply.
    }
    assert_eq!(
        tokens,
        [1, 2, 3, 4, 5, 6],
        "tokens across a restart on the default store"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_memory_store_says_at_start_and_in_config_that_tokens_restart() {
    let state = temp_dir("xdg-state-mem");
    let c = reqwest::Client::new();
    let server = EnvServer::start(&state, &["--store", "memory:"]);
    let cfg = get_json(&c, format!("{}/v1/config", server.base)).await;
    assert_eq!(
        (cfg["store"].as_str(), cfg["durable"].as_bool()),
        (Some("memory"), Some(false))
    );
    let warn = server
        .stderr()
        .lines()
        .find(|l| l.contains("\"WARN\"") && l.contains("not durable"))
        .map(str::to_string);
    assert!(
        warn.is_some(),
        "no WARN line at start:\n{}",
        server.stderr()
    );
    assert!(
        !state.join("fencepost").exists(),
        "memory: wrote a state file"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_server_logs_its_clock_discipline_once_at_start() {
    let state = temp_dir("xdg-state-clock");
    let server = EnvServer::start(&state, &["--store", "memory:"]);
    let log = server.stderr();
    let lines: Vec<serde_json::Value> = log
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .filter(|v: &serde_json::Value| {
            let event = &v["event"];
            event == "clock_discipline" || event == "clock_discipline_unreadable"
        })
        .collect();
    assert_eq!(lines.len(), 1, "one clock line at start:\n{log}");
    let line = &lines[0];
    match fencepost_api::clock_discipline::read() {
        Ok(d) => {
            let f = line;
            assert_eq!(f["event"], "clock_discipline", "{line}");
            assert_eq!(f["synchronised"], d.synchronised, "{line}");
            assert_eq!(f["offset_max_ms"], 50.0, "{line}");
            assert!(f["maxerror_ms"].as_f64().is_some(), "{line}");
            let within = d.within(std::time::Duration::from_millis(50));
            assert_eq!(
                line["level"],
                if within { "INFO" } else { "WARN" },
                "{line}"
            );
        }
        Err(_) => assert_eq!(line["level"], "WARN", "{line}"),
    }
}
