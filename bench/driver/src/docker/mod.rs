//! `--runtime docker` (C4): each cell gets fresh containers, started with the
//! `testcontainers` crate from the locally built images
//! (`scripts/build-images.sh`), on a private bridge network of its own: a
//! rail-stub and one lock-server per replica on PostgreSQL — the one the
//! bench is given, or (chaos) a PostgreSQL container of the cell's own
//! (`scripts/build-postgres-image.sh`). Everything it starts carries the labels
//! `fencepost.bench=1` and `fencepost.run=<this process's run id>`, and is
//! removed when the cell's [`DockerServices`] is dropped (error, Ctrl-C, panic
//! unwinding); [`RunCleanup`] removes whatever is left with the run's label
//! when the run ends. Faults act on the containers one by one (`cluster.rs`:
//! `docker pause`, `docker kill`, `docker start`, and the relays' cuts).
//!
//! Three things this module does because of the machine, each documented where
//! it lives:
//! - **API version shim.** testcontainers 0.28 (bollard 0.21) always speaks
//!   Docker API 1.53 and never negotiates; Docker Engine 20.10 answers 1.41 at
//!   most and refuses newer clients. When the engine is older, a tiny proxy on
//!   a private unix socket rewrites the version in each request line, and
//!   `DOCKER_HOST` points testcontainers at it ([`engine`]).
//! - **PostgreSQL relay.** The containers sit on a private network; the
//!   PostgreSQL the bench is given (`--pg-url`, e.g. the throwaway cluster of
//!   `scripts/pg-test-cluster.sh` on 127.0.0.1) is usually reachable only from
//!   the host. A TCP relay in the bench listens on the network's gateway
//!   address (a host address on that bridge) and forwards to it; the
//!   lock-server's store URL names the gateway IP, so no name resolution is
//!   involved. With `db_relays`, each replica has a delay proxy of its own
//!   there instead, which a fault can cut or delay.
//! - **Loopback-only ports.** The services' ports are published on 127.0.0.1
//!   only, on host ports the bench picks (so a container started again after
//!   a kill keeps its URL); each lock-server advertises that URL.
//!
//! The shim lives in `api_shim.rs`, the relay in `pg_relay.rs`, the faults in
//! `cluster.rs`, what can fail in `error.rs` ([`DockerError`]); this module
//! owns the containers, their network and their cleanup.

mod api_shim;
mod cluster;
mod error;
pub(crate) mod pg_relay;

use std::collections::HashMap;
use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use fencepost_api::latency::LatencySpec;
use testcontainers::bollard::Docker;
use testcontainers::bollard::models::{HostConfig, NetworkCreateRequest, PortBinding};
use testcontainers::core::logs::LogFrame;
use testcontainers::core::{IntoContainerPort, WaitFor};
use testcontainers::runners::AsyncRunner;
use testcontainers::{ContainerAsync, GenericImage, ImageExt};
use tokio::task::JoinHandle;

use crate::proxy::DelayProxy;

pub use api_shim::{engine, engine_docker_host};
pub use error::{DockerError, ProbeError};
pub use pg_relay::rewrite_pg_url;
use pg_relay::{pg_addr, pg_relay};

/// The label every container and network of the docker runtime carries.
pub const LABEL_BENCH: &str = "fencepost.bench";
/// The label naming the bench process (run) that started a container.
pub const LABEL_RUN: &str = "fencepost.run";
/// The lock-server's port inside its container (the image's `LOCK_LISTEN`).
pub const LOCK_PORT: u16 = 7070;
/// The rail-stub's port inside its container (the image's `RAIL_LISTEN`).
pub const RAIL_PORT: u16 = 7080;
/// How long a container may take to print its `listening on` line.
pub const START_TIMEOUT: Duration = Duration::from_secs(60);
/// The default lock-server image (built by `scripts/build-images.sh`).
pub const DEFAULT_LOCK_IMAGE: &str = "fencepost/lock-server:dev";
/// The default rail-stub image (built by `scripts/build-images.sh`).
pub const DEFAULT_RAIL_IMAGE: &str = "fencepost/rail-stub:dev";
/// The default PostgreSQL image (built by `scripts/build-postgres-image.sh`).
pub const DEFAULT_PG_IMAGE: &str = "fencepost/postgres:dev";

/// This process's run id: the value of [`LABEL_RUN`] on everything it starts.
pub fn run_id() -> &'static str {
    static ID: OnceLock<String> = OnceLock::new();
    ID.get_or_init(|| {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        format!("{}-{:08x}", std::process::id(), nanos)
    })
}

