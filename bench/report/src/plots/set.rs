//! The report's plot set: which five plots `bench report` draws, in what
//! order ([`PLOT_STEMS`]), from what data ([`draw_plots`]).

use std::path::{Path, PathBuf};

use super::budget::P99Budget;
use super::canvas::{PlotError, register_fonts, render};
use super::margin::{Abandonment, Throughput, band_groups, group_series};
use super::rtt::{RttCdf, RttCurves, RttSpectrum};
use bench_analysis::projection::Production;
use bench_analysis::results::CellRow;
use bench_analysis::summary::SummaryRow;

/// File stems of the plots, in report order.
pub const PLOT_STEMS: [&str; 5] = [
    "rtt_cdf",
    "rtt_spectrum",
    "throughput_vs_margin",
    "abandonment_vs_margin",
    "p99_vs_budget",
];

/// What [`draw_plots`] produced.
#[derive(Debug, Default)]
pub struct PlotOutput {
    /// Every file written (SVG and PNG).
    pub files: Vec<PathBuf>,
    /// Cells left out of the RTT CDF, with the reason (e.g. no `.hdr` file).
    pub skipped_cells: Vec<(String, String)>,
}

/// Draws all plots of [`PLOT_STEMS`] into `dir` as `<stem>.svg` and `<stem>.png`.
/// `summary` is the table's [`bench_analysis::summary`] (the throughput and
/// abandonment intervals over repeats); `production` the configuration the
/// run projects onto (its trigger-1 budget line on `p99_vs_budget`).
pub fn draw_plots(
    dir: &Path,
    rows: &[CellRow],
    summary: &[SummaryRow],
    production: &Production,
) -> Result<PlotOutput, PlotError> {
    register_fonts()?;
    let curves = RttCurves::load(dir, rows);
    let mut out = PlotOutput {
        files: Vec::new(),
        skipped_cells: curves.skipped,
    };
    let groups = group_series(rows);
    let bands = band_groups(summary);

    out.files.extend(render(
        dir,
        PLOT_STEMS[0],
        &RttCdf {
            cells: &curves.cdfs,
        },
    )?);
    out.files.extend(render(
        dir,
        PLOT_STEMS[1],
        &RttSpectrum {
            cells: &curves.spectra,
        },
    )?);
    out.files.extend(render(
        dir,
        PLOT_STEMS[2],
        &Throughput {
            bands: &bands,
            rows,
        },
    )?);
    out.files.extend(render(
        dir,
        PLOT_STEMS[3],
        &Abandonment {
            groups: &groups,
            bands: &bands,
        },
    )?);
    out.files.extend(render(
        dir,
        PLOT_STEMS[4],
        &P99Budget {
            groups: &groups,
            production,
        },
    )?);
    Ok(out)
}
