//! `summary.parquet` / `summary.csv`: one row per (backend, policy, TTL,
//! margin) point of the grid over its `--repeat` repetitions — the median
//! throughput with its 95 % interval (t over repeats, [`crate::stats`]),
//! heartbeat percentiles from the repeats' merged HDR histograms, the
//! abandonment with its interval, and the derived margin floor
//! `m_min = 3 × p99.9(corrected RTT) / min(lease, session TTL)` with its
//! bootstrap interval. Also the per-TTL floors the recommendation starts
//! from ([`Floor`]), pooled over every cell of the TTL: the *margin needed
//! (trigger 1)*, `3 × p99(corrected RTT) / min(lease, session TTL)` at the
//! upper end of the p99's 95 % interval, ADR-006 trigger 1 solved for the margin.
//!
//! [`build`] is pure: it takes the rows and a histogram lookup, so the
//! decisions downstream are testable without running a cell. Every pooled
//! figure comes from the cells' histograms through [`crate::pool`]; a cell
//! whose histogram is missing is an error naming the file, never a fallback
//! to the rows' own percentiles. The columns are stable: an ADR evidence pack reads
//! them, and docs/reference/results.md documents each.

use std::collections::BTreeMap;
use std::path::Path;

use polars::prelude::{Column, DataFrame, PolarsError};

use crate::frame::{TableError, write_frame};
use crate::pool::{self, MissingHistogram, SampleSource};
use crate::results::CellRow;
use crate::stats::{CI_METHOD, Interval, QuantileCi};
use crate::triggers::{D4_UNSATISFIABLE, FENCED_OUT_WITH_CLIENT_CHECK, RTT_P99_VS_MARGIN};
use bench_core::hist;

/// File name of the parquet copy of the summary.
pub const SUMMARY_PARQUET: &str = "summary.parquet";
/// File name of the csv copy of the summary.
pub const SUMMARY_CSV: &str = "summary.csv";
/// Samples a p99.9 needs before `m_min` is more than a lower bound (~100 × the tail).
pub const MIN_SAMPLES_P999: u64 = 10_000;
/// The quantile of the corrected RTT the per-point `m_min` columns and the
/// production projection's smallest margin are taken at.
pub const FLOOR_QUANTILE: f64 = 0.999;
/// The quantile of ADR-006's trigger 1 (`p99 RTT > min(lease, session TTL) ×
/// margin / 3`), which the recommendation's floor ([`Floor`]) solves for the margin.
pub const TRIGGER1_QUANTILE: f64 = 0.99;

/// Builds `fn to_frame(&[T]) -> DataFrame` and the column list of a table
/// struct from its field names, in column order.
macro_rules! table {
    ($ty:ident, $cols:ident, $frame:ident; $($f:ident),+ $(,)?) => {
        /// Column names of the table, in file order.
        pub const $cols: &[&str] = &[$(stringify!($f)),+];

        fn $frame(rows: &[$ty]) -> Result<DataFrame, PolarsError> {
            DataFrame::new(rows.len(), vec![$(
                Column::new(stringify!($f).into(), rows.iter().map(|r| r.$f.clone()).collect::<Vec<_>>()),
            )+])
        }
    };
}
pub(crate) use table;

