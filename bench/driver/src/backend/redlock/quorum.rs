//! Redlock's arithmetic as plain functions over values: the majority, the
//! clock-drift allowance, the validity of a round and the verdict on it, and
//! the margin floor that folds the allowance into the SDK's client deadline.
//! No I/O and no clock reads; the session passes the times it read from its
//! `Clock` (tests drive a fake one).
//!
//! - A round is granted iff at least `N/2 + 1` instances said yes and the
//!   validity `ttl − elapsed − drift` is still positive, with `elapsed`
//!   measured from `t_send` (just before the first request was written) to
//!   the last answer (or time-out), and `drift = ttl × 0.01 + 2 ms`.
//! - The client deadline of a granted round is
//!   `t_send + min(ttl × (1 − margin), ttl − drift)`: the SDK's
//!   `lease::client_deadline` with the margin raised to at least
//!   `drift / ttl` ([`margin_floor_ppm`], rounded up: never later than
//!   Redlock's own end of validity).

use std::time::Duration;

use fencepost_sdk::lease::PPM;

/// Redlock's clock-drift factor, in ppm of the TTL (0.01).
pub const DRIFT_FACTOR_PPM: u64 = 10_000;

/// The fixed part of the drift allowance (Redlock adds 2 ms for the
/// granularity of the servers' expiry).
pub const DRIFT_FIXED: Duration = Duration::from_millis(2);

/// The answers of one round over the instances.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Votes {
    /// Instances that did what was asked (set, extended, deleted).
    pub yes: usize,
    /// Instances that answered no (the key is someone else's, or absent).
    pub no: usize,
    /// Instances that did not answer within the per-instance timeout.
    pub timeouts: usize,
    /// Instances that failed (refused connection, an error reply).
    pub errors: usize,
}

impl Votes {
    /// How many instances the round went to.
    pub fn instances(&self) -> usize {
        self.yes + self.no + self.timeouts + self.errors
    }
}

/// What a round over `n` instances decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// A majority said yes with validity left: the lock is held (or extended).
    Granted {
        /// `ttl − elapsed − drift`: how long the lock is valid after the round.
        validity: Duration,
    },
    /// Fewer than a majority said yes.
    Minority,
    /// A majority said yes, but the round took so long that no validity is
    /// left (`elapsed + drift ≥ ttl`).
    Expired,
}

/// The quorum of `n` instances: `n / 2 + 1`.
pub fn majority(n: usize) -> usize {
    n / 2 + 1
}

/// Redlock's clock-drift allowance for `ttl`: `ttl × 0.01 + 2 ms`.
pub fn drift(ttl: Duration) -> Duration {
    ttl / 100 + DRIFT_FIXED
}

/// `ttl − elapsed − drift` when positive; `None` when nothing is left.
pub fn validity(ttl: Duration, elapsed: Duration) -> Option<Duration> {
    ttl.checked_sub(elapsed.saturating_add(drift(ttl)))
        .filter(|v| !v.is_zero())
}

/// The verdict on a round over `n` instances that got `yes` answers and
/// took `elapsed` from its send.
pub fn verdict(n: usize, yes: usize, ttl: Duration, elapsed: Duration) -> Verdict {
    if yes < majority(n) {
        return Verdict::Minority;
    }
    match validity(ttl, elapsed) {
        Some(validity) => Verdict::Granted { validity },
        None => Verdict::Expired,
    }
}

/// The smallest margin (ppm) whose client deadline is no later than
/// Redlock's end of validity: `drift / ttl`, rounded up (at most `PPM − 1`).
pub fn margin_floor_ppm(ttl: Duration) -> u64 {
    let ttl_ns = ttl.as_nanos().max(1);
    let ppm = (drift(ttl).as_nanos() * u128::from(PPM)).div_ceil(ttl_ns);
    u64::try_from(ppm).unwrap_or(PPM).min(PPM - 1)
}

/// The margin a Redlock deadline is computed with: the policy's `ppm`,
/// raised to [`margin_floor_ppm`]. `lease::client_deadline(send, ttl, this)`
/// is then `send + min(ttl × (1 − margin), ttl − drift)` (to the ns, rounded
/// earlier).
pub fn effective_margin_ppm(ttl: Duration, ppm: u64) -> u64 {
    ppm.max(margin_floor_ppm(ttl))
}

