//! API tokens through the router, on a fake clock: every endpoint
//! without a token, with a wrong one, out of its role or scope, and on
//! another token's session; the issue's three requests; the same 403 for a
//! foreign and an unknown session id; the owner of an expired session still
//! hears 410. Every refusal asserts its status, its JSON code, and that the
//! service's state (memory and store) did not change.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderMap, Method, Request, StatusCode, header};
use fencepost_api::auth::{IssuedToken, Role, issue_token};
use http_body_util::BodyExt;
use lock_server::auth::Authenticator;
use serde_json::{Value, json};
use tower::ServiceExt;

use crate::support::{TestServer, temp_dir};

/// A server with auth on, and one token per principal.
pub struct AuthServer {
    /// The server; its `app` carries the token layer.
    pub srv: TestServer,
    /// client, scoped to `payout:`.
    pub alice: IssuedToken,
    /// client, every key.
    pub bob: IssuedToken,
    /// admin.
    pub ops: IssuedToken,
    /// monitor.
    pub mon: IssuedToken,
}

/// The reply of one call: status, headers, JSON body (Null if none).
pub struct Reply {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Value,
}

impl AuthServer {
    /// A memory-store server with a token file of alice, bob, ops and mon.
    pub async fn new() -> Self {
        let srv = TestServer::memory().await;
        Self::over(srv)
    }

    /// Puts the token layer on `srv`.
    pub fn over(mut srv: TestServer) -> Self {
        let alice = issue_token("alice", Role::Client, Some("payout:")).unwrap();
        let bob = issue_token("bob", Role::Client, None).unwrap();
        let ops = issue_token("ops", Role::Admin, None).unwrap();
        let mon = issue_token("mon", Role::Monitor, None).unwrap();
        let path = temp_dir("auth").join("tokens");
        let file = format!(
            "# test tokens\n{}\n{}\n\n{}\n{}\n",
            alice.line, bob.line, ops.line, mon.line
        );
        std::fs::write(&path, file).unwrap();
        let auth = Arc::new(Authenticator::load(&path).unwrap());
        srv.app = lock_server::http::app_with_auth(srv.service.clone(), Some(auth));
        AuthServer {
            srv,
            alice,
            bob,
            ops,
            mon,
        }
    }

    /// One call with `authorization` as the header's value (none if `None`).
    pub async fn call_with(
        &self,
        authorization: Option<&str>,
        method: Method,
        uri: &str,
        body: Option<Value>,
    ) -> Reply {
        let bytes = body.map(|b| b.to_string()).unwrap_or_default().into_bytes();
        let mut req = Request::builder()
            .method(method)
            .uri(uri)
            .header(header::CONTENT_TYPE, "application/json")
            .header(header::CONTENT_LENGTH, bytes.len());
        if let Some(a) = authorization {
            req = req.header(header::AUTHORIZATION, a);
        }
        let req = req.body(Body::from(bytes)).unwrap();
        let resp = self.srv.app.clone().oneshot(req).await.unwrap();
        let status = resp.status();
        let headers = resp.headers().clone();
        let bytes = resp.into_body().collect().await.unwrap().to_bytes();
        Reply {
            status,
            headers,
            body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        }
    }

    /// One call with `token`'s bearer header.
    pub async fn call(
        &self,
        token: &IssuedToken,
        method: Method,
        uri: &str,
        body: Option<Value>,
    ) -> Reply {
        let bearer = format!("Bearer {}", token.secret);
        self.call_with(Some(&bearer), method, uri, body).await
    }

    /// L1 as `token`; the session id.
    pub async fn open(&self, token: &IssuedToken, owner: &str) -> String {
        let r = self
            .call(
                token,
                Method::POST,
                "/v1/sessions",
                Some(json!({"owner_id": owner, "ttl_ms": 60_000})),
            )
            .await;
        assert_eq!(r.status, StatusCode::CREATED, "{}", r.body);
        r.body["session_id"].as_str().unwrap().to_string()
    }

    /// L4 as `token`; the token granted.
    pub async fn grant(&self, token: &IssuedToken, key: &str, session: &str) -> u64 {
        let r = self
            .call(
                token,
                Method::POST,
                &format!("/v1/locks/{key}/acquire"),
                Some(json!({"session_id": session, "ttl_ms": 30_000})),
            )
            .await;
        assert_eq!(r.status, StatusCode::OK, "{}", r.body);
        r.body["token"].as_u64().unwrap()
    }

    /// Memory and store, canonically.
    pub async fn digest(&self) -> String {
        self.srv.service.state_digest().await
    }
}

