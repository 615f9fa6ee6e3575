//! The checker's rules on hand-written histories.

use fencepost_api::rail::{PayoutState, PayoutView, Submission};

use super::*;

const MS: u64 = 1_000_000;

/// A hand-written history: one builder per scenario.
#[derive(Default)]
struct H {
    ops: Vec<Op>,
}

impl H {
    fn op(
        &mut self,
        kind: OpKind,
        session: &str,
        token: Option<u64>,
        at_ms: (u64, Option<u64>),
        outcome: Outcome,
    ) -> &mut Op {
        let id = self.ops.len() as u64;
        self.ops.push(Op {
            proc: session.split('/').next().unwrap_or("w").to_string(),
            id,
            kind,
            session: session.to_string(),
            payout: (kind != OpKind::Session).then(|| "p1".to_string()),
            token,
            inv_ns: at_ms.0 * MS,
            ok_ns: at_ms.1.map(|t| t * MS),
            outcome: at_ms.1.map(|_| outcome),
            deadline_ns: None,
            client_check: None,
            key: None,
        });
        self.ops.last_mut().unwrap()
    }

    fn session(&mut self, s: &str, client_check: bool) {
        self.op(OpKind::Session, s, None, (0, Some(0)), Outcome::Ok)
            .client_check = Some(client_check);
    }

    /// A grant at `at` whose client deadline is `deadline`.
    fn grant(&mut self, s: &str, token: u64, at: u64, deadline: u64) {
        self.op(
            OpKind::Grant,
            s,
            None,
            (at.saturating_sub(1), Some(at)),
            Outcome::Ok,
        )
        .token = Some(token);
        self.ops.last_mut().unwrap().deadline_ns = Some(deadline * MS);
    }

    /// A complete, correct payout by `s` under `token` from `at`.
    fn holder(&mut self, s: &str, token: u64, at: u64, paid: Outcome) {
        self.session(s, true);
        self.grant(s, token, at, at + 70);
        let t = Some(token);
        self.op(OpKind::Claim, s, t, (at + 1, Some(at + 2)), Outcome::Ok);
        self.op(OpKind::Check, s, t, (at + 3, Some(at + 3)), Outcome::Ok)
            .deadline_ns = Some((at + 70) * MS);
        self.op(OpKind::Submit, s, t, (at + 4, Some(at + 9)), paid);
        self.op(OpKind::Release, s, t, (at + 10, Some(at + 11)), Outcome::Ok);
    }

    fn check(&self, ledger: &LedgerView, reported: u64) -> HistoryCheck {
        check(&self.ops, ledger, reported)
    }
}

fn ledger(submissions: &[(u64, SubmissionOutcome)]) -> LedgerView {
    let paid = submissions
        .iter()
        .rfind(|s| s.1 == SubmissionOutcome::Paid)
        .map(|s| s.0);
    LedgerView {
        payouts: vec![PayoutView {
            payout_id: "p1".into(),
            amount_minor: 1,
            currency: "EUR".into(),
            state: if paid.is_some() {
                PayoutState::Paid
            } else {
                PayoutState::Pending
            },
            claim_token: paid,
            paid_token: paid,
            highest_token: submissions.iter().map(|s| s.0).max().unwrap_or(0),
            submissions: submissions
                .iter()
                .map(|&(token, outcome)| Submission { token, outcome })
                .collect(),
            submissions_omitted: Default::default(),
        }],
        counters: Default::default(),
    }
}

fn rules(c: &HistoryCheck) -> Vec<Rule> {
    c.violations.iter().map(|v| v.rule).collect()
}

mod legs;
mod renewals;

#[test]
fn a_clean_takeover_history_holds() {
    let mut h = H::default();
    h.holder("a/s1", 5, 0, Outcome::Ok);
    let c = h.check(&ledger(&[(5, SubmissionOutcome::Paid)]), 0);
    assert!(c.holds(), "{:?}", c.violations);
    assert_eq!(c.operations_checked, 6);
}

#[test]
fn an_unfenced_overlap_of_beliefs_is_caught() {
    let mut h = H::default();
    // a believes until 70 ms (it never releases: killed, say), b is granted at 40 ms.
    h.session("a/s1", true);
    h.grant("a/s1", 5, 0, 70);
    h.holder("b/s1", 6, 40, Outcome::Ok);
    let c = h.check(&ledger(&[(6, SubmissionOutcome::Paid)]), 0);
    assert_eq!(c.overlaps, 1, "{:?}", c.violations);
    assert_eq!(rules(&c), [Rule::Overlap, Rule::GrantOverlap]);
    assert_eq!(c.history_violations(), 2);
}

