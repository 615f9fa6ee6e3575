//! Why the docker runtime could not start a cell's containers ([`DockerError`]),
//! and why the engine's API version could not be read ([`ProbeError`]).

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use testcontainers::TestcontainersError;
use testcontainers::bollard::errors::Error as BollardError;
use testcontainers::core::error::ClientError;

/// Why the docker runtime failed. Where the message names the engine's own
/// error in parentheses or after a colon, that error is part of the message
/// (as the bench has always shown it) and not repeated as a source: bollard's
/// and testcontainers' messages already end with their causes.
#[derive(Debug, thiserror::Error)]
pub enum DockerError {
    /// testcontainers could not set up its engine client (`DOCKER_HOST`, its
    /// configuration): check that Docker runs and that `DOCKER_HOST` names it.
    #[error("--runtime docker: cannot reach the Docker engine: {detail}")]
    Unreachable {
        /// testcontainers' error.
        detail: ClientError,
    },
    /// The engine did not answer a ping: start Docker, or check the socket's permissions.
    #[error("--runtime docker: the Docker engine does not answer: {detail}")]
    NoAnswer {
        /// The engine's error.
        detail: BollardError,
    },
    /// The engine's API version could not be read on its socket: start
    /// Docker, or check the socket's path and permissions.
    #[error("--runtime docker: cannot reach the Docker engine at {}", socket.display())]
    EngineVersion {
        /// The engine's unix socket.
        socket: PathBuf,
        /// Why the version could not be read.
        #[source]
        source: ProbeError,
    },
    /// The API shim's socket path has no directory (a bad temp dir): set `TMPDIR`.
    #[error("API shim: {} has no directory", path.display())]
    ShimNoDirectory {
        /// The socket's path.
        path: PathBuf,
    },
    /// The API shim could not bind its unix socket: check the temp directory's permissions.
    #[error("API shim: cannot listen on {}", path.display())]
    ShimListen {
        /// The socket's path.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// A service's image is not in the local engine: build it with
    /// `scripts/build-images.sh` (or name another with `--lock-image`/`--rail-image`).
    #[error(
        "--runtime docker: image {image} is not available ({detail}); build it with scripts/build-images.sh"
    )]
    ImageMissing {
        /// The image, `REPO:TAG`.
        image: String,
        /// The engine's error.
        detail: BollardError,
    },
    /// `--pg-url` is not a PostgreSQL URL: pass `postgres://USER[:PASS]@HOST[:PORT]/DB`.
    #[error("--pg-url {url:?}: expected postgres://USER[:PASS]@HOST[:PORT]/DB")]
    PgUrl {
        /// The URL given.
        url: String,
    },
    /// The host of `--pg-url` could not be resolved: fix the host name or use an IP.
    #[error("--pg-url: cannot resolve {hostport}")]
    PgResolve {
        /// `host:port` of the URL.
        hostport: String,
        /// The resolver's error.
        #[source]
        source: std::io::Error,
    },
    /// The host of `--pg-url` resolves to no address: fix the host name or use an IP.
    #[error("--pg-url: {hostport} resolves to nothing")]
    PgNoAddress {
        /// `host:port` of the URL.
        hostport: String,
    },
    /// The cell's private network could not be created: the engine's error
    /// says why (often: the address pools are exhausted; prune networks).
    #[error("creating docker network {network}")]
    CreateNetwork {
        /// The network's name.
        network: String,
        /// The engine's error.
        #[source]
        source: BollardError,
    },
    /// The cell's network has no IPv4 gateway for the PostgreSQL relay: check
    /// the engine's default address pools.
    #[error("docker network {network} has no IPv4 gateway")]
    NoGateway {
        /// The network's name.
        network: String,
    },
    /// The PostgreSQL relay could not listen on the network's gateway: check
    /// that the bridge's address is configured on this host.
    #[error("PostgreSQL relay: cannot listen on {bind} (the docker network's gateway)")]
    RelayListen {
        /// The gateway address.
        bind: IpAddr,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The rail-stub container did not start or print `listening on`: read
    /// `rail-stub.log` in the cell's directory.
    #[error("starting the rail-stub container")]
    StartRail {
        /// testcontainers' error.
        #[source]
        source: TestcontainersError,
    },
    /// The lock-server container did not start or print `listening on`: read
    /// its log (named in the message); often the PostgreSQL it was given.
    #[error("starting the lock-server container (its log: {})", log.display())]
    StartLock {
        /// The container's log.
        log: PathBuf,
        /// testcontainers' error.
        #[source]
        source: TestcontainersError,
    },
    /// The PostgreSQL container did not start or print that it accepts
    /// connections: build its image (`scripts/build-postgres-image.sh`) and
    /// read `postgres.log` in the cell's directory.
    #[error("starting the PostgreSQL container")]
    StartPostgres {
        /// testcontainers' error.
        #[source]
        source: TestcontainersError,
    },
    /// A fault named a replica the cell does not have: a bug in the caller.
    #[error("the cell has no lock-server replica {replica}")]
    NoSuchReplica {
        /// The index asked for.
        replica: usize,
    },
    /// The cell runs no PostgreSQL container of its own (it was given
    /// `--pg-url`): restart that PostgreSQL with its own tools.
    #[error("the cell runs no PostgreSQL container (it was given --pg-url)")]
    NoPostgresContainer,
    /// A container started again after a kill did not answer within its
    /// time: read its log (named in the message).
    #[error("{what} did not answer within {patience:?} of docker start (its log: {})", log.display())]
    NotBack {
        /// Which container, e.g. `lock-server replica 1 (http://127.0.0.1:40001/healthz)`.
        what: String,
        /// How long it was given.
        patience: Duration,
        /// Its log.
        log: PathBuf,
    },
    /// A started container's published port could not be read: the engine
    /// lost it (the container died); read the cell's logs.
    #[error(transparent)]
    Port(#[from] TestcontainersError),
    /// The engine refused a request about the cell's network: its error says why.
    #[error(transparent)]
    Engine(#[from] BollardError),
    /// The `docker` CLI refused a cleanup command: its stderr is in the
    /// message; remove the objects by hand (`docker ps -a --filter label=fencepost.bench`).
    #[error("docker {args}: {stderr}")]
    Cli {
        /// The command's arguments.
        args: String,
        /// What it printed on stderr.
        stderr: String,
    },
    /// A local call failed: the shim's directory or thread, the relay's
    /// socket, or running the `docker` CLI (the OS error says which); fix
    /// permissions, free resources, or put `docker` on `PATH`.
    #[error(transparent)]
    Io(#[from] std::io::Error),
}

/// Why the engine's API version (`GET /version` on its socket) could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    /// The socket could not be reached, written or read: start Docker, or
    /// check the socket's permissions.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// The engine did not connect or answer within its time: it is hung or
    /// overloaded; restart it.
    #[error(transparent)]
    Timeout(#[from] tokio::time::error::Elapsed),
    /// The reply is not the engine's JSON: something else listens on the socket.
    #[error("unexpected /version reply {reply:?}")]
    NotJson {
        /// The whole reply.
        reply: String,
        /// The JSON error.
        #[source]
        source: serde_json::Error,
    },
    /// The reply has no `ApiVersion`: an engine too old to be used; upgrade Docker.
    #[error("no ApiVersion in {body}")]
    NoApiVersion {
        /// The reply's body.
        body: String,
    },
    /// The `ApiVersion` is not `MAJOR.MINOR`: an engine this bench does not know; report it.
    #[error("unexpected ApiVersion {api}")]
    BadApiVersion {
        /// The version given.
        api: String,
    },
}
