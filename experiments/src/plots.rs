//! The experiments' plots, each written as `<stem>.svg` and `<stem>.png` with
//! plotters, text in the DejaVu Sans the bench registers
//! (`bench_report::plots::register_fonts`), so PNGs need no system font:
//! - `timeline` (pause): who held which token when, the freezes, the fences;
//! - `clock` (clock): violation rate against grace / bound, per scenario;
//! - `throttle_rtt` (throttle): heartbeat RTT CDFs, throttled vs unthrottled.

use std::ops::Range;
use std::path::Path;

use plotters::coord::Shift;
use plotters::coord::types::RangedCoordf64;
use plotters::prelude::*;

use crate::timeline::{Event, EventKind, Freeze};

// The frame every plot shares (size, font, colours, SVG+PNG rendering) is the bench's.
pub use bench_report::plots::{DrawError, FONT, PLOT_SIZE, Plot, PlotError, color, render};

fn font(size: u32) -> TextStyle<'static> {
    (FONT, size).into_font().into()
}

/// `lo..hi` widened by `pad` of its width each side, never empty.
fn padded(lo: f64, hi: f64, pad: f64) -> Range<f64> {
    let (lo, hi) = if lo.is_finite() && hi.is_finite() {
        (lo, hi)
    } else {
        (0.0, 1.0)
    };
    let w = if hi > lo { hi - lo } else { 1.0 };
    (lo - w * pad)..(hi + w * pad)
}

/// What the timeline plot draws: the input type the pause experiment fills,
/// so the plot knows nothing of the experiment's result types.
pub struct TimelineInput {
    /// The caption.
    pub title: String,
    /// `(worker, axis label)` per row, bottom to top.
    pub rows: Vec<(String, String)>,
    /// The frozen worker (its row carries the freezes and their aftermath).
    pub frozen_worker: String,
    /// Its freezes.
    pub freezes: Vec<Freeze>,
    /// Every event, any order.
    pub events: Vec<Event>,
}

/// The pause timeline.
struct Timeline<'a> {
    input: &'a TimelineInput,
}

impl Timeline<'_> {
    fn row(&self, worker: &str) -> f64 {
        self.input
            .rows
            .iter()
            .position(|(r, _)| r == worker)
            .unwrap_or(0) as f64
    }
}

/// The timeline's chart: seconds across, one row per worker.
type TimelineChart<'a, DB> = ChartContext<'a, DB, Cartesian2d<RangedCoordf64, RangedCoordf64>>;

