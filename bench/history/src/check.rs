//! The history checker: pure code over a recorded history
//! ([`Op`]s on one monotonic clock) and the rail's final ledger. It verifies
//!
//! 1. **at most one payment per payout** — from the ledger's paying
//!    submissions *and* from the submits the clients saw paid;
//! 2. **no payment by a token lower than one already accepted for the
//!    payout** — an accepted claim, release or payment with a higher token
//!    completed before the paying submit was invoked (plus the ledger's own
//!    stale-payment rule, `check_ledger`);
//! 3. **tokens per key strictly increasing** (across lock-server restarts):
//!    a grant invoked after another grant of the key completed carries a
//!    higher token;
//! 4. **no two sessions' client-believed holding intervals for one key
//!    overlap** unless the lower token was fenced out: a belief runs from
//!    the grant's reply to the lock's release (sent) or the client's
//!    deadline (the latest one the grant or a passed check reported,
//!    pushed on by every acknowledged renewal sent before the end so far:
//!    the renewal's deadline, `send + granted × (1 − margin)`), whichever
//!    is first;
//! 5. **every fence-out of a submit the client believed held (client check
//!    on) is reported as a trigger-4 event**: the fence-outs the history and
//!    the ledger show are compared with the count the run reported;
//! 6. **the lock service never acknowledged a grant of a key while an
//!    earlier grant of it was live in its own time** — a lock-level rule,
//!    whether or not a fence later caught the payment (rule 4 forgives a
//!    fenced overlap; this one does not). The server's grant of token `t2`
//!    happened before its reply (`ok_ns`); the grant of a lower token `t1`
//!    happened before it (tokens follow the grants' order) and lasted, in
//!    the server's time, at least until the belief of rule 4 ended: the
//!    client's deadline is conservative (ADR-006: the server's lease runs
//!    from the request's arrival, the client's from before it was sent,
//!    shortened by the margin), and a release ends it no earlier than it
//!    was sent; an acknowledged renewal moved the server's end to at least
//!    its receipt plus the lease, past the deadline it gave the client. So
//!    a reply for `t2` before the end of `t1`'s belief proves
//!    two live grants at once — a lease the server cut short, a deposed
//!    leader that still granted or renewed, a lost grant;
//! 7. **no renewal acknowledged after the key was granted to a higher
//!    token**: a renewal of `t1` invoked after a grant of `t2 > t1`
//!    completed must be refused (`LOCK_LOST`: the grant is no longer
//!    current) — an acknowledgement means a server that still counted `t1`
//!    live while `t2` was granted (a deposed leader answering from memory,
//!    a lost grant);
//! 8. **no acknowledged renewal shortens an end already promised**: the
//!    deadline an acknowledged renewal reports is not earlier (beyond 1 ms
//!    of clock-reading slack) than the latest deadline the same session's
//!    grant or acknowledged renewals of that token reported before it was
//!    sent. The server's end only moves out (`max(old end, receipt +
//!    lease)`); with one margin and one requested lease, so does the
//!    client's deadline;
//! 9. **no renewal refused while its grant was live**: a renewal answered
//!    `LOCK_LOST` whose answer came back (beyond 1 ms of slack) before the
//!    end of its grant's belief (rule 4's, extended by acknowledged
//!    renewals). The server's end of that grant was no earlier than the
//!    belief's end (rule 6's argument), and the renewal arrived before its
//!    answer, so the server refused a grant it still owed: it had lost or cut
//!    it short (a takeover that did not restore it, a lease ended early). A
//!    renewal in flight when its holder released is no case: the belief
//!    ends at the release's invocation.
//!
//! Renewals (`Renew` operations) are recorded only by workers that observe
//! their SDK's heartbeat; an older history without them is checked as
//! before (beliefs end at the grant's or a check's deadline, rules 7 and 8
//! see nothing).
//!
//! "Before" is strict real-time order on the shared clock: completion of one
//! operation before the invocation of the other. Concurrent operations are
//! never ordered, so the checker cannot raise a false alarm from two
//! overlapping calls; an operation without a completion (a killed worker) is
//! never "accepted" for rule 2 and contributes only its invocation.

