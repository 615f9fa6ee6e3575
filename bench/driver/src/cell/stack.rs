//! The services a cell runs against, behind one type: [`Stack`] starts a
//! lock-server and a rail-stub the way its [`Runtime`] says (child processes,
//! containers, or someone else's), puts the delay proxy in front of the
//! lock-server when the cell injects network delay, owns the fault tasks
//! (the server pause), and *always* stops all of it: [`Stack::stop`] on the
//! normal path, `Drop` on every other one (error, Ctrl-C, panic unwinding).
//!
//! A second lock backend, etcd, is [`Runtime::Etcd`]: the stack
//! starts etcd as its lock child (or uses `--etcd-url`), with its client URL
//! in [`Stack::lock_url`] and [`Stack::backend`] telling workers which
//! client to build; the pause fault and the pids work on it unchanged.
//!
//! Replicas: `Runtime::Process { replicas: N }` on a
//! `postgres://` store starts N lock-servers (leader lease 1 s) and gives the
//! workers every URL (comma-separated `lock_url`); CPU seconds per process
//! read the pids from [`Stack::pids`], the fence-1 trace the rail-stub's log
//! from [`Stack::rail_log`].
//!
//! TLS: with [`StackSpec::tls`] the process runtime makes a CA and
//! a loopback server certificate in the stack's directory, starts every
//! lock-server with them (`https://` URLs), and hands the CA to the workers
//! ([`Stack::tls_ca`]).

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fencepost_api::latency::LatencySpec;
use fencepost_harness::ChildService;
use serde::Serialize;

use crate::backend::redis::{RedisLaunch, RedisPersistence};
use crate::backend::{BackendKind, RailFences};
use crate::cell::faults::{Fault, FaultNotApplied, FaultTargets, FaultTasks};
use crate::docker::DockerServices;
use crate::proxy::{self, BaselineError, DelayProxy, ProxyControl};
use crate::rail::RailClient;
use bench_core::overhead::ProxyOverhead;

mod error;
mod launch;
mod replicas;
mod start;
mod tls;

use error::READY_PATIENCE;
pub use error::StackError;
pub use launch::{spawn_child, spawn_child_on};

/// The read timeout of the stack's own rail client (R6/R7 only; workers have their own).
const DRIVER_RAIL_TIMEOUT: Duration = Duration::from_secs(10);

/// Where the services come from.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "runtime", rename_all = "lowercase")]
pub enum Runtime {
    /// Child processes on free loopback ports, one fresh pair per stack.
    Process {
        /// `--store` for the lock-server; `None` = SQLite in the stack's directory.
        store: Option<String>,
        /// Lock-server replicas on that store (more than 1 needs
        /// `postgres://`). Workers get every URL; the first started leads.
        replicas: u32,
    },
    /// Containers (testcontainers) on a private network, fresh ones per
    /// stack: a rail-stub and lock-server replicas on PostgreSQL
    /// ([`crate::docker`]), leader lease [`REPLICA_LEADER_LEASE`].
    Docker {
        /// The PostgreSQL the lock-servers use, as the bench reaches it
        /// (relayed into the network); `None` runs one in a container of the
        /// stack's own, from `pg_image`.
        pg_url: Option<String>,
        /// The lock-server image.
        lock_image: String,
        /// The rail-stub image.
        rail_image: String,
        /// The PostgreSQL image, when `pg_url` is `None`.
        pg_image: String,
        /// Lock-server replicas, each a container.
        replicas: u32,
    },
    /// etcd as the lock service and a rail-stub child: etcd is
    /// started as a child (`etcd` on PATH, data in the stack's directory)
    /// unless `etcd_url` names one.
    Etcd {
        /// An etcd the user runs (its client URL); `None` starts one.
        etcd_url: Option<String>,
    },
    /// Redis as the lock service and a rail-stub child: `instances`
    /// redis-servers started as children (data and logs in the stack's
    /// directory) unless `urls` names running ones. With `redlock` the
    /// workers run Redlock over them and the rail-stub runs with its fences
    /// off (`--fences off`: Redlock has no token to check).
    Redis {
        /// Redis instances the user runs (`redis://HOST:PORT`); empty starts them.
        urls: Vec<String>,
        /// How many redis-servers to start (1 for the single-instance backend).
        instances: u32,
        /// The started servers' persistence.
        persistence: RedisPersistence,
        /// Redlock over the instances rather than the single-instance lock.
        redlock: bool,
    },
    /// Services the user runs; counters are read as before/after deltas.
    External {
        /// The lock-server's base URL.
        lock_url: String,
        /// The rail-stub's base URL.
        rail_url: String,
    },
}

