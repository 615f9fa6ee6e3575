//! A heartbeat RTT distribution measured where the lock runs:
//! the SDK's corrected-RTT histogram (`lock_heartbeat_rtt_corrected_seconds`,
//! classic Prometheus buckets) summed over a fleet, from a live Prometheus
//! (`bench adr --rtt-from prometheus:URL --window D`) or from a file of the
//! text exposition (`--rtt-from FILE`, e.g. a saved `/metrics` scrape of
//! every worker, concatenated). `bench adr` writes it into the pack as
//! [`PRODUCTION_RTT_JSON`], and the evidence document's production
//! condition (the projection and the proposed revision) then uses it instead
//! of the lab's RTTs.
//!
//! A bucket says only that its samples were at most its bound, so
//! [`ProductionRtt::histogram`] records each bucket's samples *at* its upper
//! bound: every quantile read from it is an upper bound, at most one bucket
//! (≤ 28 % on the SDK's ladder, `fencepost_api::buckets`) above the truth,
//! which errs on the side of a larger margin. Samples in the `+Inf` bucket
//! are recorded at the largest finite bound and counted in
//! [`ProductionRtt::above_top`].

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use bench_core::hist::new_histogram;
use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// The pack file a measured production distribution is kept in.
pub const PRODUCTION_RTT_JSON: &str = "production-rtt.json";
/// The family read: the SDK's heartbeat RTT corrected for coordinated omission.
pub const FAMILY: &str = "lock_heartbeat_rtt_corrected_seconds";

/// One cumulative bucket: samples at most `le` seconds.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Bucket {
    /// The upper bound as the exposition spells it (`0.1`, `+Inf`).
    pub le: String,
    /// Samples at most `le` (cumulative), summed over the series.
    pub count: f64,
}

/// A measured production RTT distribution; `production-rtt.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProductionRtt {
    /// Where it came from: `prometheus:URL` or the file's path.
    pub source: String,
    /// What was read: the PromQL asked, or the family of the file.
    pub query: String,
    /// The window of a Prometheus source (`1h`), none for a file.
    pub window: Option<String>,
    /// The cumulative buckets, ascending by bound, `+Inf` last.
    pub buckets: Vec<Bucket>,
}

/// Why a distribution could not be read or used.
#[derive(Debug, thiserror::Error)]
pub enum ProductionRttError {
    /// The text has no bucket line of the family.
    #[error("{source_name}: no {FAMILY}_bucket series (is this the SDK's /metrics?)")]
    NoBuckets {
        /// The file or URL read.
        source_name: String,
    },
    /// A bucket line or bound could not be parsed.
    #[error("{source_name}: unreadable bucket {line:?}")]
    BadLine {
        /// The file or URL read.
        source_name: String,
        /// The offending line or label.
        line: String,
    },
    /// The buckets hold no sample.
    #[error("{source_name}: the {FAMILY} buckets hold no sample")]
    Empty {
        /// The file or URL read.
        source_name: String,
    },
    /// The file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: std::io::Error,
    },
    /// The pack's file is not the JSON this module writes.
    #[error("{path}: {source}")]
    Json {
        /// The file.
        path: PathBuf,
        /// The cause.
        source: serde_json::Error,
    },
}

/// A bound as a number (`+Inf` as infinity).
fn bound(le: &str) -> Option<f64> {
    if le == "+Inf" {
        Some(f64::INFINITY)
    } else {
        le.parse().ok().filter(|v: &f64| v.is_finite() && *v >= 0.0)
    }
}

