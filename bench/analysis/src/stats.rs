//! The statistics behind `summary.csv`, the recommendation and
//! `projection.csv`: a 95 % interval over repeats (Student t on the repeat
//! values) and a 95 % interval of a tail quantile of a pooled histogram (the
//! exact bootstrap distribution of the sample quantile). Pure functions over
//! numbers and histograms, so every decision built on them is testable
//! without running a cell.
//!
//! Why t and not a bootstrap over repeats: with the few repeats a shared
//! 2-core machine affords (3–5), a percentile bootstrap of 3 values can only
//! return intervals inside [min, max], which covers the mean far less often
//! than 95 % (with n = 3 the range covers the median only 75 % of the time).
//! The t interval on the repeat values, `mean ± t(0.975, n − 1) · s / √n`,
//! is wide at small n (t = 4.30 at n = 3), which is the honest answer. It
//! assumes the repeats are independent and roughly normal; each repeat is a
//! fresh stack and seed, which is what makes the first hold. The interval is
//! widened, if needed, to contain the median it is printed beside.
//!
//! Why an exact bootstrap for quantiles: resampling the n samples of a
//! histogram with replacement, the sample q-quantile is ≤ `v` exactly when at
//! least `r = ⌈q·n⌉` resampled values are ≤ `v`, a Binomial(n, F(v)) event.
//! So the bootstrap distribution needs no Monte-Carlo draws: it is evaluated
//! exactly at the histogram's recorded values, deterministic and cheap. Like
//! every resampling of single samples it assumes independent samples;
//! heartbeats within one stall are not, so in a stall-dominated tail the
//! interval is too narrow: [`crate::pool`] widens it with a cluster
//! bootstrap over the cells and uses this one as its floor.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// Two-sided 95 % Student t quantiles `t(0.975, df)` for df = 1..=30.
const T975: [f64; 30] = [
    12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160,
    2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064, 2.060, 2.056,
    2.052, 2.048, 2.045, 2.042,
];

/// `t(0.975, df)`; beyond 30 degrees of freedom `1.96 + 2.4 / df` (within
/// 0.002 of the exact value). `df` = 0 has no interval: infinity.
pub fn t975(df: usize) -> f64 {
    match df {
        0 => f64::INFINITY,
        1..=30 => T975[df - 1],
        _ => 1.96 + 2.4 / df as f64,
    }
}

/// The median of `values` (NaN when empty).
pub fn median(values: &[f64]) -> f64 {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| !x.is_nan()).collect();
    if v.is_empty() {
        return f64::NAN;
    }
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// One figure over repeats: its spread and a 95 % interval.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    /// Repeats it is over (NaN values are not counted).
    pub n: usize,
    /// Median of the repeats.
    pub median: f64,
    /// Mean of the repeats.
    pub mean: f64,
    /// Smallest repeat.
    pub min: f64,
    /// Largest repeat.
    pub max: f64,
    /// Lower end of the 95 % interval (NaN with fewer than 2 repeats).
    pub lo: f64,
    /// Upper end of the 95 % interval (NaN with fewer than 2 repeats).
    pub hi: f64,
}

/// The name of the interval method, for `summary.csv`'s `ci_method` column.
pub const CI_METHOD: &str = "t";

impl Interval {
    /// The t interval of the repeat values (see the module doc), widened to
    /// contain the median and clamped to `[floor, ceil]` (e.g. 0 for a
    /// throughput, [0, 1] for a fraction). NaN values are skipped; with
    /// fewer than two values the interval ends are NaN: no interval.
    pub fn of(values: &[f64], floor: f64, ceil: f64) -> Interval {
        let v: Vec<f64> = values.iter().copied().filter(|x| !x.is_nan()).collect();
        let n = v.len();
        let nan = f64::NAN;
        if n == 0 {
            return Interval {
                n,
                median: nan,
                mean: nan,
                min: nan,
                max: nan,
                lo: nan,
                hi: nan,
            };
        }
        let mean = v.iter().sum::<f64>() / n as f64;
        let med = median(&v);
        let min = v.iter().copied().fold(f64::INFINITY, f64::min);
        let max = v.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        let (lo, hi) = if n < 2 {
            (nan, nan)
        } else {
            let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (n - 1) as f64;
            let half = t975(n - 1) * (var / n as f64).sqrt();
            (
                (mean - half).min(med).clamp(floor, ceil),
                (mean + half).max(med).clamp(floor, ceil),
            )
        };
        Interval {
            n,
            median: med,
            mean,
            min,
            max,
            lo,
            hi,
        }
    }