use std::collections::{BTreeMap, HashMap, HashSet};

use fencepost_api::ledger_check::{ViolationKind, check_ledger};
use fencepost_api::rail::{LedgerView, SubmissionOutcome};
use serde::{Deserialize, Serialize};

use crate::op::{Op, OpKind, Outcome};

mod beliefs;
pub use beliefs::{Belief, beliefs};
use beliefs::{early_refusals, grant_overlaps, late_renewals, shortened_renewals};

/// Which rule a [`HistoryViolation`] breaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Rule {
    /// Rule 1: paid more than once.
    PaidTwice,
    /// Rule 2: paid by a token below one already accepted.
    StalePaid,
    /// Rule 3: a later grant of a key with a token not above an earlier one.
    TokenRegression,
    /// Rule 4: two sessions believed they held one key at once, unfenced.
    Overlap,
    /// Rule 5: a believed-held fence-out missing from the trigger-4 report.
    UnreportedFenceOut,
    /// Rule 6: a grant acknowledged while a lower token's grant was live.
    GrantOverlap,
    /// Rule 7: a renewal acknowledged after a higher token's grant of the key.
    LateRenewal,
    /// Rule 8: an acknowledged renewal that shortened a promised end.
    ShortenedRenewal,
    /// Rule 9: a renewal refused while its grant was live in its belief.
    EarlyRefusal,
}

/// One broken rule, with the payout and a sentence naming the operations.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryViolation {
    /// The rule.
    pub rule: Rule,
    /// The payout (the key is `payout:<id>`); `None` for a run-wide one.
    pub payout: Option<String>,
    /// Why, with tokens, sessions and times.
    pub detail: String,
}

/// What [`check`] found.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HistoryCheck {
    /// Operations in the history.
    pub operations_checked: u64,
    /// Operations without a completion (their process was killed).
    pub indeterminate: u64,
    /// Payouts paid more than once. Must be 0.
    pub paid_twice: u64,
    /// Payouts paid by a stale token. Must be 0.
    pub stale_paid: u64,
    /// Grants whose token did not rise above an earlier grant's. Must be 0.
    pub token_regressions: u64,
    /// Unfenced overlaps of believed holding intervals. Must be 0.
    pub overlaps: u64,
    /// Overlaps the lower token's fence-out covered (allowed, counted).
    pub fenced_overlaps: u64,
    /// Fence-outs of submits the client believed held (trigger-4 events, from the history).
    pub believed_fence_outs: u64,
    /// The trigger-4 events the run reported.
    pub reported_fence_outs: u64,
    /// Believed fence-outs the report misses. Must be 0.
    pub unreported_fence_outs: u64,
    /// Grants acknowledged while a lower token's grant was live (rule 6). Must be 0.
    #[serde(default)]
    pub grant_overlaps: u64,
    /// Acknowledged renewals of the key after a higher token's grant (rule 7). Must be 0.
    #[serde(default)]
    pub late_renewals: u64,
    /// Acknowledged renewals that shortened a promised end (rule 8). Must be 0.
    #[serde(default)]
    pub shortened_renewals: u64,
    /// Renewals refused while their grant was live in its belief (rule 9). Must be 0.
    #[serde(default)]
    pub early_refusals: u64,
    /// Acknowledged renewals in the history.
    #[serde(default)]
    pub renewals_acknowledged: u64,
    /// Every broken rule.
    pub violations: Vec<HistoryViolation>,
}

impl HistoryCheck {
    /// Violations of rules 4 to 9 (the history's own: overlaps,
    /// unreported fence-outs, overlapping grants, late, shortening and
    /// early-refused renewals).
    pub fn history_violations(&self) -> u64 {
        self.overlaps
            + self.unreported_fence_outs
            + self.grant_overlaps
            + self.late_renewals
            + self.shortened_renewals
            + self.early_refusals
    }

