//! `manifest.json`: everything needed to reproduce or judge a results
//! directory — the argv, the seed, the full configuration, the expanded grid
//! with every cell's seed, the git commit, tool and binary versions and the
//! machine it ran on. `bench replay` re-runs a directory from it and
//! `--resume` refuses a run whose flags differ from it.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::Command;

use serde::{Deserialize, Serialize};

/// Why `manifest.json` could not be written or read. The message is the
/// cause's own, as `bench replay` and `--resume` have always shown it (they
/// add the path themselves).
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// The file could not be written, renamed into place or read: the
    /// directory is missing or not writable, or holds no `manifest.json`.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// The file is not a manifest (not JSON, or a field missing or of the
    /// wrong type): it was cut or edited, or is not a run's.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
}

/// The manifest of one `bench run` / `bench sweep` (or experiment).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Manifest {
    /// `bench run`, `bench sweep`, `experiments pause`, ….
    pub command: String,
    /// The seed every cell used.
    pub seed: u64,
    /// The full resolved configuration, as JSON.
    pub config: serde_json::Value,
    /// The git commit of the working tree (`unknown` outside a checkout), with `-dirty` if modified.
    pub git_commit: String,
    /// Versions of fencepost and the toolchain.
    pub versions: Versions,
    /// The machine.
    pub machine: Machine,
    /// When the run started (RFC 3339, UTC; for humans).
    pub started_at: String,
    /// When the run finished, if it did.
    pub finished_at: Option<String>,
    /// Cell ids finished so far, in order.
    pub cells_done: Vec<String>,
    /// Cells an interrupt (SIGINT, SIGTERM) closed early: their rows hold
    /// what the shortened window measured (`stopped_by` = `interrupted`),
    /// and `--resume` measures them again. Absent when there are none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cells_partial: Vec<String>,
    /// The command line, argv[0] first (`bench replay` re-parses it).
    #[serde(default)]
    pub argv: Vec<String>,
    /// Every cell of the run in order, on every backend, with its seed.
    #[serde(default)]
    pub grid: Vec<GridCell>,
    /// The grid's flags as resolved (`--margin`, `--ttl`, `--margin-policy`, `--repeat`).
    #[serde(default)]
    pub grid_flags: Option<serde_json::Value>,
    /// `--version` of each service binary the run starts (process runtime), with its path.
    #[serde(default)]
    pub binaries: BTreeMap<String, String>,
    /// The results directory this run replays (`bench replay`), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replay_of: Option<String>,
    /// The delay proxy's own overhead, measured once per run with `--net-delay`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub proxy_overhead: Option<bench_core::overhead::ProxyOverhead>,
    /// How busy the whole machine was over the run (every process, this run's
    /// own among them), from `/proc`; absent in manifests written before it
    /// was recorded, or where `/proc/stat` cannot be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine_load: Option<MachineLoad>,
}

/// The machine's load over a run: what a sentence about "a busy machine"
/// is read from. `busy_cores` counts every process's CPU time (this run's
/// own too), so a run that used 1.2 cores on a machine busy 1.9 cores had
/// 0.7 cores of company.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MachineLoad {
    /// `/proc/loadavg`'s 1, 5 and 15 minute averages when the run started.
    pub loadavg_start: [f64; 3],
    /// The same when it finished.
    #[serde(default)]
    pub loadavg_end: Option<[f64; 3]>,
    /// Mean busy CPUs over the run (`/proc/stat`: all but idle and iowait),
    /// in cores; set when it finished.
    #[serde(default)]
    pub busy_cores: Option<f64>,
    /// `/proc/stat`'s busy and total jiffies at the start (summed over CPUs).
    pub stat_start: [u64; 2],
}

impl MachineLoad {
    /// A reading now; `None` where `/proc` cannot be read.
    pub fn start() -> Option<Self> {
        Some(MachineLoad {
            loadavg_start: loadavg()?,
            loadavg_end: None,
            busy_cores: None,
            stat_start: cpu_jiffies()?,
        })
    }

    /// Completes the reading at the end of the run.
    pub fn finish(&mut self, cpus: usize) {
        self.loadavg_end = loadavg();
        if let Some([busy, total]) = cpu_jiffies() {
            let (db, dt) = (
                busy.saturating_sub(self.stat_start[0]),
                total.saturating_sub(self.stat_start[1]),
            );
            if dt > 0 {
                self.busy_cores = Some(db as f64 / dt as f64 * cpus as f64);
            }
        }
    }
}

