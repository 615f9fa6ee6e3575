//! The server-side hardening rules as scenarios through the router on the fake
//! clock: a renew never shortens, the holder's re-acquire answers its current
//! grant, L7 and error bodies never carry a session id, dot keys are refused,
//! and the table lets go of what it no longer needs (FREE keys leave memory,
//! expired sessions and their tombstones are bounded) while the store keeps
//! every key's last token.

use std::sync::Arc;
use std::time::Duration;

use axum::http::{Method, StatusCode};
use fencepost_api::grace::GracePolicy;
use lock_server::core::Caps;
use lock_server::store::memory::MemoryStore;
use lock_server::{Limits, LockService};
use serde_json::{Value, json};

use crate::support::TestServer;

const NS: Duration = Duration::from_nanos(1);

async fn renew(
    s: &TestServer,
    key: &str,
    session: &str,
    token: u64,
    ttl_ms: u64,
) -> (StatusCode, Value) {
    s.call(
        Method::POST,
        &format!("/v1/locks/{key}/renew"),
        Some(json!({"session_id": session, "token": token, "ttl_ms": ttl_ms})),
    )
    .await
}

async fn info(s: &TestServer, key: &str) -> (StatusCode, Value) {
    s.call(Method::GET, &format!("/v1/locks/{key}"), None).await
}

#[tokio::test]
async fn a_renew_with_a_shorter_ttl_never_ends_the_lease_earlier_than_promised() {
    let s = TestServer::memory().await;
    let a = s.open_session("a", 600_000).await;
    let t0 = s.service.now();
    let (_, body) = s.acquire("k", &a, 10_000).await;
    let token = body["token"].as_u64().unwrap();
    s.clock.advance(Duration::from_secs(1));
    // The renew is granted 1 s (that is what its client counts from its send)...
    let (st, body) = renew(&s, "k", &a, token, 1_000).await;
    assert_eq!(
        (st, body["lease_ms"].as_u64()),
        (StatusCode::OK, Some(1_000)),
        "{body}"
    );
    // ...but the server-side end stays at t0 + 10 s, the earlier reply's promise.
    let (_, i) = info(&s, "k").await;
    assert_eq!(i["remaining_ms"], 9_000, "{i}");
    let end = t0.saturating_add(Duration::from_secs(10));
    s.clock.set(end.saturating_sub(NS));
    assert_eq!(s.state("k").await, "HELD");
    // A renew with a longer TTL (1 ns before that end) does extend it.
    let (st, _) = renew(&s, "k", &a, token, 20_000).await;
    assert_eq!(st, StatusCode::OK);
    s.clock.set(end);
    assert_eq!(s.state("k").await, "HELD");
    let (_, i) = info(&s, "k").await;
    assert_eq!(i["remaining_ms"], 20_000, "{i}");
}

#[tokio::test]
async fn the_holders_re_acquire_returns_its_grant_with_the_lease_from_this_request() {
    let s = TestServer::memory().await;
    let a = s.open_session("a", 600_000).await;
    let b = s.open_session("b", 600_000).await;
    let (_, body) = s.acquire("k", &a, 1_000).await;
    let token = body["token"].as_u64().unwrap();
    // The L4 reply was lost; the client retries 600 ms later.
    s.clock.advance(Duration::from_millis(600));
    let (st, body) = s.acquire("k", &a, 1_000).await;
    assert_eq!(st, StatusCode::OK, "{body}");
    assert_eq!(
        (body["token"].as_u64(), body["lease_ms"].as_u64()),
        (Some(token), Some(1_000)),
        "same token, the lease granted for this request"
    );
    // The lease was restarted from this request's receipt.
    let (_, i) = info(&s, "k").await;
    assert_eq!(
        (i["state"].as_str(), i["remaining_ms"].as_u64()),
        (Some("HELD"), Some(1_000))
    );
    assert_eq!(s.acquire("k", &b, 1_000).await.0, StatusCode::CONFLICT);
    // A re-acquire with a shorter TTL does not shorten it either.
    let (st, body) = s.acquire("k", &a, 100).await;
    assert_eq!((st, body["lease_ms"].as_u64()), (StatusCode::OK, Some(100)));
    let (_, i) = info(&s, "k").await;
    assert_eq!(i["remaining_ms"], 1_000, "{i}");
    // Once the lease has ended, a re-acquire resurrects nothing: the key is in
    // GRACE for everyone, and afterwards the holder gets a new token.
    s.clock.advance(Duration::from_millis(1_000));
    let (st, body) = s.acquire("k", &a, 1_000).await;
    assert_eq!(
        (st, body["code"].as_str()),
        (StatusCode::CONFLICT, Some("LOCK_HELD"))
    );
    s.clock
        .advance(GracePolicy::default().grace_for(Duration::from_secs(1)));
    let (st, body) = s.acquire("k", &a, 1_000).await;
    assert_eq!(
        (st, body["token"].as_u64()),
        (StatusCode::OK, Some(token + 1))
    );
    let metrics = s.service.metrics_text();
    assert!(metrics.contains("lock_reacquires_total 2"), "{metrics}");
    assert!(metrics.contains("lock_grants_total 2"), "{metrics}");
}

