//! The C1 HTTP surface. Handlers read and validate the request, call the
//! [`LockService`], and map every outcome to a C1 reply in one place
//! ([`ApiError`]'s `IntoResponse`). Client mistakes are 4xx with a JSON body
//! `{"code","message"}`; only the store's failure is a 5xx, and it changes nothing.
//!
//! **API tokens.** With `--auth-tokens`, every request but the
//! probes (`/healthz`, `/readyz`) first passes [`authenticate`]: a request
//! without a known bearer token is `401 UNAUTHENTICATED` (with
//! `WWW-Authenticate: Bearer`) before anything else is read. With auth off
//! that layer is not installed (it would only mark every request open) and
//! every request passes, as before. Each handler then checks what the
//! principal may do — its role, its key scope — before it calls the service
//! (`403 FORBIDDEN`, nothing changed), and the service checks the session
//! binding under the same hold of the table as the operation.

use std::sync::Arc;
use std::time::Instant;

use axum::body::{Body, HttpBody};
use axum::extract::rejection::PathRejection;
use axum::extract::{FromRef, FromRequest, FromRequestParts, Path, Request, State};
use axum::http::request::Parts;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::{Json, Router};
use serde::de::DeserializeOwned;

use fencepost_api::clock::wall_clock_rfc3339_after;
use fencepost_api::lock::{
    AcquireRequest, CreateSessionRequest, ErrorBody, HeartbeatReply, LockErrorCode, MAX_BODY_BYTES,
    MAX_REASON_CHARS, ReleaseRequest, RenewRequest, RevokeRequest, validate_key, validate_owner,
};

use crate::auth::{Authenticator, RequestAuth};
use crate::service::{LockService, METRICS_CONTENT_TYPE, ServiceError};

/// An error reply.
#[derive(Debug)]
pub struct ApiError {
    status: StatusCode,
    body: ErrorBody,
}

impl ApiError {
    /// A reply with a C1 code.
    pub fn new(code: LockErrorCode, message: impl Into<String>) -> Self {
        ApiError {
            status: StatusCode::from_u16(code.status()).expect("valid status"),
            body: ErrorBody {
                code: code.as_str().to_string(),
                message: message.into(),
                retry_after_ms: None,
                leader: None,
            },
        }
    }

    fn bad(message: impl Into<String>) -> Self {
        Self::new(LockErrorCode::BadRequest, message)
    }

    /// `403 FORBIDDEN` for `why`, if there is a why.
    fn forbid(why: Option<String>) -> ApiResult<()> {
        match why {
            Some(message) => Err(Self::new(LockErrorCode::Forbidden, message)),
            None => Ok(()),
        }
    }
}

