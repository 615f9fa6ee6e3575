//! The failover experiment's words and picture, pure over its result: the
//! printed summary, the report section and the throughput plot.

use std::path::Path;

use plotters::coord::Shift;
use plotters::prelude::*;
use tokio::time::Instant;

use crate::failover::model::{BUCKET_S, FailoverResult};
use crate::plots::{DrawError, FONT, Plot, color};

/// Paid payouts per second in [`BUCKET_S`] buckets from cumulative samples.
pub(crate) fn buckets(samples: &[(Instant, u64)], opened: Instant) -> Vec<(f64, f64)> {
    let pts: Vec<(f64, u64)> = samples
        .iter()
        .filter(|(t, _)| *t >= opened)
        .map(|(t, n)| (t.duration_since(opened).as_secs_f64(), *n))
        .collect();
    let mut out = Vec::new();
    let mut edge = 0usize;
    for (i, p) in pts.iter().enumerate().skip(1) {
        if p.0 - pts[edge].0 >= BUCKET_S || i == pts.len() - 1 {
            let dt = p.0 - pts[edge].0;
            if dt > 0.0 {
                out.push((p.0, p.1.saturating_sub(pts[edge].1) as f64 / dt));
            }
            edge = i;
        }
    }
    out
}

/// The lines printed at the end.
pub fn summary(r: &FailoverResult, dir: &Path) -> String {
    let mut s = String::new();
    for f in &r.faults {
        s.push_str(&format!(
            "{:<17} new leader after {} | min throughput {} /s (baseline {}) | under half for {} s{}\n",
            f.fault,
            f.time_to_leader_ms.map_or_else(|| f.skipped.clone().unwrap_or_else(|| "NEVER".into()), |v| format!("{v:.0} ms")),
            f.min_throughput_per_s.map_or("-".into(), |v| format!("{v:.1}")),
            r.baseline_per_s.map_or("-".into(), |v| format!("{v:.1}")),
            f.below_half_s.map_or("-".into(), |v| format!("{v:.1}")),
            f.thawed_2xx.map_or(String::new(), |n| format!(" | thawed leader 2xx: {n}")),
        ));
    }
    let w = &r.row;
    s.push_str(&format!(
        "window: paid {} ({:.1}/s), sessions lost {}, handles lost {}, abandoned (D4) {}, acquire failed {}, heartbeats timed out {} / errors {} of {}\n",
        w.payouts_paid, w.throughput_per_s, w.session_lost, w.lock_lost, w.abandoned_insufficient_lease, w.acquire_failed, w.hb_timeouts, w.hb_errors, w.hb_attempts
    ));
    s.push_str(&format!(
        "must be zero: {:?}\nresults: {}\n",
        r.must_be_zero,
        dir.display()
    ));
    s
}

/// `replica N`, or `none`.
pub(crate) fn replica(i: Option<usize>) -> String {
    i.map_or_else(|| "none".into(), |i| format!("replica {i}"))
}

/// The `report.md` section.
pub fn report_section(r: &FailoverResult) -> String {
    let mut s = format!(
        "## Failover experiment\n\nThree lock-server replicas over one PostgreSQL \
         schema (leader lease {} ms), SDK payout workers given every URL. Seed {}. Baseline \
         throughput (median 500 ms bucket before the first fault): {} payouts/s.\n\n\
         | fault | at s | leader before → after | time to a serving leader ms | min payouts/s | under half s | thawed 2xx |\n|---|---|---|---|---|---|---|\n",
        r.leader_lease_ms,
        r.seed,
        r.baseline_per_s
            .map_or("insufficient data".into(), |v| format!("{v:.1}"))
    );
    for f in &r.faults {
        s.push_str(&format!(
            "| {} | {:.2} | {} → {} | {} | {} | {} | {} |\n",
            f.fault,
            f.at_s,
            replica(f.leader_before),
            replica(f.leader_after),
            f.time_to_leader_ms.map_or_else(
                || f.skipped.clone().unwrap_or_else(|| "none".into()),
                |v| format!("{v:.0}")
            ),
            f.min_throughput_per_s
                .map_or("-".into(), |v| format!("{v:.1}")),
            f.below_half_s.map_or("-".into(), |v| format!("{v:.1}")),
            f.thawed_2xx.map_or("-".into(), |n| n.to_string()),
        ));
    }
    let w = &r.row;
    s.push_str(&format!(
        "\nOver the window: paid {} ({:.1}/s); sessions lost {} (expired {}, unknown {}, deadline {}); \
         handles lost {}; abandoned for insufficient lease {}; acquires failed {}; heartbeats \
         without an answer: {} timed out, {} errors, of {}.\n\nMust be zero: {}.\n\n\
         ![throughput](failover.svg)\n\nData: failover.json, results.csv, lock-server-*.log.\n",
        w.payouts_paid, w.throughput_per_s, w.session_lost, w.session_lost_expired, w.session_lost_unknown,
        w.session_lost_deadline, w.lock_lost, w.abandoned_insufficient_lease, w.acquire_failed,
        w.hb_timeouts, w.hb_errors, w.hb_attempts,
        r.must_be_zero.iter().map(|(k, v)| format!("{k} = {v}")).collect::<Vec<_>>().join(", ")
    ));
    s
}

/// Throughput over the window, a line per fault.
pub(crate) struct ThroughputPlot<'a> {
    pub(crate) r: &'a FailoverResult,
}

impl Plot for ThroughputPlot<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), DrawError>
    where
        DB::ErrorType: 'static,
    {
        let font = |size: u32| -> TextStyle<'static> { (FONT, size).into_font().into() };
        let xmax = self.r.throughput.last().map_or(1.0, |p| p.0).max(1.0);
        let ymax = self.r.throughput.iter().map(|p| p.1).fold(1.0, f64::max) * 1.15;
        let mut chart = ChartBuilder::on(root)
            .caption(
                format!(
                    "failover: payouts/s, leader lease {} ms (seed {})",
                    self.r.leader_lease_ms, self.r.seed
                ),
                font(22),
            )
            .margin(16)
            .x_label_area_size(50)
            .y_label_area_size(70)
            .build_cartesian_2d(0.0..xmax, 0.0..ymax)?;
        chart
            .configure_mesh()
            .x_desc("seconds after the window opened")
            .y_desc("payouts paid per second (500 ms buckets)")
            .label_style(font(15))
            .axis_desc_style(font(18))
            .draw()?;
        chart
            .draw_series(LineSeries::new(
                self.r.throughput.clone(),
                color(0).stroke_width(3),
            ))?
            .label("throughput")
            .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], color(0).stroke_width(3)));
        for (i, f) in self
            .r
            .faults
            .iter()
            .enumerate()
            .filter(|(_, f)| f.skipped.is_none())
        {
            let col = color(i + 1);
            chart
                .draw_series(LineSeries::new(
                    vec![(f.at_s, 0.0), (f.at_s, ymax)],
                    col.stroke_width(2),
                ))?
                .label(&f.fault)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], col.stroke_width(2))
                });
            if let Some(ms) = f.time_to_leader_ms {
                let t = f.at_s + ms / 1e3;
                chart.draw_series(LineSeries::new(
                    vec![(t, 0.0), (t, ymax)],
                    col.mix(0.5).stroke_width(1),
                ))?;
            }
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.9))
            .border_style(BLACK)
            .label_font(font(15))
            .position(SeriesLabelPosition::UpperRight)
            .draw()?;
        Ok(())
    }
}
