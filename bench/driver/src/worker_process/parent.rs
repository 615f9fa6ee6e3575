//! The parent side of a worker process: starting one with its
//! [`WorkerSpec`] ([`WorkerChild::spawn`]), reading its JSON lines
//! ([`WorkerLine`]), and the process state the pause experiment waits on
//! ([`proc_state`], [`wait_stopped`]). A [`WorkerChild`] in continuous mode
//! is a [`RemoteWorker`], so the cell driver's pool runs worker processes
//! like in-process workers; [`ProcessSpawner`] is the hook that starts them
//! (and, for the throttle experiment, moves each into a cgroup).

use std::error::Error;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use bench_core::hist::{DecodeError, Histograms};
use bench_core::tally::TallySnapshot;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _};
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::cell::pool::{PoolError, RemoteWorker, SpawnRemote, WorkerReport};
use crate::worker::env::{BoxFuture, WorkerEnv};
use crate::worker_process::line::WorkerLine;
use crate::worker_process::spec::{WorkerMode, WorkerSpec};

/// The hidden subcommand of the executable that hosts worker processes:
/// the parent runs `<this executable> worker --spec JSON`, whose handler
/// calls [`crate::worker_process::child::main`].
pub const WORKER_SUBCOMMAND: &str = "worker";

/// The argument that carries the [`WorkerSpec`] (one line of JSON).
pub const SPEC_FLAG: &str = "--spec";

/// How long a worker process may take beyond its grace to print `done` and exit.
const EXIT_SLACK: Duration = Duration::from_secs(30);

/// Why a worker process could not be started, driven or read. Its log
/// (`worker-<idx>.log`, its stderr) says more when it died.
#[derive(Debug, thiserror::Error)]
pub enum WorkerProcError {
    /// This executable's own path is unknown (`/proc/self/exe`): run it
    /// from a mounted filesystem, not a deleted file.
    #[error("locating this executable")]
    Exe(#[source] std::io::Error),
    /// The directory of the workers' logs could not be created: check the
    /// output directory's permissions.
    #[error("{error}")]
    LogDir {
        /// The directory.
        dir: PathBuf,
        /// The OS error (in the message, so not also a `source()`).
        error: std::io::Error,
    },
    /// The worker's log could not be created: check the output directory.
    #[error("creating {}", path.display())]
    Log {
        /// The log file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The process could not be started (fork or exec failed): check the
    /// process and memory limits.
    #[error("starting the worker process")]
    Start(#[source] std::io::Error),
    /// The process exited and was reaped before its pid was read: see its log.
    #[error("worker pid")]
    NoPid,
    /// The process has no stdout pipe to read: a bug in the spawn.
    #[error("worker stdout")]
    NoStdout,
    /// The process ended (or closed its stdout) before its next line: see its log.
    #[error("the worker process closed its stdout (see its log)")]
    Closed,
    /// The process printed nothing in time: it hangs, or the machine is
    /// overloaded; see its log.
    #[error("no line from the worker process within {limit:?}")]
    Silent {
        /// How long it was given.
        limit: Duration,
    },
    /// A command was sent after stdin was closed: a bug in the driver.
    #[error("worker stdin closed")]
    StdinClosed,
    /// A command could not be written to the process (it died): see its log.
    #[error(transparent)]
    Send(std::io::Error),
    /// The process could not be SIGCONTed (it is gone): see its log.
    #[error("SIGCONT")]
    Resume(#[source] nix::errno::Errno),
    /// A histogram of its `done` line does not decode: a worker of another
    /// build; rebuild and rerun.
    #[error("the worker's {what} histogram")]
    Histogram {
        /// Which histogram.
        what: &'static str,
        /// Why it does not decode.
        #[source]
        source: DecodeError,
    },
    /// The process disappeared while it was to stop: see its log.
    #[error("worker process {pid} is gone")]
    Gone {
        /// Its pid.
        pid: i32,
    },
    /// The process did not reach the stopped state in time: the machine is
    /// overloaded, or the process is traced; rerun.
    #[error("worker process {pid} did not stop within {limit:?}")]
    NotStopped {
        /// Its pid.
        pid: i32,
        /// How long it was given.
        limit: Duration,
    },
}

/// A worker child process, killed on drop.
pub struct WorkerChild {
    /// The process.
    child: tokio::process::Child,
    /// Its pid.
    pid: i32,
    /// Its stdin (commands); `None` once closed.
    stdin: Option<tokio::process::ChildStdin>,
    /// Its stdout lines, stamped with seconds since the `t0` it was spawned with.
    lines: mpsc::UnboundedReceiver<(f64, WorkerLine)>,
    /// The beliefs it streamed ([`WorkerLine::Believed`]) while joining:
    /// what [`RemoteWorker::salvage`] returns if it dies before `done`.
    believed: Vec<(String, u64)>,
}

impl WorkerChild {
    /// Starts `<this executable> worker --spec SPEC`, stderr to `log`.
    pub fn spawn(spec: &WorkerSpec, log: &Path, t0: Instant) -> Result<Self, WorkerProcError> {
        let exe = std::env::current_exe().map_err(WorkerProcError::Exe)?;
        let stderr = std::fs::File::create(log).map_err(|source| WorkerProcError::Log {
            path: log.to_path_buf(),
            source,
        })?;
        let mut cmd = tokio::process::Command::new(exe);
        cmd.arg(WORKER_SUBCOMMAND)
            .arg(SPEC_FLAG)
            .arg(spec.to_arg())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(stderr))
            .kill_on_drop(true);
        // SAFETY: prctl is async-signal-safe and touches no memory of the parent.
        unsafe {
            cmd.pre_exec(|| {
                nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(std::io::Error::from)
            });
        }
        let mut child = cmd.spawn().map_err(WorkerProcError::Start)?;
        let pid = child.id().ok_or(WorkerProcError::NoPid)? as i32;
        let stdout = child.stdout.take().ok_or(WorkerProcError::NoStdout)?;
        let stdin = child.stdin.take();
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut lines = tokio::io::BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                match serde_json::from_str::<WorkerLine>(&line) {
                    Ok(w) => {
                        if tx.send((t0.elapsed().as_secs_f64(), w)).is_err() {
                            return;
                        }
                    }
                    Err(_) => tracing::warn!(%line, "unparsed worker line"),
                }
            }
        });
        Ok(WorkerChild {
            child,
            pid,
            stdin,
            lines: rx,
            believed: Vec::new(),
        })
    }

