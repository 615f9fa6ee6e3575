//! C2: the rail-stub's wire types, error codes, and the shared ledger invariant
//! check ([`check_ledger`]) that the rail-stub's tests, the bench and the pause
//! experiment all run on R6's output.
//!
//! The invariant C2 asks anyone to be able to check: **every payout is paid at
//! most once, by a submission whose token was the highest the payout had seen.**
//! R5/R6 carry, per payout, every R3 attempt in arrival order (`submissions`,
//! each `{token, outcome}`) and `highest_token` (the highest token of any
//! *accepted* R2/R3/R4 request), which is enough to decide it from the JSON
//! alone, with no access to the rail-stub's memory.
//!
//! Conventions are C1's: JSON bodies, errors as [`crate::lock::ErrorBody`]
//! (`{"code","message"}`), bodies over [`crate::lock::MAX_BODY_BYTES`] refused.

use serde::{Deserialize, Serialize};

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
    /// Every R3 attempt on this payout, in the order decided.
    #[serde(default)]
    pub submissions: Vec<Submission>,
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

/// Which rule a [`Violation`] breaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ViolationKind {
    /// More than one submission paid the payout.
    PaidTwice,
    /// The paying token was below a token the payout had already seen.
    StalePaid,
    /// The payout's fields disagree with each other or with its submissions
    /// (e.g. PAID without a paying submission, or `paid_token` not the payer's).
    Inconsistent,
    /// A counter disagrees with the submissions recorded (ledger-wide).
    CounterMismatch,
}

/// One broken rule, with the payout it concerns and a sentence saying why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Violation {
    /// The payout; `None` for a ledger-wide violation.
    pub payout_id: Option<String>,
    /// The rule broken.
    pub kind: ViolationKind,
    /// Why, in words, with the tokens involved.
    pub detail: String,
}

/// What [`check_ledger`] found: the counts the bench reports, and every violation.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LedgerCheck {
    /// Payouts in the ledger.
    pub payouts: u64,
    /// Payouts in state PAID.
    pub paid: u64,
    /// Payouts paid by more than one submission. Must be 0.
    pub paid_twice: u64,
    /// Payouts paid by a token below one they had seen. Must be 0.
    pub stale_paid: u64,
    /// Fence-1 refusals (R2/R4), from the counters.
    pub fenced_out_fence1: u64,
    /// Fence-2 refusals (R3), from the counters.
    pub fenced_out_fence2: u64,
    /// Both fences together.
    pub fenced_out_total: u64,
    /// Submissions on PAID payouts, from the counters.
    pub duplicate_attempted: u64,
    /// Submissions refused with NOT_CLAIMED, from the counters.
    pub not_claimed: u64,
    /// Every broken rule; empty means the invariant holds.
    pub violations: Vec<Violation>,
}

impl LedgerCheck {
    /// True when no rule is broken: every payout paid at most once, by its highest token.
    pub fn holds(&self) -> bool {
        self.violations.is_empty()
    }
}