impl Timeline<'_> {
    /// The frame: caption, axes, one labelled row per worker.
    fn axes<'a, DB: DrawingBackend>(
        &self,
        root: &'a DrawingArea<DB, Shift>,
    ) -> Result<TimelineChart<'a, DB>, DrawError>
    where
        DB::ErrorType: 'static,
    {
        let input = self.input;
        let t_max = input
            .events
            .iter()
            .map(|e| e.t_s)
            .chain(input.freezes.iter().map(|f| f.to_s))
            .fold(0.0f64, f64::max);
        let labels: Vec<String> = input.rows.iter().map(|(_, l)| l.clone()).collect();
        let n_rows = labels.len();
        let mut chart = ChartBuilder::on(root)
            .caption(&input.title, font(22))
            .margin(16)
            .x_label_area_size(50)
            .y_label_area_size(120)
            .build_cartesian_2d(padded(0.0, t_max, 0.02), -0.7f64..(n_rows as f64 - 0.3))?;
        chart
            .configure_mesh()
            .y_labels(n_rows)
            .y_label_formatter(&|y| {
                let i = y.round();
                if (y - i).abs() < 1e-6 && i >= 0.0 {
                    labels.get(i as usize).cloned().unwrap_or_default()
                } else {
                    String::new()
                }
            })
            .x_desc("seconds since start")
            .label_style(font(15))
            .axis_desc_style(font(18))
            .disable_y_mesh()
            .draw()?;
        Ok(chart)
    }

    /// The freezes, on the frozen worker's row `y0`, each with its token.
    fn freezes<DB: DrawingBackend>(
        &self,
        chart: &mut TimelineChart<'_, DB>,
        y0: f64,
    ) -> Result<(), DrawError>
    where
        DB::ErrorType: 'static,
    {
        let freezes = &self.input.freezes;
        chart
            .draw_series(freezes.iter().map(|p| {
                Rectangle::new(
                    [(p.from_s, y0 - 0.28), (p.to_s, y0 + 0.28)],
                    RED.mix(0.25).filled(),
                )
            }))?
            .label("SIGSTOPped holding a (soon stale) token")
            .legend(|(x, y)| Rectangle::new([(x, y - 5), (x + 16, y + 5)], RED.mix(0.25).filled()));
        for p in freezes {
            chart.draw_series(std::iter::once(Text::new(
                format!("T{} frozen", p.stale_token),
                (p.from_s, y0 + 0.36),
                font(13),
            )))?;
        }
        Ok(())
    }

    /// Every claim (fence 1 accepted) as a small dot, and the takeovers:
    /// another worker claims a frozen payout under a higher token.
    fn claims<DB: DrawingBackend>(&self, chart: &mut TimelineChart<'_, DB>) -> Result<(), DrawError>
    where
        DB::ErrorType: 'static,
    {
        let input = self.input;
        chart
            .draw_series(
                input
                    .events
                    .iter()
                    .filter(|e| e.kind == EventKind::Claimed)
                    .map(|e| {
                        Circle::new((e.t_s, self.row(&e.worker)), 3, BLACK.mix(0.35).filled())
                    }),
            )?
            .label("claim accepted (fence 1)")
            .legend(|(x, y)| Circle::new((x + 8, y), 3, BLACK.mix(0.35).filled()));
        let takeovers: Vec<&Event> = input
            .events
            .iter()
            .filter(|e| {
                e.kind == EventKind::Claimed
                    && e.worker != input.frozen_worker
                    && input.freezes.iter().any(|p| {
                        Some(&p.payout) == e.payout.as_ref()
                            && e.token.is_some_and(|t| t > p.stale_token)
                    })
            })
            .collect();
        chart
            .draw_series(
                takeovers.iter().map(|e| {
                    TriangleMarker::new((e.t_s, self.row(&e.worker)), 8, color(2).filled())
                }),
            )?
            .label("takeover of the frozen payout (higher token)")
            .legend(|(x, y)| TriangleMarker::new((x + 8, y), 6, color(2).filled()));
        for e in &takeovers {
            chart.draw_series(std::iter::once(Text::new(
                format!("T{}", e.token.unwrap_or(0)),
                (e.t_s, self.row(&e.worker) + 0.12),
                font(13),
            )))?;
        }
        Ok(())
    }

    /// After a resume, on the frozen worker's row `y0`: a fence refusal
    /// (client check off) or an abandonment (client check on).
    fn after_resume<DB: DrawingBackend>(
        &self,
        chart: &mut TimelineChart<'_, DB>,
        y0: f64,
    ) -> Result<(), DrawError>
    where
        DB::ErrorType: 'static,
    {
        let input = self.input;
        let after_resume = |e: &&Event| {
            e.worker == input.frozen_worker
                && input
                    .freezes
                    .iter()
                    .any(|p| e.t_s >= p.to_s && e.t_s <= p.to_s + 5.0)
        };
        chart
            .draw_series(
                input
                    .events
                    .iter()
                    .filter(|e| e.kind == EventKind::Fenced)
                    .filter(after_resume)
                    .map(|e| Cross::new((e.t_s, y0 - 0.15), 9, BLACK.stroke_width(3))),
            )?
            .label("stale submit refused by fence 2 (FENCED_OUT)")
            .legend(|(x, y)| Cross::new((x + 8, y), 6, BLACK.stroke_width(3)));
        chart
            .draw_series(
                input
                    .events
                    .iter()
                    .filter(|e| e.kind == EventKind::Abandoned)
                    .filter(after_resume)
                    .map(|e| Circle::new((e.t_s, y0 - 0.15), 7, color(3).filled())),
            )?
            .label("resumed worker abandons (client check), no ledger call")
            .legend(|(x, y)| Circle::new((x + 8, y), 6, color(3).filled()));
        Ok(())
    }
}

impl Plot for Timeline<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), DrawError>
    where
        DB::ErrorType: 'static,
    {
        let mut chart = self.axes(root)?;
        let y0 = self.row(&self.input.frozen_worker);
        self.freezes(&mut chart, y0)?;
        self.claims(&mut chart)?;
        self.after_resume(&mut chart, y0)?;
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.9))
            .border_style(BLACK)
            .label_font(font(15))
            .position(SeriesLabelPosition::LowerRight)
            .draw()?;
        Ok(())
    }
}