/// One (backend, policy, TTL, margin) point over its repeats: a row of `summary.csv`.
#[derive(Clone, Debug, PartialEq)]
pub struct SummaryRow {
    /// `fencepost` or `etcd`.
    pub backend: String,
    /// `fixed` or `adaptive:k=…,floor=…,ceiling=…`.
    pub margin_policy: String,
    /// Lease TTL, ms.
    pub lease_ms: u64,
    /// Session TTL, ms.
    pub session_ttl_ms: u64,
    /// The configured margin (adaptive: its ceiling).
    pub margin: f64,
    /// The `group` id of the repeats (results column `group`).
    pub group: String,
    /// Repeats summarised.
    pub n_repeats: u32,
    /// Their seeds, `;`-separated, in repeat order.
    pub seeds: String,
    /// Mean over repeats of `margin_effective` (the margin the workers used).
    pub margin_effective_mean: f64,
    /// Median throughput over repeats, payouts/s.
    pub throughput_median: f64,
    /// Mean throughput over repeats.
    pub throughput_mean: f64,
    /// Smallest repeat's throughput.
    pub throughput_min: f64,
    /// Largest repeat's throughput.
    pub throughput_max: f64,
    /// Lower end of the 95 % interval (t over repeats; NaN with one repeat).
    pub throughput_ci95_lo: f64,
    /// Upper end of the 95 % interval.
    pub throughput_ci95_hi: f64,
    /// How the intervals are computed: `t` (Student t over repeat values, widened to hold the median).
    pub ci_method: String,
    /// Median over repeats of abandoned_insufficient_lease / attempts.
    pub abandonment_median: f64,
    /// Lower end of its 95 % interval (t, clamped to [0, 1]).
    pub abandonment_ci95_lo: f64,
    /// Upper end of its 95 % interval.
    pub abandonment_ci95_hi: f64,
    /// Attempts abandoned by D4 (insufficient lease), summed over repeats.
    pub abandoned_insufficient_lease: u64,
    /// Payout attempts, summed.
    pub attempts: u64,
    /// Payouts paid, summed.
    pub payouts_paid: u64,
    /// Heartbeat exchanges, summed.
    pub hb_attempts: u64,
    /// Of those timed out, summed.
    pub hb_timeouts: u64,
    /// Sessions lost, summed.
    pub session_lost: u64,
    /// Samples in the pooled corrected RTT histogram.
    pub hb_corrected_count: u64,
    /// Pooled corrected RTT median, µs.
    pub hb_rtt_corrected_p50_us: u64,
    /// Pooled corrected RTT p99 (≥: censored samples), µs.
    pub hb_rtt_corrected_p99_us: u64,
    /// Pooled corrected RTT p99.9 (≥), µs.
    pub hb_rtt_corrected_p999_us: u64,
    /// Lower end of the p99.9's 95 % interval (cluster bootstrap, [`crate::pool`]), µs.
    pub hb_rtt_corrected_p999_lo_us: u64,
    /// Upper end, µs.
    pub hb_rtt_corrected_p999_hi_us: u64,
    /// Pooled raw RTT p99 (≥), µs.
    pub hb_rtt_p99_us: u64,
    /// Pooled raw RTT p99.9 (≥), µs.
    pub hb_rtt_p999_us: u64,
    /// How the p99.9's interval was computed ([`crate::pool::Pooled::method`]):
    /// the cluster bootstrap over the cells and their time blocks.
    pub quantile_ci_method: String,
    /// 3 × pooled corrected p99.9 / min(lease, session TTL): the smallest margin whose
    /// trigger-1 budget covers the p99.9.
    pub m_min: f64,
    /// `m_min` at the p99.9 interval's lower end.
    pub m_min_ci95_lo: f64,
    /// `m_min` at its upper end.
    pub m_min_ci95_hi: f64,
    /// `ok` with ≥ 10,000 pooled samples, else `insufficient_data` (the p99.9 is near the maximum).
    pub m_min_verdict: String,
    /// Repeats on which trigger 1 fired.
    pub trigger1_fired: u32,
    /// Repeats on which trigger 3 (D4 sawtooth) fired.
    pub trigger3_fired: u32,
    /// Repeats on which trigger 4 fired.
    pub trigger4_fired: u32,
    /// Whether the ledger check passed on every repeat (no paid twice, no stale paid).
    pub ledger_ok: bool,
}

table!(SummaryRow, SUMMARY_COLUMNS, summary_frame;
    backend, margin_policy, lease_ms, session_ttl_ms, margin, group, n_repeats, seeds,
    margin_effective_mean, throughput_median, throughput_mean, throughput_min, throughput_max,
    throughput_ci95_lo, throughput_ci95_hi, ci_method, abandonment_median, abandonment_ci95_lo,
    abandonment_ci95_hi, abandoned_insufficient_lease, attempts, payouts_paid, hb_attempts,
    hb_timeouts, session_lost, hb_corrected_count, hb_rtt_corrected_p50_us,
    hb_rtt_corrected_p99_us, hb_rtt_corrected_p999_us, hb_rtt_corrected_p999_lo_us,
    hb_rtt_corrected_p999_hi_us, hb_rtt_p99_us, hb_rtt_p999_us, quantile_ci_method, m_min,
    m_min_ci95_lo, m_min_ci95_hi, m_min_verdict, trigger1_fired, trigger3_fired,
    trigger4_fired, ledger_ok,
);

impl SummaryRow {
    /// The throughput interval as an [`Interval`].
    pub fn throughput(&self) -> Interval {
        Interval {
            n: self.n_repeats as usize,
            median: self.throughput_median,
            mean: self.throughput_mean,
            min: self.throughput_min,
            max: self.throughput_max,
            lo: self.throughput_ci95_lo,
            hi: self.throughput_ci95_hi,
        }
    }

    /// Whether the policy is the fixed one.
    pub fn is_fixed(&self) -> bool {
        self.margin_policy == "fixed"
    }
}