/// The PostgreSQL a cell's lock-servers store in.
#[derive(Clone, Debug)]
pub enum Postgres {
    /// One the bench is given (`--pg-url`), as the bench reaches it; relayed into the network.
    Url(String),
    /// A container of its own on the cell's network, started from `image`
    /// (`scripts/build-postgres-image.sh`), so a fault can `docker kill` it.
    Container {
        /// The image, `REPO:TAG`.
        image: String,
    },
}

/// What one cell's containers need.
#[derive(Clone, Debug)]
pub struct DockerSpec {
    /// The lock-server image, `REPO:TAG`.
    pub lock_image: String,
    /// The rail-stub image, `REPO:TAG`.
    pub rail_image: String,
    /// The PostgreSQL the lock-servers store tokens in.
    pub postgres: Postgres,
    /// Lock-server replicas (each its own container; 1 is one lock-server).
    pub replicas: u32,
    /// Each replica reaches PostgreSQL through a delay proxy of its own
    /// (on the network's gateway), which a fault can cut or delay.
    pub db_relays: bool,
    /// The relays' seed.
    pub seed: u64,
    /// lock-server arguments besides `--store` and `--advertise` (`--default-ttl`, ...).
    pub lock_args: Vec<String>,
    /// rail-stub arguments (`--latency`, `--seed`).
    pub rail_args: Vec<String>,
    /// Where the containers' stderr logs go (`lock-server.log`,
    /// `lock-server-I.log` for replica I, `rail-stub.log`, `postgres.log`).
    pub log_dir: PathBuf,
}

/// One lock-server replica's container.
struct LockReplica {
    /// The container (removed by testcontainers on drop).
    container: ContainerAsync<GenericImage>,
    /// Its base URL on the host's loopback (a port fixed for its life, so a
    /// `docker start` after a kill keeps it).
    url: String,
    /// Its log file: the container's whole stderr, every start of it,
    /// written when the cell ends.
    log: PathBuf,
    /// Paused (`docker pause`) and not yet unpaused.
    paused: bool,
}

/// The cell's PostgreSQL container.
struct PgContainer {
    /// The container.
    container: ContainerAsync<GenericImage>,
    /// `host:port` on the host's loopback.
    addr: SocketAddr,
    /// Its log file, written when the cell ends.
    log: PathBuf,
}

/// One cell's containers; dropping it removes them, the relays and the network.
pub struct DockerServices {
    /// The lock-server replicas; 0 is the one started first.
    locks: Vec<LockReplica>,
    /// The rail-stub container (removed by testcontainers on drop).
    rail: Option<ContainerAsync<GenericImage>>,
    /// The PostgreSQL container, when the cell runs its own.
    pg: Option<PgContainer>,
    /// The shared PostgreSQL relay's accept loop (no per-replica relays);
    /// aborting it drops its connections.
    relay: Option<JoinHandle<()>>,
    /// Per replica, the delay proxy in front of its PostgreSQL (`db_relays`).
    db_relays: Vec<DelayProxy>,
    /// The private network, removed after the containers.
    network: String,
    /// The engine client that created the network.
    docker: Docker,
    /// The lock-servers' base URLs on the host's loopback, comma-separated.
    pub lock_url: String,
    /// The rail-stub's base URL on the host's loopback.
    pub rail_url: String,
}

impl DockerServices {
    /// The first lock-server container's id (for CPU quotas).
    pub fn lock_container_id(&self) -> Option<&str> {
        self.locks.first().map(|l| l.container.id())
    }

    /// The rail-stub container's id.
    pub fn rail_container_id(&self) -> Option<&str> {
        self.rail.as_ref().map(|c| c.id())
    }

    /// The private network the cell's containers share.
    pub fn network(&self) -> &str {
        &self.network
    }

    /// Writes each lock-server's and PostgreSQL's whole stderr (every start
    /// of the container, which a log stream that ends at a kill would not
    /// have) to its log file, through a temporary file renamed into place.
    fn save_logs(&self) {
        let logs = self.locks.iter().map(|l| (l.container.id(), &l.log));
        let pg = self.pg.iter().map(|p| (p.container.id(), &p.log));
        for (id, log) in logs.chain(pg) {
            let tmp = log.with_extension("log.tmp");
            let Ok(file) = std::fs::File::create(&tmp) else {
                continue;
            };
            let ok = docker_cli()
                .args(["logs", id])
                .stdout(std::process::Stdio::null())
                .stderr(file)
                .status()
                .is_ok_and(|s| s.success());
            if ok {
                let _ = std::fs::rename(&tmp, log);
            } else {
                let _ = std::fs::remove_file(&tmp);
            }
        }
    }
}

