//! The report's plots, each written as SVG and PNG with plotters:
//! - `rtt_cdf`: heartbeat RTT CDF per cell, raw (solid) and corrected for
//!   coordinated omission (dashed), from the lossless `.hdr` histograms, log x in ms;
//! - `rtt_spectrum`: the same histograms as a percentile spectrum, x = 1/(1 − q)
//!   on a log scale (p90, p99, p99.9, p99.99 at 10, 100, 1,000, 10,000), log y
//!   in ms, so the tail is as readable as the median;
//! - `throughput_vs_margin`: median payouts/s over repeats against margin, one
//!   line per TTL (and policy), the 95 % interval as a shaded band with error
//!   bars, every repeat as a dot; an adaptive point sits at the mean margin
//!   its workers used;
//! - `abandonment_vs_margin`: insufficient-lease abandonments (median over
//!   repeats, 95 % band) and all lost work (% of attempts, each cell, dashed)
//!   against margin, one colour per TTL;
//! - `p99_vs_budget`: corrected heartbeat RTT p99 against trigger 1's
//!   `min(lease, session TTL) × margin / 3` budget, log y in ms, one colour per TTL.
//!
//! PNG text is rasterised from the DejaVu Sans font embedded by the `dejavu`
//! crate, registered once as `sans-serif`, so no system font is needed.

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use anyhow::Context as _;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::FontStyle;

use bench_analysis::recommend::human_ms;
use bench_analysis::results::CellRow;
use bench_analysis::summary::SummaryRow;
use bench_analysis::triggers::{lost_work, rtt_budget_ms};
use bench_core::hist::{Series, cdf_points_ms, load_series, spectrum_points_ms};

/// Pixel size of every plot.
pub const PLOT_SIZE: (u32, u32) = (1280, 720);
/// Width of the legend panel right of each chart, in pixels.
const LEGEND_WIDTH: u32 = 340;
/// File stems of the plots, in report order.
pub const PLOT_STEMS: [&str; 5] = [
    "rtt_cdf",
    "rtt_spectrum",
    "throughput_vs_margin",
    "abandonment_vs_margin",
    "p99_vs_budget",
];

/// Font family every text element uses; registered from the embedded DejaVu Sans.
pub const FONT: &str = "sans-serif";

