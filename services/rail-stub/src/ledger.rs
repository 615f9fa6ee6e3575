//! The pure core of the rail-stub: the two fences and the payout state machine
//! as plain functions over a [`PayoutView`] and a token, plus the in-memory
//! [`Ledger`] that holds every payout in creation order.
//!
//! Nothing here does I/O, sleeps or reads a clock; [`crate::state`] calls in
//! under its mutex, persists what these functions decide, then commits it.
//!
//! The rules (C2, plus the decisions C2 leaves open):
//! - `highest_token` is the highest token of any *accepted* R2/R3/R4 request;
//!   a refused request never raises it.
//! - Every fenced request checks the fence **first**: a token below
//!   `highest_token` is `FENCED_OUT` whatever the state, so a stale submission
//!   on a PAID payout counts as fence 2, not as a duplicate.
//! - R2 claim: then PAID is `ALREADY_PAID`; otherwise the token takes the claim,
//!   also from a lower holder (takeover after the old holder lost its lock).
//! - R4 release: then PAID is `ALREADY_PAID`; otherwise back to PENDING.
//! - R3 submit: then PAID is `DUPLICATE_SUBMISSION`; then anything but CLAIMED
//!   by exactly this token is `NOT_CLAIMED`; only then is the payout paid.
//!   Every submission, refused or not, is recorded: appended to `submissions`
//!   while it holds fewer than [`MAX_LISTED_SUBMISSIONS`] (and always when it
//!   pays), else counted in `submissions_omitted` — so a payout's record is
//!   bounded and `check_ledger` can still judge it.

use std::collections::HashMap;
use std::time::Duration;

use fencepost_api::clock::MonoTime;
use fencepost_api::rail::{
    LedgerCounters, MAX_LISTED_SUBMISSIONS, PayoutState, PayoutView, Submission, SubmissionOutcome,
};

/// Which fence refused a request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fence {
    /// Fence 1, the ledger's: R2 claim and R4 release.
    Ledger,
    /// Fence 2, the rail's: R3 submit.
    Rail,
}

impl Fence {
    /// The `fence` label in metrics and logs: `1` or `2`.
    pub fn label(self) -> u8 {
        match self {
            Fence::Ledger => 1,
            Fence::Rail => 2,
        }
    }
}

/// Why a fenced request was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// The token is below the payout's highest.
    FencedOut {
        /// The fence that refused it.
        fence: Fence,
        /// The payout's highest accepted token.
        highest_token: u64,
    },
    /// R2/R4 on a PAID payout.
    AlreadyPaid {
        /// The token that paid it.
        paid_token: u64,
    },
    /// R3 on a PAID payout.
    Duplicate {
        /// The token that paid it.
        paid_token: u64,
    },
    /// R3 by a token that does not hold the claim.
    NotClaimed {
        /// The payout's state at the time.
        state: PayoutState,
        /// The token holding the claim, if any.
        claim_token: Option<u64>,
    },
}

/// What one fenced request does to one payout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    /// The payout after the request, or `None` when it is unchanged.
    pub next: Option<PayoutView>,
    /// The state reached, or why the request was refused.
    pub result: Result<PayoutState, Refusal>,
    /// The submission this request appended to `next.submissions` (R3 only,
    /// and only while the list has room or it pays), so the store appends one
    /// row instead of rewriting the list.
    pub appended: Option<Submission>,
}

impl Decision {
    /// How this decision moves the ledger's counters.
    pub fn counter_delta(&self) -> LedgerCounters {
        let mut d = LedgerCounters::default();
        match self.result {
            Ok(PayoutState::Paid) => d.paid = 1,
            Ok(_) => {}
            Err(Refusal::FencedOut {
                fence: Fence::Ledger,
                ..
            }) => d.fenced_out_fence1 = 1,
            Err(Refusal::FencedOut {
                fence: Fence::Rail, ..
            }) => d.fenced_out_fence2 = 1,
            Err(Refusal::AlreadyPaid { .. }) => d.already_paid = 1,
            Err(Refusal::Duplicate { .. }) => d.duplicate_attempted = 1,
            Err(Refusal::NotClaimed { .. }) => d.not_claimed = 1,
        }
        d
    }
}