/// A refusal: `status`, the C1 body shape with `code`, a message.
fn assert_refused(r: &Reply, status: StatusCode, code: &str, what: &str) {
    assert_eq!(r.status, status, "{what}: {}", r.body);
    assert_eq!(r.body["code"], code, "{what}: {}", r.body);
    assert!(
        r.body["message"].as_str().is_some_and(|m| !m.is_empty()),
        "{what}: {}",
        r.body
    );
    if status == StatusCode::UNAUTHORIZED {
        assert_eq!(
            r.headers.get(header::WWW_AUTHENTICATE).unwrap(),
            "Bearer",
            "{what}"
        );
    } else {
        assert!(r.headers.get(header::WWW_AUTHENTICATE).is_none(), "{what}");
    }
}

/// Every endpoint but the probes, with a body each accepts, for `session`
/// and grant `token` of `key`.
fn every_endpoint(session: &str, key: &str, token: u64) -> Vec<(Method, String, Option<Value>)> {
    vec![
        (
            Method::POST,
            "/v1/sessions".into(),
            Some(json!({"owner_id": "x"})),
        ),
        (
            Method::POST,
            format!("/v1/sessions/{session}/heartbeat"),
            None,
        ),
        (Method::DELETE, format!("/v1/sessions/{session}"), None),
        (
            Method::POST,
            format!("/v1/locks/{key}/acquire"),
            Some(json!({"session_id": session})),
        ),
        (
            Method::POST,
            format!("/v1/locks/{key}/renew"),
            Some(json!({"session_id": session, "token": token})),
        ),
        (
            Method::POST,
            format!("/v1/locks/{key}/release"),
            Some(json!({"session_id": session, "token": token})),
        ),
        (
            Method::POST,
            format!("/v1/locks/{key}/revoke"),
            Some(json!({"reason": "mallory"})),
        ),
        (Method::GET, format!("/v1/locks/{key}"), None),
        (Method::GET, "/v1/config".into(), None),
        (Method::GET, "/metrics".into(), None),
        (Method::GET, "/v1/nowhere".into(), None),
    ]
}

#[tokio::test]
async fn the_issues_three_requests_give_401_and_403_and_the_grant_stays_held() {
    let s = AuthServer::new().await;
    let sid = s.open(&s.alice, "alice").await;
    let token = s.grant(&s.alice, "payout:1", &sid).await;
    assert_eq!(token, 1);
    let before = s.digest().await;
    let revoke = Some(json!({"reason": "mallory"}));
    let r = s
        .call_with(
            None,
            Method::POST,
            "/v1/locks/payout:1/revoke",
            revoke.clone(),
        )
        .await;
    assert_refused(
        &r,
        StatusCode::UNAUTHORIZED,
        "UNAUTHENTICATED",
        "tokenless revoke",
    );
    assert_eq!(s.digest().await, before);
    // A client token, even alice's own, may not revoke.
    for t in [&s.alice, &s.bob, &s.mon] {
        let r = s
            .call(t, Method::POST, "/v1/locks/payout:1/revoke", revoke.clone())
            .await;
        assert_refused(&r, StatusCode::FORBIDDEN, "FORBIDDEN", "non-admin revoke");
        assert_eq!(s.digest().await, before);
    }
    let info = s
        .call(&s.ops, Method::GET, "/v1/locks/payout:1", None)
        .await;
    assert_eq!(info.status, StatusCode::OK, "{}", info.body);
    assert_eq!(info.body["state"], "HELD");
    assert_eq!(info.body["token"], 1);

    // bob cannot use alice's session: heartbeat, renew, release, acquire, close.
    let bob_calls = [
        (Method::POST, format!("/v1/sessions/{sid}/heartbeat"), None),
        (
            Method::POST,
            "/v1/locks/payout:1/renew".to_string(),
            Some(json!({"session_id": sid, "token": 1})),
        ),
        (
            Method::POST,
            "/v1/locks/payout:1/release".to_string(),
            Some(json!({"session_id": sid, "token": 1})),
        ),
        (
            Method::POST,
            "/v1/locks/payout:2/acquire".to_string(),
            Some(json!({"session_id": sid})),
        ),
        (Method::DELETE, format!("/v1/sessions/{sid}"), None),
    ];
    for (m, uri, body) in bob_calls {
        let r = s.call(&s.bob, m.clone(), &uri, body).await;
        assert_refused(
            &r,
            StatusCode::FORBIDDEN,
            "FORBIDDEN",
            &format!("bob {m} {uri}"),
        );
        assert_eq!(s.digest().await, before, "bob {m} {uri} changed state");
    }
    // alice's session is unharmed: her heartbeat works, the grant is HELD.
    let r = s
        .call(
            &s.alice,
            Method::POST,
            &format!("/v1/sessions/{sid}/heartbeat"),
            None,
        )
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    let info = s
        .call(&s.alice, Method::GET, "/v1/locks/payout:1", None)
        .await;
    assert_eq!(info.body["state"], "HELD", "{}", info.body);
    // The admin's revoke works.
    let r = s
        .call(&s.ops, Method::POST, "/v1/locks/payout:1/revoke", revoke)
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.body);
    assert_eq!(r.body["state"], "FREE");
    assert_eq!(r.body["revoked_token"], 1);
}

