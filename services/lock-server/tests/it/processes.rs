//! The real `lock-server` binary as a child process: tokens survive kill -9 on
//! each durable store, and 32 sessions contending for one key never overlap.
//! Waits are for conditions with deadlines, never fixed sleeps that hope.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fencepost_harness::ChildService;
use serde_json::{Value, json};

use crate::support::{StoreKind, temp_dir};

/// How long any wait for a condition may take before the test fails.
const PATIENCE: Duration = Duration::from_secs(90);

fn start(store_url: &str, extra: &[&str]) -> ChildService {
    let bin = fencepost_harness::binary("lock-server", "lock-server").expect("lock-server binary");
    let log = temp_dir("ls-log").join("stderr.log");
    let mut args = vec!["--store", store_url];
    args.extend_from_slice(extra);
    ChildService::start(&bin, args, &log).expect("lock-server starts")
}

async fn post(
    c: &reqwest::Client,
    url: String,
    body: Value,
) -> Result<(u16, Value), reqwest::Error> {
    let r = c.post(url).json(&body).send().await?;
    let st = r.status().as_u16();
    Ok((st, r.json().await.unwrap_or(Value::Null)))
}

async fn open_session(c: &reqwest::Client, base: &str, ttl_ms: u64) -> String {
    let (st, body) = post(
        c,
        format!("{base}/v1/sessions"),
        json!({"owner_id": "test", "ttl_ms": ttl_ms}),
    )
    .await
    .expect("L1");
    assert_eq!(st, 201, "{body}");
    body["session_id"].as_str().unwrap().to_string()
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

async fn kill9_mid_run_then_the_next_grant_is_above_every_earlier_token(kind: StoreKind) {
    let Some(url) = kind.fresh_url().await else {
        return;
    };
    let keys: Vec<String> = (0..4).map(|i| format!("payout:{i}")).collect();
    let highest: Highest = Arc::default();
    let grants = Arc::new(AtomicU64::new(0));
    let mut server = start(&url, &[]);
    let base = server.url();
    let workers: Vec<_> = (0..4)
        .map(|_| {
            tokio::spawn(churn(
                base.clone(),
                keys.clone(),
                highest.clone(),
                grants.clone(),
            ))
        })
        .collect();
    // Kill it mid-run, once plenty of grants have been replied.
    let deadline = Instant::now() + PATIENCE;
    // "Mid-run": enough grants that every key has been granted several times.
    while grants.load(Ordering::SeqCst) < 40 {
        assert!(
            Instant::now() < deadline,
            "only {} grants before the deadline",
            grants.load(Ordering::SeqCst)
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    server.kill9();
    for w in workers {
        let _ = w.await;
    }
    let highest = highest.lock().unwrap().clone();
    assert!(
        highest.values().sum::<u64>() >= 40,
        "tokens issued before the kill: {highest:?}"
    );

    // Restart on the same store. Grants that were held at the kill are restored
    // (with fresh leases), so each key may stay HELD or in GRACE for a while.
    let server = start(&url, &[]);
    let base = server.url();
    let c = reqwest::Client::new();
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
    let server = start(&url, &[]);
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