    /// Whether the interval exists (at least two repeats).
    pub fn known(&self) -> bool {
        !self.lo.is_nan() && !self.hi.is_nan()
    }
}

/// Whether two intervals separate (neither contains any point of the other);
/// false when either is unknown: a decision needs both intervals.
pub fn separate(a: &Interval, b: &Interval) -> bool {
    a.known() && b.known() && (a.hi < b.lo || b.hi < a.lo)
}

/// `ln C(n, k)` by the sum of logs, for the binomial terms below.
fn ln_choose(n: u64, k: u64) -> f64 {
    let k = k.min(n - k);
    (0..k)
        .map(|i| ((n - i) as f64).ln() - ((i + 1) as f64).ln())
        .sum()
}

/// `P(Binomial(n, p) ≤ k)`, summed in log space over the shorter tail.
fn binom_cdf(n: u64, p: f64, k: u64) -> f64 {
    if k >= n || p <= 0.0 {
        return 1.0;
    }
    if p >= 1.0 {
        return 0.0;
    }
    let (lp, lq) = (p.ln(), (1.0 - p).ln());
    // Σ pmf(i) over `range`, each term from the one before (log space).
    let sum = |range: std::ops::RangeInclusive<u64>| -> f64 {
        let (start, end) = (*range.start(), *range.end());
        let mut l = ln_choose(n, start) + start as f64 * lp + (n - start) as f64 * lq;
        let mut logs = Vec::with_capacity((end - start + 1) as usize);
        for i in start..=end {
            logs.push(l);
            if i < n {
                l += ((n - i) as f64).ln() - ((i + 1) as f64).ln() + lp - lq;
            }
        }
        let top = logs.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        if top == f64::NEG_INFINITY {
            return 0.0;
        }
        top.exp() * logs.iter().map(|l| (l - top).exp()).sum::<f64>()
    };
    if k < n / 2 {
        sum(0..=k).min(1.0)
    } else {
        (1.0 - sum(k + 1..=n)).max(0.0)
    }
}

/// A tail quantile of a pooled histogram with its 95 % interval (µs).
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct QuantileCi {
    /// Samples in the histogram.
    pub n: u64,
    /// The quantile asked for, e.g. 0.999.
    pub q: f64,
    /// The sample quantile, µs.
    pub value_us: u64,
    /// Lower end of the exact-bootstrap 95 % interval, µs.
    pub lo_us: u64,
    /// Upper end, µs.
    pub hi_us: u64,
}

