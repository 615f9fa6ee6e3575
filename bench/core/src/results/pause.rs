//! `pause.json`, the pause experiment's result ([`PauseResult`]): one
//! [`PauseRecord`] per frozen holder, the configuration it ran with
//! ([`PauseConfig`]). `experiments pause` writes it, the ADR evidence
//! (`bench-report`) reads it: both with these types.

use fencepost_api::ledger_check::LedgerCheck;
use fencepost_api::rail::SubmissionOutcome;
use serde::{Deserialize, Serialize};

use crate::backend::BackendKind;
use crate::tally::TallySnapshot;

/// The resolved configuration, recorded in the manifest and in `pause.json`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PauseConfig {
    /// Lease per acquire, ms.
    pub ttl_ms: u64,
    /// Session TTL, ms.
    pub session_ttl_ms: u64,
    /// Pauses (rounds).
    pub pauses: u32,
    /// Other workers.
    pub workers: u32,
    /// Payouts per round.
    pub payouts_per_pause: u64,
    /// Minimum pause as a multiple of the lease.
    pub pause_factor: f64,
    /// Client margin.
    pub margin: f64,
    /// Whether the paused worker runs the client check (the others always do).
    pub client_check: bool,
    /// The seed.
    pub seed: u64,
    /// The rail's latency spec.
    pub rail_latency: String,
    /// R3 read timeout, ms (5 s scaled).
    pub rail_read_timeout_ms: u64,
    /// What D4 requires before a submit, ms ((5 s + 2 s) scaled).
    pub worst_case_hop_ms: u64,
    /// Acquire budget, ms (lease / 4).
    pub acquire_budget_ms: u64,
    /// The lock service; absent in runs before it: fencepost.
    #[serde(default)]
    pub backend: BackendKind,
    /// Whether the rail-stub checked tokens (fence 1 on claim, fence 2 on
    /// submit); off for a lock without a fencing token (redlock), whose
    /// fenced counts are then not applicable. Absent in runs before it: on.
    #[serde(default = "fences_on")]
    pub rail_fences: bool,
}

/// `rail_fences` of a `pause.json` written before the field: every earlier
/// run's rail checked tokens.
fn fences_on() -> bool {
    true
}

/// What happened to one frozen holder.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PauseRecord {
    /// Round, from 1.
    pub round: u32,
    /// The payout it was frozen on.
    pub payout: String,
    /// The token it held while frozen (stale by the time it resumed).
    pub stale_token: u64,
    /// The token the payout was paid under, from R5 (the takeover).
    pub paid_token: Option<u64>,
    /// Seconds from the run's start when the process was seen stopped.
    pub stopped_at_s: f64,
    /// Seconds from the run's start when it was SIGCONTed.
    pub resumed_at_s: f64,
    /// What the ledger recorded for the stale token's submissions (empty: it never submitted).
    pub stale_submissions: Vec<SubmissionOutcome>,
    /// `abandoned` (no ledger call under the stale token) or `fenced_out` (fence 2 refused it) or `paid` (a violation).
    pub outcome: String,
    /// Seconds from the freeze to the first claim of the payout by another
    /// worker: how long the lock service kept the frozen holder's key (lease
    /// or session TTL, plus grace on fencepost; plus etcd's lessor check on etcd).
    #[serde(default)]
    pub takeover_after_s: Option<f64>,
}

/// `pause.json`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PauseResult {
    /// Whether the paused worker ran the client check.
    pub client_check: bool,
    /// Pauses performed.
    pub pauses: u32,
    /// Fence refusals, both fences, from the ledger's counters (`lock.fenced.out`).
    pub fenced_out: u64,
    /// Fence-1 refusals (claim/release); absent in files before the split: 0.
    #[serde(default)]
    pub fenced_out_fence1: u64,
    /// Fence-2 refusals (submit); absent in files before the split: 0.
    #[serde(default)]
    pub fenced_out_fence2: u64,
    /// Submissions on PAID payouts (`rail.duplicate.attempted`).
    pub duplicate_attempted: u64,
    /// Payouts PAID.
    pub paid: u64,
    /// Payouts in the ledger.
    pub payouts: u64,
    /// Payouts paid more than once (must be 0).
    pub paid_twice: u64,
    /// Payouts paid under a stale token (must be 0).
    pub stale_paid: u64,
    /// `check_ledger` found no violation.
    pub ledger_ok: bool,
    /// The experiment's expectation for this mode held.
    pub expectation_met: bool,
    /// The expectation, in words.
    pub expectation: String,
    /// Per pause.
    #[serde(default)]
    pub paused: Vec<PauseRecord>,
    /// The paused worker's client-side counts, all rounds.
    pub paused_worker: TallySnapshot,
    /// The other workers' client-side counts, all rounds.
    pub other_workers: TallySnapshot,
    /// The configuration.
    pub config: PauseConfig,
}

