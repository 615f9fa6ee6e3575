//! The RTT family: the heartbeat RTT CDF and percentile spectrum pooled per
//! condition (per TTL × margin when there are a few, else per TTL), raw
//! (solid) and corrected for coordinated omission (dashed), with a band for
//! the spread of the condition's cells, from the lossless `.hdr` histograms of
//! the results directory. One line per cell would be a hundred lines and a
//! legend no one can read.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use hdrhistogram::Histogram;

use plotters::coord::Shift;
use plotters::prelude::*;

use super::canvas::{DrawError, Plot};
use super::style::{
    LegendEntry, color, desc_font, draw_legend, label_font, layout, log_range, ms_label,
};
use bench_analysis::recommend::human_ms;
use bench_analysis::results::CellRow;
use bench_core::error::Chain;
use bench_core::hist::{Series, cdf_points_ms, load_series, new_histogram, spectrum_points_ms};

/// One condition's curves of one plot, pooled over its cells, in (x, y) points.
pub(super) struct CellCurves {
    /// The condition, e.g. `TTL 1s (27 cells)`.
    label: String,
    /// The pooled raw RTT curve.
    raw: Vec<(f64, f64)>,
    /// The pooled corrected RTT curve (empty when the directory has none).
    corrected: Vec<(f64, f64)>,
    /// The spread of the cells' corrected curves: `(x, low y, high y)`, the
    /// 5–95 % of the cells (min–max below [`BAND_PERCENTILE_CELLS`] cells).
    band: Vec<(f64, f64, f64)>,
}

/// Cells a condition needs before its band is the 5–95 % of them, not min–max.
const BAND_PERCENTILE_CELLS: usize = 20;
/// Conditions a plot draws at most per TTL × margin; with more, one per TTL.
const MAX_CONDITIONS: usize = 5;
/// Points of a band along its x axis.
const BAND_POINTS: usize = 60;

/// The curves of both RTT plots, read from a results directory's histograms.
pub(super) struct RttCurves {
    /// Per condition: (RTT ms, cumulative fraction).
    pub(super) cdfs: Vec<CellCurves>,
    /// Per condition: (1 / (1 − q), RTT ms).
    pub(super) spectra: Vec<CellCurves>,
    /// Cells without a usable raw RTT histogram, with the reason.
    pub(super) skipped: Vec<(String, String)>,
}

/// The low and high ends of `values` the band spans (module doc of [`CellCurves`]).
fn spread(mut values: Vec<f64>) -> (f64, f64) {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    if n == 0 {
        return (f64::NAN, f64::NAN);
    }
    if n < BAND_PERCENTILE_CELLS {
        return (values[0], values[n - 1]);
    }
    let at = |q: f64| values[((q * (n - 1) as f64).round() as usize).min(n - 1)];
    (at(0.05), at(0.95))
}

/// `n` points from `lo` to `hi`, evenly spaced on a log scale.
fn log_grid(lo: f64, hi: f64, n: usize) -> Vec<f64> {
    let (a, b) = (lo.max(1e-9).ln(), hi.max(lo * 1.0001).ln());
    (0..n)
        .map(|k| (a + (b - a) * k as f64 / (n - 1) as f64).exp())
        .collect()
}

/// One condition's cells, their histograms read: raw, corrected.
type Loaded = Vec<(Histogram<u64>, Option<Histogram<u64>>)>;

