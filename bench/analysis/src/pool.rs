//! The one pooling path: every figure of the heartbeat RTT that a summary,
//! a recommendation, a projection, the proposed revision or the evidence
//! document prints is computed here, from the cells' saved histograms
//! (`hgrm/<cell>.hdr` and `hgrm/<cell>.corrected.hdr`).
//!
//! - [`pool`] merges the histograms of a set of cells. A cell whose histogram
//!   is absent or unreadable is an error that names the file
//!   ([`MissingHistogram`]): nothing falls back to the results table's
//!   per-cell percentiles, which cannot be pooled (the largest p99 of 27
//!   cells is not the p99 of their samples).
//! - [`Pooled::quantile`] gives a tail quantile with a 95 % interval that
//!   respects dependence: a two-stage **cluster bootstrap** (resample the
//!   cells with replacement, then each drawn cell's time blocks with
//!   replacement, [`REPS`] times) so that the heartbeats of one stall, which
//!   land in one block of one cell, move together. Its interval is widened
//!   to contain the order-statistic (binomial, independent-samples) one of
//!   the pooled histogram, so dependence can only widen it, and its ends are
//!   read at the edges of the histogram's buckets, so it never has zero
//!   width unless the data is constant within one bucket's precision. The
//!   blocks are the 1 s time blocks the cell driver writes beside the
//!   corrected histogram (`hgrm/<cell>.corrected.blocks`,
//!   [`bench_core::blocks`]); a cell without that file (worker processes,
//!   an older bench) is one block. The method line says which units were
//!   used.
//!
//! The bootstrap is deterministic (a fixed seed), so a pack renders the same
//! document every time.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use bench_core::blocks::{self, BlocksError};
use bench_core::hist::{self, HistError, Series};
use hdrhistogram::Histogram;

use crate::results::CellRow;
use crate::stats::{QuantileCi, quantile_bootstrap_ci95};

/// Bootstrap resamples per interval.
pub const REPS: usize = 1000;
/// The seed of the bootstrap's generator (fixed: a pure function of the data).
const SEED: u64 = 0x0fe7_c290_57a1_2025;

/// A histogram as its recorded values and counts, ascending: what a time
/// block is kept as (a full histogram is ~190 KB; a block has a few hundred
/// distinct values).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Sparse(pub Vec<(u64, u64)>);

impl Sparse {
    /// The recorded values of `h` (each at its bucket's highest equivalent
    /// value, as HdrHistogram reports quantiles) with their counts.
    pub fn of(h: &Histogram<u64>) -> Sparse {
        Sparse(
            h.iter_recorded()
                .map(|v| {
                    (
                        h.highest_equivalent(v.value_iterated_to()),
                        v.count_at_value(),
                    )
                })
                .collect(),
        )
    }

    /// Samples held.
    pub fn len(&self) -> u64 {
        self.0.iter().map(|(_, c)| c).sum()
    }

    /// True without samples.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// One cell's heartbeat samples as saved under `hgrm/`.
#[derive(Clone, Debug)]
pub struct CellSamples {
    /// Raw RTT (send → reply), µs.
    pub raw: Histogram<u64>,
    /// Corrected for coordinated omission, µs.
    pub corrected: Histogram<u64>,
    /// The corrected histogram's time blocks, in order
    /// (`hgrm/<cell>.corrected.blocks`). Empty for a cell without that file
    /// (worker processes, an older bench), which is then one block.
    pub blocks: Vec<Sparse>,
    /// Their length, s (`None` without blocks).
    pub block_s: Option<f64>,
}

/// A cell's histogram is absent or unreadable: every pooled figure needs it.
#[derive(Debug, thiserror::Error)]
#[error(
    "{path}: the heartbeat histogram of cell {cell} is missing or unreadable; every pooled \
     percentile is computed from the cells' histograms (restore the file or rerun the cell)"
)]
pub struct MissingHistogram {
    /// The cell.
    pub cell: String,
    /// The file that could not be read.
    pub path: PathBuf,
    /// Why.
    #[source]
    pub source: HistError,
}

