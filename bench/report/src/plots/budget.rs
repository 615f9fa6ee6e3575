//! The budget plot: each cell's corrected heartbeat RTT p99 against trigger
//! 1's budget `min(lease, session TTL) × margin / 3`, log y in ms, one colour
//! per line of [`group_series`](super::margin::group_series).

use plotters::coord::Shift;
use plotters::prelude::*;

use super::canvas::{DrawError, Plot};
use super::margin::{Lines, margin_range};
use super::style::{
    LegendEntry, color, desc_font, draw_legend, label_font, layout, log_range, ms_label,
};
use bench_analysis::results::CellRow;
use bench_analysis::triggers::rtt_budget_ms;

/// Corrected heartbeat p99 against the trigger-1 budget `min(lease, session TTL) × margin / 3`.
pub(super) struct P99Budget<'a> {
    /// The cells, one line per TTL (and varying setting).
    pub(super) groups: &'a [Lines<'a>],
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
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), DrawError>
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
