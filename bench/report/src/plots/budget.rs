//! The budget plot: each cell's corrected heartbeat RTT p99 against trigger
//! 1's budget `min(lease, session TTL) × margin / 3`, log y in ms, one colour
//! per line of [`group_series`](super::margin::group_series); beside them the
//! production budget (the projection's lease and session TTL, unscaled) in
//! black and ADR-006's margin 0.30 as a vertical mark, so the scaled budgets
//! read against the one the decision is about.

use plotters::coord::Shift;
use plotters::prelude::*;

use super::canvas::{DrawError, Plot};
use super::margin::{Lines, margin_range};
use super::style::{
    LegendEntry, color, desc_font, draw_legend, label_font, layout, log_range, ms_label,
};
use bench_analysis::projection::Production;
use bench_analysis::recommend::human_ms;
use bench_analysis::results::CellRow;
use bench_analysis::triggers::rtt_budget_ms;

/// Corrected heartbeat p99 against the trigger-1 budget `min(lease, session TTL) × margin / 3`.
pub(super) struct P99Budget<'a> {
    /// The cells, one line per TTL (and varying setting).
    pub(super) groups: &'a [Lines<'a>],
    /// The production configuration: its budget line and its margin's mark.
    pub(super) production: &'a Production,
}

/// ADR-006's margin, marked on the plot.
const ADR_MARGIN: f64 = 0.30;

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
            "Corrected heartbeat RTT p99 vs trigger 1's budget, scaled and production",
        )?;
        let prod = self.production;
        let x = margin_range(self.groups);
        let x = x.start.min(ADR_MARGIN - 0.02)..x.end.max(ADR_MARGIN + 0.02);
        let prod_budget = |m: f64| rtt_budget_ms(prod.lease_ms, prod.session_ttl_ms, m);
        let y = log_range(
            self.groups
                .iter()
                .flat_map(|s| {
                    s.rows
                        .iter()
                        .flat_map(|r| [corrected_p99_ms(r), budget_ms(r)])
                })
                .chain([prod_budget(x.start.max(0.01)), prod_budget(x.end)]),
            2.0,
        );
        let floor = y.start;
        let mut chart = ChartBuilder::on(&plot)
            .margin(16)
            .x_label_area_size(50)
            .y_label_area_size(80)
            .build_cartesian_2d(x.clone(), y.clone().log_scale())?;
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
        let grey = RGBColor(0x55, 0x55, 0x55);
        chart.draw_series(DashedLineSeries::new(
            [(ADR_MARGIN, y.start), (ADR_MARGIN, y.end)],
            4,
            4,
            grey.stroke_width(1),
        ))?;
        chart.draw_series(std::iter::once(Text::new(
            format!("ADR-006 margin {ADR_MARGIN:.2}"),
            (ADR_MARGIN, y.end / 1.15),
            label_font(),
        )))?;
        let steps = 40;
        let prod_line: Vec<(f64, f64)> = (0..=steps)
            .map(|k| x.start + (x.end - x.start) * k as f64 / steps as f64)
            .filter(|m| *m > 0.0)
            .map(|m| (m, prod_budget(m).max(floor)))
            .collect();
        chart.draw_series(DashedLineSeries::new(
            prod_line,
            10,
            6,
            BLACK.stroke_width(2),
        ))?;
        chart.draw_series(std::iter::once(Circle::new(
            (ADR_MARGIN, prod_budget(ADR_MARGIN)),
            6,
            BLACK.filled(),
        )))?;
        entries.push(LegendEntry {
            label: format!(
                "production budget: min({}, {}) × margin / 3 ({:.0} ms at {ADR_MARGIN:.2})",
                human_ms(prod.lease_ms),
                human_ms(prod.session_ttl_ms),
                prod_budget(ADR_MARGIN),
            ),
            color: BLACK,
            dashed: true,
        });
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
                label: format!("{}: its scaled budget", s.label),
                color: color(i),
                dashed: true,
            });
        }
        draw_legend(
            &legend,
            "budget = min(lease, session TTL) × margin / 3 (ADR-006 §6.5 trigger 1)",
            &entries,
        )
    }
}