#[tokio::test]
async fn every_endpoint_without_a_token_or_with_a_wrong_one_is_401_and_changes_nothing() {
    let s = AuthServer::new().await;
    let sid = s.open(&s.alice, "alice").await;
    let token = s.grant(&s.alice, "payout:1", &sid).await;
    let before = s.digest().await;
    let wrong = [
        None,
        Some("Bearer fpt_0000000000000000000000000000000000000000000000000000000000000000"),
        Some("Bearer "),
        Some("Basic YWxpY2U6c2VjcmV0"),
        Some("bearer"),
        Some(s.alice.secret.as_str()), // the secret without the scheme
    ];
    let hash_only = format!("Bearer {}", s.alice.line.split_whitespace().nth(2).unwrap());
    for (m, uri, body) in every_endpoint(&sid, "payout:1", token) {
        for a in wrong.iter().copied().chain([Some(hash_only.as_str())]) {
            let r = s.call_with(a, m.clone(), &uri, body.clone()).await;
            assert_refused(
                &r,
                StatusCode::UNAUTHORIZED,
                "UNAUTHENTICATED",
                &format!("{m} {uri} with {a:?}"),
            );
        }
        assert_eq!(s.digest().await, before, "{m} {uri} changed state");
    }
    // The probes stay open.
    for probe in ["/healthz", "/readyz"] {
        let r = s.call_with(None, Method::GET, probe, None).await;
        assert_eq!(r.status, StatusCode::OK, "{probe}");
    }
}

#[tokio::test]
async fn roles_and_key_scopes_are_403_and_change_nothing() {
    let s = AuthServer::new().await;
    let alice = s.open(&s.alice, "alice").await;
    let bob = s.open(&s.bob, "bob").await;
    let refund = s.grant(&s.bob, "refund:1", &bob).await;
    s.grant(&s.alice, "payout:1", &alice).await;
    let before = s.digest().await;
    // alice (payout:) on refund:1 with her own session, and on L7.
    let out_of_scope = [
        (
            Method::POST,
            "/v1/locks/refund:1/acquire",
            Some(json!({"session_id": alice})),
        ),
        (
            Method::POST,
            "/v1/locks/refund:2/acquire",
            Some(json!({"session_id": alice})),
        ),
        (
            Method::POST,
            "/v1/locks/refund:1/renew",
            Some(json!({"session_id": alice, "token": refund})),
        ),
        (
            Method::POST,
            "/v1/locks/refund:1/release",
            Some(json!({"session_id": alice, "token": refund})),
        ),
        (Method::GET, "/v1/locks/refund:1", None),
        (Method::GET, "/v1/locks/payou", None),
    ];
    for (m, uri, body) in out_of_scope {
        let r = s.call(&s.alice, m.clone(), uri, body).await;
        assert_refused(
            &r,
            StatusCode::FORBIDDEN,
            "FORBIDDEN",
            &format!("alice {m} {uri}"),
        );
        assert!(
            r.body["message"].as_str().unwrap().contains("scope"),
            "{}",
            r.body
        );
        assert_eq!(s.digest().await, before, "alice {m} {uri} changed state");
    }
    // Clients may not read /metrics or /v1/config; monitor and admin may.
    for t in [&s.alice, &s.bob] {
        for uri in ["/metrics", "/v1/config"] {
            let r = s.call(t, Method::GET, uri, None).await;
            assert_refused(&r, StatusCode::FORBIDDEN, "FORBIDDEN", uri);
        }
    }
    for t in [&s.mon, &s.ops] {
        let r = s.call(t, Method::GET, "/v1/config", None).await;
        assert_eq!(r.status, StatusCode::OK);
        assert_eq!(r.body["auth"], "tokens");
        let r = s.call(t, Method::GET, "/metrics", None).await;
        assert_eq!(r.status, StatusCode::OK);
    }
    // A monitor may not open or use sessions, nor read a key.
    let mon_calls = [
        (
            Method::POST,
            "/v1/sessions".to_string(),
            Some(json!({"owner_id": "m"})),
        ),
        (
            Method::POST,
            format!("/v1/sessions/{alice}/heartbeat"),
            None,
        ),
        (Method::GET, "/v1/locks/payout:1".to_string(), None),
        (
            Method::POST,
            "/v1/locks/payout:1/acquire".to_string(),
            Some(json!({"session_id": alice})),
        ),
    ];
    for (m, uri, body) in mon_calls {
        let r = s.call(&s.mon, m.clone(), &uri, body).await;
        assert_refused(
            &r,
            StatusCode::FORBIDDEN,
            "FORBIDDEN",
            &format!("monitor {m} {uri}"),
        );
        assert_eq!(s.digest().await, before, "monitor {m} {uri} changed state");
    }
    // In scope all is well; the admin reads any key.
    let r = s
        .call(&s.alice, Method::GET, "/v1/locks/payout:1", None)
        .await;
    assert_eq!(r.status, StatusCode::OK);
    let r = s
        .call(&s.ops, Method::GET, "/v1/locks/refund:1", None)
        .await;
    assert_eq!(r.body["state"], "HELD");
}