/// Where cells' samples come from: a results directory ([`DirSamples`]) or,
/// in tests, a map.
pub trait SampleSource {
    /// The samples of `cell`.
    fn samples(&self, cell: &str) -> Result<CellSamples, MissingHistogram>;
}

/// The samples of a results directory's cells, read once each.
pub struct DirSamples {
    dir: PathBuf,
    cache: RefCell<BTreeMap<String, CellSamples>>,
}

impl DirSamples {
    /// The cells of the results directory `dir`.
    pub fn new(dir: &Path) -> Self {
        DirSamples {
            dir: dir.to_owned(),
            cache: RefCell::new(BTreeMap::new()),
        }
    }
}

/// Reads one cell's histograms from `dir/hgrm/`.
pub fn load_cell(dir: &Path, cell: &str) -> Result<CellSamples, MissingHistogram> {
    let series = |s: Series| {
        hist::load_series(dir, cell, s).map_err(|source| MissingHistogram {
            cell: cell.to_owned(),
            path: hist::series_hdr_path(dir, cell, s),
            source,
        })
    };
    let raw = series(Series::Rtt)?;
    let corrected = series(Series::Corrected)?;
    let path = blocks::blocks_path(dir, cell);
    let invalid = |why: String| MissingHistogram {
        cell: cell.to_owned(),
        path: path.clone(),
        source: HistError::Read {
            path: path.clone(),
            source: std::io::Error::new(std::io::ErrorKind::InvalidData, why),
        },
    };
    let (blocks, block_s) = match blocks::load_blocks(dir, cell) {
        Ok(None) => (Vec::new(), None),
        Ok(Some(b)) if b.len() != corrected.len() => {
            return Err(invalid(format!(
                "its blocks hold {} samples, the cell's corrected histogram {}",
                b.len(),
                corrected.len()
            )));
        }
        Ok(Some(b)) => (b.blocks.iter().map(Sparse::of).collect(), Some(b.block_s)),
        Err(BlocksError::Hist(source)) => {
            return Err(MissingHistogram {
                cell: cell.to_owned(),
                path: path.clone(),
                source,
            });
        }
        Err(e @ BlocksError::Header { .. }) => return Err(invalid(e.to_string())),
    };
    Ok(CellSamples {
        raw,
        corrected,
        blocks,
        block_s,
    })
}

impl SampleSource for DirSamples {
    fn samples(&self, cell: &str) -> Result<CellSamples, MissingHistogram> {
        if let Some(s) = self.cache.borrow().get(cell) {
            return Ok(s.clone());
        }
        let s = load_cell(&self.dir, cell)?;
        self.cache.borrow_mut().insert(cell.to_owned(), s.clone());
        Ok(s)
    }
}

impl SampleSource for BTreeMap<String, CellSamples> {
    fn samples(&self, cell: &str) -> Result<CellSamples, MissingHistogram> {
        self.get(cell).cloned().ok_or_else(|| MissingHistogram {
            cell: cell.to_owned(),
            path: PathBuf::from(format!("hgrm/{cell}.hdr")),
            source: HistError::Read {
                path: PathBuf::from(format!("hgrm/{cell}.hdr")),
                source: std::io::Error::from(std::io::ErrorKind::NotFound),
            },
        })
    }
}

/// The samples of a set of cells, pooled.
#[derive(Clone, Debug)]
pub struct Pooled {
    /// Cells pooled.
    pub cells: usize,
    /// Their raw histograms, merged.
    pub raw: Histogram<u64>,
    /// Their corrected histograms, merged.
    pub corrected: Histogram<u64>,
    /// Per cell, its corrected time blocks (one block: the whole cell).
    clusters: Vec<Vec<Sparse>>,
    /// The block length, when every cell recorded blocks of one length.
    block_s: Option<f64>,
}

