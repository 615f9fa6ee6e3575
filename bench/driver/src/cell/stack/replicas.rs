//! The replicas of a stack, one by one, for fault schedules (`experiments
//! chaos --replicas N`): by index (0 is the one started first, the rest in
//! order), paused and resumed, killed, and restarted where it was — the
//! same address, store and arguments — so the URL list the workers were
//! given stays right. Child processes get signals; containers get `docker
//! pause`, `kill` and `start` (`crate::docker`). Which replica leads is the caller's
//! question (`/readyz` answers 200 on the one that serves).

use std::sync::Arc;

use fencepost_harness::ChildService;

use super::error::StackError;
use super::launch::spawn_child_on;
use super::{Services, Stack};
use crate::backend::redis::RedisLaunch;
use crate::docker::{DockerError, DockerServices};
use crate::proxy::{DelayProxy, ProxyControl};

impl Stack {
    /// The lock-server replicas' URLs by index (process and docker runtimes;
    /// the redis-servers' `redis://` URLs on the redis runtime; empty otherwise).
    pub fn replica_urls(&self) -> Vec<String> {
        if !self.redis.is_empty() {
            return self.redis.iter().map(RedisLaunch::url).collect();
        }
        match &self.services {
            Some(Services::Process { lock, standbys, .. }) => {
                std::iter::once(lock.lock().unwrap_or_else(|e| e.into_inner()).url())
                    .chain(standbys.iter().map(ChildService::url))
                    .collect()
            }
            Some(Services::Docker(d)) => d.replica_urls(),
            _ => Vec::new(),
        }
    }

    /// Runs `f` on replica `i`'s child, if there is one (process runtime).
    fn with_replica<T>(&mut self, i: usize, f: impl FnOnce(&mut ChildService) -> T) -> Option<T> {
        match self.services.as_mut()? {
            Services::Process { lock, standbys, .. } if i == 0 => {
                Some(f(&mut lock.lock().unwrap_or_else(|e| e.into_inner())))
            }
            Services::Process { standbys, .. } => standbys.get_mut(i - 1).map(f),
            _ => None,
        }
    }

    /// The containers, in the docker runtime.
    fn containers(&mut self) -> Option<&mut DockerServices> {
        match self.services.as_mut()? {
            Services::Docker(d) => Some(d),
            _ => None,
        }
    }

    /// The delay proxy in front of replica `i`'s PostgreSQL (stacks started
    /// with `db_relays`): cut it, or delay it with a spike.
    pub fn replica_db(&self, i: usize) -> Option<Arc<ProxyControl>> {
        match &self.services {
            Some(Services::Docker(d)) => d.replica_db(i),
            _ => self.db_relays.get(i).map(DelayProxy::control),
        }
    }

    /// SIGSTOP (docker: `docker pause`) of replica `i`; false when there is
    /// no such replica or it could not be paused.
    pub async fn pause_replica(&mut self, i: usize) -> bool {
        if let Some(d) = self.containers() {
            return logged(d.pause_lock(i).await, "pause", i);
        }
        self.with_replica(i, |c| c.pause().is_ok()).unwrap_or(false)
    }

    /// SIGCONT (docker: `docker unpause`) of replica `i`.
    pub async fn resume_replica(&mut self, i: usize) -> bool {
        if let Some(d) = self.containers() {
            return logged(d.unpause_lock(i).await, "unpause", i);
        }
        self.with_replica(i, |c| c.resume().is_ok())
            .unwrap_or(false)
    }

    /// kill -9 (docker: `docker kill`) of replica `i`, resumed first, so a
    /// paused one dies too.
    pub async fn kill_replica(&mut self, i: usize) -> bool {
        if let Some(d) = self.containers() {
            return logged(d.kill_lock(i).await, "kill", i);
        }
        self.with_replica(i, |c| {
            let _ = c.resume();
            c.kill9();
        })
        .is_some()
    }

    /// A fresh lock-server in replica `i`'s place (killed first if it still
    /// runs): its address, store and arguments, its own log (docker: the
    /// same container started again). Returns when it listens; it serves as
    /// a standby until it wins the leader row. On the redis runtime: a new
    /// redis-server on instance `i`'s port, flags and directory (its
    /// append-only file, if any, replayed); returns when it answers `PING`.
    pub async fn restart_replica(&mut self, i: usize) -> Result<(), StackError> {
        self.lock_restarts += 1;
        if let Some(launch) = self.redis.get(i).cloned() {
            self.kill_replica(i).await;
            let fresh = launch.spawn(&launch.log(self.lock_restarts)).await?;
            self.with_replica(i, move |c| *c = fresh);
            return Ok(());
        }
        if let Some(d) = self.containers() {
            d.kill_lock(i).await?;
            d.start_lock(i).await?;
            return Ok(());
        }
        let addr = self
            .with_replica(i, |c| c.addr())
            .ok_or(StackError::NoSuchReplica { replica: i })?;
        self.kill_replica(i).await;
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

    /// The stack's own PostgreSQL container (docker runtime without
    /// `pg_url`), as the host reaches it.
    pub fn postgres_container_addr(&self) -> Option<std::net::SocketAddr> {
        match &self.services {
            Some(Services::Docker(d)) => d.postgres_addr(),
            _ => None,
        }
    }

    /// `docker kill` and `docker start` of the stack's own PostgreSQL
    /// container; returns once it runs again (it then recovers from its WAL).
    pub async fn crash_postgres_container(&mut self) -> Result<(), StackError> {
        let d = self
            .containers()
            .ok_or(StackError::Docker(DockerError::NoPostgresContainer))?;
        Ok(d.crash_postgres().await?)
    }
}

/// A container fault's outcome as the process runtime's (a bool), the engine's refusal logged.
fn logged(r: Result<(), DockerError>, what: &str, replica: usize) -> bool {
    match r {
        Ok(()) => true,
        Err(e) => {
            tracing::warn!(replica, error = %e, "docker {what} of a lock-server replica failed");
            false
        }
    }
}
