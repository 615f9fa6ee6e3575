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

/// Why `bench run|sweep|replay` stopped: exit 2 for [`RunError::Out`]
/// ([`RunError::exit_code`]), else 1. Each variant but the first two is a
/// library's own error, printed as it is.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// `--out` cannot be created or written to (exit 2).
    #[error("--out {}: cannot write the results directory", path.display())]
    Out {
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

impl RunError {
    /// The exit code: 2 when `--out` is refused (bad input), else 1.
    pub fn exit_code(&self) -> i32 {
        match self {
            RunError::Out { .. } => 2,
            _ => 1,
        }
    }
}

/// Runs the plan; returns the process exit code: 0, 1 when a cell's ledger
/// invariant failed, 2 when `--out` or `--resume` refuses the directory, 130
/// after an interrupt (once what was measured is written).
pub async fn execute(plan: Plan) -> Result<i32, RunError> {
    let telemetry = Telemetry::listen(plan.metrics_listen, "bench").await?;
    prepare_out(&plan.out)?;
    let Some(mut run) = open_run(plan)? else {
        return Ok(2);
    };
    let units = run.units();
    eprintln!(
        "bench {}: seed {} (rerun with --seed {}), {} cell(s), results in {}",
        run.command,
        run.config.seed,
        run.config.seed,
        units.len(),
        run.out.display()
    );
    // The docker runtime: whatever a cell's guard left behind is removed when the run ends, on every path.
    let _docker_cleanup = matches!(run.config.runtime, Runtime::Docker { .. })
        .then_some(bench_driver::docker::RunCleanup);
    let io = Io {
        stop: listen_for_stop(),
        bar: progress_bar(units.len()),
        telemetry,
    };
    let mut ended = Ended::AllMeasured;
    for (i, (cell, cell_config)) in units.iter().enumerate() {
        let step = run
            .measure_unit((i, units.len()), *cell, cell_config, &io)
            .await?;
        match step {
            Step::Next => io.bar.inc(1),
            Step::Stop(e) => {
                ended = e;
                break;
            }
        }
    }
    run.finish(ended, &io.bar)
}

/// What the cells of a run share besides their configuration.
struct Io {
    /// Turns true on SIGINT or SIGTERM ([`listen_for_stop`]).
    stop: watch::Receiver<bool>,
    /// The progress bar over the cells.
    bar: ProgressBar,
    /// `--metrics-listen`'s server, if any.
    telemetry: Option<Telemetry>,
}

/// Checks `--out` before anything runs: the directory is created and a file
/// can be written in it, else [`RunError::Out`] (exit 2) names the flag and
/// the OS error.
pub fn prepare_out(out: &Path) -> Result<(), RunError> {
    let refused = |source| RunError::Out {
        path: out.to_owned(),
        source,
    };
    std::fs::create_dir_all(out).map_err(refused)?;
    let probe = out.join(".bench-write-check");
    std::fs::write(&probe, b"").map_err(refused)?;
    std::fs::remove_file(&probe).map_err(refused)
}

/// Installs the SIGINT/SIGTERM handler of a run: the first signal turns the
/// returned receiver true (the running cell's window closes early and what
/// it measured is written as a partial cell); a second one exits 130 at once.
fn listen_for_stop() -> watch::Receiver<bool> {
    use tokio::signal::unix::{SignalKind, signal};
    let (stop_tx, stop_rx) = watch::channel(false);
    let (Ok(mut int), Ok(mut term)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        // No handler: the default action (end the process) stays.
        return stop_rx;
    };
    tokio::spawn(async move {
        let mut first = true;
        loop {
            let name = tokio::select! {
                _ = int.recv() => "interrupted",
                _ = term.recv() => "terminated",
            };
            if first {
                eprintln!(
                    "\nbench: {name}; closing the running cell's window and writing what it measured \
                     (finished cells are kept; a second Ctrl-C stops at once)"
                );
                let _ = stop_tx.send(true);
                first = false;
            } else {
                eprintln!(
                    "\nbench: {name} again; stopping at once without writing the running cell"
                );
                std::process::exit(130);
            }
        }
    });
    stop_rx
}

/// The progress bar over `n` cells: drawn on a terminal, hidden otherwise.
fn progress_bar(n: usize) -> ProgressBar {
    let bar = ProgressBar::new(n as u64);
    if std::io::stderr().is_terminal() {
        bar.set_style(
            ProgressStyle::with_template(
                "{bar:30} {pos}/{len} cells  elapsed {elapsed}  ETA {eta}  {msg}",
            )
            .expect("valid template"),
        );
    } else {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    bar
}

/// Prints `line` above the progress bar, and to stderr when there is no terminal.
fn say(bar: &ProgressBar, line: &str) {
    bar.println(line);
    if !std::io::stderr().is_terminal() {
        eprintln!("{line}");
    }
}

/// The `stopped_by` of a partial cell's row ([`bench_driver::cell::StoppedBy::Interrupted`]).
pub const PARTIAL: &str = "interrupted";

/// A run in progress: its configuration, directory, manifest and rows.
struct Run {
    command: &'static str,
    config: RunConfig,
    cells: Vec<Cell>,
    out: PathBuf,
    run_id: String,
    manifest: Manifest,
    rows: Vec<results::CellRow>,
}

/// How the loop over the cells ended.
enum Ended {
    /// Every cell has its row.
    AllMeasured,
    /// A cell's ledger invariant failed: the run stops there (exit 1).
    LedgerFailed,
    /// SIGINT or SIGTERM: `partial` names the cell kept as a partial one.
    Interrupted { partial: Option<String> },
}

/// What to do after one cell.
enum Step {
    /// Go on with the next cell.
    Next,
    /// Stop the loop.
    Stop(Ended),
}

/// The manifest and rows a run starts from: a new manifest, or with
/// `--resume` the recorded one and the rows written so far. `None` when the
/// directory is refused (printed; exit 2).
fn open_run(plan: Plan) -> Result<Option<Run>, RunError> {
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
        metrics_listen: _,
    } = plan;
    let (mut manifest, rows) = if resume {
        match resumed(&out, &mut config, seed_given, &cells, &grid_flags)? {
            Some(m) => m,
            None => return Ok(None),
        }
    } else {
        if out.join("manifest.json").exists() {
            eprintln!(
                "bench: --out {} already holds a run; pass --resume to continue it, or a new --out",
                out.display()
            );
            return Ok(None);
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
        (m, Vec::new())
    };
    manifest.finished_at = None;
    // A resumed run's load is this invocation's (the earlier one's is gone).
    manifest.machine_load = bench_analysis::manifest::MachineLoad::start();
    manifest.write(&out)?;
    let run_id = out
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    Ok(Some(Run {
        command,
        config,
        cells,
        out,
        run_id,
        manifest,
        rows,
    }))
}

/// `--resume`: the recorded manifest and the rows written so far, after
/// checking the seed and the configuration agree; `None` (printed) when
/// they do not. The recorded seed wins, so resumed cells replay the same way.
fn resumed(
    out: &Path,
    config: &mut RunConfig,
    seed_given: bool,
    cells: &[Cell],
    grid_flags: &serde_json::Value,
) -> Result<Option<(Manifest, Vec<results::CellRow>)>, RunError> {
    let old = Manifest::read(out).map_err(|error| RunError::Resume {
        dir: out.to_owned(),
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
        return Ok(None);
    }
    config.seed = old.seed;
    let now = serde_json::to_value(&*config)?;
    let changed = changed_flags(&old, &now, grid_flags, &grid_of(config, cells));
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
        return Ok(None);
    }
    let rows = if out.join("results.parquet").exists() || out.join("results.csv").exists() {
        results::read_results(out)?
    } else {
        Vec::new()
    };
    Ok(Some((old, rows)))
}

impl Run {
    /// Every grid cell on every backend, interleaved (A B A B …), so a
    /// comparison of backends is taken within one run.
    fn units(&self) -> Vec<(Cell, RunConfig)> {
        self.cells
            .iter()
            .flat_map(|c| {
                self.config
                    .backends
                    .iter()
                    .map(|&b| (*c, self.config.on_backend(b)))
            })
            .collect()
    }

    /// Whether `id` already has a complete row (a partial one is measured again).
    fn done(&self, id: &str) -> bool {
        self.rows
            .iter()
            .any(|r| r.cell == id && r.stopped_by != PARTIAL)
    }

    /// Measures unit `i` of `n` (skipped when it has a complete row), writes
    /// its row, histograms and the manifest, and says whether to go on.
    async fn measure_unit(
        &mut self,
        (i, n): (usize, usize),
        cell: Cell,
        cell_config: &RunConfig,
        io: &Io,
    ) -> Result<Step, RunError> {
        let (bar, stop) = (&io.bar, &io.stop);
        let plan = cell_config.plan(cell).in_run(&self.run_id);
        let id = plan.id.clone();
        if self.done(&id) {
            return Ok(Step::Next);
        }
        if *stop.borrow() {
            return Ok(Step::Stop(Ended::Interrupted { partial: None }));
        }
        // A cell measured again starts from nothing: no store, log or
        // blocks of an earlier, unfinished attempt.
        let _ = std::fs::remove_dir_all(self.out.join("cells").join(&id));
        let _ = std::fs::remove_file(bench_core::blocks::blocks_path(&self.out, &id));
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
            && self.manifest.proxy_overhead.is_none();
        let result = runner::run_cell(
            cell_config,
            &plan,
            &self.out,
            stop.clone(),
            &live,
            baseline,
            io.telemetry.as_ref(),
        )
        .await?;
        let Some(result) = result else {
            // Interrupted in the warm-up: nothing of the cell was measured.
            return Ok(Step::Stop(Ended::Interrupted { partial: None }));
        };
        if let Some(o) = &result.proxy_overhead {
            say(bar, &format!("delay proxy baseline (zero delay): {o}"));
            self.manifest.proxy_overhead = Some(o.clone());
        }
        say(bar, &cell_line(i, n, &id, &result.row));
        let ledger_ok = result.row.ledger_ok;
        let partial = result.row.stopped_by == PARTIAL;
        self.record(&id, result)?;
        if !ledger_ok {
            eprintln!(
                "bench: the ledger invariant failed in cell {id}; see {}/cells/{id}/ledger-check.json",
                self.out.display()
            );
        }
        Ok(if partial {
            Step::Stop(Ended::Interrupted { partial: Some(id) })
        } else if !ledger_ok {
            Step::Stop(Ended::LedgerFailed)
        } else {
            Step::Next
        })
    }

    /// Writes a measured cell: its histograms, its row (in place of an
    /// earlier partial one), the results table and the manifest.
    fn record(&mut self, id: &str, result: runner::CellResult) -> Result<(), RunError> {
        result.histograms.save(&self.out, id)?;
        if let Some(b) = &result.blocks {
            bench_core::blocks::save_blocks(&self.out, id, b)?;
        }
        let partial = result.row.stopped_by == PARTIAL;
        match self.rows.iter_mut().find(|r| r.cell == id) {
            Some(old) => *old = result.row,
            None => self.rows.push(result.row),
        }
        results::write_results(&self.out, &self.rows)?;
        let m = &mut self.manifest;
        m.cells_partial.retain(|c| c != id);
        if partial {
            m.cells_partial.push(id.to_owned());
        } else {
            m.cells_done.push(id.to_owned());
        }
        m.write(&self.out)?;
        Ok(())
    }

    /// Ends the run: the manifest, the report and the summary; after an
    /// interrupt the report of what exists, and exit 130.
    fn finish(mut self, ended: Ended, bar: &ProgressBar) -> Result<i32, RunError> {
        let out = &self.out;
        if let Ended::Interrupted { partial } = ended {
            bar.abandon_with_message("interrupted");
            self.manifest.write(out)?;
            if !self.rows.is_empty()
                && let Err(e) = report::write_report(out)
            {
                eprintln!("bench: no report of the interrupted run: {}", Chain(&e));
            }
            if let Some(id) = partial {
                eprintln!(
                    "bench: cell {id} is partial (its window closed early); its row says stopped_by {PARTIAL}"
                );
            }
            let again = if self.command == "sweep" {
                format!(
                    "continue with --resume --out {} (a partial cell is measured again)",
                    out.display()
                )
            } else {
                format!(
                    "measure it in full with --seed {} and a new --out",
                    self.config.seed
                )
            };
            eprintln!(
                "bench: interrupted after {} finished cell(s); {again}",
                self.manifest.cells_done.len(),
            );
            return Ok(130);
        }
        bar.finish_and_clear();
        self.manifest.finish();
        self.manifest.write(out)?;
        report::write_report(out)?;
        print!("{}", summary_text(out, &self.rows));
        eprintln!(
            "bench: summary.csv, projection.csv and report.md in {}; replay with: bench replay {}",
            out.display(),
            out.display()
        );
        Ok(match ended {
            Ended::LedgerFailed => 1,
            _ => 0,
        })
    }
}

/// The partial cells of a table in a sentence (`bench report` prints it),
/// `None` when every cell ran to its end.
pub fn partial_note(rows: &[results::CellRow]) -> Option<String> {
    let partial: Vec<String> = rows
        .iter()
        .filter(|r| r.stopped_by == PARTIAL)
        .map(|r| format!("{} ({:.1} s)", r.cell, r.duration_s))
        .collect();
    (!partial.is_empty()).then(|| {
        format!(
            "partial: {} of {} cell(s) were interrupted before their window's end, their rows \
             (stopped_by {PARTIAL}) cover the shorter window measured: {}; \
             a sweep's --resume measures them again",
            partial.len(),
            rows.len(),
            partial.join(", ")
        )
    })
}

/// The line printed after cell `i` of `n`.
fn cell_line(i: usize, n: usize, id: &str, r: &results::CellRow) -> String {
    format!(
        "cell {}/{n} {id}{}: paid {} ({:.1}/s), abandoned {}, lock_lost {}, sessions lost {}, fenced_out {} (fence 1 {}, fence 2 {}, believed held {}), duplicates {}, hb {} attempts {} timeouts, raw p99 {:.2} ms, corrected p99 {:.2} ms, ledger {}",
        i + 1,
        if r.stopped_by == PARTIAL {
            format!(" (partial: {:.1} s window)", r.duration_s)
        } else {
            String::new()
        },
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
    )
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