/// Checks R6's output against the C2 invariant: every payout paid at most once,
/// by a submission whose token was the highest the payout had seen.
///
/// Per payout it checks that at most one submission is `PAID`; that the state,
/// `paid_token` and the paying submission agree; that the paying token is not
/// below `highest_token` and is above every token fenced out before it (a
/// fence-2 refusal of token `u` proves a token above `u` had been accepted).
/// "Seen" means accepted: a refused request never raises `highest_token`. Ledger-wide, it checks
/// that the fence-2, duplicate, not-claimed and paid counters equal what the
/// submissions record. Fence-1 refusals leave no per-payout trace, so that
/// count is taken from the counters as given.
pub fn check_ledger(ledger: &LedgerView) -> LedgerCheck {
    let mut check = LedgerCheck {
        payouts: ledger.payouts.len() as u64,
        fenced_out_fence1: ledger.counters.fenced_out_fence1,
        fenced_out_fence2: ledger.counters.fenced_out_fence2,
        fenced_out_total: ledger.counters.fenced_out_fence1 + ledger.counters.fenced_out_fence2,
        duplicate_attempted: ledger.counters.duplicate_attempted,
        not_claimed: ledger.counters.not_claimed,
        ..LedgerCheck::default()
    };
    // Tallies of what the submissions record, to compare with the counters.
    let mut recorded = LedgerCounters::default();
    for p in &ledger.payouts {
        check_payout(p, &mut check);
        for s in &p.submissions {
            match s.outcome {
                SubmissionOutcome::Paid => recorded.paid += 1,
                SubmissionOutcome::FencedOut => recorded.fenced_out_fence2 += 1,
                SubmissionOutcome::Duplicate => recorded.duplicate_attempted += 1,
                SubmissionOutcome::NotClaimed => recorded.not_claimed += 1,
            }
        }
    }
    let c = &ledger.counters;
    for (name, counted, seen) in [
        ("paid", c.paid, recorded.paid),
        (
            "fenced_out_fence2",
            c.fenced_out_fence2,
            recorded.fenced_out_fence2,
        ),
        (
            "duplicate_attempted",
            c.duplicate_attempted,
            recorded.duplicate_attempted,
        ),
        ("not_claimed", c.not_claimed, recorded.not_claimed),
    ] {
        if counted != seen {
            check.violations.push(Violation {
                payout_id: None,
                kind: ViolationKind::CounterMismatch,
                detail: format!("counter {name} is {counted} but the submissions record {seen}"),
            });
        }
    }
    check
}

/// Checks one payout, adding to `check`'s counts and violations.
fn check_payout(p: &PayoutView, check: &mut LedgerCheck) {
    let mut violate = |kind, detail: String| {
        check.violations.push(Violation {
            payout_id: Some(p.payout_id.clone()),
            kind,
            detail,
        })
    };
    let payers: Vec<u64> = p
        .submissions
        .iter()
        .filter(|s| s.outcome == SubmissionOutcome::Paid)
        .map(|s| s.token)
        .collect();
    let is_paid = p.state == PayoutState::Paid;

    if payers.len() > 1 {
        violate(
            ViolationKind::PaidTwice,
            format!("paid {} times, by tokens {payers:?}", payers.len()),
        );
    }
    match (is_paid, p.paid_token, payers.first()) {
        (true, Some(paid), Some(&first)) if paid != first => violate(
            ViolationKind::Inconsistent,
            format!("paid_token is {paid} but the paying submission carried {first}"),
        ),
        (true, Some(_), Some(_)) | (false, None, None) => {}
        (true, _, _) => violate(
            ViolationKind::Inconsistent,
            format!(
                "state PAID but paid_token is {:?} and {} submission(s) paid",
                p.paid_token,
                payers.len()
            ),
        ),
        (false, _, _) => violate(
            ViolationKind::Inconsistent,
            format!(
                "state {} but paid_token is {:?} and {} submission(s) paid",
                p.state.as_str(),
                p.paid_token,
                payers.len()
            ),
        ),
    }

    // Stale payment: below the highest accepted token, or not above a token an
    // earlier submission was fenced out with (a fence-2 refusal of token u
    // proves the payout had already accepted a token above u).
    let mut stale = false;
    let mut fenced_before: Option<u64> = None;
    for s in &p.submissions {
        match s.outcome {
            SubmissionOutcome::Paid if s.token < p.highest_token => {
                stale = true;
                violate(
                    ViolationKind::StalePaid,
                    format!(
                        "paid by token {} below the highest token {}",
                        s.token, p.highest_token
                    ),
                );
            }
            SubmissionOutcome::Paid if fenced_before.is_some_and(|u| s.token <= u) => {
                stale = true;
                violate(
                    ViolationKind::StalePaid,
                    format!(
                        "paid by token {} after token {} had already been fenced out",
                        s.token,
                        fenced_before.unwrap_or_default()
                    ),
                );
            }
            SubmissionOutcome::FencedOut => {
                fenced_before = fenced_before.max(Some(s.token));
            }
            _ => {}
        }
    }

    if is_paid {
        check.paid += 1;
    }
    if payers.len() > 1 {
        check.paid_twice += 1;
    }
    if stale {
        check.stale_paid += 1;
    }
}

