//! The server's grace: how long after a lease (or session) ends its key stays
//! unassignable, so that no client whose clock lags the server's can still
//! believe it holds the grant once the server gives it to someone else.
//!
//! The essay's bound is `M = θ_max + 2ρD + q` (offset, drift on both clocks
//! over the lease `D`, quantisation). C4 spells it
//! `offset_max + 2 * drift_ppm * 1e-6 * lease + quantum`, per grant.

use std::time::Duration;

/// The inputs of the derived grace (C4 `lock.clock.*`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GraceParams {
    /// `lock.clock.offset-max`: the largest clock offset error θ_max.
    pub offset_max: Duration,
    /// `lock.clock.drift-ppm`: the drift-rate bound ρ per clock, in parts per million.
    pub drift_ppm: u64,
    /// `lock.clock.quantum`: combined clock and timer quantisation q.
    pub quantum: Duration,
}

impl Default for GraceParams {
    /// The C4 defaults: 50 ms, 100 ppm, 1 ms.
    fn default() -> Self {
        GraceParams {
            offset_max: Duration::from_millis(50),
            drift_ppm: 100,
            quantum: Duration::from_millis(1),
        }
    }
}

/// How the server sizes grace: a fixed value (`lock.server.grace`) or derived per grant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GracePolicy {
    /// The same grace for every grant, whatever its lease.
    Fixed(Duration),
    /// `offset_max + 2 * drift_ppm * 1e-6 * lease + quantum`, computed per grant.
    Derived(GraceParams),
}

impl Default for GracePolicy {
    fn default() -> Self {
        GracePolicy::Derived(GraceParams::default())
    }
}

impl GracePolicy {
    /// The grace for a grant (or session) whose lease is `lease`. The drift
    /// term is rounded up to the next nanosecond, so rounding never shrinks it.
    pub fn grace_for(&self, lease: Duration) -> Duration {
        match *self {
            GracePolicy::Fixed(g) => g,
            GracePolicy::Derived(p) => p
                .offset_max
                .saturating_add(drift_term(p.drift_ppm, lease))
                .saturating_add(p.quantum),
        }
    }
}

/// `2 * ppm * 1e-6 * lease`, in whole nanoseconds rounded up.
pub fn drift_term(drift_ppm: u64, lease: Duration) -> Duration {
    let num = 2u128 * u128::from(drift_ppm) * lease.as_nanos();
    let nanos = num.div_ceil(1_000_000);
    Duration::from_nanos(u64::try_from(nanos).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn derived_grace_for_a_ten_second_lease_is_53ms_with_defaults() {
        // 50 ms offset + 2 * 100e-6 * 10 s (= 2 ms) + 1 ms quantum.
        let g = GracePolicy::default().grace_for(Duration::from_secs(10));
        assert_eq!(g, Duration::from_millis(53));
    }

    #[test]
    fn drift_term_rounds_up() {
        // 2 * 1 ppm * 1 ns = 2e-6 ns -> 1 ns, never 0.
        assert_eq!(
            drift_term(1, Duration::from_nanos(1)),
            Duration::from_nanos(1)
        );
        assert_eq!(drift_term(0, Duration::from_secs(10)), Duration::ZERO);
    }

    #[test]
    fn fixed_grace_ignores_the_lease() {
        let p = GracePolicy::Fixed(Duration::from_millis(7));
        assert_eq!(
            p.grace_for(Duration::from_secs(600)),
            Duration::from_millis(7)
        );
    }
}
