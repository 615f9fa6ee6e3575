//! Seeded latency distributions, shared by the rail-stub's simulated rail (R3)
//! and the bench's delay proxy, so both read the same `rail.latency` syntax and
//! draw from the same arithmetic.
//!
//! Three forms are accepted (C4 `rail.latency`):
//!
//! | form | meaning |
//! |---|---|
//! | `fixed:5ms` | always 5 ms |
//! | `uniform:10ms..50ms` | uniform between the two bounds, inclusive |
//! | `lognormal:p50=40ms,p99=400ms` | log-normal with that median and 99th percentile |
//!
//! Durations use the C4 syntax of [`crate::duration::parse_duration`]. Sampling
//! takes the caller's RNG, so a seeded RNG replays the same sequence of delays.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use crate::duration::{DurationParseError, format_duration, parse_duration};

/// The standard normal's 99th percentile, z₀.₉₉: `p99 = p50 · exp(σ · z₀.₉₉)`.
const Z_99: f64 = 2.326_347_874;

/// Shown in every parse error so the reader sees what would have worked.
const ACCEPTED_FORMS: &str =
    "expected fixed:5ms, uniform:10ms..50ms or lognormal:p50=40ms,p99=400ms";

/// A latency distribution: what one simulated rail call (or proxied hop) waits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LatencySpec {
    /// Always the same delay.
    Fixed(Duration),
    /// Uniform between `min` and `max`, both inclusive (`min <= max`).
    Uniform {
        /// The shortest delay.
        min: Duration,
        /// The longest delay.
        max: Duration,
    },
    /// Log-normal with the given median and 99th percentile (`0 < p50 <= p99`).
    LogNormal {
        /// The median delay.
        p50: Duration,
        /// The 99th-percentile delay.
        p99: Duration,
    },
}

/// Why a latency spec was refused; every message repeats the bad text and the
/// accepted forms.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LatencySpecError {
    /// The text before `:` is not `fixed`, `uniform` or `lognormal`, or the
    /// parameters are not laid out as the form requires.
    #[error("latency spec {text:?} is not understood; {ACCEPTED_FORMS}")]
    Malformed {
        /// The whole spec as given.
        text: String,
    },
    /// One duration inside the spec did not parse.
    #[error("latency spec {text:?}: {source}; {ACCEPTED_FORMS}")]
    BadDuration {
        /// The whole spec as given.
        text: String,
        /// What was wrong with the duration.
        source: DurationParseError,
    },
    /// A uniform range whose lower bound is above its upper bound.
    #[error(
        "latency spec {text:?}: the range is reversed; write the smaller bound first, e.g. uniform:10ms..50ms"
    )]
    ReversedRange {
        /// The whole spec as given.
        text: String,
    },
    /// A log-normal whose p99 is below its p50, or whose p50 is zero.
    #[error(
        "latency spec {text:?}: a log-normal needs 0 < p50 <= p99, e.g. lognormal:p50=40ms,p99=400ms"
    )]
    BadPercentiles {
        /// The whole spec as given.
        text: String,
    },
}

impl LatencySpec {
    /// The median delay (for uniform, the midpoint; for fixed, the delay).
    pub fn p50(&self) -> Duration {
        match *self {
            LatencySpec::Fixed(d) => d,
            LatencySpec::Uniform { min, max } => min + (max - min) / 2,
            LatencySpec::LogNormal { p50, .. } => p50,
        }
    }

    /// The 99th-percentile delay (for uniform, 99% of the way up the range).
    pub fn p99(&self) -> Duration {
        match *self {
            LatencySpec::Fixed(d) => d,
            LatencySpec::Uniform { min, max } => min + (max - min).mul_f64(0.99),
            LatencySpec::LogNormal { p99, .. } => p99,
        }
    }

    /// Draws one delay using `rng`; the same seed gives the same sequence.
    ///
    /// Fixed draws nothing from `rng`; uniform draws one `u64`; log-normal draws
    /// two `f64`s (one Box–Muller pair, of which one normal is used).
    pub fn sample<R: rand::Rng + ?Sized>(&self, rng: &mut R) -> Duration {
        match *self {
            LatencySpec::Fixed(d) => d,
            LatencySpec::Uniform { min, max } => {
                let lo = nanos_u64(min);
                let hi = nanos_u64(max);
                Duration::from_nanos(rng.random_range(lo..=hi))
            }
            LatencySpec::LogNormal { p50, p99 } => {
                let mu = (p50.as_nanos() as f64).ln();
                let sigma = ((p99.as_nanos() as f64).ln() - mu) / Z_99;
                let z = standard_normal(rng);
                let nanos = (mu + sigma * z).exp();
                // exp() of a finite value is finite or +inf; cap far beyond any sane delay.
                Duration::from_nanos(if nanos >= u64::MAX as f64 {
                    u64::MAX
                } else {
                    nanos as u64
                })
            }
        }
    }
}

