//! A worker's client-side counts as a plain value ([`TallySnapshot`]): the
//! driver's live `Tally` copied, summed over a pool, carried over a worker
//! process's pipe and written into the experiments' result files.

use serde::{Deserialize, Serialize};

/// A `(payout_id, token)` a worker submitted under after its client check
/// passed: the lease was, as far as the client could tell, held.
pub type Belief = (String, u64);

/// A plain copy of a worker's client-side counts (bench-driver's `Tally`):
/// what a worker process reports over its pipe, what a pool sums over its
/// members, what a results row is built from, and what `pause.json` records.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TallySnapshot {
    /// Payout attempts started.
    pub attempts: u64,
    /// Submissions answered 200.
    pub paid_replies: u64,
    /// D4 refused: not enough lease for the rail hop.
    pub abandoned_insufficient_lease: u64,
    /// The lock was already lost at the check (no ledger call).
    pub abandoned_lost: u64,
    /// D4 refusals before a step after the first of a multi-step payout
    /// (`--steps`): the lock was given up with some legs paid and others
    /// not (a subset of the two abandonment counts above).
    #[serde(default)]
    pub abandoned_mid_payout: u64,
    /// Acquires that gave up.
    pub acquire_failed: u64,
    /// Handles reported lost.
    pub lock_lost: u64,
    /// FENCED_OUT replies seen by the client.
    pub fenced_replies: u64,
    /// Rail transport errors.
    pub rail_transport_errors: u64,
    /// Mean usable lease fraction at grant.
    pub usable_lease_fraction: f64,
    /// Submits made after a passed client check (the worker's beliefs of trigger 4).
    #[serde(default)]
    pub believed_held: Vec<Belief>,
}

impl TallySnapshot {
    /// Adds `o` into `self` (the lease fraction is averaged by attempts).
    pub fn add(&mut self, o: &TallySnapshot) {
        let total = self.attempts + o.attempts;
        if total > 0 {
            self.usable_lease_fraction = (self.usable_lease_fraction * self.attempts as f64
                + o.usable_lease_fraction * o.attempts as f64)
                / total as f64;
        }
        self.attempts = total;
        self.paid_replies += o.paid_replies;
        self.abandoned_insufficient_lease += o.abandoned_insufficient_lease;
        self.abandoned_lost += o.abandoned_lost;
        self.abandoned_mid_payout += o.abandoned_mid_payout;
        self.acquire_failed += o.acquire_failed;
        self.lock_lost += o.lock_lost;
        self.fenced_replies += o.fenced_replies;
        self.rail_transport_errors += o.rail_transport_errors;
        self.believed_held.extend(o.believed_held.iter().cloned());
    }
}
