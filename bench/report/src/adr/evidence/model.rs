//! What the document reads from a pack, as types: a results directory
//! ([`SweepData`], with its merged RTT per TTL, [`TtlRtt`]), the pause and
//! clock experiments' JSON (the experiments' own types, from
//! `bench_core::results`), and all of it together ([`Evidence`]).

use std::collections::{BTreeMap, BTreeSet};

use bench_analysis::pool::{CellSamples, Pooled, pool};
use bench_analysis::recommend::Recommendation;
use bench_analysis::results::CellRow;
use bench_analysis::summary::Summary;
use bench_analysis::triggers::TriggerResult;

use crate::adr::evidence::table::{Pct, Table};
use crate::adr::pack::AdrManifest;

/// The heartbeat RTT of one TTL of a sweep, its cells' histograms merged.
#[derive(Clone, Debug, PartialEq)]
pub struct TtlRtt {
    /// The TTL.
    pub lease_ms: u64,
    /// Cells merged.
    pub cells: usize,
    /// How its intervals were computed ([`bench_analysis::pool::Pooled::method`]).
    pub method: String,
    /// Corrected for coordinated omission.
    pub corrected: Pct,
    /// Raw (send → reply).
    pub raw: Pct,
}

/// A results directory written by `bench sweep` or `experiments throttle`.
#[derive(Clone, Debug)]
pub struct SweepData {
    /// Its subdirectory of the pack.
    pub name: String,
    /// The results table.
    pub rows: Vec<CellRow>,
    /// The triggers evaluated on it (the same function `bench triggers` runs).
    pub triggers: Vec<TriggerResult>,
    /// The recommendation per TTL (`bench report`'s).
    pub recommendations: Vec<Recommendation>,
    /// The merged RTT per TTL.
    pub rtt: Vec<TtlRtt>,
    /// Its `manifest.json`.
    pub manifest: Option<serde_json::Value>,
    /// The summary over repeats and the per-TTL floors, pooled from the
    /// histograms (the same [`bench_analysis::summary::build`] `bench report` runs).
    pub summary_rows: Summary,
    /// Every cell's histograms, by cell id: what every pooled figure of the
    /// document is computed from ([`SweepData::pooled`]).
    pub samples: BTreeMap<String, CellSamples>,
    /// `summary.csv` (CIs over repeats), if written.
    pub summary: Option<Table>,
    /// `projection.csv`, if written.
    pub projection: Option<Table>,
}

impl SweepData {
    /// The cells `rows` of this step, pooled ([`bench_analysis::pool`]).
    /// [`crate::adr::evidence::load`] read every cell's histograms and pooled
    /// the whole table, so no subset can fail: a failure would be a bug, and
    /// gives an empty pool that every verdict reads as insufficient data.
    pub fn pooled<'a>(&self, rows: impl IntoIterator<Item = &'a CellRow>) -> Pooled {
        pool(&self.samples, rows)
            .unwrap_or_else(|_| Pooled::from_histogram(bench_core::hist::new_histogram()))
    }
}

/// `pause.json`: the experiment's own type (`bench_core::results::pause`),
/// which `experiments pause` writes.
pub type PauseData = bench_core::results::pause::PauseResult;

/// One pause round of `pause.json`.
pub type PauseRound = bench_core::results::pause::PauseRecord;

/// `clock.json`: the experiment's own type (`bench_core::results::clock`),
/// which `experiments clock` writes.
pub type ClockData = bench_core::results::clock::ClockResult;

/// The clock simulation's inputs.
pub type ClockParams = bench_core::results::clock::SimParams;

/// One row of `clock.csv` (and of `clock.json`'s `rows`).
pub type ClockRow = bench_core::results::clock::SweepRow;

/// The clock experiment's findings.
pub type ClockFindings = bench_core::results::clock::Findings;

/// Everything the document says, read from a pack directory.
#[derive(Clone, Debug, Default)]
pub struct Evidence {
    /// `adr-manifest.json`.
    pub manifest: Option<AdrManifest>,
    /// Per step name: its results directory (sweep, sweep-pause, adaptive, throttle).
    pub sweeps: BTreeMap<String, SweepData>,
    /// `pause/pause.json`, `pause-uc03/pause.json`.
    pub pauses: BTreeMap<String, PauseData>,
    /// `clock/clock.json`, `clock-margin/clock.json`.
    pub clocks: BTreeMap<String, ClockData>,
    /// `peer/peer.csv`.
    pub peer: Option<Table>,
    /// The lock services side by side (lease, token, exchange RTT, margin,
    /// pauses): [`crate::lock_services::lock_services_in`] the pack.
    pub lock_services: Option<serde_json::Value>,
    /// `long-hold/results.csv`: payouts that outlive their lease, per margin
    /// (reported beside the decision, not weighed in it).
    pub long_hold: Option<Vec<CellRow>>,
    /// `production-rtt.json`: a heartbeat RTT distribution measured in
    /// production (`bench adr --rtt-from`), which the production condition
    /// uses instead of the lab's RTTs.
    pub production_rtt: Option<bench_analysis::production_rtt::ProductionRtt>,
    /// Per step name: the machine's load over the step, from its own
    /// `manifest.json` (absent where the manifest predates the reading).
    pub step_load: BTreeMap<String, bench_analysis::manifest::MachineLoad>,
    /// Per step name: the commit and build profile it ran at, from its own
    /// `manifest.json` (`git_commit`, `versions.profile`).
    pub step_build: BTreeMap<String, (String, String)>,
    /// Files of the pack (relative paths, `cells/` left out), for links.
    pub files: BTreeSet<String>,
    /// Files that exist but could not be read, with the error.
    pub problems: Vec<(String, String)>,
}
