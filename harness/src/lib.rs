//! Starts `lock-server` and `rail-stub` as child processes, the way the bench,
//! the experiments and the integration tests all need them: on a free loopback
//! port (`--listen 127.0.0.1:0`), ready once the child prints its one
//! `listening on http://IP:PORT` line (`https://` for a lock-server with
//! TLS), and always stopped — on drop (error,
//! panic), and by the kernel if this process dies first (`PR_SET_PDEATHSIG`).
//!
//! It also owns the process-level faults the experiments inject: SIGSTOP /
//! SIGCONT (a stalled server or worker) and SIGKILL (a crash). And the
//! tests' `promtool check metrics` ([`promtool_check_metrics`]), and the
//! certificates TLS runs make at run time ([`pki`]).

pub mod pki;
mod promtool;
pub use promtool::promtool_check_metrics;

use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Read};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// How long a child may take to print its `listening on` line.
pub const START_TIMEOUT: Duration = Duration::from_secs(60);

/// Why a child could not be started or controlled. Each says what to check.
#[derive(Debug, thiserror::Error)]
pub enum HarnessError {
    /// The binary is not where it was looked for and could not be built.
    #[error("cannot find or build the `{name}` binary: {detail}")]
    Binary {
        /// The binary's name.
        name: String,
        /// What went wrong.
        detail: String,
    },
    /// Spawning the process failed (permissions, missing file).
    #[error("cannot start {path}: {error}")]
    Spawn {
        /// The binary's path.
        path: PathBuf,
        /// The OS error (in the message, so not also a `source()`: a `{:#}`
        /// chain would print it twice).
        error: std::io::Error,
    },
    /// The child exited or stayed silent instead of printing `listening on http://IP:PORT`.
    #[error(
        "{name} did not report `listening on http://IP:PORT` ({why}); its stderr ends with:\n{stderr_tail}"
    )]
    NotReady {
        /// The binary's name.
        name: String,
        /// Exit, timeout, or an unparsable line.
        why: String,
        /// The last lines the child wrote to stderr.
        stderr_tail: String,
    },
    /// A run-time certificate ([`pki`]) could not be made or written.
    #[error("certificate {what}: {detail}")]
    Certificate {
        /// The certificate or file.
        what: String,
        /// What went wrong.
        detail: String,
    },
    /// Sending a signal failed (the child is gone).
    #[error("signal {signal} to pid {pid} failed: {source}")]
    Signal {
        /// The signal.
        signal: Signal,
        /// The child's pid.
        pid: i32,
        /// The OS error.
        source: nix::Error,
    },
}

/// One of our own services, running as a child process.
pub struct ChildService {
    /// The binary's name, for messages.
    name: String,
    /// The process; `None` once it has been reaped.
    child: Option<Child>,
    /// The bound address the child printed.
    addr: SocketAddr,
    /// Whether its line said `https://`.
    https: bool,
    /// Where the child's stderr goes (its JSON logs), kept for diagnostics.
    stderr_path: PathBuf,
    /// Whether we SIGSTOPped it (so drop SIGCONTs before killing).
    stopped: bool,
}