/// `/proc/loadavg`'s three averages.
fn loadavg() -> Option<[f64; 3]> {
    let text = std::fs::read_to_string("/proc/loadavg").ok()?;
    let mut it = text.split_whitespace().map(|v| v.parse::<f64>().ok());
    Some([it.next()??, it.next()??, it.next()??])
}

/// `/proc/stat`'s first line as [busy, total] jiffies: busy is every field
/// but idle (4th) and iowait (5th); guest time is already in user.
fn cpu_jiffies() -> Option<[u64; 2]> {
    let text = std::fs::read_to_string("/proc/stat").ok()?;
    parse_cpu_line(text.lines().next()?)
}

fn parse_cpu_line(line: &str) -> Option<[u64; 2]> {
    let mut fields = line.split_whitespace();
    (fields.next()? == "cpu").then_some(())?;
    let v: Vec<u64> = fields.map(|f| f.parse().ok()).collect::<Option<_>>()?;
    // user nice system idle iowait irq softirq steal [guest guest_nice]
    let counted = &v[..v.len().min(8)];
    let total: u64 = counted.iter().sum();
    let idle = v.get(3)? + v.get(4).copied().unwrap_or(0);
    Some([total - idle, total])
}

/// One cell of the expanded grid.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GridCell {
    /// The cell id (results column `cell`).
    pub cell: String,
    /// `fencepost` or `etcd`.
    pub backend: String,
    /// The margin policy.
    pub policy: String,
    /// The lease, ms.
    pub lease_ms: u64,
    /// The margin (adaptive: its ceiling).
    pub margin: f64,
    /// The repeat index.
    pub repeat: u32,
    /// The cell's seed (the run's seed + repeat).
    pub seed: u64,
}

/// Versions of what produced the data.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Versions {
    /// The fencepost workspace version.
    pub fencepost: String,
    /// `rustc --version`, if rustc is on PATH.
    pub rustc: String,
    /// Debug or release build of the bench.
    pub profile: String,
}

/// The machine the run was on.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Machine {
    /// Host name.
    pub hostname: String,
    /// Logical CPUs available.
    pub cpus: usize,
    /// Total memory, from /proc/meminfo.
    pub mem_total: String,
    /// CPU model, from /proc/cpuinfo.
    pub cpu_model: String,
    /// Kernel release.
    pub kernel: String,
    /// `std::env::consts::OS`/`ARCH`.
    pub os_arch: String,
    /// The kernel's clock-discipline estimate when the run started (absent in
    /// manifests written before the clock was recorded, or where adjtimex could not be read):
    /// the clock check's evidence.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock: Option<ClockReading>,
}

/// One reading of the host's clock discipline (`adjtimex`), beside the
/// offset bound the lock-server's grace assumed: the evidence of the clock
/// check (the lease-safety essay's, "observed maxerror > lock.clock.offset-max").
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct ClockReading {
    /// The kernel's maximum error bound, µs.
    pub maxerror_us: u64,
    /// Its estimated error, µs.
    pub esterror_us: u64,
    /// Whether the kernel considered the clock synchronised.
    pub synchronised: bool,
    /// `lock.clock.offset-max` the lock-server's grace used, ms.
    pub offset_max_ms: u64,
}

impl ClockReading {
    /// Reads the host's clock discipline now; `None` when adjtimex cannot be read.
    pub fn now() -> Option<Self> {
        let d = fencepost_api::clock_discipline::read().ok()?;
        let offset_max = fencepost_api::GraceParams::default().offset_max;
        Some(ClockReading {
            maxerror_us: u64::try_from(d.max_error.as_micros()).unwrap_or(u64::MAX),
            esterror_us: u64::try_from(d.est_error.as_micros()).unwrap_or(u64::MAX),
            synchronised: d.synchronised,
            offset_max_ms: u64::try_from(offset_max.as_millis()).unwrap_or(u64::MAX),
        })
    }
}

/// The first line `cmd args` prints on stdout, trimmed; `None` when it cannot run or prints nothing.
pub fn first_line(cmd: &str, args: &[&str]) -> Option<String> {
    let out = Command::new(cmd).args(args).output().ok()?;
    out.status.success().then(|| {
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .next()
            .unwrap_or("")
            .trim()
            .to_string()
    })
}

