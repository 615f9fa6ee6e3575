//! The vocabulary of `bench peer --sessions` (the performance targets'
//! live-sessions dimension): the keep-alive schedule every session or lease follows, and
//! what one measured window of N live sessions counted. The driver produces
//! a [`SessionsSample`], the analysis turns it into a `peer_sessions.csv` row.
//!
//! The schedule is the SDK's (`sdk/`, C3): a heartbeat every
//! `ttl × (1 − margin) / 3`. Session `i` of `n` is on its own phase,
//! `i × period / n`, so the n sessions' heartbeats are spread evenly over
//! each period, as a fleet of independent clients' would be.

use std::time::Duration;

use hdrhistogram::Histogram;

/// The SDK's heartbeat period for a session TTL and a safety margin:
/// `ttl × (1 − margin) / 3`.
pub fn heartbeat_period(ttl: Duration, margin: f64) -> Duration {
    ttl.mul_f64((1.0 - margin).max(0.0) / 3.0)
}

/// The phase of session `i` of `n` within one period: `i × period / n`.
pub fn phase(i: usize, n: usize, period: Duration) -> Duration {
    if n == 0 {
        return Duration::ZERO;
    }
    let nanos = period.as_nanos() * i as u128 / n as u128;
    Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
}

/// What one measured window of N live sessions counted. Every tick of the
/// schedule that fell due in the window is exactly one of: answered
/// (`ok`), failed (`errors`), timed out (`timeouts`), or superseded by a
/// later tick of the same session before it was sent (`missed`: the driver
/// fell more than a period behind that session). So `scheduled = ok +
/// errors + timeouts + missed`.
#[derive(Clone, Debug)]
pub struct SessionsSample {
    /// Ticks that fell due in the window.
    pub scheduled: u64,
    /// Ticks answered with success.
    pub ok: u64,
    /// Ticks whose exchange failed (a refusal, a transport error).
    pub errors: u64,
    /// Ticks whose exchange was given up at the timeout.
    pub timeouts: u64,
    /// Ticks that sent nothing of their own (a later tick of the same
    /// session was already due when the driver got to it).
    pub missed: u64,
    /// Sessions (leases) that could not be opened (granted).
    pub open_failed: u64,
    /// Whether an open failed because the process ran out of file descriptors.
    pub fd_exhausted: bool,
    /// The measured window, s.
    pub seconds: f64,
    /// Send → reply of every answered exchange, and the timeout of every
    /// timed-out one (a lower bound), µs.
    pub raw: Histogram<u64>,
    /// Scheduled send → reply (or give-up), one sample per tick that was
    /// answered, timed out or superseded, µs (coordinated omission corrected).
    pub corrected: Histogram<u64>,
    /// The first error seen (set-up and warm-up included), for the log.
    pub first_error: Option<String>,
}

impl SessionsSample {
    /// An empty sample (nothing counted yet).
    pub fn empty() -> Self {
        SessionsSample {
            scheduled: 0,
            ok: 0,
            errors: 0,
            timeouts: 0,
            missed: 0,
            open_failed: 0,
            fd_exhausted: false,
            seconds: 0.0,
            raw: crate::hist::new_histogram(),
            corrected: crate::hist::new_histogram(),
            first_error: None,
        }
    }

    /// Adds another lane's counts and histograms into this one.
    pub fn merge(&mut self, other: &SessionsSample) -> Result<(), hdrhistogram::AdditionError> {
        self.scheduled += other.scheduled;
        self.ok += other.ok;
        self.errors += other.errors;
        self.timeouts += other.timeouts;
        self.missed += other.missed;
        self.open_failed += other.open_failed;
        self.fd_exhausted |= other.fd_exhausted;
        self.raw.add(&other.raw)?;
        self.corrected.add(&other.corrected)?;
        if self.first_error.is_none() {
            self.first_error.clone_from(&other.first_error);
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_period_is_the_sdks_schedule_and_phases_spread_over_one_period() {
        // 15 s at a 0.30 margin: 15 × 0.7 / 3 = 3.5 s, as the SDK heartbeats.
        let p = heartbeat_period(Duration::from_secs(15), 0.30);
        assert_eq!(p, Duration::from_millis(3500));
        assert_eq!(phase(0, 4, p), Duration::ZERO);
        assert_eq!(phase(1, 4, p), Duration::from_millis(875));
        assert_eq!(phase(3, 4, p), Duration::from_millis(2625));
        // Every phase is inside the period, even for a large fleet.
        let n = 100_000;
        assert!(phase(n - 1, n, p) < p);
        assert_eq!(phase(0, 0, p), Duration::ZERO);
    }

    #[test]
    fn merging_lanes_adds_every_count_and_keeps_the_first_error() {
        let mut a = SessionsSample::empty();
        a.scheduled = 10;
        a.ok = 9;
        a.missed = 1;
        a.corrected.record(100).unwrap();
        let mut b = SessionsSample::empty();
        b.scheduled = 5;
        b.timeouts = 5;
        b.open_failed = 2;
        b.fd_exhausted = true;
        b.first_error = Some("no reply".into());
        b.raw.record(3_500_000).unwrap();
        a.merge(&b).unwrap();
        assert_eq!(
            (a.scheduled, a.ok, a.timeouts, a.missed, a.open_failed),
            (15, 9, 5, 1, 2)
        );
        assert!(a.fd_exhausted);
        assert_eq!(a.first_error.as_deref(), Some("no reply"));
        assert_eq!((a.raw.len(), a.corrected.len()), (1, 1));
    }
}
