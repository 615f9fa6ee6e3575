//! The SDK's errors: [`LockLost`], the terminal verdict on a handle, and
//! [`LockError`], one variant per C1 code plus the local and transport
//! failures. Each variant's doc says what the caller can do about it.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use fencepost_api::input::InputError;

/// Why a handle (or its whole session) is lost.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LostReason {
    /// The client deadline (`send + granted × (1 − margin)`) of the handle or of
    /// its session passed before a successful renewal/heartbeat moved it.
    Deadline,
    /// The server answered `410 SESSION_EXPIRED` to a heartbeat or call.
    SessionExpired,
    /// The server answered `404 SESSION_UNKNOWN`.
    SessionUnknown,
    /// The server refused a renew or release with `409 LOCK_LOST` (lapsed,
    /// revoked, reassigned).
    LeaseLost,
    /// A server-confirmed check found the key not held by this grant.
    NotHeldOnServer,
    /// The session was closed by the caller.
    SessionClosed,
}

impl LostReason {
    /// The compact code stored in the atomics (0 means "not lost").
    pub(crate) fn code(self) -> u8 {
        match self {
            LostReason::Deadline => 1,
            LostReason::SessionExpired => 2,
            LostReason::SessionUnknown => 3,
            LostReason::LeaseLost => 4,
            LostReason::NotHeldOnServer => 5,
            LostReason::SessionClosed => 6,
        }
    }

    /// The inverse of [`LostReason::code`]; `None` for 0 ("live").
    pub(crate) fn from_code(code: u8) -> Option<LostReason> {
        Some(match code {
            1 => LostReason::Deadline,
            2 => LostReason::SessionExpired,
            3 => LostReason::SessionUnknown,
            4 => LostReason::LeaseLost,
            5 => LostReason::NotHeldOnServer,
            6 => LostReason::SessionClosed,
            _ => return None,
        })
    }

    /// The `reason` label of `session_lost` / `lock.session.lost` (C5), for
    /// the three reasons that lose a session; `None` for the others.
    pub fn session_label(self) -> Option<&'static str> {
        match self {
            LostReason::Deadline => Some("deadline"),
            LostReason::SessionExpired => Some("expired"),
            LostReason::SessionUnknown => Some("unknown"),
            _ => None,
        }
    }
}

impl fmt::Display for LostReason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            LostReason::Deadline => "the client deadline passed",
            LostReason::SessionExpired => "the session expired on the server (410)",
            LostReason::SessionUnknown => "the server does not know the session (404)",
            LostReason::LeaseLost => {
                "the server says the grant is no longer current (409 LOCK_LOST)"
            }
            LostReason::NotHeldOnServer => "the server reports the key is not held by this grant",
            LostReason::SessionClosed => "the session was closed",
        })
    }
}

/// The lock is lost. Terminal and never retryable: stop the critical section,
/// do not perform the next side effect, and acquire again (a new grant, a
/// higher token) if the work must still be done.
///
/// Building one never allocates (the key is shared), so the hot check stays
/// allocation-free even on its failure path.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("lock {key:?} (token {token}) is lost: {reason}")]
pub struct LockLost {
    /// The key of the lost grant.
    pub key: Arc<str>,
    /// The grant's fencing token.
    pub token: u64,
    /// Why it is lost.
    pub reason: LostReason,
}