/// A refusal that leaves the payout as it was.
fn refuse(refusal: Refusal) -> Decision {
    Decision {
        next: None,
        result: Err(refusal),
        appended: None,
    }
}

/// An accepted change; `next` is dropped when nothing actually changed
/// (an idempotent repeat), so the store is not written for nothing.
fn accept(before: &PayoutView, next: PayoutView) -> Decision {
    let state = next.state;
    Decision {
        next: (next != *before).then_some(next),
        result: Ok(state),
        appended: None,
    }
}

/// The paying token of a PAID payout (0 if the record is somehow missing it).
fn paid_token(p: &PayoutView) -> u64 {
    p.paid_token.unwrap_or_default()
}

/// Fence 1 (the ledger's, for R2 and R4): a token below the highest the payout
/// has seen is FENCED_OUT, whatever the state; then a PAID payout is
/// ALREADY_PAID. `Ok` means the request may change the payout.
pub fn fence1(p: &PayoutView, token: u64) -> Result<(), Refusal> {
    if token < p.highest_token {
        return Err(Refusal::FencedOut {
            fence: Fence::Ledger,
            highest_token: p.highest_token,
        });
    }
    if p.state == PayoutState::Paid {
        return Err(Refusal::AlreadyPaid {
            paid_token: paid_token(p),
        });
    }
    Ok(())
}

/// R2: claim `p` for `token` (fence 1).
pub fn claim(p: &PayoutView, token: u64) -> Decision {
    if let Err(refusal) = fence1(p, token) {
        return refuse(refusal);
    }
    // token >= highest here, so this raises the fence (or keeps it), and a
    // lower holder's claim is taken over.
    let mut next = p.clone();
    next.state = PayoutState::Claimed;
    next.claim_token = Some(token);
    next.highest_token = token;
    accept(p, next)
}

/// R4: release `p` back to PENDING (fence 1). Always allowed to a token that
/// is not stale, also one that never claimed: abandonment is cheap.
pub fn release(p: &PayoutView, token: u64) -> Decision {
    if let Err(refusal) = fence1(p, token) {
        return refuse(refusal);
    }
    // The releasing token stays the floor: nothing below it gets back in.
    let mut next = p.clone();
    next.state = PayoutState::Pending;
    next.claim_token = None;
    next.highest_token = token;
    accept(p, next)
}

/// Fence 2 (the rail's, for R3) and the rules after it: a token below the
/// highest the payout has seen is FENCED_OUT; then a PAID payout is a
/// DUPLICATE; then a token that does not hold the claim is NOT_CLAIMED.
/// `Ok` means the submission pays.
pub fn fence2(p: &PayoutView, token: u64) -> Result<(), Refusal> {
    if token < p.highest_token {
        return Err(Refusal::FencedOut {
            fence: Fence::Rail,
            highest_token: p.highest_token,
        });
    }
    if p.state == PayoutState::Paid {
        return Err(Refusal::Duplicate {
            paid_token: paid_token(p),
        });
    }
    if p.state != PayoutState::Claimed || p.claim_token != Some(token) {
        return Err(Refusal::NotClaimed {
            state: p.state,
            claim_token: p.claim_token,
        });
    }
    Ok(())
}

/// R3: submit `p` to the rail with `token` (fence 2). The submission is
/// recorded whatever the outcome, so `next` is always `Some`.
pub fn submit(p: &PayoutView, token: u64) -> Decision {
    let refusal = fence2(p, token).err();
    // Refused or not, the attempt is appended: the submissions list is what
    // lets `check_ledger` judge the payout from R6 alone.
    let mut next = p.clone();
    let outcome = match refusal {
        Some(Refusal::FencedOut { .. }) => SubmissionOutcome::FencedOut,
        Some(Refusal::Duplicate { .. }) => SubmissionOutcome::Duplicate,
        Some(_) => SubmissionOutcome::NotClaimed,
        None => {
            next.state = PayoutState::Paid;
            next.paid_token = Some(token);
            next.highest_token = token;
            SubmissionOutcome::Paid
        }
    };
    let submission = Submission { token, outcome };
    let listed =
        next.submissions.len() < MAX_LISTED_SUBMISSIONS || outcome == SubmissionOutcome::Paid;
    if listed {
        next.submissions.push(submission);
    } else {
        let counted = next.submissions_omitted.count(submission);
        debug_assert!(counted.is_ok(), "a paying submission is always listed");
    }
    Decision {
        next: Some(next),
        result: refusal.map_or(Ok(PayoutState::Paid), Err),
        appended: listed.then_some(submission),
    }
}