/// The derived margin floor of one TTL (on one backend), pooled over every cell of it.
#[derive(Clone, Debug, PartialEq)]
pub struct Floor {
    /// `fencepost` or `etcd`.
    pub backend: String,
    /// Lease TTL, ms.
    pub lease_ms: u64,
    /// Session TTL, ms.
    pub session_ttl_ms: u64,
    /// Cells pooled.
    pub cells: usize,
    /// The pooled corrected RTT p99.9 and its interval (context: the tail beyond trigger 1).
    pub p999: QuantileCi,
    /// The pooled corrected RTT p99 and its interval: trigger 1's quantile.
    pub p99: QuantileCi,
    /// The margin needed (trigger 1): `3 × p99 / min(lease, session TTL)`.
    pub m_min: f64,
    /// At the p99 interval's lower end.
    pub m_min_lo: f64,
    /// At its upper end: the floor a recommended margin must reach.
    pub m_min_hi: f64,
    /// ≥ [`MIN_SAMPLES_P999`] samples.
    pub enough: bool,
    /// How the p99.9's interval was computed ([`crate::pool::Pooled::method`]).
    pub quantile_ci_method: String,
}

/// `3 × rtt / base`: the margin whose trigger-1 budget (base × m / 3) equals
/// `rtt_us`, rounded to 1e-6 (a ppm, the SDK's margin resolution).
pub fn margin_for(rtt_us: u64, base_ms: u64) -> f64 {
    round6(fencepost_api::buckets::trigger1_margin_for(
        rtt_us as f64,
        base_ms.max(1) as f64,
    ))
}

/// Rounds to 1e-6, so the tables do not show float noise (0.30000000000000004).
pub fn round6(x: f64) -> f64 {
    (x * 1e6).round() / 1e6
}

/// The pooled percentiles of `rows` (see [`crate::pool`]).
struct PooledRtt {
    count: u64,
    c50: u64,
    c99: u64,
    c999: QuantileCi,
    c99_ci: QuantileCi,
    r99: u64,
    r999: u64,
    method: String,
}

fn pooled_rtt(rows: &[&CellRow], src: &dyn SampleSource) -> Result<PooledRtt, MissingHistogram> {
    let p = pool::pool(src, rows.iter().copied())?;
    let c = hist::summarize(&p.corrected);
    let r = hist::summarize(&p.raw);
    let empty = |q| QuantileCi {
        n: 0,
        q,
        value_us: 0,
        lo_us: 0,
        hi_us: 0,
    };
    let ci = p.quantile(FLOOR_QUANTILE).unwrap_or(empty(FLOOR_QUANTILE));
    let ci99 = p
        .quantile(TRIGGER1_QUANTILE)
        .unwrap_or(empty(TRIGGER1_QUANTILE));
    Ok(PooledRtt {
        count: c.count,
        c50: c.p50,
        c99: c.p99,
        c999: ci,
        c99_ci: ci99,
        r99: r.p99,
        r999: r.p999,
        method: p.method(),
    })
}

/// The summary of a results table: its rows and the per-TTL floors.
#[derive(Clone, Debug, PartialEq)]
pub struct Summary {
    /// One row per (backend, policy, TTL, margin), in the table's order of first appearance.
    pub rows: Vec<SummaryRow>,
    /// One floor per (backend, TTL), by TTL.
    pub floors: Vec<Floor>,
}

/// Summarises `rows` (see the module doc) from the cells' histograms in
/// `src` ([`crate::pool::DirSamples`] for a results directory); `Err` names
/// the first histogram file that is missing.
pub fn build(rows: &[CellRow], src: &dyn SampleSource) -> Result<Summary, MissingHistogram> {
    let mut order: Vec<(String, String)> = Vec::new();
    let mut groups: BTreeMap<(String, String), Vec<&CellRow>> = BTreeMap::new();
    for r in rows {
        let key = (r.backend.clone(), group_key(r));
        if !groups.contains_key(&key) {
            order.push(key.clone());
        }
        groups.entry(key).or_default().push(r);
    }
    let out = order
        .iter()
        .map(|k| summarize_group(&groups[k], rows, src))
        .collect::<Result<_, _>>()?;
    let mut by_ttl: BTreeMap<(u64, String), Vec<&CellRow>> = BTreeMap::new();
    for r in rows {
        by_ttl
            .entry((r.lease_ms, r.backend.clone()))
            .or_default()
            .push(r);
    }
    let floors = by_ttl
        .into_iter()
        .map(|((lease_ms, backend), cells)| {
            let p = pooled_rtt(&cells, src)?;
            let session_ttl_ms = cells[0].session_ttl_ms;
            let base = lease_ms.min(session_ttl_ms);
            Ok(Floor {
                backend,
                lease_ms,
                session_ttl_ms,
                cells: cells.len(),
                p999: p.c999,
                p99: p.c99_ci,
                m_min: margin_for(p.c99_ci.value_us, base),
                m_min_lo: margin_for(p.c99_ci.lo_us, base),
                m_min_hi: margin_for(p.c99_ci.hi_us, base),
                enough: p.count >= MIN_SAMPLES_P999,
                quantile_ci_method: p.method,
            })
        })
        .collect::<Result<_, MissingHistogram>>()?;
    Ok(Summary { rows: out, floors })
}

