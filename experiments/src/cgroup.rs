//! A CPU-quota cgroup for the throttle experiment: cgroup v2 `cpu.max` where
//! the unified hierarchy has the `cpu` controller, else cgroup v1
//! `cpu.cfs_quota_us`/`cpu.cfs_period_us`. It creates a child group, moves
//! process ids into it, and removes it on drop (moving any survivor back to
//! the parent first). Where nothing can be written it says why, as an error
//! value, never a panic.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// A CPU quota: `quota_us` of CPU time per `period_us` (cgroup's own units).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuotaSpec {
    /// CPU time per period, µs (≥ 1000, the kernel's minimum).
    pub quota_us: u64,
    /// The period, µs (1 ms ..= 1 s).
    pub period_us: u64,
}

/// The default period, as the kernel's.
pub const DEFAULT_PERIOD_US: u64 = 100_000;

impl QuotaSpec {
    /// Parses `10%` (of one core), `0.1` (a fraction of one core), or
    /// `QUOTA/PERIOD` with durations (`10ms/100ms`). Over 100 % means more than one core.
    pub fn parse(text: &str) -> Result<Self, QuotaError> {
        let t = text.trim();
        let bad = |why: QuotaProblem| QuotaError {
            text: text.to_string(),
            why,
        };
        let spec = if let Some((q, p)) = t.split_once('/') {
            let q =
                fencepost_api::parse_duration(q.trim()).map_err(|e| bad(QuotaProblem::Quota(e)))?;
            let p = fencepost_api::parse_duration(p.trim())
                .map_err(|e| bad(QuotaProblem::Period(e)))?;
            QuotaSpec {
                quota_us: q.as_micros() as u64,
                period_us: p.as_micros() as u64,
            }
        } else {
            let (num, scale) = match t.strip_suffix('%') {
                Some(n) => (n.trim(), 0.01),
                None => (t, 1.0),
            };
            let f: f64 = num.parse().map_err(|_| bad(QuotaProblem::Form))?;
            let frac = f * scale;
            if !frac.is_finite() || frac <= 0.0 {
                return Err(bad(QuotaProblem::NotPositive));
            }
            QuotaSpec {
                quota_us: (frac * DEFAULT_PERIOD_US as f64).round() as u64,
                period_us: DEFAULT_PERIOD_US,
            }
        };
        if !(1_000..=1_000_000).contains(&spec.period_us) {
            return Err(bad(QuotaProblem::PeriodRange));
        }
        if spec.quota_us < 1_000 {
            return Err(bad(QuotaProblem::BelowKernelMinimum));
        }
        if spec.quota_us > spec.period_us * 1024 {
            return Err(bad(QuotaProblem::TooManyCores));
        }
        Ok(spec)
    }

    /// The share of one core.
    pub fn fraction(&self) -> f64 {
        self.quota_us as f64 / self.period_us as f64
    }
}

impl std::fmt::Display for QuotaSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}us/{}us ({:.1}% of a core)",
            self.quota_us,
            self.period_us,
            self.fraction() * 100.0
        )
    }
}

/// A refused `--quota` value: the text and what is wrong with it.
#[derive(Debug, thiserror::Error)]
#[error("{text:?}: {why}")]
pub struct QuotaError {
    /// The text given.
    pub text: String,
    /// What is wrong with it.
    pub why: QuotaProblem,
}

/// What is wrong with a quota; each says what is accepted.
#[derive(Debug, thiserror::Error)]
pub enum QuotaProblem {
    /// Neither a percentage, a fraction nor `QUOTA/PERIOD`.
    #[error("expected 10%, 0.1 or 10ms/100ms")]
    Form,
    /// The quota half of `QUOTA/PERIOD` is not a duration.
    #[error("quota: {0}")]
    Quota(#[source] fencepost_api::duration::DurationParseError),
    /// The period half of `QUOTA/PERIOD` is not a duration.
    #[error("period: {0}")]
    Period(#[source] fencepost_api::duration::DurationParseError),
    /// Zero, negative or not finite.
    #[error("the quota must be above zero")]
    NotPositive,
    /// The period is outside what the kernel accepts.
    #[error("the period must be between 1ms and 1s")]
    PeriodRange,
    /// Less CPU time per period than the kernel accepts.
    #[error("the quota must be at least 1ms per period (kernel minimum)")]
    BelowKernelMinimum,
    /// More than 1024 cores' worth.
    #[error("more than 1024 cores")]
    TooManyCores,
}

/// Why no CPU cgroup could be set up.
#[derive(Debug, thiserror::Error)]
pub enum CgroupError {
    /// Neither a v2 hierarchy with the `cpu` controller nor a v1 `cpu` hierarchy is mounted.
    #[error(
        "no CPU cgroup hierarchy found: neither cgroup v2 with the cpu controller ({v2}) nor cgroup v1 cpu ({v1}) is mounted"
    )]
    NoHierarchy {
        /// Where v2 was looked for.
        v2: String,
        /// Where v1 was looked for.
        v1: String,
    },
    /// A cgroup file or directory could not be written (read-only mount, no privilege, …).
    #[error(
        "cannot write {path}: {error} — cgroups are not writable here (a read-only /sys/fs/cgroup in a container, or not root); \
         run on a host or VM as root, or in a container with a writable cgroup (e.g. --privileged or cgroupns=private with delegation)"
    )]
    NotWritable {
        /// The path.
        path: PathBuf,
        /// The OS error (in the message, so not also a `source()`).
        error: std::io::Error,
    },
}