/// A fenced request, for [`unfenced`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Request {
    /// R2.
    Claim,
    /// R3.
    Submit,
    /// R4.
    Release,
}

/// `--sabotage no-fences` (tests only): R2/R3/R4 with both fences off. No
/// token is compared; R2/R4 keep only `ALREADY_PAID`; R3 pays whatever the
/// state and whichever token holds the claim, also a payout already PAID
/// (it pays again). `highest_token` still records the highest token seen,
/// so `check_ledger` can name the stale payments this lets through.
pub fn unfenced(p: &PayoutView, token: u64, request: Request) -> Decision {
    let mut next = p.clone();
    next.highest_token = p.highest_token.max(token);
    if request != Request::Submit {
        if p.state == PayoutState::Paid {
            return refuse(Refusal::AlreadyPaid {
                paid_token: paid_token(p),
            });
        }
        // A claim takes the payout whoever held it; a release frees it.
        if request == Request::Claim {
            next.state = PayoutState::Claimed;
            next.claim_token = Some(token);
        } else {
            next.state = PayoutState::Pending;
            next.claim_token = None;
        }
        return accept(p, next);
    }
    next.state = PayoutState::Paid;
    next.paid_token = Some(token);
    let submission = Submission {
        token,
        outcome: SubmissionOutcome::Paid,
    };
    // A paying submission is always listed.
    next.submissions.push(submission);
    Decision {
        next: Some(next),
        result: Ok(PayoutState::Paid),
        appended: Some(submission),
    }
}

/// A new PENDING payout that has seen no token.
pub fn new_payout(payout_id: String, amount_minor: i64, currency: String) -> PayoutView {
    PayoutView {
        payout_id,
        amount_minor,
        currency,
        state: PayoutState::Pending,
        claim_token: None,
        paid_token: None,
        highest_token: 0,
        submissions: Vec::new(),
        submissions_omitted: Default::default(),
    }
}

/// One payout as the ledger holds it.
#[derive(Clone, Debug)]
struct Entry {
    /// The payout, exactly as R5 shows it.
    view: PayoutView,
    /// When this process created (or reloaded) it, for the backlog age.
    created_at: MonoTime,
}

/// Every payout in creation order, indexed by id.
#[derive(Debug, Default)]
pub struct Ledger {
    /// The payouts, oldest first.
    entries: Vec<Entry>,
    /// Payout id to its place in `entries`.
    index: HashMap<String, usize>,
    /// Every entry before this one is PAID. PAID is terminal and entries are
    /// appended in creation order, so the oldest open payout is found by moving
    /// this cursor forward only (amortised O(1) per scrape).
    oldest_open: usize,
}

impl Ledger {
    /// Number of payouts.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when there are no payouts.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The payout with this id.
    pub fn get(&self, payout_id: &str) -> Option<&PayoutView> {
        self.index.get(payout_id).map(|&i| &self.entries[i].view)
    }

    /// Adds a payout created at `now`, or replaces the one with the same id
    /// (keeping its place and creation time).
    pub fn put(&mut self, view: PayoutView, now: MonoTime) {
        match self.index.get(&view.payout_id) {
            Some(&i) => self.entries[i].view = view,
            None => {
                self.index
                    .insert(view.payout_id.clone(), self.entries.len());
                self.entries.push(Entry {
                    view,
                    created_at: now,
                });
            }
        }
    }

    /// How long the oldest PENDING or CLAIMED payout has waited; zero if none.
    pub fn backlog_age(&mut self, now: MonoTime) -> Duration {
        while self
            .entries
            .get(self.oldest_open)
            .is_some_and(|e| e.view.state == PayoutState::Paid)
        {
            self.oldest_open += 1;
        }
        self.entries
            .get(self.oldest_open)
            .map_or(Duration::ZERO, |e| {
                now.saturating_duration_since(e.created_at)
            })
    }

