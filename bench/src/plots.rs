//! The report's plots, each written as SVG and PNG with plotters:
//! - `rtt_cdf`: heartbeat RTT CDF per cell, from the lossless `.hdr` histograms, log x in ms;
//! - `throughput_vs_margin`: payouts/s against margin, one line per TTL;
//! - `abandonment_vs_margin`: insufficient-lease abandonments and all lost work
//!   (% of attempts) against margin, one colour per TTL;
//! - `p99_vs_budget`: heartbeat RTT p99 against ADR-006's `lease × margin / 3`
//!   budget (trigger 1), log y in ms, one colour per TTL.
//!
//! PNG text is rasterised from the DejaVu Sans font embedded by the `dejavu`
//! crate, registered once as `sans-serif`, so no system font is needed.

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::Duration;

use anyhow::Context as _;
use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::FontStyle;

use crate::hist::{cdf_points_ms, load_histogram};
use crate::results::CellRow;
use crate::triggers::lost_work;

/// Pixel size of every plot.
pub const PLOT_SIZE: (u32, u32) = (1280, 720);
/// Width of the legend panel right of each chart, in pixels.
const LEGEND_WIDTH: u32 = 340;
/// File stems of the plots, in report order.
pub const PLOT_STEMS: [&str; 4] = [
    "rtt_cdf",
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
pub fn draw_plots(dir: &Path, rows: &[CellRow]) -> anyhow::Result<PlotOutput> {
    register_fonts()?;
    let mut out = PlotOutput::default();

    let mut cdfs = Vec::new();
    for row in rows {
        match load_histogram(dir, &row.cell) {
            Ok(h) if !h.is_empty() => cdfs.push((row.cell.clone(), cdf_points_ms(&h))),
            Ok(_) => out
                .skipped_cells
                .push((row.cell.clone(), "empty histogram".to_owned())),
            Err(e) => out.skipped_cells.push((row.cell.clone(), format!("{e:#}"))),
        }
    }
    let groups = group_series(rows);

    out.files
        .extend(render(dir, PLOT_STEMS[0], &RttCdf { cdfs: &cdfs })?);
    out.files
        .extend(render(dir, PLOT_STEMS[1], &Throughput { groups: &groups })?);
    out.files.extend(render(
        dir,
        PLOT_STEMS[2],
        &Abandonment { groups: &groups },
    )?);
    out.files
        .extend(render(dir, PLOT_STEMS[3], &P99Budget { groups: &groups })?);
    Ok(out)
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
struct Series<'a> {
    /// Legend label, e.g. `TTL 1s` (plus the settings that vary across the table).
    label: String,
    /// The cells, sorted by margin.
    rows: Vec<&'a CellRow>,
}

/// Settings other than the margin that distinguish lines, with their label prefix.
type Setting = (&'static str, fn(&CellRow) -> String);

/// Groups rows into lines: by TTL, and by any other setting that varies in the table.
fn group_series(rows: &[CellRow]) -> Vec<Series<'_>> {
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
            Series { label, rows }
        })
        .collect()
}

/// `1500` → `1s 500ms`.
fn human_ms(ms: u64) -> String {
    humantime::format_duration(Duration::from_millis(ms)).to_string()
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
fn margin_range(groups: &[Series<'_>]) -> Range<f64> {
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
    /// Per cell: label and (RTT ms, cumulative fraction) points.
    cdfs: &'a [(String, Vec<(f64, f64)>)],
}

impl Plot for RttCdf<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> anyhow::Result<()>
    where
        DB::ErrorType: 'static,
    {
        let (plot, legend) = layout(root, "Heartbeat RTT CDF per cell")?;
        let x = log_range(
            self.cdfs
                .iter()
                .flat_map(|(_, p)| p.iter().map(|(x, _)| *x)),
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
        let mut entries = Vec::new();
        for (i, (cell, points)) in self.cdfs.iter().enumerate() {
            chart.draw_series(LineSeries::new(
                points.iter().copied(),
                color(i).stroke_width(2),
            ))?;
            entries.push(LegendEntry {
                label: cell.clone(),
                color: color(i),
                dashed: false,
            });
        }
        if self.cdfs.is_empty() {
            plot.draw(&Text::new(
                "no histograms found under hgrm/",
                (120, 200),
                desc_font(),
            ))?;
        }
        draw_legend(&legend, "cell", &entries)
    }
}

/// Throughput against margin, one line per TTL.
struct Throughput<'a> {
    groups: &'a [Series<'a>],
}

