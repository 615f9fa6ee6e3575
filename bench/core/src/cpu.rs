//! CPU seconds of a process from `/proc` (docs/measurement.md, "CPU
//! accounting": every process of a cell is counted): `utime + stime` of `/proc/PID/stat`
//! (every thread of the process, in clock ticks) over `sysconf(CLK_TCK)`.
//! A cell reads the bench itself (`/proc/self`), the lock-server and the
//! rail-stub at both ends of its measured window ([`CpuMark`]); the workers'
//! processes of an experiment read themselves.

/// `utime + stime` of a process, in seconds; `None` when `/proc` cannot be read
/// (the process is gone, or not Linux).
pub fn cpu_seconds(pid: Option<i32>) -> Option<f64> {
    let path = match pid {
        Some(p) => format!("/proc/{p}/stat"),
        None => "/proc/self/stat".to_owned(),
    };
    let ticks = parse_stat_ticks(&std::fs::read_to_string(path).ok()?)?;
    Some(ticks as f64 / clock_ticks_per_s())
}

/// The peak resident set size of process `pid` so far (`VmHWM` of
/// `/proc/PID/status`), in KiB; `None` when it cannot be read.
pub fn peak_rss_kb(pid: i32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    parse_vm_hwm_kb(&status)
}

/// The resident set size of process `pid` now (`VmRSS` of
/// `/proc/PID/status`), in KiB; `None` when it cannot be read.
pub fn rss_kb(pid: i32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    parse_status_kb(&status, "VmRSS:")
}

/// The `VmHWM:` line of a `/proc/PID/status` text, in KiB.
pub fn parse_vm_hwm_kb(status: &str) -> Option<u64> {
    parse_status_kb(status, "VmHWM:")
}

/// The `field` line (`VmRSS:`, `VmHWM:`) of a `/proc/PID/status` text, in KiB.
pub fn parse_status_kb(status: &str, field: &str) -> Option<u64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

/// Clock ticks per second of `/proc`'s times (`sysconf(_SC_CLK_TCK)`, 100 on Linux).
fn clock_ticks_per_s() -> f64 {
    use nix::unistd::{SysconfVar, sysconf};
    match sysconf(SysconfVar::CLK_TCK) {
        Ok(Some(t)) if t > 0 => t as f64,
        _ => 100.0,
    }
}

/// `utime + stime` (fields 14 and 15) of a `/proc/PID/stat` line. The command
/// name (field 2) is in parentheses and may itself hold spaces and `)`, so the
/// fields are counted from the *last* `)`.
pub fn parse_stat_ticks(stat: &str) -> Option<u64> {
    let rest = stat.rsplit_once(')')?.1;
    // rest starts at field 3 (state): utime is field 14 → index 11.
    let mut fields = rest.split_whitespace().skip(11);
    let utime: u64 = fields.next()?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some(utime + stime)
}

/// The CPU seconds of the bench and of the stack's services at one instant.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct CpuMark {
    /// This process.
    pub bench_s: Option<f64>,
    /// The lock-server (process runtime only).
    pub lock_server_s: Option<f64>,
    /// The rail-stub (process runtime only).
    pub rail_stub_s: Option<f64>,
}

impl CpuMark {
    /// Reads this process and, when the services are local processes, their pids
    /// `(lock-server, rail-stub)`.
    pub fn now(pids: Option<(i32, i32)>) -> Self {
        CpuMark {
            bench_s: cpu_seconds(None),
            lock_server_s: pids.and_then(|(l, _)| cpu_seconds(Some(l))),
            rail_stub_s: pids.and_then(|(_, r)| cpu_seconds(Some(r))),
        }
    }

    /// The CPU seconds spent from `earlier` to `self`, per process; NaN where
    /// either end could not be read (a docker or external runtime's services).
    pub fn since(&self, earlier: &CpuMark) -> CpuUse {
        let d = |a: Option<f64>, b: Option<f64>| match (a, b) {
            (Some(a), Some(b)) => (a - b).max(0.0),
            _ => f64::NAN,
        };
        CpuUse {
            bench_s: d(self.bench_s, earlier.bench_s),
            lock_server_s: d(self.lock_server_s, earlier.lock_server_s),
            rail_stub_s: d(self.rail_stub_s, earlier.rail_stub_s),
        }
    }
}

/// CPU seconds per process over a measured window (NaN: not measurable here).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CpuUse {
    /// The bench process (its in-process workers included).
    pub bench_s: f64,
    /// The lock-server.
    pub lock_server_s: f64,
    /// The rail-stub.
    pub rail_stub_s: f64,
}

impl Default for CpuUse {
    fn default() -> Self {
        CpuUse {
            bench_s: f64::NAN,
            lock_server_s: f64::NAN,
            rail_stub_s: f64::NAN,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_peak_rss_is_read_from_vm_hwm_and_this_process_has_one() {
        let status =
            "Name:\tlock-server\nVmPeak:\t  10000 kB\nVmHWM:\t    5120 kB\nVmRSS:\t 4000 kB\n";
        assert_eq!(parse_vm_hwm_kb(status), Some(5120));
        assert_eq!(parse_vm_hwm_kb("Name: x\n"), None);
        assert!(peak_rss_kb(std::process::id() as i32).is_some_and(|kb| kb > 0));
        assert_eq!(parse_status_kb(status, "VmRSS:"), Some(4000));
        assert!(rss_kb(std::process::id() as i32).is_some_and(|kb| kb > 0));
    }

    #[test]
    fn utime_and_stime_are_counted_from_the_last_parenthesis() {
        // A command name with a space and a ')' in it, as the kernel prints it.
        let line = "4242 (we ird) name) S 1 4242 4242 0 -1 4194560 100 0 0 0 \
                    250 37 0 0 20 0 3 0 12345 1000000 200 18446744073709551615";
        assert_eq!(parse_stat_ticks(line), Some(287));
        assert_eq!(parse_stat_ticks("garbage"), None);
    }

    #[test]
    fn this_process_uses_some_cpu_and_a_window_never_goes_negative() {
        let a = CpuMark::now(None);
        // /proc counts in clock ticks (10 ms): burn CPU until the process has
        // used at least one, in bounded chunks (a young test process may not).
        let mut x = 0u64;
        let mut b = CpuMark::now(None);
        for _chunk in 0..10_000 {
            if b.bench_s.is_some_and(|s| s > 0.0) {
                break;
            }
            for i in 0..2_000_000u64 {
                x = x.wrapping_mul(31).wrapping_add(i);
            }
            std::hint::black_box(x);
            b = CpuMark::now(None);
        }
        let used = b.since(&a);
        assert!(used.bench_s >= 0.0, "{used:?}");
        assert!(
            used.lock_server_s.is_nan(),
            "no lock-server pid: not measured"
        );
        assert!(b.bench_s.is_some_and(|s| s > 0.0));
    }
}
