//! The SDK's view of time: the [`Clock`] seam from `fencepost-api`, plus
//! [`TokioClock`], a monotonic clock read from tokio's timer clock.
//!
//! This is the only module of the SDK that reads an `Instant` directly (a test
//! scans the sources to keep it so). Everything else reads time through an
//! `Arc<dyn Clock>`, and sleeps only on tokio timers.
//!
//! Why a second production-grade clock: under `tokio::time::pause()` the
//! runtime's timers run on virtual time. [`TokioClock`] reads that same
//! virtual time, so a test that advances it moves the heartbeat's timers and
//! the client deadlines together. Outside a paused runtime it is
//! `CLOCK_MONOTONIC`, exactly like [`MonotonicClock`].

pub use fencepost_api::clock::{Clock, FakeClock, MonoTime, MonotonicClock};

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

    #[tokio::test(start_paused = true)]
    async fn tokio_clock_follows_paused_virtual_time() {
        let c = TokioClock::new();
        let a = c.now();
        tokio::time::advance(Duration::from_secs(5)).await;
        assert_eq!(c.now().saturating_duration_since(a), Duration::from_secs(5));
    }
}