#[tokio::test]
async fn no_reply_but_l1_ever_carries_a_session_id() {
    let s = TestServer::memory().await;
    let holder = s.open_session("holder", 600_000).await;
    let rival = s.open_session("rival", 600_000).await;
    let (_, body) = s.acquire("k", &holder, 30_000).await;
    let token = body["token"].as_u64().unwrap();
    let (st, i) = info(&s, "k").await;
    assert_eq!(st, StatusCode::OK);
    let fields: Vec<&str> = i.as_object().unwrap().keys().map(String::as_str).collect();
    assert_eq!(
        fields,
        ["key", "owner_id", "remaining_ms", "state", "token"],
        "{i}"
    );
    assert_eq!(i["owner_id"], "holder");
    // Every refusal another session (or nobody) can provoke about the key.
    let replies = [
        s.acquire("k", &rival, 30_000).await,
        renew(&s, "k", &rival, token, 1_000).await,
        renew(&s, "k", &holder, token + 1, 1_000).await,
        s.call(
            Method::POST,
            "/v1/locks/k/release",
            Some(json!({"session_id": rival, "token": token})),
        )
        .await,
        s.call(
            Method::POST,
            &format!("/v1/sessions/{rival}x/heartbeat"),
            None,
        )
        .await,
        info(&s, "k").await,
        s.call(Method::GET, "/v1/config", None).await,
    ];
    for (st, body) in &replies {
        let text = body.to_string();
        assert!(
            !text.contains(&holder) && !text.contains(&rival),
            "a {st} reply carries a session id: {text}"
        );
    }
    assert!(!s.service.metrics_text().contains(&holder));
    // Also once the holder's session expires and the key is in GRACE.
    s.clock.advance(Duration::from_secs(600));
    let (_, i) = info(&s, "k").await;
    assert!(!i.to_string().contains(&holder), "{i}");
}

#[tokio::test]
async fn dot_keys_are_400_on_every_key_route() {
    let s = TestServer::memory().await;
    let a = s.open_session("a", 600_000).await;
    let before = s.service.state_digest().await;
    for seg in [".", "..", "%2E", "%2E%2E", "%2e%2e"] {
        for (method, path, body) in [
            (Method::POST, "acquire", Some(json!({"session_id": a}))),
            (
                Method::POST,
                "renew",
                Some(json!({"session_id": a, "token": 1})),
            ),
            (
                Method::POST,
                "release",
                Some(json!({"session_id": a, "token": 1})),
            ),
            (Method::POST, "revoke", Some(json!({"reason": "x"}))),
        ] {
            let (st, body) = s
                .call(method, &format!("/v1/locks/{seg}/{path}"), body)
                .await;
            assert_eq!(
                (st, body["code"].as_str()),
                (StatusCode::BAD_REQUEST, Some("BAD_REQUEST")),
                "{seg}/{path}: {body}"
            );
            assert!(
                body["message"].as_str().unwrap().contains("reserved"),
                "{body}"
            );
        }
        let (st, _) = s.call(Method::GET, &format!("/v1/locks/{seg}"), None).await;
        assert_eq!(st, StatusCode::BAD_REQUEST, "GET {seg}");
    }
    // A key with dots inside is an ordinary key.
    assert_eq!(s.acquire("a..b", &a, 1_000).await.0, StatusCode::OK);
    assert_ne!(s.service.state_digest().await, before);
}

