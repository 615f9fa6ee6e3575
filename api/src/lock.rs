//! C1: the lock-server's wire types, limits and error codes (L1–L8), shared by
//! the server and the SDK so the two cannot drift apart.
//!
//! Durations on the wire are integer milliseconds. `expires_at` is RFC 3339
//! for humans and logs; no client may derive a deadline from it.

use crate::input::InputError;
use serde::{Deserialize, Serialize};

/// Request bodies larger than this are refused with `413 PAYLOAD_TOO_LARGE`.
pub const MAX_BODY_BYTES: usize = 64 * 1024;
/// Longest lock key, in bytes.
pub const MAX_KEY_BYTES: usize = 256;
/// Longest `owner_id`, in characters.
pub const MAX_OWNER_CHARS: usize = 128;
/// Longest revoke `reason`, in characters.
pub const MAX_REASON_CHARS: usize = 1024;

/// Every C1 error code, with its HTTP status.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum LockErrorCode {
    /// 400: malformed JSON, a missing or ill-typed field, a bad key. Fix the request.
    BadRequest,
    /// 404: no such session (never existed, or deleted). Open a new session.
    SessionUnknown,
    /// 410: the session expired on the server. Its locks are gone; open a new session.
    SessionExpired,
    /// 409: another grant holds the key or it is in grace; retry after `retry_after_ms`.
    LockHeld,
    /// 409: the grant is no longer current (lapsed, revoked, reassigned, wrong token). Terminal.
    LockLost,
    /// 404: L7/L8 on a key that was never granted.
    LockUnknown,
    /// 503: this replica does not serve; try `leader` if given.
    NotLeader,
    /// 413: the body is over [`MAX_BODY_BYTES`].
    PayloadTooLarge,
    /// 503: the store is unreachable; nothing changed, retry later. (Not in C1's
    /// table; see docs/contract-notes.md.)
    Unavailable,
    /// 401: no `Authorization: Bearer` token, or one the server does not know
    /// (auth on). Nothing changed. Not in C1's table; see
    /// docs/contract-notes.md.
    Unauthenticated,
    /// 403: a known token that may not do this: outside its role or key
    /// scope, or a session id that is not bound to it (someone else's or
    /// unknown: the same answer, so no session's existence leaks). Nothing
    /// changed. Not in C1's table; see docs/contract-notes.md.
    Forbidden,
}

impl LockErrorCode {
    /// The HTTP status this code travels with.
    pub fn status(self) -> u16 {
        match self {
            LockErrorCode::BadRequest => 400,
            LockErrorCode::SessionUnknown | LockErrorCode::LockUnknown => 404,
            LockErrorCode::SessionExpired => 410,
            LockErrorCode::LockHeld | LockErrorCode::LockLost => 409,
            LockErrorCode::NotLeader | LockErrorCode::Unavailable => 503,
            LockErrorCode::PayloadTooLarge => 413,
            LockErrorCode::Unauthenticated => 401,
            LockErrorCode::Forbidden => 403,
        }
    }

    /// The code as it appears in the `code` field.
    pub fn as_str(self) -> &'static str {
        match self {
            LockErrorCode::BadRequest => "BAD_REQUEST",
            LockErrorCode::SessionUnknown => "SESSION_UNKNOWN",
            LockErrorCode::SessionExpired => "SESSION_EXPIRED",
            LockErrorCode::LockHeld => "LOCK_HELD",
            LockErrorCode::LockLost => "LOCK_LOST",
            LockErrorCode::LockUnknown => "LOCK_UNKNOWN",
            LockErrorCode::NotLeader => "NOT_LEADER",
            LockErrorCode::PayloadTooLarge => "PAYLOAD_TOO_LARGE",
            LockErrorCode::Unavailable => "UNAVAILABLE",
            LockErrorCode::Unauthenticated => "UNAUTHENTICATED",
            LockErrorCode::Forbidden => "FORBIDDEN",
        }
    }

    /// Parses a `code` field; `None` for a code this version does not know.
    pub fn parse(code: &str) -> Option<Self> {
        serde_json::from_value(serde_json::Value::String(code.to_string())).ok()
    }
}