/// Draws `timeline.{svg,png}`.
pub fn timeline(dir: &Path, input: &TimelineInput) -> Result<(), PlotError> {
    render(dir, "timeline", &Timeline { input })?;
    Ok(())
}

/// One line of the clock plot: a scenario's violation rate per grace fraction.
pub struct ClockSeries {
    /// The scenario name.
    pub label: String,
    /// `(grace / bound, violations / cases)`.
    pub points: Vec<(f64, f64)>,
}

/// The clock plot.
struct ClockPlot<'a> {
    series: &'a [ClockSeries],
    title: String,
}

impl Plot for ClockPlot<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), DrawError>
    where
        DB::ErrorType: 'static,
    {
        let x_max = self
            .series
            .iter()
            .flat_map(|s| s.points.iter().map(|p| p.0))
            .fold(1.0f64, f64::max);
        let mut chart = ChartBuilder::on(root)
            .caption(&self.title, font(22))
            .margin(16)
            .x_label_area_size(50)
            .y_label_area_size(70)
            .build_cartesian_2d(padded(0.0, x_max, 0.02), -0.02f64..1.02)?;
        chart
            .configure_mesh()
            .x_desc("server grace / (θ + 2ρD + q)")
            .y_desc("cases where the client still believed after reassignment")
            .y_label_formatter(&|v| format!("{:.0} %", v * 100.0))
            .label_style(font(15))
            .axis_desc_style(font(18))
            .draw()?;
        chart.draw_series(LineSeries::new(
            vec![(1.0, -0.02), (1.0, 1.02)],
            BLACK.stroke_width(1),
        ))?;
        for (i, s) in self.series.iter().enumerate() {
            let c = color(i);
            chart
                .draw_series(LineSeries::new(s.points.clone(), c.stroke_width(3)))?
                .label(&s.label)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], c.stroke_width(3))
                });
            chart.draw_series(s.points.iter().map(|p| Circle::new(*p, 4, c.filled())))?;
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

/// Draws `clock.{svg,png}`.
pub fn clock(dir: &Path, series: &[ClockSeries], title: String) -> Result<(), PlotError> {
    render(dir, "clock", &ClockPlot { series, title })?;
    Ok(())
}

/// One CDF of the throttle plot.
pub struct Cdf {
    /// Its label.
    pub label: String,
    /// `(RTT ms, cumulative fraction)`.
    pub points: Vec<(f64, f64)>,
}

/// The throttle RTT plot.
struct CdfPlot<'a> {
    cdfs: &'a [Cdf],
    title: String,
}

impl Plot for CdfPlot<'_> {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), DrawError>
    where
        DB::ErrorType: 'static,
    {
        let (lo, hi) = self
            .cdfs
            .iter()
            .flat_map(|c| c.points.iter().map(|p| p.0))
            .filter(|v| *v > 0.0)
            .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
                (a.min(v), b.max(v))
            });
        let (lo, hi) = if lo.is_finite() {
            (lo / 1.5, hi * 1.5)
        } else {
            (0.01, 100.0)
        };
        let mut chart = ChartBuilder::on(root)
            .caption(&self.title, font(22))
            .margin(16)
            .x_label_area_size(50)
            .y_label_area_size(70)
            .build_cartesian_2d((lo..hi).log_scale(), 0.0f64..1.02)?;
        chart
            .configure_mesh()
            .x_desc("heartbeat RTT (ms, log)")
            .y_desc("fraction of heartbeats")
            .label_style(font(15))
            .axis_desc_style(font(18))
            .draw()?;
        for (i, c) in self.cdfs.iter().enumerate() {
            let col = color(i);
            chart
                .draw_series(LineSeries::new(c.points.clone(), col.stroke_width(3)))?
                .label(&c.label)
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 20, y)], col.stroke_width(3))
                });
        }
        chart
            .configure_series_labels()
            .background_style(WHITE.mix(0.9))
            .border_style(BLACK)
            .label_font(font(15))
            .position(SeriesLabelPosition::LowerRight)
            .draw()?;
        Ok(())
    }
}

/// Draws `throttle_rtt.{svg,png}`.
pub fn rtt_cdfs(dir: &Path, cdfs: &[Cdf], title: String) -> Result<(), PlotError> {
    render(dir, "throttle_rtt", &CdfPlot { cdfs, title })?;
    Ok(())
}
