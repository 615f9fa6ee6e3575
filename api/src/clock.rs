//! The monotonic clock seam. Every expiry decision in fencepost (server lease
//! ends, grace, session expiry, the SDK's client deadlines) reads time through
//! [`Clock`] and nowhere else, so tests and the clock simulation can drive it.
//!
//! Times are [`MonoTime`]: nanoseconds since the clock's own origin. They are
//! only comparable with times from the same clock. They never wrap (u64
//! nanoseconds last 584 years), and all arithmetic on them is checked or
//! saturating.
//!
//! This module is also the one place that reads the wall clock, in
//! [`wall_clock_rfc3339_after`], to print `expires_at` for humans. No expiry
//! decision may use it.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime};

/// A point in time on one monotonic clock, in nanoseconds since its origin.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct MonoTime(u64);

impl MonoTime {
    /// The clock's origin.
    pub const ZERO: MonoTime = MonoTime(0);
    /// A time later than any real reading; used as "never".
    pub const MAX: MonoTime = MonoTime(u64::MAX);

    /// A time `nanos` nanoseconds after the origin.
    pub const fn from_nanos(nanos: u64) -> Self {
        MonoTime(nanos)
    }

    /// Nanoseconds since the origin.
    pub const fn as_nanos(self) -> u64 {
        self.0
    }

    /// `self + d`, or `None` past the end of representable time.
    pub fn checked_add(self, d: Duration) -> Option<MonoTime> {
        let d = u64::try_from(d.as_nanos()).ok()?;
        self.0.checked_add(d).map(MonoTime)
    }

    /// `self + d`, saturating at [`MonoTime::MAX`] (which means "never").
    pub fn saturating_add(self, d: Duration) -> MonoTime {
        self.checked_add(d).unwrap_or(MonoTime::MAX)
    }

    /// `self - d`, saturating at the origin.
    pub fn saturating_sub(self, d: Duration) -> MonoTime {
        let d = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        MonoTime(self.0.saturating_sub(d))
    }

    /// How long after `earlier` this is; zero if `earlier` is not before it.
    pub fn saturating_duration_since(self, earlier: MonoTime) -> Duration {
        Duration::from_nanos(self.0.saturating_sub(earlier.0))
    }

    /// True once `self` is at or past `deadline`.
    pub fn has_reached(self, deadline: MonoTime) -> bool {
        self.0 >= deadline.0
    }
}

/// A monotonic clock. Implementations must never go backwards in production;
/// fakes may (the clock simulation steps them on purpose).
pub trait Clock: Send + Sync + 'static {
    /// The current time on this clock.
    fn now(&self) -> MonoTime;
}

/// The production clock: `CLOCK_MONOTONIC` through [`Instant`], counted from
/// the moment the clock was created.
#[derive(Clone, Copy, Debug)]
pub struct MonotonicClock {
    origin: Instant,
}

impl MonotonicClock {
    /// A clock whose origin is now.
    pub fn new() -> Self {
        MonotonicClock {
            origin: Instant::now(),
        }
    }
}

impl Default for MonotonicClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for MonotonicClock {
    #[inline]
    fn now(&self) -> MonoTime {
        // An Instant's elapsed time is non-decreasing; u64 nanoseconds cover 584 years.
        MonoTime(self.origin.elapsed().as_nanos() as u64)
    }
}

/// A clock that moves only when told to. Clones share one time, so a test can
/// keep a handle while the code under test holds another.
#[derive(Clone, Debug, Default)]
pub struct FakeClock {
    nanos: Arc<AtomicU64>,
}

impl FakeClock {
    /// A fake clock reading `start`.
    pub fn new(start: MonoTime) -> Self {
        FakeClock {
            nanos: Arc::new(AtomicU64::new(start.0)),
        }
    }