/// Registers the embedded DejaVu Sans as `sans-serif` (once per process).
pub fn register_fonts() -> anyhow::Result<()> {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    let ok = *REGISTERED.get_or_init(|| {
        plotters::style::register_font(FONT, FontStyle::Normal, dejavu::sans::regular()).is_ok()
    });
    anyhow::ensure!(ok, "the embedded DejaVu Sans font could not be registered");
    Ok(())
}

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
/// abandonment intervals over repeats).
pub fn draw_plots(
    dir: &Path,
    rows: &[CellRow],
    summary: &[SummaryRow],
) -> anyhow::Result<PlotOutput> {
    register_fonts()?;
    let mut out = PlotOutput::default();

    let mut cdfs = Vec::new();
    let mut spectra = Vec::new();
    for row in rows {
        match load_series(dir, &row.cell, Series::Rtt) {
            Ok(h) if !h.is_empty() => {
                // The corrected histogram is absent in directories written before issue 12.
                let corrected = load_series(dir, &row.cell, Series::Corrected)
                    .ok()
                    .filter(|c| !c.is_empty());
                cdfs.push(CellCurves {
                    label: row.cell.clone(),
                    raw: cdf_points_ms(&h),
                    corrected: corrected.as_ref().map(cdf_points_ms).unwrap_or_default(),
                });
                spectra.push(CellCurves {
                    label: row.cell.clone(),
                    raw: spectrum_points_ms(&h),
                    corrected: corrected
                        .as_ref()
                        .map(spectrum_points_ms)
                        .unwrap_or_default(),
                });
            }
            Ok(_) => out
                .skipped_cells
                .push((row.cell.clone(), "empty histogram".to_owned())),
            Err(e) => out.skipped_cells.push((row.cell.clone(), format!("{e:#}"))),
        }
    }
    let groups = group_series(rows);
    let bands = band_groups(summary);

    out.files
        .extend(render(dir, PLOT_STEMS[0], &RttCdf { cells: &cdfs })?);
    out.files.extend(render(
        dir,
        PLOT_STEMS[1],
        &RttSpectrum { cells: &spectra },
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
    out.files
        .extend(render(dir, PLOT_STEMS[4], &P99Budget { groups: &groups })?);
    Ok(out)
}

/// A cell's two curves (raw and corrected RTT) of one plot, in (x, y) points.
struct CellCurves {
    /// The cell id.
    label: String,
    /// The raw RTT curve.
    raw: Vec<(f64, f64)>,
    /// The corrected RTT curve (empty when the directory has none).
    corrected: Vec<(f64, f64)>,
}

/// Draws each cell's raw curve solid and its corrected one dashed, one
/// colour per cell, a note on `plot` when there is none, and the legend.
fn draw_cell_curves<DB, X, Y>(
    chart: &mut ChartContext<'_, DB, Cartesian2d<X, Y>>,
    plot: &DrawingArea<DB, Shift>,
    legend: &DrawingArea<DB, Shift>,
    cells: &[CellCurves],
) -> anyhow::Result<()>
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

/// One plot that can draw itself on any plotters backend (the experiments'
/// plots implement it too, so every plot is drawn the same way).
pub trait Plot {
    /// Draws onto `root`, already filled white.
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> anyhow::Result<()>
    where
        DB::ErrorType: 'static;
}

/// Renders `plot` to `<stem>.svg` and `<stem>.png` in `dir`, with the
/// embedded font registered first.
pub fn render(dir: &Path, stem: &str, plot: &impl Plot) -> anyhow::Result<[PathBuf; 2]> {
    register_fonts()?;
    let svg = dir.join(format!("{stem}.svg"));
    {
        let root = SVGBackend::new(&svg, PLOT_SIZE).into_drawing_area();
        root.fill(&WHITE)?;
        plot.draw(&root)
            .with_context(|| format!("drawing {}", svg.display()))?;
        root.present()?;
    }
    let png = dir.join(format!("{stem}.png"));
    {
        let root = BitMapBackend::new(&png, PLOT_SIZE).into_drawing_area();
        root.fill(&WHITE)?;
        plot.draw(&root)
            .with_context(|| format!("drawing {}", png.display()))?;
        root.present()?;
    }
    Ok([svg, png])
}

/// Cells that share a TTL and every other setting except the margin: one line.
struct Lines<'a> {
    /// Legend label, e.g. `TTL 1s` (plus the settings that vary across the table).
    label: String,
    /// The cells, sorted by margin.
    rows: Vec<&'a CellRow>,
}

/// Settings other than the margin that distinguish lines, with their label prefix.
type Setting = (&'static str, fn(&CellRow) -> String);

/// Groups rows into lines: by TTL, and by any other setting that varies in the table.
fn group_series(rows: &[CellRow]) -> Vec<Lines<'_>> {
    let settings: [Setting; 8] = [
        ("backend", |r| r.backend.clone()),
        ("session", |r| human_ms(r.session_ttl_ms)),
        ("workers", |r| r.workers.to_string()),
        ("policy", |r| r.margin_policy.clone()),
        ("net", |r| r.net_delay.clone()),
        ("pause", |r| r.server_pause.clone()),
        ("rail", |r| r.rail_latency.clone()),
        ("check", |r| {
            if r.client_check { "on" } else { "off" }.to_owned()
        }),
    ];
    // A setting joins the label when it differs between cells of the same TTL.
    let varying: Vec<&Setting> = settings
        .iter()
        .filter(|(_, f)| {
            rows.iter().any(|a| {
                rows.iter()
                    .any(|b| a.lease_ms == b.lease_ms && f(a) != f(b))
            })
        })
        .collect();
    let mut groups: BTreeMap<(u64, Vec<String>), Vec<&CellRow>> = BTreeMap::new();
    for row in rows {
        let key = varying.iter().map(|(_, f)| f(row)).collect();
        groups.entry((row.lease_ms, key)).or_default().push(row);
    }
    groups
        .into_iter()
        .map(|((lease_ms, key), mut rows)| {
            rows.sort_by(|a, b| a.margin.total_cmp(&b.margin));
            let mut label = format!("TTL {}", human_ms(lease_ms));
            for ((name, _), value) in varying.iter().zip(key) {
                label.push_str(&format!(", {name} {value}"));
            }
            Lines { label, rows }
        })
        .collect()
}

/// Formats a millisecond tick label without trailing noise.
fn ms_label(v: f64) -> String {
    if v >= 1.0 {
        format!("{}", (v * 100.0).round() / 100.0)
    } else {
        let s = format!("{v:.4}");
        s.trim_end_matches('0').trim_end_matches('.').to_owned()
    }
}

/// A range around `lo..hi` with `pad` of its width added on each side, never empty.
fn padded(lo: f64, hi: f64, pad: f64) -> Range<f64> {
    let (lo, hi) = if lo.is_finite() && hi.is_finite() {
        (lo, hi)
    } else {
        (0.0, 1.0)
    };
    let width = if hi > lo { hi - lo } else { lo.abs().max(0.1) };
    (lo - width * pad)..(hi + width * pad)
}

/// A positive log-scale range covering `values`, widened by a factor `pad` each side.
fn log_range(values: impl Iterator<Item = f64>, pad: f64) -> Range<f64> {
    let (lo, hi) = values
        .filter(|v| *v > 0.0 && v.is_finite())
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), v| {
            (lo.min(v), hi.max(v))
        });
    if lo.is_finite() {
        (lo / pad)..(hi * pad)
    } else {
        0.1..10.0
    }
}

