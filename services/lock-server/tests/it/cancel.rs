//! Cancel safety and store failures (C1 §8, "a 5xx never changes state").
//!
//! A request whose client goes away while its store write is in flight is
//! carried to its end: memory and store agree afterwards and no key is left
//! unreachable — for L4, L3 and L6, alone and batched by the group committer
//! (a whole batch abandoned by its clients; a batch with one failing write,
//! which fails alone with 503 while the others commit). The [`FaultyStore`] commits the write and
//! then holds its reply; the test drops the request future at that moment,
//! exactly as the HTTP server drops a handler whose client disconnected (the
//! SDK gives up after its request timeout). A failing store answers 503 and
//! leaves no trace, not even an empty key entry.

use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::http::{Method, StatusCode};
use fencepost_api::grace::GracePolicy;
use futures_util::FutureExt;
use lock_server::Limits;
use lock_server::store::LockStore;
use lock_server::store::group::GroupCommit;
use lock_server::store::memory::MemoryStore;
use serde_json::json;

use crate::support::{Fault, FaultyStore, TestServer};

/// The store methods that write.
const WRITES: [&str; 5] = [
    "create_session",
    "delete_session",
    "grant",
    "set_lease",
    "clear_grant",
];

/// How long a condition may take to become true (real time).
const PATIENCE: Duration = Duration::from_secs(5);

async fn faulty_server() -> (TestServer, Arc<FaultyStore>) {
    let store = FaultyStore::new(Arc::new(MemoryStore::default()));
    let s = TestServer::new(Limits::default(), store.clone()).await;
    (s, store)
}

/// Runs `request` until its store write is committed and its reply held,
/// then drops it: the client has gone away.
async fn drop_when_held<T>(store: &FaultyStore, request: impl Future<Output = T>) {
    tokio::select! {
        _ = request => panic!("the request finished although its store reply was held"),
        () = store.held_call() => {}
    }
}

