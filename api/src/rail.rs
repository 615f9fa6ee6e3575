//! C2: the rail-stub's wire types and error codes, R7's id scheme, and the
//! validation of payout ids and currencies. The ledger invariant check that
//! runs on R6's output lives in [`crate::ledger_check`].
//!
//! Conventions are C1's: JSON bodies, errors as [`crate::lock::ErrorBody`]
//! (`{"code","message"}`), bodies over [`crate::lock::MAX_BODY_BYTES`] refused.

use serde::{Deserialize, Serialize};

use crate::input::InputError;

/// The largest `count` R7 accepts in one call.
pub const MAX_BULK_COUNT: u64 = 1_000_000;
/// Longest payout id, in bytes.
pub const MAX_PAYOUT_ID_BYTES: usize = 128;
/// Longest R7 `prefix`, in bytes (the id adds `-` and the number).
pub const MAX_BULK_PREFIX_BYTES: usize = 64;
/// The R7 prefix when none is given: ids are `p-000001`, `p-000002`, …
pub const DEFAULT_BULK_PREFIX: &str = "p";

/// Every C2 error code, with its HTTP status.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum RailErrorCode {
    /// 400: malformed JSON, a missing or ill-typed field, a negative amount, a
    /// bad id, an absurd bulk count. Fix the request.
    BadRequest,
    /// 404: no payout with that id. Create it (R1/R7) first.
    PayoutUnknown,
    /// 409: R1 for an existing id with a different amount or currency. Use a new id.
    Conflict,
    /// 409: the token is below the highest the payout has seen (fence 1 on R2/R4,
    /// fence 2 on R3). Terminal for this holder: a newer one has taken over.
    FencedOut,
    /// 409: R2 or R4 on a payout that is already PAID. Nothing left to do.
    AlreadyPaid,
    /// 409: R3 on a payout that is already PAID; nothing was paid again. A
    /// must-be-zero event: it means a worker lost track of its own submission.
    DuplicateSubmission,
    /// 409: R3 with a token that does not hold the claim (the payout is PENDING,
    /// or CLAIMED under another token). Nothing was paid; claim (R2) first.
    /// (Not in C2's table: C2 leaves submit-without-claim open.)
    NotClaimed,
    /// 413: the body is over [`crate::lock::MAX_BODY_BYTES`].
    PayloadTooLarge,
    /// 404: no such endpoint. Check the path against C2.
    NotFound,
    /// 405: the endpoint exists but not with this method.
    MethodNotAllowed,
    /// 503: the ledger store failed; nothing changed, retry later.
    Unavailable,
    /// 401: `--auth-tokens` is on and a write carried no known bearer token.
    /// Nothing changed.
    Unauthenticated,
    /// 403: the token's role may not write (a `monitor` token). Nothing changed.
    Forbidden,
}

impl RailErrorCode {
    /// The HTTP status this code travels with.
    pub fn status(self) -> u16 {
        match self {
            RailErrorCode::BadRequest => 400,
            RailErrorCode::PayoutUnknown | RailErrorCode::NotFound => 404,
            RailErrorCode::MethodNotAllowed => 405,
            RailErrorCode::Conflict
            | RailErrorCode::FencedOut
            | RailErrorCode::AlreadyPaid
            | RailErrorCode::DuplicateSubmission
            | RailErrorCode::NotClaimed => 409,
            RailErrorCode::PayloadTooLarge => 413,
            RailErrorCode::Unavailable => 503,
            RailErrorCode::Unauthenticated => 401,
            RailErrorCode::Forbidden => 403,
        }
    }

    /// The code as it appears in the `code` field.
    pub fn as_str(self) -> &'static str {
        match self {
            RailErrorCode::BadRequest => "BAD_REQUEST",
            RailErrorCode::PayoutUnknown => "PAYOUT_UNKNOWN",
            RailErrorCode::Conflict => "CONFLICT",
            RailErrorCode::FencedOut => "FENCED_OUT",
            RailErrorCode::AlreadyPaid => "ALREADY_PAID",
            RailErrorCode::DuplicateSubmission => "DUPLICATE_SUBMISSION",
            RailErrorCode::NotClaimed => "NOT_CLAIMED",
            RailErrorCode::PayloadTooLarge => "PAYLOAD_TOO_LARGE",
            RailErrorCode::NotFound => "NOT_FOUND",
            RailErrorCode::MethodNotAllowed => "METHOD_NOT_ALLOWED",
            RailErrorCode::Unavailable => "UNAVAILABLE",
            RailErrorCode::Unauthenticated => "UNAUTHENTICATED",
            RailErrorCode::Forbidden => "FORBIDDEN",
        }
    }

    /// Parses a `code` field; `None` for a code this version does not know.
    pub fn parse(code: &str) -> Option<Self> {
        serde_json::from_value(serde_json::Value::String(code.to_string())).ok()
    }
}

