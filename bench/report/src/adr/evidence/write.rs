//! Writing a pack's rendered files: the decision figure, the evidence
//! document and the proposed revision beside it, all from the pack's own
//! files under the given tolerances ([`write_pack`]). `bench adr` calls it
//! after its plan and with `--render-only`.

use std::path::{Path, PathBuf};

use crate::adr::evidence::derived::Derived;
use crate::adr::evidence::document::render_with;
use crate::adr::evidence::load::{LoadError, load};
use crate::adr::evidence::revision_doc::render_revision;
use crate::adr::evidence::sections::header::{DECISION_PLOT, short};
use crate::adr::pack::{EVIDENCE_MD, REVISION_MD};
use crate::adr::revision::{ADR_DIVISOR, ADR_MARGIN, Outcome, Tolerances};
use crate::plots::{DecisionMap, PlotError, Tile, render};

/// Why the rendered files could not be written.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// The pack could not be read (not a directory, an unreadable histogram).
    #[error(transparent)]
    Load(#[from] LoadError),
    /// The decision figure could not be drawn.
    #[error(transparent)]
    Plot(#[from] PlotError),
    /// A document could not be written: check the directory is writable.
    #[error("writing {path}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
}

/// The decision map of a derivation.
pub fn decision_map(d: &Derived) -> DecisionMap {
    let r = &d.revision;
    DecisionMap {
        tiles: r
            .grid
            .iter()
            .map(|p| {
                let tile = match p.outcome() {
                    Outcome::Pass => Tile::Pass,
                    Outcome::Fail => Tile::Fail,
                    Outcome::Insufficient => Tile::Insufficient,
                };
                (
                    p.margin,
                    p.divisor,
                    tile,
                    // The deciding rule and its limit ÷ now: for a pass the
                    // tightest one, so every tile says how close it is.
                    p.binding()
                        .map_or(String::new(), |c| format!("{} {:.3}×", short(c), c.ratio)),
                )
            })
            .collect(),
        adr: (ADR_MARGIN, ADR_DIVISOR),
        proposed: r.margin.zip(r.divisor),
    }
}

/// Draws the decision figure and writes `adr-006-evidence.md` and
/// `adr-006-revision.md` into `dir`; returns the two documents' paths.
pub fn write_pack(dir: &Path, tol: &Tolerances) -> Result<[PathBuf; 2], WriteError> {
    let mut ev = load(dir)?;
    let d = Derived::of(&ev, tol);
    for p in render(dir, DECISION_PLOT, &decision_map(&d))? {
        if let Some(name) = p.file_name().and_then(|n| n.to_str()) {
            ev.files.insert(name.to_owned());
        }
    }
    // The revision is written beside the document, which links to it.
    ev.files.insert(REVISION_MD.to_owned());
    let write = |name: &str, text: String| {
        let path = dir.join(name);
        std::fs::write(&path, text).map_err(|source| WriteError::Io {
            path: path.clone(),
            source,
        })?;
        Ok::<_, WriteError>(path)
    };
    let evidence = write(EVIDENCE_MD, render_with(&ev, tol))?;
    let revision = write(REVISION_MD, render_revision(&d))?;
    Ok([evidence, revision])
}