    /// Moves the clock forward by `d`, saturating.
    pub fn advance(&self, d: Duration) {
        let d = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX);
        let _ = self
            .nanos
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                Some(n.saturating_add(d))
            });
    }

    /// Sets the clock to `t`, forwards or backwards (a step).
    pub fn set(&self, t: MonoTime) {
        self.nanos.store(t.0, Ordering::SeqCst);
    }
}

impl Clock for FakeClock {
    #[inline]
    fn now(&self) -> MonoTime {
        MonoTime(self.nanos.load(Ordering::SeqCst))
    }
}

impl<C: Clock + ?Sized> Clock for Arc<C> {
    #[inline]
    fn now(&self) -> MonoTime {
        (**self).now()
    }
}

/// RFC 3339 UTC wall-clock time `d` from now, for `expires_at` fields and logs.
/// For humans only: no client or server may derive a deadline from it (C1).
pub fn wall_clock_rfc3339_after(d: Duration) -> String {
    let t = SystemTime::now() + d;
    humantime::format_rfc3339_millis(t).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fake_clock_clones_share_time_and_can_step_back() {
        let a = FakeClock::new(MonoTime::from_nanos(10));
        let b = a.clone();
        a.advance(Duration::from_nanos(5));
        assert_eq!(b.now(), MonoTime::from_nanos(15));
        b.set(MonoTime::from_nanos(3));
        assert_eq!(a.now(), MonoTime::from_nanos(3));
    }

    #[test]
    fn arithmetic_saturates_instead_of_wrapping() {
        let near_end = MonoTime::from_nanos(u64::MAX - 1);
        assert_eq!(
            near_end.saturating_add(Duration::from_secs(1)),
            MonoTime::MAX
        );
        assert_eq!(near_end.checked_add(Duration::from_secs(1)), None);
        assert_eq!(
            MonoTime::ZERO.saturating_duration_since(near_end),
            Duration::ZERO
        );
        assert!(MonoTime::from_nanos(7).has_reached(MonoTime::from_nanos(7)));
        assert!(!MonoTime::from_nanos(6).has_reached(MonoTime::from_nanos(7)));
    }

    #[test]
    fn monotonic_clock_does_not_go_backwards() {
        let c = MonotonicClock::new();
        let a = c.now();
        let b = c.now();
        assert!(b >= a);
    }

    #[test]
    fn monotonic_clock_counts_real_time_from_its_creation() {
        let c = MonotonicClock::new();
        let a = c.now();
        // A sleep lasts at least its duration on CLOCK_MONOTONIC.
        std::thread::sleep(Duration::from_millis(2));
        let b = c.now();
        assert!(b.saturating_duration_since(a) >= Duration::from_millis(2));
    }

    #[test]
    fn arithmetic_is_exact_where_it_does_not_saturate() {
        let t = MonoTime::from_nanos(10);
        assert_eq!(t.as_nanos(), 10);
        assert_eq!(MonoTime::from_nanos(u64::MAX).as_nanos(), u64::MAX);
        assert_eq!(
            t.checked_add(Duration::from_nanos(5)),
            Some(MonoTime::from_nanos(15))
        );
        assert_eq!(
            t.saturating_add(Duration::from_nanos(5)),
            MonoTime::from_nanos(15)
        );
        assert_eq!(
            t.saturating_sub(Duration::from_nanos(3)),
            MonoTime::from_nanos(7)
        );
        assert_eq!(t.saturating_sub(Duration::from_nanos(11)), MonoTime::ZERO);
        assert_eq!(
            t.saturating_duration_since(MonoTime::from_nanos(4)),
            Duration::from_nanos(6)
        );
    }

    #[test]
    fn a_shared_clock_reads_the_clock_it_wraps() {
        let fake = FakeClock::new(MonoTime::from_nanos(1_234));
        let shared: Arc<FakeClock> = Arc::new(fake.clone());
        assert_eq!(shared.now(), MonoTime::from_nanos(1_234));
        fake.advance(Duration::from_nanos(6));
        assert_eq!(shared.now(), MonoTime::from_nanos(1_240));
    }
}