impl ProductionRtt {
    /// From `(le, cumulative count)` pairs (one per series and bound: summed
    /// by bound here), as a Prometheus query or a scrape gives them.
    pub fn from_pairs(
        source: &str,
        query: &str,
        window: Option<String>,
        pairs: impl IntoIterator<Item = (String, f64)>,
    ) -> Result<Self, ProductionRttError> {
        let mut by_le: BTreeMap<String, f64> = BTreeMap::new();
        for (le, c) in pairs {
            if bound(&le).is_none() || !c.is_finite() || c < 0.0 {
                return Err(ProductionRttError::BadLine {
                    source_name: source.to_owned(),
                    line: format!("le=\"{le}\" {c}"),
                });
            }
            *by_le.entry(le).or_default() += c;
        }
        if by_le.is_empty() {
            return Err(ProductionRttError::NoBuckets {
                source_name: source.to_owned(),
            });
        }
        let mut buckets: Vec<Bucket> = by_le
            .into_iter()
            .map(|(le, count)| Bucket { le, count })
            .collect();
        buckets.sort_by(|a, b| {
            bound(&a.le)
                .unwrap_or(f64::INFINITY)
                .total_cmp(&bound(&b.le).unwrap_or(f64::INFINITY))
        });
        let rtt = ProductionRtt {
            source: source.to_owned(),
            query: query.to_owned(),
            window,
            buckets,
        };
        if rtt.samples() == 0 {
            return Err(ProductionRttError::Empty {
                source_name: source.to_owned(),
            });
        }
        Ok(rtt)
    }

