//! The C2 ledger invariant, checked from R6's output alone: **every payout is
//! paid at most once, by a submission whose token was the highest the payout
//! had seen.** R5/R6 carry, per payout, its R3 attempts in arrival order
//! (`submissions`, each `{token, outcome}`: the first 64 and every paying one),
//! the attempts left out as counts with their highest fenced-out token
//! (`submissions_omitted`), and `highest_token` (the highest token of any
//! *accepted* R2/R3/R4 request), which is enough to decide it with no access
//! to the rail-stub's memory. The rail-stub's tests, the bench and every
//! experiment run [`check_ledger`] after their cells.

use serde::{Deserialize, Serialize};

use crate::rail::{LedgerCounters, LedgerView, PayoutState, PayoutView, SubmissionOutcome};

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
        let o = &p.submissions_omitted;
        recorded.fenced_out_fence2 += o.fenced_out;
        recorded.duplicate_attempted += o.duplicate;
        recorded.not_claimed += o.not_claimed;
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
    // Omitted attempts have no place in the order; a fenced-out one is taken
    // as possibly before the payment. That is exact for a sound rail: once a
    // payout is paid its highest token stays the payer's, so every fenced-out
    // token, before or after, is below it.
    if let Some(u) = p.submissions_omitted.max_fenced_token {
        for &payer in payers.iter().filter(|&&t| t <= u) {
            stale = true;
            violate(
                ViolationKind::StalePaid,
                format!(
                    "paid by token {payer} although token {u} was fenced out (an omitted submission)"
                ),
            );
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rail::Submission;

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
            submissions_omitted: Default::default(),
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
    fn omitted_submissions_count_and_their_fenced_tokens_still_judge_the_payment() {
        use SubmissionOutcome::*;
        let mut p = payout(
            "a",
            PayoutState::Paid,
            9,
            vec![sub(3, NotClaimed), sub(9, Paid)],
        );
        for s in [
            sub(4, FencedOut),
            sub(8, FencedOut),
            sub(9, Duplicate),
            sub(2, NotClaimed),
        ] {
            p.submissions_omitted.count(s).unwrap();
        }
        assert!(
            p.submissions_omitted.count(sub(9, Paid)).is_err(),
            "a payer is never omitted"
        );
        let mut l = ledger(vec![p.clone()], 0);
        l.counters.fenced_out_fence2 += 2;
        l.counters.duplicate_attempted += 1;
        l.counters.not_claimed += 1;
        let check = check_ledger(&l);
        assert!(check.holds(), "{:?}", check.violations);
        // Counters must also account for the omitted ones.
        let mut short = l.clone();
        short.counters.fenced_out_fence2 -= 2;
        assert_eq!(
            kinds(&check_ledger(&short)),
            vec![(None, ViolationKind::CounterMismatch)]
        );
        // An omitted fenced-out token at or above the payer's makes the payment stale.
        let mut bad = l;
        bad.payouts[0].submissions_omitted.max_fenced_token = Some(9);
        let check = check_ledger(&bad);
        assert_eq!(check.stale_paid, 1);
        assert_eq!(kinds(&check), vec![(Some("a"), ViolationKind::StalePaid)]);
        // R5/R6 say what was left out, and nothing when nothing was.
        let text = serde_json::to_string(&p).unwrap();
        assert!(text.contains(r#""submissions_omitted":{"fenced_out":2,"duplicate":1,"not_claimed":1,"max_fenced_token":8}"#), "{text}");
        let plain = payout("b", PayoutState::Pending, 0, vec![]);
        assert!(!serde_json::to_string(&plain).unwrap().contains("omitted"));
    }

    #[test]
    fn ledger_json_round_trips_and_pending_claim_token_is_null() {
        let l = ledger(vec![payout("a", PayoutState::Pending, 0, vec![])], 0);
        let text = serde_json::to_string(&l).unwrap();
        assert!(text.contains(r#""claim_token":null"#), "{text}");
        assert!(!text.contains("paid_token"), "{text}");
        assert_eq!(serde_json::from_str::<LedgerView>(&text).unwrap(), l);
    }
}
