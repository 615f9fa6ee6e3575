//! Multi-step payouts: the legs of one payout run under one lock key
//! (`Op::key`), so the holder rules see the key, not each leg's payout.

use super::*;

impl H {
    /// The last operation runs on leg `payout` under the key `payout:p1`.
    fn on_leg(&mut self, payout: &str) {
        let op = self.ops.last_mut().unwrap();
        op.payout = Some(payout.to_string());
        op.key = Some("payout:p1".to_string());
    }
}

/// a holds `payout:p1` from 0 ms (deadline 70 ms) and passes a check on
/// leg `p2` reporting a deadline of 130 ms; b is granted the key at 100 ms.
fn a_checked_leg_2_then_b_took_the_key() -> H {
    let mut h = H::default();
    h.session("a/s1", true);
    h.grant("a/s1", 5, 0, 70);
    h.on_leg("p1");
    h.op(OpKind::Claim, "a/s1", Some(5), (60, Some(61)), Outcome::Ok);
    h.on_leg("p2");
    h.op(OpKind::Check, "a/s1", Some(5), (62, Some(62)), Outcome::Ok)
        .deadline_ns = Some(130 * MS);
    h.on_leg("p2");
    h.session("b/s1", true);
    h.grant("b/s1", 6, 100, 170);
    h.on_leg("p1");
    h
}

#[test]
fn a_check_on_a_later_leg_extends_the_belief_in_the_key() {
    let h = a_checked_leg_2_then_b_took_the_key();
    let c = h.check(&LedgerView::default(), 0);
    assert_eq!(
        rules(&c),
        [Rule::Overlap, Rule::GrantOverlap],
        "{:?}",
        c.violations
    );
    assert_eq!(c.violations[0].payout.as_deref(), Some("p1"));
}

#[test]
fn a_fence_out_on_any_leg_covers_the_overlap_of_the_key() {
    let mut h = a_checked_leg_2_then_b_took_the_key();
    h.op(
        OpKind::Submit,
        "a/s1",
        Some(5),
        (140, Some(141)),
        Outcome::FencedOut,
    );
    h.on_leg("p2");
    // A believed-held fence-out: the run reported it as a trigger-4 event.
    let c = h.check(&LedgerView::default(), 1);
    assert_eq!(c.fenced_overlaps, 1, "{:?}", c.violations);
    assert_eq!(rules(&c), [Rule::GrantOverlap], "{:?}", c.violations);
}
