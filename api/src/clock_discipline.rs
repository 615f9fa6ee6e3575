//! What the kernel's clock discipline says about this host's clock: the one
//! system call in this crate. The lease-safety essay's grace term `θ_max`
//! (`lock.clock.offset-max`) is a configured bound on clock offset; the NTP
//! kernel interface (`adjtimex(2)` with `modes = 0`, a read that needs no
//! privilege) reports the synchronisation daemon's own estimate of it:
//!
//! - `maxerror`: the maximum error bound, µs. The kernel grows it by 500 ppm
//!   of elapsed time until the daemon (chrony, ntpd, systemd-timesyncd)
//!   resets it; past 16 s it sets the clock unsynchronised;
//! - `esterror`: the estimated error, µs;
//! - `STA_UNSYNC` in the status, or the `TIME_ERROR` return: no daemon is
//!   disciplining the clock, and `maxerror` bounds nothing.
//!
//! "Observed maxerror > lock.clock.offset-max" is the essay's clock check: the
//! configured `θ_max` is then not a bound the host can vouch for.

use std::time::Duration;

/// `STA_UNSYNC` in `timex.status` (`<linux/timex.h>`): the clock is unsynchronised.
const STA_UNSYNC: i32 = 0x0040;
/// `TIME_ERROR`, adjtimex's return for an unsynchronised clock.
const TIME_ERROR: i32 = 5;

/// One reading of the kernel's clock-discipline state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClockDiscipline {
    /// The maximum error bound (`timex.maxerror`).
    pub max_error: Duration,
    /// The estimated error (`timex.esterror`).
    pub est_error: Duration,
    /// False when the kernel flags the clock unsynchronised (`STA_UNSYNC` or
    /// a `TIME_ERROR` state): then `max_error` bounds nothing.
    pub synchronised: bool,
}

impl ClockDiscipline {
    /// Whether this reading vouches for `offset_max`: synchronised, with a
    /// maximum error within it.
    pub fn within(&self, offset_max: Duration) -> bool {
        self.synchronised && self.max_error <= offset_max
    }
}

/// Why the clock discipline could not be read.
#[derive(Debug, thiserror::Error)]
pub enum ClockDisciplineError {
    /// adjtimex(2) failed (e.g. denied by a seccomp profile).
    #[error("adjtimex(2) failed: {0}")]
    Syscall(std::io::Error),
    /// Not a Linux host: there is no adjtimex.
    #[error("the kernel clock discipline (adjtimex) is only read on Linux")]
    Unsupported,
}

/// Reads the kernel's clock-discipline estimate (`adjtimex` with `modes = 0`).
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
pub fn read() -> Result<ClockDiscipline, ClockDisciplineError> {
    // SAFETY: `timex` is a plain C struct for which all-zero is a valid value
    // (modes = 0 makes the call a read), and adjtimex only writes into the
    // struct we own for the duration of the call.
    let mut tx: libc::timex = unsafe { std::mem::zeroed() };
    let state = unsafe { libc::adjtimex(&mut tx) };
    if state < 0 {
        return Err(ClockDisciplineError::Syscall(
            std::io::Error::last_os_error(),
        ));
    }
    let us = |v: libc::c_long| Duration::from_micros(u64::try_from(v).unwrap_or(0));
    Ok(ClockDiscipline {
        max_error: us(tx.maxerror),
        est_error: us(tx.esterror),
        synchronised: state != TIME_ERROR && tx.status & STA_UNSYNC == 0,
    })
}

/// Reads the kernel's clock-discipline estimate: not on this OS.
#[cfg(not(target_os = "linux"))]
pub fn read() -> Result<ClockDiscipline, ClockDisciplineError> {
    Err(ClockDisciplineError::Unsupported)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    #[cfg(target_os = "linux")]
    fn reads_this_hosts_discipline() {
        let d = read().expect("adjtimex with modes = 0 needs no privilege");
        // The kernel caps maxerror at 16 s (NTP_PHASE_LIMIT ≈ 16 s).
        assert!(d.max_error <= Duration::from_secs(17), "{d:?}");
        assert!(d.est_error <= Duration::from_secs(17), "{d:?}");
    }

    #[test]
    fn within_needs_synchronised_and_a_bound_inside_the_offset_max() {
        let ms = Duration::from_millis;
        let d = ClockDiscipline {
            max_error: ms(20),
            est_error: ms(1),
            synchronised: true,
        };
        assert!(d.within(ms(50)));
        assert!(!d.within(ms(10)));
        assert!(
            !ClockDiscipline {
                synchronised: false,
                ..d
            }
            .within(ms(50))
        );
    }
}
