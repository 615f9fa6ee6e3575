//! What every chart of the report looks like: colours, fonts, the split of
//! a plot into chart and legend panel, the legend itself, and the axis
//! ranges and tick labels the charts share.

use std::ops::Range;

use plotters::coord::Shift;
use plotters::prelude::*;

use super::canvas::{DrawError, FONT};

/// Width of the legend panel right of each chart, in pixels.
const LEGEND_WIDTH: u32 = 340;

/// Formats a millisecond tick label without trailing noise.
pub(super) fn ms_label(v: f64) -> String {
    if v >= 1.0 {
        format!("{}", (v * 100.0).round() / 100.0)
    } else {
        let s = format!("{v:.4}");
        s.trim_end_matches('0').trim_end_matches('.').to_owned()
    }
}

/// A range around `lo..hi` with `pad` of its width added on each side, never empty.
pub(super) fn padded(lo: f64, hi: f64, pad: f64) -> Range<f64> {
    let (lo, hi) = if lo.is_finite() && hi.is_finite() {
        (lo, hi)
    } else {
        (0.0, 1.0)
    };
    let width = if hi > lo { hi - lo } else { lo.abs().max(0.1) };
    (lo - width * pad)..(hi + width * pad)
}

/// A positive log-scale range covering `values`, widened by a factor `pad` each side.
pub(super) fn log_range(values: impl Iterator<Item = f64>, pad: f64) -> Range<f64> {
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

/// The caption font.
fn caption_font() -> TextStyle<'static> {
    (FONT, 26).into_font().into()
}
/// The axis-description font.
pub(super) fn desc_font() -> TextStyle<'static> {
    (FONT, 20).into_font().into()
}
/// The tick-label font.
pub(super) fn label_font() -> TextStyle<'static> {
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
pub(super) struct LegendEntry {
    /// The text.
    pub(super) label: String,
    /// The series colour.
    pub(super) color: RGBColor,
    /// Whether the series is drawn dashed.
    pub(super) dashed: bool,
}

/// A chart area (left) and the legend panel beside it (right).
type Panels<DB> = (DrawingArea<DB, Shift>, DrawingArea<DB, Shift>);

/// Splits `root` into a titled chart area (left) and a legend panel (right).
pub(super) fn layout<DB: DrawingBackend>(
    root: &DrawingArea<DB, Shift>,
    title: &str,
) -> Result<Panels<DB>, DrawError>
where
    DB::ErrorType: 'static,
{
    let body = root.margin(12, 0, 0, 0).titled(title, caption_font())?;
    let (w, _) = body.dim_in_pixel();
    Ok(body.split_horizontally(w.saturating_sub(LEGEND_WIDTH)))
}

/// Draws the legend down the panel beside the chart, so it never hides data.
pub(super) fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    heading: &str,
    entries: &[LegendEntry],
) -> Result<(), DrawError>
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
