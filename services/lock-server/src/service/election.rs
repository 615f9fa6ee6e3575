//! A replica's part in the leader election (C1 §6), as [`LockService`]
//! methods: one election round (renew, or take the row and load the store),
//! the takeover, stepping down, and resigning at shutdown. What the election
//! *is* — the config, the roles, what a replica knows — is [`crate::leader`],
//! which knows nothing of the service.

use std::sync::Arc;
use std::time::Duration;

use fencepost_api::clock::MonoTime;

use super::error::ServiceError;
use super::lock_service::{LockService, restore};
use crate::leader::{LeaderConfig, Role};
use crate::store::{Fence, LeaderBid, StoreError};

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
        let sabotaged =
            self.table().limits().sabotage == Some(crate::core::Sabotage::SkipEpochFence);
        self.store().set_fence(if sabotaged {
            // TEST (`--sabotage skip-epoch-fence`): writes without the check.
            Fence::Unchecked { epoch }
        } else {
            Fence::Leader {
                epoch,
                idle_limit: cfg.idle_limit(),
            }
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
        let (table, restored) = restore(limits, caps, snapshot, now);
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
            sessions = restored.sessions,
            grants = restored.grants,
            tombstones = restored.tombstones,
            "this replica leads: sessions and grants restored, their TTLs and leases restarted from now; expired ids answer 410"
        );
        let orphans = restored.orphans;
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
    pub(crate) fn fenced<T>(&self, r: Result<T, ServiceError>) -> Result<T, ServiceError> {
        match r {
            Err(ServiceError::Store(StoreError::Fenced(why))) => {
                self.step_down(&why);
                Err(ServiceError::NotLeader { leader: None })
            }
            other => other,
        }
    }

    /// The grace a takeover waits past the old leader lease.
    fn leader_grace(&self, cfg: &LeaderConfig) -> Duration {
        self.table().limits().grace.grace_for(cfg.lease)
    }
}