impl ChildService {
    /// Starts `binary` with `args` plus `--listen 127.0.0.1:0` and waits, at most
    /// [`START_TIMEOUT`], for its `listening on` line. `stderr_path` receives
    /// the child's stderr.
    pub fn start<I, S>(binary: &Path, args: I, stderr_path: &Path) -> Result<Self, HarnessError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        Self::start_on(
            binary,
            args,
            stderr_path,
            SocketAddr::from(([127, 0, 0, 1], 0)),
        )
    }

    /// [`ChildService::start`] on a given address (`--listen ADDR`): a
    /// replica restarted where its peers and clients already look for it.
    pub fn start_on<I, S>(
        binary: &Path,
        args: I,
        stderr_path: &Path,
        listen: SocketAddr,
    ) -> Result<Self, HarnessError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let name = binary_name(binary);
        let mut cmd = Command::new(binary);
        cmd.args(args).arg("--listen").arg(listen.to_string());
        let mut child = spawn_owned(binary, cmd, Stdio::piped(), stderr_path)?;
        let stdout = child.stdout.take().expect("stdout was piped");
        let (tx, rx) = mpsc::channel::<String>();
        // Reads the first line for us, then keeps draining so the child never
        // blocks on a full pipe.
        std::thread::spawn(move || {
            let mut reader = BufReader::new(stdout);
            let mut line = String::new();
            if reader.read_line(&mut line).is_ok() {
                let _ = tx.send(line);
            }
            let mut sink = Vec::new();
            let _ = reader.read_to_end(&mut sink);
        });
        let mut service = ChildService {
            name: name.clone(),
            child: Some(child),
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            https: false,
            stderr_path: stderr_path.to_path_buf(),
            stopped: false,
        };
        let line = match rx.recv_timeout(START_TIMEOUT) {
            Ok(line) => line,
            Err(_) => {
                let why = match service
                    .child
                    .as_mut()
                    .and_then(|c| c.try_wait().ok().flatten())
                {
                    Some(status) => format!("it exited with {status}"),
                    None => format!("nothing within {START_TIMEOUT:?}"),
                };
                return Err(service.not_ready(why));
            }
        };
        match parse_listening_line(&line) {
            Some(addr) => {
                service.addr = addr;
                service.https = line.trim().starts_with("listening on https://");
                Ok(service)
            }
            None => Err(service.not_ready(format!("first stdout line was {:?}", line.trim_end()))),
        }
    }

    /// Starts `binary` with exactly `args` (no `--listen` is added) and owns
    /// it like [`ChildService::start`] does — killed on drop, and by the
    /// kernel if this process dies — but does not wait for a `listening on`
    /// line: for a server that prints none (etcd), whose port the caller
    /// chose (`addr`) and whose readiness the caller checks. stdout is
    /// discarded; stderr goes to `stderr_path`.
    pub fn spawn_unready<I, S>(
        binary: &Path,
        args: I,
        stderr_path: &Path,
        addr: SocketAddr,
    ) -> Result<Self, HarnessError>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        let mut cmd = Command::new(binary);
        cmd.args(args);
        let child = spawn_owned(binary, cmd, Stdio::null(), stderr_path)?;
        Ok(ChildService {
            name: binary_name(binary),
            child: Some(child),
            addr,
            https: false,
            stderr_path: stderr_path.to_path_buf(),
            stopped: false,
        })
    }

    fn not_ready(&mut self, why: String) -> HarnessError {
        self.kill_now();
        HarnessError::NotReady {
            name: self.name.clone(),
            why,
            stderr_tail: self.stderr_tail(20),
        }
    }

    /// The address the child is listening on.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The base URL, `http://IP:PORT` (`https://` if the child said so).
    pub fn url(&self) -> String {
        let scheme = if self.https { "https" } else { "http" };
        format!("{scheme}://{}", self.addr)
    }

    /// The child's pid.
    pub fn pid(&self) -> i32 {
        self.child.as_ref().map(|c| c.id() as i32).unwrap_or(-1)
    }

    /// The file holding the child's stderr.
    pub fn stderr_path(&self) -> &Path {
        &self.stderr_path
    }

    /// The last `lines` lines of the child's stderr, for error messages.
    pub fn stderr_tail(&self, lines: usize) -> String {
        let text = std::fs::read_to_string(&self.stderr_path).unwrap_or_default();
        let all: Vec<&str> = text.lines().collect();
        all[all.len().saturating_sub(lines)..].join("\n")
    }

    /// Sends `signal` to the child. A child already killed and reaped has no
    /// pid: that is `ESRCH`, never `kill(-1, …)`, which would signal every
    /// process this user may signal (a SIGCONT to -1 once thawed another
    /// test's frozen worker).
    pub fn signal(&mut self, signal: Signal) -> Result<(), HarnessError> {
        let pid = self.pid();
        if pid <= 0 {
            return Err(HarnessError::Signal {
                signal,
                pid,
                source: nix::Error::ESRCH,
            });
        }
        kill(Pid::from_raw(pid), signal).map_err(|source| HarnessError::Signal {
            signal,
            pid,
            source,
        })?;
        match signal {
            Signal::SIGSTOP => self.stopped = true,
            Signal::SIGCONT => self.stopped = false,
            _ => {}
        }
        Ok(())
    }

    /// Freezes the child (SIGSTOP): it keeps its sockets but answers nothing.
    pub fn pause(&mut self) -> Result<(), HarnessError> {
        self.signal(Signal::SIGSTOP)
    }

    /// Thaws a paused child (SIGCONT).
    pub fn resume(&mut self) -> Result<(), HarnessError> {
        self.signal(Signal::SIGCONT)
    }

    /// Crashes the child (SIGKILL) and reaps it.
    pub fn kill9(&mut self) {
        self.kill_now();
    }

    /// Asks the child to stop (SIGTERM) and waits up to `timeout` for it to
    /// exit; kills it if it does not. Returns whether it exited on its own,
    /// with its exit status.
    pub fn terminate(&mut self, timeout: Duration) -> Option<std::process::ExitStatus> {
        if self.stopped {
            let _ = self.resume();
        }
        let child = self.child.as_mut()?;
        let _ = kill(Pid::from_raw(child.id() as i32), Signal::SIGTERM);
        let step = Duration::from_millis(10);
        let mut waited = Duration::ZERO;
        while waited < timeout {
            if let Ok(Some(status)) = child.try_wait() {
                self.child = None;
                return Some(status);
            }
            std::thread::sleep(step);
            waited += step;
        }
        self.kill_now();
        None
    }

    /// True while the child has not exited.
    pub fn is_running(&mut self) -> bool {
        match self.child.as_mut() {
            Some(c) => matches!(c.try_wait(), Ok(None)),
            None => false,
        }
    }

    fn kill_now(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        self.stopped = false;
    }
}