/// The margin axis range of all grouped rows.
fn margin_range(groups: &[Lines<'_>]) -> Range<f64> {
    let margins = groups.iter().flat_map(|s| s.rows.iter().map(|r| r.margin));
    let (lo, hi) = margins.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), m| {
        (lo.min(m), hi.max(m))
    });
    padded(lo, hi, 0.05)
}

/// Caption, axis-description and label fonts.
fn caption_font() -> TextStyle<'static> {
    (FONT, 26).into_font().into()
}
fn desc_font() -> TextStyle<'static> {
    (FONT, 20).into_font().into()
}
fn label_font() -> TextStyle<'static> {
    (FONT, 16).into_font().into()
}

/// Line colours (Tableau 10: distinct, readable on white), cycled.
const COLORS: [RGBColor; 10] = [
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0x8c, 0x56, 0x4b),
    RGBColor(0xe3, 0x77, 0xc2),
    RGBColor(0x17, 0xbe, 0xcf),
    RGBColor(0x7f, 0x7f, 0x7f),
    RGBColor(0xbc, 0xbd, 0x22),
];

/// Line colour of series `i`.
pub fn color(i: usize) -> RGBColor {
    COLORS[i % COLORS.len()]
}

/// One line of a legend.
struct LegendEntry {
    /// The text.
    label: String,
    /// The series colour.
    color: RGBColor,
    /// Whether the series is drawn dashed.
    dashed: bool,
}

/// Splits `root` into a titled chart area (left) and a legend panel (right).
fn layout<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
) -> anyhow::Result<(DrawingArea<DB, Shift>, DrawingArea<DB, Shift>)>
where
    DB::ErrorType: 'static,
{
    let body = root.margin(12, 0, 0, 0).titled(title, caption_font())?;
    let (w, _) = body.dim_in_pixel();
    Ok(body.split_horizontally(w.saturating_sub(LEGEND_WIDTH)))
}

/// Draws the legend down the panel beside the chart, so it never hides data.
fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    heading: &str,
    entries: &[LegendEntry],
) -> anyhow::Result<()>
where
    DB::ErrorType: 'static,
{
    let x0 = 10;
    let mut y = 24;
    area.draw(&Text::new(heading.to_owned(), (x0, y), desc_font()))?;
    y += 30;
    // 22 px per entry; tighter (down to 12 px, smaller text) when many cells must fit.
    let (_, height) = area.dim_in_pixel();
    let room = i64::from(height) - i64::from(y) - 10;
    let step = (room / entries.len().max(1) as i64).clamp(12, 22) as i32;
    let font: TextStyle<'static> = (FONT, (step - 6).clamp(10, 16)).into_font().into();
    for e in entries {
        let style = e.color.stroke_width(3);
        if e.dashed {
            for dash in 0..3 {
                let x = x0 + dash * 11;
                area.draw(&PathElement::new(vec![(x, y), (x + 7, y)], style))?;
            }
        } else {
            area.draw(&PathElement::new(vec![(x0, y), (x0 + 29, y)], style))?;
        }
        area.draw(&Text::new(
            e.label.clone(),
            (x0 + 38, y - step / 2 + 2),
            font.clone(),
        ))?;
        y += step;
    }
    Ok(())
}

