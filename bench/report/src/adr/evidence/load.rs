//! Reading a pack directory into an [`Evidence`]: every step's results
//! table (with its triggers, recommendation and merged RTT), the
//! experiments' JSON, `peer.csv`, and the list of files for the links. A file
//! that is absent leaves its part empty; one that cannot be read becomes a
//! problem the document lists.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use bench_analysis::pool::{MissingHistogram, load_cell, pool};
use bench_analysis::recommend::recommendations_from;
use bench_analysis::results::{BadInput, CellRow, RESULTS_CSV, read_results};
use bench_analysis::summary::build;
use bench_analysis::triggers::evaluate;
use bench_core::error::Chain;
use serde::Deserialize;

use crate::adr::evidence::model::{ClockData, Evidence, PauseData, SweepData, TtlRtt};
use crate::adr::evidence::table::{Pct, Table};
use crate::adr::pack::EVIDENCE_MD;
use crate::adr::pack::{ADR_MANIFEST, AdrManifest};
use crate::report::read_manifest;

/// Why a pack could not be read at all. A file of the pack that cannot be
/// read is no error: [`load`] lists it in [`Evidence::problems`] and the
/// document says so.
#[derive(Debug, thiserror::Error)]
pub enum LoadError {
    /// The path is not a directory; pass the pack's `--out` directory.
    #[error("{0} is not a directory")]
    NotADirectory(PathBuf),
    /// A step's cell has no histogram: the document's percentiles are all
    /// pooled from the cells' histograms, so it cannot be written without
    /// it. The message names the file; restore it or rerun the step.
    #[error("step {step}")]
    Histogram {
        /// The step's directory.
        step: String,
        /// The file and why.
        #[source]
        source: MissingHistogram,
    },
}

/// Why a JSON file of the pack could not be read (a problem of the pack,
/// listed with its message).
#[derive(Debug, thiserror::Error)]
enum JsonFileError {
    /// The file exists but could not be read.
    #[error(transparent)]
    Io(#[from] std::io::Error),
    /// It is not the JSON the document expects.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
}

/// The long-hold step: a results table read for its renewal and
/// abandonment columns alone (no trigger is evaluated on it).
pub const LONG_HOLD_STEP: &str = "long-hold";

/// The steps whose directories are results tables.
const SWEEP_STEPS: [&str; 5] = ["sweep", "freeze", "sweep-pause", "adaptive", "throttle"];

/// Adds the files under `dir` (down `depth` more levels, `cells/` left out)
/// to `out`, as paths relative to `root` with `/` separators.
fn list_files(root: &Path, dir: &Path, depth: usize, out: &mut BTreeSet<String>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            if depth > 0 && e.file_name() != "cells" {
                list_files(root, &p, depth - 1, out);
            }
        } else if let Ok(rel) = p.strip_prefix(root) {
            out.insert(rel.to_string_lossy().replace('\\', "/"));
        }
    }
}

