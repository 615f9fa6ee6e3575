//! The shape of a bounded acquire (T-041): [`AcquireOptions`] (lease, total
//! wait budget, backoff bounds, attempt cap) and [`Backoff`], exponential
//! backoff with full jitter drawn from a caller-supplied (seeded) RNG.
//!
//! The loop itself lives in [`Session::acquire`](crate::Session::acquire):
//! it retries `LOCK_HELD`, 503s and transport failures, waits
//! `max(retry_after, jitter)` between tries, never past the budget, and gives
//! up when the budget or the attempt cap is spent.

use std::time::Duration;

use rand::Rng;

/// How one [`Session::acquire`](crate::Session::acquire) call behaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AcquireOptions {
    /// The lease to ask for; `None` means the client's `lock.default.ttl`.
    /// The server may clamp it; the handle uses the granted value.
    pub ttl: Option<Duration>,
    /// Total time the call may spend waiting for the key between attempts.
    /// Zero (the default) means one attempt. Each attempt may additionally take
    /// up to the request timeout.
    pub wait_budget: Duration,
    /// The first backoff ceiling; the n-th wait is drawn from `[0, min(max, base × 2^n)]`.
    pub base_backoff: Duration,
    /// The largest backoff ceiling.
    pub max_backoff: Duration,
    /// A hard cap on L4 requests, so a clock that does not move (a fake one)
    /// still cannot make the loop endless.
    pub max_attempts: u32,
}

impl Default for AcquireOptions {
    /// Default lease, one attempt, backoff 25 ms doubling up to 1 s, at most 1000 attempts.
    fn default() -> Self {
        AcquireOptions {
            ttl: None,
            wait_budget: Duration::ZERO,
            base_backoff: Duration::from_millis(25),
            max_backoff: Duration::from_secs(1),
            max_attempts: 1000,
        }
    }
}

impl AcquireOptions {
    /// Asks for a lease of `ttl`.
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = Some(ttl);
        self
    }

    /// Allows waiting up to `budget` in total for the key.
    pub fn wait_up_to(mut self, budget: Duration) -> Self {
        self.wait_budget = budget;
        self
    }

    /// Sets the backoff bounds.
    pub fn backoff(mut self, base: Duration, max: Duration) -> Self {
        self.base_backoff = base;
        self.max_backoff = max;
        self
    }

    /// Caps the number of L4 requests (at least 1).
    pub fn max_attempts(mut self, n: u32) -> Self {
        self.max_attempts = n.max(1);
        self
    }
}

/// Exponential backoff with full jitter: the n-th delay (n from 0) is uniform
/// in `[0, min(max, base × 2^n)]`. Deterministic for a given RNG state.
#[derive(Clone, Debug)]
pub struct Backoff {
    base: Duration,
    max: Duration,
    /// How many delays were drawn so far.
    attempt: u32,
}

impl Backoff {
    /// A backoff starting at `base`, never above `max`.
    pub fn new(base: Duration, max: Duration) -> Self {
        Backoff {
            base,
            max: max.max(base),
            attempt: 0,
        }
    }

    /// The ceiling of the next delay, `min(max, base × 2^attempt)`.
    pub fn ceiling(&self) -> Duration {
        let factor = 1u32.checked_shl(self.attempt.min(31)).unwrap_or(u32::MAX);
        self.base.saturating_mul(factor).min(self.max)
    }

    /// Draws the next delay from `rng` and moves to the next attempt.
    pub fn next_delay<R: Rng + ?Sized>(&mut self, rng: &mut R) -> Duration {
        let ceiling = u64::try_from(self.ceiling().as_nanos()).unwrap_or(u64::MAX);
        self.attempt = self.attempt.saturating_add(1);
        Duration::from_nanos(rng.random_range(0..=ceiling))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha8Rng;

    fn delays(seed: u64, n: usize) -> Vec<Duration> {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let mut b = Backoff::new(Duration::from_millis(10), Duration::from_millis(200));
        (0..n).map(|_| b.next_delay(&mut rng)).collect()
    }

    #[test]
    fn jitter_is_reproducible_for_a_seed_and_differs_across_seeds() {
        assert_eq!(delays(7, 12), delays(7, 12));
        assert_ne!(delays(7, 12), delays(8, 12));
    }

    #[test]
    fn delays_stay_under_the_exponential_ceiling_capped_at_max() {
        let mut rng = ChaCha8Rng::seed_from_u64(1);
        let mut b = Backoff::new(Duration::from_millis(10), Duration::from_millis(200));
        for n in 0..40u32 {
            let ceiling = Duration::from_millis(10)
                .saturating_mul(1u32.checked_shl(n.min(31)).unwrap_or(u32::MAX))
                .min(Duration::from_millis(200));
            assert_eq!(b.ceiling(), ceiling);
            assert!(b.next_delay(&mut rng) <= ceiling);
        }
    }
}