impl Drop for ChildService {
    fn drop(&mut self) {
        self.kill_now();
    }
}

/// The file name of `binary`, for messages.
fn binary_name(binary: &Path) -> String {
    binary
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| binary.display().to_string())
}

/// Spawns `cmd` (whose program is `binary`) the way every child here is
/// owned: stdin closed, `stdout` as given, stderr into `stderr_path`, killed
/// by the kernel if this process dies ([`die_with_parent`], [`spawn_on_keeper`]),
/// in a process group of its own, so a terminal's Ctrl-C reaches the owner
/// alone, which stops its children when it has written what it measured.
fn spawn_owned(
    binary: &Path,
    mut cmd: Command,
    stdout: Stdio,
    stderr_path: &Path,
) -> Result<Child, HarnessError> {
    let stderr = std::fs::File::create(stderr_path).map_err(|error| HarnessError::Spawn {
        path: stderr_path.to_path_buf(),
        error,
    })?;
    cmd.stdin(Stdio::null())
        .stdout(stdout)
        .stderr(Stdio::from(stderr));
    std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
    die_with_parent(&mut cmd);
    spawn_on_keeper(cmd).map_err(|error| HarnessError::Spawn {
        path: binary.to_path_buf(),
        error,
    })
}

/// Parses `listening on http://IP:PORT` or `listening on https://IP:PORT`.
pub fn parse_listening_line(line: &str) -> Option<SocketAddr> {
    let rest = line.trim().strip_prefix("listening on ")?;
    rest.strip_prefix("http://")
        .or_else(|| rest.strip_prefix("https://"))?
        .parse()
        .ok()
}

/// A spawn request for the keeper thread, with where to send the result.
type SpawnJob = (Command, mpsc::Sender<std::io::Result<Child>>);

/// Spawns `cmd` from one thread that lives as long as the process.
///
/// `PR_SET_PDEATHSIG` fires when the *thread* that forked the child exits, not
/// the process: a child spawned from a tokio blocking-pool thread would be
/// killed when the pool retires that idle thread (after 10 s). Spawning every
/// child from this keeper thread ties their lives to the process instead.
fn spawn_on_keeper(cmd: Command) -> std::io::Result<Child> {
    static KEEPER: OnceLock<Mutex<mpsc::Sender<SpawnJob>>> = OnceLock::new();
    let keeper = KEEPER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<SpawnJob>();
        std::thread::Builder::new()
            .name("fencepost-harness-spawner".into())
            .spawn(move || {
                for (mut cmd, reply) in rx {
                    let _ = reply.send(cmd.spawn());
                }
            })
            .expect("spawner thread starts");
        Mutex::new(tx)
    });
    let (reply_tx, reply_rx) = mpsc::channel();
    keeper
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .send((cmd, reply_tx))
        .map_err(|_| std::io::Error::other("the harness spawner thread is gone"))?;
    reply_rx
        .recv()
        .map_err(|_| std::io::Error::other("the harness spawner thread is gone"))?
}

/// Makes the kernel SIGKILL the child when this process dies, so a crashed or
/// SIGKILLed harness leaves nothing behind (see [`spawn_on_keeper`] for why
/// the spawning thread matters).
fn die_with_parent(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: prctl is async-signal-safe and touches no memory of the parent.
    unsafe {
        cmd.pre_exec(|| {
            nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(std::io::Error::from)
        });
    }
}

