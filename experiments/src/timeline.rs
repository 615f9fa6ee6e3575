//! A run's timeline, the vocabulary shared by the experiments that record one
//! (pause) and the plot that draws it ([`crate::plots::timeline`]): events on
//! the driver's clock, typed by [`EventKind`], and the stretches a worker was
//! frozen ([`Freeze`]). `events.json` is a list of [`Event`]s.

use serde::{Deserialize, Serialize};

/// What happened at a point of the timeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EventKind {
    /// Fence 1 accepted a claim.
    Claimed,
    /// The worker is about to freeze itself holding a token.
    Pausing,
    /// The worker runs again after the SIGCONT.
    Resumed,
    /// The worker abandoned a payout (D4 refused, or the lock was lost).
    Abandoned,
    /// A fence refused the worker (FENCED_OUT).
    Fenced,
    /// The rail paid a submission of the worker.
    Paid,
}

/// A point on the timeline.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// Seconds since the run's start (driver's clock, at receipt).
    pub t_s: f64,
    /// The worker, e.g. `w0`.
    pub worker: String,
    /// What happened.
    pub kind: EventKind,
    /// The payout, where known.
    pub payout: Option<String>,
    /// The token, where known.
    pub token: Option<u64>,
}

/// A stretch during which a worker was frozen holding a (soon stale) token.
#[derive(Clone, Debug, PartialEq)]
pub struct Freeze {
    /// The frozen worker.
    pub worker: String,
    /// The payout it held.
    pub payout: String,
    /// The token it held.
    pub stale_token: u64,
    /// Seconds since the start when it was seen stopped.
    pub from_s: f64,
    /// Seconds since the start when it was resumed.
    pub to_s: f64,
}
