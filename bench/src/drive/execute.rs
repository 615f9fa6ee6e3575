//! Running a [`Plan`]: the cells in order with a progress bar, results,
//! histograms and the manifest written after every cell (nothing finished is
//! lost on Ctrl-C or a crash), then the report, the triggers and the summary
//! naming a margin per TTL.

use bench_driver::telemetry::{ListenError, Telemetry};
use std::fmt::Write as _;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use indicatif::{ProgressBar, ProgressStyle};
use tokio::sync::watch;

use crate::drive::plan::Plan;
use crate::drive::resume::{changed_flags, grid_of};
use crate::runner::{self, CellRunError, Live, RunConfig, Runtime};
use bench_analysis::frame::TableError;
use bench_analysis::manifest::{Manifest, ManifestError};
use bench_analysis::results::{self, BadInput};
use bench_core::error::Chain;
use bench_core::grid::Cell;
use bench_core::hist::HistError;
use bench_report::report;
use bench_report::report::ReportError;

/// Why `bench run|sweep|replay` stopped (exit 1). Each variant but the
/// first two is a library's own error, printed as it is.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The results directory could not be created; check `--out`.
    #[error("creating {}", path.display())]
    CreateDir {
        /// The directory.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// `--resume` found no readable manifest in the directory.
    #[error("--resume: cannot read {}/manifest.json: {error}", dir.display())]
    Resume {
        /// The results directory.
        dir: PathBuf,
        /// Why (in the message, so not also a `source()`).
        error: ManifestError,
    },
    /// The configuration could not be recorded as JSON (a bug).
    #[error(transparent)]
    Config(#[from] serde_json::Error),
    /// `--resume` could not read the results table written so far.
    #[error(transparent)]
    Results(#[from] BadInput),
    /// `manifest.json` could not be written.
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    /// A cell could not be measured.
    #[error(transparent)]
    Cell(#[from] CellRunError),
    /// A cell's histograms could not be saved.
    #[error(transparent)]
    Histograms(#[from] HistError),
    /// `--metrics-listen` could not bind its address.
    #[error(transparent)]
    MetricsListen(#[from] ListenError),
    /// The results table could not be written.
    #[error(transparent)]
    Table(#[from] TableError),
    /// `report.md`, `triggers.json` or the plots could not be written.
    #[error(transparent)]
    Report(#[from] ReportError),
}

/// Runs the plan; returns the process exit code.
pub async fn execute(plan: Plan) -> Result<i32, RunError> {
    let Plan {
        command,
        mut config,
        cells,
        out,
        resume,
        seed_given,
        argv,
        grid_flags,
        replay_of,
        metrics_listen,
    } = plan;
    let telemetry = Telemetry::listen(metrics_listen, "bench").await?;
    std::fs::create_dir_all(&out).map_err(|source| RunError::CreateDir {
        path: out.clone(),
        source,
    })?;
    let mut rows = Vec::new();
    let mut manifest = if resume {
        let old = Manifest::read(&out).map_err(|error| RunError::Resume {
            dir: out.clone(),
            error,
        })?;
        if seed_given && config.seed != old.seed {
            eprintln!(
                "bench: --resume: --seed {} differs from the run's seed {} in {}/manifest.json; \
                 drop --seed to continue it",
                config.seed,
                old.seed,
                out.display()
            );
            return Ok(2);
        }
        // The earlier run's seed wins, so resumed cells replay the same way.
        config.seed = old.seed;
        let now = serde_json::to_value(&config)?;
        let grid_now = grid_of(&config, &cells);
        let changed = changed_flags(&old, &now, &grid_flags, &grid_now);
        if !changed.is_empty() {
            eprintln!(
                "bench: --resume refuses a changed configuration: {} differ(s) from {}/manifest.json \
                 (start a new --out, or rerun with the recorded flags: {})",
                changed.join(", "),
                out.display(),
                if old.argv.is_empty() {
                    "not recorded".to_owned()
                } else {
                    old.argv.join(" ")
                }
            );
            return Ok(2);
        }
        if out.join("results.parquet").exists() || out.join("results.csv").exists() {
            rows = results::read_results(&out)?;
        }
        old
    } else {
        if out.join("manifest.json").exists() {
            eprintln!(
                "bench: {} already holds a run; pass --resume to continue it, or a new --out",
                out.display()
            );
            return Ok(2);
        }
        let mut m = Manifest::new(
            &format!("bench {command}"),
            config.seed,
            serde_json::to_value(&config)?,
        );
        m.argv = argv;
        m.grid = grid_of(&config, &cells);
        m.grid_flags = Some(grid_flags);
        m.binaries = crate::runner::binary_versions(&config.runtime);
        m.replay_of = replay_of.map(|p| p.display().to_string());
        m
    };
    manifest.finished_at = None;
    // A resumed run's load is this invocation's (the earlier one's is gone).
    manifest.machine_load = bench_analysis::manifest::MachineLoad::start();
    manifest.write(&out)?;
    let run_id = out
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // Every grid cell on every backend, interleaved (A B A B …), so a
    // comparison of backends is taken within one run.
    let units: Vec<(Cell, RunConfig)> = cells
        .iter()
        .flat_map(|c| config.backends.iter().map(|&b| (*c, config.on_backend(b))))
        .collect();
    eprintln!(
        "bench {command}: seed {} (rerun with --seed {}), {} cell(s), results in {}",
        config.seed,
        config.seed,
        units.len(),
        out.display()
    );

    // The docker runtime: whatever a cell's guard left behind is removed when the run ends, on every path.
    let _docker_cleanup = matches!(config.runtime, Runtime::Docker { .. })
        .then_some(bench_driver::docker::RunCleanup);
    let (stop_tx, stop_rx) = watch::channel(false);
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            eprintln!("\nbench: interrupted; stopping the current cell (finished cells are kept)");
            let _ = stop_tx.send(true);
        }
    });

    let tty = std::io::stderr().is_terminal();
    let bar = ProgressBar::new(units.len() as u64);
    if tty {
        bar.set_style(
            ProgressStyle::with_template(
                "{bar:30} {pos}/{len} cells  elapsed {elapsed}  ETA {eta}  {msg}",
            )
            .expect("valid template"),
        );
    } else {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    let mut failed = false;
    for (i, (cell, cell_config)) in units.iter().enumerate() {
        let plan = cell_config.plan(*cell).in_run(&run_id);
        let id = plan.id.clone();
        if rows.iter().any(|r: &results::CellRow| r.cell == id) {
            bar.inc(1);
            continue;
        }
        let label = id.clone();
        let b = bar.clone();
        let live = move |l: &Live| {
            b.set_message(format!(
                "{label}: {:.1}s paid {} abandoned {} lost {}",
                l.elapsed_s, l.paid, l.abandoned, l.lock_lost
            ))
        };
        // With a delay proxy, its own overhead is measured once per run (on a
        // lock-server: the baseline sends L2 heartbeats).
        let baseline = cell_config.net_delay.is_some()
            && cell_config.backend() == bench_driver::backend::BackendKind::Fencepost
            && manifest.proxy_overhead.is_none();
        let result = runner::run_cell(
            cell_config,
            &plan,
            &out,
            stop_rx.clone(),
            &live,
            baseline,
            telemetry.as_ref(),
        )
        .await?;
        let Some(result) = result else {
            bar.abandon_with_message("interrupted");
            manifest.write(&out)?;
            eprintln!(
                "bench: interrupted after {} finished cell(s); continue with --resume --out {}",
                manifest.cells_done.len(),
                out.display()
            );
            return Ok(130);
        };
        if let Some(o) = &result.proxy_overhead {
            let line = format!("delay proxy baseline (zero delay): {o}");
            bar.println(&line);
            if !tty {
                eprintln!("{line}");
            }
            manifest.proxy_overhead = Some(o.clone());
        }
        let r = &result.row;
        let line = format!(
            "cell {}/{} {id}: paid {} ({:.1}/s), abandoned {}, lock_lost {}, sessions lost {}, fenced_out {} (fence 1 {}, fence 2 {}, believed held {}), duplicates {}, hb {} attempts {} timeouts, raw p99 {:.2} ms, corrected p99 {:.2} ms, ledger {}",
            i + 1,
            units.len(),
            r.payouts_paid,
            r.throughput_per_s,
            r.abandoned_insufficient_lease,
            r.lock_lost,
            r.session_lost,
            r.fenced_out,
            r.fenced_out_fence1,
            r.fenced_out_fence2,
            r.fenced_out_believed_held,
            r.duplicate_attempted,
            r.hb_attempts,
            r.hb_timeouts,
            r.hb_rtt_p99_us as f64 / 1e3,
            r.hb_rtt_corrected_p99_us as f64 / 1e3,
            if r.ledger_ok { "ok" } else { "VIOLATED" },
        );
        bar.println(&line);
        if !tty {
            eprintln!("{line}");
        }
        let ledger_ok = r.ledger_ok;
        result.histograms.save(&out, &id)?;
        if let Some(b) = &result.blocks {
            bench_core::blocks::save_blocks(&out, &id, b)?;
        }
        rows.push(result.row);
        results::write_results(&out, &rows)?;
        manifest.cells_done.push(id.clone());
        manifest.write(&out)?;
        bar.inc(1);
        if !ledger_ok {
            eprintln!(
                "bench: the ledger invariant failed in cell {id}; see {}/cells/{id}/ledger-check.json",
                out.display()
            );
            failed = true;
            break;
        }
    }
    bar.finish_and_clear();
    manifest.finish();
    manifest.write(&out)?;
    report::write_report(&out)?;
    print!("{}", summary_text(&out, &rows));
    eprintln!(
        "bench: summary.csv, projection.csv and report.md in {}; replay with: bench replay {}",
        out.display(),
        out.display()
    );
    Ok(if failed { 1 } else { 0 })
}

/// The table printed at the end of a run or sweep: a line per cell, then the
/// verdict in plain words ([`report::verdict_text`]), where the report is.
pub fn summary_text(out: &Path, rows: &[results::CellRow]) -> String {
    let mut t = String::new();
    let w = rows.iter().map(|r| r.cell.len()).max().unwrap_or(0).max(24);
    let _ = writeln!(
        t,
        "\n{:<w$} {:>9} {:>9} {:>9} {:>6} {:>6} {:>7} {:>5} {:>9} {:>10} {:>11}",
        "cell",
        "paid",
        "per_s",
        "abandon",
        "lost",
        "s_lost",
        "fenced",
        "dups",
        "hb_tmout",
        "hb_p99_ms",
        "corr_p99_ms"
    );
    for r in rows {
        let _ = writeln!(
            t,
            "{:<w$} {:>9} {:>9.1} {:>9} {:>6} {:>6} {:>7} {:>5} {:>9} {:>10.2} {:>11.2}",
            r.cell,
            r.payouts_paid,
            r.throughput_per_s,
            r.abandoned_insufficient_lease,
            r.lock_lost,
            r.session_lost,
            r.fenced_out,
            r.duplicate_attempted,
            r.hb_timeouts,
            r.hb_rtt_p99_us as f64 / 1e3,
            r.hb_rtt_corrected_p99_us as f64 / 1e3,
        );
    }
    t.push('\n');
    let summary =
        match bench_analysis::summary::build(rows, &bench_analysis::pool::DirSamples::new(out)) {
            Ok(s) => s,
            Err(e) => {
                let _ = writeln!(t, "no summary: {}", Chain(&e));
                return t;
            }
        };
    if summary.rows.len() < rows.len() {
        let _ = writeln!(
            t,
            "{:<52} {:>3} {:>9} {:>19} {:>10} {:>14}",
            "point (over repeats)", "n", "median/s", "95 % (t)", "used m", "corr_p99_ms"
        );
        for s in &summary.rows {
            let _ = writeln!(
                t,
                "{:<52} {:>3} {:>9.2} {:>19} {:>10.3} {:>14.2}",
                s.group,
                s.n_repeats,
                s.throughput_median,
                if s.throughput_ci95_lo.is_nan() {
                    "—".to_owned()
                } else {
                    format!("[{:.2}, {:.2}]", s.throughput_ci95_lo, s.throughput_ci95_hi)
                },
                s.margin_effective_mean,
                s.hb_rtt_corrected_p99_us as f64 / 1e3,
            );
        }
        t.push('\n');
    }
    match report::verdict_text(out) {
        Ok(v) => t.push_str(&v),
        Err(e) => {
            let _ = writeln!(t, "no verdict: {}", Chain(&e));
        }
    }
    let _ = writeln!(t, "\nreport: {}", out.join("report.md").display());
    t
}