impl std::fmt::Display for RailErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A payout's state: `PENDING → CLAIMED → PAID`, and `CLAIMED → PENDING` on R4.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum PayoutState {
    /// Waiting for a worker.
    Pending,
    /// Claimed by the holder of `claim_token`.
    Claimed,
    /// Paid by the submission carrying `paid_token`. Terminal.
    Paid,
}

impl PayoutState {
    /// The state as it appears on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            PayoutState::Pending => "PENDING",
            PayoutState::Claimed => "CLAIMED",
            PayoutState::Paid => "PAID",
        }
    }
}

/// R1 request: create a payout (idempotent for the same body).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CreatePayoutRequest {
    /// 1–128 bytes of `[A-Za-z0-9._:-]`.
    pub payout_id: String,
    /// The amount in the currency's minor unit; must not be negative.
    pub amount_minor: i64,
    /// An ISO 4217-style code: three ASCII capital letters.
    pub currency: String,
}

/// R2/R3/R4 request: the caller's fencing token.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenRequest {
    /// The lock-server's fencing token for the payout's key.
    pub token: u64,
}

/// R2/R3/R4 reply (200): the payout's state after the request.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PayoutStatus {
    /// The payout.
    pub payout_id: String,
    /// CLAIMED after R2, PAID after R3, PENDING after R4.
    pub state: PayoutState,
    /// The token the request carried.
    pub token: u64,
}

/// R7 request: seed a backlog of `count` PENDING payouts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BulkCreateRequest {
    /// How many payouts to create: 1 to [`MAX_BULK_COUNT`].
    pub count: u64,
    /// Id prefix (default [`DEFAULT_BULK_PREFIX`]); ids are [`bulk_payout_id`].
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prefix: Option<String>,
}

/// R7 reply (201).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BulkCreated {
    /// How many payouts were created (always the requested count).
    pub created: u64,
    /// The first id created.
    pub first_payout_id: String,
    /// The last id created. Numbers already taken under the prefix are skipped,
    /// so ids are increasing but not necessarily contiguous across calls.
    pub last_payout_id: String,
}

/// The id R7 gives its `n`th payout under `prefix`: `p-000001`.
pub fn bulk_payout_id(prefix: &str, n: u64) -> String {
    format!("{prefix}-{n:06}")
}

/// The number of an R7 id under `prefix` (the inverse of [`bulk_payout_id`]),
/// or `None` when `id` is not `{prefix}-{digits}`.
pub fn bulk_payout_number(prefix: &str, id: &str) -> Option<u64> {
    let digits = id.strip_prefix(prefix)?.strip_prefix('-')?;
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    digits.parse().ok()
}

/// R7 answered with an id that is not `{prefix}-{number}`: the rail is not a
/// C2 rail-stub, or it was asked for another prefix.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("R7 answered first_payout_id {id:?}, which is not {prefix}-NUMBER")]
pub struct UnexpectedBulkId {
    /// The prefix asked for.
    pub prefix: String,
    /// The id R7 returned.
    pub id: String,
}

impl BulkCreated {
    /// The number of the first payout created, to be used with
    /// [`bulk_payout_id`]`(prefix, first + i)` for `i < created`.
    pub fn first_number(&self, prefix: &str) -> Result<u64, UnexpectedBulkId> {
        bulk_payout_number(prefix, &self.first_payout_id).ok_or_else(|| UnexpectedBulkId {
            prefix: prefix.to_string(),
            id: self.first_payout_id.clone(),
        })
    }
}

