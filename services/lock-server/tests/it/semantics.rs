//! C1's rules as scenarios through the router on the fake clock: tokens,
//! ownership, release, session deletion, revoke, clamping, and clear refusals.

use std::time::Duration;

use axum::http::{Method, StatusCode};
use serde_json::json;

use crate::support::TestServer;

/// L5 or L6 (`verb`) with a session and a token, no TTL.
async fn with_token(
    s: &TestServer,
    verb: &str,
    key: &str,
    session: &str,
    token: u64,
) -> (StatusCode, serde_json::Value) {
    s.call(
        Method::POST,
        &format!("/v1/locks/{key}/{verb}"),
        Some(json!({"session_id": session, "token": token})),
    )
    .await
}

async fn renew(
    s: &TestServer,
    key: &str,
    session: &str,
    token: u64,
) -> (StatusCode, serde_json::Value) {
    with_token(s, "renew", key, session, token).await
}

async fn release(
    s: &TestServer,
    key: &str,
    session: &str,
    token: u64,
) -> (StatusCode, serde_json::Value) {
    with_token(s, "release", key, session, token).await
}

#[tokio::test]
async fn tokens_strictly_increase_per_key_and_renew_keeps_the_token() {
    let s = TestServer::memory().await;
    let a = s.open_session("a", 60_000).await;
    let mut last = 0;
    for _ in 0..5 {
        let (st, body) = s.acquire("k", &a, 1_000).await;
        assert_eq!(st, StatusCode::OK);
        let t = body["token"].as_u64().unwrap();
        assert!(t > last, "token {t} after {last}");
        let (st, body) = renew(&s, "k", &a, t).await;
        assert_eq!((st, body["token"].as_u64()), (StatusCode::OK, Some(t)));
        assert_eq!(release(&s, "k", &a, t).await.0, StatusCode::NO_CONTENT);
        last = t;
    }
    // Another key has its own sequence.
    let (_, body) = s.acquire("other", &a, 1_000).await;
    assert_eq!(body["token"], 1);
    let (_, info) = s.call(Method::GET, "/v1/locks/k", None).await;
    assert_eq!(
        (info["state"].as_str(), info["token"].as_u64()),
        (Some("FREE"), Some(5))
    );
}

#[tokio::test]
async fn release_makes_the_key_reassignable_at_once() {
    let s = TestServer::memory().await;
    let a = s.open_session("a", 60_000).await;
    let b = s.open_session("b", 60_000).await;
    let (_, body) = s.acquire("k", &a, 30_000).await;
    let t = body["token"].as_u64().unwrap();
    assert_eq!(s.acquire("k", &b, 30_000).await.0, StatusCode::CONFLICT);
    assert_eq!(release(&s, "k", &a, t).await.0, StatusCode::NO_CONTENT);
    let (st, body) = s.acquire("k", &b, 30_000).await;
    assert_eq!((st, body["token"].as_u64()), (StatusCode::OK, Some(t + 1)));
}

#[tokio::test]
async fn only_the_holding_session_with_its_token_can_renew_or_release() {
    let s = TestServer::memory().await;
    let a = s.open_session("a", 60_000).await;
    let b = s.open_session("b", 60_000).await;
    let (_, body) = s.acquire("k", &a, 30_000).await;
    let t = body["token"].as_u64().unwrap();
    for (who, token) in [(&b, t), (&a, t + 1), (&a, 0)] {
        let (st, body) = renew(&s, "k", who, token).await;
        assert_eq!(
            (st, body["code"].as_str()),
            (StatusCode::CONFLICT, Some("LOCK_LOST"))
        );
        let (st, body) = release(&s, "k", who, token).await;
        assert_eq!(
            (st, body["code"].as_str()),
            (StatusCode::CONFLICT, Some("LOCK_LOST"))
        );
    }
    assert_eq!(s.state("k").await, "HELD");
    let (st, body) = renew(&s, "k", "no-such-session", t).await;
    assert_eq!(
        (st, body["code"].as_str()),
        (StatusCode::NOT_FOUND, Some("SESSION_UNKNOWN"))
    );
}