    /// From the Prometheus text exposition `text` (one or more scrapes
    /// concatenated): every `lock_heartbeat_rtt_corrected_seconds_bucket`
    /// line, summed by `le`.
    pub fn from_exposition(source: &str, text: &str) -> Result<Self, ProductionRttError> {
        let prefix = format!("{FAMILY}_bucket");
        let bad = |line: &str| ProductionRttError::BadLine {
            source_name: source.to_owned(),
            line: line.to_owned(),
        };
        let mut pairs = Vec::new();
        for line in text.lines().map(str::trim) {
            let Some(rest) = line.strip_prefix(&prefix) else {
                continue;
            };
            let (labels, value) = rest.rsplit_once('}').ok_or_else(|| bad(line))?;
            let le = labels
                .split(',')
                .find_map(|l| l.trim().trim_start_matches('{').strip_prefix("le="))
                .map(|v| v.trim_matches('"').to_owned())
                .ok_or_else(|| bad(line))?;
            let count: f64 = value
                .split_whitespace()
                .next()
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| bad(line))?;
            pairs.push((le, count));
        }
        Self::from_pairs(source, FAMILY, None, pairs)
    }

    /// Samples in all (the `+Inf` bucket's count, rounded).
    pub fn samples(&self) -> u64 {
        self.buckets.last().map_or(0, |b| b.count.round() as u64)
    }

    /// Samples above the largest finite bound (in the `+Inf` bucket).
    pub fn above_top(&self) -> u64 {
        let n = self.buckets.len();
        if n < 2 {
            return 0;
        }
        (self.buckets[n - 1].count - self.buckets[n - 2].count)
            .round()
            .max(0.0) as u64
    }

    /// The distribution as an HDR histogram (µs), each bucket's samples at its
    /// upper bound (the `+Inf` bucket's at the largest finite bound): every
    /// quantile is an upper bound at the bucket resolution.
    pub fn histogram(&self) -> Histogram<u64> {
        let mut h = new_histogram();
        let top = self
            .buckets
            .iter()
            .filter_map(|b| bound(&b.le))
            .filter(|b| b.is_finite())
            .fold(0.0, f64::max);
        let mut below = 0.0;
        for b in &self.buckets {
            let upper = bound(&b.le).unwrap_or(f64::INFINITY);
            let at = if upper.is_finite() { upper } else { top };
            let n = (b.count - below).round().max(0.0) as u64;
            below = b.count.max(below);
            let us = ((at * 1e6).round() as u64).max(1);
            if n > 0 {
                // Saturates at the histogram's highest trackable value.
                let _ = h.record_n(us.min(h.high()), n);
            }
        }
        h
    }

    /// Writes it into `dir` as [`PRODUCTION_RTT_JSON`].
    pub fn write(&self, dir: &Path) -> Result<PathBuf, ProductionRttError> {
        let path = dir.join(PRODUCTION_RTT_JSON);
        let json = serde_json::to_vec_pretty(self).map_err(|source| ProductionRttError::Json {
            path: path.clone(),
            source,
        })?;
        std::fs::write(&path, json).map_err(|source| ProductionRttError::Io {
            path: path.clone(),
            source,
        })?;
        Ok(path)
    }

    /// Reads `dir`'s [`PRODUCTION_RTT_JSON`]; `Ok(None)` when there is none.
    pub fn read(dir: &Path) -> Result<Option<Self>, ProductionRttError> {
        let path = dir.join(PRODUCTION_RTT_JSON);
        let bytes = match std::fs::read(&path) {
            Ok(b) => b,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(ProductionRttError::Io { path, source }),
        };
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|source| ProductionRttError::Json { path, source })
    }

    /// Where it came from, in words: `prometheus:URL over 1h` or the file.
    pub fn describe(&self) -> String {
        match &self.window {
            Some(w) => format!("{} over {w}", self.source),
            None => self.source.clone(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCRAPE: &str = "\
# TYPE lock_heartbeat_rtt_corrected_seconds histogram
lock_heartbeat_rtt_corrected_seconds_bucket{le=\"0.001\"} 10
lock_heartbeat_rtt_corrected_seconds_bucket{le=\"0.01\"} 980
lock_heartbeat_rtt_corrected_seconds_bucket{le=\"0.1\"} 995
lock_heartbeat_rtt_corrected_seconds_bucket{le=\"+Inf\"} 1000
lock_heartbeat_rtt_corrected_seconds_sum 5.0
lock_heartbeat_rtt_corrected_seconds_count 1000
lock_heartbeat_rtt_seconds_bucket{le=\"0.1\"} 7
";

    #[test]
    fn two_scrapes_sum_by_bound_and_quantiles_are_upper_bounds() {
        let text = format!("{SCRAPE}{}", SCRAPE.replace("job", "x"));
        let r = ProductionRtt::from_exposition("a.prom", &text).unwrap();
        assert_eq!(r.samples(), 2000);
        assert_eq!(r.above_top(), 10);
        let h = r.histogram();
        assert_eq!(h.len(), 2000);
        // p50 falls in (1 ms, 10 ms]: read as 10 ms; p99.9 in +Inf: the top bound.
        let p50 = h.value_at_quantile(0.5);
        assert!((9_990..=10_010).contains(&p50), "{p50}");
        let p999 = h.value_at_quantile(0.999);
        assert!((99_900..=100_100).contains(&p999), "{p999}");
    }

    #[test]
    fn labels_beside_le_and_json_round_trip() {
        let text = "lock_heartbeat_rtt_corrected_seconds_bucket{job=\"w\",le=\"0.5\"} 3\n\
                    lock_heartbeat_rtt_corrected_seconds_bucket{job=\"w\",le=\"+Inf\"} 4\n";
        let r = ProductionRtt::from_exposition("f", text).unwrap();
        assert_eq!(r.samples(), 4);
        let dir = std::env::temp_dir().join(format!("prod-rtt-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        r.write(&dir).unwrap();
        assert_eq!(ProductionRtt::read(&dir).unwrap(), Some(r));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn no_or_empty_buckets_are_errors_naming_the_source() {
        let e = ProductionRtt::from_exposition("x.prom", "up 1\n").unwrap_err();
        assert!(e.to_string().contains("x.prom"), "{e}");
        let zero = "lock_heartbeat_rtt_corrected_seconds_bucket{le=\"+Inf\"} 0\n";
        assert!(matches!(
            ProductionRtt::from_exposition("z", zero),
            Err(ProductionRttError::Empty { .. })
        ));
    }
}
