//! etcd as a child process: one member on free loopback ports, its data
//! directory and log in the caller's directory, owned like our own services
//! (a [`ChildService`]: killed on drop, and by the kernel if the bench dies).
//!
//! Flags: `--heartbeat-interval 100 --election-timeout 500` (etcd's defaults
//! are 100 and 1000 ms). On one member they only decide how fast it elects
//! itself and etcd's smallest lease TTL, `ceil(1.5 × election ticks ×
//! heartbeat)`: 1 s here instead of the default 2 s, so `--ttl 1s` runs on
//! etcd too. Durability is etcd's default: the raft WAL is fsynced before a
//! write is acknowledged (no `--unsafe-no-fsync`), batched across concurrent
//! requests as etcd always does.

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::time::Duration;

use bench_core::error::Chain;
use fencepost_harness::{ChildService, HarnessError};

/// Environment variable naming the etcd binary (default: `etcd` on `PATH`).
pub const ETCD_BIN_ENV: &str = "FENCEPOST_ETCD";
/// How long etcd may take to answer `/health` after it was started.
const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// How many times a start is tried on fresh ports (a port taken between
/// choosing it and etcd binding it).
const START_TRIES: u32 = 3;

/// Why etcd could not be found or started.
#[derive(Debug, thiserror::Error)]
pub enum EtcdServerError {
    /// `$FENCEPOST_ETCD` names no file: point it at the etcd binary, or unset it.
    #[error("{ETCD_BIN_ENV}={} is not a file", path.display())]
    NotAFile {
        /// What the variable says.
        path: PathBuf,
    },
    /// No etcd binary: install etcd, set `$FENCEPOST_ETCD`, or use an etcd
    /// someone runs (`--etcd-url`).
    #[error(
        "no `etcd` on PATH (Debian: apt-get install etcd-server; or set FENCEPOST_ETCD, or pass --etcd-url)"
    )]
    NotFound,
    /// A loopback port could not be had, or the data directory not made (the
    /// OS error says which); free ports or disk, or fix the directory's permissions.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// The etcd process could not be spawned; the harness's error names the binary.
    #[error(transparent)]
    Spawn(#[from] HarnessError),
    /// The health-check client could not be built (no TLS backend, no
    /// resolver): a broken installation; report it.
    #[error(transparent)]
    Client(#[from] reqwest::Error),
    /// etcd exited while it started: its log's tail is in the message; fix
    /// what it says (a flag, the data directory) and start again.
    #[error("etcd exited while starting; {} ends with:\n{tail}", log.display())]
    Exited {
        /// etcd's log.
        log: PathBuf,
        /// Its last lines.
        tail: String,
    },
    /// etcd runs but did not report healthy in time: its log's tail is in the
    /// message; a loaded machine may need another try.
    #[error(
        "etcd did not report healthy within {READY_TIMEOUT:?}; {} ends with:\n{tail}",
        log.display()
    )]
    NotHealthy {
        /// etcd's log.
        log: PathBuf,
        /// Its last lines.
        tail: String,
    },
}

/// The etcd binary: `$FENCEPOST_ETCD`, else `etcd` on `PATH`.
pub fn etcd_binary() -> Result<PathBuf, EtcdServerError> {
    if let Some(p) = std::env::var_os(ETCD_BIN_ENV) {
        let path = PathBuf::from(p);
        if !path.is_file() {
            return Err(EtcdServerError::NotAFile { path });
        }
        return Ok(path);
    }
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|d| d.join("etcd"))
        .find(|p| p.is_file())
        .ok_or(EtcdServerError::NotFound)
}

/// A loopback port free at the time of asking.
fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// One etcd member running as our child.
pub struct EtcdServer {
    /// The process.
    child: ChildService,
    /// The client URL, `http://127.0.0.1:PORT`.
    url: String,
}

impl EtcdServer {
    /// Starts etcd with its data in `dir/etcd-data` and its log in
    /// `dir/etcd.log`, and waits until `/health` says true.
    pub async fn start(dir: &Path) -> Result<EtcdServer, EtcdServerError> {
        let bin = etcd_binary()?;
        std::fs::create_dir_all(dir)?;
        let mut last = None;
        for attempt in 1..=START_TRIES {
            let data = dir.join("etcd-data");
            // A failed try may have left a half-initialised member behind.
            let _ = std::fs::remove_dir_all(&data);
            match Self::try_start(&bin, &data, &dir.join("etcd.log")).await {
                Ok(s) => return Ok(s),
                Err(e) => {
                    tracing::warn!(attempt, error = %Chain(&e), "etcd did not start");
                    last = Some(e);
                }
            }
        }
        Err(last.expect("at least one try"))
    }

    async fn try_start(bin: &Path, data: &Path, log: &Path) -> Result<EtcdServer, EtcdServerError> {
        let (client_port, peer_port) = (free_port()?, free_port()?);
        let client = format!("http://127.0.0.1:{client_port}");
        let peer = format!("http://127.0.0.1:{peer_port}");
        let args: Vec<String> = vec![
            "--name".into(),
            "fencepost".into(),
            "--data-dir".into(),
            data.display().to_string(),
            "--listen-client-urls".into(),
            client.clone(),
            "--advertise-client-urls".into(),
            client.clone(),
            "--listen-peer-urls".into(),
            peer.clone(),
            "--initial-advertise-peer-urls".into(),
            peer.clone(),
            "--initial-cluster".into(),
            format!("fencepost={peer}"),
            "--initial-cluster-state".into(),
            "new".into(),
            "--heartbeat-interval".into(),
            "100".into(),
            "--election-timeout".into(),
            "500".into(),
            "--logger".into(),
            "zap".into(),
            "--log-level".into(),
            "warn".into(),
        ];
        let addr = SocketAddr::from(([127, 0, 0, 1], client_port));
        let mut child = ChildService::spawn_unready(bin, &args, log, addr)?;
        let http = reqwest::Client::builder()
            .no_proxy()
            .timeout(Duration::from_secs(1))
            .build()?;
        let deadline = tokio::time::Instant::now() + READY_TIMEOUT;
        loop {
            if !child.is_running() {
                return Err(EtcdServerError::Exited {
                    log: log.to_path_buf(),
                    tail: child.stderr_tail(15),
                });
            }
            if let Ok(r) = http.get(format!("{client}/health")).send().await
                && r.status().is_success()
                && r.text().await.is_ok_and(|t| t.contains("\"true\""))
            {
                return Ok(EtcdServer { child, url: client });
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(EtcdServerError::NotHealthy {
                    log: log.to_path_buf(),
                    tail: child.stderr_tail(15),
                });
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// The client URL, `http://127.0.0.1:PORT`.
    pub fn url(&self) -> &str {
        &self.url
    }

    /// The process id (for CPU accounting and signals).
    pub fn pid(&self) -> i32 {
        self.child.pid()
    }

    /// The child itself, for a stack that owns it like a lock-server.
    pub fn into_child(self) -> ChildService {
        self.child
    }
}