    /// True when no rule is broken.
    pub fn holds(&self) -> bool {
        self.violations.is_empty()
    }

    fn violate(&mut self, rule: Rule, payout: Option<&str>, detail: String) {
        self.violations.push(HistoryViolation {
            rule,
            payout: payout.map(str::to_string),
            detail,
        });
    }
}

/// Checks `ops` and the final `ledger` against rules 1–9 (module doc);
/// `reported_fence_outs` is the run's trigger-4 count (fence-outs of
/// submits made after a passed client check).
pub fn check(ops: &[Op], ledger: &LedgerView, reported_fence_outs: u64) -> HistoryCheck {
    let mut out = HistoryCheck {
        operations_checked: ops.len() as u64,
        indeterminate: ops.iter().filter(|o| o.ok_ns.is_none()).count() as u64,
        renewals_acknowledged: ops
            .iter()
            .filter(|o| o.kind == OpKind::Renew && o.is(Outcome::Ok))
            .count() as u64,
        reported_fence_outs,
        ..HistoryCheck::default()
    };
    let mut by_payout: BTreeMap<&str, Vec<&Op>> = BTreeMap::new();
    for op in ops {
        if let Some(p) = op.payout.as_deref() {
            by_payout.entry(p).or_default().push(op);
        }
    }
    let fenced = fenced_out(ops, ledger);
    check_payments(&mut out, &by_payout, ledger);
    check_holders(&mut out, &by_key(ops), &fenced);
    check_reported_fence_outs(&mut out, ops, &fenced);
    out
}

/// The lock key an operation ran under: its own `key` (a multi-step
/// payout's legs), else `payout:<payout>`; `None` without a payout.
pub fn key_of(op: &Op) -> Option<String> {
    op.key
        .clone()
        .or_else(|| op.payout.as_deref().map(|p| format!("payout:{p}")))
}

/// The operations of each lock key ([`key_of`]), in history order.
pub fn by_key(ops: &[Op]) -> BTreeMap<String, Vec<&Op>> {
    let mut out: BTreeMap<String, Vec<&Op>> = BTreeMap::new();
    for op in ops {
        if let Some(k) = key_of(op) {
            out.entry(k).or_default().push(op);
        }
    }
    out
}

/// Every (payout, token) fenced out anywhere: a client saw it, or the
/// ledger lists it.
fn fenced_out<'a>(ops: &'a [Op], ledger: &'a LedgerView) -> HashSet<(&'a str, u64)> {
    let mut fenced = HashSet::new();
    for op in ops {
        if let (Some(p), Some(t), true) =
            (op.payout.as_deref(), op.token, op.is(Outcome::FencedOut))
        {
            fenced.insert((p, t));
        }
    }
    for p in &ledger.payouts {
        for s in &p.submissions {
            if s.outcome == SubmissionOutcome::FencedOut {
                fenced.insert((p.payout_id.as_str(), s.token));
            }
        }
    }
    fenced
}

