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

/// The default heartbeat divisor k of T-040 §4 (ADR-006): period = base ×
/// (1 − margin) / k with k = 3, so two consecutive lost heartbeats can be
/// tolerated before the client deadline.
pub const HEARTBEAT_DIVISOR: u32 = 3;

/// The heartbeat divisors a client accepts (`lock.client.heartbeat-divisor`):
/// 2 tolerates one lost heartbeat, 10 nine.
pub const HEARTBEAT_DIVISORS: std::ops::RangeInclusive<u32> = 2..=10;

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
///
/// Saturates towards *earlier*, never to "never": a deadline at or past the
/// end of representable time (a clock within one grant of `u64::MAX` ns, or
/// an absurd grant) is [`LAST_DEADLINE`], the last instant before
/// [`MonoTime::MAX`] ("never"). That is earlier than the true deadline and,
/// since `send` is that close to the end, a reachable one. Clamping keeps the
/// rule monotone: a larger margin never gives a later deadline.
pub fn client_deadline(send: MonoTime, granted_ms: u64, margin_ppm: u64) -> MonoTime {
    send.checked_add(usable(Duration::from_millis(granted_ms), margin_ppm))
        .map_or(LAST_DEADLINE, |d| d.min(LAST_DEADLINE))
}

/// The latest deadline [`client_deadline`] ever returns: one nanosecond
/// before [`MonoTime::MAX`], which the SDK never uses as a deadline.
pub const LAST_DEADLINE: MonoTime = MonoTime::from_nanos(u64::MAX - 1);

/// A successful reply that grants time (L1, L2, L4, L5): when its request
/// was written, when the reply was read, and the TTL it granted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GrantReply {
    /// The clock reading immediately before the request was written (D2).
    pub send: MonoTime,
    /// The clock reading once the reply was read.
    pub received: MonoTime,
    /// The TTL in the reply (possibly clamped by the server), ms.
    pub granted_ms: u64,
}

/// Why a successful reply moves no deadline.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum GrantRefused {
    /// The reply was read at or after the deadline it would have extended.
    /// Someone may already have been told `LockLost`, and loss is terminal:
    /// the caller marks the grant (or session) lost instead.
    #[error("the reply was read {late_by:?} after the client deadline it would have extended")]
    AfterDeadline {
        /// How long after the deadline the reply was read.
        late_by: Duration,
    },
}

/// D1 and D5 as one pure rule: the deadline that replaces `current` after
/// the successful `reply`, `send + granted × (1 − margin)`, computed from the
/// reply's *send* (never from `received`), and refused when the reply came at
/// or after `current` (a late reply revives nothing). The new deadline may be
/// earlier than `current` (a server that granted less): the latest exchange
/// decides, which is the conservative reading.
pub fn apply_grant(
    current: MonoTime,
    reply: GrantReply,
    margin_ppm: u64,
) -> Result<MonoTime, GrantRefused> {
    if reply.received.has_reached(current) {
        return Err(GrantRefused::AfterDeadline {
            late_by: reply.received.saturating_duration_since(current),
        });
    }
    Ok(client_deadline(reply.send, reply.granted_ms, margin_ppm))
}

/// The heartbeat period: `min(session_ttl, shortest live lease) × (1 − margin) / divisor`,
/// at least [`MIN_HEARTBEAT_PERIOD`] (a divisor of 0 is read as 1).
/// [`HEARTBEAT_DIVISOR`] is the default divisor.
pub fn heartbeat_period(
    session_ttl_ms: u64,
    shortest_lease_ms: Option<u64>,
    margin_ppm: u64,
    divisor: u32,
) -> Duration {
    let base = shortest_lease_ms.map_or(session_ttl_ms, |l| l.min(session_ttl_ms));
    let period = usable(Duration::from_millis(base), margin_ppm) / divisor.max(1);
    period.max(MIN_HEARTBEAT_PERIOD)
}