#[test]
fn a_grant_after_the_earlier_belief_ended_is_no_grant_overlap() {
    let mut h = H::default();
    h.session("a/s1", true);
    h.grant("a/s1", 5, 0, 70);
    // Granted after a's deadline (a was killed: it never released).
    h.holder("b/s1", 6, 71, Outcome::Ok);
    let c = h.check(&ledger(&[(6, SubmissionOutcome::Paid)]), 0);
    assert!(c.holds(), "{:?}", c.violations);
    assert_eq!(c.grant_overlaps, 0);
}

#[test]
fn an_overlap_the_fence_covered_passes_rule_4_and_fails_the_lock_rule() {
    let mut h = H::default();
    h.session("a/s1", false);
    h.grant("a/s1", 5, 0, 70);
    h.op(
        OpKind::Claim,
        "a/s1",
        Some(5),
        (50, Some(51)),
        Outcome::FencedOut,
    );
    h.holder("b/s1", 6, 40, Outcome::Ok);
    let c = h.check(&ledger(&[(6, SubmissionOutcome::Paid)]), 0);
    // The payment rules forgive it: the fence caught token 5.
    assert_eq!(c.fenced_overlaps, 1);
    assert_eq!(c.overlaps, 0);
    // The lock rule does not: the service granted 6 while 5 was live.
    assert_eq!(rules(&c), [Rule::GrantOverlap], "{:?}", c.violations);
    assert_eq!(c.grant_overlaps, 1);
}

/// A grant asked at 0 whose reply came at 1,035 ms, after a higher token's
/// grant at 508 ms: with the reply's time as its recorded deadline (how a
/// lost-at-reply grant was recorded before) rule 6 reads the reply as the
/// end the service owed it and fires; recorded as it is now, with no
/// deadline (it lay somewhere before the reply), rule 6 cannot weigh it.
#[test]
fn a_grant_lost_by_its_reply_owes_nothing_rule_6_can_weigh() {
    for (deadline, overlaps) in [(Some(1_035 * MS), 1), (None, 0)] {
        let mut h = H::default();
        h.session("a/s1", true);
        h.op(
            OpKind::Grant,
            "a/s1",
            Some(1),
            (0, Some(1_035)),
            Outcome::Ok,
        )
        .deadline_ns = deadline;
        h.holder("b/s1", 2, 508, Outcome::Ok);
        let c = h.check(&ledger(&[(2, SubmissionOutcome::Paid)]), 0);
        assert_eq!(
            c.grant_overlaps, overlaps,
            "{deadline:?}: {:?}",
            c.violations
        );
        assert_eq!(c.overlaps, 0, "the late grant's belief is empty");
    }
}

#[test]
fn a_release_ends_the_belief_so_a_later_grant_does_not_overlap() {
    let mut h = H::default();
    h.holder("a/s1", 5, 0, Outcome::Ok);
    // a released at 10 ms though its deadline was 70 ms.
    h.holder("b/s1", 6, 20, Outcome::AlreadyPaid);
    let c = h.check(&ledger(&[(5, SubmissionOutcome::Paid)]), 0);
    assert_eq!(c.overlaps, 0, "{:?}", c.violations);
}

#[test]
fn a_token_regression_across_a_restart_is_caught() {
    let mut h = H::default();
    h.holder("a/s1", 9, 0, Outcome::Ok);
    // After a restart that lost the key's token, a later grant gets 3.
    h.holder("b/s1", 3, 200, Outcome::Duplicate);
    let c = h.check(&ledger(&[(9, SubmissionOutcome::Paid)]), 0);
    assert_eq!(c.token_regressions, 1, "{:?}", c.violations);
    assert_eq!(rules(&c), [Rule::TokenRegression]);
}