/// Rules 1 and 2, per payout (including payouts only the ledger knows).
fn check_payments(
    out: &mut HistoryCheck,
    by_payout: &BTreeMap<&str, Vec<&Op>>,
    ledger: &LedgerView,
) {
    let ledger_check = check_ledger(ledger);
    let ledger_paid: HashMap<&str, usize> = ledger
        .payouts
        .iter()
        .map(|p| {
            let n = p
                .submissions
                .iter()
                .filter(|s| s.outcome == SubmissionOutcome::Paid)
                .count();
            (p.payout_id.as_str(), n)
        })
        .collect();
    let ledger_stale: HashSet<&str> = ledger_check
        .violations
        .iter()
        .filter(|v| v.kind == ViolationKind::StalePaid)
        .filter_map(|v| v.payout_id.as_deref())
        .collect();
    let mut payouts: Vec<&str> = by_payout.keys().copied().collect();
    payouts.extend(ledger_paid.keys().filter(|p| !by_payout.contains_key(*p)));
    payouts.sort_unstable();
    for payout in payouts {
        let ops = by_payout.get(payout).map(Vec::as_slice).unwrap_or(&[]);
        let seen_paid = ops
            .iter()
            .filter(|o| o.kind == OpKind::Submit && o.is(Outcome::Ok))
            .count();
        let paid = seen_paid.max(ledger_paid.get(payout).copied().unwrap_or(0));
        if paid > 1 {
            out.paid_twice += 1;
            out.violate(
                Rule::PaidTwice,
                Some(payout),
                format!(
                    "{payout} paid {paid} times (ledger {}, clients saw {seen_paid})",
                    ledger_paid.get(payout).copied().unwrap_or(0)
                ),
            );
        }
        if let Some(detail) = stale_payment(payout, ops) {
            out.stale_paid += 1;
            out.violate(Rule::StalePaid, Some(payout), detail);
        } else if ledger_stale.contains(payout) {
            out.stale_paid += 1;
            out.violate(
                Rule::StalePaid,
                Some(payout),
                format!("{payout}: the ledger's paying token is below one it had accepted"),
            );
        }
    }
}

/// Rules 3, 4 and 6 to 9, per lock key: token regressions, overlapping
/// beliefs that no fence-out resolved (on any payout of the key: a
/// multi-step payout's legs), grants that overlap, late and shortening
/// renewals. A violation names the key's payout (`payout:<id>`: `id`; for
/// a multi-step payout, its first leg).
fn check_holders(
    out: &mut HistoryCheck,
    by_key: &BTreeMap<String, Vec<&Op>>,
    fenced: &HashSet<(&str, u64)>,
) {
    for (key, ops) in by_key {
        let payout = key.strip_prefix("payout:").unwrap_or(key);
        let legs: HashSet<&str> = ops.iter().filter_map(|o| o.payout.as_deref()).collect();
        for detail in regressions(payout, ops) {
            out.token_regressions += 1;
            out.violate(Rule::TokenRegression, Some(payout), detail);
        }
        let beliefs = beliefs(ops);
        for (i, a) in beliefs.iter().enumerate() {
            for b in &beliefs[i + 1..] {
                if b.from_ns >= a.to_ns || a.session == b.session {
                    continue;
                }
                let lower = a.token.min(b.token);
                if legs.iter().any(|p| fenced.contains(&(*p, lower))) {
                    out.fenced_overlaps += 1;
                    continue;
                }
                out.overlaps += 1;
                out.violate(
                    Rule::Overlap,
                    Some(payout),
                    format!(
                        "{payout}: {} (token {}) believed it held the key until +{} µs, \
                         {} (token {}) from +{} µs, and token {lower} was never fenced out",
                        a.session,
                        a.token,
                        a.to_ns.saturating_sub(a.from_ns) / 1000,
                        b.session,
                        b.token,
                        b.from_ns.saturating_sub(a.from_ns) / 1000,
                    ),
                );
            }
        }
        for detail in grant_overlaps(payout, &beliefs) {
            out.grant_overlaps += 1;
            out.violate(Rule::GrantOverlap, Some(payout), detail);
        }
        for detail in late_renewals(payout, ops) {
            out.late_renewals += 1;
            out.violate(Rule::LateRenewal, Some(payout), detail);
        }
        for detail in shortened_renewals(payout, ops) {
            out.shortened_renewals += 1;
            out.violate(Rule::ShortenedRenewal, Some(payout), detail);
        }
        for detail in early_refusals(payout, ops, &beliefs) {
            out.early_refusals += 1;
            out.violate(Rule::EarlyRefusal, Some(payout), detail);
        }
    }
}

