//! The bucket boundaries of every latency histogram fencepost exports to
//! Prometheus, and the spelling of a boundary as its `le` label.
//!
//! One rule, shared by the SDK (heartbeat RTT, raw and corrected, and tick
//! lag), the lock-server (grant and commit latency) and `bench rules` (which
//! must name a boundary in its selectors exactly as the exposition spells it):
//!
//! 1. a log-spaced ladder, the R10 preferred numbers (1, 1.25, 1.6, 2, 2.5,
//!    3.15, 4, 5, 6.3, 8 per decade: ten buckets a decade, each at most 28 %
//!    wider than the one below), from 0.5 ms to 63 s ([`ladder`]);
//! 2. plus every trigger-1 budget of the configuration in force,
//!    `min(lease, session TTL) × margin / 3`, and the lease's and the session
//!    TTL's own `× margin / 3`, each rounded to the microsecond
//!    ([`heartbeat_bounds`]). With the budget a boundary, "how many corrected
//!    samples exceeded the budget" is an exact difference of two counters
//!    (`_count − _bucket{le="budget"}`), not an interpolation inside a bucket.
//!
//! Boundaries are seconds. Prometheus 2.42 matches `le` as a string, so a rule
//! that selects a bucket must spell it as the exposition does: [`le_label`]
//! is that spelling (Go's `strconv.FormatFloat(v, 'g', -1, 64)`, which
//! `prometheus-client`'s classic text encoder follows).

use std::time::Duration;

/// The R10 series: the mantissas of one decade, ×100 so they are exact integers.
const R10: [u32; 10] = [100, 125, 160, 200, 250, 315, 400, 500, 630, 800];

/// The smallest ladder boundary, 0.5 ms (in µs).
pub const LADDER_MIN_US: u64 = 500;
/// The largest ladder boundary, 63 s (in µs): above every heartbeat timeout
/// the configuration accepts, so a quantile never falls in the `+Inf` bucket
/// (where `histogram_quantile` answers the highest finite bound).
pub const LADDER_MAX_US: u64 = 63_000_000;

/// The log-spaced ladder, in seconds, ascending: 0.0005, 0.00063, 0.0008,
/// 0.001, 0.00125, … 50, 63.
pub fn ladder() -> Vec<f64> {
    let mut us = Vec::new();
    // Mantissas are ×100, so at `decade` µs per unit a decade spans 100·decade µs to 800·decade µs.
    let mut decade: u64 = 1;
    while decade <= 100_000 {
        for m in R10 {
            let v = u64::from(m) * decade;
            if (LADDER_MIN_US..=LADDER_MAX_US).contains(&v) {
                us.push(v);
            }
        }
        decade *= 10;
    }
    us.into_iter().map(us_to_secs).collect()
}

/// ADR-006 §6.5 trigger 1: the RTT budget is the margin's share of the
/// usable base, `min(lease, session TTL) × margin`, over this.
pub const TRIGGER1_DIVISOR: f64 = 3.0;

/// Trigger 1's budget of a usable base `min(lease, session TTL)` and a
/// margin: `base × margin / 3`, in the base's unit. The one place the budget
/// is computed; [`trigger1_margin_for`] is its inverse.
pub fn trigger1_budget(base: f64, margin: f64) -> f64 {
    base * margin / TRIGGER1_DIVISOR
}

/// The inverse of [`trigger1_budget`]: the margin whose budget on a base of
/// `base_ms` is `rtt_us`, `3 × rtt / base`.
pub fn trigger1_margin_for(rtt_us: f64, base_ms: f64) -> f64 {
    TRIGGER1_DIVISOR * rtt_us / 1000.0 / base_ms
}

/// Trigger 1's budget, `min(lease, session TTL) × margin / 3`, in whole µs.
pub fn trigger1_budget_us(lease: Duration, session_ttl: Duration, margin: f64) -> u64 {
    let base = lease.min(session_ttl).as_secs_f64() * 1e6;
    trigger1_budget(base, margin).round() as u64
}

/// The heartbeat histograms' boundaries for a client that runs with `lease`
/// (its default grant), `session_ttl` and each margin in `margins` (a fixed
/// policy has one; an adaptive one its floor and ceiling): the [`ladder`]
/// plus, per margin, the budgets of `min(lease, TTL)`, the lease and the TTL.
/// Sorted, without duplicates, in seconds.
pub fn heartbeat_bounds(lease: Duration, session_ttl: Duration, margins: &[f64]) -> Vec<f64> {
    let mut us: Vec<u64> = ladder().into_iter().map(secs_to_us).collect();
    for &m in margins {
        for (l, t) in [
            (lease, session_ttl),
            (lease, lease),
            (session_ttl, session_ttl),
        ] {
            let b = trigger1_budget_us(l, t, m);
            if b > 0 {
                us.push(b);
            }
        }
    }
    us.sort_unstable();
    us.dedup();
    us.into_iter().map(us_to_secs).collect()
}