impl Drop for DockerServices {
    fn drop(&mut self) {
        self.save_logs();
        // A paused container is unpaused first, so its removal cannot wait on it.
        for l in self.locks.iter().filter(|l| l.paused) {
            let _ = docker_cli().args(["unpause", l.container.id()]).output();
        }
        // Containers first (testcontainers removes each with `rm -f` in its
        // own Drop), then the relays, then the network they were attached to.
        self.locks.clear();
        self.rail.take();
        self.pg.take();
        if let Some(relay) = self.relay.take() {
            relay.abort();
        }
        self.db_relays.clear();
        let (docker, network) = (self.docker.clone(), self.network.clone());
        let remove = async move {
            if let Err(e) = docker.remove_network(&network).await {
                tracing::warn!(%network, error = %e, "could not remove the cell's network");
            }
        };
        match tokio::runtime::Handle::try_current() {
            Ok(h) if h.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
                tokio::task::block_in_place(|| h.block_on(remove));
            }
            // On a current-thread runtime (or none) RunCleanup removes it at the end of the run.
            _ => {}
        }
    }
}

/// A free TCP port on 127.0.0.1, as the OS hands one out (the listener is
/// closed again: a container's published port must stay the same across a
/// `docker start`, so it is chosen here, not by the engine).
fn free_port() -> Result<u16, DockerError> {
    Ok(std::net::TcpListener::bind(("127.0.0.1", 0))?
        .local_addr()?
        .port())
}

/// Starts one cell's containers on a new private network — PostgreSQL when
/// the cell runs its own, the rail-stub, then each lock-server replica —
/// and returns once each has printed its ready line.
pub async fn start(spec: &DockerSpec) -> Result<DockerServices, DockerError> {
    let docker = engine().await?;
    check_images(&docker, spec).await?;
    static CELL: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = CELL.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let network = format!("fencepost-{}-{n}", run_id());
    let labels = HashMap::from([
        (LABEL_BENCH.to_string(), "1".to_string()),
        (LABEL_RUN.to_string(), run_id().to_string()),
    ]);
    docker
        .create_network(NetworkCreateRequest {
            name: network.clone(),
            driver: Some("bridge".into()),
            labels: Some(labels.clone()),
            ..Default::default()
        })
        .await
        .map_err(|source| DockerError::CreateNetwork {
            network: network.clone(),
            source,
        })?;
    // From here on the guard owns the network, so every exit path removes it.
    let mut services = DockerServices {
        locks: Vec::new(),
        rail: None,
        pg: None,
        relay: None,
        db_relays: Vec::new(),
        network: network.clone(),
        docker: docker.clone(),
        lock_url: String::new(),
        rail_url: String::new(),
    };
    let gateway = network_gateway(&docker, &network).await?;
    let pg_url = services.start_postgres(spec, &labels).await?;
    let stores = services.relay_stores(spec, gateway, &pg_url).await?;
    services.start_rail(spec, &labels).await?;
    services.start_locks(spec, &labels, stores).await?;
    Ok(services)
}

/// Fails naming the first image of `spec` the engine does not have (none can be pulled).
async fn check_images(docker: &Docker, spec: &DockerSpec) -> Result<(), DockerError> {
    let mut images = vec![&spec.lock_image, &spec.rail_image];
    if let Postgres::Container { image } = &spec.postgres {
        images.push(image);
    }
    for image in images {
        docker
            .inspect_image(image)
            .await
            .map_err(|detail| DockerError::ImageMissing {
                image: image.clone(),
                detail,
            })?;
    }
    Ok(())
}

impl DockerServices {
    /// The PostgreSQL the lock-servers use, as the bench reaches it: the
    /// user's URL, or a container of the cell's own started here.
    async fn start_postgres(
        &mut self,
        spec: &DockerSpec,
        labels: &HashMap<String, String>,
    ) -> Result<String, DockerError> {
        let image = match &spec.postgres {
            Postgres::Url(url) => return Ok(url.clone()),
            Postgres::Container { image } => image,
        };
        let port = free_port()?;
        let ready = WaitFor::message_on_stderr(PG_READY_LINE);
        let pg = container(
            image,
            (5432, port),
            ready,
            &self.network,
            "postgres",
            labels,
            &[],
        )
        .start()
        .await
        .map_err(|source| DockerError::StartPostgres { source })?;
        self.pg = Some(PgContainer {
            container: pg,
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            log: spec.log_dir.join("postgres.log"),
        });
        Ok(format!("postgres://postgres@127.0.0.1:{port}/postgres"))
    }