/// The TTL in whole milliseconds for `PX` (at least 1).
pub fn ttl_ms(ttl: Duration) -> u64 {
    u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX).max(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use fencepost_sdk::lease::{client_deadline, ppm_nearest};
    use fencepost_sdk::{Clock, FakeClock, MonoTime};

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn a_majority_is_more_than_half_of_the_instances() {
        assert_eq!(majority(1), 1);
        assert_eq!(majority(3), 2);
        assert_eq!(majority(4), 3);
        assert_eq!(majority(5), 3);
    }

    #[test]
    fn the_drift_allowance_is_one_percent_plus_two_ms() {
        assert_eq!(drift(Duration::from_secs(1)), 12 * MS);
        assert_eq!(drift(Duration::from_secs(10)), 102 * MS);
        assert_eq!(drift(Duration::ZERO), 2 * MS);
    }

    #[test]
    fn granted_with_a_majority_and_validity_left_on_the_fake_clock() {
        let clock = FakeClock::new(MonoTime::ZERO);
        let send = clock.now();
        clock.advance(30 * MS); // the slowest of the three answered after 30 ms
        let elapsed = clock.now().saturating_duration_since(send);
        let ttl = Duration::from_secs(1);
        assert_eq!(
            verdict(3, 2, ttl, elapsed),
            Verdict::Granted {
                validity: 958 * MS // 1000 − 30 − 12
            }
        );
        assert_eq!(verdict(5, 3, ttl, elapsed), verdict(3, 2, ttl, elapsed));
    }

    #[test]
    fn refused_with_a_minority_however_fast() {
        let ttl = Duration::from_secs(1);
        assert_eq!(verdict(3, 1, ttl, Duration::ZERO), Verdict::Minority);
        assert_eq!(verdict(5, 2, ttl, Duration::ZERO), Verdict::Minority);
        assert_eq!(verdict(3, 0, ttl, Duration::ZERO), Verdict::Minority);
    }

    #[test]
    fn refused_when_elapsed_plus_drift_reaches_the_ttl() {
        let clock = FakeClock::new(MonoTime::ZERO);
        let ttl = Duration::from_secs(1);
        let send = clock.now();
        clock.advance(987 * MS); // 987 + 12 = 999 < 1000: 1 ms left
        let elapsed = clock.now().saturating_duration_since(send);
        assert_eq!(
            verdict(3, 3, ttl, elapsed),
            Verdict::Granted { validity: MS }
        );
        clock.advance(MS); // 988 + 12 = 1000: nothing left
        let elapsed = clock.now().saturating_duration_since(send);
        assert_eq!(verdict(3, 3, ttl, elapsed), Verdict::Expired);
        assert_eq!(verdict(3, 3, ttl, 5 * ttl), Verdict::Expired);
    }

    #[test]
    fn the_margin_floor_keeps_the_deadline_within_redlocks_validity() {
        let ttl = Duration::from_secs(1);
        let send = MonoTime::from_nanos(0).saturating_add(5 * MS);
        // 12 ms of a 1 s TTL: 12 000 ppm.
        assert_eq!(margin_floor_ppm(ttl), 12_000);
        // A margin above the floor keeps the SDK's deadline.
        let m30 = effective_margin_ppm(ttl, ppm_nearest(0.30));
        assert_eq!(m30, 300_000);
        assert_eq!(
            client_deadline(send, 1_000, m30),
            send.saturating_add(700 * MS)
        );
        // A margin below it is raised: the deadline is send + ttl − drift.
        let m0 = effective_margin_ppm(ttl, 0);
        assert_eq!(
            client_deadline(send, 1_000, m0),
            send.saturating_add(988 * MS)
        );
        // Rounding up never lands after Redlock's end of validity (a TTL
        // under the allowance has none: every round is refused).
        for ttl_ms in [3u64, 7, 333, 1_001, 29_999] {
            let ttl = Duration::from_millis(ttl_ms);
            let d = client_deadline(send, ttl_ms, effective_margin_ppm(ttl, 0));
            let end = send.saturating_add(ttl).saturating_sub(drift(ttl).min(ttl));
            assert!(d <= end, "ttl {ttl_ms} ms: {d:?} after {end:?}");
        }
    }

    #[test]
    fn px_takes_whole_milliseconds_at_least_one() {
        assert_eq!(ttl_ms(Duration::from_micros(1_500)), 1);
        assert_eq!(ttl_ms(Duration::ZERO), 1);
        assert_eq!(ttl_ms(Duration::from_secs(2)), 2_000);
    }

    #[test]
    fn votes_count_every_instance_once() {
        let v = Votes {
            yes: 2,
            no: 1,
            timeouts: 1,
            errors: 1,
        };
        assert_eq!(v.instances(), 5);
    }
}
