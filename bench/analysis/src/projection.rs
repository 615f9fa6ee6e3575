//! `projection.csv`: the measured heartbeat RTT, unscaled, projected onto
//! the production configuration ADR-006 decides (30 s lease, 15 s session,
//! 5 s rail read timeout, margin 0.30; `--projection-*` change them).
//!
//! The time base scales leases, timeouts and the rail by `lease / 30 s` but
//! never the network, so a 1 s cell's RTT is 30× larger relative to its
//! lease than in production: its trigger 1 is a stress test. Here the RTT
//! distribution the workers measured (corrected for coordinated omission,
//! pooled over every cell of a backend, in absolute µs) is held against the
//! production numbers instead: per margin, trigger 1 (`p99 ≤ min(lease,
//! session) × m / 3`, same sample rule as [`crate::triggers`]) and trigger 3
//! (D4: the window just before a heartbeat > read timeout + 2 s), the
//! smallest margin covering the p99.9 (`min_margin`, with its cluster-bootstrap
//! interval, [`crate::pool`]) and each margin's headroom in ms. What it does
//! not preserve: the RTT was measured under the scaled cells' load (heartbeat
//! periods 30× shorter, so more heartbeats per second on the same cores).
//! [`project`] is pure.

use std::path::Path;
use std::time::Duration;

use fencepost_api::buckets::trigger1_budget;
use fencepost_sdk::lease::{HEARTBEAT_DIVISOR, heartbeat_period, ppm_nearest};
use polars::prelude::{Column, DataFrame, PolarsError};
use serde::{Deserialize, Serialize};

use crate::frame::{TableError, write_csv};
use crate::pool::Pooled;
use crate::summary::{FLOOR_QUANTILE, MIN_SAMPLES_P999, margin_for, table};
use crate::triggers::{Verdict, rtt_budget_ms, trigger1_verdict};
use bench_core::hist;
use bench_core::timebase::D4_EXTRA;

/// File name of the projection.
pub const PROJECTION_CSV: &str = "projection.csv";

/// The production configuration a run's RTT is projected onto.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Production {
    /// Lease TTL, ms (ADR-006: 30 s).
    pub lease_ms: u64,
    /// Session TTL, ms (15 s).
    pub session_ttl_ms: u64,
    /// `rail.read.timeout`, ms (5 s); D4's hop is it + 2 s.
    pub read_timeout_ms: u64,
    /// The margin whose headroom the report states (0.30).
    pub margin: f64,
}

impl Default for Production {
    fn default() -> Self {
        Production {
            lease_ms: 30_000,
            session_ttl_ms: 15_000,
            read_timeout_ms: 5_000,
            margin: 0.30,
        }
    }
}

/// One margin at the production configuration: a row of `projection.csv`.
#[derive(Clone, Debug, PartialEq)]
pub struct ProjectionRow {
    /// The backend whose cells' RTT is projected.
    pub backend: String,
    /// The margin projected.
    pub margin: f64,
    /// Whether it is the production margin (`--projection-margin`).
    pub production_margin: bool,
    /// Production lease, ms.
    pub lease_ms: u64,
    /// Production session TTL, ms.
    pub session_ttl_ms: u64,
    /// Production read timeout, ms.
    pub rail_read_timeout_ms: u64,
    /// D4's worst-case hop (read timeout + 2 s), ms.
    pub worst_case_hop_ms: u64,
    /// Cells whose corrected RTT histograms were pooled.
    pub cells_pooled: u64,
    /// Samples pooled.
    pub rtt_samples: u64,
    /// Pooled corrected RTT median, µs (unscaled).
    pub rtt_corrected_p50_us: u64,
    /// Pooled corrected RTT p99 (≥), µs.
    pub rtt_corrected_p99_us: u64,
    /// Pooled corrected RTT p99.9 (≥), µs.
    pub rtt_corrected_p999_us: u64,
    /// Trigger 1's budget min(lease, session) × margin / 3, ms.
    pub trigger1_budget_ms: f64,
    /// Pooled samples above that budget.
    pub trigger1_over_budget: u64,
    /// Trigger 1 at production: `fired`, `ok` or `insufficient_data` (1,000 samples).
    pub trigger1_verdict: String,
    /// Trigger 3: usable − heartbeat period − corrected p50, ms.
    pub trigger3_window_ms: f64,
    /// Trigger 3 at production: `fired` when that window ≤ the hop, else `ok`.
    pub trigger3_verdict: String,
    /// 3 × p99.9 / min(lease, session): the smallest margin covering the p99.9.
    pub min_margin: f64,
    /// `min_margin` at the p99.9's 95 % lower end (cluster bootstrap, [`crate::pool`]).
    pub min_margin_ci95_lo: f64,
    /// At the upper end.
    pub min_margin_ci95_hi: f64,
    /// `ok` with ≥ 10,000 samples, else `insufficient_data` (the p99.9 is near the maximum).
    pub min_margin_verdict: String,
    /// Trigger-1 budget at this margin minus the p99.9, ms: (margin − min_margin) × base / 3.
    pub headroom_ms: f64,
    /// The same at `min_margin_ci95_hi` (the pessimistic end), ms.
    pub headroom_ci95_lo_ms: f64,
}

