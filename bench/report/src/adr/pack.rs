//! The ADR-006 evidence pack's own manifest, `adr-manifest.json`: the steps
//! of the plan, the program and arguments of each, and how each ended. The
//! bench writes it as it runs the plan; the evidence document reads it.

use serde::{Deserialize, Serialize};

/// File name of the pack's own manifest.
pub const ADR_MANIFEST: &str = "adr-manifest.json";
/// File name of the evidence document.
pub const EVIDENCE_MD: &str = "adr-006-evidence.md";
/// File name of the proposed ADR-006 revision, beside the evidence document.
pub const REVISION_MD: &str = "adr-006-revision.md";

/// Which program a step runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Program {
    /// This `bench` binary.
    Bench,
    /// The `experiments` binary.
    Experiments,
}

/// One step of the plan.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Step {
    /// Its subdirectory of the pack, and its id.
    pub name: String,
    /// What it measures, for the progress line and the document.
    pub title: String,
    /// The program.
    pub program: Program,
    /// Its arguments (without the program).
    pub args: Vec<String>,
    /// Why it cannot run here, if it cannot.
    pub unavailable: Option<String>,
}

/// How a step ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Exit code 0.
    Ok,
    /// Another exit code (its output may still be there).
    Failed,
    /// Not run: the command or a prerequisite is missing.
    NotAvailable,
    /// Stopped by Ctrl-C.
    Interrupted,
    /// Not reached (the pack was interrupted before it).
    NotRun,
}

impl Status {
    /// The word in the document.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Failed => "failed",
            Status::NotAvailable => "not available",
            Status::Interrupted => "interrupted",
            Status::NotRun => "not run",
        }
    }
}

/// A step and how it ended: an element of `adr-manifest.json`'s `steps`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepRecord {
    /// The step.
    #[serde(flatten)]
    pub step: Step,
    /// How it ended.
    pub status: Status,
    /// Its exit code, if it ran.
    pub exit_code: Option<i32>,
    /// Wall seconds it took.
    pub seconds: f64,
    /// The reason it did not run or failed, in words.
    pub note: String,
}

/// `adr-manifest.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AdrManifest {
    /// The command line that made the pack (rerun it to regenerate).
    pub command: String,
    /// The seed every step got.
    pub seed: u64,
    /// `--quick`.
    pub quick: bool,
    /// The `--net-delay` of the sweeps.
    pub net_delay: String,
    /// The `--server-pause` condition.
    pub server_pause: String,
    /// Started (RFC 3339).
    pub started_at: String,
    /// Finished, if it did.
    pub finished_at: Option<String>,
    /// Every step in plan order.
    pub steps: Vec<StepRecord>,
}