#[tokio::test]
async fn deleting_a_session_releases_its_locks_at_once_and_forgets_it() {
    let s = TestServer::memory().await;
    let a = s.open_session("a", 60_000).await;
    let b = s.open_session("b", 60_000).await;
    assert_eq!(s.acquire("k1", &a, 30_000).await.0, StatusCode::OK);
    assert_eq!(s.acquire("k2", &a, 30_000).await.0, StatusCode::OK);
    let (st, _) = s
        .call(Method::DELETE, &format!("/v1/sessions/{a}"), None)
        .await;
    assert_eq!(st, StatusCode::NO_CONTENT);
    assert_eq!(s.acquire("k1", &b, 30_000).await.0, StatusCode::OK);
    assert_eq!(s.acquire("k2", &b, 30_000).await.0, StatusCode::OK);
    let (st, body) = s
        .call(Method::POST, &format!("/v1/sessions/{a}/heartbeat"), None)
        .await;
    assert_eq!(
        (st, body["code"].as_str()),
        (StatusCode::NOT_FOUND, Some("SESSION_UNKNOWN"))
    );
}

#[tokio::test]
async fn heartbeats_keep_a_session_alive_past_its_ttl() {
    let s = TestServer::memory().await;
    let a = s.open_session("a", 1_000).await;
    for _ in 0..10 {
        s.clock.advance(Duration::from_millis(900));
        let (st, body) = s
            .call(
                Method::POST,
                &format!("/v1/sessions/{a}/heartbeat"),
                Some(json!({})),
            )
            .await;
        assert_eq!((st, body["ttl_ms"].as_u64()), (StatusCode::OK, Some(1_000)));
    }
    // An empty body is accepted too.
    let (st, _) = s
        .call_raw(
            Method::POST,
            &format!("/v1/sessions/{a}/heartbeat"),
            Vec::new(),
        )
        .await;
    assert_eq!(st, StatusCode::OK);
}

#[tokio::test]
async fn ttls_outside_the_range_are_clamped_not_refused() {
    let s = TestServer::memory().await;
    let (st, body) = s
        .call(
            Method::POST,
            "/v1/sessions",
            Some(json!({"owner_id": "a", "ttl_ms": 1})),
        )
        .await;
    assert_eq!(
        (st, body["ttl_ms"].as_u64()),
        (StatusCode::CREATED, Some(100))
    );
    let a = s.open_session("a", 60_000).await;
    let (_, body) = s.acquire("k", &a, 1_000_000_000).await;
    assert_eq!(body["lease_ms"], 600_000);
    let (_, body) = s
        .call(
            Method::POST,
            "/v1/locks/d/acquire",
            Some(json!({"session_id": a})),
        )
        .await;
    assert_eq!(
        body["lease_ms"], 30_000,
        "absent ttl_ms means lock.default.ttl"
    );
}

#[tokio::test]
async fn revoke_frees_the_key_and_reports_the_revoked_token() {
    let s = TestServer::memory().await;
    let a = s.open_session("a", 60_000).await;
    let b = s.open_session("b", 60_000).await;
    let (_, body) = s.acquire("k", &a, 30_000).await;
    let t = body["token"].as_u64().unwrap();
    let (st, body) = s
        .call(
            Method::POST,
            "/v1/locks/k/revoke",
            Some(json!({"reason": "operator"})),
        )
        .await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(
        body,
        json!({"key": "k", "revoked_token": t, "state": "FREE"})
    );
    // The old holder's token is dead for good; the next grant is higher.
    assert_eq!(renew(&s, "k", &a, t).await.0, StatusCode::CONFLICT);
    let (_, body) = s.acquire("k", &b, 30_000).await;
    assert_eq!(body["token"].as_u64(), Some(t + 1));
    let (st, body) = s
        .call(
            Method::POST,
            "/v1/locks/never/revoke",
            Some(json!({"reason": "x"})),
        )
        .await;
    assert_eq!(
        (st, body["code"].as_str()),
        (StatusCode::NOT_FOUND, Some("LOCK_UNKNOWN"))
    );
}

