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
    /// Checks the expectation from the ledger numbers.
    pub fn judge(check: &LedgerCheck, client_check: bool, pauses: u32) -> (bool, String) {
        let safe = check.paid_twice == 0
            && check.stale_paid == 0
            && check.duplicate_attempted == 0
            && check.holds();
        if client_check {
            (
                safe && check.fenced_out_total == 0,
                "client check on: the resumed worker abandons, fenced_out = 0; paid_twice = stale_paid = duplicate_attempted = 0".into(),
            )
        } else {
            (
                safe && check.fenced_out_total >= 1 && pauses >= 1,
                "client check off (UC-03): the stale submit reaches fence 2, fenced_out >= 1; paid_twice = stale_paid = duplicate_attempted = 0".into(),
            )
        }
    }
}
