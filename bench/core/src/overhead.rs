//! The delay proxy's own cost, as measured once per run (a zero-delay proxy
//! against a direct path, interleaved): a value the driver measures, the run's
//! manifest records and the report prints.

use hdrhistogram::Histogram;
use serde::{Deserialize, Serialize};

/// The zero-delay proxy's own cost: L2 heartbeat RTTs sent directly to the
/// lock-server and through a zero-delay proxy, interleaved (A B A B …) on one
/// session, in µs.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProxyOverhead {
    /// Heartbeats per path.
    pub samples: u64,
    /// Direct RTT median, µs.
    pub direct_p50_us: u64,
    /// Direct RTT 99th percentile, µs.
    pub direct_p99_us: u64,
    /// Proxied (zero delay) RTT median, µs.
    pub proxied_p50_us: u64,
    /// Proxied (zero delay) RTT 99th percentile, µs.
    pub proxied_p99_us: u64,
    /// `proxied_p50 − direct_p50`, µs (negative: within noise).
    pub overhead_p50_us: i64,
    /// `proxied_p99 − direct_p99`, µs.
    pub overhead_p99_us: i64,
}

impl std::fmt::Display for ProxyOverhead {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} interleaved heartbeats per path: direct p50 {:.3} ms p99 {:.3} ms, \
             zero-delay proxy p50 {:.3} ms p99 {:.3} ms; overhead p50 {:+.3} ms, p99 {:+.3} ms",
            self.samples,
            self.direct_p50_us as f64 / 1e3,
            self.direct_p99_us as f64 / 1e3,
            self.proxied_p50_us as f64 / 1e3,
            self.proxied_p99_us as f64 / 1e3,
            self.overhead_p50_us as f64 / 1e3,
            self.overhead_p99_us as f64 / 1e3,
        )
    }
}

/// The [`ProxyOverhead`] of a direct and a proxied RTT histogram (µs).
pub fn overhead_of(direct: &Histogram<u64>, proxied: &Histogram<u64>) -> ProxyOverhead {
    let q = |h: &Histogram<u64>, q: f64| h.value_at_quantile(q);
    let diff = |a: u64, b: u64| a as i64 - b as i64;
    ProxyOverhead {
        samples: direct.len().min(proxied.len()),
        direct_p50_us: q(direct, 0.5),
        direct_p99_us: q(direct, 0.99),
        proxied_p50_us: q(proxied, 0.5),
        proxied_p99_us: q(proxied, 0.99),
        overhead_p50_us: diff(q(proxied, 0.5), q(direct, 0.5)),
        overhead_p99_us: diff(q(proxied, 0.99), q(direct, 0.99)),
    }
}
