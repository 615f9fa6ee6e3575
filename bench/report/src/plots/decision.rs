//! The decision map of the ADR-006 evidence pack: every (margin, divisor)
//! of the derivation's grid as a tile coloured by its verdict against the
//! binding rules, labelled with the rule that decides it, with ADR-006's
//! point and the proposal marked.

use plotters::coord::Shift;
use plotters::prelude::*;

use super::canvas::{DrawError, Plot};
use super::style::{LegendEntry, desc_font, draw_legend, label_font, layout};

/// A tile's verdict.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Tile {
    /// Every binding rule passes.
    Pass,
    /// A binding rule fails.
    Fail,
    /// No rule fails, but one lacks data.
    Insufficient,
}

/// The colour of a verdict: green, red, grey.
fn tile_color(t: Tile) -> RGBColor {
    match t {
        Tile::Pass => RGBColor(0x9a, 0xd8, 0x9a),
        Tile::Fail => RGBColor(0xef, 0x9a, 0x9a),
        Tile::Insufficient => RGBColor(0xcc, 0xcc, 0xcc),
    }
}

/// The map: one tile per (margin, divisor).
pub struct DecisionMap {
    /// (margin, divisor, verdict, the deciding rule in a few words).
    pub tiles: Vec<(f64, u32, Tile, String)>,
    /// ADR-006's (margin, divisor).
    pub adr: (f64, u32),
    /// The proposal, if any.
    pub proposed: Option<(f64, u32)>,
}

impl Plot for DecisionMap {
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), DrawError>
    where
        DB::ErrorType: 'static,
    {
        let (plot, legend) = layout(
            root,
            "ADR-006 revision: each (margin, divisor) against the binding rules (production)",
        )?;
        let ks = || self.tiles.iter().map(|t| f64::from(t.1));
        let ms = || self.tiles.iter().map(|t| t.0);
        let (k_lo, k_hi) = (ks().fold(f64::MAX, f64::min), ks().fold(f64::MIN, f64::max));
        let (m_lo, m_hi) = (ms().fold(f64::MAX, f64::min), ms().fold(f64::MIN, f64::max));
        let step = {
            let mut v: Vec<f64> = ms().collect();
            v.sort_by(f64::total_cmp);
            v.dedup();
            v.windows(2).map(|w| w[1] - w[0]).fold(0.05_f64, f64::min)
        };
        let (k_lo, k_hi, m_lo, m_hi) = if self.tiles.is_empty() {
            (2.0, 3.0, 0.1, 0.2)
        } else {
            (k_lo, k_hi, m_lo, m_hi)
        };
        let mut chart = ChartBuilder::on(&plot)
            .margin(16)
            .x_label_area_size(50)
            .y_label_area_size(80)
            .build_cartesian_2d(
                (k_lo - 0.5)..(k_hi + 0.5),
                (m_lo - step / 2.0)..(m_hi + step / 2.0),
            )?;
        chart
            .configure_mesh()
            .disable_mesh()
            .x_desc("heartbeat divisor k (period U / k)")
            .y_desc("client safety margin")
            .axis_desc_style(desc_font())
            .label_style(label_font())
            .x_labels((k_hi - k_lo) as usize + 1)
            .x_label_formatter(&|v| format!("U/{v:.0}"))
            .y_label_formatter(&|v| format!("{v:.2}"))
            .draw()?;
        let font: TextStyle<'static> = (super::canvas::FONT, 13).into_font().into();
        for (m, k, t, label) in &self.tiles {
            let x = f64::from(*k);
            chart.draw_series(std::iter::once(Rectangle::new(
                [(x - 0.48, m - step * 0.48), (x + 0.48, m + step * 0.48)],
                tile_color(*t).filled(),
            )))?;
            chart.draw_series(std::iter::once(Text::new(
                label.clone(),
                (x - 0.44, *m + step * 0.1),
                font.clone(),
            )))?;
        }
        let ring = |(m, k): (f64, u32), c: RGBColor| {
            Rectangle::new(
                [
                    (f64::from(k) - 0.48, m - step * 0.48),
                    (f64::from(k) + 0.48, m + step * 0.48),
                ],
                c.stroke_width(4),
            )
        };
        chart.draw_series(std::iter::once(ring(self.adr, BLACK)))?;
        if let Some(p) = self.proposed {
            chart.draw_series(std::iter::once(ring(p, BLUE)))?;
        }
        let entry = |label: &str, color: RGBColor| LegendEntry {
            label: label.to_owned(),
            color,
            dashed: false,
        };
        draw_legend(
            &legend,
            "verdict",
            &[
                entry(
                    "pass: every binding rule; named: the tightest, limit ÷ now",
                    tile_color(Tile::Pass),
                ),
                entry("fail: the rule named, limit ÷ now", tile_color(Tile::Fail)),
                entry("insufficient data", tile_color(Tile::Insufficient)),
                entry("ADR-006 (0.30, U/3)", BLACK),
                entry("proposed", BLUE),
            ],
        )?;
        Ok(())
    }
}