impl PauseResult {
    /// Checks the experiment's expectation for its mode from the ledger
    /// numbers: `client_check` on the resumed worker, `rail_fences` on the
    /// rail. With the fences on, nothing is ever paid twice and, without the
    /// client check, fence 2 refuses the stale submit. With them off (a lock
    /// without a fencing token) nothing can be fenced: with the client check
    /// the resumed holder stops itself, without it its stale submit pays a
    /// second time — the expected consequence of such a lock, which the ledger
    /// check still reports as its violation (`ledger_ok` false).
    pub fn judge(
        check: &LedgerCheck,
        client_check: bool,
        rail_fences: bool,
        pauses: u32,
    ) -> (bool, String) {
        let safe = check.paid_twice == 0
            && check.stale_paid == 0
            && check.duplicate_attempted == 0
            && check.holds();
        match (rail_fences, client_check) {
            (true, true) => (
                safe && check.fenced_out_total == 0,
                "client check on: the resumed worker abandons, fenced_out = 0; paid_twice = stale_paid = duplicate_attempted = 0".into(),
            ),
            (true, false) => (
                safe && check.fenced_out_total >= 1 && pauses >= 1,
                "client check off (UC-03): the stale submit reaches fence 2, fenced_out >= 1; paid_twice = stale_paid = duplicate_attempted = 0".into(),
            ),
            (false, true) => (
                safe,
                "client check on, no fencing token (rail fences off, fenced_out not applicable): the resumed worker abandons; paid_twice = stale_paid = duplicate_attempted = 0".into(),
            ),
            (false, false) => (
                check.paid_twice >= 1 && pauses >= 1,
                "client check off, no fencing token (rail fences off, fenced_out not applicable): the resumed worker's stale submit pays the payout a second time, paid_twice >= 1 — the expected consequence of a lock without a fencing token; the ledger check reports it as a violation".into(),
            ),
        }
    }
}

#[cfg(test)]
mod tests {
    use fencepost_api::ledger_check::{Violation, ViolationKind};

    use super::*;

    fn ledger(paid_twice: u64, fenced_out: u64) -> LedgerCheck {
        LedgerCheck {
            payouts: 20,
            paid: 20,
            paid_twice,
            fenced_out_fence2: fenced_out,
            fenced_out_total: fenced_out,
            violations: (0..paid_twice)
                .map(|_| Violation {
                    payout_id: Some("pause-1".into()),
                    kind: ViolationKind::PaidTwice,
                    detail: "paid 2 times, by tokens [0, 0]".into(),
                })
                .collect(),
            ..LedgerCheck::default()
        }
    }

    #[test]
    fn without_a_fencing_token_a_double_payment_is_the_expectation_and_still_a_violation() {
        let l = ledger(5, 0);
        let (met, words) = PauseResult::judge(&l, false, false, 5);
        assert!(met, "{words}");
        assert!(!l.holds(), "the ledger check keeps calling it a violation");
        assert!(words.contains("not applicable"), "{words}");
        // Nothing paid twice: the no-token run did not show what it should.
        assert!(!PauseResult::judge(&ledger(0, 0), false, false, 5).0);
    }

    #[test]
    fn without_a_fencing_token_the_client_check_must_keep_every_payment_single() {
        assert!(PauseResult::judge(&ledger(0, 0), true, false, 5).0);
        assert!(!PauseResult::judge(&ledger(1, 0), true, false, 5).0);
    }

    #[test]
    fn with_fences_a_double_payment_never_meets_any_expectation() {
        for client_check in [true, false] {
            assert!(!PauseResult::judge(&ledger(1, 1), client_check, true, 5).0);
        }
        assert!(PauseResult::judge(&ledger(0, 5), false, true, 5).0);
        assert!(!PauseResult::judge(&ledger(0, 0), false, true, 5).0);
        assert!(PauseResult::judge(&ledger(0, 0), true, true, 5).0);
    }
}
