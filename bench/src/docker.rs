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

use std::collections::HashMap;
use std::io::Write;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use anyhow::{Context, anyhow, bail};
use testcontainers::bollard::Docker;
use testcontainers::bollard::models::{HostConfig, NetworkCreateRequest, PortBinding};
use testcontainers::core::logs::LogFrame;
use testcontainers::core::{IntoContainerPort, WaitFor};
use testcontainers::runners::AsyncRunner;
use testcontainers::{ContainerAsync, GenericImage, ImageExt};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream, UnixListener, UnixStream};
use tokio::task::{JoinHandle, JoinSet};

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
pub async fn start(spec: &DockerSpec) -> anyhow::Result<DockerServices> {
    let docker = engine().await?;
    for image in [&spec.lock_image, &spec.rail_image] {
        docker.inspect_image(image).await.map_err(|e| {
            anyhow!("--runtime docker: image {image} is not available ({e}); build it with scripts/build-images.sh")
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
        .with_context(|| format!("creating docker network {network}"))?;
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
    .context("starting the rail-stub container")?;
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
    .with_context(|| {
        format!(
            "starting the lock-server container (its log: {})",
            spec.log_dir.join("lock-server.log").display()
        )
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
async fn network_gateway(docker: &Docker, network: &str) -> anyhow::Result<IpAddr> {
    let info = docker.inspect_network(network, None).await?;
    info.ipam
        .and_then(|ipam| ipam.config)
        .unwrap_or_default()
        .into_iter()
        .filter_map(|c| c.gateway)
        .filter_map(|g| g.parse::<IpAddr>().ok())
        .find(IpAddr::is_ipv4)
        .ok_or_else(|| anyhow!("docker network {network} has no IPv4 gateway"))
}

/// The `host:port` of a `postgres://[user[:pass]@]host[:port][/db][?opts]` URL, resolved by the bench.
async fn pg_addr(url: &str) -> anyhow::Result<SocketAddr> {
    let (_, authority, _) = split_pg_url(url)?;
    let hostport = authority
        .rsplit_once('@')
        .map(|(_, h)| h)
        .unwrap_or(authority);
    let hostport = if hostport.ends_with(']') || !hostport.contains(':') {
        format!("{hostport}:5432")
    } else {
        hostport.to_string()
    };
    tokio::net::lookup_host(&hostport)
        .await
        .with_context(|| format!("--pg-url: cannot resolve {hostport}"))?
        .next()
        .ok_or_else(|| anyhow!("--pg-url: {hostport} resolves to nothing"))
}

/// Splits a PostgreSQL URL into (scheme with `://`, authority, rest from the first `/` or `?`).
fn split_pg_url(url: &str) -> anyhow::Result<(&str, &str, &str)> {
    let scheme_end = ["postgres://", "postgresql://"]
        .iter()
        .find(|s| url.starts_with(*s))
        .map(|s| s.len())
        .ok_or_else(|| {
            anyhow!("--pg-url {url:?}: expected postgres://USER[:PASS]@HOST[:PORT]/DB")
        })?;
    let rest = &url[scheme_end..];
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    Ok((&url[..scheme_end], &rest[..end], &rest[end..]))
}

/// The store URL the lock-server container uses: `url` with its host and port replaced by the relay's.
pub fn rewrite_pg_url(url: &str, relay: SocketAddr) -> anyhow::Result<String> {
    let (scheme, authority, rest) = split_pg_url(url)?;
    let userinfo = authority
        .rsplit_once('@')
        .map(|(u, _)| format!("{u}@"))
        .unwrap_or_default();
    Ok(format!("{scheme}{userinfo}{relay}{rest}"))
}

/// Listens on `bind:0` and forwards every connection to `upstream`; the task owns its connections.
async fn pg_relay(
    bind: IpAddr,
    upstream: SocketAddr,
) -> anyhow::Result<(SocketAddr, JoinHandle<()>)> {
    let listener = TcpListener::bind((bind, 0)).await.with_context(|| {
        format!("PostgreSQL relay: cannot listen on {bind} (the docker network's gateway)")
    })?;
    let addr = listener.local_addr()?;
    let task = tokio::spawn(async move {
        // Dropped with the task, which aborts every connection still open.
        let mut conns = JoinSet::new();
        while let Ok((mut inbound, _)) = listener.accept().await {
            conns.spawn(async move {
                match TcpStream::connect(upstream).await {
                    Ok(mut out) => {
                        let _ = tokio::io::copy_bidirectional(&mut inbound, &mut out).await;
                    }
                    Err(e) => {
                        tracing::warn!(%upstream, error = %e, "PostgreSQL relay: upstream refused")
                    }
                }
            });
            while conns.try_join_next().is_some() {}
        }
    });
    Ok((addr, task))
}

/// The engine client testcontainers uses, set up once per process: if the
/// engine's API is older than the one testcontainers speaks, the API shim is
/// started and `DOCKER_HOST` points at it.
pub async fn engine() -> anyhow::Result<Docker> {
    static SETUP: tokio::sync::OnceCell<()> = tokio::sync::OnceCell::const_new();
    SETUP.get_or_try_init(setup_engine).await?;
    ensure_shim_listening()?;
    let docker = testcontainers::core::client::docker_client_instance()
        .await
        .map_err(|e| anyhow!("--runtime docker: cannot reach the Docker engine: {e}"))?;
    docker
        .ping()
        .await
        .map_err(|e| anyhow!("--runtime docker: the Docker engine does not answer: {e}"))?;
    Ok(docker)
}

/// The engine's unix socket: `DOCKER_HOST=unix://PATH`, else `/var/run/docker.sock`;
/// `None` when `DOCKER_HOST` names something else (tcp://, ssh://), which is used as it is.
fn engine_socket() -> Option<PathBuf> {
    match std::env::var("DOCKER_HOST") {
        Ok(h) if !h.is_empty() => h.strip_prefix("unix://").map(PathBuf::from),
        _ => Some(PathBuf::from("/var/run/docker.sock")),
    }
}

async fn setup_engine() -> anyhow::Result<()> {
    let Some(socket) = engine_socket() else {
        return Ok(());
    };
    let engine = engine_api_version(&socket).await.map_err(|e| {
        anyhow!(
            "--runtime docker: cannot reach the Docker engine at {}: {e}",
            socket.display()
        )
    })?;
    let ours = testcontainers::bollard::API_DEFAULT_VERSION;
    if engine >= (ours.major_version, ours.minor_version) {
        return Ok(());
    }
    let dir = std::env::temp_dir().join(format!("fencepost-docker-api-{}", std::process::id()));
    let shim = dir.join("docker.sock");
    *SHIM.lock().unwrap_or_else(|e| e.into_inner()) = Some(Shim {
        path: shim.clone(),
        upstream: socket,
        engine,
    });
    ensure_shim_listening()?;
    tracing::info!(
        engine = %format!("{}.{}", engine.0, engine.1),
        client = %ours,
        shim = %shim.display(),
        "Docker engine is older than testcontainers' API; rewriting the API version"
    );
    // SAFETY: set once per process, before the first testcontainers call and
    // before any cell's workers exist. Rust's own env access is serialised by
    // std; the remaining hazard, C code calling getenv concurrently, does not
    // arise here (the tokio workers are idle; reqwest is given IP URLs).
    unsafe { std::env::set_var("DOCKER_HOST", format!("unix://{}", shim.display())) };
    Ok(())
}

/// `GET /version` (unversioned) on the engine's socket → its `ApiVersion`, as (major, minor).
async fn engine_api_version(socket: &Path) -> anyhow::Result<(usize, usize)> {
    let mut s = tokio::time::timeout(Duration::from_secs(5), UnixStream::connect(socket)).await??;
    s.write_all(b"GET /version HTTP/1.0\r\nHost: docker\r\n\r\n")
        .await?;
    let mut reply = Vec::new();
    tokio::time::timeout(Duration::from_secs(10), s.read_to_end(&mut reply)).await??;
    let text = String::from_utf8_lossy(&reply);
    let body = text.split_once("\r\n\r\n").map(|(_, b)| b).unwrap_or("");
    let v: serde_json::Value = serde_json::from_str(body)
        .with_context(|| format!("unexpected /version reply {text:?}"))?;
    let api = v["ApiVersion"]
        .as_str()
        .ok_or_else(|| anyhow!("no ApiVersion in {body}"))?;
    parse_version(api).ok_or_else(|| anyhow!("unexpected ApiVersion {api}"))
}

fn parse_version(v: &str) -> Option<(usize, usize)> {
    let (a, b) = v.split_once('.')?;
    Some((a.parse().ok()?, b.parse().ok()?))
}

/// The API shim of this process, if the engine needs one.
struct Shim {
    /// The socket `DOCKER_HOST` names (in a 0700 temp directory).
    path: PathBuf,
    /// The engine's own socket.
    upstream: PathBuf,
    /// The engine's API version.
    engine: (usize, usize),
}

/// Set once by `setup_engine`; [`RunCleanup`] removes the socket file at the end
/// of a run and the next run's [`engine`] call binds it again.
static SHIM: Mutex<Option<Shim>> = Mutex::new(None);

/// Binds the shim's socket if it is not there (first use, or after a run's cleanup removed it).
fn ensure_shim_listening() -> anyhow::Result<()> {
    let guard = SHIM.lock().unwrap_or_else(|e| e.into_inner());
    match guard.as_ref() {
        Some(shim) if !shim.path.exists() => {
            start_api_shim(&shim.path, shim.upstream.clone(), shim.engine)
        }
        _ => Ok(()),
    }
}

/// The engine's own address for the `docker` CLI: `DOCKER_HOST` of this process
/// names the shim once it is set up, and child processes inherit it.
pub fn engine_docker_host() -> Option<String> {
    let guard = SHIM.lock().unwrap_or_else(|e| e.into_inner());
    guard
        .as_ref()
        .map(|s| format!("unix://{}", s.upstream.display()))
}

/// Removes the shim's socket and directory (the serving thread stays idle until the process exits).
fn remove_shim_socket() {
    if let Some(shim) = SHIM.lock().unwrap_or_else(|e| e.into_inner()).as_ref() {
        let _ = std::fs::remove_file(&shim.path);
        if let Some(dir) = shim.path.parent() {
            let _ = std::fs::remove_dir(dir);
        }
    }
}

/// Starts the API shim on a private unix socket, served by a thread of its
/// own (testcontainers' Drop blocks a runtime thread while it removes
/// containers; the shim must not depend on that runtime).
fn start_api_shim(path: &Path, upstream: PathBuf, engine: (usize, usize)) -> anyhow::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    let dir = path
        .parent()
        .ok_or_else(|| anyhow!("API shim: {} has no directory", path.display()))?;
    std::fs::create_dir_all(dir)?;
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))?;
    let _ = std::fs::remove_file(path);
    let std_listener = std::os::unix::net::UnixListener::bind(path)
        .with_context(|| format!("API shim: cannot listen on {}", path.display()))?;
    std_listener.set_nonblocking(true)?;
    std::thread::Builder::new()
        .name("docker-api-shim".into())
        .spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("shim runtime");
            rt.block_on(async move {
                let listener = UnixListener::from_std(std_listener).expect("shim listener");
                while let Ok((client, _)) = listener.accept().await {
                    let upstream = upstream.clone();
                    tokio::spawn(async move {
                        if let Ok(engine_conn) = UnixStream::connect(&upstream).await {
                            let _ = shim_connection(client, engine_conn, engine).await;
                        }
                    });
                }
            });
        })?;
    Ok(())
}

/// Relays one client connection: requests go through [`forward_requests`],
/// replies (including streamed logs and upgraded connections) are copied as they are.
async fn shim_connection(
    client: UnixStream,
    engine_conn: UnixStream,
    engine: (usize, usize),
) -> std::io::Result<()> {
    let (client_r, mut client_w) = client.into_split();
    let (engine_r, mut engine_w) = engine_conn.into_split();
    let up = async {
        let r = forward_requests(BufReader::new(client_r), &mut engine_w, engine).await;
        let _ = engine_w.shutdown().await;
        r
    };
    let down = async {
        let mut engine_r = engine_r;
        let r = tokio::io::copy(&mut engine_r, &mut client_w)
            .await
            .map(|_| ());
        let _ = client_w.shutdown().await;
        r
    };
    let (a, b) = tokio::join!(up, down);
    a.and(b)
}

/// Copies HTTP/1.1 requests from `from` to `to`, rewriting each request line's
/// `/vX.Y/` down to the engine's version and framing bodies by
/// `Content-Length` or chunked encoding; after an `Upgrade` request (attach,
/// exec) it copies raw bytes.
async fn forward_requests<R, W>(
    mut from: BufReader<R>,
    to: &mut W,
    engine: (usize, usize),
) -> std::io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    loop {
        let mut head = Vec::new();
        let mut first = true;
        let (mut content_length, mut chunked, mut upgrade) = (0u64, false, false);
        loop {
            let mut line = Vec::new();
            if from.read_until(b'\n', &mut line).await? == 0 {
                to.write_all(&head).await?;
                return Ok(());
            }
            let text = String::from_utf8_lossy(&line).into_owned();
            if first {
                head.extend_from_slice(rewrite_request_line(&text, engine).as_bytes());
                first = false;
                continue;
            }
            head.extend_from_slice(&line);
            if text == "\r\n" || text == "\n" {
                break;
            }
            if let Some((name, value)) = text.split_once(':') {
                let (name, value) = (
                    name.trim().to_ascii_lowercase(),
                    value.trim().to_ascii_lowercase(),
                );
                match name.as_str() {
                    "content-length" => content_length = value.parse().unwrap_or(0),
                    "transfer-encoding" => chunked = value.contains("chunked"),
                    "upgrade" => upgrade = true,
                    _ => {}
                }
            }
        }
        to.write_all(&head).await?;
        if chunked {
            loop {
                let mut size_line = Vec::new();
                if from.read_until(b'\n', &mut size_line).await? == 0 {
                    return Ok(());
                }
                to.write_all(&size_line).await?;
                let size_text = String::from_utf8_lossy(&size_line);
                let size =
                    u64::from_str_radix(size_text.trim().split(';').next().unwrap_or("0"), 16)
                        .unwrap_or(0);
                if size == 0 {
                    // Trailers, up to the empty line.
                    loop {
                        let mut t = Vec::new();
                        if from.read_until(b'\n', &mut t).await? == 0 {
                            return Ok(());
                        }
                        to.write_all(&t).await?;
                        if t == b"\r\n" || t == b"\n" {
                            break;
                        }
                    }
                    break;
                }
                tokio::io::copy(&mut (&mut from).take(size + 2), to).await?;
            }
        } else if content_length > 0 {
            tokio::io::copy(&mut (&mut from).take(content_length), to).await?;
        }
        to.flush().await?;
        if upgrade {
            tokio::io::copy(&mut from, to).await?;
            return Ok(());
        }
    }
}