impl From<ServiceError> for ApiError {
    fn from(e: ServiceError) -> Self {
        match e {
            ServiceError::Refused(c) => {
                let mut err = ApiError::new(c.code, c.message);
                err.body.retry_after_ms = c.retry_after_ms;
                err
            }
            ServiceError::NotLeader { leader } => {
                let mut err = ApiError::new(
                    LockErrorCode::NotLeader,
                    match &leader {
                        Some(url) => format!("this replica does not serve; the leader is {url}"),
                        None => "this replica does not serve and knows no live leader yet; retry another replica or shortly".to_string(),
                    },
                );
                err.body.leader = leader;
                err
            }
            ServiceError::Store(s) => {
                tracing::error!(error = %s, "store failure");
                ApiError::new(
                    LockErrorCode::Unavailable,
                    "the lock store is unavailable; nothing was changed, retry later",
                )
            }
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let challenge = self.status == StatusCode::UNAUTHORIZED;
        let mut response = (self.status, Json(self.body)).into_response();
        if challenge {
            // RFC 6750: a 401 names the scheme it wants.
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
        }
        response
    }
}

type ApiResult<T> = Result<T, ApiError>;

/// The router for one lock-server with auth off (any client that reaches
/// the port may do anything): [`app_with_auth`] without tokens.
pub fn app(service: Arc<LockService>) -> Router {
    app_with_auth(service, None)
}

/// The handlers' state: the service, and whether [`authenticate`] runs in
/// front of them (so [`Who`] can tell auth off from a request that skipped
/// the layer, and fail closed on the latter).
#[derive(Clone)]
struct AppState {
    service: Arc<LockService>,
    auth_on: bool,
}

impl FromRef<AppState> for Arc<LockService> {
    fn from_ref(state: &AppState) -> Self {
        Arc::clone(&state.service)
    }
}

/// What the request proved ([`RequestAuth`]), for a handler: what
/// [`authenticate`] put in its extensions with auth on; open with auth off,
/// where that layer is not installed. A request without one on a server
/// with auth on is refused (401), never served as open.
struct Who(RequestAuth);

impl FromRequestParts<AppState> for Who {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> ApiResult<Self> {
        match parts.extensions.remove::<RequestAuth>() {
            Some(proved) => Ok(Who(proved)),
            None if !state.auth_on => Ok(Who(RequestAuth::open())),
            None => Err(ApiError::new(
                LockErrorCode::Unauthenticated,
                "this server requires an API token: send Authorization: Bearer TOKEN",
            )),
        }
    }
}

/// The router for one lock-server; with `auth`, every request but the
/// probes needs a bearer token from its file.
pub fn app_with_auth(service: Arc<LockService>, auth: Option<Arc<Authenticator>>) -> Router {
    let state = AppState {
        service,
        auth_on: auth.is_some(),
    };
    let routes = Router::new()
        .route("/v1/sessions", post(create_session))
        .route("/v1/sessions/{session_id}/heartbeat", post(heartbeat))
        .route("/v1/sessions/{session_id}", delete(delete_session))
        .route("/v1/locks/{key}/acquire", post(acquire))
        .route("/v1/locks/{key}/renew", post(renew))
        .route("/v1/locks/{key}/release", post(release))
        .route("/v1/locks/{key}/revoke", post(revoke))
        .route("/v1/locks/{key}", get(info))
        .route("/v1/config", get(config))
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(readyz))
        .route("/metrics", get(metrics))
        .fallback(|uri: axum::http::Uri| async move {
            // `/v1/locks//acquire` matches no route: its key is empty, a bad key (C1), not a bad path.
            if uri.path().starts_with("/v1/locks/") {
                return ApiError::bad(
                    "lock key is empty or the path is malformed; keys are 1-256 bytes of [A-Za-z0-9._:/-], path-encoded",
                );
            }
            ApiError::raw(StatusCode::NOT_FOUND, "NOT_FOUND", "no such endpoint; see C1 (L1-L8)")
        })
        .method_not_allowed_fallback(|| async {
            ApiError::raw(
                StatusCode::METHOD_NOT_ALLOWED,
                "METHOD_NOT_ALLOWED",
                "method not allowed on this path; see C1 (L1-L8)",
            )
        })
        .layer(axum::middleware::from_fn(refuse_declared_oversize));
    let routes = match auth {
        // Outermost: a request without a known token learns nothing else.
        Some(auth) => routes.layer(axum::middleware::from_fn_with_state(auth, authenticate)),
        None => routes,
    };
    routes.with_state(state)
}

/// The probes, open without a token so orchestrators can reach them.
fn is_probe(path: &str) -> bool {
    matches!(path, "/healthz" | "/readyz")
}

/// Puts what the request proved ([`RequestAuth`]) in its extensions: with
/// auth off, nothing to prove; with auth on, the principal of its bearer
/// token, or `401 UNAUTHENTICATED` (missing, malformed or unknown token)
/// before the request reaches any handler. The probes pass without one.
async fn authenticate(
    State(auth): State<Arc<Authenticator>>,
    mut req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let proved = if is_probe(req.uri().path()) {
        RequestAuth::open()
    } else {
        let header = req
            .headers()
            .get(header::AUTHORIZATION)
            .map(HeaderValue::as_bytes);
        match auth.authenticate(header) {
            Some(p) => RequestAuth::as_principal(p),
            None => {
                let why = if header.is_none() {
                    "this server requires an API token: send Authorization: Bearer TOKEN"
                } else {
                    "the Authorization header is not Bearer TOKEN, or the token is not known to this server"
                };
                return ApiError::new(LockErrorCode::Unauthenticated, why).into_response();
            }
        }
    };
    req.extensions_mut().insert(proved);
    next.run(req).await
}

/// Refuses any request whose declared body is over the limit with 413, also on
/// endpoints that never read a body (L3, L7), so the limit holds everywhere (C1).
async fn refuse_declared_oversize(
    req: axum::extract::Request,
    next: axum::middleware::Next,
) -> Response {
    let declared = req
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|len| len > MAX_BODY_BYTES as u64) {
        return ApiError::new(
            LockErrorCode::PayloadTooLarge,
            format!("request body is over {MAX_BODY_BYTES} bytes"),
        )
        .into_response();
    }
    next.run(req).await
}

impl ApiError {
    /// A reply outside C1's table (unknown route, wrong method).
    fn raw(status: StatusCode, code: &str, message: &str) -> Self {
        ApiError {
            status,
            body: ErrorBody {
                code: code.to_string(),
                message: message.to_string(),
                retry_after_ms: None,
                leader: None,
            },
        }
    }
}

