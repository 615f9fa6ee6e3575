//! A cell's containers one by one, for fault schedules (`experiments chaos
//! --runtime docker`): a lock-server replica paused (`docker pause`: the
//! cgroup freezer, every thread stopped at once, as SIGSTOP stops a
//! process), unpaused, killed (`docker kill`, SIGKILL) and started again
//! (`docker start`: the same container, arguments, network and published
//! port, so the URL the workers were given stays right); the cell's own
//! PostgreSQL killed and started again (crash recovery on start, as a
//! PostgreSQL immediate shutdown); and the delay proxy in front of each
//! replica's database, to cut or delay it.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use testcontainers::bollard::errors::Error as BollardError;
use testcontainers::bollard::query_parameters::KillContainerOptionsBuilder;
use tokio::time::Instant;

use super::{DockerError, DockerServices};
use crate::proxy::{DelayProxy, ProxyControl};

/// How long a lock-server started again may take to answer `/healthz`.
pub const BACK_PATIENCE: Duration = Duration::from_secs(30);

/// An engine answer, with those that mean "already so" taken as done: 304
/// (already started) and 409 (not running, so not killed or paused again).
fn done(r: Result<(), BollardError>) -> Result<(), DockerError> {
    match r {
        Err(BollardError::DockerResponseServerError {
            status_code: 304 | 409,
            ..
        }) => Ok(()),
        r => Ok(r?),
    }
}

impl DockerServices {
    /// The lock-server replicas' base URLs by index (0 is the one started first).
    pub fn replica_urls(&self) -> Vec<String> {
        self.locks.iter().map(|l| l.url.clone()).collect()
    }

    /// The delay proxy in front of replica `i`'s PostgreSQL (cells started with `db_relays`).
    pub fn replica_db(&self, i: usize) -> Option<Arc<ProxyControl>> {
        self.db_relays.get(i).map(DelayProxy::control)
    }

    fn replica_id(&self, i: usize) -> Result<String, DockerError> {
        self.locks
            .get(i)
            .map(|l| l.container.id().to_string())
            .ok_or(DockerError::NoSuchReplica { replica: i })
    }

    /// `docker pause` of replica `i`.
    pub async fn pause_lock(&mut self, i: usize) -> Result<(), DockerError> {
        let id = self.replica_id(i)?;
        done(self.docker.pause_container(&id).await)?;
        self.locks[i].paused = true;
        Ok(())
    }

    /// `docker unpause` of replica `i` (nothing when it is not paused).
    pub async fn unpause_lock(&mut self, i: usize) -> Result<(), DockerError> {
        let id = self.replica_id(i)?;
        if !self.locks[i].paused {
            return Ok(());
        }
        done(self.docker.unpause_container(&id).await)?;
        self.locks[i].paused = false;
        Ok(())
    }

    /// `docker kill` (SIGKILL) of replica `i`, unpaused first (the engine
    /// kills no paused container); nothing when it is not running.
    pub async fn kill_lock(&mut self, i: usize) -> Result<(), DockerError> {
        self.unpause_lock(i).await?;
        let id = self.replica_id(i)?;
        kill(&self.docker, &id).await
    }

    /// `docker start` of replica `i` after a kill (nothing when it runs);
    /// returns once it answers `/healthz` on its URL.
    pub async fn start_lock(&mut self, i: usize) -> Result<(), DockerError> {
        let id = self.replica_id(i)?;
        done(self.docker.start_container(&id, None).await)?;
        let l = &self.locks[i];
        let health = format!("{}/healthz", l.url);
        let client = reqwest::Client::builder()
            .timeout(Duration::from_millis(500))
            .build()
            .map_err(|e| std::io::Error::other(e.to_string()))?;
        let t = Instant::now();
        while t.elapsed() < BACK_PATIENCE {
            if client
                .get(&health)
                .send()
                .await
                .is_ok_and(|r| r.status().is_success())
            {
                return Ok(());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Err(DockerError::NotBack {
            what: format!("lock-server replica {i} ({health})"),
            patience: BACK_PATIENCE,
            log: l.log.clone(),
        })
    }

    /// The cell's own PostgreSQL as the host reaches it (`127.0.0.1:PORT`),
    /// when it runs one.
    pub fn postgres_addr(&self) -> Option<SocketAddr> {
        self.pg.as_ref().map(|p| p.addr)
    }

    /// `docker kill` of the cell's PostgreSQL, then `docker start` of it:
    /// it recovers from its WAL on start. Returns once the container runs
    /// again; whether it accepts connections yet is the caller's to wait for.
    pub async fn crash_postgres(&mut self) -> Result<(), DockerError> {
        let pg = self.pg.as_ref().ok_or(DockerError::NoPostgresContainer)?;
        let id = pg.container.id().to_string();
        kill(&self.docker, &id).await?;
        done(self.docker.start_container(&id, None).await)
    }
}

/// SIGKILL of container `id`, returning once the engine reports it stopped
/// (a `docker start` before then would find it still running and do
/// nothing); a container that does not run is left so.
async fn kill(docker: &testcontainers::bollard::Docker, id: &str) -> Result<(), DockerError> {
    let options = KillContainerOptionsBuilder::new().signal("KILL").build();
    done(docker.kill_container(id, Some(options)).await)?;
    let t = Instant::now();
    loop {
        let state = docker.inspect_container(id, None).await?.state;
        if !state.and_then(|s| s.running).unwrap_or(false) || t.elapsed() >= BACK_PATIENCE {
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}
