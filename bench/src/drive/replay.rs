//! `bench replay DIR`: the plan that re-runs exactly the cells and seeds a
//! results directory's manifest records.

use std::path::{Path, PathBuf};

use crate::drive::plan::{Plan, resolve};
use crate::drive::resume::{changed_flags, grid_of};
use bench_analysis::manifest::Manifest;

/// Why `bench replay` cannot re-run a directory.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// The manifest is missing or unreadable; the path names it.
    #[error("cannot read {0}/manifest.json: {1}")]
    Manifest(PathBuf, String),
    /// The manifest predates `bench replay` (no argv/grid): it cannot be replayed exactly.
    #[error("{0}/manifest.json records no argv or grid (written before `bench replay` existed)")]
    NotRecorded(PathBuf),
    /// The recorded command line does not parse or resolve with this build.
    #[error("the recorded argv no longer resolves: {0}")]
    Argv(String),
    /// This build expands the recorded command line into other cells, seeds or configuration.
    #[error("this build would not run the recorded (cell, seed) pairs: {0}")]
    Differs(String),
}

/// Drops `--out`, `--resume` and `--seed` (both `--flag V` and `--flag=V` forms) from `argv`.
fn strip_flags(argv: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut skip = false;
    for a in argv {
        if skip {
            skip = false;
            continue;
        }
        match a.as_str() {
            "--out" | "--seed" => skip = true,
            "--resume" => {}
            s if s.starts_with("--out=") || s.starts_with("--seed=") => {}
            _ => out.push(a.clone()),
        }
    }
    out
}

/// `bench replay DIR [--out NEW]`: the plan that re-runs exactly the (cell,
/// seed) pairs `DIR/manifest.json` records — its argv with the recorded
/// seed and the new `--out` — checked against the recorded grid and
/// configuration before anything runs.
pub fn replay_plan(dir: &Path, out: Option<PathBuf>) -> Result<Plan, ReplayError> {
    let old =
        Manifest::read(dir).map_err(|e| ReplayError::Manifest(dir.to_owned(), format!("{e:#}")))?;
    if old.argv.len() < 2 || old.grid.is_empty() {
        return Err(ReplayError::NotRecorded(dir.to_owned()));
    }
    let out = out.unwrap_or_else(|| {
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "run".into());
        dir.with_file_name(format!("{name}-replay"))
    });
    let mut argv = strip_flags(&old.argv);
    argv.extend([
        "--seed".to_string(),
        old.seed.to_string(),
        "--out".to_string(),
        out.display().to_string(),
    ]);
    let cli = crate::cli::try_parse_from(&argv).map_err(|e| ReplayError::Argv(e.to_string()))?;
    let (args, sweep) = match cli.command {
        crate::cli::Command::Run(a) => (a, None),
        crate::cli::Command::Sweep(a) => (a.run, Some(a.grid)),
        _ => {
            return Err(ReplayError::Argv(format!(
                "{:?} is not bench run or sweep",
                argv.get(1)
            )));
        }
    };
    let mut plan = resolve(&args, sweep).map_err(|e| ReplayError::Argv(e.to_string()))?;
    let grid = grid_of(&plan.config, &plan.cells);
    if grid != old.grid {
        let first = grid
            .iter()
            .zip(&old.grid)
            .find(|(a, b)| a != b)
            .map(|(a, b)| {
                format!(
                    "now {} seed {}, recorded {} seed {}",
                    a.cell, a.seed, b.cell, b.seed
                )
            })
            .unwrap_or_else(|| format!("now {} cells, recorded {}", grid.len(), old.grid.len()));
        return Err(ReplayError::Differs(first));
    }
    let config =
        serde_json::to_value(&plan.config).map_err(|e| ReplayError::Differs(e.to_string()))?;
    if config != old.config {
        let changed = changed_flags(&old, &config, &plan.grid_flags, &grid);
        return Err(ReplayError::Differs(format!(
            "configuration: {} (an environment variable such as LOCK_CLIENT_SAFETY_MARGIN or RAIL_LATENCY may differ)",
            changed.join(", ")
        )));
    }
    plan.argv = argv;
    plan.replay_of = Some(dir.to_owned());
    Ok(plan)
}