impl std::fmt::Display for LockErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The body of every error reply, C1 and C2: `{"code", "message"}` plus the
/// fields some codes add.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ErrorBody {
    /// The machine-readable code, e.g. `LOCK_HELD`.
    pub code: String,
    /// One line a person can act on.
    pub message: String,
    /// With `LOCK_HELD`: how long until the key could be free, in ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_after_ms: Option<u64>,
    /// With `NOT_LEADER`: the leader's base URL, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leader: Option<String>,
}

/// L1 request: open a session.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreateSessionRequest {
    /// Who this session is, for logs and L7 (1–128 characters).
    pub owner_id: String,
    /// Requested session TTL; absent means `lock.session.ttl`. Clamped, never refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_ms: Option<u64>,
}

/// L1 reply (201).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionGranted {
    /// The session id (at least 122 random bits).
    pub session_id: String,
    /// The TTL granted, after clamping: clients use this value.
    pub ttl_ms: u64,
    /// Wall-clock end of the session, for humans only.
    pub expires_at: String,
}

/// L2 reply (200).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HeartbeatReply {
    /// The TTL granted from this heartbeat's receipt.
    pub ttl_ms: u64,
    /// Wall-clock end of the session, for humans only.
    pub expires_at: String,
}

/// L4 request: acquire a key.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AcquireRequest {
    /// The session that will hold the grant.
    pub session_id: String,
    /// Requested lease; absent means `lock.default.ttl`. Clamped, never refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_ms: Option<u64>,
}

/// L5 request: renew a grant (same token).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RenewRequest {
    /// The holding session.
    pub session_id: String,
    /// The grant's fencing token.
    pub token: u64,
    /// Requested lease; absent means `lock.default.ttl`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_ms: Option<u64>,
}

/// L6 request: release a grant.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReleaseRequest {
    /// The holding session.
    pub session_id: String,
    /// The grant's fencing token.
    pub token: u64,
}

/// L4/L5 reply (200).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseGranted {
    /// The key.
    pub key: String,
    /// The fencing token: strictly increasing per key, unchanged by renew.
    pub token: u64,
    /// The lease granted, after clamping: clients use this value.
    pub lease_ms: u64,
    /// Wall-clock end of the lease, for humans only.
    pub expires_at: String,
}

/// A key's state as L7 reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum LockState {
    /// A current grant.
    Held,
    /// Lease (or session) over, not yet reassignable.
    Grace,
    /// Reassignable now.
    Free,
}

/// L7 reply (200). It never names the holding session: a session id is the
/// holder's secret (C1 §5), since whoever knows it can renew or release the grant.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockInfo {
    /// The key.
    pub key: String,
    /// HELD, GRACE or FREE.
    pub state: LockState,
    /// The last token issued for the key.
    pub token: u64,
    /// The holder's owner id, while HELD or in GRACE.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner_id: Option<String>,
    /// Milliseconds until the state changes (HELD: lease end; GRACE: reassignable).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub remaining_ms: Option<u64>,
}

/// L8 request: revoke the current grant (an operator action).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RevokeRequest {
    /// Why, for the logs (1–1024 characters).
    pub reason: String,
}

/// L8 reply (200): the LockOutcome.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockOutcome {
    /// The key.
    pub key: String,
    /// The token that was revoked, if a grant was HELD or in GRACE.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub revoked_token: Option<u64>,
    /// The key's state after the revoke.
    pub state: LockState,
}

