//! A scriptable in-test lock-server (axum on 127.0.0.1:0): each endpoint
//! answers from a queue of scripted replies (status, code, delay), else a
//! default; every request's arrival time is recorded on the test's clock.
//! An optional gate holds an endpoint's reply until the test releases it.
//! Acquire grants at arrival, and a session that already holds the key gets
//! its token back (C1 §7).

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use fencepost_sdk::{Clock, MonoTime};
use serde_json::{Value, json};
use tokio::sync::Notify;

/// The C1 endpoints the mock serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Ep {
    Create,
    Heartbeat,
    Delete,
    Acquire,
    Renew,
    Release,
    Info,
}

/// One scripted reply.
#[derive(Clone, Debug)]
pub struct Scripted {
    pub status: u16,
    pub code: Option<&'static str>,
    pub retry_after_ms: Option<u64>,
    pub delay: Duration,
    /// Drop the connection without any reply (a transport error).
    pub hang_up: bool,
}

impl Scripted {
    pub fn ok() -> Self {
        Scripted {
            status: 200,
            code: None,
            retry_after_ms: None,
            delay: Duration::ZERO,
            hang_up: false,
        }
    }
    /// The connection is dropped with no reply: the client sees a transport error.
    pub fn hang_up() -> Self {
        Scripted {
            hang_up: true,
            ..Self::ok()
        }
    }
    pub fn ok_after(delay: Duration) -> Self {
        Scripted {
            delay,
            ..Self::ok()
        }
    }
    pub fn err(status: u16, code: &'static str) -> Self {
        Scripted {
            status,
            code: Some(code),
            ..Self::ok()
        }
    }
    pub fn held(retry_after_ms: Option<u64>) -> Self {
        Scripted {
            retry_after_ms,
            ..Self::err(409, "LOCK_HELD")
        }
    }
}

/// Holds an endpoint's reply: `arrived` is notified when the request is in,
/// the reply goes out once `release` is notified.
#[derive(Clone, Default)]
pub struct Gate {
    pub arrived: Arc<Notify>,
    pub release: Arc<Notify>,
}

pub struct MockState {
    clock: Arc<dyn Clock>,
    /// The server's TTL clamp, ms.
    pub ttl_min_ms: u64,
    pub ttl_max_ms: u64,
    scripts: Mutex<HashMap<Ep, VecDeque<Scripted>>>,
    defaults: Mutex<HashMap<Ep, Scripted>>,
    gates: Mutex<HashMap<Ep, Gate>>,
    arrivals: Mutex<Vec<(Ep, MonoTime)>>,
    sessions: Mutex<HashMap<String, u64>>,
    tokens: Mutex<HashMap<String, u64>>,
    /// key → (holding session, its token), for the holder's re-acquire.
    holders: Mutex<HashMap<String, (String, u64)>>,
    next_session: AtomicU64,
    /// Every request's `Authorization` header (None when absent), in order.
    authorizations: Mutex<Vec<Option<String>>>,
}