impl Plot for Throughput<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> anyhow::Result<()>
    where
        DB::ErrorType: 'static,
    {
        let (plot, legend) = layout(root, "Throughput vs client safety margin")?;
        let y_max = self
            .groups
            .iter()
            .flat_map(|s| s.rows.iter().map(|r| r.throughput_per_s))
            .fold(0.0, f64::max);
        let mut chart = ChartBuilder::on(&plot)
            .margin(16)
            .x_label_area_size(50)
            .y_label_area_size(80)
            .build_cartesian_2d(margin_range(self.groups), 0.0..(y_max * 1.1).max(1.0))?;
        chart
            .configure_mesh()
            .x_desc("client safety margin (fraction of lease)")
            .y_desc("throughput (payouts/s)")
            .axis_desc_style(desc_font())
            .label_style(label_font())
            .x_label_formatter(&|v| format!("{v:.2}"))
            .draw()?;
        let mut entries = Vec::new();
        for (i, s) in self.groups.iter().enumerate() {
            let points = s.rows.iter().map(|r| (r.margin, r.throughput_per_s));
            chart.draw_series(LineSeries::new(points, color(i).stroke_width(2)).point_size(4))?;
            entries.push(LegendEntry {
                label: s.label.clone(),
                color: color(i),
                dashed: false,
            });
        }
        draw_legend(&legend, "line = TTL", &entries)
    }
}

/// Abandonment against margin: solid = insufficient lease, dashed = all lost work.
struct Abandonment<'a> {
    groups: &'a [Series<'a>],
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
            .fold(0.0, f64::max);
        let mut chart = ChartBuilder::on(&plot)
            .margin(16)
            .x_label_area_size(50)
            .y_label_area_size(80)
            .build_cartesian_2d(margin_range(self.groups), 0.0..(y_max * 1.1).max(1.0))?;
        chart
            .configure_mesh()
            .x_desc("client safety margin (fraction of lease)")
            .y_desc("% of payout attempts")
            .axis_desc_style(desc_font())
            .label_style(label_font())
            .x_label_formatter(&|v| format!("{v:.2}"))
            .draw()?;
        let mut entries = Vec::new();
        for (i, s) in self.groups.iter().enumerate() {
            let points = s
                .rows
                .iter()
                .map(|r| (r.margin, pct_of_attempts(r.abandoned_insufficient_lease, r)));
            chart.draw_series(LineSeries::new(points, color(i).stroke_width(2)).point_size(4))?;
            let lost: Vec<(f64, f64)> = s
                .rows
                .iter()
                .map(|r| (r.margin, pct_of_attempts(lost_work(r), r)))
                .collect();
            chart.draw_series(DashedLineSeries::new(lost, 8, 6, color(i).stroke_width(2)))?;
            entries.push(LegendEntry {
                label: format!("{}: insufficient lease", s.label),
                color: color(i),
                dashed: false,
            });
            entries.push(LegendEntry {
                label: format!("{}: all lost work", s.label),
                color: color(i),
                dashed: true,
            });
        }
        draw_legend(&legend, "TTL: cause", &entries)
    }
}

/// Heartbeat p99 against the trigger-1 budget `lease × margin / 3`.
struct P99Budget<'a> {
    groups: &'a [Series<'a>],
}

/// The trigger-1 budget of a row, in ms.
fn budget_ms(row: &CellRow) -> f64 {
    row.lease_ms as f64 * row.margin_effective / 3.0
}

impl Plot for P99Budget<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> anyhow::Result<()>
    where
        DB::ErrorType: 'static,
    {
        let (plot, legend) = layout(
            root,
            "Heartbeat RTT p99 vs the lease × margin / 3 budget (ADR-006 §6.5)",
        )?;
        let y = log_range(
            self.groups.iter().flat_map(|s| {
                s.rows.iter().flat_map(|r| {
                    let p99 = if r.hb_count > 0 {
                        r.hb_rtt_p99_us as f64 / 1000.0
                    } else {
                        0.0
                    };
                    [p99, budget_ms(r)]
                })
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
                .filter(|r| r.hb_count > 0)
                .map(|r| (r.margin, (r.hb_rtt_p99_us as f64 / 1000.0).max(floor)))
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
                label: format!("{}: RTT p99", s.label),
                color: color(i),
                dashed: false,
            });
            entries.push(LegendEntry {
                label: format!("{}: lease × margin / 3", s.label),
                color: color(i),
                dashed: true,
            });
        }
        draw_legend(&legend, "TTL: series", &entries)
    }
}
