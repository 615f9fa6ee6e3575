//! ADR-006's arithmetic as plain functions over values: the margin, the client
//! deadline and the heartbeat period. No I/O, no clock reads; the session and
//! the heartbeat task call these with the times they read.
//!
//! Margins are carried as integer parts per million so that the deadline is
//! exact integer arithmetic: `deadline = send + granted_ns × (1e6 − ppm) / 1e6`,
//! rounded down to the nanosecond (the safe direction). A fixed margin given as
//! a decimal (0.30) is quantised to the nearest ppm; a computed (adaptive)
//! margin is rounded up to the next ppm, again the safe direction.

use std::time::Duration;

use crate::clock::MonoTime;

/// One million: the ppm denominator.
pub const PPM: u64 = 1_000_000;

/// RTT samples the adaptive margin needs before it trusts the observed p99;
/// with fewer it uses its `ceiling` (warm-up).
pub const ADAPTIVE_WARMUP_SAMPLES: u64 = 20;

/// The heartbeat divisor of T-040 §4: period = base × (1 − margin) / 3, so two
/// consecutive lost heartbeats can be tolerated before the client deadline.
pub const HEARTBEAT_DIVISOR: u32 = 3;

/// The shortest heartbeat period the task will use, whatever the TTLs.
pub const MIN_HEARTBEAT_PERIOD: Duration = Duration::from_millis(1);

/// What the adaptive margin knows of the observed heartbeat RTT.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RttSummary {
    /// How many L2/L5 RTTs were recorded since the last reset.
    pub samples: u64,
    /// Their 99th percentile, in microseconds.
    pub p99_us: u64,
}

/// A fixed margin in `[0, 1)` as ppm, rounded to the nearest ppm.
pub fn ppm_nearest(margin: f64) -> u64 {
    ((margin * PPM as f64).round() as u64).min(PPM - 1)
}

/// A computed margin in `[0, 1)` as ppm, rounded up (more margin is safer).
pub fn ppm_ceil(margin: f64) -> u64 {
    ((margin * PPM as f64).ceil() as u64).min(PPM - 1)
}

/// The adaptive rule: `clamp(k × p99_rtt / lease, floor, ceiling)`, or
/// `ceiling` while fewer than [`ADAPTIVE_WARMUP_SAMPLES`] RTTs are known.
/// Returns the margin as a fraction.
pub fn adaptive_margin(k: f64, floor: f64, ceiling: f64, lease: Duration, rtt: RttSummary) -> f64 {
    if rtt.samples < ADAPTIVE_WARMUP_SAMPLES || lease.is_zero() {
        return ceiling;
    }
    let raw = k * (rtt.p99_us as f64 * 1e-6) / lease.as_secs_f64();
    raw.clamp(floor, ceiling)
}

/// The usable part of a grant: `granted × (1 − ppm/1e6)`, floored to the ns.
pub fn usable(granted: Duration, margin_ppm: u64) -> Duration {
    let keep = u128::from(PPM - margin_ppm.min(PPM));
    let nanos = granted.as_nanos() * keep / u128::from(PPM);
    Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
}

/// The client deadline of a grant (D1): `send + granted × (1 − margin)`.
/// `send` must be the clock reading taken immediately before the request was
/// written (D2) and `granted_ms` the TTL in the reply, never the one requested.
pub fn client_deadline(send: MonoTime, granted_ms: u64, margin_ppm: u64) -> MonoTime {
    send.saturating_add(usable(Duration::from_millis(granted_ms), margin_ppm))
}

/// The heartbeat period: `min(session_ttl, shortest live lease) × (1 − margin) / 3`,
/// at least [`MIN_HEARTBEAT_PERIOD`].
pub fn heartbeat_period(
    session_ttl_ms: u64,
    shortest_lease_ms: Option<u64>,
    margin_ppm: u64,
) -> Duration {
    let base = shortest_lease_ms.map_or(session_ttl_ms, |l| l.min(session_ttl_ms));
    let period = usable(Duration::from_millis(base), margin_ppm) / HEARTBEAT_DIVISOR;
    period.max(MIN_HEARTBEAT_PERIOD)
}

/// Time left before `deadline` at `now`; zero once it is reached.
pub fn remaining(now: MonoTime, deadline: MonoTime) -> Duration {
    deadline.saturating_duration_since(now)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn deadline_is_send_plus_seventy_percent_of_granted_exactly() {
        let send = MonoTime::from_nanos(1_000 * MS);
        let d = client_deadline(send, 10_000, ppm_nearest(0.30));
        assert_eq!(d, MonoTime::from_nanos(1_000 * MS + 7_000 * MS));
    }

    #[test]
    fn fixed_margins_quantise_to_the_nearest_ppm() {
        assert_eq!(ppm_nearest(0.30), 300_000);
        assert_eq!(ppm_nearest(0.1), 100_000);
        assert_eq!(ppm_nearest(0.0), 0);
        assert_eq!(ppm_ceil(0.000_000_1), 1);
    }

    #[test]
    fn usable_rounds_down_never_up() {
        // 1 ns × 0.7 = 0.7 ns -> 0 ns.
        assert_eq!(usable(Duration::from_nanos(1), 300_000), Duration::ZERO);
        assert_eq!(usable(Duration::from_secs(1), 0), Duration::from_secs(1));
    }

    #[test]
    fn period_uses_the_shorter_of_session_ttl_and_lease() {
        // 15 s session, no lease: 15 × 0.7 / 3 = 3.5 s.
        assert_eq!(
            heartbeat_period(15_000, None, 300_000),
            Duration::from_millis(3_500)
        );
        // A 3 s lease is shorter: 3 × 0.7 / 3 = 0.7 s.
        assert_eq!(
            heartbeat_period(15_000, Some(3_000), 300_000),
            Duration::from_millis(700)
        );
        // A longer lease does not lengthen it.
        assert_eq!(
            heartbeat_period(15_000, Some(60_000), 300_000),
            Duration::from_millis(3_500)
        );
        assert_eq!(heartbeat_period(0, None, 0), MIN_HEARTBEAT_PERIOD);
    }

    #[test]
    fn adaptive_margin_uses_ceiling_during_warmup_then_clamps() {
        let lease = Duration::from_secs(1);
        let cold = RttSummary {
            samples: 19,
            p99_us: 1,
        };
        assert_eq!(adaptive_margin(4.0, 0.05, 0.5, lease, cold), 0.5);
        // k × p99 / lease = 4 × 25 ms / 1 s = 0.1.
        let warm = RttSummary {
            samples: 20,
            p99_us: 25_000,
        };
        assert!((adaptive_margin(4.0, 0.05, 0.5, lease, warm) - 0.1).abs() < 1e-12);
        let fast = RttSummary {
            samples: 100,
            p99_us: 10,
        };
        assert_eq!(adaptive_margin(4.0, 0.05, 0.5, lease, fast), 0.05);
        let slow = RttSummary {
            samples: 100,
            p99_us: 900_000,
        };
        assert_eq!(adaptive_margin(4.0, 0.05, 0.5, lease, slow), 0.5);
    }
}
