//! The RTT family: the heartbeat RTT CDF and percentile spectrum per cell,
//! raw (solid) and corrected for coordinated omission (dashed), from the
//! lossless `.hdr` histograms of the results directory.

use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;

use super::canvas::{DrawError, Plot};
use super::style::{
    LegendEntry, color, desc_font, draw_legend, label_font, layout, log_range, ms_label,
};
use bench_analysis::results::CellRow;
use bench_core::error::Chain;
use bench_core::hist::{Series, cdf_points_ms, load_series, spectrum_points_ms};

/// A cell's two curves (raw and corrected RTT) of one plot, in (x, y) points.
pub(super) struct CellCurves {
    /// The cell id.
    label: String,
    /// The raw RTT curve.
    raw: Vec<(f64, f64)>,
    /// The corrected RTT curve (empty when the directory has none).
    corrected: Vec<(f64, f64)>,
}

/// The curves of both RTT plots, read from a results directory's histograms.
pub(super) struct RttCurves {
    /// Per cell: (RTT ms, cumulative fraction).
    pub(super) cdfs: Vec<CellCurves>,
    /// Per cell: (1 / (1 − q), RTT ms).
    pub(super) spectra: Vec<CellCurves>,
    /// Cells without a usable raw RTT histogram, with the reason.
    pub(super) skipped: Vec<(String, String)>,
}

impl RttCurves {
    /// Reads every row's raw and corrected RTT histograms from `dir`.
    pub(super) fn load(dir: &Path, rows: &[CellRow]) -> RttCurves {
        let mut curves = RttCurves {
            cdfs: Vec::new(),
            spectra: Vec::new(),
            skipped: Vec::new(),
        };
        for row in rows {
            match load_series(dir, &row.cell, Series::Rtt) {
                Ok(h) if !h.is_empty() => {
                    // The corrected histogram is absent in directories written before issue 12.
                    let corrected = load_series(dir, &row.cell, Series::Corrected)
                        .ok()
                        .filter(|c| !c.is_empty());
                    curves.cdfs.push(CellCurves {
                        label: row.cell.clone(),
                        raw: cdf_points_ms(&h),
                        corrected: corrected.as_ref().map(cdf_points_ms).unwrap_or_default(),
                    });
                    curves.spectra.push(CellCurves {
                        label: row.cell.clone(),
                        raw: spectrum_points_ms(&h),
                        corrected: corrected
                            .as_ref()
                            .map(spectrum_points_ms)
                            .unwrap_or_default(),
                    });
                }
                Ok(_) => curves
                    .skipped
                    .push((row.cell.clone(), "empty histogram".to_owned())),
                Err(e) => curves
                    .skipped
                    .push((row.cell.clone(), Chain(&e).to_string())),
            }
        }
        curves
    }
}

/// Draws each cell's raw curve solid and its corrected one dashed, one
/// colour per cell, a note on `plot` when there is none, and the legend.
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
    draw_legend(legend, "cell: series", &entries)
}

/// The RTT CDF plot.
pub(super) struct RttCdf<'a> {
    /// Per cell: (RTT ms, cumulative fraction) points, raw and corrected.
    pub(super) cells: &'a [CellCurves],
}

impl Plot for RttCdf<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), DrawError>
    where
        DB::ErrorType: 'static,
    {
        let (plot, legend) = layout(root, "Heartbeat RTT CDF per cell")?;
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
    /// Per cell: (1 / (1 − q), RTT ms) points, raw and corrected.
    pub(super) cells: &'a [CellCurves],
}

impl Plot for RttSpectrum<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), DrawError>
    where
        DB::ErrorType: 'static,
    {
        let (plot, legend) = layout(root, "Heartbeat RTT percentile spectrum per cell")?;
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
