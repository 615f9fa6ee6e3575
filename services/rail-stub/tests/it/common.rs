//! Test helpers: a rail-stub in-process on a fake clock, and one-line request
//! helpers that return the status and the parsed JSON.

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::http::{Request, StatusCode};
use fencepost_api::clock::{FakeClock, MonoTime};
use fencepost_api::rail::LedgerView;
use http_body_util::BodyExt;
use rail_stub::{AppState, Config};
use serde_json::{Value, json};
use tower::ServiceExt;

/// A rail-stub driven in-process.
pub struct Rail {
    pub router: Router,
    pub state: Arc<AppState>,
    pub clock: FakeClock,
}

impl Rail {
    /// In memory, with `latency` (e.g. `fixed:0ms`) and seed 1.
    pub fn new(latency: &str) -> Rail {
        Rail::with_config(Config {
            latency: latency.parse().unwrap(),
            seed: 1,
            ..Config::default()
        })
    }

    /// With any configuration, on a fake clock starting at 1 s.
    pub fn with_config(config: Config) -> Rail {
        let clock = FakeClock::new(MonoTime::from_nanos(1_000_000_000));
        let state = AppState::open(config, Arc::new(clock.clone())).unwrap();
        Rail {
            router: rail_stub::app(Arc::clone(&state)),
            state,
            clock,
        }
    }

    /// Sends a raw body; returns the status and the body text.
    pub async fn raw(
        &self,
        method: &str,
        path: &str,
        body: impl Into<Body>,
    ) -> (StatusCode, String) {
        let req = Request::builder()
            .method(method)
            .uri(path)
            .header("content-type", "application/json")
            .body(body.into())
            .unwrap();
        let resp = self.router.clone().oneshot(req).await.unwrap();
        let status = resp.status();
        let bytes = resp.into_body().collect().await.unwrap().to_bytes();
        (status, String::from_utf8(bytes.to_vec()).unwrap())
    }

    /// Sends JSON (or nothing for GET); returns the status and the parsed reply.
    pub async fn call(&self, method: &str, path: &str, body: Option<Value>) -> (StatusCode, Value) {
        let body = body.map_or_else(Body::empty, |b| Body::from(b.to_string()));
        let (status, text) = self.raw(method, path, body).await;
        let value = serde_json::from_str(&text).unwrap_or(Value::String(text));
        (status, value)
    }

    /// R1 with amount 100 EUR; asserts success.
    pub async fn create(&self, id: &str) {
        let (s, v) = self
            .call(
                "POST",
                "/v1/payouts",
                Some(json!({"payout_id": id, "amount_minor": 100, "currency": "EUR"})),
            )
            .await;
        assert!(s == StatusCode::CREATED || s == StatusCode::OK, "{s} {v}");
    }

    /// R2/R3/R4 by name (`claim`, `submit`, `release`).
    pub async fn fenced(&self, action: &str, id: &str, token: u64) -> (StatusCode, Value) {
        self.call(
            "POST",
            &format!("/v1/payouts/{id}/{action}"),
            Some(json!({"token": token})),
        )
        .await
    }

    /// R5.
    pub async fn payout(&self, id: &str) -> Value {
        let (s, v) = self.call("GET", &format!("/v1/payouts/{id}"), None).await;
        assert_eq!(s, StatusCode::OK, "{v}");
        v
    }

    /// R6, typed.
    pub async fn ledger(&self) -> LedgerView {
        let (s, v) = self.call("GET", "/v1/ledger", None).await;
        assert_eq!(s, StatusCode::OK, "{v}");
        serde_json::from_value(v).unwrap()
    }

    /// `/metrics` text.
    pub async fn metrics(&self) -> String {
        let (s, text) = self.raw("GET", "/metrics", Body::empty()).await;
        assert_eq!(s, StatusCode::OK);
        text
    }
}

/// Asserts a C2 error reply: the status, the code, and a non-empty message.
#[track_caller]
pub fn assert_error(got: &(StatusCode, Value), status: u16, code: &str) {
    let (s, v) = got;
    assert_eq!(s.as_u16(), status, "{v}");
    assert_eq!(v["code"], code, "{v}");
    assert!(v["message"].as_str().is_some_and(|m| !m.is_empty()), "{v}");
}

/// Polls `cond` every 10 ms until it holds or `deadline` passes.
pub async fn wait_until(deadline: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let give_up = tokio::time::Instant::now() + deadline;
    while tokio::time::Instant::now() < give_up {
        if cond() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    cond()
}

/// A fresh path under the system temp dir, unique to this test and process.
pub fn temp_path(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("rail-stub-it-{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}