/// `POST /v1.53/containers/create HTTP/1.1` → `POST /v1.41/containers/create HTTP/1.1`
/// when the engine speaks 1.41; lines without a newer version are unchanged.
fn rewrite_request_line(line: &str, engine: (usize, usize)) -> String {
    let Some(start) = line.find(" /v") else {
        return line.to_string();
    };
    let after = &line[start + 3..];
    let Some(end) = after.find('/') else {
        return line.to_string();
    };
    match parse_version(&after[..end]) {
        Some(v) if v > engine => format!(
            "{} /v{}.{}{}",
            &line[..start],
            engine.0,
            engine.1,
            &after[end..]
        ),
        _ => line.to_string(),
    }
}

/// Removes, at the end of a run, every container and network still carrying
/// this process's [`LABEL_RUN`] (normally none: each cell's guard removed
/// them). It shells out to the `docker` CLI, so it works from `Drop` on any
/// exit path, with or without a runtime.
pub struct RunCleanup;

impl Drop for RunCleanup {
    fn drop(&mut self) {
        remove_shim_socket();
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
pub fn remove_labelled(label: &str) -> anyhow::Result<usize> {
    let list = |args: &[&str]| -> anyhow::Result<Vec<String>> {
        let mut cmd = std::process::Command::new("docker");
        if let Some(host) = engine_docker_host() {
            cmd.env("DOCKER_HOST", host);
        }
        let out = cmd.args(args).output()?;
        if !out.status.success() {
            bail!(
                "docker {}: {}",
                args.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            );
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
    fn request_lines_newer_than_the_engine_are_rewritten_down() {
        assert_eq!(
            rewrite_request_line("POST /v1.53/containers/create?name=x HTTP/1.1\r\n", (1, 41)),
            "POST /v1.41/containers/create?name=x HTTP/1.1\r\n"
        );
        assert_eq!(
            rewrite_request_line("GET /v1.40/_ping HTTP/1.1\r\n", (1, 41)),
            "GET /v1.40/_ping HTTP/1.1\r\n"
        );
        assert_eq!(
            rewrite_request_line("GET /version HTTP/1.1\r\n", (1, 41)),
            "GET /version HTTP/1.1\r\n"
        );
    }

    #[tokio::test]
    async fn forwarding_keeps_bodies_and_rewrites_every_request_of_a_connection() {
        let input = b"POST /v1.53/a HTTP/1.1\r\nContent-Length: 20\r\n\r\nGET /v1.53/x HTTP/1.1\
POST /v1.53/b HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n/v1.5\r\n0\r\n\r\n\
GET /v1.53/c HTTP/1.1\r\n\r\n";
        let mut out = Vec::new();
        forward_requests(BufReader::new(&input[..]), &mut out, (1, 41))
            .await
            .unwrap();
        let expected = b"POST /v1.41/a HTTP/1.1\r\nContent-Length: 20\r\n\r\nGET /v1.53/x HTTP/1.1\
POST /v1.41/b HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n/v1.5\r\n0\r\n\r\n\
GET /v1.41/c HTTP/1.1\r\n\r\n";
        assert_eq!(
            String::from_utf8_lossy(&out),
            String::from_utf8_lossy(expected)
        );
    }

    #[test]
    fn the_store_url_points_at_the_relay_and_keeps_user_database_and_options() {
        let relay: SocketAddr = "172.18.0.1:40000".parse().unwrap();
        assert_eq!(
            rewrite_pg_url("postgres://postgres@127.0.0.1:54329/fencepost", relay).unwrap(),
            "postgres://postgres@172.18.0.1:40000/fencepost"
        );
        assert_eq!(
            rewrite_pg_url("postgresql://u:p@db.example:5432/x?sslmode=disable", relay).unwrap(),
            "postgresql://u:p@172.18.0.1:40000/x?sslmode=disable"
        );
        assert_eq!(
            rewrite_pg_url("postgres://localhost", relay).unwrap(),
            "postgres://172.18.0.1:40000"
        );
        assert!(rewrite_pg_url("mysql://x", relay).is_err());
    }

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