/// Which interface a group uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CgroupVersion {
    /// `cpu.max`.
    V2,
    /// `cpu.cfs_quota_us` / `cpu.cfs_period_us`.
    V1,
}

/// A child cgroup with a CPU quota, removed on drop.
#[derive(Debug)]
pub struct CpuCgroup {
    /// The group's directory.
    dir: PathBuf,
    /// The parent's directory (survivors are moved back there).
    parent: PathBuf,
    /// v1 or v2.
    pub version: CgroupVersion,
}

fn write(path: &Path, text: &str) -> Result<(), CgroupError> {
    std::fs::write(path, text).map_err(|error| CgroupError::NotWritable {
        path: path.to_path_buf(),
        error,
    })
}

/// Where to look: a v2 hierarchy whose `cgroup.controllers` lists `cpu`, else v1's `cpu` hierarchy.
pub fn locate(root: &Path) -> Result<(PathBuf, CgroupVersion), CgroupError> {
    for v2 in [root.to_path_buf(), root.join("unified")] {
        let controllers =
            std::fs::read_to_string(v2.join("cgroup.controllers")).unwrap_or_default();
        if controllers.split_whitespace().any(|c| c == "cpu") {
            return Ok((v2, CgroupVersion::V2));
        }
    }
    for v1 in [root.join("cpu"), root.join("cpu,cpuacct")] {
        if v1.join("cpu.cfs_quota_us").exists() {
            return Ok((v1, CgroupVersion::V1));
        }
    }
    Err(CgroupError::NoHierarchy {
        v2: format!(
            "{0}/cgroup.controllers or {0}/unified/cgroup.controllers",
            root.display()
        ),
        v1: format!("{}/cpu/cpu.cfs_quota_us", root.display()),
    })
}

impl CpuCgroup {
    /// Creates `<hierarchy>/<name>` under `/sys/fs/cgroup` with `quota`.
    pub fn create(name: &str, quota: QuotaSpec) -> Result<Self, CgroupError> {
        Self::create_under(Path::new("/sys/fs/cgroup"), name, quota)
    }

    /// As [`create`](Self::create), under another root (tests).
    pub fn create_under(root: &Path, name: &str, quota: QuotaSpec) -> Result<Self, CgroupError> {
        let (parent, version) = locate(root)?;
        let dir = parent.join(name);
        if version == CgroupVersion::V2 {
            // The cpu controller must be enabled for the parent's children.
            let _ = std::fs::write(parent.join("cgroup.subtree_control"), "+cpu");
        }
        std::fs::create_dir(&dir)
            .or_else(|e| {
                if e.kind() == std::io::ErrorKind::AlreadyExists {
                    Ok(())
                } else {
                    Err(e)
                }
            })
            .map_err(|error| CgroupError::NotWritable {
                path: dir.clone(),
                error,
            })?;
        let group = CpuCgroup {
            dir,
            parent,
            version,
        };
        match version {
            CgroupVersion::V2 => write(
                &group.dir.join("cpu.max"),
                &format!("{} {}", quota.quota_us, quota.period_us),
            )?,
            CgroupVersion::V1 => {
                write(
                    &group.dir.join("cpu.cfs_period_us"),
                    &quota.period_us.to_string(),
                )?;
                write(
                    &group.dir.join("cpu.cfs_quota_us"),
                    &quota.quota_us.to_string(),
                )?;
            }
        }
        Ok(group)
    }

    /// The group's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Moves process `pid` (all its threads) into the group.
    pub fn add(&self, pid: u32) -> Result<(), CgroupError> {
        write(&self.dir.join("cgroup.procs"), &pid.to_string())
    }

    /// Throttling statistics (`nr_throttled`, `throttled_time`/`throttled_usec`), if readable.
    pub fn stat(&self) -> String {
        std::fs::read_to_string(self.dir.join("cpu.stat")).unwrap_or_default()
    }
}

impl Drop for CpuCgroup {
    fn drop(&mut self) {
        if let Ok(procs) = std::fs::read_to_string(self.dir.join("cgroup.procs")) {
            for pid in procs.split_whitespace() {
                let _ = std::fs::write(self.parent.join("cgroup.procs"), pid);
            }
        }
        let _ = std::fs::remove_dir(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quota_specs_parse_in_three_forms() {
        let ten = QuotaSpec {
            quota_us: 10_000,
            period_us: 100_000,
        };
        assert_eq!(QuotaSpec::parse("10%").unwrap(), ten);
        assert_eq!(QuotaSpec::parse("0.1").unwrap(), ten);
        assert_eq!(QuotaSpec::parse("10ms/100ms").unwrap(), ten);
        assert!(QuotaSpec::parse("0%").is_err());
        assert!(QuotaSpec::parse("0.5ms/100ms").is_err());
        assert!(QuotaSpec::parse("lots").is_err());
    }

    #[test]
    fn an_unwritable_cgroup_names_its_os_error_once_in_a_chain() {
        let e = CgroupError::NotWritable {
            path: "/sys/fs/cgroup/cpu/x/cgroup.procs".into(),
            error: std::io::Error::other("read-only file system"),
        };
        let chain = bench_core::error::Chain(&e).to_string();
        assert_eq!(chain, e.to_string());
        assert_eq!(chain.matches("read-only file system").count(), 1, "{chain}");
    }
}
