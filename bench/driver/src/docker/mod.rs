//! `--runtime docker` (C4): each cell gets a fresh lock-server and rail-stub
//! container, started with the `testcontainers` crate from the locally built
//! images (`scripts/build-images.sh`), on a private bridge network of its own,
//! with the lock-server on PostgreSQL. Everything it starts carries the labels
//! `fencepost.bench=1` and `fencepost.run=<this process's run id>`, and is
//! removed when the cell's [`DockerServices`] is dropped (error, Ctrl-C, panic
//! unwinding); [`RunCleanup`] removes whatever is left with the run's label
//! when the run ends.
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
//!   involved.
//! - **Loopback-only ports.** The services' ports are published on 127.0.0.1
//!   only, on ephemeral host ports; the bench reaches them there.
//!
//! The shim lives in `api_shim.rs`, the relay in `pg_relay.rs`, what can fail
//! in `error.rs` ([`DockerError`]); this module owns the containers, their
//! network and their cleanup.

mod api_shim;
mod error;
pub(crate) mod pg_relay;

use std::collections::HashMap;
use std::io::Write;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use testcontainers::bollard::Docker;
use testcontainers::bollard::models::{HostConfig, NetworkCreateRequest, PortBinding};
use testcontainers::core::logs::LogFrame;
use testcontainers::core::{IntoContainerPort, WaitFor};
use testcontainers::runners::AsyncRunner;
use testcontainers::{ContainerAsync, GenericImage, ImageExt};
use tokio::task::JoinHandle;

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

/// What one cell's containers need.
#[derive(Clone, Debug)]
pub struct DockerSpec {
    /// The lock-server image, `REPO:TAG`.
    pub lock_image: String,
    /// The rail-stub image, `REPO:TAG`.
    pub rail_image: String,
    /// The PostgreSQL the lock-server stores tokens in, as the bench reaches it.
    pub pg_url: String,
    /// lock-server arguments besides `--store` (`--default-ttl`, ...).
    pub lock_args: Vec<String>,
    /// rail-stub arguments (`--latency`, `--seed`).
    pub rail_args: Vec<String>,
    /// Where the containers' stderr logs go (`lock-server.log`, `rail-stub.log`).
    pub log_dir: PathBuf,
}

/// One cell's containers; dropping it removes them, the relay and the network.
pub struct DockerServices {
    /// The lock-server container (removed by testcontainers on drop).
    lock: Option<ContainerAsync<GenericImage>>,
    /// The rail-stub container (removed by testcontainers on drop).
    rail: Option<ContainerAsync<GenericImage>>,
    /// The PostgreSQL relay's accept loop; aborting it drops its connections.
    relay: Option<JoinHandle<()>>,
    /// The private network, removed after the containers.
    network: String,
    /// The engine client that created the network.
    docker: Docker,
    /// The lock-server's base URL on the host's loopback.
    pub lock_url: String,
    /// The rail-stub's base URL on the host's loopback.
    pub rail_url: String,
}

impl DockerServices {
    /// The lock-server container's id (for `docker pause` and CPU quotas).
    pub fn lock_container_id(&self) -> Option<&str> {
        self.lock.as_ref().map(|c| c.id())
    }

    /// The rail-stub container's id.
    pub fn rail_container_id(&self) -> Option<&str> {
        self.rail.as_ref().map(|c| c.id())
    }

    /// The private network the cell's containers share.
    pub fn network(&self) -> &str {
        &self.network
    }
}

