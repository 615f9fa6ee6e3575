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

/// Entries a legend shows at most; a plot with more says how many it left out.
pub(super) const MAX_LEGEND_ENTRIES: usize = 12;

/// `text` broken into lines no wider than `width` pixels in `font` (a word
/// wider than the panel stays on a line of its own).
fn wrap_to<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    text: &str,
    font: &TextStyle<'static>,
    width: u32,
) -> Vec<String> {
    let fits = |s: &str| {
        area.estimate_text_size(s, font)
            .map_or(s.len() as u32 * 8, |(w, _)| w)
            <= width
    };
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        let candidate = if line.is_empty() {
            word.to_owned()
        } else {
            format!("{line} {word}")
        };
        if line.is_empty() || fits(&candidate) {
            line = candidate;
        } else {
            lines.push(std::mem::replace(&mut line, word.to_owned()));
        }
    }
    lines.push(line);
    lines
}

/// Draws the legend down the panel beside the chart, so it never hides data:
/// every label wrapped to the panel's width (never cut at the canvas edge),
/// at most [`MAX_LEGEND_ENTRIES`] entries, then a line saying how many more.
pub(super) fn draw_legend<DB: DrawingBackend>(
    area: &DrawingArea<DB, Shift>,
    heading: &str,
    entries: &[LegendEntry],
) -> Result<(), DrawError>
where
    DB::ErrorType: 'static,
{
    let x0 = 10;
    let (panel_w, height) = area.dim_in_pixel();
    let text_w = panel_w.saturating_sub(x0 as u32 + 38 + 8);
    let heading_font = label_font();
    let mut y = 12;
    for line in wrap_to(
        area,
        heading,
        &heading_font,
        panel_w.saturating_sub(x0 as u32 + 8),
    ) {
        area.draw(&Text::new(line, (x0, y), heading_font.clone()))?;
        y += 20;
    }
    y += 14;
    let shown = &entries[..entries.len().min(MAX_LEGEND_ENTRIES)];
    let font: TextStyle<'static> = (FONT, 14).into_font().into();
    let wrapped: Vec<Vec<String>> = shown
        .iter()
        .map(|e| wrap_to(area, &e.label, &font, text_w))
        .collect();
    // 18 px per text line and 8 between entries; tighter when they must fit.
    let lines: i64 = wrapped.iter().map(|w| w.len() as i64).sum();
    let room = i64::from(height) - i64::from(y) - 30;
    let line_h = ((room - 8 * shown.len() as i64) / lines.max(1)).clamp(12, 18) as i32;
    for (e, text) in shown.iter().zip(&wrapped) {
        let style = e.color.stroke_width(3);
        let mid = y + line_h / 2 - 1;
        if e.dashed {
            for dash in 0..3 {
                let x = x0 + dash * 11;
                area.draw(&PathElement::new(vec![(x, mid), (x + 7, mid)], style))?;
            }
        } else {
            area.draw(&PathElement::new(vec![(x0, mid), (x0 + 29, mid)], style))?;
        }
        for line in text {
            area.draw(&Text::new(line.clone(), (x0 + 38, y), font.clone()))?;
            y += line_h;
        }
        y += 8;
    }
    if entries.len() > shown.len() {
        area.draw(&Text::new(
            format!("… and {} more (report.md)", entries.len() - shown.len()),
            (x0, y),
            font,
        ))?;
    }
    Ok(())
}
