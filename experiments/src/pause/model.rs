//! What the pause experiment is configured with ([`PauseConfig`]) and what
//! it found: one [`PauseRecord`] per frozen holder, [`PauseResult`] in all
//! (`pause.json`).

use std::time::Duration;

use bench_core::grid::PolicySpec;
use bench_core::timebase::{PRODUCTION_RAIL_READ_TIMEOUT, TimeBase};
use bench_driver::backend::BackendKind;
use bench_driver::backend::etcd::session_ttl_on_etcd;
use bench_driver::cell::{CellPlan, Conditions, Runtime};
use bench_driver::worker::TallySnapshot;
use fencepost_api::latency::LatencySpecError;
use fencepost_api::ledger_check::LedgerCheck;
use fencepost_api::rail::SubmissionOutcome;
use serde::{Deserialize, Serialize};

use crate::cli::PauseArgs;
use crate::timeline::Freeze;

/// The R7 prefix of the pause backlog.
pub const PAYOUT_PREFIX: &str = "pause";
/// The rail's latency: short and bounded, far below the scaled read timeout,
/// so no submit ever times out and turns into an unplanned retry.
pub const RAIL_LATENCY: &str = "uniform:1ms..5ms";
/// How long any single wait of the driver may take before the run fails.
pub(crate) const WAIT_LIMIT: Duration = Duration::from_secs(60);

/// The resolved configuration, recorded in the manifest and in `pause.json`.
#[derive(Clone, Debug, Serialize, Deserialize)]
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
    /// The lock service (issue 15); absent in runs before it: fencepost.
    #[serde(default)]
    pub backend: BackendKind,
}

impl PauseConfig {
    /// Resolves `args` with `seed`.
    pub fn resolve(args: &PauseArgs, seed: u64) -> Self {
        let tb = TimeBase::for_lease(args.ttl, true);
        let session_ttl = args.session_ttl.unwrap_or(args.ttl);
        // On etcd the session is the etcd lease every key shares: whole seconds.
        let session_ttl = match args.backend {
            BackendKind::Fencepost => session_ttl,
            BackendKind::Etcd => session_ttl_on_etcd(args.ttl, session_ttl),
        };
        PauseConfig {
            ttl_ms: args.ttl.as_millis() as u64,
            session_ttl_ms: session_ttl.as_millis() as u64,
            pauses: args.pauses,
            workers: args.workers,
            payouts_per_pause: args.payouts_per_pause,
            pause_factor: args.pause_factor,
            margin: args.margin,
            client_check: !args.disable_client_check,
            seed,
            rail_latency: RAIL_LATENCY.into(),
            rail_read_timeout_ms: tb.scale(PRODUCTION_RAIL_READ_TIMEOUT).as_millis() as u64,
            worst_case_hop_ms: tb.worst_case_hop(PRODUCTION_RAIL_READ_TIMEOUT).as_millis() as u64,
            acquire_budget_ms: (args.ttl / 4).as_millis().max(1) as u64,
            backend: args.backend,
        }
    }

    /// Where the services come from: the lock-server, or etcd, beside a rail-stub child.
    pub fn runtime(&self) -> Runtime {
        match self.backend {
            BackendKind::Fencepost => Runtime::Process {
                store: None,
                replicas: 1,
            },
            BackendKind::Etcd => Runtime::Etcd { etcd_url: None },
        }
    }

    fn lease(&self) -> Duration {
        Duration::from_millis(self.ttl_ms)
    }

    /// The cell of the other workers: the driver's plan (client check on).
    pub fn plan(&self) -> Result<CellPlan, LatencySpecError> {
        let lease = self.lease();
        Ok(CellPlan {
            id: "pause".into(),
            run_id: format!("pause-{}", self.seed),
            lease,
            margin: self.margin,
            policy: PolicySpec::Fixed,
            repeat: 0,
            session_ttl: Duration::from_millis(self.session_ttl_ms),
            heartbeat_divisor: fencepost_sdk::lease::HEARTBEAT_DIVISOR,
            time_base: TimeBase::for_lease(lease, true),
            rail_latency: self.rail_latency.parse()?,
            rail_read_timeout: Duration::from_millis(self.rail_read_timeout_ms),
            worst_case_hop: Duration::from_millis(self.worst_case_hop_ms),
            acquire_budget: Duration::from_millis(self.acquire_budget_ms),
            client_check: true,
            workers: self.workers,
            // The rounds decide when the window closes.
            duration: Duration::ZERO,
            payouts: self.payouts_per_pause,
            payout_prefix: PAYOUT_PREFIX.into(),
            seed: self.seed,
            conditions: Conditions::default(),
            // The rounds are the experiment: every one of their events counts.
            warmup: Duration::ZERO,
            cpu_quota: None,
            sampling: Default::default(),
        })
    }
}

/// What happened to one frozen holder.
#[derive(Clone, Debug, Serialize, Deserialize)]
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

impl PauseRecord {
    /// The freeze this record describes, on the paused worker's timeline row.
    pub fn freeze(&self) -> Freeze {
        Freeze {
            worker: PAUSED_WORKER.into(),
            payout: self.payout.clone(),
            stale_token: self.stale_token,
            from_s: self.stopped_at_s,
            to_s: self.resumed_at_s,
        }
    }
}

/// `pause.json`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PauseResult {
    /// Whether the paused worker ran the client check.
    pub client_check: bool,
    /// Pauses performed.
    pub pauses: u32,
    /// Fence refusals, both fences, from the ledger's counters (`lock.fenced.out`).
    pub fenced_out: u64,
    /// Fence-1 refusals (claim/release).
    pub fenced_out_fence1: u64,
    /// Fence-2 refusals (submit).
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

/// The timeline row name of the paused worker process (the others are `w1..`).
pub const PAUSED_WORKER: &str = "w0";
