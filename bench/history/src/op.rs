//! The history's model: what an operation is ([`OpKind`]), how it ended
//! ([`Outcome`]), the line a worker writes ([`Event`]) and the operation
//! those lines join into ([`Op`]), all stamped on one clock ([`mono_ns`]).

use serde::{Deserialize, Serialize};

/// Nanoseconds of `CLOCK_MONOTONIC`: one time base for every process on the
/// machine (the driver, each worker process), unaffected by wall-clock steps.
/// The history's only clock.
pub fn mono_ns() -> u64 {
    use nix::time::{ClockId, clock_gettime};
    clock_gettime(ClockId::CLOCK_MONOTONIC)
        .map(|t| t.tv_sec() as u64 * 1_000_000_000 + t.tv_nsec() as u64)
        .unwrap_or(0)
}

/// What an operation is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OpKind {
    /// L1: a session opened (its `client_check` says how the worker runs).
    Session,
    /// L4: acquire; completes `ok` with the token when the grant's reply arrived.
    Grant,
    /// `check_still_held` + `ensure_time_for` before the submit; `ok` = passed.
    Check,
    /// R2: claim (fence 1).
    Claim,
    /// R3: submit (fence 2), the irreversible step.
    Submit,
    /// R4: the rail release of an abandoned claim (fence 1).
    RailRelease,
    /// L6: the lock released (the end of the client's belief).
    Release,
    /// L5: a renewal the SDK's heartbeat sent for a grant (its token), seen
    /// through the session's renewal observer. Completes `ok` with the
    /// client's new deadline when acknowledged and applied, `lost` when the
    /// server refused it (`LOCK_LOST`, or a reply too late to apply),
    /// `unknown` without an answer. Histories written before renewals were
    /// recorded have none.
    Renew,
    /// A fault, not a request: the process froze itself (SIGSTOP) at a step
    /// of this payout; completes when it runs again. The checker skips it.
    Freeze,
}

/// How an operation completed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Outcome {
    /// Succeeded (granted, passed, accepted, paid).
    Ok,
    /// A fence refused it (`FENCED_OUT`).
    FencedOut,
    /// R2/R4 on a PAID payout.
    AlreadyPaid,
    /// R3 on a PAID payout.
    Duplicate,
    /// R3 by a token that does not hold the claim.
    NotClaimed,
    /// The client check found the lock lost; on a renewal, the server
    /// refused it (`LOCK_LOST`).
    Lost,
    /// The client check found too little lease for the rail hop (D4).
    InsufficientLease,
    /// Refused or failed otherwise (acquire gave up, another rail code).
    Failed,
    /// No answer (transport error, timeout): the effect is unknown.
    Unknown,
}

/// One line of a history file: an invocation (`outcome` absent) or the
/// completion of the invocation with the same `proc` and `id`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Event {
    /// The recording process (`w<idx>` plus a generation, e.g. `w2.1`).
    pub proc: String,
    /// The operation's number within `proc`.
    pub id: u64,
    /// [`mono_ns`] at this event.
    pub t_ns: u64,
    /// What it is (invocations only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kind: Option<OpKind>,
    /// The session, `<proc>/s<n>` (invocations only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<String>,
    /// The payout.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payout: Option<String>,
    /// The fencing token (on a grant: in its completion).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<u64>,
    /// The completion's outcome; absent on an invocation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<Outcome>,
    /// On a grant, a check or an acknowledged renewal: the client's deadline for the lease then, in
    /// [`mono_ns`] (`now + remaining`): the end of what the client believed. A grant whose reply
    /// came after its own client deadline (already lost when it arrived) has none: the deadline
    /// lies before the reply, and the history cannot say where.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline_ns: Option<u64>,
    /// On a session: whether its worker runs the client check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_check: Option<bool>,
    /// The lock key every operation of a multi-step payout (`--steps` > 1)
    /// runs under, `payout:<leg 0's id>` (invocations only): it attributes a
    /// leg's claim, check and submit to the grant of its lock. The `payout`
    /// of such an operation is the ledger payout it acts on: the leg's own
    /// for a claim, check, submit or rail release, leg 0's for the grant
    /// and the lock release. Absent on a one-step payout (key `payout:<payout>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}

/// One operation: an invocation joined with its completion, if any.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Op {
    /// The recording process.
    pub proc: String,
    /// Its number in `proc`.
    pub id: u64,
    /// What it is.
    pub kind: OpKind,
    /// The session it ran in.
    pub session: String,
    /// The payout, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub payout: Option<String>,
    /// The fencing token, if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<u64>,
    /// Invoked at, [`mono_ns`].
    pub inv_ns: u64,
    /// Completed at; `None`: never completed (the process was killed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ok_ns: Option<u64>,
    /// How it completed; `None` with `ok_ns`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub outcome: Option<Outcome>,
    /// The client's deadline reported with a grant, a check or an
    /// acknowledged renewal.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deadline_ns: Option<u64>,
    /// On a session: whether its worker runs the client check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_check: Option<bool>,
    /// The lock key of a multi-step payout's operation ([`Event::key`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub key: Option<String>,
}

impl Op {
    /// True when it completed with `outcome`.
    pub fn is(&self, outcome: Outcome) -> bool {
        self.outcome == Some(outcome)
    }
}