/// Finds one of the workspace's binaries (`lock-server`, `rail-stub`, …).
///
/// Order: `$FENCEPOST_BIN_DIR/NAME`; else the directory of the running
/// executable (or its parent, for test binaries under `deps/`). When the
/// caller is a test binary (under `deps/`), or the binary is missing, the
/// binary is (re)built first with `cargo build -p PACKAGE --bin NAME` in the
/// same profile, once per process, so tests never run a stale server.
pub fn binary(package: &str, name: &str) -> Result<PathBuf, HarnessError> {
    let err = |detail: String| HarnessError::Binary {
        name: name.to_string(),
        detail,
    };
    if let Ok(dir) = std::env::var("FENCEPOST_BIN_DIR") {
        let p = Path::new(&dir).join(name);
        return if p.is_file() {
            Ok(p)
        } else {
            Err(err(format!("FENCEPOST_BIN_DIR={dir} has no {name}")))
        };
    }
    let exe = std::env::current_exe().map_err(|e| err(e.to_string()))?;
    let mut dir = exe.parent().map(Path::to_path_buf).unwrap_or_default();
    let in_deps = dir.file_name() == Some(OsStr::new("deps"));
    if in_deps {
        dir.pop();
    }
    let path = dir.join(name);
    let under_cargo = std::env::var_os("CARGO").is_some();
    if in_deps || under_cargo || !path.is_file() {
        build_once(package, name, &dir).map_err(err)?;
    }
    if path.is_file() {
        Ok(path)
    } else {
        Err(err(format!(
            "{} does not exist after building",
            path.display()
        )))
    }
}

/// Runs `cargo build -p package --bin name` at most once per process per binary.
fn build_once(package: &str, name: &str, out_dir: &Path) -> Result<(), String> {
    static BUILT: OnceLock<Mutex<Vec<String>>> = OnceLock::new();
    let built = BUILT.get_or_init(|| Mutex::new(Vec::new()));
    let mut built = built.lock().unwrap_or_else(|e| e.into_inner());
    if built.iter().any(|b| b == name) {
        return Ok(());
    }
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.args(["build", "--quiet", "-p", package, "--bin", name]);
    if out_dir.file_name() == Some(OsStr::new("release")) {
        cmd.arg("--release");
    }
    // Build into the same target directory the caller lives in.
    if let Some(target) = out_dir.parent() {
        cmd.env("CARGO_TARGET_DIR", target);
    }
    if let Some(root) = workspace_root() {
        cmd.current_dir(root);
    }
    let out = cmd.output().map_err(|e| format!("running cargo: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "cargo build -p {package} failed:\n{}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    built.push(name.to_string());
    Ok(())
}

/// The workspace root, known at compile time of this crate.
fn workspace_root() -> Option<PathBuf> {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_child_outlives_the_thread_that_started_it() {
        // `sleep` stands in for a service: start it from a short-lived thread
        // (as tokio's blocking pool would), let that thread exit, and check the
        // child is still running: PR_SET_PDEATHSIG must not fire on thread exit.
        let child = std::thread::spawn(|| {
            let mut cmd = Command::new("sleep");
            cmd.arg("30");
            die_with_parent(&mut cmd);
            spawn_on_keeper(cmd).expect("sleep starts")
        })
        .join()
        .unwrap();
        let mut child = child;
        // Give the kernel a moment to deliver a (wrong) death signal, then check.
        for _ in 0..20 {
            assert!(
                child.try_wait().unwrap().is_none(),
                "child died with its spawning thread"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
        let _ = child.kill();
        let _ = child.wait();
    }

    #[test]
    fn a_killed_child_is_signalled_never_and_nobody_else_instead() {
        // A bystander, stopped: kill(-1, SIGCONT) would thaw it.
        let mut bystander = Command::new("sleep").arg("30").spawn().unwrap();
        let pid = bystander.id() as i32;
        kill(Pid::from_raw(pid), Signal::SIGSTOP).unwrap();
        let state = || {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
            stat.rsplit(')')
                .next()
                .unwrap()
                .split_whitespace()
                .next()
                .unwrap()
                .to_owned()
        };
        for _ in 0..200 {
            if state() == "T" {
                break;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
        assert_eq!(state(), "T");
        let mut gone = ChildService {
            name: "gone".into(),
            child: None,
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            https: false,
            stderr_path: PathBuf::from("/dev/null"),
            stopped: true,
        };
        assert!(
            gone.resume().is_err(),
            "a reaped child has no pid to signal"
        );
        assert!(gone.pause().is_err());
        std::thread::sleep(Duration::from_millis(50));
        assert_eq!(state(), "T", "the bystander was thawed");
        let _ = bystander.kill();
        let _ = bystander.wait();
    }

    #[test]
    fn parses_the_listening_line() {
        assert_eq!(
            parse_listening_line("listening on https://127.0.0.1:4322\n"),
            Some("127.0.0.1:4322".parse().unwrap())
        );
        assert_eq!(
            parse_listening_line("listening on http://127.0.0.1:4321\n"),
            Some("127.0.0.1:4321".parse().unwrap())
        );
        assert_eq!(parse_listening_line("listening on 127.0.0.1:1"), None);
    }
}