/// `GET /v1/config`: the effective clamps and grace.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ServerConfigView {
    /// `lock.default.ttl`, ms.
    pub default_ttl_ms: u64,
    /// `lock.session.ttl`, ms.
    pub session_ttl_ms: u64,
    /// `lock.ttl.min`, ms.
    pub ttl_min_ms: u64,
    /// `lock.ttl.max`, ms.
    pub ttl_max_ms: u64,
    /// `fixed` or `derived`.
    pub grace_mode: String,
    /// With `fixed`: the grace, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grace_ms: Option<u64>,
    /// With `derived`: `lock.clock.offset-max`, ms (fractional).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_offset_max_ms: Option<f64>,
    /// With `derived`: `lock.clock.drift-ppm`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_drift_ppm: Option<u64>,
    /// With `derived`: `lock.clock.quantum`, ms (fractional).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_quantum_ms: Option<f64>,
    /// The grace for a lease of `default_ttl_ms`, in ms (fractional), for display.
    pub grace_for_default_ttl_ms: f64,
    /// The grace for a session of `session_ttl_ms`, in ms (fractional), for display.
    pub grace_for_session_ttl_ms: f64,
    /// The store kind: `memory`, `sqlite` or `postgres` (never its credentials).
    pub store: String,
    /// The SQLite file, when the store is one (absent for `memory` and `postgres`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store_path: Option<String>,
    /// True when tokens survive a restart of the server; false for `memory:`,
    /// whose tokens start again at 1 after a restart (fencing is then unsafe
    /// across restarts).
    #[serde(default)]
    pub durable: bool,
    /// `single-node` (memory, SQLite), `leader` (serving) or `standby` (C1 §6:
    /// answers every L1–L8 with `503 NOT_LEADER`). Absent from older servers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    /// The leader epoch this replica last saw (PostgreSQL replicas only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub epoch: Option<u64>,
    /// The serving leader's advertised base URL, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leader: Option<String>,
    /// This replica's `lock.leader.lease`, ms (PostgreSQL replicas only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub leader_lease_ms: Option<u64>,
    /// The host clock's discipline as the kernel reports it now, beside the
    /// configured bound (absent from older servers).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock: Option<ServerClockView>,
    /// `none` (any client that reaches the port may do anything) or `tokens`
    /// (`--auth-tokens`: bearer tokens with roles and scopes).
    /// Absent from older servers.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub auth: Option<String>,
    /// The transport security served: `none` (plain HTTP), `tls`, or `mtls`
    /// (client certificates required). Empty from servers older than API tokens.
    #[serde(default)]
    pub tls: String,
}

/// `GET /v1/config`'s `clock`: the kernel's clock-discipline estimate
/// (`adjtimex`, read at request time) next to `lock.clock.offset-max` (θ_max),
/// so an operator sees whether the host vouches for the configured bound.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerClockView {
    /// `lock.clock.offset-max`, ms (fractional); absent with a fixed grace,
    /// which configures no offset bound.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub offset_max_ms: Option<f64>,
    /// The kernel's maximum error bound (`timex.maxerror`), ms (fractional).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub maxerror_ms: Option<f64>,
    /// The kernel's estimated error (`timex.esterror`), ms (fractional).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub esterror_ms: Option<f64>,
    /// False when the kernel flags the clock unsynchronised (then
    /// `maxerror_ms` bounds nothing).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub synchronised: Option<bool>,
    /// Synchronised with `maxerror_ms <= offset_max_ms`; absent when there is
    /// no offset bound or no reading.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub within_offset_max: Option<bool>,
    /// Why the clock discipline could not be read (then only `offset_max_ms`
    /// is given).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// The rule for lock keys, in words.
const KEY_RULE: &str = "keys are 1-256 bytes of [A-Za-z0-9._:/-], not \".\" or \"..\"";
/// The rule for owner ids, in words.
const OWNER_RULE: &str = "it must be 1-128 characters, no control characters";

