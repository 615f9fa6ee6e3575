//! `bench report DIR`: redraws the plots and writes `report.md` from a results
//! directory (results table, `manifest.json`, `hgrm/*.hdr`). The report is a
//! pure function of its inputs, [`render_report`]; [`write_report`] is the
//! thin writer that reads the directory, evaluates the triggers, draws the
//! plots and writes the text. The verdict and margin recommendation it opens
//! with live in [`bench_analysis::verdict`] and [`bench_analysis::recommend`].

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use crate::plots::{PLOT_STEMS, PlotError, draw_plots};
use bench_analysis::frame::TableError;
use bench_analysis::pool::{DirSamples, MissingHistogram, SampleSource, pool};
use bench_analysis::projection::{Production, ProjectionRow, project, write_projection};
use bench_analysis::recommend::human_ms;
pub use bench_analysis::recommend::{
    Recommendation, format_recommendations, markdown_recommendations, recommendations,
    recommendations_from,
};
use bench_analysis::results::{BadInput, CellRow, read_nonempty_results};
use bench_analysis::summary::{Summary, build, write_summary};
use bench_analysis::triggers::{
    MIN_SAMPLES_P99, TRIGGERS, TriggerResult, Verdict, WriteError, evaluate, fmt_value, lost_work,
    markdown_table, write_triggers,
};
use bench_analysis::verdict::{VerdictInput, format_verdict, verdict_lines};
use bench_core::error::Chain;
use tables::{measurement_tables, projection_section, summary_table};

mod tables;

/// File name of the report in a results directory.
pub const REPORT_MD: &str = "report.md";
/// File name of the run manifest (written by the runner).
pub const MANIFEST_JSON: &str = "manifest.json";