/// The RTT CDF plot.
struct RttCdf<'a> {
    /// Per cell: (RTT ms, cumulative fraction) points, raw and corrected.
    cells: &'a [CellCurves],
}

impl Plot for RttCdf<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> anyhow::Result<()>
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
struct RttSpectrum<'a> {
    /// Per cell: (1 / (1 − q), RTT ms) points, raw and corrected.
    cells: &'a [CellCurves],
}

impl Plot for RttSpectrum<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> anyhow::Result<()>
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

/// Summary points of one (backend, TTL, policy), sorted by the margin they are drawn at.
struct Band<'a> {
    /// Legend label, e.g. `TTL 1s, fixed`.
    label: String,
    /// The points.
    rows: Vec<&'a SummaryRow>,
}

/// Where a summary point sits on the margin axis: its margin, or for an
/// adaptive policy the mean margin its workers used.
fn x_of(r: &SummaryRow) -> f64 {
    if r.is_fixed() {
        r.margin
    } else {
        r.margin_effective_mean
    }
}

/// Groups summary rows into bands by (backend, TTL, policy).
fn band_groups(summary: &[SummaryRow]) -> Vec<Band<'_>> {
    let mut groups: BTreeMap<(String, u64, String), Vec<&SummaryRow>> = BTreeMap::new();
    for r in summary {
        groups
            .entry((r.backend.clone(), r.lease_ms, r.margin_policy.clone()))
            .or_default()
            .push(r);
    }
    let backends = summary.iter().any(|r| r.backend != summary[0].backend);
    groups
        .into_iter()
        .map(|((backend, lease_ms, policy), mut rows)| {
            rows.sort_by(|a, b| x_of(a).total_cmp(&x_of(b)));
            let mut label = format!("TTL {}, {policy}", human_ms(lease_ms));
            if backends {
                label.push_str(&format!(", {backend}"));
            }
            Band { label, rows }
        })
        .collect()
}

/// Draws one band: the 95 % interval shaded and as error bars, the median as
/// a line with points. `get` gives (median, lo, hi) of a point; NaN ends
/// (one repeat) draw no bar.
fn draw_band<DB, F>(
    chart: &mut ChartContext<
        '_,
        DB,
        Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
    >,
    band: &Band<'_>,
    i: usize,
    get: F,
) -> anyhow::Result<()>
where
    DB: DrawingBackend,
    DB::ErrorType: 'static,
    F: Fn(&SummaryRow) -> (f64, f64, f64),
{
    let known: Vec<(f64, f64, f64)> = band
        .rows
        .iter()
        .map(|r| {
            let (_, lo, hi) = get(r);
            (x_of(r), lo, hi)
        })
        .filter(|(_, lo, hi)| lo.is_finite() && hi.is_finite())
        .collect();
    if known.len() > 1 {
        let mut poly: Vec<(f64, f64)> = known.iter().map(|(x, lo, _)| (*x, *lo)).collect();
        poly.extend(known.iter().rev().map(|(x, _, hi)| (*x, *hi)));
        chart.draw_series(std::iter::once(Polygon::new(
            poly,
            color(i).mix(0.15).filled(),
        )))?;
    }
    let w = 0.004;
    for (x, lo, hi) in &known {
        chart.draw_series(std::iter::once(PathElement::new(
            vec![(*x, *lo), (*x, *hi)],
            color(i).stroke_width(2),
        )))?;
        for y in [*lo, *hi] {
            chart.draw_series(std::iter::once(PathElement::new(
                vec![(x - w, y), (x + w, y)],
                color(i).stroke_width(2),
            )))?;
        }
    }
    let points: Vec<(f64, f64)> = band.rows.iter().map(|r| (x_of(r), get(r).0)).collect();
    chart.draw_series(LineSeries::new(points, color(i).stroke_width(2)).point_size(5))?;
    Ok(())
}

/// Median throughput over repeats against margin with its 95 % band, one line per TTL and policy.
struct Throughput<'a> {
    bands: &'a [Band<'a>],
    /// Every repeat, drawn as a dot at its margin.
    rows: &'a [CellRow],
}

