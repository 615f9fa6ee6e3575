//! API tokens on the rail-stub's writes: without a token a write
//! is 401 (with `WWW-Authenticate: Bearer`) and changes nothing; a monitor
//! token is 403; a client or admin token writes; reads stay open.

use std::sync::Arc;

use axum::body::Body;
use axum::http::{Request, StatusCode, header};
use fencepost_api::auth::{IssuedToken, Role, TokenFile, issue_token};
use http_body_util::BodyExt;
use serde_json::{Value, json};
use tower::ServiceExt;

use crate::common::Rail;

struct Authed {
    rail: Rail,
    client: IssuedToken,
    admin: IssuedToken,
    monitor: IssuedToken,
}

fn authed() -> Authed {
    let mut rail = Rail::new("fixed:0ms");
    let client = issue_token("worker", Role::Client, Some("payout:")).unwrap();
    let admin = issue_token("ops", Role::Admin, None).unwrap();
    let monitor = issue_token("prom", Role::Monitor, None).unwrap();
    let dir = std::env::temp_dir().join(format!(
        "fp-rail-auth-{}-{}",
        std::process::id(),
        rand::random::<u64>()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("tokens");
    std::fs::write(
        &path,
        format!("{}\n{}\n{}\n", client.line, admin.line, monitor.line),
    )
    .unwrap();
    let auth = Arc::new(TokenFile::load(&path).unwrap());
    rail.router = rail_stub::app_with_auth(rail.state.clone(), Some(auth));
    Authed {
        rail,
        client,
        admin,
        monitor,
    }
}

/// One call with `authorization` (none when `None`): status, headers' challenge, JSON.
async fn call(
    rail: &Rail,
    authorization: Option<&str>,
    method: &str,
    path: &str,
    body: Option<Value>,
) -> (StatusCode, Option<String>, Value) {
    let mut req = Request::builder()
        .method(method)
        .uri(path)
        .header(header::CONTENT_TYPE, "application/json");
    if let Some(a) = authorization {
        req = req.header(header::AUTHORIZATION, a);
    }
    let body = body.map_or_else(Body::empty, |b| Body::from(b.to_string()));
    let resp = rail
        .router
        .clone()
        .oneshot(req.body(body).unwrap())
        .await
        .unwrap();
    let status = resp.status();
    let challenge = resp
        .headers()
        .get(header::WWW_AUTHENTICATE)
        .map(|v| v.to_str().unwrap().to_string());
    let bytes = resp.into_body().collect().await.unwrap().to_bytes();
    (
        status,
        challenge,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

fn bearer(t: &IssuedToken) -> String {
    format!("Bearer {}", t.secret)
}

/// Every write of C2, on payout `p1`.
fn writes() -> Vec<(&'static str, &'static str, Value)> {
    vec![
        (
            "POST",
            "/v1/payouts",
            json!({"payout_id": "p2", "amount_minor": 5, "currency": "EUR"}),
        ),
        (
            "POST",
            "/v1/payouts/bulk",
            json!({"count": 3, "prefix": "b"}),
        ),
        ("POST", "/v1/payouts/p1/claim", json!({"token": 1})),
        ("POST", "/v1/payouts/p1/submit", json!({"token": 1})),
        ("POST", "/v1/payouts/p1/release", json!({"token": 1})),
    ]
}

async fn ledger(rail: &Rail) -> Value {
    let (st, _, v) = call(rail, None, "GET", "/v1/ledger", None).await;
    assert_eq!(st, StatusCode::OK, "reads stay open: {v}");
    v
}

#[tokio::test]
async fn writes_without_a_known_token_are_401_and_change_nothing() {
    let a = authed();
    let (st, _, _) = call(
        &a.rail,
        Some(&bearer(&a.client)),
        "POST",
        "/v1/payouts",
        Some(json!({"payout_id": "p1", "amount_minor": 100, "currency": "EUR"})),
    )
    .await;
    assert_eq!(st, StatusCode::CREATED);
    let before = ledger(&a.rail).await;
    let wrong = format!("Bearer {}x", a.client.secret);
    let basic = format!("Basic {}", a.client.secret);
    for (m, path, body) in writes() {
        for auth in [
            None,
            Some(wrong.as_str()),
            Some(basic.as_str()),
            Some("Bearer "),
        ] {
            let (st, challenge, v) = call(&a.rail, auth, m, path, Some(body.clone())).await;
            assert_eq!(st, StatusCode::UNAUTHORIZED, "{m} {path} {auth:?}: {v}");
            assert_eq!(v["code"], "UNAUTHENTICATED", "{v}");
            assert!(v["message"].as_str().is_some_and(|s| !s.is_empty()));
            assert_eq!(challenge.as_deref(), Some("Bearer"));
            assert_eq!(
                ledger(&a.rail).await,
                before,
                "{m} {path} changed the ledger"
            );
        }
        let (st, challenge, v) =
            call(&a.rail, Some(&bearer(&a.monitor)), m, path, Some(body)).await;
        assert_eq!(st, StatusCode::FORBIDDEN, "{m} {path}: {v}");
        assert_eq!(v["code"], "FORBIDDEN", "{v}");
        assert_eq!(challenge, None);
        assert_eq!(
            ledger(&a.rail).await,
            before,
            "{m} {path} changed the ledger"
        );
    }
    // Reads need nothing.
    for path in ["/v1/payouts/p1", "/v1/ledger", "/metrics", "/healthz"] {
        let (st, _, _) = call(&a.rail, None, "GET", path, None).await;
        assert_eq!(st, StatusCode::OK, "{path}");
    }
}

#[tokio::test]
async fn a_client_or_admin_token_writes() {
    let a = authed();
    for (t, id) in [(&a.client, "p1"), (&a.admin, "p9")] {
        let auth = bearer(t);
        let (st, _, v) = call(
            &a.rail,
            Some(&auth),
            "POST",
            "/v1/payouts",
            Some(json!({"payout_id": id, "amount_minor": 100, "currency": "EUR"})),
        )
        .await;
        assert_eq!(st, StatusCode::CREATED, "{v}");
        for step in ["claim", "submit"] {
            let (st, _, v) = call(
                &a.rail,
                Some(&auth),
                "POST",
                &format!("/v1/payouts/{id}/{step}"),
                Some(json!({"token": 1})),
            )
            .await;
            assert!(st.is_success(), "{step}: {st} {v}");
        }
    }
    let l = ledger(&a.rail).await;
    assert_eq!(l["counters"]["paid"], 2, "{l}");
    for p in l["payouts"].as_array().unwrap() {
        assert_eq!(p["state"], "PAID", "{p}");
    }
}

#[tokio::test]
async fn without_tokens_writes_stay_open() {
    let rail = Rail::new("fixed:0ms");
    let (st, _, v) = call(
        &rail,
        None,
        "POST",
        "/v1/payouts",
        Some(json!({"payout_id": "p1", "amount_minor": 100, "currency": "EUR"})),
    )
    .await;
    assert_eq!(st, StatusCode::CREATED, "{v}");
}
