//! The HTTP layer: C2's routes (R1–R7), `/healthz` and `/metrics`, and the
//! request-body reader that enforces the 64 KiB limit and turns every parse
//! failure into a C2 `{"code","message"}` error instead of axum's plain text.
//!
//! Handlers only translate: path and body in, a call into [`AppState`], JSON
//! out. Every decision lives in [`crate::state`] and [`crate::ledger`].
//!
//! With API tokens ([`app_with_auth`]) every write (any method but
//! GET and HEAD) first needs a client or admin bearer token: 401 without a
//! known one, 403 for a monitor token, before its body is read. Reads stay
//! open: the ledger holds no secret, and the bench and the experiments read
//! it (R5, R6, `/metrics`) to check their runs.

use std::sync::Arc;

use axum::body::{Body, HttpBody};
use axum::extract::rejection::PathRejection;
use axum::extract::{FromRequest, FromRequestParts, Path, Request, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use fencepost_api::auth::{Role, TokenFile};
use fencepost_api::lock::MAX_BODY_BYTES;
use fencepost_api::rail::{
    BulkCreateRequest, CreatePayoutRequest, TokenRequest, validate_payout_id,
};
use serde::de::DeserializeOwned;

use crate::error::RailError;
use crate::metrics;
use crate::state::AppState;

/// The router over `state`: every C2 route, with JSON errors for unknown paths
/// and wrong methods too. Writes are open: [`app_with_auth`] without tokens.
pub fn app(state: Arc<AppState>) -> Router {
    app_with_auth(state, None)
}

/// [`app`], with every write checked against `auth`'s tokens when given.
pub fn app_with_auth(state: Arc<AppState>, auth: Option<Arc<TokenFile>>) -> Router {
    Router::new()
        .route("/healthz", get(healthz))
        .route("/metrics", get(metrics_text))
        .route("/v1/payouts", post(create_payout))
        .route("/v1/payouts/bulk", post(bulk_create))
        .route("/v1/payouts/{id}", get(get_payout))
        .route("/v1/payouts/{id}/claim", post(claim))
        .route("/v1/payouts/{id}/submit", post(submit))
        .route("/v1/payouts/{id}/release", post(release))
        .route("/v1/ledger", get(ledger))
        .fallback(|uri: Uri| async move { RailError::NotFound(uri.path().to_string()) })
        .method_not_allowed_fallback(|| async { RailError::MethodNotAllowed })
        .layer(axum::middleware::from_fn_with_state(auth, authorize_writes))
        .with_state(state)
}

/// With tokens, a write (any method but GET and HEAD) passes only with a
/// client or admin bearer token; reads pass as they are.
async fn authorize_writes(
    State(auth): State<Option<Arc<TokenFile>>>,
    req: Request,
    next: axum::middleware::Next,
) -> Response {
    if let Some(auth) = &auth
        && !matches!(*req.method(), Method::GET | Method::HEAD)
    {
        let header = req
            .headers()
            .get(header::AUTHORIZATION)
            .map(|v| v.as_bytes());
        match auth.authenticate(header) {
            None => return RailError::Unauthenticated.into_response(),
            Some(p) if p.role == Role::Monitor => {
                return RailError::Forbidden(p.role.as_str()).into_response();
            }
            Some(_) => {}
        }
    }
    next.run(req).await
}

/// Reads the body (at most [`MAX_BODY_BYTES`]) and parses it as `T`.
/// `example` shows the expected shape in the error message.
async fn read_json<T: DeserializeOwned>(
    headers: &HeaderMap,
    body: Body,
    example: &str,
) -> Result<T, RailError> {
    // A declared length over the limit is refused before reading anything.
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_BODY_BYTES as u64) {
        return Err(RailError::PayloadTooLarge);
    }
    // Read frame by frame and stop at the limit, so a chunked body without a
    // declared length cannot make us buffer more than 64 KiB either.
    let mut body = std::pin::pin!(body);
    let mut buf = Vec::new();
    while let Some(frame) = std::future::poll_fn(|cx| body.as_mut().poll_frame(cx)).await {
        let frame = frame
            .map_err(|e| RailError::BadRequest(format!("could not read the request body: {e}")))?;
        if let Ok(data) = frame.into_data() {
            if buf.len() + data.len() > MAX_BODY_BYTES {
                return Err(RailError::PayloadTooLarge);
            }
            buf.extend_from_slice(&data);
        }
    }
    // serde's "EOF while parsing" is a poor message for an empty body.
    if buf.iter().all(u8::is_ascii_whitespace) {
        return Err(RailError::BadRequest(format!(
            "the request body is empty; expected JSON such as {example}"
        )));
    }
    serde_json::from_slice(&buf).map_err(|e| {
        RailError::BadRequest(format!(
            "the request body is not valid: {e}; expected JSON such as {example}"
        ))
    })
}