impl Plot for Throughput<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> anyhow::Result<()>
    where
        DB::ErrorType: 'static,
    {
        let (plot, legend) = layout(
            root,
            "Throughput vs client safety margin (median, 95 % interval over repeats)",
        )?;
        let y_max = self
            .bands
            .iter()
            .flat_map(|s| {
                s.rows
                    .iter()
                    .map(|r| r.throughput_ci95_hi.max(r.throughput_max))
            })
            .chain(self.rows.iter().map(|r| r.throughput_per_s))
            .filter(|v| v.is_finite())
            .fold(0.0, f64::max);
        let xs: Vec<f64> = self
            .bands
            .iter()
            .flat_map(|b| b.rows.iter().map(|r| x_of(r)))
            .chain(self.rows.iter().map(row_x))
            .collect();
        let (lo, hi) = xs
            .iter()
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), m| {
                (lo.min(*m), hi.max(*m))
            });
        let mut chart = ChartBuilder::on(&plot)
            .margin(16)
            .x_label_area_size(50)
            .y_label_area_size(80)
            .build_cartesian_2d(padded(lo, hi, 0.05), 0.0..(y_max * 1.1).max(1.0))?;
        chart
            .configure_mesh()
            .x_desc("client safety margin (fraction of lease; adaptive: mean margin used)")
            .y_desc("throughput (payouts/s)")
            .axis_desc_style(desc_font())
            .label_style(label_font())
            .x_label_formatter(&|v| format!("{v:.2}"))
            .draw()?;
        let mut entries = Vec::new();
        for (i, b) in self.bands.iter().enumerate() {
            draw_band(&mut chart, b, i, |r| {
                (
                    r.throughput_median,
                    r.throughput_ci95_lo,
                    r.throughput_ci95_hi,
                )
            })?;
            let groups: Vec<&str> = b.rows.iter().map(|r| r.group.as_str()).collect();
            let dots = self.rows.iter().filter(|r| {
                let g = if r.group.is_empty() {
                    bench_core::grid::group_of(&r.cell)
                } else {
                    r.group.as_str()
                };
                groups.contains(&g)
            });
            chart.draw_series(
                dots.map(|r| Circle::new((row_x(r), r.throughput_per_s), 3, color(i).mix(0.6))),
            )?;
            entries.push(LegendEntry {
                label: b.label.clone(),
                color: color(i),
                dashed: false,
            });
        }
        draw_legend(&legend, "line = TTL, policy; dots = repeats", &entries)
    }
}

/// Abandonment against margin: solid = insufficient lease (median over
/// repeats with its 95 % band), dashed = all lost work of every cell.
struct Abandonment<'a> {
    groups: &'a [Lines<'a>],
    bands: &'a [Band<'a>],
}

/// Where a cell sits on a margin axis: its margin, or for an adaptive
/// policy the mean margin its workers used.
fn row_x(r: &CellRow) -> f64 {
    if r.margin_policy == "fixed" {
        r.margin
    } else {
        r.margin_effective
    }
}

/// `part / attempts` in %, 0 without attempts.
fn pct_of_attempts(part: u64, row: &CellRow) -> f64 {
    if row.attempts == 0 {
        0.0
    } else {
        part as f64 * 100.0 / row.attempts as f64
    }
}