/// The pooled CDF and spectrum of one condition, with the bands over its cells.
fn condition_curves(label: String, cells: &Loaded) -> (CellCurves, CellCurves) {
    let mut raw = new_histogram();
    let mut corrected = new_histogram();
    for (r, c) in cells {
        let _ = raw.add(r);
        if let Some(c) = c {
            let _ = corrected.add(c);
        }
    }
    let per_cell: Vec<&Histogram<u64>> = cells.iter().filter_map(|(_, c)| c.as_ref()).collect();
    let mut cdf_band = Vec::new();
    let mut spectrum_band = Vec::new();
    if !corrected.is_empty() {
        let (lo, hi) = (corrected.min().max(1), corrected.max().max(2));
        for x_us in log_grid(lo as f64, hi as f64, BAND_POINTS) {
            let (l, h) = spread(
                per_cell
                    .iter()
                    .map(|c| c.count_between(0, x_us as u64) as f64 / c.len().max(1) as f64)
                    .collect(),
            );
            cdf_band.push((x_us / 1e3, l, h));
        }
        let x_hi = spectrum_points_ms(&corrected)
            .last()
            .map_or(10.0, |(x, _)| *x);
        for x in log_grid(1.0, x_hi.max(10.0), BAND_POINTS) {
            let q = 1.0 - 1.0 / x;
            let (l, h) = spread(
                per_cell
                    .iter()
                    .map(|c| c.highest_equivalent(c.value_at_quantile(q)) as f64 / 1e3)
                    .collect(),
            );
            spectrum_band.push((x, l, h));
        }
    }
    let curves = |raw: Vec<(f64, f64)>, corrected: Vec<(f64, f64)>, band| CellCurves {
        label: label.clone(),
        raw,
        corrected,
        band,
    };
    (
        curves(cdf_points_ms(&raw), cdf_points_ms(&corrected), cdf_band),
        curves(
            spectrum_points_ms(&raw),
            spectrum_points_ms(&corrected),
            spectrum_band,
        ),
    )
}

impl RttCurves {
    /// Reads every row's raw and corrected RTT histograms from `dir` and
    /// pools them per condition: per TTL × margin when there are at most
    /// [`MAX_CONDITIONS`] of them, else per TTL (and backend).
    pub(super) fn load(dir: &Path, rows: &[CellRow]) -> RttCurves {
        let mut curves = RttCurves {
            cdfs: Vec::new(),
            spectra: Vec::new(),
            skipped: Vec::new(),
        };
        let by_margin = rows
            .iter()
            .map(|r| (&r.backend, r.lease_ms, (r.margin * 1e6).round() as i64))
            .collect::<BTreeSet<_>>()
            .len()
            <= MAX_CONDITIONS;
        let mut groups: BTreeMap<(bool, u64, i64), (String, Loaded)> = BTreeMap::new();
        for row in rows {
            match load_series(dir, &row.cell, Series::Rtt) {
                Ok(h) if !h.is_empty() => {
                    // The corrected histogram is absent in directories written before it was recorded.
                    let corrected = load_series(dir, &row.cell, Series::Corrected)
                        .ok()
                        .filter(|c| !c.is_empty());
                    let margin = if by_margin {
                        (row.margin * 1e6).round() as i64
                    } else {
                        0
                    };
                    let mut label = format!("TTL {}", human_ms(row.lease_ms));
                    if row.backend != "fencepost" {
                        label.push_str(&format!(" on {}", row.backend));
                    }
                    if by_margin && row.margin_policy == "fixed" {
                        label.push_str(&format!(", margin {:.2}", row.margin));
                    } else if by_margin {
                        let policy = row.margin_policy.split(':').next().unwrap_or("");
                        label.push_str(&format!(", {policy} margin"));
                    }
                    groups
                        .entry((row.backend != "fencepost", row.lease_ms, margin))
                        .or_insert_with(|| (label, Vec::new()))
                        .1
                        .push((h, corrected));
                }
                Ok(_) => curves
                    .skipped
                    .push((row.cell.clone(), "empty histogram".to_owned())),
                Err(e) => curves
                    .skipped
                    .push((row.cell.clone(), Chain(&e).to_string())),
            }
        }
        for (label, cells) in groups.into_values() {
            let n = cells.len();
            let (cdf, spectrum) = condition_curves(
                format!("{label} ({n} cell{})", if n == 1 { "" } else { "s" }),
                &cells,
            );
            curves.cdfs.push(cdf);
            curves.spectra.push(spectrum);
        }
        curves
    }
}

