//! CPU seconds (user + system) of a process, from `/proc/PID/stat`, so a
//! measurement can say how much of the machine each process used: on a
//! shared 2-core box a driver that saturates a core measures itself
//! (MEASUREMENT.md). Linux only; elsewhere every reading is `None`.

/// The kernel's clock ticks per second (`sysconf(_SC_CLK_TCK)`, 100 on Linux).
fn ticks_per_s() -> f64 {
    use nix::unistd::{SysconfVar, sysconf};
    match sysconf(SysconfVar::CLK_TCK) {
        Ok(Some(t)) if t > 0 => t as f64,
        _ => 100.0,
    }
}

/// `utime + stime` in seconds from the text of a `/proc/PID/stat` line
/// (fields 14 and 15; the command name in parentheses may hold spaces).
pub fn parse_stat_cpu_s(stat: &str) -> Option<f64> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // After the name: state is field 3, so utime (14) and stime (15) are at 11 and 12.
    let utime: u64 = fields.get(11)?.parse().ok()?;
    let stime: u64 = fields.get(12)?.parse().ok()?;
    Some((utime + stime) as f64 / ticks_per_s())
}

/// CPU seconds used so far by process `pid` (all its threads), if readable.
pub fn cpu_seconds(pid: i32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat_cpu_s(&stat)
}

/// CPU seconds used so far by this process.
pub fn self_cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    parse_stat_cpu_s(&stat)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_read_after_a_name_with_spaces_and_parens() {
        // pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt utime stime ...
        let line = "4242 (etcd (x) y) S 1 4242 4242 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 12 0";
        let s = parse_stat_cpu_s(line).unwrap();
        assert!((s - 300.0 / ticks_per_s()).abs() < 1e-9, "{s}");
        assert_eq!(parse_stat_cpu_s("garbage"), None);
    }

    #[test]
    fn this_process_has_a_cpu_reading_that_does_not_go_backwards() {
        let a = self_cpu_seconds().expect("/proc/self/stat is readable on Linux");
        let mut x = 0u64;
        for i in 0..2_000_000u64 {
            x = x.wrapping_mul(31).wrapping_add(i);
        }
        std::hint::black_box(x);
        let b = self_cpu_seconds().unwrap();
        assert!(b >= a);
        assert!(cpu_seconds(std::process::id() as i32).is_some());
    }
}
