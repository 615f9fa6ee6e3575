//! The heartbeat's fixed-rate schedule and its coordinated-omission
//! correction, as pure arithmetic over offsets from the task's start on the
//! timer clock (docs/measurement.md, "Coordinated omission: the corrected RTT").
//!
//! Scheduled tick `n + 1` is tick `n` plus the period, never the late wake-up
//! plus the period. A wake-up at `now` serves every scheduled tick that is
//! due, `first, first + P, …` up to `now`, with *one* exchange: no burst of
//! catch-up heartbeats. The exchange's tick lag is `now − first`; its
//! corrected samples are what a client that needed a heartbeat every period
//! experienced, one per served tick, each measured from that tick's scheduled
//! time: `rtt + lag − j·P` for `j = 0 … count − 1` (each at least its tick's
//! lateness `lag − j·P`). The raw histogram gets the one `rtt`.

use std::time::Duration;

/// At most this many corrected samples are recorded for one exchange (the
/// tick counters still count every tick): a 1 ms period and an hour-long stall
/// would otherwise record 3.6 million values in one go.
pub const MAX_CORRECTED_SAMPLES: u64 = 1_000_000;

/// The scheduled ticks one wake-up serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Due {
    /// The earliest scheduled tick not yet served, as an offset from the
    /// task's start.
    pub first: Duration,
    /// How many scheduled ticks are due (at least 1): `first`, `first + P`, ….
    pub count: u64,
    /// The period in force.
    pub period: Duration,
}

impl Due {
    /// The ticks due at `now` when the earliest unserved one is `first`. A
    /// wake-up before `first` (which the task never does) serves that tick.
    pub fn at(first: Duration, period: Duration, now: Duration) -> Due {
        let late = now.saturating_sub(first);
        let extra = match period.as_nanos() {
            0 => 0,
            p => u64::try_from(late.as_nanos() / p).unwrap_or(u64::MAX),
        };
        Due {
            first,
            count: extra.saturating_add(1),
            period,
        }
    }

    /// The next tick to wait for: the first one after those served.
    pub fn next(&self) -> Duration {
        let served = u32::try_from(self.count).unwrap_or(u32::MAX);
        self.first
            .saturating_add(self.period.saturating_mul(served))
    }

    /// The lateness of the exchange sent at `sent`: `sent − first`.
    pub fn lag(&self, sent: Duration) -> Duration {
        sent.saturating_sub(self.first)
    }

    /// The corrected samples of an exchange sent `lag` after `first` that
    /// took `rtt`: `rtt + lag − j·P` for each served tick `j`, largest first,
    /// at most [`MAX_CORRECTED_SAMPLES`].
    pub fn corrected(&self, rtt: Duration, lag: Duration) -> impl Iterator<Item = Duration> {
        let total = rtt.saturating_add(lag);
        let period = self.period;
        (0..self.count.min(MAX_CORRECTED_SAMPLES)).map(move |j| {
            let back = period.saturating_mul(u32::try_from(j).unwrap_or(u32::MAX));
            total.saturating_sub(back)
        })
    }

    /// The served ticks that were still needed when the session was found
    /// lost at `at`, `overrun` after its deadline: those scheduled before the
    /// deadline, i.e. with a lateness above `overrun`. Each yields its
    /// lateness `at − scheduled`, a right-censored ("≥") corrected sample:
    /// its heartbeat never went out.
    pub fn unserved(&self, at: Duration, overrun: Duration) -> impl Iterator<Item = Duration> {
        self.corrected(Duration::ZERO, self.lag(at))
            .filter(move |lateness| *lateness > overrun)
    }
}