/// Rule 5: fence-outs of believed-held submits (client check on) against
/// the run's reported trigger-4 count.
fn check_reported_fence_outs(out: &mut HistoryCheck, ops: &[Op], fenced: &HashSet<(&str, u64)>) {
    let check_on: HashMap<&str, bool> = ops
        .iter()
        .filter(|o| o.kind == OpKind::Session)
        .map(|o| (o.session.as_str(), o.client_check == Some(true)))
        .collect();
    let believed: HashSet<(&str, u64)> = ops
        .iter()
        .filter(|o| o.kind == OpKind::Check && o.is(Outcome::Ok))
        .filter(|o| check_on.get(o.session.as_str()).copied().unwrap_or(false))
        .filter_map(|o| Some((o.payout.as_deref()?, o.token?)))
        .collect();
    out.believed_fence_outs = believed.intersection(fenced).count() as u64;
    let reported_fence_outs = out.reported_fence_outs;
    if out.believed_fence_outs > reported_fence_outs {
        out.unreported_fence_outs = out.believed_fence_outs - reported_fence_outs;
        let mut which: Vec<String> = believed
            .intersection(fenced)
            .map(|(p, t)| format!("{p}@{t}"))
            .collect();
        which.sort();
        out.violate(
            Rule::UnreportedFenceOut,
            None,
            format!(
                "{} fence-out(s) of submits made after a passed client check ({}), \
                 but the run reported {reported_fence_outs} trigger-4 event(s)",
                out.believed_fence_outs,
                which.join(", ")
            ),
        );
    }
}

/// Rule 2 on one payout's operations: a paying submit invoked after an
/// accepted operation with a higher token had completed.
fn stale_payment(payout: &str, ops: &[&Op]) -> Option<String> {
    let accepted = |o: &&&Op| {
        o.is(Outcome::Ok) && matches!(o.kind, OpKind::Claim | OpKind::RailRelease | OpKind::Submit)
    };
    for pay in ops
        .iter()
        .filter(|o| o.kind == OpKind::Submit && o.is(Outcome::Ok))
    {
        let k = pay.token?;
        if let Some(higher) = ops
            .iter()
            .filter(accepted)
            .find(|o| o.token > Some(k) && o.ok_ns.is_some_and(|t| t < pay.inv_ns))
        {
            return Some(format!(
                "{payout} paid by token {k} ({}) after token {} had been accepted ({:?} by {})",
                pay.session,
                higher.token.unwrap_or_default(),
                higher.kind,
                higher.session
            ));
        }
    }
    None
}

/// Rule 3 on one key's operations: every grant whose token is not above a
/// grant that completed before it was invoked.
fn regressions(payout: &str, ops: &[&Op]) -> Vec<String> {
    let mut grants: Vec<(&Op, u64, u64)> = ops
        .iter()
        .filter(|o| o.kind == OpKind::Grant && o.is(Outcome::Ok))
        .filter_map(|o| Some((*o, o.token?, o.ok_ns?)))
        .collect();
    let mut by_ok = grants.clone();
    by_ok.sort_by_key(|g| g.2);
    grants.sort_by_key(|g| g.0.inv_ns);
    let mut out = Vec::new();
    let mut j = 0;
    let mut max: Option<(&Op, u64)> = None;
    for (b, token, _) in grants {
        while j < by_ok.len() && by_ok[j].2 < b.inv_ns {
            if max.is_none_or(|(_, t)| by_ok[j].1 > t) {
                max = Some((by_ok[j].0, by_ok[j].1));
            }
            j += 1;
        }
        // The same token again to the same session is the same grant: an
        // L4 by the session that holds the key answers the grant it has
        // (after a release that did not take effect, say).
        if let Some((a, t)) = max
            && (token < t || (token == t && a.session != b.session))
        {
            out.push(format!(
                "key payout:{payout}: {} was granted token {token} after {} had been granted {t}",
                b.session, a.session
            ));
        }
    }
    out
}

#[cfg(test)]
mod tests;