/// Why `manifest.json` could not be read; the report notes it (with its
/// cause) and goes on, so the caller need do nothing.
#[derive(Debug, thiserror::Error)]
pub enum ManifestError {
    /// The file exists but could not be read.
    #[error("{MANIFEST_JSON} is unreadable")]
    Io(#[from] std::io::Error),
    /// The file is not JSON.
    #[error("{MANIFEST_JSON} is unreadable")]
    Json(#[from] serde_json::Error),
}

/// Why `bench report` could not write a directory's report; the CLI exits 2
/// on any of them. Each message is its own context, the cause its `source()`.
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// The results directory or its table is missing, unreadable or empty;
    /// see [`BadInput`].
    #[error(transparent)]
    BadInput(#[from] BadInput),
    /// `triggers.json` could not be written.
    #[error(transparent)]
    Triggers(#[from] WriteError),
    /// `summary.*` or `projection.csv` could not be written.
    #[error(transparent)]
    Table(#[from] TableError),
    /// A plot could not be drawn or written.
    #[error(transparent)]
    Plot(#[from] PlotError),
    /// A cell's histogram is missing: every pooled figure needs it.
    #[error(transparent)]
    Histogram(#[from] MissingHistogram),
    /// `report.md` could not be written; check the directory is writable.
    #[error("writing {path}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

/// Everything [`render_report`] needs; gathered by [`write_report`].
pub struct ReportInput<'a> {
    /// The results table.
    pub rows: &'a [CellRow],
    /// `manifest.json`: `Ok(None)` when absent.
    pub manifest: &'a Result<Option<serde_json::Value>, ManifestError>,
    /// The triggers evaluated on `rows`.
    pub triggers: &'a [TriggerResult],
    /// Cells left out of the RTT CDF, with the reason.
    pub skipped_cells: &'a [(String, String)],
    /// The recommended margin per TTL.
    pub recommendations: &'a [Recommendation],
    /// The per-(policy, TTL, margin) summary over repeats (`summary.csv`).
    pub summary: &'a Summary,
    /// The production projection (`projection.csv`); empty without histograms.
    pub projection: &'a [ProjectionRow],
}

/// Finds the first of `keys` at the top level of the manifest or one level down.
fn manifest_field(manifest: &serde_json::Value, keys: &[&str]) -> Option<String> {
    let obj = manifest.as_object()?;
    let render = |v: &serde_json::Value| match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    for key in keys {
        if let Some(v) = obj.get(*key) {
            return Some(render(v));
        }
    }
    obj.values()
        .filter_map(|v| v.as_object())
        .find_map(|inner| keys.iter().find_map(|k| inner.get(*k)).map(render))
}

/// Reads `manifest.json` if present: `Ok(None)` when absent.
pub fn read_manifest(dir: &Path) -> Result<Option<serde_json::Value>, ManifestError> {
    let path = dir.join(MANIFEST_JSON);
    if !path.is_file() {
        return Ok(None);
    }
    let text = std::fs::read_to_string(&path)?;
    Ok(Some(serde_json::from_str(&text)?))
}

/// Distinct values of a row field, joined, for the report header.
fn distinct(rows: &[CellRow], f: impl Fn(&CellRow) -> String) -> String {
    let mut values: Vec<String> = rows.iter().map(f).collect();
    values.sort();
    values.dedup();
    values.join(", ")
}

/// `bench report DIR`: reads the results (and `manifest.json` if present),
/// evaluates the triggers, writes `triggers.json`, draws the plots and writes
/// `report.md` ([`render_report`]). Every `Err` is bad input or an I/O
/// failure: the CLI exits 2.
pub fn write_report(dir: &Path) -> Result<PathBuf, ReportError> {
    if !dir.is_dir() {
        return Err(BadInput::NoDir(dir.to_owned()).into());
    }
    let rows = read_nonempty_results(dir)?;
    let manifest = read_manifest(dir);
    let triggers = evaluate(&rows);
    write_triggers(dir, &triggers)?;
    let samples = DirSamples::new(dir);
    let summary = build(&rows, &samples)?;
    write_summary(dir, &summary.rows)?;
    let production = production_of(&manifest);
    let projection = projection_of(&samples, &rows, &production)?;
    write_projection(dir, &projection)?;
    let plots = draw_plots(dir, &rows, &summary.rows, &production)?;
    let recs = recommendations_from(&summary);
    let md = render_report(&ReportInput {
        rows: &rows,
        manifest: &manifest,
        triggers: &triggers,
        skipped_cells: &plots.skipped_cells,
        recommendations: &recs,
        summary: &summary,
        projection: &projection,
    });
    let path = dir.join(REPORT_MD);
    match std::fs::write(&path, md) {
        Ok(()) => Ok(path),
        Err(source) => Err(ReportError::Write { path, source }),
    }
}

/// The production configuration a run projected onto (`config.projection`
/// in its manifest; ADR-006's defaults without one).
pub fn production_of(manifest: &Result<Option<serde_json::Value>, ManifestError>) -> Production {
    manifest
        .as_ref()
        .ok()
        .and_then(|m| m.as_ref())
        .and_then(|m| m.pointer("/config/projection"))
        .and_then(|v| serde_json::from_value::<Production>(v.clone()).ok())
        .unwrap_or_default()
}

/// The verdict of a results directory in plain words
/// ([`bench_analysis::verdict`]), what `bench run|sweep` prints last.
pub fn verdict_text(dir: &Path) -> Result<String, ReportError> {
    let rows = read_nonempty_results(dir)?;
    let production = production_of(&read_manifest(dir));
    let samples = DirSamples::new(dir);
    let recs = recommendations_from(&build(&rows, &samples)?);
    let projection = projection_of(&samples, &rows, &production)?;
    Ok(format_verdict(&VerdictInput {
        rows: &rows,
        recommendations: &recs,
        projection: &projection,
        production: &production,
    }))
}

/// The production projection of every backend's cells: their corrected RTT
/// histograms pooled ([`bench_analysis::pool`]; a missing one is an error
/// naming the file), projected for the run's fixed margins and the
/// production margin.
pub fn projection_of(
    src: &dyn SampleSource,
    rows: &[CellRow],
    prod: &Production,
) -> Result<Vec<ProjectionRow>, MissingHistogram> {
    let mut backends: Vec<&str> = rows.iter().map(|r| r.backend.as_str()).collect();
    backends.sort();
    backends.dedup();
    let mut margins: Vec<f64> = rows
        .iter()
        .filter(|r| r.margin_policy == "fixed")
        .map(|r| r.margin)
        .collect();
    margins.sort_by(f64::total_cmp);
    margins.dedup();
    let mut out = Vec::new();
    for backend in backends {
        let pooled = pool(src, rows.iter().filter(|r| r.backend == backend))?;
        out.extend(project(backend, &pooled, prod, &margins));
    }
    Ok(out)
}

/// The text of `report.md`: the verdict, the recommendation and its figure
/// first; then the results, the §6.5 trigger table, the plots, the summary
/// over repeats, the projection; the run's configuration last. Pure: no I/O,
/// no clock.
pub fn render_report(input: &ReportInput<'_>) -> String {
    let (rows, triggers) = (input.rows, input.triggers);
    let mut md = String::new();
    title(&mut md, rows);
    verdict_and_recommendation(&mut md, input);
    how_to_read(&mut md, rows);
    results_table(&mut md, rows);
    md.push_str(&measurement_tables(rows));
    triggers_section(&mut md, triggers);
    if let Some(section) = crate::compare::markdown_comparison(rows, triggers) {
        md.push_str(&section);
    }
    plots_section(&mut md, input.skipped_cells);
    repeats_section(&mut md);
    md.push_str(&summary_table(input.summary));
    md.push_str(&projection_section(input.projection));
    md.push_str(&manifest_section(input));
    md
}

/// The title and what the sweep covered.
fn title(md: &mut String, rows: &[CellRow]) {
    let _ = writeln!(md, "# fencepost bench report\n");
    let _ = writeln!(
        md,
        "ADR-006 client safety margin sweep: {} cell(s), run {}, margins {}, TTLs {}, \
         {} worker(s), rail latency {}.\n",
        rows.len(),
        distinct(rows, |r| format!("`{}`", r.run_id)),
        distinct(rows, |r| format!("{:.2}", r.margin)),
        distinct(rows, |r| human_ms(r.lease_ms)),
        distinct(rows, |r| r.workers.to_string()),
        distinct(rows, |r| format!("`{}`", r.rail_latency)),
    );
}

/// The verdict, then the recommended margin per TTL with its rule and figure.
fn verdict_and_recommendation(md: &mut String, input: &ReportInput<'_>) {
    let production = production_of(input.manifest);
    let verdict = verdict_lines(&VerdictInput {
        rows: input.rows,
        recommendations: input.recommendations,
        projection: input.projection,
        production: &production,
    });
    let _ = writeln!(
        md,
        "## Verdict\n\n```text\n{}\n```",
        verdict[1..].join("\n")
    );
    let _ = writeln!(md, "\n## Recommended margin per TTL\n");
    let _ = writeln!(
        md,
        "Rule (`bench/analysis/src/recommend.rs`): (1) the margin needed (trigger 1), `3 × \
         p99 / min(lease, session TTL)` from the TTL's pooled corrected RTT: a margin below its \
         95 % upper end is out; (2) on every repeat: ledger ok, \
         no believed fence-out (trigger 4), no D4 sawtooth (trigger 3), trigger 1 quiet, \
         payouts made; (3) throughput decides only where 95 % intervals separate: every margin \
         overlapping the best is tied with it and the tie goes to the larger margin (\"not \
         resolved at N repeats\"). Trigger 2 is evaluated on the sweep: `1 − T(m) / T(best)`. \
         *Provisional*: the margin needed rests on fewer than 10,000 samples.\n"
    );
    md.push_str(&markdown_recommendations(input.recommendations));
    let _ = writeln!(
        md,
        "\n![Corrected heartbeat RTT p99 against trigger 1's budget per margin, scaled and at \
         production](p99_vs_budget.svg)\n\n*Trigger 1 per margin: the corrected p99 (points) \
         against `min(lease, session TTL) × m / 3` at each TTL (lines) and at production \
         (dashed); ADR-006's 0.30 is marked. Every plot is under [Plots](#plots).*"
    );
}

/// The time base, the measurement window and how payouts are counted.
fn how_to_read(md: &mut String, rows: &[CellRow]) {
    let _ = writeln!(
        md,
        "\n**Time base.** Leases, session TTLs, rail latency and timeouts are scaled by \
         `lease / 30 s` (ADR-006's arithmetic: D4's budget, the heartbeat period as a fraction \
         of the lease); the network is not. At a 1 s lease the loopback RTT is 30× larger \
         relative to the lease than in production, so a scaled cell's RTT triggers are \
         pessimistic for production; project the unscaled RTT distribution (`hgrm/`) onto the \
         production configuration separately.\n\n\
         **Window.** Every figure excludes the cell's warm-up ({}); heartbeat percentiles are \
         over attempts: a timed-out exchange is a sample at its give-up time, so percentiles \
         marked ≥ are lower bounds. *Corrected* RTTs are measured from the scheduled send \
         (coordinated omission, docs/measurement.md); triggers use them.",
        distinct(rows, |r| format!("{:.3} s", r.warmup_s))
    );
    let _ = writeln!(
        md,
        "\n**Counting.** `attempts` counts payouts a worker *started* in the window; \
         `payouts_paid` counts payouts the rail *marked PAID* in the window. A payout started \
         in the warm-up and paid after the window opened is in `payouts_paid` but not in \
         `attempts`, so `payouts_paid` can exceed `attempts` (at least {} payout(s) here, the \
         largest `payouts_paid − attempts` of a cell). Lost work is a share of `attempts`.",
        rows.iter()
            .map(|r| r.payouts_paid.saturating_sub(r.attempts))
            .max()
            .unwrap_or(0)
    );
}

/// One row per cell: RTTs, throughput, lost work, the ledger.
fn results_table(md: &mut String, rows: &[CellRow]) {
    let _ = writeln!(md, "\n## Results\n");
    let _ = writeln!(
        md,
        "Counts are read from the rail ledger and the services' counters, never inferred. \
         Lost work = abandoned (insufficient lease) + abandoned (lock lost) + acquire failed + \
         lock lost. Every column is described in docs/reference/results.md.\n"
    );
    let _ = writeln!(
        md,
        "| cell | margin | TTL | hb p50 (ms) | hb p99 ≥ (ms) | corrected p99 ≥ (ms) | \
         throughput (payouts/s) | paid | abandoned, insufficient lease | lost work / attempts | \
         lock_lost | fenced_out | duplicates | ledger |\n\
         |---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
    );
    for r in rows {
        let _ = writeln!(
            md,
            "| `{}` | {:.2} | {} | {:.3} | {:.3} | {:.3} | {:.2} | {} | {} | {}/{} | {} | {} | {} | {} |",
            r.cell,
            r.margin,
            human_ms(r.lease_ms),
            r.hb_rtt_p50_us as f64 / 1000.0,
            r.hb_rtt_p99_us as f64 / 1000.0,
            r.hb_rtt_corrected_p99_us as f64 / 1000.0,
            r.throughput_per_s,
            r.payouts_paid,
            r.abandoned_insufficient_lease,
            lost_work(r),
            r.attempts,
            r.lock_lost,
            r.fenced_out,
            r.duplicate_attempted,
            if r.ledger_ok && r.paid_twice == 0 && r.stale_paid == 0 {
                "ok".to_owned()
            } else {
                format!(
                    "**FAILED** (paid twice {}, stale paid {})",
                    r.paid_twice, r.stale_paid
                )
            },
        );
    }
}

/// The §6.5 triggers on every cell, their rules and the ADR's actions.
fn triggers_section(md: &mut String, triggers: &[TriggerResult]) {
    let fired = triggers.iter().filter(|t| t.fired).count();
    let count = |v: Verdict| triggers.iter().filter(|t| t.verdict == v).count();
    let _ = writeln!(md, "\n## ADR-006 §6.5 revisit triggers\n");
    let _ = writeln!(
        md,
        "All five triggers on every cell: {fired} of {} checks fired, {} ok, {} \
         insufficient_data, {} not_evaluated (`bench triggers` exit code {}). \
         `insufficient_data` is never read as ok: a p99 needs {MIN_SAMPLES_P99} samples. The \
         action column quotes ADR-006 §6.5 for each check that fired.\n",
        triggers.len(),
        count(Verdict::Ok),
        count(Verdict::InsufficientData),
        count(Verdict::NotEvaluated),
        bench_analysis::triggers::exit_code(triggers)
    );
    md.push_str(&markdown_table(triggers));
    let _ = writeln!(
        md,
        "\nThe triggers, their rules here, and the ADR's actions:\n"
    );
    let _ = writeln!(
        md,
        "| id | ADR-006 §6.5 trigger | rule evaluated | ADR-006 §6.5 action |\n|---|---|---|---|"
    );
    for t in &TRIGGERS {
        let _ = writeln!(
            md,
            "| `{}` | {} | {} | {} |",
            t.id, t.adr_trigger, t.rule, t.action
        );
    }
    let _ = writeln!(
        md,
        "\nTrigger 2's rule: work that did not end in a payment falls into four causes, and only \
         `abandoned_insufficient_lease` (D4 refusing an attempt because the margin left too \
         little lease) is caused by the margin. The margin is called *dominant* when it causes \
         at least half of the lost work, and only when the loss is material (≥ {} % of \
         attempts); below that nothing limits throughput much beyond the rail itself. The \
         causes may overlap (`lock_lost` counts events that can also end in \
         `abandoned_lost`), which makes the rule err towards not firing.",
        fmt_value(bench_analysis::triggers::LOST_WORK_MIN * 100.0)
    );
}

/// Every plot with its caption, and the cells the RTT CDF lacks.
fn plots_section(md: &mut String, skipped_cells: &[(String, String)]) {
    let _ = writeln!(md, "\n## Plots\n");
    let captions = [
        "Heartbeat RTT CDF pooled per condition, raw (solid) and corrected (dashed), the band the 5–95 % of its cells (log x, from hgrm/*.hdr)",
        "Heartbeat RTT percentile spectrum pooled per condition, raw (solid) and corrected (dashed): x = 1/(1 − q), log, so p99–p99.99 are visible",
        "Throughput vs margin, one line per TTL",
        "Abandonment vs margin: insufficient lease (solid) and all lost work (dashed), % of attempts",
        "Corrected heartbeat RTT p99 vs the min(lease, session TTL) × margin / 3 budget (trigger 1; log y), scaled per TTL and at production; ADR-006's 0.30 marked",
    ];
    for (stem, caption) in PLOT_STEMS.iter().zip(captions) {
        let _ = writeln!(
            md,
            "### {caption}\n\n![{caption}]({stem}.svg)\n\nPNG: [{stem}.png]({stem}.png)\n"
        );
    }
    if !skipped_cells.is_empty() {
        let _ = writeln!(md, "Cells missing from the RTT CDF:\n");
        for (cell, why) in skipped_cells {
            let _ = writeln!(md, "- `{cell}`: {why}");
        }
        md.push('\n');
    }
}

/// The heading and method of the summary over repeats.
fn repeats_section(md: &mut String) {
    let _ = writeln!(md, "## Repeats: median and 95 % interval per point\n");
    let _ = writeln!(
        md,
        "One row per (policy, TTL, margin) over its repeats (seed, seed + 1, …; interleaved \
         within a TTL). Intervals: Student t over the repeat values (`mean ± t(0.975, n − 1) · s \
         / √n`, widened to hold the median); with a few repeats they are wide, which is the \
         honest answer on a shared machine. Heartbeat percentiles are from the repeats' merged \
         HDR histograms; the column `m_min = 3 × p99.9 / min(lease, session TTL)` is the tail \
         beyond trigger 1, for context (the recommendation's floor is the margin needed at the \
         p99), with the p99.9's 95 % interval from a cluster bootstrap over the repeats and their time blocks (column \
         `quantile_ci_method` says which; dependent samples, such as the heartbeats of one \
         stall, widen it). `summary.csv` has every column.\n"
    );
}

/// The run's configuration, last in the report: seeds, the manifest's
/// fields and the full manifest folded.
fn manifest_section(input: &ReportInput<'_>) -> String {
    let (rows, manifest) = (input.rows, input.manifest);
    let mut md = String::from("\n## Run configuration\n\n");
    let _ = writeln!(md, "| | |\n|---|---|");
    let _ = writeln!(
        md,
        "| seed(s) in the table | {} |",
        distinct(rows, |r| r.seed.to_string())
    );
    match manifest {
        Ok(Some(m)) => {
            let fields: [(&str, &[&str]); 6] = [
                (
                    "run started",
                    &[
                        "started_at",
                        "created_at",
                        "start_time",
                        "timestamp",
                        "when",
                    ],
                ),
                ("manifest seed", &["seed"]),
                ("git commit", &["git_commit", "commit", "git_sha", "git"]),
                ("machine", &["machine", "host", "hostname"]),
                ("versions", &["versions", "version", "rustc"]),
                ("command", &["command", "argv", "args"]),
            ];
            for (label, keys) in fields {
                if let Some(v) = manifest_field(m, keys) {
                    let _ = writeln!(md, "| {label} | `{}` |", v.replace('|', "\\|"));
                }
            }
        }
        Ok(None) => {
            let _ = writeln!(md, "| manifest | no {MANIFEST_JSON} in this directory |");
        }
        Err(note) => {
            let _ = writeln!(
                md,
                "| manifest | {} |",
                Chain(note).to_string().replace('|', "\\|")
            );
        }
    }
    if let Ok(Some(m)) = manifest {
        let pretty = serde_json::to_string_pretty(m).unwrap_or_default();
        let _ = writeln!(
            md,
            "\n<details><summary>full manifest (configuration)</summary>\n\n```json\n{pretty}\n```\n</details>"
        );
    }

    if let Ok(Some(m)) = manifest
        && let Some(o) = m.get("proxy_overhead").and_then(|v| {
            serde_json::from_value::<bench_core::overhead::ProxyOverhead>(v.clone()).ok()
        })
    {
        let _ = writeln!(
            md,
            "\n**Delay proxy baseline** (zero delay, measured once for this run): {o}. \
             The `--net-delay` figures include this overhead.\n"
        );
    }
    md
}