/// One standard normal draw by the Box–Muller transform.
fn standard_normal<R: rand::Rng + ?Sized>(rng: &mut R) -> f64 {
    // `random::<f64>()` is in [0, 1); 1 - u is in (0, 1], so ln never sees 0.
    let u1 = 1.0 - rng.random::<f64>();
    let u2 = rng.random::<f64>();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// A duration in nanoseconds, saturating (a parsed duration always fits).
fn nanos_u64(d: Duration) -> u64 {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

impl FromStr for LatencySpec {
    type Err = LatencySpecError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let malformed = || LatencySpecError::Malformed {
            text: text.to_string(),
        };
        let duration = |part: &str| {
            parse_duration(part).map_err(|source| LatencySpecError::BadDuration {
                text: text.to_string(),
                source,
            })
        };
        let (kind, params) = text.trim().split_once(':').ok_or_else(malformed)?;
        match kind.trim() {
            "fixed" => Ok(LatencySpec::Fixed(duration(params)?)),
            "uniform" => {
                let (lo, hi) = params.split_once("..").ok_or_else(malformed)?;
                let (min, max) = (duration(lo)?, duration(hi)?);
                if min > max {
                    return Err(LatencySpecError::ReversedRange {
                        text: text.to_string(),
                    });
                }
                Ok(LatencySpec::Uniform { min, max })
            }
            "lognormal" => {
                let (mut p50, mut p99) = (None, None);
                for part in params.split(',') {
                    let (name, value) = part.split_once('=').ok_or_else(malformed)?;
                    let slot = match name.trim() {
                        "p50" => &mut p50,
                        "p99" => &mut p99,
                        _ => return Err(malformed()),
                    };
                    if slot.replace(duration(value)?).is_some() {
                        return Err(malformed());
                    }
                }
                let (p50, p99) = (p50.ok_or_else(malformed)?, p99.ok_or_else(malformed)?);
                if p50.is_zero() || p99 < p50 {
                    return Err(LatencySpecError::BadPercentiles {
                        text: text.to_string(),
                    });
                }
                Ok(LatencySpec::LogNormal { p50, p99 })
            }
            _ => Err(malformed()),
        }
    }
}

impl fmt::Display for LatencySpec {
    /// Writes the spec in the form [`FromStr`] reads back.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            LatencySpec::Fixed(d) => write!(f, "fixed:{}", format_duration(d)),
            LatencySpec::Uniform { min, max } => write!(
                f,
                "uniform:{}..{}",
                format_duration(min),
                format_duration(max)
            ),
            LatencySpec::LogNormal { p50, p99 } => write!(
                f,
                "lognormal:p50={},p99={}",
                format_duration(p50),
                format_duration(p99)
            ),
        }
    }
}