#[test]
fn the_holder_granted_its_own_token_again_is_no_regression() {
    let mut h = H::default();
    h.session("a/s1", true);
    h.grant("a/s1", 2, 0, 70);
    // Its release got no answer and did not take effect; its next L4
    // of the key gets the grant it still has.
    h.op(
        OpKind::Release,
        "a/s1",
        Some(2),
        (10, Some(40)),
        Outcome::Failed,
    );
    h.grant("a/s1", 2, 50, 120);
    let c = h.check(&LedgerView::default(), 0);
    assert_eq!(c.token_regressions, 0, "{:?}", c.violations);
    // Another session granted that token would be one.
    h.grant("b/s1", 2, 200, 270);
    let c = h.check(&LedgerView::default(), 0);
    assert_eq!(c.token_regressions, 1, "{:?}", c.violations);
}

#[test]
fn concurrent_grants_are_not_ordered_so_no_regression_is_claimed() {
    let mut h = H::default();
    h.session("a/s1", true);
    h.session("b/s1", true);
    // Both invoked before either completed: real time does not order them.
    h.op(OpKind::Grant, "a/s1", Some(7), (0, Some(10)), Outcome::Ok);
    h.op(OpKind::Grant, "b/s1", Some(6), (5, Some(6)), Outcome::Ok);
    let c = h.check(&LedgerView::default(), 0);
    assert_eq!(c.token_regressions, 0);
}

#[test]
fn a_double_payment_is_caught_from_the_clients_and_the_ledger() {
    let mut h = H::default();
    h.holder("a/s1", 5, 0, Outcome::Ok);
    h.holder("b/s1", 6, 100, Outcome::Ok);
    let l = ledger(&[(5, SubmissionOutcome::Paid), (6, SubmissionOutcome::Paid)]);
    let c = h.check(&l, 0);
    assert_eq!(c.paid_twice, 1, "{:?}", c.violations);
    // The ledger alone says so too (a worker killed before it saw the reply).
    let c = check(&[], &l, 0);
    assert_eq!(c.paid_twice, 1);
}

#[test]
fn a_stale_payment_after_a_higher_claim_is_caught() {
    let mut h = H::default();
    h.session("a/s1", false);
    h.grant("a/s1", 5, 0, 70);
    h.op(OpKind::Claim, "a/s1", Some(5), (1, Some(2)), Outcome::Ok);
    // b takes over (a was frozen), claims under 6 at 150 ms ...
    h.session("b/s1", true);
    h.grant("b/s1", 6, 149, 219);
    h.op(
        OpKind::Claim,
        "b/s1",
        Some(6),
        (150, Some(151)),
        Outcome::Ok,
    );
    // ... and a, resumed, submits under 5 at 160 ms and is paid.
    h.op(
        OpKind::Submit,
        "a/s1",
        Some(5),
        (160, Some(165)),
        Outcome::Ok,
    );
    let c = h.check(
        &ledger(&[
            (5, SubmissionOutcome::Paid),
            (6, SubmissionOutcome::NotClaimed),
        ]),
        0,
    );
    assert_eq!(c.stale_paid, 1, "{:?}", c.violations);
    assert!(rules(&c).contains(&Rule::StalePaid));
}

#[test]
fn an_unreported_believed_fence_out_is_caught_and_a_reported_one_is_not() {
    let mut h = H::default();
    h.holder("a/s1", 5, 0, Outcome::FencedOut);
    h.holder("b/s1", 6, 100, Outcome::Ok);
    let l = ledger(&[
        (5, SubmissionOutcome::FencedOut),
        (6, SubmissionOutcome::Paid),
    ]);
    let c = h.check(&l, 0);
    assert_eq!(c.believed_fence_outs, 1);
    assert_eq!(c.unreported_fence_outs, 1, "{:?}", c.violations);
    assert_eq!(rules(&c), [Rule::UnreportedFenceOut]);
    assert!(h.check(&l, 1).holds());
}

#[test]
fn a_fence_out_with_the_client_check_off_is_not_a_trigger_4_event() {
    let mut h = H::default();
    h.session("a/s1", false);
    h.grant("a/s1", 5, 0, 70);
    // No check ran: the worker is UC-03's, not a believer.
    h.op(
        OpKind::Submit,
        "a/s1",
        Some(5),
        (200, Some(201)),
        Outcome::FencedOut,
    );
    let c = h.check(&ledger(&[(5, SubmissionOutcome::FencedOut)]), 0);
    assert_eq!(c.believed_fence_outs, 0);
    assert!(c.holds(), "{:?}", c.violations);
}