table!(ProjectionRow, PROJECTION_COLUMNS, projection_frame;
    backend, margin, production_margin, lease_ms, session_ttl_ms, rail_read_timeout_ms,
    worst_case_hop_ms, cells_pooled, rtt_samples, rtt_corrected_p50_us, rtt_corrected_p99_us,
    rtt_corrected_p999_us, trigger1_budget_ms, trigger1_over_budget, trigger1_verdict,
    trigger3_window_ms, trigger3_verdict, min_margin, min_margin_ci95_lo, min_margin_ci95_hi,
    min_margin_verdict, headroom_ms, headroom_ci95_lo_ms,
);

/// Projects the pooled corrected RTT of `pooled` (µs, unscaled; the cells
/// of `backend`, [`crate::pool`]) onto `prod` for every margin in `margins`
/// (sorted, the production margin added). Empty without samples.
pub fn project(
    backend: &str,
    pooled: &Pooled,
    prod: &Production,
    margins: &[f64],
) -> Vec<ProjectionRow> {
    let h = &pooled.corrected;
    let cells = pooled.cells as u64;
    let Some(ci) = pooled.quantile(FLOOR_QUANTILE) else {
        return Vec::new();
    };
    let s = hist::summarize(h);
    let mut margins: Vec<f64> = margins.to_vec();
    margins.push(prod.margin);
    margins.sort_by(f64::total_cmp);
    margins.dedup_by(|a, b| (*a - *b).abs() < 1e-9);
    let base = prod.lease_ms.min(prod.session_ttl_ms);
    let hop_ms = prod.read_timeout_ms + D4_EXTRA.as_millis() as u64;
    let (min_margin, lo, hi) = (
        margin_for(ci.value_us, base),
        margin_for(ci.lo_us, base),
        margin_for(ci.hi_us, base),
    );
    margins
        .into_iter()
        .map(|m| {
            let budget_ms = rtt_budget_ms(prod.lease_ms, prod.session_ttl_ms, m);
            let budget_us = (budget_ms * 1e3) as u64;
            let over = s.count - h.count_between(0, budget_us);
            let t1 = trigger1_verdict(s.count, over, s.p99 as f64 / 1e3, budget_ms);
            let usable_ms = base as f64 * (1.0 - m);
            let ppm = ppm_nearest(m);
            let period: Duration = heartbeat_period(
                prod.session_ttl_ms,
                Some(prod.lease_ms),
                ppm,
                HEARTBEAT_DIVISOR,
            );
            let window_ms = usable_ms - period.as_secs_f64() * 1e3 - s.p50 as f64 / 1e3;
            let window_ms = (window_ms * 1e3).round() / 1e3;
            let t3 = if window_ms <= hop_ms as f64 {
                Verdict::Fired
            } else {
                Verdict::Ok
            };
            ProjectionRow {
                backend: backend.to_owned(),
                margin: m,
                production_margin: (m - prod.margin).abs() < 1e-9,
                lease_ms: prod.lease_ms,
                session_ttl_ms: prod.session_ttl_ms,
                rail_read_timeout_ms: prod.read_timeout_ms,
                worst_case_hop_ms: hop_ms,
                cells_pooled: cells,
                rtt_samples: s.count,
                rtt_corrected_p50_us: s.p50,
                rtt_corrected_p99_us: s.p99,
                rtt_corrected_p999_us: ci.value_us,
                trigger1_budget_ms: budget_ms,
                trigger1_over_budget: over,
                trigger1_verdict: t1.as_str().to_owned(),
                trigger3_window_ms: window_ms,
                trigger3_verdict: t3.as_str().to_owned(),
                min_margin,
                min_margin_ci95_lo: lo,
                min_margin_ci95_hi: hi,
                min_margin_verdict: if s.count >= MIN_SAMPLES_P999 {
                    "ok"
                } else {
                    "insufficient_data"
                }
                .to_owned(),
                headroom_ms: round3(trigger1_budget(base as f64, m - min_margin)),
                headroom_ci95_lo_ms: round3(trigger1_budget(base as f64, m - hi)),
            }
        })
        .collect()
}