pub struct Mock {
    pub url: String,
    pub state: Arc<MockState>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Mock {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Mock {
    /// Starts the mock; `clock` timestamps arrivals.
    pub async fn start(clock: Arc<dyn Clock>) -> Mock {
        let state = Arc::new(MockState {
            clock,
            ttl_min_ms: 100,
            ttl_max_ms: 10_000,
            scripts: Mutex::default(),
            defaults: Mutex::default(),
            gates: Mutex::default(),
            arrivals: Mutex::default(),
            sessions: Mutex::default(),
            tokens: Mutex::default(),
            holders: Mutex::default(),
            next_session: AtomicU64::new(1),
            authorizations: Mutex::default(),
        });
        let app = Router::new()
            .route("/v1/sessions", post(create))
            .route("/v1/sessions/{id}/heartbeat", post(heartbeat))
            .route("/v1/sessions/{id}", delete(delete_session))
            .route("/v1/locks/{key}/acquire", post(acquire))
            .route("/v1/locks/{key}/renew", post(renew))
            .route("/v1/locks/{key}/release", post(release))
            .route("/v1/locks/{key}", get(info))
            .layer(axum::middleware::from_fn_with_state(
                state.clone(),
                record_authorization,
            ))
            .with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Mock { url, state, task }
    }

    /// Queues replies for `ep`, answered in order before the default.
    pub fn script(&self, ep: Ep, replies: impl IntoIterator<Item = Scripted>) {
        self.state
            .scripts
            .lock()
            .unwrap()
            .entry(ep)
            .or_default()
            .extend(replies);
    }

    /// The reply `ep` gives once its script is empty (else plain success).
    pub fn set_default(&self, ep: Ep, reply: Scripted) {
        self.state.defaults.lock().unwrap().insert(ep, reply);
    }

    /// Gates `ep`'s replies.
    pub fn gate(&self, ep: Ep) -> Gate {
        let g = Gate::default();
        self.state.gates.lock().unwrap().insert(ep, g.clone());
        g
    }

    /// Every request's `Authorization` header so far (None when absent).
    pub fn authorizations(&self) -> Vec<Option<String>> {
        self.state.authorizations.lock().unwrap().clone()
    }

    /// How many requests `ep` received.
    pub fn count(&self, ep: Ep) -> usize {
        self.arrivals(ep).len()
    }

    /// Arrival times of `ep`'s requests, in order.
    pub fn arrivals(&self, ep: Ep) -> Vec<MonoTime> {
        self.state
            .arrivals
            .lock()
            .unwrap()
            .iter()
            .filter(|(e, _)| *e == ep)
            .map(|(_, t)| *t)
            .collect()
    }
}

/// Records the request's `Authorization` header.
async fn record_authorization(
    State(s): State<Arc<MockState>>,
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let value = req
        .headers()
        .get(axum::http::header::AUTHORIZATION)
        .map(|v| String::from_utf8_lossy(v.as_bytes()).into_owned());
    s.authorizations.lock().unwrap().push(value);
    next.run(req).await
}

impl MockState {
    fn clamp(&self, ttl: Option<u64>) -> u64 {
        ttl.unwrap_or(1_000).clamp(self.ttl_min_ms, self.ttl_max_ms)
    }

    /// Records the arrival, waits for the gate and the delay, and returns the
    /// scripted reply (`None` means: answer with success).
    async fn enter(&self, ep: Ep) -> Option<Response> {
        let reply = self.arrive(ep);
        self.respond(ep, reply).await
    }

    /// Records the arrival and picks the scripted reply.
    fn arrive(&self, ep: Ep) -> Scripted {
        self.arrivals.lock().unwrap().push((ep, self.clock.now()));
        self.scripts
            .lock()
            .unwrap()
            .get_mut(&ep)
            .and_then(VecDeque::pop_front)
            .or_else(|| self.defaults.lock().unwrap().get(&ep).cloned())
            .unwrap_or_else(Scripted::ok)
    }

    /// Waits for the gate and the delay; the error response, if scripted.
    async fn respond(&self, ep: Ep, reply: Scripted) -> Option<Response> {
        let gate = self.gates.lock().unwrap().get(&ep).cloned();
        if let Some(g) = gate {
            g.arrived.notify_one();
            g.release.notified().await;
        }
        if !reply.delay.is_zero() {
            tokio::time::sleep(reply.delay).await;
        }
        if reply.hang_up {
            // Unwinding out of the handler ends hyper's connection task: the
            // socket closes with no response. resume_unwind skips the panic
            // hook, so the test output stays quiet.
            std::panic::resume_unwind(Box::new("scripted hang-up"));
        }
        let code = reply.code?;
        let mut body = json!({"code": code, "message": format!("scripted {code}")});
        if let Some(ms) = reply.retry_after_ms {
            body["retry_after_ms"] = json!(ms);
        }
        let status = StatusCode::from_u16(reply.status).unwrap();
        Some((status, Json(body)).into_response())
    }
}

type St = State<Arc<MockState>>;

async fn create(State(s): St, Json(b): Json<Value>) -> Response {
    if let Some(r) = s.enter(Ep::Create).await {
        return r;
    }
    let ttl = s.clamp(b["ttl_ms"].as_u64());
    let id = format!("s{}", s.next_session.fetch_add(1, Ordering::Relaxed));
    s.sessions.lock().unwrap().insert(id.clone(), ttl);
    (
        StatusCode::CREATED,
        Json(json!({"session_id": id, "ttl_ms": ttl, "expires_at": "2026-01-01T00:00:00Z"})),
    )
        .into_response()
}

async fn heartbeat(State(s): St, Path(id): Path<String>) -> Response {
    if let Some(r) = s.enter(Ep::Heartbeat).await {
        return r;
    }
    let ttl = s
        .sessions
        .lock()
        .unwrap()
        .get(&id)
        .copied()
        .unwrap_or(1_000);
    Json(json!({"ttl_ms": ttl, "expires_at": "2026-01-01T00:00:00Z"})).into_response()
}

async fn delete_session(State(s): St, Path(_id): Path<String>) -> Response {
    if let Some(r) = s.enter(Ep::Delete).await {
        return r;
    }
    StatusCode::NO_CONTENT.into_response()
}

/// Grants at arrival (before any scripted delay, so a reply the client gives
/// up on still leaves the grant, as a real server would). C1 §7: the session
/// that holds the key gets its current token back.
async fn acquire(State(s): St, Path(key): Path<String>, Json(b): Json<Value>) -> Response {
    let reply = s.arrive(Ep::Acquire);
    let session = b["session_id"].as_str().unwrap_or_default().to_string();
    let token = reply.code.is_none().then(|| {
        let mut holders = s.holders.lock().unwrap();
        match holders.get(&key) {
            Some((holder, token)) if *holder == session => *token,
            _ => {
                let mut t = s.tokens.lock().unwrap();
                let e = t.entry(key.clone()).or_insert(0);
                *e += 1;
                holders.insert(key.clone(), (session, *e));
                *e
            }
        }
    });
    if let Some(r) = s.respond(Ep::Acquire, reply).await {
        return r;
    }
    let lease = s.clamp(b["ttl_ms"].as_u64());
    Json(json!({"key": key, "token": token, "lease_ms": lease, "expires_at": "x"})).into_response()
}

async fn renew(State(s): St, Path(key): Path<String>, Json(b): Json<Value>) -> Response {
    if let Some(r) = s.enter(Ep::Renew).await {
        return r;
    }
    let lease = s.clamp(b["ttl_ms"].as_u64());
    let token = b["token"].as_u64().unwrap();
    Json(json!({"key": key, "token": token, "lease_ms": lease, "expires_at": "x"})).into_response()
}

async fn release(State(s): St, Path(key): Path<String>) -> Response {
    if let Some(r) = s.enter(Ep::Release).await {
        return r;
    }
    s.holders.lock().unwrap().remove(&key);
    StatusCode::NO_CONTENT.into_response()
}

async fn info(State(s): St, Path(key): Path<String>) -> Response {
    if let Some(r) = s.enter(Ep::Info).await {
        return r;
    }
    let token = s.tokens.lock().unwrap().get(&key).copied().unwrap_or(0);
    Json(json!({"key": key, "state": "HELD", "token": token, "remaining_ms": 500})).into_response()
}