/// Draws each condition's band (the spread of its cells' corrected curves),
/// its pooled raw curve solid and its corrected one dashed, one colour per
/// condition, a note on `plot` when there is none, and the legend.
fn draw_cell_curves<DB, X, Y>(
    chart: &mut ChartContext<'_, DB, Cartesian2d<X, Y>>,
    plot: &DrawingArea<DB, Shift>,
    legend: &DrawingArea<DB, Shift>,
    cells: &[CellCurves],
) -> Result<(), DrawError>
where
    DB: DrawingBackend,
    DB::ErrorType: 'static,
    X: Ranged<ValueType = f64>,
    Y: Ranged<ValueType = f64>,
{
    let mut entries = Vec::new();
    for (i, c) in cells.iter().enumerate() {
        let band: Vec<(f64, f64)> = c
            .band
            .iter()
            .filter(|(_, l, _)| l.is_finite())
            .map(|(x, l, _)| (*x, *l))
            .chain(
                c.band
                    .iter()
                    .rev()
                    .filter(|(_, _, h)| h.is_finite())
                    .map(|(x, _, h)| (*x, *h)),
            )
            .collect();
        if band.len() > 2 {
            chart.draw_series(std::iter::once(Polygon::new(
                band,
                color(i).mix(0.18).filled(),
            )))?;
        }
    }
    for (i, c) in cells.iter().enumerate() {
        chart.draw_series(LineSeries::new(
            c.raw.iter().copied(),
            color(i).stroke_width(2),
        ))?;
        entries.push(LegendEntry {
            label: format!("{}: raw", c.label),
            color: color(i),
            dashed: false,
        });
        if !c.corrected.is_empty() {
            chart.draw_series(DashedLineSeries::new(
                c.corrected.iter().copied(),
                8,
                5,
                color(i).stroke_width(2),
            ))?;
            entries.push(LegendEntry {
                label: format!("{}: corrected", c.label),
                color: color(i),
                dashed: true,
            });
        }
    }
    if cells.is_empty() {
        plot.draw(&Text::new(
            "no histograms found under hgrm/",
            (120, 200),
            desc_font(),
        ))?;
    }
    draw_legend(
        legend,
        "pooled per condition; shade: its cells' corrected 5–95 % (min–max below 20 cells)",
        &entries,
    )
}

/// The RTT CDF plot.
pub(super) struct RttCdf<'a> {
    /// Per condition: (RTT ms, cumulative fraction) points, raw and corrected.
    pub(super) cells: &'a [CellCurves],
}

impl Plot for RttCdf<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), DrawError>
    where
        DB::ErrorType: 'static,
    {
        let (plot, legend) = layout(root, "Heartbeat RTT CDF per condition")?;
        let x = log_range(
            self.cells
                .iter()
                .flat_map(|c| c.raw.iter().chain(&c.corrected).map(|(x, _)| *x)),
            1.25,
        );
        let mut chart = ChartBuilder::on(&plot)
            .margin(16)
            .x_label_area_size(50)
            .y_label_area_size(70)
            .build_cartesian_2d(x.log_scale(), 0.0..1.02)?;
        chart
            .configure_mesh()
            .x_desc("heartbeat RTT (ms, log scale)")
            .y_desc("fraction of heartbeats ≤ RTT")
            .axis_desc_style(desc_font())
            .label_style(label_font())
            .x_label_formatter(&|v| ms_label(*v))
            .y_label_formatter(&|v| format!("{v:.2}"))
            .draw()?;
        draw_cell_curves(&mut chart, &plot, &legend, self.cells)
    }
}

/// The RTT percentile spectrum plot.
pub(super) struct RttSpectrum<'a> {
    /// Per condition: (1 / (1 − q), RTT ms) points, raw and corrected.
    pub(super) cells: &'a [CellCurves],
}

impl Plot for RttSpectrum<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), DrawError>
    where
        DB::ErrorType: 'static,
    {
        let (plot, legend) = layout(root, "Heartbeat RTT percentile spectrum per condition")?;
        let points = || {
            self.cells
                .iter()
                .flat_map(|c| c.raw.iter().chain(&c.corrected))
        };
        let x_hi = points().map(|(x, _)| *x).fold(10.0, f64::max) * 1.5;
        let y = log_range(points().map(|(_, y)| *y), 1.5);
        let mut chart = ChartBuilder::on(&plot)
            .margin(16)
            .x_label_area_size(50)
            .y_label_area_size(80)
            .build_cartesian_2d((1.0..x_hi).log_scale(), y.log_scale())?;
        chart
            .configure_mesh()
            .x_desc("1 / (1 − percentile)  (10 = p90, 100 = p99, 1000 = p99.9; log scale)")
            .y_desc("heartbeat RTT (ms, log scale)")
            .axis_desc_style(desc_font())
            .label_style(label_font())
            .x_label_formatter(&|v| format!("{v:.0}"))
            .y_label_formatter(&|v| ms_label(*v))
            .draw()?;
        draw_cell_curves(&mut chart, &plot, &legend, self.cells)
    }
}