#[tokio::test]
async fn a_foreign_and_an_unknown_session_id_get_the_same_403() {
    let s = AuthServer::new().await;
    let alice = s.open(&s.alice, "alice").await;
    let unknown = "0123456789abcdef0123456789abcdef";
    let before = s.digest().await;
    let mut answers = Vec::new();
    for id in [alice.as_str(), unknown] {
        let r = s
            .call(
                &s.bob,
                Method::POST,
                &format!("/v1/sessions/{id}/heartbeat"),
                None,
            )
            .await;
        assert_refused(&r, StatusCode::FORBIDDEN, "FORBIDDEN", id);
        let d = s
            .call(&s.bob, Method::DELETE, &format!("/v1/sessions/{id}"), None)
            .await;
        let a = s
            .call(
                &s.bob,
                Method::POST,
                "/v1/locks/k/acquire",
                Some(json!({"session_id": id})),
            )
            .await;
        answers.push([
            (r.status, r.body.to_string()),
            (d.status, d.body.to_string()),
            (a.status, a.body.to_string()),
        ]);
    }
    assert_eq!(
        answers[0], answers[1],
        "a foreign id answers as an unknown one"
    );
    assert!(
        answers[0][0].1.contains("not yours or does not exist"),
        "{:?}",
        answers[0]
    );
    assert_eq!(s.digest().await, before);
}

#[tokio::test]
async fn the_owner_of_an_expired_session_hears_410_and_anyone_else_403() {
    let s = AuthServer::new().await;
    let r = s
        .call(
            &s.alice,
            Method::POST,
            "/v1/sessions",
            Some(json!({"owner_id": "alice", "ttl_ms": 1_000})),
        )
        .await;
    let sid = r.body["session_id"].as_str().unwrap().to_string();
    s.srv.clock.advance(Duration::from_secs(10));
    s.srv.service.sweep().await;
    assert_eq!(s.srv.service.table_sizes().tombstones, 1);
    let hb = format!("/v1/sessions/{sid}/heartbeat");
    let r = s.call(&s.alice, Method::POST, &hb, None).await;
    assert_refused(&r, StatusCode::GONE, "SESSION_EXPIRED", "owner");
    let r = s.call(&s.bob, Method::POST, &hb, None).await;
    assert_refused(&r, StatusCode::FORBIDDEN, "FORBIDDEN", "other");
    let unknown = s
        .call(&s.bob, Method::POST, "/v1/sessions/feed/heartbeat", None)
        .await;
    assert_eq!(r.body, unknown.body);
}

#[tokio::test]
async fn an_admin_may_open_sessions_and_act_on_any_key() {
    let s = AuthServer::new().await;
    let sid = s.open(&s.ops, "ops").await;
    let t = s.grant(&s.ops, "anything:1", &sid).await;
    let r = s
        .call(
            &s.ops,
            Method::POST,
            "/v1/locks/anything:1/release",
            Some(json!({"session_id": sid, "token": t})),
        )
        .await;
    assert_eq!(r.status, StatusCode::NO_CONTENT, "{}", r.body);
    // Even an admin may not use another principal's session.
    let alice = s.open(&s.alice, "alice").await;
    let before = s.digest().await;
    let r = s
        .call(
            &s.ops,
            Method::POST,
            &format!("/v1/sessions/{alice}/heartbeat"),
            None,
        )
        .await;
    assert_refused(
        &r,
        StatusCode::FORBIDDEN,
        "FORBIDDEN",
        "admin on alice's session",
    );
    assert_eq!(s.digest().await, before);
}

#[tokio::test]
async fn with_auth_off_config_says_none_and_nothing_is_asked() {
    let s = TestServer::memory().await;
    let (st, body) = s.call(Method::GET, "/v1/config", None).await;
    assert_eq!(st, StatusCode::OK);
    assert_eq!(body["auth"], "none");
    let sid = s.open_session("w", 10_000).await;
    let (st, _) = s.acquire("payout:1", &sid, 10_000).await;
    assert_eq!(st, StatusCode::OK);
    let (st, body) = s
        .call(
            Method::POST,
            "/v1/locks/payout:1/revoke",
            Some(json!({"reason": "ops"})),
        )
        .await;
    assert_eq!(st, StatusCode::OK, "{body}");
}