#[tokio::test]
async fn free_keys_leave_memory_and_come_back_with_the_next_token_from_the_store() {
    let s = TestServer::memory().await;
    let a = s.open_session("a", 600_000).await;
    let b = s.open_session("b", 600_000).await;
    for i in 0..1_000 {
        let key = format!("payout:{i}");
        let (_, body) = s.acquire(&key, &a, 1_000).await;
        let token = body["token"].as_u64().unwrap();
        let (st, _) = s
            .call(
                Method::POST,
                &format!("/v1/locks/{key}/release"),
                Some(json!({"session_id": a, "token": token})),
            )
            .await;
        assert_eq!(st, StatusCode::NO_CONTENT);
    }
    // 500 more lapse instead of being released; the sweeper retires them.
    for i in 1_000..1_500 {
        assert_eq!(
            s.acquire(&format!("payout:{i}"), &a, 1_000).await.0,
            StatusCode::OK
        );
    }
    assert_eq!(s.service.table_sizes().keys, 500);
    s.clock.advance(Duration::from_secs(2));
    s.service.sweep().await;
    assert_eq!(
        s.service.table_sizes().keys,
        0,
        "FREE keys stayed in memory"
    );
    assert!(
        s.service.audit().await.is_empty(),
        "{:?}",
        s.service.audit().await
    );
    // The store still knows every key: L7 says FREE with its last token...
    let (st, i) = info(&s, "payout:7").await;
    assert_eq!(
        (st, i["state"].as_str(), i["token"].as_u64()),
        (StatusCode::OK, Some("FREE"), Some(1))
    );
    let (st, _) = info(&s, "never").await;
    assert_eq!(st, StatusCode::NOT_FOUND);
    // ...a revoke finds nothing to end...
    let (st, body) = s
        .call(
            Method::POST,
            "/v1/locks/payout:7/revoke",
            Some(json!({"reason": "ops"})),
        )
        .await;
    assert_eq!(
        (st, body),
        (StatusCode::OK, json!({"key": "payout:7", "state": "FREE"}))
    );
    // ...and the next grant of an evicted key is above every earlier one.
    for key in ["payout:7", "payout:1200"] {
        let (st, body) = s.acquire(key, &b, 1_000).await;
        assert_eq!(
            (st, body["token"].as_u64()),
            (StatusCode::OK, Some(2)),
            "{key}: {body}"
        );
    }
}

#[tokio::test]
async fn expired_sessions_leave_memory_and_their_tombstones_are_capped() {
    let caps = Caps {
        max_sessions: 50,
        max_tombstones: 10,
        tombstone_keep: Duration::from_secs(60),
        sweep_batch: 1_000,
    };
    let clock = fencepost_api::FakeClock::new(fencepost_api::MonoTime::from_nanos(1_000_000_000));
    let service = LockService::start_with_caps(
        Limits::default(),
        caps,
        Arc::new(MemoryStore::default()),
        Arc::new(clock.clone()),
    )
    .await
    .unwrap();
    let s = TestServer::with_service(service, clock);
    let mut ids = Vec::new();
    for _ in 0..50 {
        ids.push(s.open_session("w", 1_000).await);
    }
    // At the cap, L1 is a 503 that creates nothing.
    let (st, body) = s
        .call(Method::POST, "/v1/sessions", Some(json!({"owner_id": "w"})))
        .await;
    assert_eq!(
        (st, body["code"].as_str()),
        (StatusCode::SERVICE_UNAVAILABLE, Some("UNAVAILABLE"))
    );
    assert_eq!(s.service.table_sizes().sessions, 50);
    s.clock.advance(Duration::from_secs(2));
    s.service.sweep().await;
    let sizes = s.service.table_sizes();
    assert_eq!((sizes.sessions, sizes.tombstones), (0, 10), "{sizes:?}");
    // The last 10 to expire still answer 410; the others are forgotten (404).
    let heartbeat = |id: String| {
        let s = &s;
        async move {
            s.call(Method::POST, &format!("/v1/sessions/{id}/heartbeat"), None)
                .await
                .0
        }
    };
    let mut gone = 0;
    for id in &ids {
        match heartbeat(id.clone()).await {
            StatusCode::GONE => gone += 1,
            StatusCode::NOT_FOUND => {}
            other => panic!("heartbeat of an expired session answered {other}"),
        }
    }
    assert_eq!(gone, 10);
    // Tombstones also go by age.
    s.clock.advance(Duration::from_secs(61));
    s.service.sweep().await;
    assert_eq!(s.service.table_sizes().tombstones, 0);
    // And there is room for new sessions again.
    s.open_session("w", 1_000).await;
}

#[tokio::test]
async fn config_says_whether_tokens_survive_a_restart() {
    let s = TestServer::memory().await;
    let (_, cfg) = s.call(Method::GET, "/v1/config", None).await;
    assert_eq!(
        (cfg["store"].as_str(), cfg["durable"].as_bool()),
        (Some("memory"), Some(false))
    );
    assert!(cfg.get("store_path").is_none(), "{cfg}");
    let path = crate::support::temp_dir("cfg").join("lock.sqlite");
    let store = lock_server::store::open(&format!("sqlite:{}", path.display()))
        .await
        .unwrap();
    let s = TestServer::new(Limits::default(), store).await;
    let (_, cfg) = s.call(Method::GET, "/v1/config", None).await;
    assert_eq!(
        (cfg["store"].as_str(), cfg["durable"].as_bool()),
        (Some("sqlite"), Some(true))
    );
    assert_eq!(
        cfg["store_path"].as_str(),
        Some(path.display().to_string().as_str())
    );
}
