//! redis-server as a child process: on a free loopback port, its log and
//! data directory in the caller's directory, owned like our own services (a
//! [`ChildService`]: killed on drop, and by the kernel if the bench dies),
//! ready once it answers `PING` with `+PONG`.
//!
//! Persistence ([`RedisPersistence`]) is the one setting a lock cares about:
//! `none` (`--save '' --appendonly no`: a restart forgets every key and every
//! fencing counter), `everysec` (`--appendonly yes --appendfsync everysec`:
//! a crash loses up to about a second of writes) and `always`
//! (`--appendfsync always`: fsync before each reply). The flags a server was
//! started with are [`RedisServer::args`]; callers record them.
//!
//! A server can be killed (`kill -9`), frozen (SIGSTOP) and started again on
//! the same port and directory ([`RedisLaunch::spawn`]), so clients keep
//! their URL and an append-only file is replayed. [`start_n`] starts the N
//! independent instances Redlock needs.

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::time::Duration;

use bench_core::error::Chain;
use fencepost_harness::{ChildService, HarnessError};
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Environment variable naming the redis-server binary (default:
/// `redis-server` on `PATH`).
pub const REDIS_BIN_ENV: &str = "FENCEPOST_REDIS";
/// How long redis-server may take to answer `PING` after it was started
/// (replaying an append-only file included).
const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long one readiness `PING` may take.
const PING_TIMEOUT: Duration = Duration::from_millis(500);
/// How many times a start is tried on fresh ports (a port taken between
/// choosing it and redis-server binding it).
const START_TRIES: u32 = 3;

/// Whether and how redis-server writes its keys to disk.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RedisPersistence {
    /// Nothing on disk (`--save '' --appendonly no`): a restart forgets every
    /// lock key and fencing counter.
    None,
    /// Append-only file, fsynced once a second (`--appendfsync everysec`):
    /// Redis's suggested policy; a killed process loses nothing written, a
    /// crashed machine up to about a second. The default.
    #[default]
    EverySec,
    /// Append-only file, fsynced before every reply (`--appendfsync always`).
    Always,
}

impl RedisPersistence {
    /// Every mode, in the order the help lists them.
    pub const ALL: [RedisPersistence; 3] = [
        RedisPersistence::None,
        RedisPersistence::EverySec,
        RedisPersistence::Always,
    ];

    /// The flag value: `none`, `everysec` or `always`.
    pub fn as_str(self) -> &'static str {
        match self {
            RedisPersistence::None => "none",
            RedisPersistence::EverySec => "everysec",
            RedisPersistence::Always => "always",
        }
    }

    /// The redis-server flags of this mode.
    pub fn args(self) -> Vec<String> {
        let fsync = match self {
            RedisPersistence::None => {
                return ["--save", "", "--appendonly", "no"]
                    .map(String::from)
                    .into();
            }
            RedisPersistence::EverySec => "everysec",
            RedisPersistence::Always => "always",
        };
        ["--save", "", "--appendonly", "yes", "--appendfsync", fsync]
            .map(String::from)
            .into()
    }
}

impl std::fmt::Display for RedisPersistence {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::str::FromStr for RedisPersistence {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim();
        RedisPersistence::ALL
            .into_iter()
            .find(|p| p.as_str() == s)
            .ok_or_else(|| {
                format!("unknown redis persistence {s:?}: expected none, everysec or always")
            })
    }
}

/// Why redis-server could not be found or started.
#[derive(Debug, thiserror::Error)]
pub enum RedisServerError {
    /// `$FENCEPOST_REDIS` names no file: point it at redis-server, or unset it.
    #[error("{REDIS_BIN_ENV}={} is not a file", path.display())]
    NotAFile {
        /// What the variable says.
        path: PathBuf,
    },
    /// No redis-server binary: install it, set `$FENCEPOST_REDIS`, or use a
    /// Redis someone runs (`--redis-url`).
    #[error(
        "no `redis-server` on PATH (Debian: apt-get install redis-server; or set FENCEPOST_REDIS, or pass --redis-url)"
    )]
    NotFound,
    /// A loopback port could not be had, or the data directory not made (the
    /// OS error says which); free ports or disk, or fix the directory's permissions.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// The process could not be spawned; the harness's error names the binary.
    #[error(transparent)]
    Spawn(#[from] HarnessError),
    /// redis-server exited while it started: its log's tail is in the
    /// message; fix what it says (a flag, the directory) and start again.
    #[error("redis-server exited while starting; {} ends with:\n{tail}", log.display())]
    Exited {
        /// Its log.
        log: PathBuf,
        /// Its last lines.
        tail: String,
    },
    /// redis-server runs but did not answer `PING` in time: its log's tail
    /// is in the message; a loaded machine (or a long append-only file) may
    /// need another try.
    #[error(
        "redis-server did not answer PING within {READY_TIMEOUT:?}; {} ends with:\n{tail}",
        log.display()
    )]
    NotReady {
        /// Its log.
        log: PathBuf,
        /// Its last lines.
        tail: String,
    },
}