/// What became of one R3 attempt.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum SubmissionOutcome {
    /// This submission paid the payout.
    Paid,
    /// Refused by fence 2: the token was below the payout's highest.
    FencedOut,
    /// Refused: the payout was already PAID.
    Duplicate,
    /// Refused: the token did not hold the claim.
    NotClaimed,
}

/// One R3 attempt, in the order the ledger decided it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Submission {
    /// The token the submission carried.
    pub token: u64,
    /// What the ledger did with it.
    pub outcome: SubmissionOutcome,
}

/// How many R3 attempts a payout's `submissions` list holds besides the paying
/// one: the first 64 attempts are listed, and every paying attempt is always
/// listed; the others are only counted, in [`OmittedSubmissions`].
pub const MAX_LISTED_SUBMISSIONS: usize = 64;

/// The R3 attempts a payout's `submissions` list leaves out (those after the
/// first [`MAX_LISTED_SUBMISSIONS`]; a paying attempt is never left out), by
/// outcome, with the highest token among the fenced-out ones — what
/// [`crate::ledger_check::check_ledger`] needs to judge the payout without them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct OmittedSubmissions {
    /// Attempts refused by fence 2.
    pub fenced_out: u64,
    /// Attempts on a payout already PAID.
    pub duplicate: u64,
    /// Attempts by a token that did not hold the claim.
    pub not_claimed: u64,
    /// The highest token among the omitted fenced-out attempts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_fenced_token: Option<u64>,
}

impl OmittedSubmissions {
    /// Counts one attempt that is not listed. A paying attempt is never
    /// omitted; counting one is a caller bug, and is refused.
    pub fn count(&mut self, s: Submission) -> Result<(), Submission> {
        match s.outcome {
            SubmissionOutcome::Paid => return Err(s),
            SubmissionOutcome::FencedOut => {
                self.fenced_out += 1;
                self.max_fenced_token = self.max_fenced_token.max(Some(s.token));
            }
            SubmissionOutcome::Duplicate => self.duplicate += 1,
            SubmissionOutcome::NotClaimed => self.not_claimed += 1,
        }
        Ok(())
    }

    /// How many attempts were omitted.
    pub fn total(&self) -> u64 {
        self.fenced_out + self.duplicate + self.not_claimed
    }

    /// True when nothing was omitted.
    pub fn is_empty(&self) -> bool {
        *self == OmittedSubmissions::default()
    }
}

/// R5 reply, and one entry of R6.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PayoutView {
    /// The payout.
    pub payout_id: String,
    /// Amount in minor units.
    pub amount_minor: i64,
    /// Currency code.
    pub currency: String,
    /// PENDING, CLAIMED or PAID.
    pub state: PayoutState,
    /// The token holding the claim (CLAIMED, and kept once PAID); `null` when PENDING.
    #[serde(default)]
    pub claim_token: Option<u64>,
    /// The token of the submission that paid it; absent unless PAID.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub paid_token: Option<u64>,
    /// The highest token of any accepted R2/R3/R4 request; 0 before any.
    #[serde(default)]
    pub highest_token: u64,
    /// The R3 attempts on this payout, in the order decided: the first
    /// [`MAX_LISTED_SUBMISSIONS`], and every paying one.
    #[serde(default)]
    pub submissions: Vec<Submission>,
    /// The attempts `submissions` leaves out, counted; absent when none is.
    #[serde(default, skip_serializing_if = "OmittedSubmissions::is_empty")]
    pub submissions_omitted: OmittedSubmissions,
}

/// The rail-stub's counters, as R6 reports them (C5 names in the docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LedgerCounters {
    /// `lock.fenced.out{fence="1"}`: R2/R4 refused for a stale token. Healthy: 0.
    pub fenced_out_fence1: u64,
    /// `lock.fenced.out{fence="2"}`: R3 refused for a stale token. Healthy: 0.
    pub fenced_out_fence2: u64,
    /// `rail.duplicate.attempted`: R3 on a PAID payout. Healthy: 0.
    pub duplicate_attempted: u64,
    /// R3 refused with NOT_CLAIMED.
    pub not_claimed: u64,
    /// R2/R4 refused with ALREADY_PAID.
    pub already_paid: u64,
    /// Payouts paid.
    pub paid: u64,
}