/// Everything an SDK call can fail with.
#[derive(Debug, thiserror::Error)]
pub enum LockError {
    /// `400 BAD_REQUEST`, or a key/owner id refused locally before sending.
    /// Fix the request; retrying the same one will not help.
    #[error("bad request: {message}")]
    BadRequest {
        /// The server's (or the local check's) one-line explanation.
        message: String,
        /// The local validation that refused it, when nothing was sent.
        #[source]
        input: Option<InputError>,
    },
    /// `404 SESSION_UNKNOWN`: the session never existed or was deleted. The
    /// session is now LOST; open a new one.
    #[error("the server does not know this session (404 SESSION_UNKNOWN); open a new session")]
    SessionUnknown,
    /// `410 SESSION_EXPIRED`: the session expired on the server; its locks are
    /// gone. The session is now LOST; open a new one.
    #[error("the session expired on the server (410 SESSION_EXPIRED); open a new session")]
    SessionExpired,
    /// The session is LOST (terminal: 404/410 earlier, its client deadline
    /// passed, or it was closed); nothing was sent. Open a new session.
    #[error("the session is lost: {reason}; open a new session")]
    SessionLost {
        /// Why the session was lost.
        reason: LostReason,
    },
    /// `409 LOCK_HELD`: another grant holds the key (or it is in grace) and the
    /// acquire budget ran out. Try again later, no sooner than `retry_after_ms`.
    #[error(
        "lock {key:?} is held by another grant after {attempts} attempt(s) (retry after {retry_after_ms:?} ms)"
    )]
    LockHeld {
        /// The key asked for.
        key: String,
        /// The server's last hint of when the key could be free, in ms.
        retry_after_ms: Option<u64>,
        /// How many L4 requests were sent.
        attempts: u32,
    },
    /// The lock is lost (terminal): the client deadline passed, the session is
    /// lost, or the server answered `409 LOCK_LOST`. Abandon the work.
    #[error(transparent)]
    LockLost(#[from] LockLost),
    /// `404 LOCK_UNKNOWN`: L7 on a key that was never granted.
    #[error("the server has never granted this key (404 LOCK_UNKNOWN)")]
    LockUnknown,
    /// `503 NOT_LEADER`: this replica does not serve. Retry later or point the
    /// client at `leader` when given.
    #[error("this lock-server replica is not the leader (503 NOT_LEADER; leader: {leader:?})")]
    NotLeader {
        /// The leader's base URL, when the server knows it.
        leader: Option<String>,
    },
    /// `503 UNAVAILABLE`: the server's store is unreachable; nothing changed.
    /// Retry later.
    #[error("the lock-server is unavailable (503): {message}")]
    Unavailable {
        /// The server's one-line explanation.
        message: String,
    },
    /// `413 PAYLOAD_TOO_LARGE`. A bug in the caller (keys are short); do not retry.
    #[error("request body too large (413)")]
    PayloadTooLarge,
    /// `401 UNAUTHENTICATED`: the server runs with API tokens and this client
    /// sent none, or one it does not know (set `FENCEPOST_TOKEN` or
    /// `FENCEPOST_TOKEN_FILE`, see [`LockClientConfig::token_from_env`]).
    /// Nothing changed. On the session's heartbeat the session is LOST (it
    /// can no longer be kept alive), reported as [`LostReason::SessionUnknown`].
    ///
    /// [`LockClientConfig::token_from_env`]: crate::LockClientConfig::token_from_env
    #[error("the lock-server refused this client's credentials (401 UNAUTHENTICATED): {message}")]
    Unauthenticated {
        /// The server's one-line explanation.
        message: String,
    },
    /// `403 FORBIDDEN`: the token may not do this (its role or key scope), or
    /// the session is not bound to it — someone else's, or one the server does
    /// not know: the server gives both the same answer. Nothing changed. On
    /// the session's heartbeat the session is LOST, reported as
    /// [`LostReason::SessionUnknown`] (from this client's side the server no
    /// longer knows the session as its own).
    #[error("the lock-server refused this (403 FORBIDDEN): {message}")]
    Forbidden {
        /// The server's one-line explanation.
        message: String,
    },
    /// [`Session::ensure_time_for`](crate::Session::ensure_time_for) refused: the
    /// remaining client-side lease is not strictly greater than the step's
    /// worst-case cost. Abandon the step (cheap and always allowed, ADR-006 D6).
    #[error("insufficient lease: {remaining:?} left, the step needs more than {needed:?}")]
    InsufficientLease {
        /// Client-side lease left at the check.
        remaining: Duration,
        /// The worst-case cost the caller declared.
        needed: Duration,
    },
    /// No reply within the per-request timeout. The outcome is unknown (the
    /// server may have acted); no deadline moved. Retry if the call is idempotent.
    #[error("no reply from the lock-server within {after:?}")]
    Timeout {
        /// The timeout that fired.
        after: Duration,
    },
    /// The request could not be sent or its reply not read (refused, reset).
    /// No deadline moved; retry later.
    #[error("transport failure talking to the lock-server: {0}")]
    Transport(#[source] crate::http::HttpError),
    /// The server's reply does not follow C1 (unknown code, bad JSON): a
    /// version mismatch or a proxy in the way. Report it; retrying rarely helps.
    #[error("unexpected reply from the lock-server (HTTP {status}): {problem}")]
    UnexpectedReply {
        /// The HTTP status.
        status: u16,
        /// What did not match.
        #[source]
        problem: ReplyProblem,
    },
    /// The handle belongs to another session. A caller bug: use the session
    /// that acquired it.
    #[error("this handle was acquired by another session")]
    ForeignHandle,
}

/// How a lock-server reply breaks C1 ([`LockError::UnexpectedReply`]).
#[derive(Debug, thiserror::Error)]
pub enum ReplyProblem {
    /// A 2xx whose body is not the C1 success body.
    #[error("success body does not match C1: {0}")]
    SuccessBody(#[source] serde_json::Error),
    /// An error status whose body is not C1's `{"code", "message"}` JSON
    /// (a proxy's page, say).
    #[error("error body is not C1 JSON: {excerpt:?}")]
    ErrorBodyNotJson {
        /// The first 200 characters of the body, for the report.
        excerpt: String,
    },
    /// A C1-shaped error whose `code` this SDK does not know.
    #[error("unknown code {code:?}: {message}")]
    UnknownCode {
        /// The code as sent.
        code: String,
        /// The server's message.
        message: String,
    },
    /// `LOCK_LOST` on a request that names no grant (only L5/L6 can be).
    #[error("LOCK_LOST on a request that names no grant")]
    LockLostWithoutGrant,
    /// A grant for another key than the one asked for.
    #[error("acquire of {asked:?} was answered for {answered:?}")]
    WrongKey {
        /// The key asked for.
        asked: String,
        /// The key in the reply.
        answered: String,
    },
}

impl LockError {
    /// A request refused locally, before anything was sent.
    pub(crate) fn invalid_input(input: InputError) -> Self {
        LockError::BadRequest {
            message: input.to_string(),
            input: Some(input),
        }
    }

    /// Whether a retry of the same request may succeed (503s, timeouts,
    /// transport failures). `LOCK_HELD` is retried by `acquire` itself.
    pub fn is_transient(&self) -> bool {
        matches!(
            self,
            LockError::NotLeader { .. }
                | LockError::Unavailable { .. }
                | LockError::Timeout { .. }
                | LockError::Transport(_)
        )
    }

    /// The loss a heartbeat's (L2's) error means: [`session_loss`](Self::session_loss),
    /// and also 401 and 403, after which the session can no longer be kept
    /// alive (the token was withdrawn, or the session is not bound to it):
    /// counted as [`LostReason::SessionUnknown`]. Elsewhere a 403 may be a
    /// key outside the token's scope, which loses nothing.
    pub(crate) fn heartbeat_loss(&self) -> Option<LostReason> {
        match self {
            LockError::Unauthenticated { .. } | LockError::Forbidden { .. } => {
                Some(LostReason::SessionUnknown)
            }
            other => other.session_loss(),
        }
    }

    /// The session-level loss this error means, if any (404/410).
    pub(crate) fn session_loss(&self) -> Option<LostReason> {
        match self {
            LockError::SessionUnknown => Some(LostReason::SessionUnknown),
            LockError::SessionExpired => Some(LostReason::SessionExpired),
            _ => None,
        }
    }
}