/// Checks a lock key: 1–256 bytes of `[A-Za-z0-9._:/-]`, and not `.` or `..`
/// (a URL normaliser turns those path segments into another route, so no
/// client could reach the key). The error names the problem.
pub fn validate_key(key: &str) -> Result<(), InputError> {
    const FIELD: &str = "lock key";
    if key.is_empty() {
        return Err(InputError::Empty {
            field: FIELD,
            rule: KEY_RULE,
        });
    }
    if key.len() > MAX_KEY_BYTES {
        return Err(InputError::TooLong {
            field: FIELD,
            len: key.len(),
            unit: "bytes",
            rule: KEY_RULE,
        });
    }
    if let Some(ch) = key
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '/' | '-')))
    {
        return Err(InputError::BadChar {
            field: FIELD,
            ch,
            rule: KEY_RULE,
        });
    }
    if key == "." || key == ".." {
        return Err(InputError::Reserved {
            field: FIELD,
            value: key.to_string(),
            why: "a URL path segment of dots is normalised away by HTTP clients, so the key would be unreachable",
        });
    }
    Ok(())
}

/// Checks an `owner_id`: 1–128 characters, no control characters.
pub fn validate_owner(owner: &str) -> Result<(), InputError> {
    const FIELD: &str = "owner_id";
    let n = owner.chars().count();
    if n == 0 {
        return Err(InputError::Empty {
            field: FIELD,
            rule: OWNER_RULE,
        });
    }
    if n > MAX_OWNER_CHARS {
        return Err(InputError::TooLong {
            field: FIELD,
            len: n,
            unit: "characters",
            rule: OWNER_RULE,
        });
    }
    if let Some(ch) = owner.chars().find(|c| c.is_control()) {
        return Err(InputError::BadChar {
            field: FIELD,
            ch,
            rule: OWNER_RULE,
        });
    }
    Ok(())
}

/// Percent-encodes a key for use as one path segment (`/` becomes `%2F`).
pub fn encode_key(key: &str) -> String {
    let mut out = String::with_capacity(key.len());
    for b in key.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-' | b':') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_and_carry_their_status() {
        for code in [
            LockErrorCode::BadRequest,
            LockErrorCode::SessionUnknown,
            LockErrorCode::SessionExpired,
            LockErrorCode::LockHeld,
            LockErrorCode::LockLost,
            LockErrorCode::LockUnknown,
            LockErrorCode::NotLeader,
            LockErrorCode::PayloadTooLarge,
            LockErrorCode::Unavailable,
            LockErrorCode::Unauthenticated,
            LockErrorCode::Forbidden,
        ] {
            assert_eq!(LockErrorCode::parse(code.as_str()), Some(code));
            assert!(code.status() >= 400);
        }
        assert_eq!(LockErrorCode::LockHeld.status(), 409);
        assert_eq!(LockErrorCode::SessionExpired.status(), 410);
        assert_eq!(LockErrorCode::Unauthenticated.status(), 401);
        assert_eq!(LockErrorCode::Unauthenticated.as_str(), "UNAUTHENTICATED");
        assert_eq!(LockErrorCode::Forbidden.status(), 403);
        assert_eq!(LockErrorCode::Forbidden.as_str(), "FORBIDDEN");
    }

    #[test]
    fn keys_are_checked_by_length_and_alphabet() {
        assert!(validate_key("payout:42").is_ok());
        assert!(validate_key("a/b.c_d-e").is_ok());
        assert!(validate_key("").is_err());
        assert!(validate_key(&"k".repeat(257)).is_err());
        assert!(validate_key(&"k".repeat(256)).is_ok());
        assert!(
            validate_key("sp ace")
                .unwrap_err()
                .to_string()
                .contains("' '")
        );
        assert!(validate_key("a..b").is_ok());
        for dots in [".", ".."] {
            let e = validate_key(dots).unwrap_err();
            assert!(matches!(e, InputError::Reserved { .. }), "{e}");
        }
    }

    #[test]
    fn encode_key_escapes_slash() {
        assert_eq!(encode_key("a/b:c"), "a%2Fb:c");
    }

    #[test]
    fn optional_fields_are_omitted() {
        let s = serde_json::to_string(&AcquireRequest {
            session_id: "s".into(),
            ttl_ms: None,
        })
        .unwrap();
        assert_eq!(s, r#"{"session_id":"s"}"#);
    }
}