/// The `q` quantile of `h` and the 2.5 % and 97.5 % points of its exact
/// bootstrap distribution (module doc); `None` without samples.
pub fn quantile_bootstrap_ci95(h: &Histogram<u64>, q: f64) -> Option<QuantileCi> {
    if h.is_empty() {
        return None;
    }
    let n = h.len();
    // The rank of the sample quantile among n values (1-based), as HdrHistogram counts it.
    let r = ((q * n as f64).ceil() as u64).clamp(1, n);
    // Distinct values with their cumulative fraction F(v).
    let mut points: Vec<(u64, f64)> = Vec::new();
    let mut seen = 0u64;
    for v in h.iter_recorded() {
        seen += v.count_at_value();
        points.push((
            h.highest_equivalent(v.value_iterated_to()),
            seen as f64 / n as f64,
        ));
    }
    // P(Q* ≤ v) = P(Binomial(n, F(v)) ≥ r) = 1 − P(X ≤ r − 1), increasing in v.
    let cdf = |f: f64| 1.0 - binom_cdf(n, f, r - 1);
    let first_at_least = |target: f64| -> u64 {
        let (mut lo, mut hi) = (0usize, points.len() - 1);
        while lo < hi {
            let mid = (lo + hi) / 2;
            if cdf(points[mid].1) >= target {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        points[lo].0
    };
    Some(QuantileCi {
        n,
        q,
        value_us: h.value_at_quantile(q),
        lo_us: first_at_least(0.025),
        hi_us: first_at_least(0.975),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use bench_core::hist::new_histogram;

    #[test]
    fn three_repeats_get_a_t_interval_that_holds_the_median() {
        let i = Interval::of(&[10.0, 11.0, 12.0], 0.0, f64::INFINITY);
        assert_eq!((i.n, i.median, i.min, i.max), (3, 11.0, 10.0, 12.0));
        // s = 1, half = 4.303 / √3 = 2.484
        assert!(
            (i.lo - 8.516).abs() < 1e-3 && (i.hi - 13.484).abs() < 1e-3,
            "{i:?}"
        );
        assert!(i.lo <= i.median && i.median <= i.hi);
        let one = Interval::of(&[5.0], 0.0, f64::INFINITY);
        assert!(!one.known() && one.median == 5.0);
        let clamped = Interval::of(&[0.0, 0.01, 0.3], 0.0, 1.0);
        assert_eq!(clamped.lo, 0.0, "a fraction's interval stays in [0, 1]");
    }

    #[test]
    fn t_beyond_thirty_degrees_of_freedom_approaches_the_normal_quantile() {
        assert_eq!(t975(30), 2.042);
        // Exact: t(0.975, 40) = 2.021, t(0.975, 120) = 1.980.
        assert!((t975(40) - 2.02).abs() < 1e-12);
        assert!((t975(120) - 1.98).abs() < 1e-12);
        assert!(t975(0).is_infinite());
    }

    #[test]
    fn intervals_separate_only_when_both_are_known_and_disjoint() {
        let a = Interval::of(&[10.0, 10.1, 9.9], 0.0, f64::INFINITY);
        let b = Interval::of(&[20.0, 20.1, 19.9], 0.0, f64::INFINITY);
        let c = Interval::of(&[9.0, 21.0, 15.0], 0.0, f64::INFINITY);
        assert!(separate(&a, &b) && separate(&b, &a));
        assert!(!separate(&a, &c) && !separate(&b, &c));
        assert!(!separate(&a, &Interval::of(&[30.0], 0.0, f64::INFINITY)));
    }

    #[test]
    fn binomial_tails_match_small_exact_values() {
        // Binomial(4, 0.5): P(X ≤ 1) = 5/16, P(X ≤ 3) = 15/16.
        assert!((binom_cdf(4, 0.5, 1) - 5.0 / 16.0).abs() < 1e-12);
        assert!((binom_cdf(4, 0.5, 3) - 15.0 / 16.0).abs() < 1e-12);
        assert_eq!(binom_cdf(4, 0.5, 4), 1.0);
        // Large n, a short tail: P(Binomial(100000, 0.999) ≤ 99_800) is tiny.
        assert!(binom_cdf(100_000, 0.999, 99_800) < 1e-10);
    }

    #[test]
    fn the_quantile_interval_brackets_the_quantile_and_narrows_with_samples() {
        let fill = |n: u64| {
            let mut h = new_histogram();
            for i in 1..=n {
                h.record(i * 1000 / n.max(1) + 100).unwrap();
            }
            h
        };
        let small = quantile_bootstrap_ci95(&fill(500), 0.999).unwrap();
        let large = quantile_bootstrap_ci95(&fill(50_000), 0.999).unwrap();
        for ci in [small, large] {
            assert!(ci.lo_us <= ci.value_us && ci.value_us <= ci.hi_us, "{ci:?}");
        }
        assert!(
            large.hi_us - large.lo_us < small.hi_us - small.lo_us,
            "{small:?} vs {large:?}"
        );
        assert!(quantile_bootstrap_ci95(&new_histogram(), 0.99).is_none());
    }
}
