//! The rail-stub's one error type, [`RailError`], and its mapping to C2 codes
//! and `{"code","message"}` bodies in a single `impl IntoResponse`.
//!
//! Every message is one line a person can act on. Store failures answer 503
//! with a generic message; the details go to the log, not the client.

use axum::Json;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use fencepost_api::lock::{ErrorBody, MAX_BODY_BYTES};
use fencepost_api::rail::RailErrorCode;

use crate::store::StoreError;

/// Everything a rail-stub request can fail with.
#[derive(Debug, thiserror::Error)]
pub enum RailError {
    /// The request is malformed; the message says what to fix.
    #[error("{0}")]
    BadRequest(String),
    /// The body is over the limit; send less.
    #[error("request body is over the {MAX_BODY_BYTES}-byte limit")]
    PayloadTooLarge,
    /// No such payout; create it with R1 or R7 first.
    #[error("no payout {0:?}; create it with POST /v1/payouts or POST /v1/payouts/bulk first")]
    PayoutUnknown(String),
    /// R1 for an existing id with another amount or currency; pick another id.
    #[error(
        "payout {payout_id:?} already exists as {amount_minor} {currency}; use another payout_id"
    )]
    Conflict {
        /// The payout.
        payout_id: String,
        /// The stored amount.
        amount_minor: i64,
        /// The stored currency.
        currency: String,
    },
    /// A stale token (fence 1 or 2); a newer holder took over, so stop.
    #[error(
        "token {token} is below the highest token {highest_token} payout {payout_id:?} has seen (fence {fence}); a newer lock holder has taken over, stop working on it"
    )]
    FencedOut {
        /// The payout.
        payout_id: String,
        /// 1 (ledger: R2/R4) or 2 (rail: R3).
        fence: u8,
        /// The token the request carried.
        token: u64,
        /// The payout's highest accepted token.
        highest_token: u64,
    },
    /// R2/R4 on a PAID payout; nothing left to do.
    #[error("payout {payout_id:?} is already PAID (by token {paid_token}); nothing left to do")]
    AlreadyPaid {
        /// The payout.
        payout_id: String,
        /// The token that paid it.
        paid_token: u64,
    },
    /// R3 on a PAID payout; nothing was paid again.
    #[error(
        "payout {payout_id:?} is already PAID (by token {paid_token}); this submission with token {token} paid nothing"
    )]
    DuplicateSubmission {
        /// The payout.
        payout_id: String,
        /// The token the submission carried.
        token: u64,
        /// The token that paid it.
        paid_token: u64,
    },
    /// R3 by a token that does not hold the claim; claim first.
    #[error(
        "token {token} does not hold the claim on payout {payout_id:?} (state {state}, claim token {claim_token}); claim it with POST /v1/payouts/{payout_id}/claim before submitting"
    )]
    NotClaimed {
        /// The payout.
        payout_id: String,
        /// The token the submission carried.
        token: u64,
        /// The payout's state.
        state: &'static str,
        /// The claim holder's token, or `none`.
        claim_token: String,
    },
    /// No such endpoint.
    #[error(
        "no endpoint {0}; the rail-stub serves /v1/payouts, /v1/payouts/bulk, /v1/payouts/{{id}}[/claim|/submit|/release], /v1/ledger, /healthz, /metrics"
    )]
    NotFound(String),
    /// The endpoint exists with other methods.
    #[error(
        "method not allowed on this endpoint; R1-R4 and R7 are POST, R5, R6, /healthz and /metrics are GET"
    )]
    MethodNotAllowed,
    /// The ledger store failed; nothing changed, retry later.
    #[error("the ledger store failed; nothing changed, retry later")]
    Store(#[from] StoreError),
    /// A write without a known bearer token while `--auth-tokens` is on.
    #[error(
        "this rail-stub requires an API token for writes: send Authorization: Bearer TOKEN (a client or admin token of its --auth-tokens file)"
    )]
    Unauthenticated,
    /// A write by a token whose role may not write (`monitor`).
    #[error("a {0} token may not write to the rail; use a client or admin token")]
    Forbidden(&'static str),
    /// The server stopped while the submission waited; nothing was paid.
    #[error("the rail-stub is shutting down; this submission was not decided and paid nothing")]
    ShuttingDown,
}

impl RailError {
    /// The C2 code this error travels as.
    pub fn code(&self) -> RailErrorCode {
        match self {
            RailError::BadRequest(_) => RailErrorCode::BadRequest,
            RailError::PayloadTooLarge => RailErrorCode::PayloadTooLarge,
            RailError::PayoutUnknown(_) => RailErrorCode::PayoutUnknown,
            RailError::Conflict { .. } => RailErrorCode::Conflict,
            RailError::FencedOut { .. } => RailErrorCode::FencedOut,
            RailError::AlreadyPaid { .. } => RailErrorCode::AlreadyPaid,
            RailError::DuplicateSubmission { .. } => RailErrorCode::DuplicateSubmission,
            RailError::NotClaimed { .. } => RailErrorCode::NotClaimed,
            RailError::NotFound(_) => RailErrorCode::NotFound,
            RailError::MethodNotAllowed => RailErrorCode::MethodNotAllowed,
            RailError::Store(_) | RailError::ShuttingDown => RailErrorCode::Unavailable,
            RailError::Unauthenticated => RailErrorCode::Unauthenticated,
            RailError::Forbidden(_) => RailErrorCode::Forbidden,
        }
    }
}

impl RailError {
    /// A task of this request that did not finish: a panic is re-raised on the
    /// caller (it is a bug, not an answer); a cancellation (the runtime is
    /// shutting down) decided nothing and is [`RailError::ShuttingDown`].
    pub fn from_join(e: tokio::task::JoinError) -> RailError {
        if e.is_panic() {
            std::panic::resume_unwind(e.into_panic());
        }
        RailError::ShuttingDown
    }
}

impl IntoResponse for RailError {
    fn into_response(self) -> Response {
        if let RailError::Store(e) = &self {
            tracing::error!(error = %e, "ledger_store_failed");
        }
        let code = self.code();
        let status =
            StatusCode::from_u16(code.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let body = ErrorBody {
            code: code.as_str().to_string(),
            message: self.to_string(),
            retry_after_ms: None,
            leader: None,
        };
        let mut response = (status, Json(body)).into_response();
        if status == StatusCode::UNAUTHORIZED {
            response.headers_mut().insert(
                axum::http::header::WWW_AUTHENTICATE,
                axum::http::HeaderValue::from_static("Bearer"),
            );
        }
        response
    }
}