/// The boundaries of a server-side latency histogram (grant, commit): the ladder.
pub fn server_bounds() -> Vec<f64> {
    ladder()
}

/// Whole µs as seconds, through the decimal string so that e.g. 1,250 µs is
/// exactly the `f64` nearest 0.00125 (and prints as such).
fn us_to_secs(us: u64) -> f64 {
    let s = format!("{}.{:06}", us / 1_000_000, us % 1_000_000);
    s.parse().unwrap_or(us as f64 * 1e-6)
}

fn secs_to_us(s: f64) -> u64 {
    (s * 1e6).round() as u64
}

/// A boundary as the `le` label the Prometheus text exposition gives it (Go's
/// `%g` with the shortest precision: plain decimals from 1e-4 to below 1e6,
/// exponent form outside, e.g. `0.1`, `2.5`, `60`, `1e-05`, `1e+06`).
pub fn le_label(secs: f64) -> String {
    if secs.is_infinite() {
        return if secs > 0.0 { "+Inf" } else { "-Inf" }.to_owned();
    }
    if secs == 0.0 {
        return "0".to_owned();
    }
    let exp = secs.abs().log10().floor() as i32;
    if (-4..6).contains(&exp) {
        // Rust's Display is the shortest round-trip decimal, never exponent form.
        format!("{secs}")
    } else {
        // Go writes at least two exponent digits: 1e-05, 1e+21.
        let e = format!("{secs:e}");
        let (mant, ex) = e.split_once('e').unwrap_or((&e, "0"));
        let n: i32 = ex.parse().unwrap_or(0);
        let sign = if n < 0 { '-' } else { '+' };
        format!("{mant}e{sign}{:02}", n.abs())
    }
}

/// The `le` label of trigger 1's budget for `lease`, `session_ttl` and
/// `margin`: the boundary a rule selects to count samples above the budget.
pub fn budget_le(lease: Duration, session_ttl: Duration, margin: f64) -> String {
    le_label(us_to_secs(trigger1_budget_us(lease, session_ttl, margin)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ladder_runs_from_half_a_millisecond_to_63_seconds_ten_a_decade() {
        let l = ladder();
        assert_eq!(l.first(), Some(&0.0005));
        assert_eq!(l.last(), Some(&63.0));
        // 0.5, 0.63, 0.8 ms, then five full decades, then 10 … 63 s.
        assert_eq!(l.len(), 3 + 10 * 4 + 9);
        for w in l.windows(2) {
            assert!(w[1] > w[0] && w[1] / w[0] <= 1.28, "{w:?}");
        }
        let labels: Vec<String> = l.iter().take(5).map(|&b| le_label(b)).collect();
        assert_eq!(labels, ["0.0005", "0.00063", "0.0008", "0.001", "0.00125"]);
    }

    #[test]
    fn every_trigger1_budget_is_a_boundary() {
        let lease = Duration::from_millis(5000);
        let ttl = Duration::from_millis(2000);
        let b = heartbeat_bounds(lease, ttl, &[0.3, 0.17]);
        for (l, t, m, want) in [
            (ttl, ttl, 0.3, 0.2),
            (lease, lease, 0.3, 0.5),
            (lease, ttl, 0.17, 0.113333),
            (lease, lease, 0.17, 0.283333),
        ] {
            let us = trigger1_budget_us(l, t, m);
            let s = us_to_secs(us);
            assert!((s - want).abs() < 1e-9, "{s} vs {want}");
            assert!(b.contains(&s), "{s} not in {b:?}");
        }
        assert_eq!(budget_le(lease, ttl, 0.3), "0.2");
        assert_eq!(budget_le(lease, ttl, 0.17), "0.113333");
        assert!(b.windows(2).all(|w| w[1] > w[0]));
    }

    #[test]
    fn le_labels_follow_go_g_formatting() {
        assert_eq!(le_label(1.0), "1");
        assert_eq!(le_label(2.5), "2.5");
        assert_eq!(le_label(63.0), "63");
        assert_eq!(le_label(0.0001), "0.0001");
        assert_eq!(le_label(0.00001), "1e-05");
        assert_eq!(le_label(100_000.0), "100000");
        assert_eq!(le_label(1e6), "1e+06");
        assert_eq!(le_label(f64::INFINITY), "+Inf");
    }
}