/// Pools the cells `rows` from `src`; `Err` names the first missing file.
pub fn pool<'a>(
    src: &dyn SampleSource,
    rows: impl IntoIterator<Item = &'a CellRow>,
) -> Result<Pooled, MissingHistogram> {
    let (mut raw, mut corrected) = (hist::new_histogram(), hist::new_histogram());
    let mut clusters = Vec::new();
    let mut lengths: Vec<Option<f64>> = Vec::new();
    for r in rows {
        let s = src.samples(&r.cell)?;
        let merge = |into: &mut Histogram<u64>, h: &Histogram<u64>, series| {
            into.add(h).map_err(|e| MissingHistogram {
                cell: r.cell.clone(),
                path: PathBuf::from(bench_core::hist::HGRM_DIR)
                    .join(format!("{}.hdr", Series::stem(series, &r.cell))),
                source: HistError::Add(e),
            })
        };
        merge(&mut raw, &s.raw, Series::Rtt)?;
        merge(&mut corrected, &s.corrected, Series::Corrected)?;
        if s.blocks.is_empty() {
            clusters.push(vec![Sparse::of(&s.corrected)]);
        } else {
            clusters.push(s.blocks);
        }
        lengths.push(s.block_s);
    }
    let block_s = match lengths.first() {
        Some(Some(first)) if lengths.iter().all(|l| *l == Some(*first)) => Some(*first),
        _ => None,
    };
    Ok(Pooled {
        cells: clusters.len(),
        raw,
        corrected,
        clusters,
        block_s,
    })
}

/// A tiny deterministic generator (splitmix64): the bootstrap needs uniform
/// indices, not cryptography.
struct SplitMix(u64);

impl SplitMix {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Uniform in `0..n` (n > 0).
    fn below(&mut self, n: usize) -> usize {
        (((self.next() >> 11) as u128 * n as u128) >> 53) as usize
    }
}

/// The 2.5 % and 97.5 % points of the two-stage cluster bootstrap of the
/// `q` quantile over `clusters` (cells of blocks), `None` without samples.
pub fn cluster_bootstrap_ci95(clusters: &[Vec<Sparse>], q: f64, reps: usize) -> Option<(u64, u64)> {
    let mut values: Vec<u64> = clusters
        .iter()
        .flatten()
        .flat_map(|b| b.0.iter().map(|(v, _)| *v))
        .collect();
    values.sort_unstable();
    values.dedup();
    if values.is_empty() || reps == 0 {
        return None;
    }
    let indexed: Vec<Vec<Vec<(usize, u64)>>> = clusters
        .iter()
        .map(|c| {
            c.iter()
                .map(|b| {
                    b.0.iter()
                        .map(|(v, n)| (values.binary_search(v).unwrap_or(0), *n))
                        .collect()
                })
                .collect()
        })
        .filter(|c: &Vec<Vec<(usize, u64)>>| !c.is_empty())
        .collect();
    let mut rng = SplitMix(SEED);
    let mut counts = vec![0u64; values.len()];
    let mut out = Vec::with_capacity(reps);
    for _ in 0..reps {
        counts.iter_mut().for_each(|c| *c = 0);
        let mut total = 0u64;
        for _ in 0..indexed.len() {
            let cell = &indexed[rng.below(indexed.len())];
            for _ in 0..cell.len() {
                for &(i, n) in &cell[rng.below(cell.len())] {
                    counts[i] += n;
                    total += n;
                }
            }
        }
        if total == 0 {
            continue;
        }
        let rank = ((q * total as f64).ceil() as u64).clamp(1, total);
        let mut seen = 0;
        for (i, c) in counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                out.push(values[i]);
                break;
            }
        }
    }
    if out.is_empty() {
        return None;
    }
    out.sort_unstable();
    let at = |p: f64| out[((p * out.len() as f64) as usize).min(out.len() - 1)];
    Some((at(0.025), at(0.975)))
}

