//! Replicas with one leader (C1 §6). Several lock-servers share one
//! PostgreSQL store; the `fp_leader` row names the leader, its `epoch` and a
//! leader lease written on the database's clock ([`LockStore::claim_leadership`]).
//!
//! - **Serving.** The leader serves only while its own leader lease is ahead
//!   on its monotonic clock, computed the SDK's way: from the instant read just
//!   before the renewing statement was sent, `send + lease × (1 − margin)`
//!   ([`LEADER_MARGIN`]). The row's lease was written later than that send (on
//!   the database's clock), so a frozen leader stops serving before any standby
//!   may take over; thawed, it answers `503 NOT_LEADER`.
//! - **Fencing.** Every store write checks the epoch in its own transaction
//!   ([`Fence`]); a deposed leader's write fails and it steps down.
//! - **Takeover.** A standby takes the row only once the old lease plus grace
//!   (the grace of the leader lease) has passed on the database's clock, with
//!   the next epoch; then it loads sessions, tokens and holders and restarts
//!   every grant's lease and every session's TTL from its takeover instant, so
//!   a lease is only ever extended in the server's favour.
//!
//! `memory:` and `sqlite:` stay single-node ([`Role::Single`]): they serve
//! always and nothing is elected.

use std::sync::Arc;
use std::time::Duration;

use fencepost_api::clock::MonoTime;

use crate::core::LockTable;
use crate::service::LockService;
use crate::store::{Fence, LeaderBid, StoreError};

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

impl LockService {
    /// One round of the election: the leader renews its lease; a standby takes
    /// the row if it may (and then loads the store), else learns who leads.
    /// Run every [`LeaderConfig::period`] by [`crate::run`].
    pub async fn elect_once(self: &Arc<Self>) {
        let Some(cfg) = self.leader_config().cloned() else {
            return;
        };
        let (role, epoch) = {
            let l = self.leadership();
            (l.role, l.epoch)
        };
        let renew = (role == Role::Leader).then_some(epoch);
        let bid = LeaderBid {
            node: cfg.node.clone(),
            advertise: cfg.advertise.clone(),
            lease: cfg.lease,
            grace: self.leader_grace(&cfg),
            renew,
        };
        // Read before the statement is sent: the serving window counts from here.
        let send = self.now();
        match self.store().claim_leadership(&bid).await {
            Ok(row) if row.ours && renew.is_some() => {
                let mut l = self.leadership();
                if l.role == Role::Leader && l.epoch == row.epoch {
                    let until = send.saturating_add(cfg.usable());
                    l.serving_until = l.serving_until.max(until);
                }
            }
            Ok(row) if row.ours => self.take_over(&cfg, row.epoch, send).await,
            Ok(row) => {
                if role == Role::Leader {
                    self.step_down("the leader row has another epoch or its lease ran out");
                }
                let mut l = self.leadership();
                l.epoch = l.epoch.max(row.epoch);
                l.leader = row.leader.filter(|u| Some(u) != cfg.advertise.as_ref());
            }
            Err(e) => {
                tracing::warn!(error = %e, role = role.as_str(), epoch,
                    "leader election: the store did not answer; a leader stops serving once its lease runs out");
            }
        }
    }

    /// Became the leader of `epoch`: fence writes with it, load the store,
    /// restart every lease and TTL from now, then serve.
    async fn take_over(self: &Arc<Self>, cfg: &LeaderConfig, epoch: u64, send: MonoTime) {
        self.store().set_fence(Fence::Leader {
            epoch,
            idle_limit: cfg.idle_limit(),
        });
        let snapshot = match self.store().load_live().await {
            Ok(s) => s,
            Err(e) => {
                self.store().set_fence(Fence::Standby);
                tracing::warn!(error = %e, epoch, "took the leader row but could not load the store; retrying");
                return;
            }
        };
        let now = self.now();
        let (limits, caps) = {
            let t = self.table();
            (t.limits().clone(), t.caps().clone())
        };
        let mut table = LockTable::with_caps(limits, caps);
        let sessions = snapshot.sessions.len();
        for s in snapshot.sessions {
            table.restore_session(s.id, s.owner_id, Duration::from_millis(s.ttl_ms), now);
        }
        let mut orphans = Vec::new();
        let mut grants = 0usize;
        for k in snapshot.keys {
            let Some(h) = k.holder else { continue };
            let lease = Duration::from_millis(h.lease_ms);
            if table.restore_grant(k.key.clone(), h.token, h.session_id, lease, now) {
                grants += 1;
            } else {
                orphans.push((k.key, h.token));
            }
        }
        let generation = self.replace_table(table);
        {
            let mut l = self.leadership();
            l.role = Role::Leader;
            l.epoch = epoch;
            l.leader = cfg.advertise.clone();
            l.serving_until = send.saturating_add(cfg.usable());
            l.generation = generation;
        }
        tracing::info!(
            event = "leader_takeover",
            epoch,
            sessions,
            grants,
            "this replica leads: sessions and grants restored, their TTLs and leases restarted from now"
        );
        if let Err(e) = self.store().clear_grants(&orphans).await {
            tracing::warn!(error = %e, grants = orphans.len(), "could not clear grants of vanished sessions");
        }
    }

    /// At a clean shutdown, once nothing more is served: steps down and hands
    /// the leader row back, so a standby takes over without waiting out the
    /// lease. Best effort (a failure only means the standby waits).
    pub async fn resign(&self) {
        let (role, epoch) = {
            let l = self.leadership();
            (l.role, l.epoch)
        };
        let Some(cfg) = self.leader_config() else {
            return;
        };
        if role != Role::Leader {
            return;
        }
        self.step_down("shutting down");
        match self.store().resign_leadership(&cfg.node, epoch).await {
            Ok(()) => tracing::info!(event = "leader_resign", epoch, "handed the leader row back"),
            Err(e) => {
                tracing::warn!(error = %e, epoch, "could not hand the leader row back; a standby takes over after the lease")
            }
        }
    }

    /// Stops serving at once (a fenced write, or a lost renewal).
    pub fn step_down(&self, why: &str) {
        let mut l = self.leadership();
        if l.role != Role::Leader {
            return;
        }
        self.store().set_fence(Fence::Standby);
        l.role = Role::Standby;
        l.leader = None;
        tracing::warn!(
            event = "leader_step_down",
            epoch = l.epoch,
            why,
            "this replica no longer leads"
        );
    }

    /// Maps a fenced write to a step-down and `NOT_LEADER`.
    pub(crate) fn fenced<T>(
        &self,
        r: Result<T, crate::service::ServiceError>,
    ) -> Result<T, crate::service::ServiceError> {
        match r {
            Err(crate::service::ServiceError::Store(StoreError::Fenced(why))) => {
                self.step_down(&why);
                Err(crate::service::ServiceError::NotLeader { leader: None })
            }
            other => other,
        }
    }

    /// The grace a takeover waits past the old leader lease.
    fn leader_grace(&self, cfg: &LeaderConfig) -> Duration {
        self.table().limits().grace.grace_for(cfg.lease)
    }
}