/// R6 reply: every payout as in R5, in creation order, plus the counters.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LedgerView {
    /// Every payout.
    pub payouts: Vec<PayoutView>,
    /// The counters, taken in the same instant as the payouts.
    pub counters: LedgerCounters,
}

/// The rule for payout ids, in words.
const PAYOUT_ID_RULE: &str = "payout ids are 1-128 bytes of [A-Za-z0-9._:-]";

/// Checks a payout id: 1–128 bytes of `[A-Za-z0-9._:-]`, and not `bulk` (R7's path).
pub fn validate_payout_id(id: &str) -> Result<(), InputError> {
    const FIELD: &str = "payout_id";
    if id.is_empty() {
        return Err(InputError::Empty {
            field: FIELD,
            rule: PAYOUT_ID_RULE,
        });
    }
    if id.len() > MAX_PAYOUT_ID_BYTES {
        return Err(InputError::TooLong {
            field: FIELD,
            len: id.len(),
            unit: "bytes",
            rule: PAYOUT_ID_RULE,
        });
    }
    if let Some(ch) = id
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-')))
    {
        return Err(InputError::BadChar {
            field: FIELD,
            ch,
            rule: PAYOUT_ID_RULE,
        });
    }
    if id == "bulk" {
        return Err(InputError::Reserved {
            field: FIELD,
            value: id.to_string(),
            why: "it is R7's path (POST /v1/payouts/bulk)",
        });
    }
    Ok(())
}

/// Checks a currency: exactly three ASCII capital letters (`EUR`, `USD`).
pub fn validate_currency(currency: &str) -> Result<(), InputError> {
    if currency.len() == 3 && currency.bytes().all(|b| b.is_ascii_uppercase()) {
        Ok(())
    } else {
        Err(InputError::Currency(currency.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_round_trip_and_carry_their_status() {
        for code in [
            RailErrorCode::BadRequest,
            RailErrorCode::PayoutUnknown,
            RailErrorCode::Conflict,
            RailErrorCode::FencedOut,
            RailErrorCode::AlreadyPaid,
            RailErrorCode::DuplicateSubmission,
            RailErrorCode::NotClaimed,
            RailErrorCode::PayloadTooLarge,
            RailErrorCode::NotFound,
            RailErrorCode::MethodNotAllowed,
            RailErrorCode::Unavailable,
        ] {
            assert_eq!(RailErrorCode::parse(code.as_str()), Some(code));
            assert!(code.status() >= 400);
        }
        assert_eq!(RailErrorCode::FencedOut.status(), 409);
        assert_eq!(RailErrorCode::PayloadTooLarge.status(), 413);
    }

    #[test]
    fn ids_and_currencies_are_validated_with_reasons() {
        assert!(validate_payout_id("p-000001").is_ok());
        assert!(validate_payout_id("").is_err());
        assert!(
            validate_payout_id("bulk")
                .unwrap_err()
                .to_string()
                .contains("reserved")
        );
        assert!(
            validate_payout_id("a/b")
                .unwrap_err()
                .to_string()
                .contains("'/'")
        );
        assert!(validate_payout_id(&"x".repeat(129)).is_err());
        assert!(validate_currency("EUR").is_ok());
        assert!(validate_currency("eur").is_err());
        assert_eq!(bulk_payout_id("p", 1), "p-000001");
        assert_eq!(bulk_payout_id("run7", 1_000_000), "run7-1000000");
    }

    #[test]
    fn bulk_numbers_invert_bulk_ids() {
        for (prefix, n) in [("p", 1), ("bench", 42), ("run-7", 1_000_000)] {
            assert_eq!(
                bulk_payout_number(prefix, &bulk_payout_id(prefix, n)),
                Some(n)
            );
        }
        assert_eq!(bulk_payout_number("p", "q-000001"), None);
        assert_eq!(bulk_payout_number("p", "p-"), None);
        assert_eq!(bulk_payout_number("p", "p-12a"), None);
        assert_eq!(bulk_payout_number("p", "p000001"), None);
        let created = BulkCreated {
            created: 2,
            first_payout_id: "bench-000007".into(),
            last_payout_id: "bench-000008".into(),
        };
        assert_eq!(created.first_number("bench"), Ok(7));
        let err = created.first_number("pause").unwrap_err();
        assert!(err.to_string().contains("bench-000007"), "{err}");
    }
}