impl Pooled {
    /// One distribution with no cells or blocks behind it (a production
    /// histogram read from Prometheus, a test): one cluster of one block, so
    /// its interval is the order-statistic one. No raw histogram.
    pub fn from_histogram(corrected: Histogram<u64>) -> Pooled {
        Pooled {
            cells: 1,
            raw: hist::new_histogram(),
            clusters: vec![vec![Sparse::of(&corrected)]],
            corrected,
            block_s: None,
        }
    }

    /// Samples in the pooled corrected histogram.
    pub fn count(&self) -> u64 {
        self.corrected.len()
    }

    /// The corrected `q` quantile with its 95 % interval (module doc), µs;
    /// `None` without samples.
    pub fn quantile(&self, q: f64) -> Option<QuantileCi> {
        let h = &self.corrected;
        let binomial = quantile_bootstrap_ci95(h, q)?;
        let (lo, hi) = cluster_bootstrap_ci95(&self.clusters, q, REPS)
            .unwrap_or((binomial.lo_us, binomial.hi_us));
        let lo = lo.min(binomial.lo_us).min(binomial.value_us);
        let hi = hi.max(binomial.hi_us).max(binomial.value_us);
        Some(QuantileCi {
            lo_us: h.lowest_equivalent(lo),
            hi_us: h.highest_equivalent(hi),
            ..binomial
        })
    }