/// The group of a row: its `group` column, or (for tables written before
/// repeats) the cell id without a `_rep=` suffix.
fn group_key(r: &CellRow) -> String {
    if r.group.is_empty() {
        bench_core::grid::group_of(&r.cell).to_owned()
    } else {
        r.group.clone()
    }
}

fn summarize_group(
    g: &[&CellRow],
    table: &[CellRow],
    src: &dyn SampleSource,
) -> Result<SummaryRow, MissingHistogram> {
    let first = g[0];
    let mut g: Vec<&CellRow> = g.to_vec();
    g.sort_by_key(|r| r.repeat);
    let tp = Interval::of(
        &g.iter().map(|r| r.throughput_per_s).collect::<Vec<_>>(),
        0.0,
        f64::INFINITY,
    );
    let ab = Interval::of(
        &g.iter()
            .map(|r| {
                if r.attempts == 0 {
                    f64::NAN
                } else {
                    r.abandoned_insufficient_lease as f64 / r.attempts as f64
                }
            })
            .collect::<Vec<_>>(),
        0.0,
        1.0,
    );
    let p = pooled_rtt(&g, src)?;
    let base = first.lease_ms.min(first.session_ttl_ms);
    let mut fired = [0u32; 3];
    for r in &g {
        let t = crate::triggers::evaluate_row(r, table);
        for (i, id) in [
            RTT_P99_VS_MARGIN,
            D4_UNSATISFIABLE,
            FENCED_OUT_WITH_CLIENT_CHECK,
        ]
        .iter()
        .enumerate()
        {
            if t.iter().any(|x| x.trigger == *id && x.fired) {
                fired[i] += 1;
            }
        }
    }
    let sum = |f: fn(&CellRow) -> u64| g.iter().map(|r| f(r)).sum::<u64>();
    Ok(SummaryRow {
        backend: first.backend.clone(),
        margin_policy: first.margin_policy.clone(),
        lease_ms: first.lease_ms,
        session_ttl_ms: first.session_ttl_ms,
        margin: first.margin,
        group: group_key(first),
        n_repeats: g.len() as u32,
        seeds: g
            .iter()
            .map(|r| r.seed.to_string())
            .collect::<Vec<_>>()
            .join(";"),
        margin_effective_mean: round6(
            g.iter().map(|r| r.margin_effective).sum::<f64>() / g.len() as f64,
        ),
        throughput_median: tp.median,
        throughput_mean: tp.mean,
        throughput_min: tp.min,
        throughput_max: tp.max,
        throughput_ci95_lo: tp.lo,
        throughput_ci95_hi: tp.hi,
        ci_method: CI_METHOD.to_owned(),
        abandonment_median: ab.median,
        abandonment_ci95_lo: ab.lo,
        abandonment_ci95_hi: ab.hi,
        abandoned_insufficient_lease: sum(|r| r.abandoned_insufficient_lease),
        attempts: sum(|r| r.attempts),
        payouts_paid: sum(|r| r.payouts_paid),
        hb_attempts: sum(|r| r.hb_attempts),
        hb_timeouts: sum(|r| r.hb_timeouts),
        session_lost: sum(|r| r.session_lost),
        hb_corrected_count: p.count,
        hb_rtt_corrected_p50_us: p.c50,
        hb_rtt_corrected_p99_us: p.c99,
        hb_rtt_corrected_p999_us: p.c999.value_us,
        hb_rtt_corrected_p999_lo_us: p.c999.lo_us,
        hb_rtt_corrected_p999_hi_us: p.c999.hi_us,
        hb_rtt_p99_us: p.r99,
        hb_rtt_p999_us: p.r999,
        quantile_ci_method: p.method,
        m_min: margin_for(p.c999.value_us, base),
        m_min_ci95_lo: margin_for(p.c999.lo_us, base),
        m_min_ci95_hi: margin_for(p.c999.hi_us, base),
        m_min_verdict: if p.count >= MIN_SAMPLES_P999 {
            "ok"
        } else {
            "insufficient_data"
        }
        .to_owned(),
        trigger1_fired: fired[0],
        trigger3_fired: fired[1],
        trigger4_fired: fired[2],
        ledger_ok: g
            .iter()
            .all(|r| r.ledger_ok && r.paid_twice == 0 && r.stale_paid == 0),
    })
}

/// Writes `summary.parquet` and `summary.csv` into `dir`.
pub fn write_summary(dir: &Path, rows: &[SummaryRow]) -> Result<(), TableError> {
    write_frame(dir, "summary", summary_frame(rows)?)
}