#[tokio::test]
async fn client_mistakes_get_clear_4xx_codes() {
    let s = TestServer::memory().await;
    let a = s.open_session("a", 60_000).await;
    let cases: Vec<(Method, String, Vec<u8>, StatusCode, &str)> = vec![
        (
            Method::POST,
            "/v1/sessions".into(),
            b"{".to_vec(),
            StatusCode::BAD_REQUEST,
            "BAD_REQUEST",
        ),
        (
            Method::POST,
            "/v1/sessions".into(),
            br#"{"owner_id":""}"#.to_vec(),
            StatusCode::BAD_REQUEST,
            "BAD_REQUEST",
        ),
        (
            Method::POST,
            "/v1/sessions".into(),
            br#"{"owner_id":"a","ttl_ms":-5}"#.to_vec(),
            StatusCode::BAD_REQUEST,
            "BAD_REQUEST",
        ),
        (
            Method::POST,
            "/v1/sessions".into(),
            vec![b' '; 70_000],
            StatusCode::PAYLOAD_TOO_LARGE,
            "PAYLOAD_TOO_LARGE",
        ),
        (
            Method::POST,
            format!("/v1/locks/{}/acquire", "k".repeat(257)),
            format!(r#"{{"session_id":"{a}"}}"#).into_bytes(),
            StatusCode::BAD_REQUEST,
            "BAD_REQUEST",
        ),
        (
            Method::POST,
            "/v1/locks/sp%20ace/acquire".into(),
            format!(r#"{{"session_id":"{a}"}}"#).into_bytes(),
            StatusCode::BAD_REQUEST,
            "BAD_REQUEST",
        ),
        (
            Method::POST,
            "/v1/locks/k/renew".into(),
            format!(r#"{{"session_id":"{a}","token":"1"}}"#).into_bytes(),
            StatusCode::BAD_REQUEST,
            "BAD_REQUEST",
        ),
        (
            Method::GET,
            "/v1/locks/never".into(),
            Vec::new(),
            StatusCode::NOT_FOUND,
            "LOCK_UNKNOWN",
        ),
        (
            Method::POST,
            "/v1/locks//acquire".into(),
            format!(r#"{{"session_id":"{a}"}}"#).into_bytes(),
            StatusCode::BAD_REQUEST,
            "BAD_REQUEST",
        ),
        (
            Method::DELETE,
            format!("/v1/sessions/{a}"),
            vec![b' '; 70_000],
            StatusCode::PAYLOAD_TOO_LARGE,
            "PAYLOAD_TOO_LARGE",
        ),
        (
            Method::GET,
            "/v1/locks/never".into(),
            vec![b' '; 70_000],
            StatusCode::PAYLOAD_TOO_LARGE,
            "PAYLOAD_TOO_LARGE",
        ),
        (
            Method::POST,
            "/v1/sessions/nope/heartbeat".into(),
            Vec::new(),
            StatusCode::NOT_FOUND,
            "SESSION_UNKNOWN",
        ),
        (
            Method::DELETE,
            "/v1/sessions/nope".into(),
            Vec::new(),
            StatusCode::NOT_FOUND,
            "SESSION_UNKNOWN",
        ),
    ];
    let before = s.service.state_digest().await;
    for (method, uri, body, status, code) in cases {
        let (st, reply) = s.call_raw(method.clone(), &uri, body).await;
        assert_eq!(
            (st, reply["code"].as_str()),
            (status, Some(code)),
            "{method} {uri}: {reply}"
        );
        assert!(!reply["message"].as_str().unwrap_or("").is_empty());
    }
    assert_eq!(
        s.service.state_digest().await,
        before,
        "refused requests changed state"
    );
}

#[tokio::test]
async fn config_and_metrics_show_the_effective_settings_and_c5_names() {
    let s = TestServer::memory().await;
    let (st, cfg) = s.call(Method::GET, "/v1/config", None).await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(cfg["grace_mode"], "derived");
    assert_eq!(cfg["grace_for_default_ttl_ms"], 57.0); // 50 + 6 (2*100e-6*30s) + 1
    let a = s.open_session("a", 60_000).await;
    s.acquire("k", &a, 1_000).await;
    let text = s.service.metrics_text();
    for name in [
        "lock_grants_total 1",
        "lock_renewals_total 0",
        "lock_releases_total 0",
        "lock_sessions_live 1",
        "lock_locks_held 1",
        "lock_expired_total{kind=\"session\"} 0",
        "lock_expired_total{kind=\"lease\"} 0",
    ] {
        assert!(text.contains(name), "missing {name} in:\n{text}");
    }
    s.clock.advance(Duration::from_secs(2));
    s.service.sweep().await;
    assert!(
        s.service
            .metrics_text()
            .contains("lock_expired_total{kind=\"lease\"} 1")
    );
}