    /// Each replica's store URL, through a relay on the network's gateway:
    /// one delay proxy per replica (`db_relays`) or one shared relay.
    async fn relay_stores(
        &mut self,
        spec: &DockerSpec,
        gateway: IpAddr,
        pg_url: &str,
    ) -> Result<Vec<String>, DockerError> {
        let pg_upstream = pg_addr(pg_url).await?;
        if !spec.db_relays {
            let (relay_addr, relay) = pg_relay(gateway, pg_upstream).await?;
            self.relay = Some(relay);
            let store = rewrite_pg_url(pg_url, relay_addr)?;
            return Ok(vec![store; spec.replicas.max(1) as usize]);
        }
        let mut stores = Vec::new();
        for i in 0..spec.replicas {
            let relay = DelayProxy::start_on(
                gateway,
                pg_upstream,
                LatencySpec::Fixed(Duration::ZERO),
                spec.seed ^ u64::from(i),
            )
            .await
            .map_err(|source| DockerError::RelayListen {
                bind: gateway,
                source,
            })?;
            stores.push(rewrite_pg_url(pg_url, relay.addr())?);
            self.db_relays.push(relay);
        }
        Ok(stores)
    }

    /// The rail-stub's container.
    async fn start_rail(
        &mut self,
        spec: &DockerSpec,
        labels: &HashMap<String, String>,
    ) -> Result<(), DockerError> {
        let rail = container(
            &spec.rail_image,
            (RAIL_PORT, free_port()?),
            WaitFor::message_on_stdout("listening on http://"),
            &self.network,
            "rail-stub",
            labels,
            &spec.rail_args,
        )
        .with_log_consumer(stderr_to(&spec.log_dir.join("rail-stub.log")))
        .start()
        .await
        .map_err(|source| DockerError::StartRail { source })?;
        self.rail_url = format!(
            "http://127.0.0.1:{}",
            rail.get_host_port_ipv4(RAIL_PORT.tcp()).await?
        );
        self.rail = Some(rail);
        Ok(())
    }

    /// One lock-server container per store URL, each advertising its own
    /// host address; `lock_url` lists them all.
    async fn start_locks(
        &mut self,
        spec: &DockerSpec,
        labels: &HashMap<String, String>,
        stores: Vec<String>,
    ) -> Result<(), DockerError> {
        for (i, store) in stores.into_iter().enumerate() {
            let port = free_port()?;
            let url = format!("http://127.0.0.1:{port}");
            let mut lock_args = vec![
                "--store".to_string(),
                store,
                "--advertise".into(),
                url.clone(),
            ];
            lock_args.extend(spec.lock_args.iter().cloned());
            let name = replica_name(i);
            let log = spec.log_dir.join(format!("{name}.log"));
            let lock = container(
                &spec.lock_image,
                (LOCK_PORT, port),
                WaitFor::message_on_stdout("listening on http://"),
                &self.network,
                &name,
                labels,
                &lock_args,
            )
            .with_log_consumer(stderr_to(&log))
            .start()
            .await
            .map_err(|source| DockerError::StartLock {
                log: log.clone(),
                source,
            })?;
            self.locks.push(LockReplica {
                container: lock,
                url,
                log,
                paused: false,
            });
        }
        self.lock_url = self
            .locks
            .iter()
            .map(|l| l.url.as_str())
            .collect::<Vec<_>>()
            .join(",");
        Ok(())
    }
}

/// The line PostgreSQL prints on stderr when it accepts connections.
pub const PG_READY_LINE: &str = "database system is ready to accept connections";

/// Replica `i`'s container and log name, as the process runtime names its
/// logs: `lock-server` for the first, `lock-server-I` for the others.
fn replica_name(i: usize) -> String {
    if i == 0 {
        "lock-server".into()
    } else {
        format!("lock-server-{i}")
    }
}

/// A log consumer appending a container's stderr to `path` while it runs.
fn stderr_to(path: &Path) -> impl Fn(&LogFrame) + Send + Sync + 'static {
    let log = Mutex::new(std::fs::File::create(path).ok());
    move |frame: &LogFrame| {
        if let (LogFrame::StdErr(bytes), Ok(mut guard)) = (frame, log.lock())
            && let Some(file) = guard.as_mut()
        {
            let _ = file.write_all(bytes);
        }
    }
}

