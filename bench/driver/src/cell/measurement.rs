//! What one cell measured ([`Measurement`]): the plan it ran, the ledger's
//! counts over its window, what the workers counted, CPU seconds and the
//! fence-out trace. The bench turns it into a results row.

use std::error::Error;
use std::path::{Path, PathBuf};
use std::time::Duration;

use bench_core::backend::{BackendKind, RailFences};
use bench_core::blocks::{self, Blocks};
use bench_core::cpu::CpuUse;
use bench_core::grid::PolicySpec;
use bench_core::hist::{self, RttSummary};
use fencepost_api::ledger_check::LedgerCheck;
use fencepost_sdk::Histogram;
use fencepost_sdk::lease::{RttSummary as SdkRttSummary, adaptive_margin};

use crate::cell::plan::{CellPlan, StoppedBy};
use crate::cell::pool::PoolReport;
use crate::cell::window::FenceTrace;

/// What the ledger's counts did over a measured window: `after − before` for
/// every count, so a cell on a shared (or external) ledger counts only
/// itself; the violations are those of the whole ledger `after` the window.
pub fn ledger_delta(before: &LedgerCheck, after: &LedgerCheck) -> LedgerCheck {
    let d = |a: u64, b: u64| a.saturating_sub(b);
    LedgerCheck {
        payouts: d(after.payouts, before.payouts),
        paid: d(after.paid, before.paid),
        paid_twice: d(after.paid_twice, before.paid_twice),
        stale_paid: d(after.stale_paid, before.stale_paid),
        fenced_out_fence1: d(after.fenced_out_fence1, before.fenced_out_fence1),
        fenced_out_fence2: d(after.fenced_out_fence2, before.fenced_out_fence2),
        fenced_out_total: d(after.fenced_out_total, before.fenced_out_total),
        duplicate_attempted: d(after.duplicate_attempted, before.duplicate_attempted),
        not_claimed: d(after.not_claimed, before.not_claimed),
        violations: after.violations.clone(),
    }
}

/// Writes `blocks` of `cell` under `dir/hgrm/`, if any.
pub fn save_blocks(dir: &Path, cell: &str, blocks: Option<&Blocks>) -> Result<(), WriteError> {
    match blocks {
        Some(b) => blocks::save_blocks(dir, cell, b).map_err(|e| WriteError::Histograms(e.into())),
        None => Ok(()),
    }
}

/// Why a cell's measurement could not be written next to its results.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// A histogram file could not be written (the cause names the file and
    /// the OS error, or a cell id that is not a file name): fix the output
    /// directory, or the cell's id.
    #[error(transparent)]
    Histograms(Box<dyn Error + Send + Sync>),
    /// The ledger check could not be encoded as JSON (not expected of plain
    /// counts): report it.
    #[error(transparent)]
    Encode(#[from] serde_json::Error),
    /// `ledger-check.json` could not be written: check the output
    /// directory's space and permissions.
    #[error("writing {}", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

/// Everything one cell measured: what [`crate::cell::measure`] returns.
#[derive(Clone, Debug)]
pub struct Measurement {
    /// The cell: every configuration column comes from here.
    pub plan: CellPlan,
    /// From the first worker's start to the last one's stop.
    pub window: Duration,
    /// The ledger's counts over the window ([`ledger_delta`]).
    pub ledger: LedgerCheck,
    /// The full ledger check after the window (`ledger-check.json`).
    pub ledger_after: LedgerCheck,
    /// What the workers measured: counts, the merged histograms, renewals.
    pub workers: PoolReport,
    /// CPU seconds per process over the window.
    pub cpu: CpuUse,
    /// The window's fence-outs traced to the workers' beliefs (trigger 4).
    pub fences: FenceTrace,
    /// The lock service the workers ran on (the stack's).
    pub backend: BackendKind,
    /// Whether the rail compared fencing tokens (the stack's).
    pub rail_fences: RailFences,
    /// The corrected histogram in time blocks of the window (adding up to
    /// `workers.hists.corrected`); `None` when a member ran elsewhere.
    pub blocks: Option<Blocks>,
    /// Why the window ended.
    pub stopped_by: StoppedBy,
    /// Idle sessions that heartbeated beside the workers.
    pub idle_sessions: u32,
    /// The lock-server's peak RSS (KiB), where it is a local process.
    pub lock_server_rss_peak_kb: Option<u64>,
    /// Lost idle sessions replaced by a new one during the window.
    pub idle_reopened: u64,
    /// Freezes (SIGSTOPs of `--server-pause`) applied to the lock-server
    /// inside the measured window.
    pub server_pauses: u64,
}

impl Measurement {
    /// The raw heartbeat RTT summary of the merged histogram (µs).
    pub fn rtt(&self) -> RttSummary {
        hist::summarize(&self.workers.hists.rtt)
    }

    /// The merged raw heartbeat RTT histogram (µs).
    pub fn histogram(&self) -> &Histogram<u64> {
        &self.workers.hists.rtt
    }

    /// Saves every histogram of the cell under `dir/hgrm/` ([`hist::Series`])
    /// and its time blocks ([`bench_core::blocks`]) when it has them.
    pub fn save_histograms(&self, dir: &Path) -> Result<(), WriteError> {
        self.workers
            .hists
            .save(dir, &self.plan.id)
            .map_err(|e| WriteError::Histograms(e.into()))?;
        save_blocks(dir, &self.plan.id, self.blocks.as_ref())
    }

    /// The margin the workers used: the mean of the margins their SDKs
    /// applied to lease deadlines in the window (warm-up excluded); without
    /// any, the fixed margin, or what the adaptive policy computes from the
    /// cell's RTTs.
    pub fn margin_effective(&self) -> f64 {
        if let Some(mean) = self.workers.margins.mean() {
            return (mean * 1e6).round() / 1e6;
        }
        match self.plan.policy {
            PolicySpec::Fixed => self.plan.margin,
            PolicySpec::Adaptive { k, floor, ceiling } => {
                let rtt = self.rtt();
                adaptive_margin(
                    k,
                    floor,
                    ceiling,
                    self.plan.lease,
                    SdkRttSummary {
                        samples: rtt.count,
                        p99_us: rtt.p99,
                    },
                )
            }
        }
    }

    /// Writes `ledger-check.json` (the full check after the window) into `dir`.
    pub fn write_ledger_check(&self, dir: &Path) -> Result<(), WriteError> {
        let path = dir.join("ledger-check.json");
        std::fs::write(&path, serde_json::to_vec_pretty(&self.ledger_after)?)
            .map_err(|source| WriteError::Write { path, source })
    }
}
