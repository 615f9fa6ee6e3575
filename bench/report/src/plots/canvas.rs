//! The frame every plot is drawn in: the [`Plot`] trait a plot implements,
//! [`render`] that writes it as `<stem>.svg` and `<stem>.png`, the embedded
//! font ([`register_fonts`], [`FONT`]), the size, and the errors
//! ([`DrawError`] while drawing, [`PlotError`] while rendering). The
//! experiments' plots use the same frame.
//!
//! PNG text is rasterised from the DejaVu Sans font embedded by the `dejavu`
//! crate, registered once as `sans-serif`, so no system font is needed.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use plotters::coord::Shift;
use plotters::prelude::*;
use plotters::style::FontStyle;

/// Pixel size of every plot.
pub const PLOT_SIZE: (u32, u32) = (1280, 720);

/// Font family every text element uses; registered from the embedded DejaVu Sans.
pub const FONT: &str = "sans-serif";

/// What a plotters drawing call failed with, the backend's own error type
/// erased (each backend has its own). The message is plotters'; a plot
/// returns it from [`Plot::draw`] and [`render`] names the file it was for.
#[derive(Debug, thiserror::Error)]
#[error(transparent)]
pub struct DrawError(Box<dyn std::error::Error + Send + Sync>);

impl<E: std::error::Error + Send + Sync + 'static> From<DrawingAreaErrorKind<E>> for DrawError {
    fn from(e: DrawingAreaErrorKind<E>) -> Self {
        DrawError(Box::new(e))
    }
}

/// Why a plot could not be rendered to its files.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    /// The embedded DejaVu Sans could not be registered with plotters, so no
    /// PNG could have text; a build problem (the `dejavu` crate's font).
    #[error("the embedded DejaVu Sans font could not be registered")]
    Font,
    /// The backend could not start or finish a file (filling the canvas,
    /// writing the SVG or PNG out): check the directory is writable and no
    /// directory is in the file's place.
    #[error(transparent)]
    Backend(#[from] DrawError),
    /// The plot itself failed while drawing onto `path`; the cause is what
    /// plotters refused (an empty axis range, a backend write).
    #[error("drawing {path}")]
    Drawing {
        /// The SVG or PNG being drawn.
        path: PathBuf,
        /// plotters' error.
        #[source]
        source: DrawError,
    },
}

/// Registers the embedded DejaVu Sans as `sans-serif` (once per process).
pub fn register_fonts() -> Result<(), PlotError> {
    static REGISTERED: OnceLock<bool> = OnceLock::new();
    let ok = *REGISTERED.get_or_init(|| {
        plotters::style::register_font(FONT, FontStyle::Normal, dejavu::sans::regular()).is_ok()
    });
    if ok { Ok(()) } else { Err(PlotError::Font) }
}

/// One plot that can draw itself on any plotters backend (the experiments'
/// plots implement it too, so every plot is drawn the same way).
pub trait Plot {
    /// Draws onto `root`, already filled white.
    fn draw<DB: DrawingBackend>(&self, root: &DrawingArea<DB, Shift>) -> Result<(), DrawError>
    where
        DB::ErrorType: 'static;
}

/// Renders `plot` to `<stem>.svg` and `<stem>.png` in `dir`, with the
/// embedded font registered first.
pub fn render(dir: &Path, stem: &str, plot: &impl Plot) -> Result<[PathBuf; 2], PlotError> {
    register_fonts()?;
    let svg = dir.join(format!("{stem}.svg"));
    draw_file(
        SVGBackend::new(&svg, PLOT_SIZE).into_drawing_area(),
        &svg,
        plot,
    )?;
    let png = dir.join(format!("{stem}.png"));
    draw_file(
        BitMapBackend::new(&png, PLOT_SIZE).into_drawing_area(),
        &png,
        plot,
    )?;
    Ok([svg, png])
}

/// Draws `plot` on `root`, filled white first, and writes the file out
/// (`path` is the file, for the error).
fn draw_file<DB: DrawingBackend>(
    root: DrawingArea<DB, Shift>,
    path: &Path,
    plot: &impl Plot,
) -> Result<(), PlotError>
where
    DB::ErrorType: 'static,
{
    root.fill(&WHITE).map_err(DrawError::from)?;
    plot.draw(&root).map_err(|source| PlotError::Drawing {
        path: path.to_owned(),
        source,
    })?;
    root.present().map_err(DrawError::from)?;
    Ok(())
}