    /// Every payout, oldest first, as R6 shows them.
    pub fn views(&self) -> Vec<PayoutView> {
        self.entries.iter().map(|e| e.view.clone()).collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pending() -> PayoutView {
        new_payout("p-1".into(), 100, "EUR".into())
    }

    /// Applies a decision's `next`, as the state layer would after persisting it.
    fn step(p: &PayoutView, d: &Decision) -> PayoutView {
        d.next.clone().unwrap_or_else(|| p.clone())
    }

    #[test]
    fn claim_then_submit_pays_and_records_the_submission() {
        let p = pending();
        let c = claim(&p, 5);
        assert_eq!(c.result, Ok(PayoutState::Claimed));
        let p = step(&p, &c);
        let s = submit(&p, 5);
        assert_eq!(s.result, Ok(PayoutState::Paid));
        let p = step(&p, &s);
        assert_eq!((p.paid_token, p.highest_token), (Some(5), 5));
        assert_eq!(
            p.submissions,
            vec![Submission {
                token: 5,
                outcome: SubmissionOutcome::Paid
            }]
        );
        assert_eq!(s.counter_delta().paid, 1);
    }

    #[test]
    fn fence1_refuses_a_stale_token_before_looking_at_the_state() {
        let mut p = step(&pending(), &claim(&pending(), 5));
        assert_eq!(fence1(&p, 5), Ok(()));
        assert_eq!(fence1(&p, 6), Ok(()));
        let stale = Err(Refusal::FencedOut {
            fence: Fence::Ledger,
            highest_token: 5,
        });
        assert_eq!(fence1(&p, 4), stale);
        p = step(&p, &submit(&p, 5));
        assert_eq!(fence1(&p, 4), stale);
        assert_eq!(fence1(&p, 5), Err(Refusal::AlreadyPaid { paid_token: 5 }));
        // Claim and release are refused exactly when fence 1 refuses.
        for t in 0..8 {
            assert_eq!(claim(&p, t).result.err(), fence1(&p, t).err());
            assert_eq!(release(&p, t).result.err(), fence1(&p, t).err());
        }
    }

    #[test]
    fn repeated_claim_with_the_same_token_changes_nothing() {
        let p = step(&pending(), &claim(&pending(), 5));
        let again = claim(&p, 5);
        assert_eq!(again.result, Ok(PayoutState::Claimed));
        assert_eq!(again.next, None);
    }

    #[test]
    fn a_higher_token_takes_over_a_claim_and_fences_the_old_holder() {
        let p = step(&pending(), &claim(&pending(), 5));
        let p = step(&p, &claim(&p, 6));
        assert_eq!((p.claim_token, p.highest_token), (Some(6), 6));
        let old = submit(&p, 5);
        assert!(matches!(
            old.result,
            Err(Refusal::FencedOut {
                fence: Fence::Rail,
                highest_token: 6
            })
        ));
        assert_eq!(old.counter_delta().fenced_out_fence2, 1);
        let old_claim = claim(&p, 5);
        assert_eq!(old_claim.next, None);
        assert_eq!(old_claim.counter_delta().fenced_out_fence1, 1);
    }

    #[test]
    fn the_fence_is_checked_before_the_duplicate_rule() {
        let p = step(&pending(), &claim(&pending(), 5));
        let p = step(&p, &submit(&p, 5));
        assert!(matches!(
            submit(&p, 4).result,
            Err(Refusal::FencedOut {
                fence: Fence::Rail,
                ..
            })
        ));
        assert_eq!(
            submit(&p, 5).result,
            Err(Refusal::Duplicate { paid_token: 5 })
        );
        assert_eq!(
            submit(&p, 9).result,
            Err(Refusal::Duplicate { paid_token: 5 })
        );
        assert!(matches!(
            claim(&p, 4).result,
            Err(Refusal::FencedOut {
                fence: Fence::Ledger,
                ..
            })
        ));
        assert_eq!(
            claim(&p, 9).result,
            Err(Refusal::AlreadyPaid { paid_token: 5 })
        );
        assert_eq!(
            release(&p, 9).result,
            Err(Refusal::AlreadyPaid { paid_token: 5 })
        );
    }

    #[test]
    fn submitting_without_the_claim_pays_nothing_and_does_not_raise_the_fence() {
        let p = pending();
        let d = submit(&p, 3);
        assert!(matches!(
            d.result,
            Err(Refusal::NotClaimed {
                state: PayoutState::Pending,
                ..
            })
        ));
        let p = step(&p, &d);
        assert_eq!((p.state, p.highest_token), (PayoutState::Pending, 0));
        let p = step(&p, &claim(&p, 3));
        let higher = submit(&p, 4);
        assert!(matches!(
            higher.result,
            Err(Refusal::NotClaimed {
                claim_token: Some(3),
                ..
            })
        ));
        assert_eq!(step(&p, &higher).highest_token, 3);
    }

    #[test]
    fn without_fences_a_stale_holder_pays_again() {
        let p = step(&pending(), &claim(&pending(), 5));
        let p = step(&p, &claim(&p, 6));
        let p = step(&p, &submit(&p, 6));
        assert_eq!(
            submit(&p, 5).result,
            Err(Refusal::FencedOut {
                fence: Fence::Rail,
                highest_token: 6
            })
        );
        let d = unfenced(&p, 5, Request::Submit);
        assert_eq!(d.result, Ok(PayoutState::Paid));
        let p = step(&p, &d);
        let paid = p
            .submissions
            .iter()
            .filter(|s| s.outcome == SubmissionOutcome::Paid)
            .count();
        assert_eq!((paid, p.highest_token, p.paid_token), (2, 6, Some(5)));
        assert!(
            unfenced(&p, 1, Request::Claim).result.is_err(),
            "ALREADY_PAID stays"
        );
    }

    #[test]
    fn release_returns_to_pending_and_a_higher_token_reclaims() {
        let p = step(&pending(), &claim(&pending(), 5));
        let r = release(&p, 5);
        assert_eq!(r.result, Ok(PayoutState::Pending));
        let p = step(&p, &r);
        assert_eq!((p.claim_token, p.highest_token), (None, 5));
        assert!(matches!(
            release(&p, 4).result,
            Err(Refusal::FencedOut { .. })
        ));
        let p = step(&p, &claim(&p, 6));
        assert_eq!(p.claim_token, Some(6));
    }

    #[test]
    fn submissions_past_the_first_64_are_counted_but_a_payment_is_always_listed() {
        let mut p = pending();
        for t in 0..100 {
            let d = submit(&p, t % 3);
            assert_eq!(d.appended.is_some(), t < 64, "attempt {t}");
            p = step(&p, &d);
        }
        assert_eq!(p.submissions.len(), 64);
        assert_eq!(p.submissions_omitted.total(), 36);
        p = step(&p, &claim(&p, 5));
        let paid = submit(&p, 5);
        assert_eq!(paid.result, Ok(PayoutState::Paid));
        assert_eq!(
            paid.appended,
            Some(Submission {
                token: 5,
                outcome: SubmissionOutcome::Paid
            })
        );
        p = step(&p, &paid);
        assert_eq!(p.submissions.len(), 65);
        let stale = submit(&p, 4);
        assert_eq!(stale.appended, None);
        p = step(&p, &stale);
        assert_eq!(p.submissions_omitted.max_fenced_token, Some(4));
        assert_eq!(p.submissions_omitted.total(), 37);
    }

    #[test]
    fn backlog_age_follows_the_oldest_unpaid_payout() {
        let mut l = Ledger::default();
        let t = |s: u64| MonoTime::from_nanos(s * 1_000_000_000);
        assert_eq!(l.backlog_age(t(5)), Duration::ZERO);
        l.put(new_payout("a".into(), 1, "EUR".into()), t(1));
        l.put(new_payout("b".into(), 1, "EUR".into()), t(3));
        assert_eq!(l.backlog_age(t(10)), Duration::from_secs(9));
        let mut a = l.get("a").unwrap().clone();
        a.state = PayoutState::Paid;
        l.put(a, t(10));
        assert_eq!(l.backlog_age(t(10)), Duration::from_secs(7));
        assert_eq!(l.len(), 2);
    }
}