/// The redis-server binary: `$FENCEPOST_REDIS`, else `redis-server` on `PATH`.
pub fn redis_binary() -> Result<PathBuf, RedisServerError> {
    if let Some(p) = std::env::var_os(REDIS_BIN_ENV) {
        let path = PathBuf::from(p);
        if !path.is_file() {
            return Err(RedisServerError::NotAFile { path });
        }
        return Ok(path);
    }
    std::env::var_os("PATH")
        .iter()
        .flat_map(std::env::split_paths)
        .map(|d| d.join("redis-server"))
        .find(|p| p.is_file())
        .ok_or(RedisServerError::NotFound)
}

/// A loopback port free at the time of asking.
fn free_port() -> std::io::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// Everything needed to start one instance again where it was: binary,
/// flags (port and directory included), address. Cloned into whoever
/// restarts it (a stack's replica faults).
#[derive(Clone, Debug)]
pub struct RedisLaunch {
    /// The redis-server binary.
    bin: PathBuf,
    /// Its flags, `--port` and `--dir` included.
    args: Vec<String>,
    /// The loopback address it serves on.
    addr: SocketAddr,
    /// Where its logs go.
    dir: PathBuf,
    /// The instance's name: its log is `NAME.log`, its data `NAME-data/`.
    name: String,
}

impl RedisLaunch {
    /// The launch of instance `name` on `port`, data in `dir/NAME-data`.
    fn new(
        bin: &Path,
        dir: &Path,
        name: &str,
        port: u16,
        persistence: RedisPersistence,
    ) -> RedisLaunch {
        let data = dir.join(format!("{name}-data"));
        let mut args: Vec<String> = [
            "--bind",
            "127.0.0.1",
            "--port",
            &port.to_string(),
            "--dir",
            &data.display().to_string(),
            // redis-server appends to this path; the harness points it at our log file.
            "--logfile",
            "/dev/stderr",
            "--daemonize",
            "no",
        ]
        .map(String::from)
        .into();
        args.extend(persistence.args());
        RedisLaunch {
            bin: bin.to_path_buf(),
            args,
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
            dir: dir.to_path_buf(),
            name: name.to_owned(),
        }
    }

    /// The flags redis-server runs with (record them with the run).
    pub fn args(&self) -> &[String] {
        &self.args
    }