/// Rounds to 1e-3 (a µs, for values in ms).
fn round3(x: f64) -> f64 {
    (x * 1e3).round() / 1e3
}

/// Writes `projection.csv` into `dir`.
pub fn write_projection(dir: &Path, rows: &[ProjectionRow]) -> Result<(), TableError> {
    write_csv(dir, "projection", projection_frame(rows)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    use hdrhistogram::Histogram;

    fn rtt(us: u64, n: u64) -> Histogram<u64> {
        let mut h = hist::new_histogram();
        h.record_n(us, n).unwrap();
        h
    }

    fn project(
        b: &str,
        h: &Histogram<u64>,
        _cells: u64,
        p: &Production,
        m: &[f64],
    ) -> Vec<ProjectionRow> {
        super::project(b, &Pooled::from_histogram(h.clone()), p, m)
    }

    #[test]
    fn a_millisecond_rtt_leaves_the_production_margin_seconds_of_headroom() {
        let prod = Production::default();
        let rows = project("fencepost", &rtt(2_000, 20_000), 3, &prod, &[0.1]);
        assert_eq!(rows.len(), 2, "0.1 and the production 0.30");
        let r30 = rows.iter().find(|r| r.production_margin).unwrap();
        assert_eq!(r30.trigger1_budget_ms, 1500.0, "15 s × 0.30 / 3");
        assert_eq!(r30.trigger1_verdict, "ok");
        assert!((r30.min_margin - 0.0004).abs() < 1e-6, "3 × 2 ms / 15 s");
        assert!(
            (r30.headroom_ms - 1498.0).abs() < 0.1,
            "{}",
            r30.headroom_ms
        );
        // D4 at the ADR defaults: 15 s × 0.7 − 3.5 s − 2 ms < 7 s: fired.
        assert_eq!(r30.trigger3_verdict, "fired");
        let r10 = &rows[0];
        assert_eq!(r10.trigger3_verdict, "ok", "{}", r10.trigger3_window_ms);
    }

    #[test]
    fn a_slow_tail_fires_trigger_1_and_few_samples_say_insufficient_data() {
        let prod = Production::default();
        let mut h = rtt(2_000, 980);
        h.record_n(2_000_000, 20).unwrap();
        let rows = project("fencepost", &h, 1, &prod, &[]);
        assert_eq!(rows[0].trigger1_verdict, "fired", "20 of 1,000 above 1.5 s");
        assert_eq!(rows[0].min_margin_verdict, "insufficient_data");
        assert!(rows[0].headroom_ms < 0.0);
        let few = project("fencepost", &rtt(2_000, 10), 1, &prod, &[]);
        assert_eq!(few[0].trigger1_verdict, "insufficient_data");
        assert!(project("fencepost", &hist::new_histogram(), 0, &prod, &[]).is_empty());
    }
}