impl Plot for Abandonment<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> anyhow::Result<()>
    where
        DB::ErrorType: 'static,
    {
        let (plot, legend) = layout(root, "Abandonment vs client safety margin")?;
        let y_max = self
            .groups
            .iter()
            .flat_map(|s| s.rows.iter().map(|r| pct_of_attempts(lost_work(r), r)))
            .chain(
                self.bands
                    .iter()
                    .flat_map(|b| b.rows.iter().map(|r| r.abandonment_ci95_hi * 100.0)),
            )
            .filter(|v| v.is_finite())
            .fold(0.0, f64::max);
        let (x_lo, x_hi) = self
            .groups
            .iter()
            .flat_map(|s| s.rows.iter().map(|r| row_x(r)))
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), m| {
                (lo.min(m), hi.max(m))
            });
        let mut chart = ChartBuilder::on(&plot)
            .margin(16)
            .x_label_area_size(50)
            .y_label_area_size(80)
            .build_cartesian_2d(padded(x_lo, x_hi, 0.05), 0.0..(y_max * 1.1).max(1.0))?;
        chart
            .configure_mesh()
            .x_desc("client safety margin (fraction of lease; adaptive: mean margin used)")
            .y_desc("% of payout attempts")
            .axis_desc_style(desc_font())
            .label_style(label_font())
            .x_label_formatter(&|v| format!("{v:.2}"))
            .draw()?;
        let mut entries = Vec::new();
        for (i, b) in self.bands.iter().enumerate() {
            draw_band(&mut chart, b, i, |r| {
                (
                    r.abandonment_median * 100.0,
                    r.abandonment_ci95_lo * 100.0,
                    r.abandonment_ci95_hi * 100.0,
                )
            })?;
            entries.push(LegendEntry {
                label: format!("{}: insufficient lease, median [95 %]", b.label),
                color: color(i),
                dashed: false,
            });
        }
        for (i, s) in self.groups.iter().enumerate() {
            let mut lost: Vec<(f64, f64)> = s
                .rows
                .iter()
                .map(|r| (row_x(r), pct_of_attempts(lost_work(r), r)))
                .collect();
            lost.sort_by(|a, b| a.0.total_cmp(&b.0));
            chart.draw_series(DashedLineSeries::new(lost, 8, 6, color(i).stroke_width(2)))?;
            entries.push(LegendEntry {
                label: format!("{}: all lost work", s.label),
                color: color(i),
                dashed: true,
            });
        }
        draw_legend(&legend, "TTL: cause", &entries)
    }
}

/// Corrected heartbeat p99 against the trigger-1 budget `min(lease, session TTL) × margin / 3`.
struct P99Budget<'a> {
    groups: &'a [Lines<'a>],
}

/// The trigger-1 budget of a row, in ms.
fn budget_ms(row: &CellRow) -> f64 {
    rtt_budget_ms(row.lease_ms, row.session_ttl_ms, row.margin_effective)
}

/// The corrected p99 of a row, in ms (0 without samples).
fn corrected_p99_ms(row: &CellRow) -> f64 {
    if row.hb_corrected_count > 0 {
        row.hb_rtt_corrected_p99_us as f64 / 1000.0
    } else {
        0.0
    }
}

impl Plot for P99Budget<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> anyhow::Result<()>
    where
        DB::ErrorType: 'static,
    {
        let (plot, legend) = layout(
            root,
            "Corrected heartbeat RTT p99 vs min(lease, session TTL) × margin / 3 (ADR-006 §6.5)",
        )?;
        let y = log_range(
            self.groups.iter().flat_map(|s| {
                s.rows
                    .iter()
                    .flat_map(|r| [corrected_p99_ms(r), budget_ms(r)])
            }),
            2.0,
        );
        let floor = y.start;
        let mut chart = ChartBuilder::on(&plot)
            .margin(16)
            .x_label_area_size(50)
            .y_label_area_size(80)
            .build_cartesian_2d(margin_range(self.groups), y.log_scale())?;
        chart
            .configure_mesh()
            .x_desc("client safety margin (fraction of lease)")
            .y_desc("milliseconds (log scale)")
            .axis_desc_style(desc_font())
            .label_style(label_font())
            .x_label_formatter(&|v| format!("{v:.2}"))
            .y_label_formatter(&|v| ms_label(*v))
            .draw()?;
        let mut entries = Vec::new();
        for (i, s) in self.groups.iter().enumerate() {
            let p99: Vec<(f64, f64)> = s
                .rows
                .iter()
                .filter(|r| r.hb_corrected_count > 0)
                .map(|r| (r.margin, corrected_p99_ms(r).max(floor)))
                .collect();
            chart.draw_series(LineSeries::new(p99, color(i).stroke_width(2)).point_size(5))?;
            let budget: Vec<(f64, f64)> = s
                .rows
                .iter()
                .map(|r| (r.margin, budget_ms(r).max(floor)))
                .collect();
            chart.draw_series(DashedLineSeries::new(
                budget,
                10,
                6,
                color(i).stroke_width(2),
            ))?;
            entries.push(LegendEntry {
                label: format!("{}: corrected RTT p99", s.label),
                color: color(i),
                dashed: false,
            });
            entries.push(LegendEntry {
                label: format!("{}: min(lease, session) × margin / 3", s.label),
                color: color(i),
                dashed: true,
            });
        }
        draw_legend(&legend, "TTL: series", &entries)
    }
}