/// Whether a handle with `remaining` lease is renewed on a tick of `period`:
/// at most two and a half periods left. C3 says "under two periods"; on a
/// fixed-rate schedule a handle renewed on one tick has `usable − period ≥
/// 2 × period` left on the next (the period is rounded down, and a late
/// previous tick adds its lateness), so a literal two-period boundary skips
/// the handles whose lease sets the period every other tick and leaves them
/// one real attempt. Half a period of tolerance renews them every tick and
/// gives every handle two attempts, each with at least a period to complete,
/// before its deadline.
pub fn renew_due(remaining: Duration, period: Duration) -> bool {
    remaining <= period.saturating_mul(2).saturating_add(period / 2)
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
    fn a_margin_of_one_or_more_stays_below_one() {
        // A margin is in [0, 1): a whole margin would leave no usable lease.
        for m in [1.0, 1.5] {
            assert_eq!(ppm_nearest(m), PPM - 1, "nearest {m}");
            assert_eq!(ppm_ceil(m), PPM - 1, "ceil {m}");
        }
        assert_eq!(ppm_nearest(0.999_999_9), PPM - 1);
        assert_eq!(ppm_ceil(0.999_998_5), PPM - 1);
    }

    #[test]
    fn adaptive_margin_divides_by_the_lease_also_past_one_lease() {
        // k × p99 = 4 × 300 ms = 1.2 s over a 2 s lease: 0.6.
        let rtt = RttSummary {
            samples: 100,
            p99_us: 300_000,
        };
        let m = adaptive_margin(4.0, 0.05, 0.9, Duration::from_secs(2), rtt);
        assert!((m - 0.6).abs() < 1e-12, "{m}");
    }

    #[test]
    fn renew_is_due_at_two_and_a_half_periods_left_and_not_before() {
        let period = Duration::from_millis(1_000);
        assert!(renew_due(Duration::from_millis(2_500), period));
        assert!(renew_due(Duration::ZERO, period));
        assert!(!renew_due(
            Duration::from_millis(2_500) + Duration::from_nanos(1),
            period
        ));
        assert!(!renew_due(Duration::from_millis(3_000), period));
        assert!(!renew_due(Duration::from_secs(60), period));
    }

    #[test]
    fn remaining_is_the_time_to_the_deadline_then_zero() {
        let deadline = MonoTime::from_nanos(25);
        assert_eq!(
            remaining(MonoTime::from_nanos(10), deadline),
            Duration::from_nanos(15)
        );
        assert_eq!(remaining(deadline, deadline), Duration::ZERO);
        assert_eq!(
            remaining(MonoTime::from_nanos(30), deadline),
            Duration::ZERO
        );
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
            heartbeat_period(15_000, None, 300_000, HEARTBEAT_DIVISOR),
            Duration::from_millis(3_500)
        );
        // A 3 s lease is shorter: 3 × 0.7 / 3 = 0.7 s.
        assert_eq!(
            heartbeat_period(15_000, Some(3_000), 300_000, HEARTBEAT_DIVISOR),
            Duration::from_millis(700)
        );
        // A longer lease does not lengthen it.
        assert_eq!(
            heartbeat_period(15_000, Some(60_000), 300_000, HEARTBEAT_DIVISOR),
            Duration::from_millis(3_500)
        );
        assert_eq!(heartbeat_period(0, None, 0, 3), MIN_HEARTBEAT_PERIOD);
    }

    #[test]
    fn period_divides_the_usable_base_by_the_divisor() {
        // 1 s × 0.7 = 700 ms: / 2 = 350 ms, / 4 = 175 ms, / 10 = 70 ms.
        for (k, ms) in [(2, 350), (3, 233), (4, 175), (10, 70)] {
            let p = heartbeat_period(1_000, None, 300_000, k);
            assert_eq!(p.as_millis(), ms, "k = {k}");
        }
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

    #[test]
    fn deadline_past_the_end_of_time_saturates_before_never() {
        let send = MonoTime::from_nanos(u64::MAX - 1_000);
        assert_eq!(client_deadline(send, 1, 0), LAST_DEADLINE);
        assert_eq!(client_deadline(MonoTime::MAX, 1_000, 0), LAST_DEADLINE);
        assert!(MonoTime::MAX.has_reached(client_deadline(MonoTime::MAX, 1_000, 0)));
        assert_eq!(
            client_deadline(send, 0, 0),
            send,
            "representable: exact, not clamped"
        );
    }

    #[test]
    fn a_reply_read_at_the_deadline_is_refused() {
        let reply = GrantReply {
            send: MonoTime::from_nanos(10),
            received: MonoTime::from_nanos(20),
            granted_ms: 1_000,
        };
        assert_eq!(
            apply_grant(MonoTime::from_nanos(20), reply, 0),
            Err(GrantRefused::AfterDeadline {
                late_by: Duration::ZERO
            })
        );
        assert_eq!(
            apply_grant(MonoTime::from_nanos(21), reply, 0),
            Ok(MonoTime::from_nanos(10 + 1_000 * MS))
        );
    }
}

/// Properties of the pure arithmetic, 2,000 seeded cases each.
/// They are meant to fail on the classic mistakes: a deadline computed from
/// the reply time, from the requested TTL, or one that saturates to "never".
#[cfg(test)]
mod proptests {
    use super::*;
    use crate::test_support::proptest_config;
    use proptest::prelude::*;

    /// Clock readings anywhere, with extra weight near the end of time.
    fn reading() -> impl Strategy<Value = MonoTime> {
        prop_oneof![
            any::<u64>(),
            (u64::MAX - 4_000_000_000_000)..=u64::MAX,
            0u64..=86_400_000_000_000,
        ]
        .prop_map(MonoTime::from_nanos)
    }

    /// Granted TTLs: realistic ones, and any u64.
    fn granted_ms() -> impl Strategy<Value = u64> {
        prop_oneof![0u64..=3_600_000, any::<u64>()]
    }

    fn ppm() -> impl Strategy<Value = u64> {
        0..PPM
    }

    /// `send + granted` in exact (u128) nanoseconds.
    fn upper_bound_ns(send: MonoTime, granted_ms: u64) -> u128 {
        u128::from(send.as_nanos()) + u128::from(granted_ms) * 1_000_000
    }