/// Reads a JSON body of at most [`MAX_BODY_BYTES`]; `empty_ok` turns an empty body into `{}`.
async fn read_json<T: DeserializeOwned>(
    headers: &HeaderMap,
    body: Body,
    empty_ok: bool,
) -> ApiResult<T> {
    let too_large = || {
        ApiError::new(
            LockErrorCode::PayloadTooLarge,
            format!("request body is over {MAX_BODY_BYTES} bytes"),
        )
    };
    let declared = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|len| len > MAX_BODY_BYTES as u64) {
        return Err(too_large());
    }
    let bytes = axum::body::to_bytes(body, MAX_BODY_BYTES)
        .await
        .map_err(|_| too_large())?;
    let bytes: &[u8] = if empty_ok && bytes.iter().all(u8::is_ascii_whitespace) {
        b"{}"
    } else {
        &bytes
    };
    serde_json::from_slice(bytes).map_err(|e| ApiError::bad(format!("invalid JSON body: {e}")))
}

/// Extracts and validates the `{key}` path segment.
fn key_of(path: Result<Path<String>, PathRejection>) -> ApiResult<String> {
    let Path(key) = path.map_err(|e| ApiError::bad(format!("bad lock key in path: {e}")))?;
    validate_key(&key).map_err(|e| ApiError::bad(e.to_string()))?;
    Ok(key)
}

/// Extracts the `{session_id}` path segment (any id that is not ours is simply unknown).
fn session_of(path: Result<Path<String>, PathRejection>) -> ApiResult<String> {
    let Path(id) = path.map_err(|e| ApiError::bad(format!("bad session id in path: {e}")))?;
    Ok(id)
}

async fn create_session(
    State(s): State<Arc<LockService>>,
    Who(who): Who,
    headers: HeaderMap,
    body: Body,
) -> ApiResult<Response> {
    ApiError::forbid(who.refuse_sessions())?;
    let req: CreateSessionRequest = read_json(&headers, body, false).await?;
    validate_owner(&req.owner_id).map_err(|e| ApiError::bad(e.to_string()))?;
    let granted = s
        .create_session_as(who.caller(), &req.owner_id, req.ttl_ms)
        .await?;
    Ok((StatusCode::CREATED, Json(granted)).into_response())
}

/// L2. The hot path of a fleet: the request's headers are read
/// in place, never copied, and a body known to be empty (C1 allows it; the
/// SDK sends none) is not collected or parsed.
async fn heartbeat(
    State(s): State<Arc<LockService>>,
    Who(who): Who,
    path: Result<Path<String>, PathRejection>,
    req: Request,
) -> ApiResult<Json<HeartbeatReply>> {
    ApiError::forbid(who.refuse_sessions())?;
    let id = session_of(path)?;
    let (parts, body) = req.into_parts();
    if !body.is_end_stream() {
        let _: serde_json::Map<String, serde_json::Value> =
            read_json(&parts.headers, body, true).await?;
    }
    let ttl = s.heartbeat_as(who.caller(), &id).await?;
    Ok(Json(HeartbeatReply {
        ttl_ms: ttl.as_millis() as u64,
        expires_at: wall_clock_rfc3339_after(ttl),
    }))
}

async fn delete_session(
    State(s): State<Arc<LockService>>,
    Who(who): Who,
    path: Result<Path<String>, PathRejection>,
) -> ApiResult<StatusCode> {
    ApiError::forbid(who.refuse_sessions())?;
    let id = session_of(path)?;
    s.delete_session_as(who.caller(), &id).await?;
    Ok(StatusCode::NO_CONTENT)
}

/// A lock route's `{key}` (validated first: a bad key is refused before the
/// body is read) and its JSON body.
struct KeyCall<T> {
    key: String,
    body: T,
}

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for KeyCall<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &S) -> ApiResult<Self> {
        let (mut parts, body) = req.into_parts();
        let key = key_of(Path::<String>::from_request_parts(&mut parts, state).await)?;
        let body = read_json(&parts.headers, body, false).await?;
        Ok(KeyCall { key, body })
    }
}

