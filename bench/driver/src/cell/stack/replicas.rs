//! The replicas of a process-runtime stack, one by one, for fault schedules
//! (`experiments chaos --replicas N`): by index (0 is the one started
//! first, the rest in order), paused and resumed, killed, and restarted
//! where it was — the same address, store and arguments — so the URL list
//! the workers were given stays right. Which replica leads is the caller's
//! question (`/readyz` answers 200 on the one that serves).

use std::sync::Arc;

use fencepost_harness::ChildService;

use super::error::StackError;
use super::launch::spawn_child_on;
use super::{Services, Stack};
use crate::proxy::{DelayProxy, ProxyControl};

impl Stack {
    /// The lock-server replicas' URLs by index (process runtime; empty otherwise).
    pub fn replica_urls(&self) -> Vec<String> {
        match &self.services {
            Some(Services::Process { lock, standbys, .. }) => {
                std::iter::once(lock.lock().unwrap_or_else(|e| e.into_inner()).url())
                    .chain(standbys.iter().map(ChildService::url))
                    .collect()
            }
            _ => Vec::new(),
        }
    }

    /// Runs `f` on replica `i`'s child, if there is one.
    fn with_replica<T>(&mut self, i: usize, f: impl FnOnce(&mut ChildService) -> T) -> Option<T> {
        match self.services.as_mut()? {
            Services::Process { lock, standbys, .. } if i == 0 => {
                Some(f(&mut lock.lock().unwrap_or_else(|e| e.into_inner())))
            }
            Services::Process { standbys, .. } => standbys.get_mut(i - 1).map(f),
            _ => None,
        }
    }

    /// The delay proxy in front of replica `i`'s PostgreSQL (stacks started
    /// with `db_relays`): cut it, or delay it with a spike.
    pub fn replica_db(&self, i: usize) -> Option<Arc<ProxyControl>> {
        self.db_relays.get(i).map(DelayProxy::control)
    }

    /// SIGSTOP of replica `i`; false when there is no such replica or the signal failed.
    pub fn pause_replica(&mut self, i: usize) -> bool {
        self.with_replica(i, |c| c.pause().is_ok()).unwrap_or(false)
    }

    /// SIGCONT of replica `i`.
    pub fn resume_replica(&mut self, i: usize) -> bool {
        self.with_replica(i, |c| c.resume().is_ok())
            .unwrap_or(false)
    }

    /// kill -9 of replica `i` (resumed first, so a paused one dies too).
    pub fn kill_replica(&mut self, i: usize) -> bool {
        self.with_replica(i, |c| {
            let _ = c.resume();
            c.kill9();
        })
        .is_some()
    }

    /// A fresh lock-server in replica `i`'s place (killed first if it still
    /// runs): its address, store and arguments, its own log. Returns when it
    /// listens; it serves as a standby until it wins the leader row.
    pub async fn restart_replica(&mut self, i: usize) -> Result<(), StackError> {
        let addr = self
            .with_replica(i, |c| c.addr())
            .ok_or(StackError::NoSuchReplica { replica: i })?;
        self.kill_replica(i);
        self.lock_restarts += 1;
        let log = self.dir.join(format!(
            "lock-server-{i}.restart-{}.log",
            self.lock_restarts
        ));
        let args = self
            .replica_args
            .get(i)
            .cloned()
            .unwrap_or_else(|| self.lock_args.clone());
        let fresh = spawn_child_on("lock-server", args, log, addr).await?;
        self.with_replica(i, move |c| *c = fresh);
        Ok(())
    }
}