/// The results directory of step `name`, if it has a results table. Every
/// cell's histograms are read ([`bench_analysis::pool`]); a missing one is
/// an error naming the file.
fn load_sweep(dir: &Path, name: &str) -> Result<Option<SweepData>, SweepError> {
    let sub = dir.join(name);
    if !sub.join(RESULTS_CSV).is_file()
        && !sub.join(bench_analysis::results::RESULTS_PARQUET).is_file()
    {
        return Ok(None);
    }
    let rows = read_results(&sub)?;
    let triggers = evaluate(&rows);
    let mut samples = BTreeMap::new();
    for r in &rows {
        samples.insert(r.cell.clone(), load_cell(&sub, &r.cell)?);
    }
    // Every subset the document pools merges if the whole table does.
    pool(&samples, &rows)?;
    let mut by_ttl: BTreeMap<u64, Vec<&CellRow>> = BTreeMap::new();
    for r in &rows {
        by_ttl.entry(r.lease_ms).or_default().push(r);
    }
    let rtt = by_ttl
        .iter()
        .map(|(&lease_ms, cells)| -> Result<TtlRtt, MissingHistogram> {
            let p = pool(&samples, cells.iter().copied())?;
            Ok(TtlRtt {
                lease_ms,
                cells: cells.len(),
                method: p.method(),
                corrected: Pct::of(&p),
                raw: Pct::raw(&p.raw),
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let summary = build(&rows, &samples)?;
    let table = |f: &str| {
        std::fs::read_to_string(sub.join(f))
            .ok()
            .map(|t| Table::parse(&t))
    };
    Ok(Some(SweepData {
        name: name.into(),
        recommendations: recommendations_from(&summary),
        summary_rows: summary,
        triggers,
        rtt,
        manifest: read_manifest(&sub).ok().flatten(),
        summary: table("summary.csv"),
        projection: table("projection.csv"),
        rows,
        samples,
    }))
}

/// Why a results step of the pack could not be read.
#[derive(Debug, thiserror::Error)]
enum SweepError {
    /// Its results table.
    #[error(transparent)]
    Table(#[from] BadInput),
    /// One of its cells' histograms.
    #[error(transparent)]
    Histogram(#[from] MissingHistogram),
}

/// A JSON file of the pack, `None` when absent.
fn load_json<T: for<'de> Deserialize<'de>>(path: &Path) -> Result<Option<T>, JsonFileError> {
    if !path.is_file() {
        return Ok(None);
    }
    Ok(Some(serde_json::from_slice(&std::fs::read(path)?)?))
}

/// Reads a pack directory. Files that are absent leave their part empty;
/// files that exist but cannot be read are listed in `problems` (and their
/// section says so). `Err` only when `dir` is not a directory.
pub fn load(dir: &Path) -> Result<Evidence, LoadError> {
    if !dir.is_dir() {
        return Err(LoadError::NotADirectory(dir.to_owned()));
    }
    let mut ev = Evidence::default();
    let mut problems = Vec::new();
    match load_json::<AdrManifest>(&dir.join(ADR_MANIFEST)) {
        Ok(m) => ev.manifest = m,
        Err(e) => problems.push((ADR_MANIFEST.to_string(), Chain(&e).to_string())),
    }
    for name in SWEEP_STEPS {
        match load_sweep(dir, name) {
            Ok(Some(s)) => {
                ev.sweeps.insert(name.into(), s);
            }
            Ok(None) => {}
            Err(SweepError::Histogram(source)) => {
                return Err(LoadError::Histogram {
                    step: name.into(),
                    source,
                });
            }
            Err(e) => problems.push((format!("{name}/{RESULTS_CSV}"), Chain(&e).to_string())),
        }
    }
    for name in ["pause", "pause-uc03"] {
        match load_json::<PauseData>(&dir.join(name).join("pause.json")) {
            Ok(Some(p)) => {
                ev.pauses.insert(name.into(), p);
            }
            Ok(None) => {}
            Err(e) => problems.push((format!("{name}/pause.json"), Chain(&e).to_string())),
        }
    }
    for name in ["clock", "clock-margin"] {
        match load_json::<ClockData>(&dir.join(name).join("clock.json")) {
            Ok(Some(c)) => {
                ev.clocks.insert(name.into(), c);
            }
            Ok(None) => {}
            Err(e) => problems.push((format!("{name}/clock.json"), Chain(&e).to_string())),
        }
    }
    match bench_analysis::production_rtt::ProductionRtt::read(dir) {
        Ok(p) => ev.production_rtt = p,
        Err(e) => problems.push((
            bench_analysis::production_rtt::PRODUCTION_RTT_JSON.to_string(),
            Chain(&e).to_string(),
        )),
    }
    let long_hold = dir.join(LONG_HOLD_STEP);
    if long_hold.join(RESULTS_CSV).is_file()
        || long_hold
            .join(bench_analysis::results::RESULTS_PARQUET)
            .is_file()
    {
        match read_results(&long_hold) {
            Ok(rows) => ev.long_hold = Some(rows),
            Err(e) => problems.push((
                format!("{LONG_HOLD_STEP}/{RESULTS_CSV}"),
                Chain(&e).to_string(),
            )),
        }
    }
    ev.peer = std::fs::read_to_string(dir.join("peer").join("peer.csv"))
        .ok()
        .map(|t| Table::parse(&t));
    ev.lock_services = Some(crate::lock_services::lock_services_in(dir));
    let step_names: Vec<String> = ev
        .manifest
        .iter()
        .flat_map(|m| m.steps.iter().map(|r| r.step.name.clone()))
        .collect();
    for name in step_names {
        // A step manifest that cannot be read leaves its load unknown: the
        // step's own section reports the files it needs.
        let Ok(Some(m)) = load_json::<serde_json::Value>(&dir.join(&name).join("manifest.json"))
        else {
            continue;
        };
        let text = |v: Option<&serde_json::Value>| {
            v.and_then(|v| v.as_str()).unwrap_or_default().to_owned()
        };
        let commit = text(m.get("git_commit"));
        let profile = text(m.get("versions").and_then(|v| v.get("profile")));
        if !commit.is_empty() {
            ev.step_build.insert(name.clone(), (commit, profile));
        }
        if let Some(l) = m
            .get("machine_load")
            .and_then(|l| serde_json::from_value(l.clone()).ok())
        {
            ev.step_load.insert(name, l);
        }
    }
    list_files(dir, dir, 2, &mut ev.files);
    // The document is written from this listing: it never lists itself, so a
    // re-render of a pack reads the same files as the first render did.
    ev.files.remove(EVIDENCE_MD);
    ev.files.remove(crate::adr::pack::REVISION_MD);
    ev.problems = problems;
    Ok(ev)
}