/// Checks a payout id: 1–128 bytes of `[A-Za-z0-9._:-]`, and not `bulk` (R7's path).
pub fn validate_payout_id(id: &str) -> Result<(), String> {
    if id.is_empty() || id.len() > MAX_PAYOUT_ID_BYTES {
        return Err(format!(
            "payout_id is {} bytes; it must be 1-{MAX_PAYOUT_ID_BYTES} bytes of [A-Za-z0-9._:-]",
            id.len()
        ));
    }
    if let Some(c) = id
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-')))
    {
        return Err(format!(
            "payout_id contains {c:?}; payout ids are 1-{MAX_PAYOUT_ID_BYTES} bytes of [A-Za-z0-9._:-]"
        ));
    }
    if id == "bulk" {
        return Err("payout_id \"bulk\" is reserved for R7 (POST /v1/payouts/bulk)".into());
    }
    Ok(())
}

/// Checks a currency: exactly three ASCII capital letters (`EUR`, `USD`).
pub fn validate_currency(currency: &str) -> Result<(), String> {
    if currency.len() == 3 && currency.bytes().all(|b| b.is_ascii_uppercase()) {
        Ok(())
    } else {
        Err(format!(
            "currency {currency:?} is not three capital letters (e.g. \"EUR\")"
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sub(token: u64, outcome: SubmissionOutcome) -> Submission {
        Submission { token, outcome }
    }

    fn payout(id: &str, state: PayoutState, highest: u64, subs: Vec<Submission>) -> PayoutView {
        let paid_token = subs
            .iter()
            .find(|s| s.outcome == SubmissionOutcome::Paid)
            .map(|s| s.token);
        PayoutView {
            payout_id: id.into(),
            amount_minor: 100,
            currency: "EUR".into(),
            state,
            claim_token: paid_token,
            paid_token: if state == PayoutState::Paid {
                paid_token
            } else {
                None
            },
            highest_token: highest,
            submissions: subs,
        }
    }

    /// Counters consistent with the submissions, plus `fence1` fence-1 refusals.
    fn ledger(payouts: Vec<PayoutView>, fence1: u64) -> LedgerView {
        let mut counters = LedgerCounters {
            fenced_out_fence1: fence1,
            ..LedgerCounters::default()
        };
        for s in payouts.iter().flat_map(|p| &p.submissions) {
            match s.outcome {
                SubmissionOutcome::Paid => counters.paid += 1,
                SubmissionOutcome::FencedOut => counters.fenced_out_fence2 += 1,
                SubmissionOutcome::Duplicate => counters.duplicate_attempted += 1,
                SubmissionOutcome::NotClaimed => counters.not_claimed += 1,
            }
        }
        LedgerView { payouts, counters }
    }

    fn kinds(check: &LedgerCheck) -> Vec<(Option<&str>, ViolationKind)> {
        check
            .violations
            .iter()
            .map(|v| (v.payout_id.as_deref(), v.kind))
            .collect()
    }

    #[test]
    fn a_healthy_ledger_holds_and_is_counted() {
        use SubmissionOutcome::*;
        let l = ledger(
            vec![
                payout(
                    "a",
                    PayoutState::Paid,
                    7,
                    vec![
                        sub(5, NotClaimed),
                        sub(7, Paid),
                        sub(6, FencedOut),
                        sub(7, Duplicate),
                    ],
                ),
                payout("b", PayoutState::Claimed, 3, vec![sub(2, FencedOut)]),
                payout("c", PayoutState::Pending, 0, vec![]),
            ],
            4,
        );
        let check = check_ledger(&l);
        assert!(check.holds(), "{:?}", check.violations);
        assert_eq!(
            (
                check.payouts,
                check.paid,
                check.paid_twice,
                check.stale_paid
            ),
            (3, 1, 0, 0)
        );
        assert_eq!(
            (
                check.fenced_out_fence1,
                check.fenced_out_fence2,
                check.fenced_out_total
            ),
            (4, 2, 6)
        );
        assert_eq!((check.duplicate_attempted, check.not_claimed), (1, 1));
    }

    #[test]
    fn a_payout_paid_twice_is_a_violation() {
        use SubmissionOutcome::*;
        let l = ledger(
            vec![payout(
                "a",
                PayoutState::Paid,
                7,
                vec![sub(7, Paid), sub(7, Paid)],
            )],
            0,
        );
        let check = check_ledger(&l);
        assert_eq!(check.paid_twice, 1);
        assert_eq!(kinds(&check), vec![(Some("a"), ViolationKind::PaidTwice)]);
        assert!(check.violations[0].detail.contains("[7, 7]"));
    }

    #[test]
    fn a_payout_paid_by_a_token_below_its_highest_is_stale() {
        use SubmissionOutcome::*;
        let l = ledger(
            vec![payout("a", PayoutState::Paid, 9, vec![sub(4, Paid)])],
            0,
        );
        let check = check_ledger(&l);
        assert_eq!(check.stale_paid, 1);
        assert_eq!(kinds(&check), vec![(Some("a"), ViolationKind::StalePaid)]);
        assert!(
            check.violations[0]
                .detail
                .contains("token 4 below the highest token 9")
        );
    }

    #[test]
    fn a_payment_not_above_an_earlier_fenced_token_is_stale_even_if_highest_was_lost() {
        use SubmissionOutcome::*;
        // highest_token was (wrongly) lowered, but fencing out 5 proves more than 5 was accepted.
        let l = ledger(
            vec![payout(
                "a",
                PayoutState::Paid,
                5,
                vec![sub(5, FencedOut), sub(5, Paid)],
            )],
            0,
        );
        let check = check_ledger(&l);
        assert_eq!(check.stale_paid, 1);
        assert_eq!(kinds(&check), vec![(Some("a"), ViolationKind::StalePaid)]);
    }

    #[test]
    fn state_paid_token_and_submissions_must_agree() {
        use SubmissionOutcome::*;
        let mut paid_without_payer = payout("a", PayoutState::Paid, 3, vec![]);
        paid_without_payer.paid_token = Some(3);
        let paying_but_pending = payout("b", PayoutState::Pending, 3, vec![sub(3, Paid)]);
        let mut wrong_paid_token = payout("c", PayoutState::Paid, 3, vec![sub(3, Paid)]);
        wrong_paid_token.paid_token = Some(2);
        let l = ledger(
            vec![paid_without_payer, paying_but_pending, wrong_paid_token],
            0,
        );
        let check = check_ledger(&l);
        assert_eq!(
            kinds(&check),
            vec![
                (Some("a"), ViolationKind::Inconsistent),
                (Some("b"), ViolationKind::Inconsistent),
                (Some("c"), ViolationKind::Inconsistent),
            ]
        );
    }

    #[test]
    fn counters_that_disagree_with_the_submissions_are_reported() {
        use SubmissionOutcome::*;
        let mut l = ledger(
            vec![payout(
                "a",
                PayoutState::Paid,
                2,
                vec![sub(1, FencedOut), sub(2, Paid), sub(2, Duplicate)],
            )],
            0,
        );
        l.counters.duplicate_attempted = 0;
        l.counters.fenced_out_fence2 = 5;
        let check = check_ledger(&l);
        assert_eq!(
            kinds(&check),
            vec![
                (None, ViolationKind::CounterMismatch),
                (None, ViolationKind::CounterMismatch)
            ]
        );
        assert!(
            check
                .violations
                .iter()
                .any(|v| v.detail.contains("duplicate_attempted is 0"))
        );
        // The reported counts are the counters' (what the metrics showed), not recomputed.
        assert_eq!(check.duplicate_attempted, 0);
    }

    #[test]
    fn ledger_json_round_trips_and_pending_claim_token_is_null() {
        let l = ledger(vec![payout("a", PayoutState::Pending, 0, vec![])], 0);
        let text = serde_json::to_string(&l).unwrap();
        assert!(text.contains(r#""claim_token":null"#), "{text}");
        assert!(!text.contains("paid_token"), "{text}");
        assert_eq!(serde_json::from_str::<LedgerView>(&text).unwrap(), l);
    }

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
        assert!(validate_payout_id("bulk").unwrap_err().contains("reserved"));
        assert!(validate_payout_id("a/b").unwrap_err().contains("'/'"));
        assert!(validate_payout_id(&"x".repeat(129)).is_err());
        assert!(validate_currency("EUR").is_ok());
        assert!(validate_currency("eur").is_err());
        assert_eq!(bulk_payout_id("p", 1), "p-000001");
        assert_eq!(bulk_payout_id("run7", 1_000_000), "run7-1000000");
    }
}