    /// Its pid.
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// The next line, within `limit`, with its receipt time.
    pub async fn next(&mut self, limit: Duration) -> Result<(f64, WorkerLine), WorkerProcError> {
        match tokio::time::timeout(limit, self.lines.recv()).await {
            Ok(Some(l)) => Ok(l),
            Ok(None) => Err(WorkerProcError::Closed),
            Err(_) => Err(WorkerProcError::Silent { limit }),
        }
    }

    /// Sends one command line.
    pub async fn send(&mut self, line: &str) -> Result<(), WorkerProcError> {
        let stdin = self.stdin.as_mut().ok_or(WorkerProcError::StdinClosed)?;
        stdin
            .write_all(format!("{line}\n").as_bytes())
            .await
            .map_err(WorkerProcError::Send)?;
        stdin.flush().await.map_err(WorkerProcError::Send)
    }

    /// SIGCONTs the process.
    pub fn resume(&self) -> Result<(), WorkerProcError> {
        kill(Pid::from_raw(self.pid), Signal::SIGCONT).map_err(WorkerProcError::Resume)
    }

    /// Asks a round-mode worker to quit and waits (briefly) for it to exit.
    pub async fn quit(&mut self) {
        let _ = self.send("quit").await;
        self.stdin.take();
        let _ = tokio::time::timeout(Duration::from_secs(10), self.child.wait()).await;
    }
}

impl Drop for WorkerChild {
    fn drop(&mut self) {
        // A stopped process still dies of SIGKILL; SIGCONT first anyway so nothing lingers frozen.
        let _ = kill(Pid::from_raw(self.pid), Signal::SIGCONT);
    }
}

impl RemoteWorker for WorkerChild {
    fn pid(&self) -> Option<u32> {
        u32::try_from(self.pid).ok()
    }

