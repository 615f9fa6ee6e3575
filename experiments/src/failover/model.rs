//! What `experiments failover` records: one [`FaultRecord`] per fault and
//! the whole run ([`FailoverResult`], `failover.json`), and its fixed sizes.

use std::time::Duration;

use bench_analysis::results::CellRow;
use serde::{Deserialize, Serialize};

/// How long a replica may take to serve again after a fault before the run fails.
pub(crate) const LEADER_PATIENCE: Duration = Duration::from_secs(60);
/// Payouts a worker can pay per second at most, with headroom (a release
/// build pays about 100/s per worker here); the backlog is sized from it.
pub(crate) const PAYOUT_RATE_CEILING_PER_S: u64 = 250;
/// Seconds of running the backlog covers beyond the planned window (the
/// warm-up, and faults that wait for a leader).
pub(crate) const BACKLOG_SLACK_S: u64 = 10;
/// The throughput bucket.
pub(crate) const BUCKET_S: f64 = 0.5;

/// One fault and how the replicas came through it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct FaultRecord {
    /// `kill9_leader`, `sigstop_leader` or `restart_postgres`.
    pub fault: String,
    /// Seconds after the window opened.
    pub at_s: f64,
    /// The replica (0–2) that led when the fault hit.
    pub leader_before: Option<usize>,
    /// The replica serving afterwards.
    pub leader_after: Option<usize>,
    /// Fault → first `/readyz` 200 of a replica (`None`: none within the patience).
    pub time_to_leader_ms: Option<f64>,
    /// Throughput (paid/s) of the worst 500 ms bucket from the fault to 3 leader leases after.
    pub min_throughput_per_s: Option<f64>,
    /// How long, from the fault, throughput stayed under half the baseline, s.
    pub below_half_s: Option<f64>,
    /// SIGSTOP only: 2xx replies the thawed old leader gave to L1/L2/L4 probes (must be 0).
    pub thawed_2xx: Option<u64>,
    /// Why the fault did not run, if it did not.
    pub skipped: Option<String>,
}

/// `failover.json`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct FailoverResult {
    /// The seed.
    pub seed: u64,
    /// The leader lease of every replica, ms.
    pub leader_lease_ms: u64,
    /// The faults, in order.
    pub faults: Vec<FaultRecord>,
    /// Median paid/s before the first fault.
    pub baseline_per_s: Option<f64>,
    /// `(seconds after the window opened, paid/s)` per 500 ms bucket.
    pub throughput: Vec<(f64, f64)>,
    /// The window's results row (sessions and handles lost, fences, ledger).
    pub row: CellRow,
    /// Every must-be-zero counter with its value.
    pub must_be_zero: Vec<(String, u64)>,
}