    /// The method of [`Pooled::quantile`]'s interval, for the reports (no
    /// comma: it is a csv value that readers split naively).
    pub fn method(&self) -> String {
        let blocks: usize = self.clusters.iter().map(Vec::len).sum();
        let within = match self.block_s {
            _ if blocks <= self.cells => "; no time blocks are recorded".to_owned(),
            Some(s) => format!("; then of their {blocks} time blocks of {s} s"),
            None => format!("; then of their {blocks} time blocks"),
        };
        format!(
            "cluster bootstrap ({REPS} resamples of the {} cells{within}) widened to hold the \
             order-statistic interval",
            self.cells
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bench_core::hist::new_histogram;

    fn block(values: &[(u64, u64)]) -> Histogram<u64> {
        let mut h = new_histogram();
        for &(v, n) in values {
            h.record_n(v, n).unwrap();
        }
        h
    }

    /// 20 blocks of 500 samples spread over 4–6 ms, one of them with a
    /// 50-sample stall at 400 ms: the stall's samples are one event.
    fn stalled() -> Vec<Histogram<u64>> {
        (0..20)
            .map(|i| {
                let mut v: Vec<(u64, u64)> = (0..500).map(|j| (4_000 + j * 4, 1)).collect();
                if i == 7 {
                    v.push((400_000, 50));
                }
                block(&v)
            })
            .collect()
    }

    #[test]
    fn a_stall_block_widens_the_interval_beyond_the_binomial_one() {
        let blocks = stalled();
        let mut all = new_histogram();
        blocks.iter().for_each(|b| all.add(b).unwrap());
        let clusters = vec![blocks.iter().map(Sparse::of).collect::<Vec<_>>()];
        let binomial = quantile_bootstrap_ci95(&all, 0.999).unwrap();
        let (lo, hi) = cluster_bootstrap_ci95(&clusters, 0.999, REPS).unwrap();
        assert!(
            hi - lo > binomial.hi_us - binomial.lo_us,
            "block [{lo}, {hi}] vs binomial [{}, {}]",
            binomial.lo_us,
            binomial.hi_us
        );
        // Without the stall in a resample, the p99.9 is the 4–6 ms body.
        assert!(lo < 10_000, "{lo}");
    }

    #[test]
    fn independent_blocks_give_about_the_binomial_width_and_never_zero() {
        let blocks: Vec<Histogram<u64>> = (0..20)
            .map(|i| {
                block(
                    &(0..500)
                        .map(|j| (4_000 + (j * 7 + i) % 2_000, 1))
                        .collect::<Vec<_>>(),
                )
            })
            .collect();
        let mut src = BTreeMap::new();
        for (i, b) in blocks.iter().enumerate() {
            src.insert(
                format!("c{i}"),
                CellSamples {
                    raw: b.clone(),
                    corrected: b.clone(),
                    blocks: vec![Sparse::of(b)],
                    block_s: Some(1.0),
                },
            );
        }
        let rows: Vec<CellRow> = (0..20)
            .map(|i| CellRow {
                cell: format!("c{i}"),
                ..CellRow::default()
            })
            .collect();
        let p = pool(&src, &rows).unwrap();
        assert_eq!(p.count(), 10_000);
        let ci = p.quantile(0.99).unwrap();
        assert!(ci.lo_us < ci.value_us && ci.value_us <= ci.hi_us, "{ci:?}");
        // A constant sample still has its bucket's width.
        let one = block(&[(5_000, 1_000)]);
        let mut src = BTreeMap::new();
        src.insert(
            "k".to_owned(),
            CellSamples {
                raw: one.clone(),
                corrected: one.clone(),
                blocks: Vec::new(),
                block_s: None,
            },
        );
        let rows = [CellRow {
            cell: "k".into(),
            ..CellRow::default()
        }];
        let p = pool(&src, &rows).unwrap();
        let ci = p.quantile(0.999).unwrap();
        assert!(
            ci.lo_us <= 5_000 && ci.hi_us >= 5_000 && ci.hi_us > ci.lo_us,
            "{ci:?}"
        );
        assert!(p.method().contains("no time blocks"), "{}", p.method());
    }

    #[test]
    fn a_missing_cell_is_an_error_naming_its_file() {
        let src: BTreeMap<String, CellSamples> = BTreeMap::new();
        let rows = [CellRow {
            cell: "ttl=1s_m=0.3".into(),
            ..CellRow::default()
        }];
        let e = pool(&src, &rows).unwrap_err();
        assert!(e.to_string().contains("hgrm/ttl=1s_m=0.3.hdr"), "{e}");
    }

    /// A results directory's blocks file is read into the cell's clusters
    /// (the method line names the blocks), and one whose blocks do not add
    /// up to the cell's corrected histogram is refused, naming the file.
    #[test]
    fn a_directory_cell_reads_its_time_blocks_and_refuses_ones_that_do_not_add_up() {
        use bench_core::blocks::{Blocks, save_blocks};
        let dir = std::env::temp_dir().join(format!("fp-pool-blocks-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let parts = stalled();
        let mut all = new_histogram();
        parts.iter().for_each(|b| all.add(b).unwrap());
        for series in [Series::Rtt, Series::Corrected] {
            hist::save_series(&dir, "c", series, &all).unwrap();
        }
        let blocks = Blocks {
            block_s: 1.0,
            blocks: parts.clone(),
        };
        save_blocks(&dir, "c", &blocks).unwrap();
        let rows = [CellRow {
            cell: "c".into(),
            ..CellRow::default()
        }];
        let p = pool(&DirSamples::new(&dir), &rows).unwrap();
        assert_eq!(p.count(), all.len());
        assert!(
            p.method().contains("20 time blocks of 1 s"),
            "{}",
            p.method()
        );
        // One block short: the file no longer adds up to the histogram.
        let short = Blocks {
            block_s: 1.0,
            blocks: parts[1..].to_vec(),
        };
        save_blocks(&dir, "c", &short).unwrap();
        let e = pool(&DirSamples::new(&dir), &rows).unwrap_err();
        assert!(
            bench_core::error::Chain(&e)
                .to_string()
                .contains("c.corrected.blocks"),
            "{}",
            bench_core::error::Chain(&e)
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
