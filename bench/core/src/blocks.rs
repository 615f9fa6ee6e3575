//! A cell's corrected heartbeat RTT in time blocks: `hgrm/<cell>.corrected.blocks`.
//!
//! The cell driver snapshots the corrected histogram of its in-process
//! clients every [`BLOCK_S`] seconds of the measured window; each block is
//! what was recorded between two snapshots (the last one ends at the
//! window's close). The blocks of a cell add up to its `.corrected.hdr`
//! exactly. They are what the pooled quantile intervals resample within a
//! cell (`bench_analysis::pool`): the heartbeats of one stall land in one or
//! two blocks and move together.
//!
//! The file is text: a header line `# corrected-rtt-blocks block_s=<s>`
//! and then one block per line, each in the `.hdr` encoding
//! ([`crate::hist::encode`], V2 deflate in base64).

use std::path::{Path, PathBuf};

use hdrhistogram::Histogram;

use crate::hist::{self, DecodeError, HGRM_DIR, HistError};

/// The length of one time block, s.
pub const BLOCK_S: f64 = 1.0;

/// The header's prefix.
const HEADER: &str = "# corrected-rtt-blocks block_s=";

/// A cell's corrected histogram in consecutive time blocks.
#[derive(Clone, Debug, PartialEq)]
pub struct Blocks {
    /// The length of each block, s (the last one may be shorter).
    pub block_s: f64,
    /// The blocks, in time order (µs).
    pub blocks: Vec<Histogram<u64>>,
}

impl Blocks {
    /// Samples over every block.
    pub fn len(&self) -> u64 {
        self.blocks.iter().map(Histogram::len).sum()
    }

    /// True without samples.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// Why a blocks file could not be read.
#[derive(Debug, thiserror::Error)]
pub enum BlocksError {
    /// The file could not be read or a block not decoded.
    #[error(transparent)]
    Hist(#[from] HistError),
    /// The file does not start with the header line: it is not a blocks file.
    #[error("{path}: no `{HEADER}<s>` header line")]
    Header {
        /// The file.
        path: PathBuf,
    },
}

/// `hgrm/<cell>.corrected.blocks` under `dir`.
pub fn blocks_path(dir: &Path, cell: &str) -> PathBuf {
    dir.join(HGRM_DIR).join(format!("{cell}.corrected.blocks"))
}

/// Writes `blocks` of `cell` under `dir` (`hgrm/` must be creatable).
pub fn save_blocks(dir: &Path, cell: &str, blocks: &Blocks) -> Result<(), HistError> {
    hist::hgrm_dir_for(dir, cell)?;
    let mut text = format!("{HEADER}{}\n", blocks.block_s);
    for b in &blocks.blocks {
        let line = hist::encode(b).map_err(|source| HistError::Encode {
            stem: format!("{cell}.corrected.blocks"),
            source,
        })?;
        text.push_str(&line);
        text.push('\n');
    }
    let path = blocks_path(dir, cell);
    std::fs::write(&path, text).map_err(|source| HistError::Write { path, source })
}

/// Reads `cell`'s blocks under `dir`: `Ok(None)` when the cell has no blocks
/// file (a cell of worker processes, or of an older bench).
pub fn load_blocks(dir: &Path, cell: &str) -> Result<Option<Blocks>, BlocksError> {
    let path = blocks_path(dir, cell);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => return Err(HistError::Read { path, source }.into()),
    };
    let mut lines = text.lines();
    let block_s = lines
        .next()
        .and_then(|l| l.strip_prefix(HEADER))
        .and_then(|s| s.trim().parse::<f64>().ok())
        .filter(|s| *s > 0.0)
        .ok_or_else(|| BlocksError::Header { path: path.clone() })?;
    let blocks = lines
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            hist::decode(l).map_err(|source: DecodeError| HistError::Decode {
                path: path.clone(),
                source,
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Some(Blocks { block_s, blocks }))
}

/// The blocks between consecutive cumulative snapshots of one histogram:
/// `snapshots[0]`, then `snapshots[i] − snapshots[i − 1]`. A snapshot that is
/// not a superset of the one before (the histogram was reset between them)
/// is an error: [`hdrhistogram::SubtractionError`].
pub fn blocks_of(
    snapshots: &[Histogram<u64>],
) -> Result<Vec<Histogram<u64>>, hdrhistogram::SubtractionError> {
    let mut out = Vec::with_capacity(snapshots.len());
    let mut prev: Option<&Histogram<u64>> = None;
    for s in snapshots {
        let mut b = s.clone();
        if let Some(p) = prev {
            b.subtract(p)?;
        }
        out.push(b);
        prev = Some(s);
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("fp-blocks-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        d
    }

    fn hist_of(values: &[u64]) -> Histogram<u64> {
        let mut h = hist::new_histogram();
        values.iter().for_each(|v| h.record(*v).unwrap());
        h
    }

    #[test]
    fn blocks_round_trip_and_add_up_to_the_cumulative_histogram() {
        let dir = scratch("round-trip");
        let snaps = [
            hist_of(&[1000, 2000]),
            hist_of(&[1000, 2000, 5000, 400_000]),
            hist_of(&[1000, 2000, 5000, 400_000, 3000]),
        ];
        let blocks = Blocks {
            block_s: BLOCK_S,
            blocks: blocks_of(&snaps).unwrap(),
        };
        assert_eq!(
            blocks.blocks.iter().map(Histogram::len).collect::<Vec<_>>(),
            [2, 2, 1]
        );
        assert_eq!(blocks.len(), snaps[2].len());
        save_blocks(dir.as_path(), "ttl=1s_margin=0.30", &blocks).unwrap();
        let back = load_blocks(dir.as_path(), "ttl=1s_margin=0.30")
            .unwrap()
            .unwrap();
        assert_eq!(back, blocks);
        assert_eq!(back.blocks[1].max(), blocks.blocks[1].max());
        assert!(load_blocks(dir.as_path(), "other").unwrap().is_none());
    }

    #[test]
    fn a_file_without_the_header_or_a_shrinking_snapshot_is_refused() {
        let dir = scratch("refused");
        std::fs::create_dir_all(dir.as_path().join(HGRM_DIR)).unwrap();
        std::fs::write(blocks_path(dir.as_path(), "c"), "not blocks\n").unwrap();
        let e = load_blocks(dir.as_path(), "c").unwrap_err();
        assert!(e.to_string().contains("c.corrected.blocks"), "{e}");
        assert!(blocks_of(&[hist_of(&[1, 2]), hist_of(&[1])]).is_err());
    }
}