/// Waits (real time, with a deadline) until `cond` holds; panics with `what` and `detail()`.
async fn eventually<F, Fut, D, DFut>(what: &str, mut cond: F, mut detail: D)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = bool>,
    D: FnMut() -> DFut,
    DFut: Future<Output = String>,
{
    let deadline = Instant::now() + PATIENCE;
    while !cond().await {
        if Instant::now() >= deadline {
            panic!("never: {what} (after {PATIENCE:?}); {}", detail().await);
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// L7 of each key against the store's row: same last token, and a holder in
/// the store exactly when L7 says the key is not FREE (and 404 when no row).
async fn disagreement(s: &TestServer, store: &dyn LockStore, keys: &[&str]) -> Option<String> {
    let snap = store.load().await.expect("store loads");
    for key in keys {
        let (st, info) = s.call(Method::GET, &format!("/v1/locks/{key}"), None).await;
        let row = snap.keys.iter().find(|k| k.key == *key);
        let agrees = match row {
            None => st == StatusCode::NOT_FOUND,
            Some(r) => {
                st == StatusCode::OK
                    && info["token"].as_u64() == Some(r.last_token)
                    && (info["state"] != "FREE") == r.holder.is_some()
            }
        };
        if !agrees {
            return Some(format!(
                "{key}: L7 says {st} {info} but the store holds {row:?}"
            ));
        }
    }
    None
}

async fn assert_agree(s: &TestServer, store: &dyn LockStore, keys: &[&str]) {
    if let Some(d) = disagreement(s, store, keys).await {
        panic!("memory and store disagree: {d}");
    }
}

#[tokio::test]
async fn an_acquire_abandoned_during_its_store_write_completes_and_the_key_frees_after_lease_and_grace()
 {
    let (s, store) = faulty_server().await;
    let a = s.open_session("a", 600_000).await;
    let b = s.open_session("b", 600_000).await;
    store.set("grant", Some(Fault::HoldReply));
    drop_when_held(&store, s.acquire("k1", &a, 1_000)).await;
    store.open();
    eventually(
        "the abandoned grant is applied in memory as the store committed it",
        || async { disagreement(&s, &*store, &["k1"]).await.is_none() },
        || async { disagreement(&s, &*store, &["k1"]).await.unwrap_or_default() },
    )
    .await;
    assert_eq!(s.state("k1").await, "HELD");
    // Its holder never heard of it; the grant runs out like any other.
    let (st, body) = s.acquire("k1", &b, 1_000).await;
    assert_eq!(
        (st, body["code"].as_str()),
        (StatusCode::CONFLICT, Some("LOCK_HELD"))
    );
    let grace = GracePolicy::default().grace_for(Duration::from_secs(1));
    s.clock.advance(Duration::from_secs(1) + grace);
    let (st, body) = s.acquire("k1", &b, 1_000).await;
    assert_eq!(
        (st, body["token"].as_u64()),
        (StatusCode::OK, Some(2)),
        "{body}"
    );
    assert_agree(&s, &*store, &["k1"]).await;
}

#[tokio::test]
async fn a_session_delete_abandoned_during_its_store_write_completes_and_frees_its_keys() {
    let (s, store) = faulty_server().await;
    let a = s.open_session("a", 600_000).await;
    let b = s.open_session("b", 600_000).await;
    assert_eq!(s.acquire("k1", &a, 30_000).await.0, StatusCode::OK);
    store.set("delete_session", Some(Fault::HoldReply));
    drop_when_held(
        &store,
        s.call(Method::DELETE, &format!("/v1/sessions/{a}"), None),
    )
    .await;
    store.open();
    let hb_uri = format!("/v1/sessions/{a}/heartbeat");
    let heartbeat = || s.call(Method::POST, &hb_uri, None);
    eventually(
        "the deleted session is gone from memory too",
        || async { heartbeat().await.0 == StatusCode::NOT_FOUND },
        || async { format!("L2 answers {:?}", heartbeat().await) },
    )
    .await;
    assert_agree(&s, &*store, &["k1"]).await;
    let (st, body) = s.acquire("k1", &b, 30_000).await;
    assert_eq!(
        (st, body["token"].as_u64()),
        (StatusCode::OK, Some(2)),
        "{body}"
    );
}

#[tokio::test]
async fn a_release_abandoned_during_its_store_write_completes_and_the_key_is_free_at_once() {
    let (s, store) = faulty_server().await;
    let a = s.open_session("a", 600_000).await;
    let b = s.open_session("b", 600_000).await;
    let (_, body) = s.acquire("k1", &a, 30_000).await;
    let token = body["token"].as_u64().unwrap();
    store.set("clear_grant", Some(Fault::HoldReply));
    drop_when_held(
        &store,
        s.call(
            Method::POST,
            "/v1/locks/k1/release",
            Some(json!({"session_id": a, "token": token})),
        ),
    )
    .await;
    store.open();
    eventually(
        "the abandoned release is applied in memory",
        || async { s.state("k1").await == "FREE" },
        || async { disagreement(&s, &*store, &["k1"]).await.unwrap_or_default() },
    )
    .await;
    assert_agree(&s, &*store, &["k1"]).await;
    let (st, body) = s.acquire("k1", &b, 30_000).await;
    assert_eq!(
        (st, body["token"].as_u64()),
        (StatusCode::OK, Some(token + 1)),
        "{body}"
    );
}

#[tokio::test]
async fn every_503_leaves_no_trace_not_even_an_empty_key() {
    let (s, store) = faulty_server().await;
    let a = s.open_session("a", 600_000).await;
    let (_, body) = s.acquire("held", &a, 30_000).await;
    let held = body["token"].as_u64().unwrap();
    let (_, body) = s.acquire("freed", &a, 30_000).await;
    let freed = body["token"].as_u64().unwrap();
    let (st, _) = s
        .call(
            Method::POST,
            "/v1/locks/freed/release",
            Some(json!({"session_id": a, "token": freed})),
        )
        .await;
    assert_eq!(st, StatusCode::NO_CONTENT);
    for method in WRITES {
        store.set(method, Some(Fault::Fail));
    }
    let before = s.service.state_digest().await;
    let requests: Vec<(Method, String, Option<serde_json::Value>)> = vec![
        (
            Method::POST,
            "/v1/sessions".into(),
            Some(json!({"owner_id": "c"})),
        ),
        (Method::DELETE, format!("/v1/sessions/{a}"), None),
        (
            Method::POST,
            "/v1/locks/never/acquire".into(),
            Some(json!({"session_id": a})),
        ),
        (
            Method::POST,
            "/v1/locks/freed/acquire".into(),
            Some(json!({"session_id": a})),
        ),
        (
            Method::POST,
            "/v1/locks/held/renew".into(),
            Some(json!({"session_id": a, "token": held, "ttl_ms": 60_000})),
        ),
        (
            Method::POST,
            "/v1/locks/held/release".into(),
            Some(json!({"session_id": a, "token": held})),
        ),
        (
            Method::POST,
            "/v1/locks/held/revoke".into(),
            Some(json!({"reason": "test"})),
        ),
    ];
    for (method, uri, body) in requests {
        let (st, reply) = s.call(method.clone(), &uri, body).await;
        assert_eq!(
            (st, reply["code"].as_str()),
            (StatusCode::SERVICE_UNAVAILABLE, Some("UNAVAILABLE")),
            "{method} {uri}: {reply}"
        );
        assert_eq!(
            s.service.state_digest().await,
            before,
            "{method} {uri} answered 503 and changed the state"
        );
    }
    // L7 on the key whose only acquire failed is still "never granted".
    let (st, body) = s.call(Method::GET, "/v1/locks/never", None).await;
    assert_eq!(
        (st, body["code"].as_str()),
        (StatusCode::NOT_FOUND, Some("LOCK_UNKNOWN"))
    );
    for method in WRITES {
        store.set(method, None);
    }
    let (st, body) = s.acquire("freed", &a, 30_000).await;
    assert_eq!(
        (st, body["token"].as_u64()),
        (StatusCode::OK, Some(freed + 1))
    );
}

#[tokio::test]
async fn a_re_acquire_whose_grant_is_released_during_its_lease_write_asks_for_a_retry() {
    let (s, store) = faulty_server().await;
    let s = Arc::new(s);
    let a = s.open_session("a", 600_000).await;
    let (_, body) = s.acquire("k1", &a, 100).await;
    let token = body["token"].as_u64().unwrap();
    // A re-acquire that lengthens the lease must write it first; hold that write.
    store.set("set_lease", Some(Fault::HoldReply));
    let reacquire = {
        let (s, a) = (s.clone(), a.clone());
        tokio::spawn(async move { s.acquire("k1", &a, 10_000).await })
    };
    store.held_call().await;
    let (st, _) = s
        .call(
            Method::POST,
            "/v1/locks/k1/release",
            Some(json!({"session_id": a, "token": token})),
        )
        .await;
    assert_eq!(st, StatusCode::NO_CONTENT);
    store.open();
    let (st, body) = reacquire.await.unwrap();
    assert_eq!(
        (st, body["code"].as_str(), body["retry_after_ms"].as_u64()),
        (StatusCode::CONFLICT, Some("LOCK_HELD"), Some(1)),
        "{body}"
    );
    assert!(
        s.service.audit().await.is_empty(),
        "{:?}",
        s.service.audit().await
    );
    let (st, body) = s.acquire("k1", &a, 10_000).await;
    assert_eq!(
        (st, body["token"].as_u64()),
        (StatusCode::OK, Some(token + 1))
    );
}

/// A server whose store batches through a [`GroupCommit`] in front of a
/// [`FaultyStore`], so a test can hold one batch and queue the next.
async fn batching_server() -> (Arc<TestServer>, Arc<FaultyStore>, Arc<GroupCommit>) {
    let faulty = FaultyStore::new(Arc::new(MemoryStore::default()));
    let group = Arc::new(GroupCommit::new(faulty.clone()));
    let s = TestServer::new(Limits::default(), group.clone()).await;
    (Arc::new(s), faulty, group)
}

/// Starts an L1 whose commit the store holds (the blocker every later write
/// queues behind); returns once it is held.
async fn hold_a_commit(
    s: &Arc<TestServer>,
    faulty: &FaultyStore,
) -> tokio::task::JoinHandle<String> {
    faulty.set("create_session", Some(Fault::HoldReply));
    let blocker = {
        let s = s.clone();
        tokio::spawn(async move { s.open_session("blocker", 600_000).await })
    };
    faulty.held_calls(1).await;
    blocker
}

/// Waits (real time, with a deadline) until `n` units are queued.
async fn until_queued(group: &GroupCommit, n: usize) {
    eventually(
        &format!("{n} writes queued behind the held commit"),
        || async { group.queued() >= n },
        || async { format!("{} queued", group.queued()) },
    )
    .await;
}

fn release_body(session: &str, token: u64) -> Option<serde_json::Value> {
    Some(json!({"session_id": session, "token": token}))
}

#[tokio::test]
async fn a_batch_of_writes_whose_clients_all_left_is_committed_whole_and_applied_in_memory() {
    let (s, faulty, group) = batching_server().await;
    let a = s.open_session("a", 600_000).await;
    let doomed = s.open_session("doomed", 600_000).await;
    let (_, body) = s.acquire("k-release", &a, 30_000).await;
    let released = body["token"].as_u64().unwrap();
    assert_eq!(
        s.acquire("k-doomed", &doomed, 30_000).await.0,
        StatusCode::OK
    );

    let blocker = hold_a_commit(&s, &faulty).await;
    faulty.set("grant", Some(Fault::HoldReply));
    let delete_uri = format!("/v1/sessions/{doomed}");
    let requests = futures_util::future::join_all([
        s.acquire("k1", &a, 30_000).boxed(),
        s.acquire("k2", &a, 30_000).boxed(),
        s.acquire("k3", &a, 30_000).boxed(),
        s.call(
            Method::POST,
            "/v1/locks/k-release/release",
            release_body(&a, released),
        )
        .boxed(),
        s.call(Method::DELETE, &delete_uri, None).boxed(),
    ]);
    // The five queue behind the blocker, go to the store as one commit, and
    // that commit is held after it committed: then every client leaves.
    tokio::select! {
        _ = requests => panic!("the requests finished although their batch's reply was held"),
        () = async {
            until_queued(&group, 5).await;
            faulty.pass_held();
            faulty.held_calls(2).await;
        } => {}
    }
    faulty.open();
    blocker.await.unwrap();

    let mut batch = faulty
        .commits()
        .into_iter()
        .find(|(writes, _)| writes.len() > 1)
        .expect("the five writes were committed together")
        .0;
    batch.sort_unstable();
    assert_eq!(
        batch,
        ["clear_grant", "delete_session", "grant", "grant", "grant"]
    );
    let keys = ["k1", "k2", "k3", "k-release", "k-doomed"];
    eventually(
        "every abandoned write of the batch is applied in memory as the store committed it",
        || async { disagreement(&s, &*faulty, &keys).await.is_none() },
        || async { disagreement(&s, &*faulty, &keys).await.unwrap_or_default() },
    )
    .await;
    for key in ["k1", "k2", "k3"] {
        assert_eq!(s.state(key).await, "HELD", "{key}");
    }
    for key in ["k-release", "k-doomed"] {
        assert_eq!(s.state(key).await, "FREE", "{key}");
    }
    let (st, hb) = s
        .call(
            Method::POST,
            &format!("/v1/sessions/{doomed}/heartbeat"),
            None,
        )
        .await;
    assert_eq!(
        (st, hb["code"].as_str()),
        (StatusCode::NOT_FOUND, Some("SESSION_UNKNOWN"))
    );
    assert!(
        s.service.audit().await.is_empty(),
        "{:?}",
        s.service.audit().await
    );
}

#[tokio::test]
async fn a_failing_write_fails_alone_with_503_and_leaves_no_trace_while_its_batch_commits() {
    let (s, faulty, group) = batching_server().await;
    let a = s.open_session("a", 600_000).await;
    let (_, body) = s.acquire("k-release", &a, 30_000).await;
    let released = body["token"].as_u64().unwrap();
    let (_, body) = s.acquire("k-renew", &a, 1_000).await;
    let renewed = body["token"].as_u64().unwrap();

    let blocker = hold_a_commit(&s, &faulty).await;
    faulty.set("grant", Some(Fault::Fail));
    let spawn = |method: Method, uri: String, body: Option<serde_json::Value>| {
        let s = s.clone();
        tokio::spawn(async move { s.call(method, &uri, body).await })
    };
    let acquire = spawn(
        Method::POST,
        "/v1/locks/never/acquire".into(),
        Some(json!({"session_id": a})),
    );
    let release = spawn(
        Method::POST,
        "/v1/locks/k-release/release".into(),
        release_body(&a, released),
    );
    let renew = spawn(
        Method::POST,
        "/v1/locks/k-renew/renew".into(),
        Some(json!({"session_id": a, "token": renewed, "ttl_ms": 60_000})),
    );
    until_queued(&group, 3).await;
    faulty.open();
    blocker.await.unwrap();

    let (st, body) = acquire.await.unwrap();
    assert_eq!(
        (st, body["code"].as_str()),
        (StatusCode::SERVICE_UNAVAILABLE, Some("UNAVAILABLE")),
        "{body}"
    );
    assert_eq!(release.await.unwrap().0, StatusCode::NO_CONTENT);
    let (st, body) = renew.await.unwrap();
    assert_eq!(
        (st, body["lease_ms"].as_u64()),
        (StatusCode::OK, Some(60_000)),
        "{body}"
    );
    // The batch failed whole (nothing of it written), then each write alone.
    let commits = faulty.commits();
    let batch = commits
        .iter()
        .position(|(writes, _)| writes.len() == 3)
        .expect("the three writes were tried together");
    assert!(commits[batch].1, "the batch holding the bad grant failed");
    let mut alone: Vec<_> = commits[batch + 1..]
        .iter()
        .map(|(w, failed)| (w.join(","), *failed))
        .collect();
    alone.sort();
    assert_eq!(
        alone,
        [
            ("clear_grant".to_string(), false),
            ("grant".to_string(), true),
            ("set_lease".to_string(), false)
        ]
    );
    assert_eq!(group.commit_stats().unwrap().retried_alone, 3);
    // The failed acquire left no trace; its neighbours are applied.
    let (st, body) = s.call(Method::GET, "/v1/locks/never", None).await;
    assert_eq!(
        (st, body["code"].as_str()),
        (StatusCode::NOT_FOUND, Some("LOCK_UNKNOWN"))
    );
    assert_eq!(s.state("k-release").await, "FREE");
    assert_agree(&s, &*faulty, &["never", "k-release", "k-renew"]).await;
    let snap = faulty.load().await.unwrap();
    let k = snap.keys.iter().find(|k| k.key == "k-renew").unwrap();
    assert_eq!(k.holder.as_ref().map(|h| h.lease_ms), Some(60_000));
    assert!(
        s.service.audit().await.is_empty(),
        "{:?}",
        s.service.audit().await
    );
}