    fn stop(&mut self) -> BoxFuture<'_, Result<(), PoolError>> {
        Box::pin(async move { self.send("stop").await.map_err(PoolError::remote) })
    }

    fn reset(&mut self) -> BoxFuture<'_, Result<(), PoolError>> {
        Box::pin(async move { self.send("reset").await.map_err(PoolError::remote) })
    }

    fn join(&mut self, grace: Duration) -> BoxFuture<'_, Result<WorkerReport, PoolError>> {
        Box::pin(async move {
            let deadline = Instant::now() + grace + EXIT_SLACK;
            let report = loop {
                let left = deadline.saturating_duration_since(Instant::now());
                let (t, line) = self.next(left).await.map_err(PoolError::remote)?;
                if let WorkerLine::Believed { payout, token } = &line {
                    self.believed.push((payout.clone(), *token));
                    continue;
                }
                if let (
                    _,
                    WorkerLine::Done {
                        tally,
                        renewals,
                        heartbeat,
                        rtt_hdr,
                        corrected_hdr,
                        tick_lag_hdr,
                        rail_hdr,
                        gap_hdr,
                        renew_hdr,
                        cpu_s,
                        margins,
                    },
                ) = (t, line)
                {
                    let decode = |what: &'static str, text: &str| {
                        if text.is_empty() {
                            // A worker of an older build: the series was not sent.
                            return Ok(bench_core::hist::new_histogram());
                        }
                        bench_core::hist::decode(text).map_err(|source| {
                            PoolError::remote(WorkerProcError::Histogram { what, source })
                        })
                    };
                    break WorkerReport {
                        tally,
                        renewals,
                        heartbeat: *heartbeat,
                        hists: Histograms {
                            rtt: decode("RTT", &rtt_hdr)?,
                            corrected: decode("corrected RTT", &corrected_hdr)?,
                            tick_lag: decode("tick lag", &tick_lag_hdr)?,
                            rail: decode("rail latency", &rail_hdr)?,
                            gap: decode("heartbeat gaps", &gap_hdr)?,
                            renew: decode("renewal RTT", &renew_hdr.0)?,
                            renew_corrected: decode("corrected renewal RTT", &renew_hdr.1)?,
                        },
                        margins: margins.0,
                        cpu_s,
                    };
                }
            };
            // The `done` line carries every belief: the streamed ones are not needed.
            self.believed.clear();
            self.stdin.take();
            let left = deadline.saturating_duration_since(Instant::now());
            let _ = tokio::time::timeout(left, self.child.wait()).await;
            Ok(report)
        })
    }

    fn salvage(&mut self) -> TallySnapshot {
        TallySnapshot {
            believed_held: std::mem::take(&mut self.believed),
            ..TallySnapshot::default()
        }
    }
}

/// What a [`ProcessSpawner`] calls with each new worker's pid; its error
/// fails the cell.
pub type OnSpawn<'a> = &'a (dyn Fn(u32) -> Result<(), Box<dyn Error + Send + Sync>> + Send + Sync);

/// Starts continuous-mode worker processes for the cell driver, logs in
/// `dir/worker-<idx>.log`; `on_spawn` sees each new pid (the throttle
/// experiment moves it into its cgroup there).
pub struct ProcessSpawner<'a> {
    /// Where the workers' logs go.
    pub dir: PathBuf,
    /// The time the workers' lines are stamped from.
    pub t0: Instant,
    /// Called with each new worker's pid (the throttle experiment's move
    /// into its cgroup); an error fails the cell.
    pub on_spawn: Option<OnSpawn<'a>>,
}

impl SpawnRemote for ProcessSpawner<'_> {
    fn spawn(
        &self,
        idx: u64,
        env: &WorkerEnv,
        first: u64,
        count: u64,
    ) -> Result<Box<dyn RemoteWorker>, PoolError> {
        std::fs::create_dir_all(&self.dir).map_err(|error| {
            PoolError::remote(WorkerProcError::LogDir {
                dir: self.dir.clone(),
                error,
            })
        })?;
        let spec = WorkerSpec::new(idx, env, WorkerMode::Continuous { first, count });
        let log = self.dir.join(format!("worker-{idx}.log"));
        let child = WorkerChild::spawn(&spec, &log, self.t0).map_err(PoolError::remote)?;
        if let Some(hook) = self.on_spawn {
            hook(child.pid as u32).map_err(PoolError::remote)?;
        }
        Ok(Box::new(child))
    }
}

/// The scheduler state of `pid` from `/proc/PID/stat` (`R`, `S`, `T` = stopped, …).
pub fn proc_state(pid: i32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?.1.trim_start().chars().next()
}

/// Waits until `pid` is stopped (`T`), within `limit`.
pub async fn wait_stopped(pid: i32, limit: Duration) -> Result<(), WorkerProcError> {
    let deadline = Instant::now() + limit;
    loop {
        match proc_state(pid) {
            Some('T') | Some('t') => return Ok(()),
            None => return Err(WorkerProcError::Gone { pid }),
            _ => {}
        }
        if Instant::now() >= deadline {
            return Err(WorkerProcError::NotStopped { pid, limit });
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}
