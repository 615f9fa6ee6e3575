//! `bench adr --rtt-from SRC`: a heartbeat RTT distribution measured in
//! production, for the evidence document's production condition (the
//! projection and the proposed revision) instead of the lab's RTTs.
//!
//! - `prometheus:URL`: the fleet's corrected-RTT buckets over `--window`,
//!   `sum by (le) (increase(lock_heartbeat_rtt_corrected_seconds_bucket{S}[W]))`;
//! - a file path: the Prometheus text exposition of the SDK's metrics (one
//!   scrape, or several concatenated: summed by bucket).
//!
//! Either is written into the pack as `production-rtt.json`, so the document
//! stays a pure function of the pack (`bench adr --render-only` re-renders it).

use std::path::Path;
use std::time::Duration;

use bench_analysis::production_rtt::{FAMILY, ProductionRtt, ProductionRttError};
use bench_analysis::triggers::prom_duration;

use crate::prometheus::{ChecksError, client, query_samples};

/// Why the distribution could not be had (exit code 2).
#[derive(Debug, thiserror::Error)]
pub enum RttFromError {
    /// `--window` is not a duration greater than 0.
    #[error("--window {0:?}: expected a duration greater than 0, e.g. 1h, 30m")]
    Window(String),
    /// The file could not be read.
    #[error("--rtt-from {path}: {source}")]
    Read {
        /// The file.
        path: String,
        /// The cause.
        source: std::io::Error,
    },
    /// The buckets could not be read or hold nothing.
    #[error(transparent)]
    Rtt(#[from] ProductionRttError),
    /// Prometheus could not be asked.
    #[error(transparent)]
    Prometheus(#[from] ChecksError),
}

/// The PromQL of the fleet's buckets over `window`, with `selector`'s matchers.
pub fn bucket_query(window: Duration, selector: &str) -> String {
    let sel = if selector.trim().is_empty() {
        String::new()
    } else {
        format!("{{{}}}", selector.trim())
    };
    format!(
        "sum by (le) (increase({FAMILY}_bucket{sel}[{}]))",
        prom_duration(window)
    )
}

/// Reads the distribution `src` names (see the module doc).
pub fn fetch(src: &str, window: &str, selector: &str) -> Result<ProductionRtt, RttFromError> {
    let Some(base) = src.strip_prefix("prometheus:") else {
        let text = std::fs::read_to_string(src).map_err(|source| RttFromError::Read {
            path: src.to_owned(),
            source,
        })?;
        return Ok(ProductionRtt::from_exposition(src, &text)?);
    };
    let w = fencepost_api::parse_duration(window)
        .ok()
        .filter(|d| !d.is_zero())
        .ok_or_else(|| RttFromError::Window(window.to_owned()))?;
    let promql = bucket_query(w, selector);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let http = client(base)?;
    let samples = rt.block_on(query_samples(&http, base, &promql))?;
    let pairs = samples.into_iter().map(|(metric, v)| {
        let le = metric["le"].as_str().unwrap_or("").to_owned();
        (le, v)
    });
    Ok(ProductionRtt::from_pairs(
        src,
        &promql,
        Some(prom_duration(w)),
        pairs,
    )?)
}

/// Fetches `src` into `out` (created), printing what was read.
pub fn fetch_into(src: &str, window: &str, selector: &str, out: &Path) -> Result<(), RttFromError> {
    let rtt = fetch(src, window, selector)?;
    std::fs::create_dir_all(out).map_err(|source| RttFromError::Read {
        path: out.display().to_string(),
        source,
    })?;
    let path = rtt.write(out)?;
    let h = rtt.histogram();
    println!(
        "bench adr: production RTT from {}: {} samples, corrected p50 ≤ {:.1} ms, p99 ≤ {:.1} ms \
         (bucket upper bounds) -> {}",
        rtt.describe(),
        rtt.samples(),
        h.value_at_quantile(0.5) as f64 / 1e3,
        h.value_at_quantile(0.99) as f64 / 1e3,
        path.display()
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_query_sums_the_fleet_by_bucket_over_the_window() {
        assert_eq!(
            bucket_query(Duration::from_secs(3600), ""),
            "sum by (le) (increase(lock_heartbeat_rtt_corrected_seconds_bucket[1h]))"
        );
        assert_eq!(
            bucket_query(Duration::from_secs(1800), r#"job="payout""#),
            r#"sum by (le) (increase(lock_heartbeat_rtt_corrected_seconds_bucket{job="payout"}[30m]))"#
        );
    }

    #[test]
    fn a_missing_file_and_a_bad_window_name_themselves() {
        let e = fetch("/nonexistent/x.prom", "1h", "").unwrap_err();
        assert!(e.to_string().contains("/nonexistent/x.prom"), "{e}");
        let e = fetch("prometheus:http://127.0.0.1:9", "soon", "").unwrap_err();
        assert!(e.to_string().contains("--window \"soon\""), "{e}");
    }
}