/// L4. An answer with a new grant is timed into `lock_grant_duration_seconds`
/// from the request's receipt (before its body is read) to the answer ready
/// (the reply serialised, the store's commit included).
async fn acquire(
    State(s): State<Arc<LockService>>,
    Who(who): Who,
    req: Request,
) -> ApiResult<Response> {
    // A latency figure, no expiry decision: real elapsed time even when the
    // service's expiry runs on a fake clock (tests), so not the Clock seam.
    let received = Instant::now();
    let KeyCall { key, body } = KeyCall::<AcquireRequest>::from_request(req, &s).await?;
    ApiError::forbid(who.refuse_key(&key))?;
    let acquired = s
        .acquire_as(who.caller(), &key, &body.session_id, body.ttl_ms)
        .await?;
    let answer = Json(acquired.granted).into_response();
    if acquired.fresh {
        s.observe_grant(received.elapsed());
    }
    Ok(answer)
}

async fn renew(
    State(s): State<Arc<LockService>>,
    Who(who): Who,
    KeyCall { key, body }: KeyCall<RenewRequest>,
) -> ApiResult<Response> {
    ApiError::forbid(who.refuse_key(&key))?;
    let granted = s
        .renew_as(
            who.caller(),
            &key,
            &body.session_id,
            body.token,
            body.ttl_ms,
        )
        .await?;
    Ok(Json(granted).into_response())
}

async fn release(
    State(s): State<Arc<LockService>>,
    Who(who): Who,
    KeyCall { key, body }: KeyCall<ReleaseRequest>,
) -> ApiResult<StatusCode> {
    ApiError::forbid(who.refuse_key(&key))?;
    s.release_as(who.caller(), &key, &body.session_id, body.token)
        .await?;
    Ok(StatusCode::NO_CONTENT)
}

async fn revoke(
    State(s): State<Arc<LockService>>,
    Who(who): Who,
    KeyCall { key, body }: KeyCall<RevokeRequest>,
) -> ApiResult<Response> {
    ApiError::forbid(who.refuse_unless_admin("L8 revoke"))?;
    let n = body.reason.chars().count();
    if n == 0 || n > MAX_REASON_CHARS {
        return Err(ApiError::bad(format!(
            "reason is {n} characters; it must be 1-{MAX_REASON_CHARS}"
        )));
    }
    Ok(Json(s.revoke(&key, &body.reason).await?).into_response())
}

async fn info(
    State(s): State<Arc<LockService>>,
    Who(who): Who,
    path: Result<Path<String>, PathRejection>,
) -> ApiResult<Response> {
    let key = key_of(path)?;
    ApiError::forbid(who.refuse_key(&key))?;
    Ok(Json(s.info(&key).await?).into_response())
}

async fn config(State(s): State<Arc<LockService>>, Who(who): Who) -> ApiResult<Response> {
    ApiError::forbid(who.refuse_unless_monitor("GET /v1/config"))?;
    let mut view = s.config_view();
    view.auth = Some(who.mode().to_string());
    Ok(Json(view).into_response())
}

async fn readyz(State(s): State<Arc<LockService>>) -> ApiResult<&'static str> {
    s.ready().await?;
    Ok("ready\n")
}

async fn metrics(State(s): State<Arc<LockService>>, Who(who): Who) -> ApiResult<Response> {
    ApiError::forbid(who.refuse_unless_monitor("GET /metrics"))?;
    Ok((
        [(header::CONTENT_TYPE, METRICS_CONTENT_TYPE)],
        s.metrics_text(),
    )
        .into_response())
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use axum::extract::FromRequestParts;
    use fencepost_api::clock::{FakeClock, MonoTime};

    use super::{AppState, Who};
    use crate::core::Limits;
    use crate::service::LockService;
    use crate::store::memory::MemoryStore;

    async fn state(auth_on: bool) -> AppState {
        let clock = FakeClock::new(MonoTime::from_nanos(1_000_000_000));
        let service = LockService::start(
            Limits::default(),
            Arc::new(MemoryStore::default()),
            Arc::new(clock),
        )
        .await
        .unwrap();
        AppState { service, auth_on }
    }

    /// A request that reaches a handler without what the auth layer proves:
    /// open with auth off (the layer is not installed), refused with auth
    /// on, never served as open (the fail-closed rule).
    #[tokio::test]
    async fn a_request_that_skipped_the_auth_layer_is_refused_when_auth_is_on() {
        let (mut parts, ()) = axum::http::Request::new(()).into_parts();
        let open = Who::from_request_parts(&mut parts, &state(false).await).await;
        assert_eq!(open.ok().map(|Who(w)| w.mode()), Some("none"));
        let refused = Who::from_request_parts(&mut parts, &state(true).await).await;
        let err = refused
            .err()
            .expect("auth on: no principal must be refused");
        assert_eq!(err.status, axum::http::StatusCode::UNAUTHORIZED);
        assert_eq!(err.body.code, "UNAUTHENTICATED");
    }
}