    proptest! {
        #![proptest_config(proptest_config("lease::deadline_bounds"))]
        #[test]
        fn deadline_is_between_send_and_send_plus_granted_and_never_never(
            send in reading(), granted in granted_ms(), m in ppm(),
        ) {
            let d = client_deadline(send, granted, m);
            prop_assert!(u128::from(d.as_nanos()) <= upper_bound_ns(send, granted));
            prop_assert!(d < MonoTime::MAX, "saturated to never: {d:?}");
            prop_assert!(d >= send.min(LAST_DEADLINE));
            // Exact where representable: send + floor(granted × (1 − m)).
            let exact = u128::from(send.as_nanos())
                + u128::from(granted) * 1_000_000 * u128::from(PPM - m) / u128::from(PPM);
            if exact < u128::from(u64::MAX) {
                prop_assert_eq!(u128::from(d.as_nanos()), exact);
            } else {
                prop_assert_eq!(d, LAST_DEADLINE, "unrepresentable: the last instant before never");
            }
        }
    }

    proptest! {
        #![proptest_config(proptest_config("lease::deadline_monotone_in_margin"))]
        #[test]
        fn deadline_never_rises_as_the_margin_grows(
            send in reading(), granted in granted_ms(), a in ppm(), b in ppm(),
        ) {
            let (lo, hi) = (a.min(b), a.max(b));
            prop_assert!(client_deadline(send, granted, hi) <= client_deadline(send, granted, lo));
            prop_assert!(usable(Duration::from_millis(granted), hi)
                <= usable(Duration::from_millis(granted), lo));
        }
    }

    proptest! {
        #![proptest_config(proptest_config("lease::apply_grant"))]
        #[test]
        fn apply_grant_counts_from_the_send_never_from_the_reply(
            send in reading(),
            rtt_ns in prop_oneof![0u64..=10_000_000_000, any::<u64>()],
            current in reading(),
            granted in granted_ms(),
            m in ppm(),
        ) {
            let received = MonoTime::from_nanos(send.as_nanos().saturating_add(rtt_ns));
            let reply = GrantReply { send, received, granted_ms: granted };
            match apply_grant(current, reply, m) {
                Ok(d) => {
                    prop_assert!(!received.has_reached(current));
                    prop_assert_eq!(d, client_deadline(send, granted, m));
                    prop_assert!(u128::from(d.as_nanos()) <= upper_bound_ns(send, granted));
                }
                Err(GrantRefused::AfterDeadline { late_by }) => {
                    prop_assert!(received.has_reached(current));
                    prop_assert_eq!(late_by, received.saturating_duration_since(current));
                }
            }
        }
    }

    proptest! {
        #![proptest_config(proptest_config("lease::heartbeat_period"))]
        #[test]
        fn period_is_at_most_a_kth_of_the_usable_base(
            ttl in prop_oneof![0u64..=600_000, any::<u64>()],
            lease in proptest::option::of(prop_oneof![0u64..=600_000, any::<u64>()]),
            m in ppm(),
            k in HEARTBEAT_DIVISORS,
        ) {
            let p = heartbeat_period(ttl, lease, m, k);
            let base = lease.map_or(ttl, |l| l.min(ttl));
            let part = usable(Duration::from_millis(base), m) / k;
            prop_assert!(p >= MIN_HEARTBEAT_PERIOD);
            if part >= MIN_HEARTBEAT_PERIOD {
                prop_assert_eq!(p, part);
                prop_assert!(p * k <= usable(Duration::from_millis(base), m));
            } else {
                prop_assert_eq!(p, MIN_HEARTBEAT_PERIOD);
            }
            // A longer lease never lengthens the period beyond the session's.
            prop_assert!(p <= heartbeat_period(ttl, None, m, k));
        }
    }

    proptest! {
        #![proptest_config(proptest_config("lease::adaptive_margin"))]
        #[test]
        fn adaptive_margin_stays_within_floor_and_ceiling(
            k in prop_oneof![1e-9f64..1e6, 0.5f64..10.0],
            a in 0.0f64..1.0,
            b in 0.0f64..1.0,
            lease_ms in prop_oneof![0u64..=3_600_000, any::<u64>()],
            samples in any::<u64>(),
            p99_us in prop_oneof![0u64..=10_000_000, any::<u64>()],
        ) {
            let (floor, ceiling) = (a.min(b), a.max(b));
            let rtt = RttSummary { samples, p99_us };
            let m = adaptive_margin(k, floor, ceiling, Duration::from_millis(lease_ms), rtt);
            prop_assert!(m >= floor && m <= ceiling, "{m} outside [{floor}, {ceiling}]");
            if samples < ADAPTIVE_WARMUP_SAMPLES || lease_ms == 0 {
                prop_assert_eq!(m, ceiling);
            }
            // Quantised for the deadline: rounded up, still a margin below 1.
            let q = ppm_ceil(m);
            prop_assert!(q < PPM);
            prop_assert!(q as f64 >= m * PPM as f64 - 1e-6);
            prop_assert!(q >= ppm_nearest(m));
        }
    }
}