/// The next tick after a period change from `old` to `new`, when `next` was
/// due under `old`: the last tick plus the new period, but not in the past
/// (a shorter period is a change of plan, not lateness: it is not counted as
/// lag).
pub fn rebase(next: Duration, old: Duration, new: Duration, now: Duration) -> Duration {
    next.saturating_sub(old).saturating_add(new).max(now)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::proptest_config;
    use proptest::prelude::*;

    const MS: Duration = Duration::from_millis(1);

    #[test]
    fn a_one_second_stall_at_100ms_serves_ten_ticks_with_one_exchange() {
        // Tick due at 100 ms; the task wakes at 1.05 s.
        let due = Due::at(100 * MS, 100 * MS, 1_050 * MS);
        assert_eq!(due.count, 10, "100, 200, …, 1000 ms");
        assert_eq!(due.next(), 1_100 * MS);
        let lag = due.lag(1_050 * MS);
        assert_eq!(lag, 950 * MS);
        let samples: Vec<_> = due.corrected(2 * MS, lag).collect();
        assert_eq!(samples.len(), 10);
        assert_eq!(samples[0], 952 * MS);
        assert_eq!(samples[9], 52 * MS);
        // Found lost at 1.05 s, 300 ms after a deadline at 750 ms: the ticks
        // at 100 … 700 ms were needed and never served.
        let censored: Vec<_> = due.unserved(1_050 * MS, 300 * MS).collect();
        assert_eq!(censored.len(), 7);
        assert_eq!(censored[0], 950 * MS);
        assert_eq!(censored[6], 350 * MS);
    }

    #[test]
    fn an_on_time_wake_serves_one_tick() {
        let due = Due::at(700 * MS, 700 * MS, 700 * MS);
        assert_eq!((due.count, due.next()), (1, 1_400 * MS));
        assert_eq!(
            due.corrected(3 * MS, Duration::ZERO).collect::<Vec<_>>(),
            [3 * MS]
        );
    }

    #[test]
    fn a_shorter_period_is_not_lateness() {
        // Last tick at 2 s (next due 4 s under a 2 s period); at 3.5 s the
        // period becomes 1 s: the next tick is now, not 3 s "in the past".
        assert_eq!(
            rebase(4_000 * MS, 2_000 * MS, 1_000 * MS, 3_500 * MS),
            3_500 * MS
        );
        assert_eq!(
            rebase(4_000 * MS, 2_000 * MS, 3_000 * MS, 3_500 * MS),
            5_000 * MS
        );
    }

    proptest! {
        #![proptest_config(proptest_config("schedule::due"))]
        #[test]
        fn every_due_tick_is_served_once_and_each_corrected_sample_covers_its_lateness(
            first_ms in 0u64..1_000_000,
            period_us in 1_000u64..10_000_000,
            late_us in prop_oneof![0u64..1_000, 0u64..100_000_000],
            rtt_us in 0u64..10_000_000,
        ) {
            let first = Duration::from_millis(first_ms);
            let period = Duration::from_micros(period_us);
            let now = first + Duration::from_micros(late_us);
            let due = Due::at(first, period, now);
            // Served: first … first + (count − 1)·P ≤ now < next.
            prop_assert!(due.count >= 1);
            prop_assert!(first + period * u32::try_from(due.count - 1).unwrap() <= now);
            prop_assert!(due.next() > now);
            prop_assert_eq!(due.next(), first + period * u32::try_from(due.count).unwrap());
            // One corrected sample per served tick, each ≥ its lateness and
            // ≥ the raw RTT, largest first; the first one is rtt + lag.
            let rtt = Duration::from_micros(rtt_us);
            let lag = due.lag(now);
            let samples: Vec<_> = due.corrected(rtt, lag).collect();
            prop_assert_eq!(samples.len() as u64, due.count.min(MAX_CORRECTED_SAMPLES));
            prop_assert_eq!(samples[0], rtt + lag);
            for (j, s) in samples.iter().enumerate() {
                let scheduled = first + period * u32::try_from(j).unwrap();
                prop_assert!(*s >= now - scheduled, "sample {j} below its lateness");
                prop_assert!(*s >= rtt);
            }
            prop_assert!(samples.windows(2).all(|w| w[0] >= w[1]));
        }
    }
}
