//! The SDK's view of time: the [`Clock`] seam from `fencepost-api`, the
//! production clock [`BootTimeClock`] (`CLOCK_BOOTTIME`), and [`TokioClock`],
//! a monotonic clock read from tokio's timer clock.
//!
//! This is the only module of the SDK that reads an `Instant` or a system
//! clock directly (a test scans the sources to keep it so). Everything else
//! reads time through an `Arc<dyn Clock>`, and sleeps only on tokio timers.
//!
//! Why `CLOCK_BOOTTIME` in production: `CLOCK_MONOTONIC` (what `Instant`
//! reads on Linux) stops while the host is suspended. A client deadline is a
//! promise about the *server's* clock, which keeps running while this host
//! sleeps; after a resume a `CLOCK_MONOTONIC` deadline would still look
//! ahead for a grant the server has long expired and reassigned.
//! `CLOCK_BOOTTIME` is the same clock plus the time spent suspended, so it
//! errs safe: after a resume every deadline the suspension outlasted has
//! passed. It is just as monotonic and is read through the vDSO like
//! `CLOCK_MONOTONIC` (the criterion bench `check_still_held` compares them).
//! Where it is unavailable (not Linux/Android, or a kernel that refuses it)
//! [`BootTimeClock`] falls back to `CLOCK_MONOTONIC` and logs a warning.
//!
//! Why a second production-grade clock: under `tokio::time::pause()` the
//! runtime's timers run on virtual time. [`TokioClock`] reads that same
//! virtual time, so a test that advances it moves the heartbeat's timers and
//! the client deadlines together. Outside a paused runtime it is
//! `CLOCK_MONOTONIC`, exactly like [`MonotonicClock`].

pub use fencepost_api::clock::{Clock, FakeClock, MonoTime, MonotonicClock};

/// The SDK's production clock: `CLOCK_BOOTTIME`, counted from the clock's
/// creation, so it keeps counting while the host is suspended (see the module
/// docs for why that errs safe). Falls back to `CLOCK_MONOTONIC` (exactly
/// [`MonotonicClock`]) with a logged warning where `CLOCK_BOOTTIME` cannot be
/// read. The default clock of [`LockClientConfig`](crate::LockClientConfig).
#[derive(Clone, Copy, Debug)]
pub struct BootTimeClock {
    /// Where the readings come from.
    source: BootSource,
}

/// The source behind a [`BootTimeClock`].
#[derive(Clone, Copy, Debug)]
enum BootSource {
    /// `CLOCK_BOOTTIME`; the field is the reading (ns) that counts as zero.
    BootTime(u64),
    /// The fallback, `CLOCK_MONOTONIC` through `Instant`, from this origin.
    Monotonic(std::time::Instant),
}

impl BootTimeClock {
    /// A clock whose origin is now; `CLOCK_BOOTTIME` when the platform has
    /// it, else `CLOCK_MONOTONIC` after a `tracing` warning.
    pub fn new() -> Self {
        match boottime_nanos() {
            Ok(origin) => BootTimeClock {
                source: BootSource::BootTime(origin),
            },
            Err(why) => {
                tracing::warn!(
                    error = %why,
                    "CLOCK_BOOTTIME unavailable; the SDK falls back to CLOCK_MONOTONIC, \
                     which stops while the host is suspended: after a resume a client \
                     deadline can look ahead for a grant the server has expired"
                );
                BootTimeClock::monotonic_fallback()
            }
        }
    }

    /// The fallback where `CLOCK_BOOTTIME` is refused: `CLOCK_MONOTONIC`,
    /// its origin now.
    fn monotonic_fallback() -> Self {
        BootTimeClock {
            source: BootSource::Monotonic(std::time::Instant::now()),
        }
    }

    /// Whether readings come from `CLOCK_BOOTTIME` (false: the fallback).
    pub fn is_boottime(&self) -> bool {
        matches!(self.source, BootSource::BootTime(_))
    }
}

impl Default for BootTimeClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for BootTimeClock {
    /// One `clock_gettime` (vDSO, no allocation). A read that fails after the
    /// clock was created (it cannot on Linux: the id was accepted once) reads
    /// as [`MonoTime::MAX`], at which every deadline has passed: it errs safe.
    #[inline]
    fn now(&self) -> MonoTime {
        match self.source {
            BootSource::BootTime(origin) => match boottime_nanos() {
                Ok(n) => MonoTime::from_nanos(n.saturating_sub(origin)),
                Err(_) => MonoTime::MAX,
            },
            BootSource::Monotonic(origin) => {
                MonoTime::from_nanos(u64::try_from(origin.elapsed().as_nanos()).unwrap_or(u64::MAX))
            }
        }
    }
}