    /// The address it serves on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The client URL, `redis://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("redis://{}", self.addr)
    }

    /// The log of start number `restart` (0: the first start, `NAME.log`;
    /// then `NAME.restart-N.log`).
    pub fn log(&self, restart: u32) -> PathBuf {
        match restart {
            0 => self.dir.join(format!("{}.log", self.name)),
            n => self.dir.join(format!("{}.restart-{n}.log", self.name)),
        }
    }

    /// Starts redis-server with these flags (the old one must be dead: the
    /// port is reused), logging to `log`, and waits until it answers `PING`.
    pub async fn spawn(&self, log: &Path) -> Result<ChildService, RedisServerError> {
        std::fs::create_dir_all(self.dir.join(format!("{}-data", self.name)))?;
        let mut child = ChildService::spawn_unready(&self.bin, &self.args, log, self.addr)?;
        let deadline = tokio::time::Instant::now() + READY_TIMEOUT;
        loop {
            if !child.is_running() {
                return Err(RedisServerError::Exited {
                    log: log.to_path_buf(),
                    tail: child.stderr_tail(15),
                });
            }
            if ping(self.addr).await {
                return Ok(child);
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(RedisServerError::NotReady {
                    log: log.to_path_buf(),
                    tail: child.stderr_tail(15),
                });
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// Whether the server at `addr` answers `PING` with `+PONG` within
/// [`PING_TIMEOUT`] (a server still loading its file answers `-LOADING`).
pub async fn ping(addr: SocketAddr) -> bool {
    let exchange = async {
        let mut s = tokio::net::TcpStream::connect(addr).await?;
        s.write_all(b"PING\r\n").await?;
        let mut buf = [0u8; 7];
        s.read_exact(&mut buf).await?;
        Ok::<bool, std::io::Error>(&buf == b"+PONG\r\n")
    };
    matches!(
        tokio::time::timeout(PING_TIMEOUT, exchange).await,
        Ok(Ok(true))
    )
}

/// One redis-server running as our child.
pub struct RedisServer {
    /// The process.
    child: ChildService,
    /// How to start it again in its place.
    launch: RedisLaunch,
}

impl RedisServer {
    /// Starts one redis-server with `persistence`, its log in
    /// `dir/redis.log` and its data in `dir/redis-data`, and waits until it
    /// answers `PING`.
    pub async fn start(
        dir: &Path,
        persistence: RedisPersistence,
    ) -> Result<RedisServer, RedisServerError> {
        Self::start_named(dir, "redis", persistence).await
    }

    /// [`RedisServer::start`] as instance `name` (`NAME.log`, `NAME-data/`).
    pub async fn start_named(
        dir: &Path,
        name: &str,
        persistence: RedisPersistence,
    ) -> Result<RedisServer, RedisServerError> {
        let bin = redis_binary()?;
        std::fs::create_dir_all(dir)?;
        let mut last = None;
        for attempt in 1..=START_TRIES {
            let launch = RedisLaunch::new(&bin, dir, name, free_port()?, persistence);
            // A failed try may have left a half-written file behind.
            let _ = std::fs::remove_dir_all(dir.join(format!("{name}-data")));
            match launch.spawn(&launch.log(0)).await {
                Ok(child) => return Ok(RedisServer { child, launch }),
                Err(e) => {
                    tracing::warn!(attempt, error = %Chain(&e), "redis-server did not start");
                    last = Some(e);
                }
            }
        }
        Err(last.expect("at least one try"))
    }

    /// The client URL, `redis://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        self.launch.url()
    }

    /// The process id (for CPU accounting and signals).
    pub fn pid(&self) -> i32 {
        self.child.pid()
    }

    /// The flags it runs with.
    pub fn args(&self) -> &[String] {
        self.launch.args()
    }

    /// The child, to signal it (SIGSTOP, SIGCONT, kill -9).
    pub fn child_mut(&mut self) -> &mut ChildService {
        &mut self.child
    }

    /// kill -9, then a new redis-server on the same port, flags and
    /// directory (an append-only file is replayed), logging to the log of
    /// start number `restart`; returns when it answers `PING`.
    pub async fn restart(&mut self, restart: u32) -> Result<(), RedisServerError> {
        let _ = self.child.resume();
        self.child.kill9();
        self.child = self.launch.spawn(&self.launch.log(restart)).await?;
        Ok(())
    }

    /// The child and its launch, for a stack that owns them like a lock-server.
    pub fn into_parts(self) -> (ChildService, RedisLaunch) {
        (self.child, self.launch)
    }
}

/// Starts `n` independent redis-servers (Redlock's instances) named
/// `redis-0` … `redis-{n-1}` in `dir`, one after another; on an error the
/// ones already started are stopped (dropped).
pub async fn start_n(
    dir: &Path,
    n: u32,
    persistence: RedisPersistence,
) -> Result<Vec<RedisServer>, RedisServerError> {
    let mut servers = Vec::new();
    for i in 0..n {
        servers.push(RedisServer::start_named(dir, &format!("redis-{i}"), persistence).await?);
    }
    Ok(servers)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn persistence_modes_parse_from_their_names_and_map_to_flags() {
        for p in RedisPersistence::ALL {
            assert_eq!(p.as_str().parse::<RedisPersistence>(), Ok(p));
        }
        assert_eq!(
            RedisPersistence::None.args(),
            ["--save", "", "--appendonly", "no"]
        );
        assert_eq!(
            RedisPersistence::Always.args()[2..],
            ["--appendonly", "yes", "--appendfsync", "always"]
        );
        let e = "sometimes".parse::<RedisPersistence>().unwrap_err();
        assert_eq!(
            e,
            "unknown redis persistence \"sometimes\": expected none, everysec or always"
        );
    }

    #[test]
    fn a_launch_serves_on_loopback_with_its_data_and_logs_in_the_callers_directory() {
        let l = RedisLaunch::new(
            Path::new("/usr/bin/redis-server"),
            Path::new("/tmp/cell"),
            "redis-1",
            6390,
            RedisPersistence::EverySec,
        );
        assert_eq!(l.url(), "redis://127.0.0.1:6390");
        let a = l.args().join(" ");
        assert!(a.contains("--bind 127.0.0.1 --port 6390"), "{a}");
        assert!(a.contains("--dir /tmp/cell/redis-1-data"), "{a}");
        assert!(a.ends_with("--appendfsync everysec"), "{a}");
        assert_eq!(l.log(0), Path::new("/tmp/cell/redis-1.log"));
        assert_eq!(l.log(2), Path::new("/tmp/cell/redis-1.restart-2.log"));
    }
}