/// A container request: labelled, on `network`, ready at `ready`, its
/// `port` published on 127.0.0.1:`host_port` only (its log consumer is the caller's).
fn container(
    image: &str,
    (port, host_port): (u16, u16),
    ready: WaitFor,
    network: &str,
    name: &str,
    labels: &HashMap<String, String>,
    args: &[String],
) -> testcontainers::core::ContainerRequest<GenericImage> {
    let (repo, tag) = split_image(image);
    GenericImage::new(repo, tag)
        .with_exposed_port(port.tcp())
        .with_wait_for(ready)
        .with_network(network)
        .with_container_name(format!("{network}-{name}"))
        .with_labels(labels.clone())
        .with_cmd(args.to_vec())
        .with_startup_timeout(START_TIMEOUT)
        .with_host_config_modifier(move |hc: &mut HostConfig| {
            hc.publish_all_ports = Some(false);
            hc.port_bindings = Some(HashMap::from([(
                format!("{port}/tcp"),
                Some(vec![PortBinding {
                    host_ip: Some("127.0.0.1".into()),
                    host_port: Some(host_port.to_string()),
                }]),
            )]));
        })
}

/// `repo/name:tag` → (`repo/name`, `tag`); no tag means `latest`.
fn split_image(image: &str) -> (String, String) {
    match image.rsplit_once(':') {
        Some((repo, tag)) if !tag.contains('/') => (repo.to_string(), tag.to_string()),
        _ => (image.to_string(), "latest".to_string()),
    }
}

/// The IPv4 gateway of `network`: the host's address on that bridge.
async fn network_gateway(docker: &Docker, network: &str) -> Result<IpAddr, DockerError> {
    let info = docker.inspect_network(network, None).await?;
    info.ipam
        .and_then(|ipam| ipam.config)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|c| c.gateway)
        .filter_map(|g| g.parse::<IpAddr>().ok())
        .find(IpAddr::is_ipv4)
        .ok_or_else(|| DockerError::NoGateway {
            network: network.into(),
        })
}

/// Removes, at the end of a run, every container and network still carrying
/// this process's [`LABEL_RUN`] (normally none: each cell's guard removed
/// them). It shells out to the `docker` CLI, so it works from `Drop` on any
/// exit path, with or without a runtime.
pub struct RunCleanup;

impl Drop for RunCleanup {
    fn drop(&mut self) {
        api_shim::remove_shim_socket();
        match remove_labelled(&format!("{LABEL_RUN}={}", run_id())) {
            Ok(0) => {}
            Ok(n) => eprintln!(
                "bench: removed {n} leftover docker object(s) labelled {LABEL_RUN}={}",
                run_id()
            ),
            Err(e) => eprintln!(
                "bench: could not check for leftover containers ({e}); list them with `docker ps -a --filter label={LABEL_BENCH}`"
            ),
        }
    }
}

/// The `docker` CLI against this process's engine (through the API shim when there is one).
fn docker_cli() -> std::process::Command {
    let mut cmd = std::process::Command::new("docker");
    if let Some(host) = engine_docker_host() {
        cmd.env("DOCKER_HOST", host);
    }
    cmd
}

/// `docker rm -f` every container and `docker network rm` every network with `label` (`KEY=VALUE`); returns how many.
pub fn remove_labelled(label: &str) -> Result<usize, DockerError> {
    let list = |args: &[&str]| -> Result<Vec<String>, DockerError> {
        let out = docker_cli().args(args).output()?;
        if !out.status.success() {
            return Err(DockerError::Cli {
                args: args.join(" "),
                stderr: String::from_utf8_lossy(&out.stderr).trim().to_string(),
            });
        }
        Ok(String::from_utf8_lossy(&out.stdout)
            .split_whitespace()
            .map(str::to_string)
            .collect())
    };
    let filter = format!("label={label}");
    let containers = list(&["ps", "-aq", "--filter", &filter])?;
    let mut removed = 0;
    if !containers.is_empty() {
        let mut args = vec!["rm", "-f", "-v"];
        args.extend(containers.iter().map(String::as_str));
        list(&args)?;
        removed += containers.len();
    }
    let networks = list(&["network", "ls", "-q", "--filter", &filter])?;
    if !networks.is_empty() {
        let mut args = vec!["network", "rm"];
        args.extend(networks.iter().map(String::as_str));
        list(&args)?;
        removed += networks.len();
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_references_split_into_repository_and_tag() {
        assert_eq!(
            split_image("fencepost/lock-server:dev"),
            ("fencepost/lock-server".into(), "dev".into())
        );
        assert_eq!(
            split_image("localhost:5000/x"),
            ("localhost:5000/x".into(), "latest".into())
        );
        assert_eq!(split_image("x"), ("x".into(), "latest".into()));
    }
}