impl Drop for DockerServices {
    fn drop(&mut self) {
        // Containers first (testcontainers removes each with `rm -f` in its
        // own Drop), then the relay, then the network they were attached to.
        self.lock.take();
        self.rail.take();
        if let Some(relay) = self.relay.take() {
            relay.abort();
        }
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

/// Starts one cell's lock-server and rail-stub containers on a new private
/// network, and returns once both have printed `listening on`.
pub async fn start(spec: &DockerSpec) -> Result<DockerServices, DockerError> {
    let docker = engine().await?;
    for image in [&spec.lock_image, &spec.rail_image] {
        docker
            .inspect_image(image)
            .await
            .map_err(|detail| DockerError::ImageMissing {
                image: image.clone(),
                detail,
            })?;
    }
    let pg_upstream = pg_addr(&spec.pg_url).await?;

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
        lock: None,
        rail: None,
        relay: None,
        network: network.clone(),
        docker: docker.clone(),
        lock_url: String::new(),
        rail_url: String::new(),
    };
    let gateway = network_gateway(&docker, &network).await?;
    let (relay_addr, relay) = pg_relay(gateway, pg_upstream).await?;
    services.relay = Some(relay);
    let store = rewrite_pg_url(&spec.pg_url, relay_addr)?;

    let mut lock_args = vec!["--store".to_string(), store];
    lock_args.extend(spec.lock_args.iter().cloned());
    let rail = container(
        &spec.rail_image,
        RAIL_PORT,
        &network,
        "rail-stub",
        &labels,
        &spec.rail_args,
        &spec.log_dir,
    )
    .start()
    .await
    .map_err(|source| DockerError::StartRail { source })?;
    services.rail_url = format!(
        "http://127.0.0.1:{}",
        rail.get_host_port_ipv4(RAIL_PORT.tcp()).await?
    );
    services.rail = Some(rail);
    let lock = container(
        &spec.lock_image,
        LOCK_PORT,
        &network,
        "lock-server",
        &labels,
        &lock_args,
        &spec.log_dir,
    )
    .start()
    .await
    .map_err(|source| DockerError::StartLock {
        log: spec.log_dir.join("lock-server.log"),
        source,
    })?;
    services.lock_url = format!(
        "http://127.0.0.1:{}",
        lock.get_host_port_ipv4(LOCK_PORT.tcp()).await?
    );
    services.lock = Some(lock);
    Ok(services)
}

/// A container request: labelled, on `network`, `port` published on 127.0.0.1
/// only, ready at its `listening on` line, stderr appended to `log_dir/<name>.log`.
fn container(
    image: &str,
    port: u16,
    network: &str,
    name: &str,
    labels: &HashMap<String, String>,
    args: &[String],
    log_dir: &Path,
) -> testcontainers::core::ContainerRequest<GenericImage> {
    let (repo, tag) = split_image(image);
    let log = Mutex::new(std::fs::File::create(log_dir.join(format!("{name}.log"))).ok());
    GenericImage::new(repo, tag)
        .with_exposed_port(port.tcp())
        .with_wait_for(WaitFor::message_on_stdout("listening on http://"))
        .with_network(network)
        .with_container_name(format!("{network}-{name}"))
        .with_labels(labels.clone())
        .with_cmd(args.to_vec())
        .with_startup_timeout(START_TIMEOUT)
        .with_log_consumer(move |frame: &LogFrame| {
            if let (LogFrame::StdErr(bytes), Ok(mut guard)) = (frame, log.lock())
                && let Some(file) = guard.as_mut()
            {
                let _ = file.write_all(bytes);
            }
        })
        .with_host_config_modifier(move |hc: &mut HostConfig| {
            hc.publish_all_ports = Some(false);
            hc.port_bindings = Some(HashMap::from([(
                format!("{port}/tcp"),
                Some(vec![PortBinding {
                    host_ip: Some("127.0.0.1".into()),
                    host_port: Some(String::new()),
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

/// `docker rm -f` every container and `docker network rm` every network with `label` (`KEY=VALUE`); returns how many.
pub fn remove_labelled(label: &str) -> Result<usize, DockerError> {
    let list = |args: &[&str]| -> Result<Vec<String>, DockerError> {
        let mut cmd = std::process::Command::new("docker");
        if let Some(host) = engine_docker_host() {
            cmd.env("DOCKER_HOST", host);
        }
        let out = cmd.args(args).output()?;
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
