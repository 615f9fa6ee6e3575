//! The margin family: throughput and abandonment against the client safety
//! margin, one line per TTL (and whatever else varies), the 95 % intervals
//! over repeats as shaded bands with error bars; and how cells and summary
//! points are grouped into those lines ([`group_series`], [`band_groups`]),
//! which the budget plot shares.

use std::collections::BTreeMap;
use std::ops::Range;

use plotters::coord::Shift;
use plotters::prelude::*;

use super::canvas::{DrawError, Plot};
use super::style::{LegendEntry, color, desc_font, draw_legend, label_font, layout, padded};
use bench_analysis::recommend::human_ms;
use bench_analysis::results::CellRow;
use bench_analysis::summary::SummaryRow;
use bench_analysis::triggers::lost_work;

/// Cells that share a TTL and every other setting except the margin: one line.
pub(super) struct Lines<'a> {
    /// Legend label, e.g. `TTL 1s` (plus the settings that vary across the table).
    pub(super) label: String,
    /// The cells, sorted by margin.
    pub(super) rows: Vec<&'a CellRow>,
}

/// Settings other than the margin that distinguish lines, with their label prefix.
type Setting = (&'static str, fn(&CellRow) -> String);

/// Groups rows into lines: by TTL, and by any other setting that varies in the table.
pub(super) fn group_series(rows: &[CellRow]) -> Vec<Lines<'_>> {
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

/// The margin axis range of all grouped rows.
pub(super) fn margin_range(groups: &[Lines<'_>]) -> Range<f64> {
    let margins = groups.iter().flat_map(|s| s.rows.iter().map(|r| r.margin));
    let (lo, hi) = margins.fold((f64::INFINITY, f64::NEG_INFINITY), |(lo, hi), m| {
        (lo.min(m), hi.max(m))
    });
    padded(lo, hi, 0.05)
}

/// Summary points of one (backend, TTL, policy), sorted by the margin they are drawn at.
pub(super) struct Band<'a> {
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
pub(super) fn band_groups(summary: &[SummaryRow]) -> Vec<Band<'_>> {
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
) -> Result<(), DrawError>
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
pub(super) struct Throughput<'a> {
    /// The summary points, one band per (backend, TTL, policy).
    pub(super) bands: &'a [Band<'a>],
    /// Every repeat, drawn as a dot at its margin.
    pub(super) rows: &'a [CellRow],
}

impl Plot for Throughput<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), DrawError>
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
pub(super) struct Abandonment<'a> {
    /// The cells, one line per TTL (and varying setting).
    pub(super) groups: &'a [Lines<'a>],
    /// The summary points, one band per (backend, TTL, policy).
    pub(super) bands: &'a [Band<'a>],
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
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), DrawError>
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
