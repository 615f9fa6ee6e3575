//! Rules 4 and 6 over beliefs extended by renewals, and rules 7 and 8.

use super::*;

impl H {
    /// A renewal of `token` by `s`, invoked and completed at `at_ms`,
    /// acknowledged with `deadline` (ms) or ending in `outcome`.
    fn renew(&mut self, s: &str, token: u64, at_ms: (u64, u64), outcome: Outcome, deadline: u64) {
        let op = self.op(
            OpKind::Renew,
            s,
            Some(token),
            (at_ms.0, Some(at_ms.1)),
            outcome,
        );
        op.deadline_ns = (outcome == Outcome::Ok).then_some(deadline * MS);
    }

    /// a holds token 5 from 0 ms (deadline 70 ms) and never releases; b is
    /// granted 6 at `b_at`.
    fn held_then_taken(b_at: u64) -> H {
        let mut h = H::default();
        h.session("a/s1", true);
        h.grant("a/s1", 5, 0, 70);
        h.holder("b/s1", 6, b_at, Outcome::Ok);
        h
    }
}

fn paid_by_6() -> LedgerView {
    ledger(&[(6, SubmissionOutcome::Paid)])
}

#[test]
fn an_acknowledged_renewal_extends_the_belief_into_a_later_grant() {
    // Without the renewal, b's grant at 100 ms comes after a's deadline: quiet.
    let h = H::held_then_taken(100);
    assert!(h.check(&paid_by_6(), 0).holds());
    // a renewed at 60 ms, acknowledged until 130 ms: b's grant overlaps it.
    let mut h = H::held_then_taken(100);
    h.renew("a/s1", 5, (60, 61), Outcome::Ok, 130);
    let c = h.check(&paid_by_6(), 0);
    assert_eq!(
        rules(&c),
        [Rule::Overlap, Rule::GrantOverlap],
        "{:?}",
        c.violations
    );
    assert_eq!(c.renewals_acknowledged, 1);
    let ops: Vec<&Op> = h.ops.iter().collect();
    let b = beliefs(&ops);
    assert_eq!(
        (b[0].to_ns, b[0].renewed_ns.clone()),
        (130 * MS, vec![60 * MS])
    );
}

#[test]
fn an_unanswered_renewal_extends_nothing() {
    let mut h = H::held_then_taken(100);
    h.renew("a/s1", 5, (60, 61), Outcome::Unknown, 0);
    let c = h.check(&paid_by_6(), 0);
    assert!(c.holds(), "{:?}", c.violations);
}

#[test]
fn a_renewal_refused_while_its_grant_was_live_breaks_rule_9() {
    // a's grant promised 70 ms; its renewal came back LOCK_LOST at 61 ms.
    let mut h = H::held_then_taken(100);
    h.renew("a/s1", 5, (60, 61), Outcome::Lost, 0);
    let c = h.check(&paid_by_6(), 0);
    assert_eq!(rules(&c), [Rule::EarlyRefusal], "{:?}", c.violations);
    assert_eq!((c.early_refusals, c.history_violations()), (1, 1));
}

#[test]
fn a_renewal_refused_after_the_deadline_or_a_release_is_correct() {
    // Answered after a's deadline (70 ms): the grant may have lapsed.
    let mut h = H::held_then_taken(100);
    h.renew("a/s1", 5, (69, 71), Outcome::Lost, 0);
    assert!(h.check(&paid_by_6(), 0).holds());
    // In flight when a released (10 ms): the release ended the grant first.
    let mut h = H::default();
    h.holder("a/s1", 5, 0, Outcome::Ok);
    h.renew("a/s1", 5, (9, 12), Outcome::Lost, 0);
    let c = h.check(&ledger(&[(5, SubmissionOutcome::Paid)]), 0);
    assert!(c.holds(), "{:?}", c.violations);
}

#[test]
fn a_late_renewal_acknowledged_after_a_higher_grant_breaks_rule_7() {
    let mut h = H::held_then_taken(100);
    // Sent at 110 ms, after b's grant completed at 100 ms, yet acknowledged.
    h.renew("a/s1", 5, (110, 111), Outcome::Ok, 180);
    let c = h.check(&paid_by_6(), 0);
    assert_eq!(rules(&c), [Rule::LateRenewal], "{:?}", c.violations);
    assert_eq!((c.late_renewals, c.history_violations()), (1, 1));
    // Sent after a's deadline, it extends no belief: rule 6 stays quiet.
    assert_eq!(c.grant_overlaps, 0);
}

#[test]
fn a_late_renewal_refused_with_lock_lost_is_correct() {
    let mut h = H::held_then_taken(100);
    h.renew("a/s1", 5, (110, 111), Outcome::Lost, 0);
    let c = h.check(&paid_by_6(), 0);
    assert!(c.holds(), "{:?}", c.violations);
}

#[test]
fn a_renewal_concurrent_with_the_higher_grant_is_not_ordered_after_it() {
    // Sent at 65 ms, answered at 101 ms, after b's grant completed at 100 ms: not rule 7's
    // (a renewal racing a grant); it does extend a's belief past 100 ms,
    // which rule 6 reports on its own.
    let mut h = H::held_then_taken(100);
    h.renew("a/s1", 5, (65, 101), Outcome::Ok, 140);
    let c = h.check(&paid_by_6(), 0);
    assert_eq!(c.late_renewals, 0, "{:?}", c.violations);
}

#[test]
fn an_acknowledged_renewal_that_moves_the_deadline_back_breaks_rule_8() {
    let mut h = H::default();
    h.holder("a/s1", 5, 0, Outcome::Ok);
    // The grant promised 70 ms; a renewal sent at 3 ms came back with 40 ms.
    h.renew("a/s1", 5, (3, 4), Outcome::Ok, 40);
    let c = h.check(&ledger(&[(5, SubmissionOutcome::Paid)]), 0);
    assert_eq!(rules(&c), [Rule::ShortenedRenewal], "{:?}", c.violations);
    assert_eq!(c.shortened_renewals, 1);
}

#[test]
fn renewals_that_move_the_deadline_out_are_quiet() {
    let mut h = H::default();
    h.holder("a/s1", 5, 0, Outcome::Ok);
    h.renew("a/s1", 5, (3, 4), Outcome::Ok, 73);
    h.renew("a/s1", 5, (6, 7), Outcome::Ok, 76);
    // Within the clock-reading slack of the promise: quiet too.
    h.renew("a/s1", 5, (8, 9), Outcome::Ok, 76);
    let c = h.check(&ledger(&[(5, SubmissionOutcome::Paid)]), 0);
    assert!(c.holds(), "{:?}", c.violations);
    assert_eq!(c.renewals_acknowledged, 3);
}