/// The payout id from the path, checked.
fn payout_id(path: Result<Path<String>, PathRejection>) -> Result<String, RailError> {
    let Path(id) =
        path.map_err(|e| RailError::BadRequest(format!("bad payout id in the path: {e}")))?;
    validate_payout_id(&id).map_err(|e| RailError::BadRequest(e.to_string()))?;
    Ok(id)
}

/// Example body of R2/R3/R4.
const TOKEN_EXAMPLE: &str = r#"{"token": 7}"#;

/// `GET /healthz`: the process is up; shows the seed, the latency and where
/// the ledger lives (`durable: false` for `memory`, which forgets on restart).
async fn healthz(State(state): State<Arc<AppState>>) -> Response {
    let config = state.config();
    Json(serde_json::json!({
        "status": "ok",
        "seed": config.seed,
        "latency": config.latency.to_string(),
        "ledger": config.ledger.to_string(),
        "durable": config.ledger.is_durable(),
        "sabotage": config.sabotage.map(|s| s.as_str()),
        "fences": config.fences.as_str(),
    }))
    .into_response()
}

/// `GET /metrics`: Prometheus text.
async fn metrics_text(State(state): State<Arc<AppState>>) -> Response {
    (
        [(header::CONTENT_TYPE, metrics::CONTENT_TYPE)],
        metrics::render(&state),
    )
        .into_response()
}

/// R1 `POST /v1/payouts`: 201 new, 200 same body again, 409 CONFLICT.
async fn create_payout(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, RailError> {
    let req: CreatePayoutRequest = read_json(
        &headers,
        body,
        r#"{"payout_id": "p-1", "amount_minor": 1250, "currency": "EUR"}"#,
    )
    .await?;
    // 201 only the first time: a retried R1 (same body) is a 200 with the same payout.
    let (created, view) = state.create(req)?;
    let status = if created {
        StatusCode::CREATED
    } else {
        StatusCode::OK
    };
    Ok((status, Json(view)).into_response())
}

/// R7 `POST /v1/payouts/bulk`: 201 `{"created", ...}`.
async fn bulk_create(
    State(state): State<Arc<AppState>>,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, RailError> {
    let req: BulkCreateRequest =
        read_json(&headers, body, r#"{"count": 1000, "prefix": "p"}"#).await?;
    // Creating up to a million rows (and writing them to SQLite) is blocking work.
    let created = tokio::task::spawn_blocking(move || state.bulk_create(req.count, req.prefix))
        .await
        .map_err(RailError::from_join)??;
    Ok((StatusCode::CREATED, Json(created)).into_response())
}

/// R5 `GET /v1/payouts/{id}`.
async fn get_payout(
    State(state): State<Arc<AppState>>,
    path: Result<Path<String>, PathRejection>,
) -> Result<Response, RailError> {
    let id = payout_id(path)?;
    let view = state.payout(&id).ok_or(RailError::PayoutUnknown(id))?;
    Ok(Json(view).into_response())
}

/// A fenced route's payout id (checked first: a bad id is refused before the
/// body is read) and the token its body carries (R2, R3, R4).
struct TokenCall {
    id: String,
    token: u64,
}

impl<S: Send + Sync> FromRequest<S> for TokenCall {
    type Rejection = RailError;

    async fn from_request(req: Request, state: &S) -> Result<Self, RailError> {
        let (mut parts, body) = req.into_parts();
        let id = payout_id(Path::<String>::from_request_parts(&mut parts, state).await)?;
        let req: TokenRequest = read_json(&parts.headers, body, TOKEN_EXAMPLE).await?;
        Ok(TokenCall {
            id,
            token: req.token,
        })
    }
}

/// R2 `POST /v1/payouts/{id}/claim` (fence 1).
async fn claim(
    State(state): State<Arc<AppState>>,
    TokenCall { id, token }: TokenCall,
) -> Result<Response, RailError> {
    Ok(Json(state.claim(&id, token)?).into_response())
}

/// R3 `POST /v1/payouts/{id}/submit` (fence 2, after the simulated latency).
async fn submit(
    State(state): State<Arc<AppState>>,
    TokenCall { id, token }: TokenCall,
) -> Result<Response, RailError> {
    Ok(Json(state.submit(&id, token).await?).into_response())
}

/// R4 `POST /v1/payouts/{id}/release` (fence 1).
async fn release(
    State(state): State<Arc<AppState>>,
    TokenCall { id, token }: TokenCall,
) -> Result<Response, RailError> {
    Ok(Json(state.release(&id, token)?).into_response())
}

/// R6 `GET /v1/ledger`: every payout plus the counters.
async fn ledger(State(state): State<Arc<AppState>>) -> Response {
    // Copying a large ledger out of the mutex is synchronous work; serialising
    // it happens after the mutex is released.
    Json(state.ledger_view()).into_response()
}