fn proc_field(path: &str, key: &str) -> String {
    std::fs::read_to_string(path)
        .ok()
        .and_then(|t| {
            t.lines()
                .find(|l| l.starts_with(key))
                .and_then(|l| l.split_once(':'))
                .map(|(_, v)| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into())
}

impl Manifest {
    /// A manifest for `command` with `config`, stamped now.
    pub fn new(command: &str, seed: u64, config: serde_json::Value) -> Self {
        // Dirty means the code differs from the commit: the measured outputs
        // under data/ (a pack being regenerated in place) do not count.
        let dirty = first_line(
            "git",
            &["status", "--porcelain", "--", ":/", ":(top,exclude)data"],
        )
        .is_some_and(|l| !l.is_empty());
        let git_commit = first_line("git", &["rev-parse", "HEAD"])
            .map(|c| if dirty { format!("{c}-dirty") } else { c })
            .unwrap_or_else(|| "unknown".into());
        Manifest {
            command: command.into(),
            seed,
            config,
            git_commit,
            versions: Versions {
                fencepost: env!("CARGO_PKG_VERSION").into(),
                rustc: first_line("rustc", &["--version"]).unwrap_or_else(|| "unknown".into()),
                profile: if cfg!(debug_assertions) {
                    "debug"
                } else {
                    "release"
                }
                .into(),
            },
            machine: Machine {
                hostname: std::fs::read_to_string("/proc/sys/kernel/hostname")
                    .map(|s| s.trim().to_string())
                    .unwrap_or_else(|_| "unknown".into()),
                cpus: std::thread::available_parallelism()
                    .map(|n| n.get())
                    .unwrap_or(0),
                mem_total: proc_field("/proc/meminfo", "MemTotal"),
                cpu_model: proc_field("/proc/cpuinfo", "model name"),
                kernel: std::fs::read_to_string("/proc/sys/kernel/osrelease")
                    .map(|s| s.trim().to_string())
                    .unwrap_or_else(|_| "unknown".into()),
                os_arch: format!("{}/{}", std::env::consts::OS, std::env::consts::ARCH),
                clock: ClockReading::now(),
            },
            started_at: now_rfc3339(),
            finished_at: None,
            cells_done: Vec::new(),
            cells_partial: Vec::new(),
            argv: Vec::new(),
            grid: Vec::new(),
            grid_flags: None,
            binaries: BTreeMap::new(),
            replay_of: None,
            proxy_overhead: None,
            machine_load: MachineLoad::start(),
        }
    }

    /// Stamps the run finished: the time and the machine's load over it.
    pub fn finish(&mut self) {
        self.finished_at = Some(now_rfc3339());
        let cpus = self.machine.cpus;
        if let Some(l) = &mut self.machine_load {
            l.finish(cpus);
        }
    }

    /// Writes `manifest.json` into `dir` (atomically: a temp file, then rename).
    pub fn write(&self, dir: &Path) -> Result<(), ManifestError> {
        let tmp = dir.join("manifest.json.tmp");
        std::fs::write(&tmp, serde_json::to_vec_pretty(self)?)?;
        std::fs::rename(&tmp, dir.join("manifest.json"))?;
        Ok(())
    }

    /// Reads `dir/manifest.json`.
    pub fn read(dir: &Path) -> Result<Self, ManifestError> {
        Ok(serde_json::from_slice(&std::fs::read(
            dir.join("manifest.json"),
        )?)?)
    }
}

/// Wall-clock now as RFC 3339 UTC (for humans and directory names only).
pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Busy is every counted field but idle and iowait; guest fields (already
    /// in user) are not counted twice.
    #[test]
    fn a_proc_stat_line_splits_into_busy_and_total() {
        let line = "cpu  100 5 50 800 20 3 2 10 40 0";
        assert_eq!(parse_cpu_line(line), Some([170, 990]));
        assert_eq!(parse_cpu_line("cpu0 1 2 3 4"), None);
        assert_eq!(parse_cpu_line("cpu  x"), None);
    }

    /// Over a stretch of this process's own work the machine is busy for
    /// more than nothing, and no more than every core.
    #[test]
    fn the_machine_load_over_a_busy_stretch_is_between_zero_and_the_cores() {
        let Some(mut l) = MachineLoad::start() else {
            return; // no /proc here
        };
        let until = std::time::Instant::now() + std::time::Duration::from_millis(300);
        let mut x = 0u64;
        while std::time::Instant::now() < until {
            x = x.wrapping_mul(31).wrapping_add(1);
        }
        std::hint::black_box(x);
        let cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        l.finish(cpus);
        let busy = l.busy_cores.expect("read at the end");
        assert!(busy > 0.0 && busy <= cpus as f64 + 0.01, "{busy}");
        assert!(l.loadavg_end.is_some());
    }
}
