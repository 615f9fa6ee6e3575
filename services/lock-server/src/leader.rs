//! Replicas with one leader (C1 §6). Several lock-servers share one
//! PostgreSQL store; the `fp_leader` row names the leader, its `epoch` and a
//! leader lease written on the database's clock
//! ([`LockStore::claim_leadership`](crate::store::LockStore::claim_leadership)).
//!
//! - **Serving.** The leader serves only while its own leader lease is ahead
//!   on its monotonic clock, computed the SDK's way: from the instant read just
//!   before the renewing statement was sent, `send + lease × (1 − margin)`
//!   ([`LEADER_MARGIN`]). The row's lease was written later than that send (on
//!   the database's clock), so a frozen leader stops serving before any standby
//!   may take over; thawed, it answers `503 NOT_LEADER`.
//! - **Fencing.** Every store write checks the epoch in its own transaction
//!   ([`Fence`](crate::store::Fence)); a deposed leader's write fails and it
//!   steps down.
//! - **Takeover.** A standby takes the row only once the old lease plus grace
//!   (the grace of the leader lease) has passed on the database's clock, with
//!   the next epoch; then it loads sessions, tokens and holders and restarts
//!   every grant's lease and every session's TTL from its takeover instant, so
//!   a lease is only ever extended in the server's favour.
//!
//! `memory:` and `sqlite:` stay single-node ([`Role::Single`]): they serve
//! always and nothing is elected.
//!
//! This module is the election's own state and rules ([`LeaderConfig`],
//! [`Role`], [`LeaderState`]); it knows nothing of the service. The rounds a
//! replica runs (renew, take over, step down, resign) are `LockService`
//! methods, in `service/election.rs`.

use std::time::Duration;

use fencepost_api::clock::MonoTime;

/// The share of the leader lease a leader does not count on, like the SDK's
/// default margin (ADR-006): it serves for `lease × (1 − 0.30)` after the send
/// of its last successful renewal.
pub const LEADER_MARGIN: f64 = 0.30;

/// The `lock.leader.lease` default.
pub const DEFAULT_LEADER_LEASE: Duration = Duration::from_secs(5);

/// How a replica takes part in the election.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaderConfig {
    /// A random id of this process: the leader row's `node`.
    pub node: String,
    /// The base URL standbys name in `leader` (`--advertise`).
    pub advertise: Option<String>,
    /// The leader lease (`--leader-lease`).
    pub lease: Duration,
}

impl LeaderConfig {
    /// A config with a fresh random node id.
    pub fn new(advertise: Option<String>, lease: Duration) -> Self {
        LeaderConfig {
            node: uuid::Uuid::new_v4().simple().to_string(),
            advertise,
            lease,
        }
    }

    /// How long after a renewal's send the leader may serve.
    pub fn usable(&self) -> Duration {
        self.lease.mul_f64(1.0 - LEADER_MARGIN)
    }

    /// How often the leader renews and a standby polls: a third of the usable
    /// lease, so two renewals in a row may fail before it stops serving.
    pub fn period(&self) -> Duration {
        (self.usable() / 3).max(Duration::from_millis(10))
    }

    /// How long a write transaction may idle before PostgreSQL ends it: a
    /// quarter of the lease (at least 100 ms), so a frozen leader's row locks
    /// hold a takeover back by at most that.
    pub fn idle_limit(&self) -> Duration {
        (self.lease / 4).max(Duration::from_millis(100))
    }
}

/// This replica's part.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// `memory:` or `sqlite:`: one server, always serving.
    Single,
    /// Holds the leader row; serves while `serving_until` is ahead.
    Leader,
    /// Answers every L1–L8 with `503 NOT_LEADER`.
    Standby,
}

impl Role {
    /// `single-node`, `leader` or `standby` (for `/v1/config`).
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Single => "single-node",
            Role::Leader => "leader",
            Role::Standby => "standby",
        }
    }
}

/// What a replica knows of the election.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaderState {
    /// Its part.
    pub role: Role,
    /// The last epoch it saw (its own while leading).
    pub epoch: u64,
    /// The leader's URL, when known (its own while leading).
    pub leader: Option<String>,
    /// While leading: serve only while `now < serving_until`.
    pub serving_until: MonoTime,
    /// Bumped at every takeover: work decided on an older table is not applied.
    pub generation: u64,
}

impl LeaderState {
    /// The state of a single-node server or of a replica that just started.
    pub fn new(role: Role) -> Self {
        LeaderState {
            role,
            epoch: 0,
            leader: None,
            serving_until: MonoTime::ZERO,
            generation: 0,
        }
    }

    /// True when requests received at `now` may be served.
    pub fn serves(&self, now: MonoTime) -> bool {
        match self.role {
            Role::Single => true,
            Role::Leader => now < self.serving_until,
            Role::Standby => false,
        }
    }

    /// The `leader` a `NOT_LEADER` names: only another, live leader.
    pub fn hint(&self) -> Option<String> {
        match self.role {
            Role::Standby => self.leader.clone(),
            Role::Leader | Role::Single => None,
        }
    }
}
