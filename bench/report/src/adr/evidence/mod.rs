//! `adr-006-evidence.md`: a pure function of a pack directory.
//!
//! [`load`] reads what the steps of `bench adr` wrote (each into its own
//! subdirectory: results tables, `triggers.json` inputs, `.hdr` histograms,
//! the experiments' JSON, `peer.csv`, and — when the issues that write them
//! are merged — `summary.csv`, `projection.csv`, failover and chaos outputs)
//! into an [`Evidence`]; [`render`] turns it into Markdown with no I/O and no
//! clock. A section whose input is absent says "not measured in this pack"
//! and why (the step's status in `adr-manifest.json`); no number in the
//! document is typed in: each comes from a file of the pack, and each figure
//! links to its plot and its results file (relative links, so the document
//! reads the same wherever the pack is).
//!
//! The module tree: `model` (what a pack holds, as types), `table` (csv
//! tables and percentiles), `load` ([`load`] and its error), `conditions`
//! (what the revision is derived from), `derived` (the derivation, once
//! per render), `format` (links, figures and numbers
//! the sections share), `sections` (one module per section), `document`
//! ([`render`]: the sections in order), `revision_doc` (the proposed
//! revision, `adr-006-revision.md`) and `write` ([`write_pack`]: the figure
//! and both documents into the pack). This file only re-exports them.

mod conditions;
mod derived;
mod document;
mod format;
mod load;
mod model;
mod revision_doc;
mod sections;
mod table;
mod write;

pub use conditions::{
    FREEZE_STEPS, PRODUCTION_HOP_MS, PRODUCTION_LEASE_MS, PRODUCTION_SESSION_MS, conditions, inputs,
};
pub use derived::Derived;
pub use document::{render, render_with};
pub use load::{LoadError, load};
pub use model::{
    ClockData, ClockFindings, ClockParams, ClockRow, Evidence, PauseData, PauseRound, SweepData,
    TtlRtt,
};
pub use revision_doc::render_revision;
pub use sections::ESSAY_SENTENCE;
pub use sections::{DECISION_PLOT, TOLERANCE_FLAGS, TriggerTally, not_imposed, trigger_tally};
pub use table::{Pct, Table};
pub use write::{WriteError, decision_map, write_pack};
