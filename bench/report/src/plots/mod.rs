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
//!   `min(lease, session TTL) × margin / 3` budget, log y in ms, one colour per TTL;
//! - `adr-decision` ([`DecisionMap`], drawn by `bench adr`): every (margin,
//!   divisor) of the ADR-006 revision's grid coloured by its verdict.
//!
//! PNG text is rasterised from the DejaVu Sans font embedded by the `dejavu`
//! crate, registered once as `sans-serif`, so no system font is needed.
//!
//! The module tree: `canvas` (the [`Plot`] trait, [`render`], the font and
//! the errors), `style` (colours, fonts, layout and legend), one module per
//! plot family (`rtt`, `margin`, `budget`, `decision`) and `set` (the report's five plots,
//! [`draw_plots`]). This file only re-exports them.

mod budget;
mod canvas;
mod decision;
mod margin;
mod rtt;
mod set;
mod style;

pub use canvas::{DrawError, FONT, PLOT_SIZE, Plot, PlotError, register_fonts, render};
pub use decision::{DecisionMap, Tile};
pub use set::{PLOT_STEMS, PlotOutput, draw_plots};
pub use style::color;