/// The leader lease of replicas the bench starts: short, so a cell whose
/// predecessor's replicas were killed is served soon.
pub const REPLICA_LEADER_LEASE: Duration = Duration::from_secs(1);

/// Waits until one of `urls` answers `/readyz` 200 (a replica on PostgreSQL
/// first takes the leader row, which after a killed predecessor waits out its
/// lease plus grace); over TLS trusting `ca` when given.
async fn await_ready(urls: &[String], ca: Option<&Path>) -> Result<(), StackError> {
    const PROBE: Duration = Duration::from_millis(500);
    let c = tls::probe_client(ca, PROBE)?;
    let t = tokio::time::Instant::now();
    loop {
        for u in urls {
            let url = format!("{u}/readyz");
            let probe = c.send(fencepost_sdk::http::HttpMethod::Get, &url, None);
            if tokio::time::timeout(PROBE, probe)
                .await
                .is_ok_and(|r| r.is_ok_and(|r| r.status == 200))
            {
                return Ok(());
            }
        }
        if t.elapsed() >= READY_PATIENCE {
            return Err(StackError::NotReady {
                urls: urls.to_vec(),
            });
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// What a stack starts.
#[derive(Clone, Debug)]
pub struct StackSpec {
    /// Where the services come from.
    pub runtime: Runtime,
    /// The lock-server's `--default-ttl`.
    pub lease: Duration,
    /// The lock-server's `--session-ttl`.
    pub session_ttl: Duration,
    /// The rail-stub's `--latency`.
    pub rail_latency: LatencySpec,
    /// The rail-stub's and the delay proxy's seed.
    pub seed: u64,
    /// Extra round-trip delay between workers and lock-server (a proxy), if any.
    pub net_delay: Option<LatencySpec>,
    /// Fault schedules run while a cell's load runs.
    pub faults: Vec<Fault>,
    /// Extra rail-stub arguments (the chaos experiment's `--sabotage`).
    pub rail_args: Vec<String>,
    /// Extra lock-server arguments (process runtime; the chaos experiment's `--sabotage`).
    pub lock_args: Vec<String>,
    /// Replicas (process runtime, PostgreSQL): each reaches PostgreSQL
    /// through a delay proxy of its own, which faults can cut or delay.
    pub db_relays: bool,
    /// Serve the lock-server(s) over TLS with a certificate made for the
    /// stack (process runtime, no delay proxy).
    pub tls: bool,
}

/// The services themselves, by runtime.
enum Services {
    /// Child processes; the lock child is shared with the fault tasks.
    Process {
        /// The lock-server (the first replica: the leader at start).
        lock: Arc<Mutex<ChildService>>,
        /// The rail-stub.
        rail: ChildService,
        /// Further lock-server replicas, stopped with the stack.
        standbys: Vec<ChildService>,
    },
    /// Containers, removed when dropped (boxed: the guard is large).
    Docker(Box<DockerServices>),
    /// A rail-stub child in front of a lock service someone else runs (`--etcd-url`).
    RailOnly(ChildService),
    /// Nothing to stop.
    External,
}

/// A running set of services for one or more cells; see the module doc.
pub struct Stack {
    /// The services; `None` once stopped.
    services: Option<Services>,
    /// The delay proxy, if any (stopped before the services).
    proxy: Option<DelayProxy>,
    /// The fault schedules and, while a window is open, their tasks.
    faults: Vec<Fault>,
    /// The running fault tasks, between [`Stack::start_faults`] and [`Stack::stop_faults`].
    fault_tasks: Option<FaultTasks>,
    /// Where workers send lock traffic (the proxy, when there is one).
    lock_url: String,
    /// Where workers send rail traffic.
    rail_url: String,
    /// The lock service behind `lock_url`.
    backend: BackendKind,
    /// Whether the rail-stub compares fencing tokens.
    rail_fences: RailFences,
    /// The redis-servers the stack started, by instance: how to start each
    /// again in its place (empty on other runtimes).
    redis: Vec<RedisLaunch>,
    /// The driver's rail client: seeds backlogs and reads the ledger.
    rail: RailClient,
    /// Where the services' logs (and the embedded store) are.
    dir: PathBuf,
    /// The lock-server's arguments (process runtime), to restart it on the same store.
    lock_args: Vec<String>,
    /// Lock-server restarts so far (each logs to its own file).
    lock_restarts: u32,
    /// Per replica, its arguments (its own store URL when it has a relay).
    replica_args: Vec<Vec<String>>,
    /// Per replica, the delay proxy in front of its PostgreSQL (`db_relays`).
    db_relays: Vec<DelayProxy>,
    /// The services' own addresses (never the proxy's), by Prometheus job:
    /// `--metrics-listen`'s discovery answer.
    metrics_targets: Vec<(&'static str, String)>,
    /// The CA the lock-server's certificate chains to, when it serves TLS.
    tls_ca: Option<PathBuf>,
}

impl Stack {
    /// Where workers send lock traffic (through the delay proxy, when there is one).
    pub fn lock_url(&self) -> &str {
        &self.lock_url
    }

    /// The lock service behind [`Stack::lock_url`].
    pub fn backend(&self) -> BackendKind {
        self.backend
    }

    /// Whether the rail-stub compares fencing tokens (`off` for redlock, or
    /// a rail started with its fences off): the results' `rail_fences`.
    pub fn rail_fences(&self) -> RailFences {
        self.rail_fences
    }

    /// The CA (PEM) the lock-server's certificate chains to, when the stack
    /// serves TLS ([`StackSpec::tls`]): what every SDK client must trust.
    pub fn tls_ca(&self) -> Option<&Path> {
        self.tls_ca.as_deref()
    }

    /// The services as Prometheus targets of `cell`, one group per job
    /// (`lock-server` or `etcd`, and `rail-stub`): their own addresses, not
    /// the delay proxy's.
    pub fn metrics_targets(&self, cell: &str) -> Vec<crate::telemetry::TargetGroup> {
        let mut jobs: Vec<&str> = self.metrics_targets.iter().map(|(j, _)| *j).collect();
        jobs.dedup();
        jobs.into_iter()
            .map(|job| {
                let urls = self.metrics_targets.iter().filter(|(j, _)| *j == job);
                crate::telemetry::TargetGroup::new(job, cell, urls.map(|(_, u)| u))
            })
            .collect()
    }

    /// The rail-stub's base URL.
    pub fn rail_url(&self) -> &str {
        &self.rail_url
    }

    /// The directory the stack keeps its logs in (cells may add their own files).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The driver's rail client (R5 payout, R6 ledger, R7 backlog).
    pub fn rail(&self) -> &RailClient {
        &self.rail
    }

    /// The pids of the services this stack started as processes: (lock-server, rail-stub).
    pub fn pids(&self) -> Option<(i32, i32)> {
        match &self.services {
            Some(Services::Process { lock, rail, .. }) => Some((
                lock.lock().unwrap_or_else(|e| e.into_inner()).pid(),
                rail.pid(),
            )),
            _ => None,
        }
    }

    /// The rail-stub's log (its JSON events on stderr), when the stack
    /// started the rail-stub (process and docker runtimes).
    pub fn rail_log(&self) -> Option<PathBuf> {
        match &self.services {
            Some(Services::Process { .. } | Services::Docker(_)) => {
                Some(self.dir.join("rail-stub.log"))
            }
            _ => None,
        }
    }

    /// The delay proxy's knobs (spikes, loss, upstream), when the stack has a proxy.
    pub fn proxy_control(&self) -> Option<Arc<ProxyControl>> {
        self.proxy.as_ref().map(DelayProxy::control)
    }

    /// The lock-server child (process runtime): what a fault signals.
    pub fn lock_child(&self) -> Option<Arc<Mutex<ChildService>>> {
        match &self.services {
            Some(Services::Process { lock, .. }) if !self.lock_args.is_empty() => {
                Some(lock.clone())
            }
            _ => None,
        }
    }

    /// kill -9 of the lock-server, then a new one on the same durable store
    /// (process runtime, behind the proxy, which is pointed at the new port:
    /// workers keep one URL; docker runtime: `docker kill` and `docker
    /// start` of its container, on the same port; redis runtime: a new
    /// redis-server on the same port and directory, see
    /// [`Stack::restart_replica`]). Returns when the new one listens.
    pub async fn restart_lock(&mut self) -> Result<(), StackError> {
        if matches!(&self.services, Some(Services::Docker(_))) || !self.redis.is_empty() {
            return self.restart_replica(0).await;
        }
        let (Some(lock), Some(proxy)) = (self.lock_child(), self.proxy.as_ref()) else {
            return Err(StackError::RestartNeedsProxy);
        };
        {
            let mut l = lock.lock().unwrap_or_else(|e| e.into_inner());
            let _ = l.resume();
            l.kill9();
        }
        self.lock_restarts += 1;
        let log = self
            .dir
            .join(format!("lock-server.restart-{}.log", self.lock_restarts));
        let fresh = spawn_child("lock-server", self.lock_args.clone(), log).await?;
        proxy.control().set_upstream(fresh.addr());
        // The first lock-server target is the one restarted (chaos runs one).
        if let Some(t) = self.metrics_targets.first_mut() {
            t.1 = fresh.url();
        }
        *lock.lock().unwrap_or_else(|e| e.into_inner()) = fresh;
        Ok(())
    }

    /// The delay proxy's own overhead ([`proxy::measure_overhead`]) against
    /// the lock-server behind it, `pairs` heartbeats per path; `None` when
    /// the stack has no proxy.
    pub async fn proxy_overhead(
        &self,
        pairs: usize,
    ) -> Option<Result<ProxyOverhead, BaselineError>> {
        let upstream = self.proxy.as_ref()?.upstream();
        Some(proxy::measure_overhead(upstream, pairs).await)
    }

    fn fault_targets(&self) -> FaultTargets {
        FaultTargets {
            lock: match &self.services {
                Some(Services::Process { lock, .. }) => Some(lock.clone()),
                _ => None,
            },
        }
    }

    /// Starts the fault schedules (a measured window opens); no-op without faults.
    pub fn start_faults(&mut self) {
        if !self.faults.is_empty() && self.fault_tasks.is_none() {
            self.fault_tasks = Some(FaultTasks::start(&self.faults, &self.fault_targets()));
        }
    }

    /// Stops the fault schedules; every service is running again when this
    /// returns. Returns how many times they were applied since
    /// [`Stack::start_faults`] (the lock-server's SIGSTOPs); an error names a
    /// fault that fell due and was never applied.
    pub async fn stop_faults(&mut self) -> Result<u64, FaultNotApplied> {
        match self.fault_tasks.take() {
            Some(t) => t.stop().await,
            None => Ok(0),
        }
    }

    /// Stops everything: faults, the proxy, then the services.
    pub async fn stop(mut self) {
        // Stopping, not measuring: a missed fault was reported by the cell.
        let _ = self.stop_faults().await;
        self.shut_down();
    }

    /// The synchronous part of stopping, shared by [`Stack::stop`] and `Drop`.
    fn shut_down(&mut self) {
        self.proxy.take();
        match self.services.take() {
            Some(Services::Process {
                lock,
                rail,
                standbys,
            }) => {
                // Resume a paused server so it can be killed and reaped cleanly.
                let mut l = lock.lock().unwrap_or_else(|e| e.into_inner());
                let _ = l.resume();
                l.kill9();
                drop(standbys);
                drop(rail);
            }
            // Containers, relay and network are removed by its own Drop.
            Some(Services::Docker(d)) => drop(d),
            Some(Services::RailOnly(rail)) => drop(rail),
            Some(Services::External) | None => {}
        }
    }
}

impl Drop for Stack {
    fn drop(&mut self) {
        // Fault tasks are aborted with the runtime or left idle; the server is
        // resumed and killed below either way.
        self.shut_down();
    }
}

/// The socket address of an `http://IP:PORT` or `redis://IP:PORT` URL (the
/// proxy only forwards to loopback IPs we started or were given).
fn lock_addr(url: &str) -> Result<SocketAddr, StackError> {
    use std::net::ToSocketAddrs;
    let hostport = url
        .trim_start_matches("http://")
        .trim_start_matches("redis://")
        .trim_end_matches('/');
    hostport
        .to_socket_addrs()
        .map_err(StackError::Resolve)?
        .next()
        .ok_or_else(|| StackError::Unresolved {
            url: url.to_string(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(runtime: Runtime) -> StackSpec {
        StackSpec {
            runtime,
            lease: Duration::from_secs(1),
            session_ttl: Duration::from_secs(3),
            rail_latency: LatencySpec::Fixed(Duration::ZERO),
            seed: 1,
            net_delay: None,
            faults: Vec::new(),
            rail_args: Vec::new(),
            lock_args: Vec::new(),
            db_relays: false,
            tls: false,
        }
    }

    #[tokio::test]
    async fn replicas_on_a_single_node_store_are_refused_before_anything_starts() {
        let dir = std::env::temp_dir().join(format!("fencepost-stack-{}", std::process::id()));
        let runtime = Runtime::Process {
            store: Some("memory:".into()),
            replicas: 2,
        };
        let Err(e) = Stack::start(&spec(runtime), &dir).await else {
            panic!("two replicas on memory: started");
        };
        let _ = std::fs::remove_dir_all(&dir);
        assert!(matches!(
            e,
            StackError::ReplicasNeedPostgres { replicas: 2 }
        ));
        assert_eq!(
            e.to_string(),
            "--replicas 2 needs a postgres:// --store (memory: and sqlite: are single-node)"
        );
    }
}
