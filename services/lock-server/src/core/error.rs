//! [`CoreError`]: a refusal with its C1 code and a message a person can act
//! on, and the refusals the table makes, each worded once. No message names a
//! session id (C1 §5).

use fencepost_api::lock::LockErrorCode;

/// A refusal, carrying the C1 code and a message a person can act on. No
/// message names a session id (C1 §5: it is the holder's secret).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct CoreError {
    /// The C1 code.
    pub code: LockErrorCode,
    /// One line for a person.
    pub message: String,
    /// With LOCK_HELD: when to try again.
    pub retry_after_ms: Option<u64>,
}

impl CoreError {
    pub(super) fn new(code: LockErrorCode, message: impl Into<String>) -> Self {
        CoreError {
            code,
            message: message.into(),
            retry_after_ms: None,
        }
    }
}

/// The refusal of a session id the table does not know (404).
pub(super) fn session_unknown() -> CoreError {
    CoreError::new(
        LockErrorCode::SessionUnknown,
        "no such session (never opened, deleted, or expired long ago); open a session with POST /v1/sessions",
    )
}

/// The refusal of a session id that is not bound to the caller's principal
/// (auth on): someone else's, or unknown. One answer for both, so a caller
/// learns nothing about ids it may not use.
pub(super) fn session_not_yours() -> CoreError {
    CoreError::new(
        LockErrorCode::Forbidden,
        "this session is not yours or does not exist; open a session with POST /v1/sessions using your own token",
    )
}

/// The refusal of `verb` on a session that lapsed or expired (410).
pub(super) fn session_expired(verb: &str) -> CoreError {
    CoreError::new(
        LockErrorCode::SessionExpired,
        format!("cannot {verb}: this session has expired on the server; open a new session"),
    )
}

/// The refusal of a key the table holds nothing for (404).
pub(super) fn lock_unknown(key: &str) -> CoreError {
    CoreError::new(
        LockErrorCode::LockUnknown,
        format!("lock {key} has never been granted"),
    )
}

/// The refusal of `verb` on `key` with `token` once that grant is gone (409).
pub(super) fn lost(key: &str, token: u64, verb: &str, why: &str) -> CoreError {
    CoreError::new(
        LockErrorCode::LockLost,
        format!("cannot {verb} {key} with token {token}: {why}; the grant is gone for good"),
    )
}

/// The refusal of an acquire of a key that is `what` (409), with its retry hint.
pub(super) fn lock_held(key: &str, retry_after_ms: u64, what: &str) -> CoreError {
    CoreError {
        code: LockErrorCode::LockHeld,
        message: format!("lock {key} is {what}; retry after {retry_after_ms} ms"),
        retry_after_ms: Some(retry_after_ms),
    }
}