impl Default for LatencySpec {
    /// The C4 default for `rail.latency`: `lognormal:p50=40ms,p99=400ms`.
    fn default() -> Self {
        LatencySpec::LogNormal {
            p50: Duration::from_millis(40),
            p99: Duration::from_millis(400),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand::rngs::StdRng;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn parses_the_three_c4_forms() {
        assert_eq!("fixed:5ms".parse(), Ok(LatencySpec::Fixed(ms(5))));
        assert_eq!(
            "uniform:10ms..50ms".parse(),
            Ok(LatencySpec::Uniform {
                min: ms(10),
                max: ms(50)
            })
        );
        assert_eq!(
            "lognormal:p50=40ms,p99=400ms".parse(),
            Ok(LatencySpec::LogNormal {
                p50: ms(40),
                p99: ms(400)
            })
        );
        // Order of the percentiles does not matter; surrounding spaces are tolerated.
        assert_eq!(
            " lognormal:p99=1s, p50=100ms ".parse(),
            Ok(LatencySpec::LogNormal {
                p50: ms(100),
                p99: ms(1000)
            })
        );
        assert_eq!(
            LatencySpec::default().to_string(),
            "lognormal:p50=40ms,p99=400ms"
        );
    }

    #[test]
    fn refusals_name_the_text_and_the_accepted_forms() {
        for bad in [
            "",
            "5ms",
            "gauss:5ms",
            "fixed:5",
            "fixed:",
            "uniform:10ms",
            "uniform:10ms..x",
            "lognormal:p50=40ms",
            "lognormal:p50=40ms,p90=100ms",
            "lognormal:p50=40ms,p50=50ms,p99=1s",
            "lognormal:40ms,400ms",
        ] {
            let err = bad.parse::<LatencySpec>().expect_err(bad).to_string();
            assert!(
                err.contains(&format!("{bad:?}")),
                "{err} should name {bad:?}"
            );
            assert!(
                err.contains("uniform:10ms..50ms"),
                "{err} should show the forms"
            );
        }
    }

    #[test]
    fn reversed_ranges_and_percentiles_are_refused() {
        assert!(matches!(
            "uniform:50ms..10ms".parse::<LatencySpec>(),
            Err(LatencySpecError::ReversedRange { .. })
        ));
        assert!(matches!(
            "lognormal:p50=400ms,p99=40ms".parse::<LatencySpec>(),
            Err(LatencySpecError::BadPercentiles { .. })
        ));
        assert!(matches!(
            "lognormal:p50=0ms,p99=40ms".parse::<LatencySpec>(),
            Err(LatencySpecError::BadPercentiles { .. })
        ));
        // Degenerate but meaningful: equal bounds are allowed.
        assert!("uniform:10ms..10ms".parse::<LatencySpec>().is_ok());
        assert!("lognormal:p50=40ms,p99=40ms".parse::<LatencySpec>().is_ok());
    }

    #[test]
    fn display_round_trips() {
        for text in [
            "fixed:5ms",
            "fixed:0ns",
            "uniform:10ms..50ms",
            "uniform:1500us..2s",
            "lognormal:p50=40ms,p99=400ms",
        ] {
            let spec: LatencySpec = text.parse().unwrap();
            assert_eq!(spec.to_string().parse::<LatencySpec>(), Ok(spec), "{text}");
        }
    }

    #[test]
    fn percentile_accessors_describe_each_form() {
        let u: LatencySpec = "uniform:0ms..100ms".parse().unwrap();
        assert_eq!((u.p50(), u.p99()), (ms(50), ms(99)));
        let f: LatencySpec = "fixed:7ms".parse().unwrap();
        assert_eq!((f.p50(), f.p99()), (ms(7), ms(7)));
        let l = LatencySpec::default();
        assert_eq!((l.p50(), l.p99()), (ms(40), ms(400)));
    }

    #[test]
    fn fixed_and_uniform_samples_stay_in_range() {
        let mut rng = StdRng::seed_from_u64(1);
        assert_eq!(LatencySpec::Fixed(ms(5)).sample(&mut rng), ms(5));
        let u = LatencySpec::Uniform {
            min: ms(10),
            max: ms(50),
        };
        for _ in 0..10_000 {
            let d = u.sample(&mut rng);
            assert!(d >= ms(10) && d <= ms(50), "{d:?}");
        }
    }

    #[test]
    fn lognormal_samples_land_near_p50_and_p99() {
        let spec = LatencySpec::default();
        let mut rng = StdRng::seed_from_u64(0x5eed);
        let mut samples: Vec<Duration> = (0..100_000).map(|_| spec.sample(&mut rng)).collect();
        samples.sort_unstable();
        let p50 = samples[50_000].as_secs_f64() * 1e3;
        let p99 = samples[99_000].as_secs_f64() * 1e3;
        // Sampling error at n = 100k is well under 1% (p50) and ~3% (p99); allow 3% and 8%.
        assert!((p50 - 40.0).abs() < 40.0 * 0.03, "p50 = {p50} ms");
        assert!((p99 - 400.0).abs() < 400.0 * 0.08, "p99 = {p99} ms");
    }

    #[test]
    fn same_seed_replays_the_same_delays() {
        let spec = LatencySpec::default();
        let draw = |seed| {
            let mut rng = StdRng::seed_from_u64(seed);
            (0..64).map(|_| spec.sample(&mut rng)).collect::<Vec<_>>()
        };
        assert_eq!(draw(42), draw(42));
        assert_ne!(draw(42), draw(43));
    }
}