/// Why `CLOCK_BOOTTIME` could not be read.
#[derive(Clone, Copy, Debug, thiserror::Error)]
enum BootTimeUnavailable {
    /// The kernel refused the clock id.
    #[cfg(any(target_os = "linux", target_os = "android"))]
    #[error("clock_gettime(CLOCK_BOOTTIME) failed: {0}")]
    Refused(nix::errno::Errno),
    /// This platform has no `CLOCK_BOOTTIME`.
    #[cfg(not(any(target_os = "linux", target_os = "android")))]
    #[error("this platform has no CLOCK_BOOTTIME")]
    Unsupported,
}

/// `CLOCK_BOOTTIME` in nanoseconds since boot.
#[cfg(any(target_os = "linux", target_os = "android"))]
#[inline]
fn boottime_nanos() -> Result<u64, BootTimeUnavailable> {
    use nix::time::{ClockId, clock_gettime};
    let ts = clock_gettime(ClockId::CLOCK_BOOTTIME).map_err(BootTimeUnavailable::Refused)?;
    // Both fields are non-negative for this clock; u64 ns cover 584 years of uptime.
    let secs = u64::try_from(ts.tv_sec()).unwrap_or(0);
    let nanos = u64::try_from(ts.tv_nsec()).unwrap_or(0);
    Ok(secs.saturating_mul(1_000_000_000).saturating_add(nanos))
}

/// `CLOCK_BOOTTIME` in nanoseconds since boot.
#[cfg(not(any(target_os = "linux", target_os = "android")))]
fn boottime_nanos() -> Result<u64, BootTimeUnavailable> {
    Err(BootTimeUnavailable::Unsupported)
}

/// A monotonic clock backed by `tokio::time::Instant`, counted from its creation.
///
/// Create it inside the runtime whose time it should follow (for a paused test
/// runtime, after the pause).
#[derive(Clone, Copy, Debug)]
pub struct TokioClock {
    /// The instant that reads as [`MonoTime::ZERO`].
    origin: tokio::time::Instant,
}

impl TokioClock {
    /// A clock whose origin is now (tokio's now: virtual when time is paused).
    pub fn new() -> Self {
        TokioClock {
            origin: tokio::time::Instant::now(),
        }
    }
}

impl Default for TokioClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for TokioClock {
    #[inline]
    fn now(&self) -> MonoTime {
        let elapsed = tokio::time::Instant::now().saturating_duration_since(self.origin);
        // u64 nanoseconds cover 584 years of uptime.
        MonoTime::from_nanos(u64::try_from(elapsed.as_nanos()).unwrap_or(u64::MAX))
    }
}

/// tokio's current instant, for computing timer deadlines (`sleep_until`).
/// Never used for an expiry decision: those go through a [`Clock`].
pub(crate) fn timer_now() -> tokio::time::Instant {
    tokio::time::Instant::now()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn boottime_clock_reads_boottime_here_and_does_not_go_backwards() {
        let c = BootTimeClock::new();
        assert!(c.is_boottime(), "this Linux host has CLOCK_BOOTTIME");
        let a = c.now();
        let b = c.now();
        assert!(b >= a);
        assert!(a < MonoTime::MAX);
        // BOOTTIME = MONOTONIC + time suspended: over an interval that
        // encloses a MONOTONIC interval (read before it, and after), it has
        // advanced at least as much.
        let mono = MonotonicClock::new();
        let b0 = c.now();
        let m0 = mono.now();
        let spin_until = m0.saturating_add(Duration::from_millis(1));
        while !mono.now().has_reached(spin_until) {}
        let m1 = mono.now();
        let b1 = c.now();
        assert!(b1.saturating_duration_since(b0) >= m1.saturating_duration_since(m0));
    }

    #[test]
    fn the_monotonic_fallback_says_so_and_counts_from_its_origin() {
        // What `new` builds where CLOCK_BOOTTIME is refused.
        let c = BootTimeClock::monotonic_fallback();
        assert!(!c.is_boottime());
        // Over an interval that encloses a millisecond of CLOCK_MONOTONIC
        // (read before it, and after), it advances at least as much.
        let mono = MonotonicClock::new();
        let a = c.now();
        let m0 = mono.now();
        let spin_until = m0.saturating_add(Duration::from_millis(1));
        while !mono.now().has_reached(spin_until) {}
        let m1 = mono.now();
        let b = c.now();
        assert!(b.saturating_duration_since(a) >= m1.saturating_duration_since(m0));
        assert!(b < MonoTime::MAX);
    }

    #[tokio::test(start_paused = true)]
    async fn tokio_clock_follows_paused_virtual_time() {
        let c = TokioClock::new();
        let a = c.now();
        tokio::time::advance(Duration::from_secs(5)).await;
        assert_eq!(c.now().saturating_duration_since(a), Duration::from_secs(5));
    }
}
