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

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::path::Path;

use hdrhistogram::Histogram;
use serde::Deserialize;

use super::pack::{ADR_MANIFEST, AdrManifest, Program, Status, StepRecord};
use super::revision::{self, ADR_DIVISOR, ADR_MARGIN, Condition};
use bench_analysis::recommend::{Recommendation, human_ms, recommendations};
use bench_analysis::results::{CellRow, RESULTS_CSV, read_results};
use bench_analysis::triggers::{
    D4Window, MIN_SAMPLES_P99, TRIGGERS, TriggerResult, Verdict, evaluate, lost_work,
};
use bench_core::hist::{self, Series};

/// Production's configuration (C5 §5.1, C3 §3.8): the projection's target.
pub const PRODUCTION_LEASE_MS: u64 = 30_000;
/// Production's session TTL.
pub const PRODUCTION_SESSION_MS: u64 = 15_000;
/// Production's worst-case hop: rail read timeout 5 s + 2 s (D4).
pub const PRODUCTION_HOP_MS: u64 = 7_000;
/// The essay's sentence the clock experiment tests.
pub const ESSAY_SENTENCE: &str = "A step backwards is the dangerous direction: it makes the \
    server’s elapsed-time measurement shorter than real time and can cause a reassignment \
    before the holder’s deadline.";

/// A CSV file as text cells (header, rows).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Table {
    /// Column names.
    pub header: Vec<String>,
    /// Rows, each as long as the header or shorter.
    pub rows: Vec<Vec<String>>,
}

impl Table {
    /// Parses simple CSV (no quoted commas), as the bench writes it.
    pub fn parse(text: &str) -> Table {
        let mut lines = text.lines().filter(|l| !l.trim().is_empty());
        let split = |l: &str| {
            l.split(',')
                .map(|c| c.trim().trim_matches('"').to_string())
                .collect()
        };
        let header = lines.next().map(split).unwrap_or_default();
        Table {
            header,
            rows: lines.map(split).collect(),
        }
    }

    /// The index of column `name`.
    pub fn col(&self, name: &str) -> Option<usize> {
        self.header.iter().position(|h| h == name)
    }

    /// As a Markdown table, at most `max_rows` rows (the rest counted).
    pub fn markdown(&self, max_rows: usize) -> String {
        let mut md = format!("| {} |\n|", self.header.join(" | "));
        for _ in &self.header {
            md.push_str("---|");
        }
        md.push('\n');
        for r in self.rows.iter().take(max_rows) {
            let _ = writeln!(md, "| {} |", r.join(" | "));
        }
        if self.rows.len() > max_rows {
            let _ = writeln!(
                md,
                "\n({} more rows in the file)",
                self.rows.len() - max_rows
            );
        }
        md
    }
}

/// Percentiles of one histogram, in ms.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Pct {
    /// Samples.
    pub n: u64,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// 95 % interval of the p99 (order statistics).
    pub p99_ci: (f64, f64),
    /// 99.9th percentile.
    pub p999: f64,
    /// Largest.
    pub max: f64,
}

impl Pct {
    /// Of a histogram in µs.
    pub fn of(h: &Histogram<u64>) -> Pct {
        let ms = |us: u64| us as f64 / 1000.0;
        let ci = hist::quantile_ci95(h, 0.99).unwrap_or((0, 0));
        Pct {
            n: h.len(),
            p50: ms(h.value_at_quantile(0.50)),
            p90: ms(h.value_at_quantile(0.90)),
            p99: ms(h.value_at_quantile(0.99)),
            p99_ci: (ms(ci.0), ms(ci.1)),
            p999: ms(h.value_at_quantile(0.999)),
            max: ms(h.max()),
        }
    }
}

/// The heartbeat RTT of one TTL of a sweep, its cells' histograms merged.
#[derive(Clone, Debug, PartialEq)]
pub struct TtlRtt {
    /// The TTL.
    pub lease_ms: u64,
    /// Cells merged.
    pub cells: usize,
    /// Cells whose histograms were missing.
    pub missing: usize,
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
    /// `summary.csv` (issue 13: CIs over repeats), if written.
    pub summary: Option<Table>,
    /// `projection.csv` (issue 13), if written.
    pub projection: Option<Table>,
}

/// `pause.json`, the fields the document reads.
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct PauseData {
    /// Whether the paused worker ran its client check.
    pub client_check: bool,
    /// Rounds.
    pub pauses: u32,
    /// Fence refusals.
    pub fenced_out: u64,
    /// Of them, fence 1.
    #[serde(default)]
    pub fenced_out_fence1: u64,
    /// Of them, fence 2.
    #[serde(default)]
    pub fenced_out_fence2: u64,
    /// Duplicate submissions.
    pub duplicate_attempted: u64,
    /// Payouts paid.
    pub paid: u64,
    /// Payouts seeded.
    pub payouts: u64,
    /// Paid twice: must be 0.
    pub paid_twice: u64,
    /// Paid under a stale token: must be 0.
    pub stale_paid: u64,
    /// The ledger invariant.
    pub ledger_ok: bool,
    /// Whether the experiment's expectation held.
    pub expectation_met: bool,
    /// Its expectation in words.
    pub expectation: String,
    /// The rounds.
    #[serde(default)]
    pub paused: Vec<PauseRound>,
}

/// One pause round, the fields the document reads.
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct PauseRound {
    /// Freeze → another worker's claim, s.
    #[serde(default)]
    pub takeover_after_s: Option<f64>,
}

/// `clock.json`, the fields the document reads.
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct ClockData {
    /// The simulation's inputs.
    pub params: ClockParams,
    /// Its seed.
    pub seed: u64,
    /// θ + 2ρD + q, ms.
    pub bound_ms: f64,
    /// Every (scenario, grace fraction).
    pub rows: Vec<ClockRow>,
    /// The experiment's own reading of the rows.
    pub findings: ClockFindings,
}

/// The clock simulation's inputs.
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct ClockParams {
    /// Lease D, ns.
    pub lease_ns: u64,
    /// Step, ns.
    pub step_ns: u64,
    /// Client margin.
    pub margin: f64,
}

/// One row of `clock.csv`.
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct ClockRow {
    /// Scenario.
    pub scenario: String,
    /// Grace / bound.
    pub grace_fraction: f64,
    /// Grace, ms.
    pub grace_ms: f64,
    /// Cases.
    pub cases: u64,
    /// Violations.
    pub violations: u64,
    /// Largest overrun, µs.
    pub max_overrun_us: f64,
}

/// The clock experiment's findings.
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct ClockFindings {
    /// The server step direction with more violations at grace = bound.
    pub server_hazardous_step: String,
    /// The client step direction with more violations at grace = bound.
    pub client_hazardous_step: String,
    /// Whether that agrees with the essay's sentence.
    pub agrees_with_essay_on_server_step: bool,
}

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
    /// Files of the pack (relative paths, `cells/` left out), for links.
    pub files: BTreeSet<String>,
    /// Files that exist but could not be read, with the error.
    pub problems: Vec<(String, String)>,
}

/// The steps whose directories are results tables.
const SWEEP_STEPS: [&str; 4] = ["sweep", "sweep-pause", "adaptive", "throttle"];

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

fn merged(dir: &Path, cells: &[&CellRow], series: Series) -> (Histogram<u64>, usize) {
    let mut h = hist::new_histogram();
    let mut missing = 0;
    for r in cells {
        match hist::load_series(dir, &r.cell, series) {
            Ok(c) => {
                if h.add(&c).is_err() {
                    missing += 1;
                }
            }
            Err(_) => missing += 1,
        }
    }
    (h, missing)
}

fn load_sweep(dir: &Path, name: &str) -> anyhow::Result<Option<SweepData>> {
    let sub = dir.join(name);
    if !sub.join(RESULTS_CSV).is_file()
        && !sub.join(bench_analysis::results::RESULTS_PARQUET).is_file()
    {
        return Ok(None);
    }
    let rows = read_results(&sub)?;
    let triggers = evaluate(&rows);
    let mut by_ttl: BTreeMap<u64, Vec<&CellRow>> = BTreeMap::new();
    for r in &rows {
        by_ttl.entry(r.lease_ms).or_default().push(r);
    }
    let rtt = by_ttl
        .iter()
        .map(|(&lease_ms, cells)| {
            let (corrected, missing) = merged(&sub, cells, Series::Corrected);
            let (raw, _) = merged(&sub, cells, Series::Rtt);
            TtlRtt {
                lease_ms,
                cells: cells.len(),
                missing,
                corrected: Pct::of(&corrected),
                raw: Pct::of(&raw),
            }
        })
        .collect();
    let table = |f: &str| {
        std::fs::read_to_string(sub.join(f))
            .ok()
            .map(|t| Table::parse(&t))
    };
    Ok(Some(SweepData {
        name: name.into(),
        recommendations: recommendations(&rows),
        triggers,
        rtt,
        manifest: crate::report::read_manifest(&sub).ok().flatten(),
        summary: table("summary.csv"),
        projection: table("projection.csv"),
        rows,
    }))
}

fn load_json<T: for<'de> Deserialize<'de>>(path: &Path) -> anyhow::Result<Option<T>> {
    if !path.is_file() {
        return Ok(None);
    }
    Ok(Some(serde_json::from_slice(&std::fs::read(path)?)?))
}

/// Reads a pack directory. Files that are absent leave their part empty;
/// files that exist but cannot be read are listed in `problems` (and their
/// section says so). `Err` only when `dir` is not a directory.
pub fn load(dir: &Path) -> anyhow::Result<Evidence> {
    if !dir.is_dir() {
        anyhow::bail!("{} is not a directory", dir.display());
    }
    let mut ev = Evidence::default();
    let mut problems = Vec::new();
    match load_json::<AdrManifest>(&dir.join(ADR_MANIFEST)) {
        Ok(m) => ev.manifest = m,
        Err(e) => problems.push((ADR_MANIFEST.to_string(), format!("{e:#}"))),
    }
    for name in SWEEP_STEPS {
        match load_sweep(dir, name) {
            Ok(Some(s)) => {
                ev.sweeps.insert(name.into(), s);
            }
            Ok(None) => {}
            Err(e) => problems.push((format!("{name}/{RESULTS_CSV}"), format!("{e:#}"))),
        }
    }
    for name in ["pause", "pause-uc03"] {
        match load_json::<PauseData>(&dir.join(name).join("pause.json")) {
            Ok(Some(p)) => {
                ev.pauses.insert(name.into(), p);
            }
            Ok(None) => {}
            Err(e) => problems.push((format!("{name}/pause.json"), format!("{e:#}"))),
        }
    }
    for name in ["clock", "clock-margin"] {
        match load_json::<ClockData>(&dir.join(name).join("clock.json")) {
            Ok(Some(c)) => {
                ev.clocks.insert(name.into(), c);
            }
            Ok(None) => {}
            Err(e) => problems.push((format!("{name}/clock.json"), format!("{e:#}"))),
        }
    }
    ev.peer = std::fs::read_to_string(dir.join("peer").join("peer.csv"))
        .ok()
        .map(|t| Table::parse(&t));
    list_files(dir, dir, 2, &mut ev.files);
    ev.problems = problems;
    Ok(ev)
}

// ---------------------------------------------------------------- rendering

impl Evidence {
    /// `[text](path)` when the file is in the pack, else the path marked absent.
    fn link(&self, path: &str, text: &str) -> String {
        if self.files.contains(path) {
            format!("[{text}]({path})")
        } else {
            format!("`{path}` (absent)")
        }
    }

    /// A plot: the SVG inline and the PNG linked, or a note that it was not drawn.
    fn figure(&self, stem: &str, caption: &str) -> String {
        let svg = format!("{stem}.svg");
        if self.files.contains(&svg) {
            format!(
                "![{caption}]({svg})\n\n*{caption}* — {}, {}\n",
                self.link(&svg, "SVG"),
                self.link(&format!("{stem}.png"), "PNG")
            )
        } else {
            format!("*{caption}*: plot `{svg}` was not drawn in this pack.\n")
        }
    }

    /// The step record of `name`.
    fn step(&self, name: &str) -> Option<&StepRecord> {
        self.manifest
            .as_ref()
            .and_then(|m| m.steps.iter().find(|s| s.step.name == name))
    }

    /// "not measured in this pack (…)" for a step whose output is absent.
    fn absent(&self, name: &str, what: &str) -> String {
        let why = match self.step(name) {
            None => format!("step `{name}` is not in this pack's plan"),
            Some(r) => {
                let cmd = format!(
                    "`{} {}`",
                    match r.step.program {
                        Program::Bench => "bench",
                        Program::Experiments => "experiments",
                    },
                    r.step.args.first().map(String::as_str).unwrap_or("")
                );
                match r.status {
                    Status::NotAvailable => format!("{cmd} not available: {}", r.note),
                    Status::Failed => format!("{cmd} failed: {}", r.note),
                    Status::Interrupted => format!("{cmd} was interrupted"),
                    Status::NotRun => format!("{cmd} not run"),
                    Status::Ok => format!("{cmd} ran but wrote no {what}"),
                }
            }
        };
        let unreadable: Vec<String> = self
            .problems
            .iter()
            .filter(|(f, _)| f.starts_with(&format!("{name}/")))
            .map(|(f, e)| format!("`{f}` unreadable: {e}"))
            .collect();
        if unreadable.is_empty() {
            format!("**Not measured in this pack** ({why}).\n\n")
        } else {
            format!(
                "**Not measured in this pack** ({}).\n\n",
                unreadable.join("; ")
            )
        }
    }

    /// The fixed-margin fencepost rows of the main sweep.
    fn fixed_rows(&self) -> Vec<&CellRow> {
        self.sweeps
            .get("sweep")
            .map(|s| {
                s.rows
                    .iter()
                    .filter(|r| r.margin_policy == "fixed" && r.backend == "fencepost")
                    .collect()
            })
            .unwrap_or_default()
    }
}

fn ms(v: f64) -> String {
    if v.is_nan() {
        "—".into()
    } else if v >= 100.0 {
        format!("{v:.0}")
    } else if v >= 10.0 {
        format!("{v:.1}")
    } else {
        format!("{v:.2}")
    }
}

fn pct(num: u64, den: u64) -> String {
    if den == 0 {
        "—".into()
    } else {
        format!("{:.1} %", 100.0 * num as f64 / den as f64)
    }
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    match v.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => v[n / 2],
        n => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// The document.
pub fn render(ev: &Evidence) -> String {
    let mut md = String::new();
    header(&mut md, ev);
    rtt_section(&mut md, ev);
    margin_section(&mut md, ev);
    triggers_section(&mut md, ev);
    pause_condition_section(&mut md, ev);
    adaptive_section(&mut md, ev);
    let conditions = conditions(ev);
    projection_section(&mut md, ev, &conditions);
    clock_section(&mut md, ev);
    fences_section(&mut md, ev);
    peer_section(&mut md, ev);
    others_section(&mut md, ev);
    revision_section(&mut md, ev, &conditions);
    files_section(&mut md, ev);
    md
}

fn header(md: &mut String, ev: &Evidence) {
    let _ = writeln!(md, "# ADR-006 evidence pack\n");
    let _ = writeln!(
        md,
        "Generated by `bench adr` from the files of this directory alone (every number below \
         is read from a results file of the pack and every figure links to its plot and its \
         data). The question: is ADR-006's conservative client margin (D1, default \
         {ADR_MARGIN:.2}) with a heartbeat every third of the usable lease supported by \
         measurement, and what should §6.2/§6.5 say instead? The answer is in \
         [the proposed revision](#proposed-revision-of-adr-006-62--65).\n"
    );
    match &ev.manifest {
        None => {
            let _ = writeln!(
                md,
                "**No `{ADR_MANIFEST}`**: this directory was not written by `bench adr`; the \
                 plan below is unknown.\n"
            );
        }
        Some(m) => {
            let _ = writeln!(md, "| | |\n|---|---|");
            let _ = writeln!(md, "| regenerate with | `{}` |", m.command);
            let _ = writeln!(md, "| seed (every step) | {} |", m.seed);
            let _ = writeln!(
                md,
                "| plan | {} |",
                if m.quick { "`--quick`" } else { "full" }
            );
            let _ = writeln!(md, "| started | {} |", m.started_at);
            let _ = writeln!(
                md,
                "| finished | {} |",
                m.finished_at
                    .as_deref()
                    .unwrap_or("**not finished** (interrupted)")
            );
            let _ = writeln!(
                md,
                "| network delay of the sweeps | `--net-delay {}` (round trip, not scaled with the lease: a cross-zone path with a congested tail) |",
                m.net_delay
            );
            let _ = writeln!(
                md,
                "| server-pause condition | `--server-pause {}` |",
                m.server_pause
            );
            if let Some(s) = ev.sweeps.get("sweep").and_then(|s| s.manifest.as_ref()) {
                for (label, key) in [
                    ("git commit", "git_commit"),
                    ("machine", "machine"),
                    ("versions", "versions"),
                ] {
                    if let Some(v) = s.get(key) {
                        let text = match v {
                            serde_json::Value::String(s) => s.clone(),
                            other => other.to_string(),
                        };
                        let _ =
                            writeln!(md, "| {label} (sweep) | `{}` |", text.replace('|', "\\|"));
                    }
                }
            }
            let _ = writeln!(
                md,
                "\n### The plan and what ran\n\n| step | what it measures | status | seconds | output | command |\n|---|---|---|---:|---|---|"
            );
            for r in &m.steps {
                let prog = match r.step.program {
                    Program::Bench => "bench",
                    Program::Experiments => "experiments",
                };
                let status = if r.note.is_empty() {
                    r.status.as_str().to_string()
                } else {
                    format!("{}: {}", r.status.as_str(), r.note)
                };
                let report = format!("{}/report.md", r.step.name);
                let _ = writeln!(
                    md,
                    "| `{}` | {} | {} | {:.0} | {} | `{prog} {}` |",
                    r.step.name,
                    r.step.title,
                    status,
                    r.seconds,
                    if ev.files.contains(&report) {
                        format!("[{}/]({report})", r.step.name)
                    } else {
                        "—".into()
                    },
                    r.step.args.join(" ").replace('|', "\\|")
                );
            }
        }
    }
    if !ev.problems.is_empty() {
        let _ = writeln!(md, "\n**Unreadable files:**\n");
        for (f, e) in &ev.problems {
            let _ = writeln!(md, "- `{f}`: {e}");
        }
    }
    let _ = writeln!(
        md,
        "\n**How to read the numbers.** Leases, session TTLs and rail timeouts are scaled by \
         lease / 30 s (the ADR's arithmetic in seconds); the network is not, so at a 1 s lease \
         the RTT is 30× larger relative to the lease than in production: the scaled cells test \
         trigger 1 hard, and the production projection applies the measured RTTs to 30 s / \
         15 s unscaled. RTTs are *corrected* for coordinated omission (from each tick's \
         scheduled send) unless marked raw; ≥ marks lower bounds (timeouts censored). A p99 \
         needs {MIN_SAMPLES_P99} samples before any verdict says ok.\n"
    );
}

fn rtt_section(md: &mut String, ev: &Evidence) {
    let _ = writeln!(md, "## 1. Heartbeat RTT, measured (corrected)\n");
    let Some(s) = ev.sweeps.get("sweep") else {
        md.push_str(&ev.absent("sweep", "results table"));
        return;
    };
    let _ = writeln!(
        md,
        "Every cell's corrected histogram (`sweep/hgrm/<cell>.corrected.hdr`) merged per TTL \
         (all margins), ms. Source: {}.\n",
        ev.link("sweep/results.csv", "sweep/results.csv")
    );
    let _ = writeln!(
        md,
        "| TTL | cells | samples | p50 | p90 | p99 [95 %] ≥ | p99.9 ≥ | max ≥ | raw p50 | raw p99 ≥ |\n|---|---:|---:|---:|---:|---|---:|---:|---:|---:|"
    );
    for t in &s.rtt {
        let _ = writeln!(
            md,
            "| {} | {}{} | {} | {} | {} | {} [{}, {}] | {} | {} | {} | {} |",
            human_ms(t.lease_ms),
            t.cells,
            if t.missing > 0 {
                format!(" ({} without histogram)", t.missing)
            } else {
                String::new()
            },
            t.corrected.n,
            ms(t.corrected.p50),
            ms(t.corrected.p90),
            ms(t.corrected.p99),
            ms(t.corrected.p99_ci.0),
            ms(t.corrected.p99_ci.1),
            ms(t.corrected.p999),
            ms(t.corrected.max),
            ms(t.raw.p50),
            ms(t.raw.p99),
        );
    }
    if let Some(o) = s.manifest.as_ref().and_then(|m| m.get("proxy_overhead")) {
        let f = |k: &str| o.get(k).and_then(|v| v.as_f64()).unwrap_or(f64::NAN);
        let _ = writeln!(
            md,
            "\nThe delay proxy's own overhead at zero delay (measured once, `sweep/manifest.json`): \
             p50 {} µs, p99 {} µs over {} samples — included in the figures above.",
            f("overhead_p50_us"),
            f("overhead_p99_us"),
            f("samples")
        );
    }
    md.push('\n');
    md.push_str(&ev.figure(
        "sweep/rtt_cdf",
        "Heartbeat RTT CDF per cell, raw (solid) and corrected (dashed)",
    ));
    md.push('\n');
    md.push_str(&ev.figure(
        "sweep/rtt_spectrum",
        "Heartbeat RTT percentile spectrum per cell (x = 1/(1 − q))",
    ));
    md.push('\n');
}

fn repeat_note(ev: &Evidence) -> String {
    let has_repeat = ev
        .step("sweep")
        .is_some_and(|r| r.step.args.iter().any(|a| a == "--repeat"));
    if has_repeat {
        String::new()
    } else {
        "**95 % CIs over repeats: not measured in this pack** (one repeat per cell: `bench sweep \
         --repeat` is not available in this build, or `--quick`); the min–max column is a \
         single value.\n"
            .into()
    }
}

fn margin_section(md: &mut String, ev: &Evidence) {
    let _ = writeln!(md, "## 2. Throughput and abandonment per margin\n");
    let rows = ev.fixed_rows();
    if rows.is_empty() {
        md.push_str(&ev.absent("sweep", "fixed-margin cells"));
        return;
    }
    let _ = writeln!(
        md,
        "Fixed margins, fencepost, `--net-delay`; medians over repeats (min–max). Abandoned = \
         D4 refused for insufficient lease (the margin's own cost); lost work = every attempt \
         that did not pay. Counts come from the rail ledger. Source: {}.\n",
        ev.link("sweep/results.csv", "sweep/results.csv")
    );
    md.push_str(&repeat_note(ev));
    let _ = writeln!(
        md,
        "\n| TTL | margin | repeats | payouts/s median (min–max) | abandoned (insufficient lease) | lost work | sessions lost | fenced out | paid twice / stale |\n|---|---:|---:|---|---:|---:|---:|---:|---|"
    );
    let mut groups: BTreeMap<(u64, i64), Vec<&CellRow>> = BTreeMap::new();
    for r in &rows {
        groups
            .entry((r.lease_ms, (r.margin * 1000.0).round() as i64))
            .or_default()
            .push(r);
    }
    for ((lease, _), g) in &groups {
        let mut tp: Vec<f64> = g.iter().map(|r| r.throughput_per_s).collect();
        let med = median(&mut tp);
        let (lo, hi) = (tp[0], tp[tp.len() - 1]);
        let attempts: u64 = g.iter().map(|r| r.attempts).sum();
        let sum = |f: fn(&CellRow) -> u64| g.iter().map(|r| f(r)).sum::<u64>();
        let _ = writeln!(
            md,
            "| {} | {:.2} | {} | {med:.1} ({lo:.1}–{hi:.1}) | {} | {} | {} | {} | {} / {} |",
            human_ms(*lease),
            g[0].margin,
            g.len(),
            pct(sum(|r| r.abandoned_insufficient_lease), attempts),
            pct(g.iter().map(|r| lost_work(r)).sum(), attempts),
            sum(|r| r.session_lost),
            sum(|r| r.fenced_out),
            sum(|r| r.paid_twice),
            sum(|r| r.stale_paid),
        );
    }
    if let Some(t) = ev.sweeps.get("sweep").and_then(|s| s.summary.as_ref()) {
        let _ = writeln!(
            md,
            "\nConfidence intervals over repeats ({}):\n\n{}",
            ev.link("sweep/summary.csv", "sweep/summary.csv"),
            t.markdown(60)
        );
    }
    md.push('\n');
    md.push_str(&ev.figure(
        "sweep/throughput_vs_margin",
        "Throughput vs margin, one line per TTL",
    ));
    md.push('\n');
    md.push_str(&ev.figure(
        "sweep/abandonment_vs_margin",
        "Abandonment vs margin: insufficient lease (solid), all lost work (dashed)",
    ));
    if let Some(s) = ev.sweeps.get("sweep") {
        let _ = writeln!(
            md,
            "\nThe bench's recommendation per TTL (`bench report`'s rule: best throughput among cells where triggers 1, 3, 4 stay quiet and the ledger holds; a 1 % tie goes to the larger margin):\n"
        );
        md.push_str(&bench_analysis::recommend::markdown_recommendations(
            &s.recommendations,
        ));
    }
    md.push('\n');
}

fn trigger_plot(id: &str) -> (&'static str, &'static str) {
    match id {
        bench_analysis::triggers::RTT_P99_VS_MARGIN => {
            ("sweep/p99_vs_budget", "Corrected p99 vs trigger 1's budget")
        }
        bench_analysis::triggers::MARGIN_DOMINANT_LIMITER => {
            ("sweep/abandonment_vs_margin", "Abandonment vs margin")
        }
        bench_analysis::triggers::D4_UNSATISFIABLE => {
            ("sweep/throughput_vs_margin", "Throughput vs margin")
        }
        bench_analysis::triggers::FENCED_OUT_WITH_CLIENT_CHECK => (
            "pause-uc03/timeline",
            "UC-03 pause timeline: the fences at work",
        ),
        _ => (
            "throttle/throttle_rtt",
            "Corrected RTT CDF, throttled vs unthrottled",
        ),
    }
}

fn triggers_section(md: &mut String, ev: &Evidence) {
    let _ = writeln!(md, "## 3. The five ADR-006 §6.5 triggers\n");
    if ev.sweeps.is_empty() {
        md.push_str(&ev.absent("sweep", "results table"));
        return;
    }
    let _ = writeln!(
        md,
        "Each trigger evaluated (by `bench triggers`' own function) on every cell of every \
         results table of the pack: the sweep, the server-pause sweep, the adaptive sweep and \
         the throttle pair. The headline verdict is the worst over the cells: fired > \
         insufficient_data > ok > not_evaluated.\n"
    );
    let _ = writeln!(
        md,
        "| # | ADR-006 §6.5 trigger | verdict | fired / ok / insufficient / not evaluated | worst cell: observed vs threshold | ADR action | plot |\n|---|---|---|---|---|---|---|"
    );
    for (i, t) in TRIGGERS.iter().enumerate() {
        let all: Vec<(&str, &TriggerResult)> = ev
            .sweeps
            .values()
            .flat_map(|s| s.triggers.iter().map(move |r| (s.name.as_str(), r)))
            .filter(|(_, r)| r.trigger == t.id)
            .collect();
        let n = |v: Verdict| all.iter().filter(|(_, r)| r.verdict == v).count();
        let verdict = [
            Verdict::Fired,
            Verdict::InsufficientData,
            Verdict::Ok,
            Verdict::NotEvaluated,
        ]
        .into_iter()
        .find(|&v| n(v) > 0);
        // Worst: a fired cell with the largest observed/threshold, else the
        // evaluated cell closest to firing.
        let ratio = |r: &TriggerResult| {
            if i == 2 {
                // Trigger 3 fires when observed ≤ threshold.
                r.threshold / r.observed.max(1e-9)
            } else {
                r.observed / r.threshold.max(1e-9)
            }
        };
        let worst = all
            .iter()
            .filter(|(_, r)| r.verdict != Verdict::NotEvaluated)
            .max_by(|a, b| {
                (a.1.fired, ratio(a.1))
                    .partial_cmp(&(b.1.fired, ratio(b.1)))
                    .unwrap_or(std::cmp::Ordering::Equal)
            });
        let (stem, caption) = trigger_plot(t.id);
        let plot = if ev.files.contains(&format!("{stem}.svg")) {
            format!("[{caption}]({stem}.svg)")
        } else {
            format!("`{stem}.svg` not drawn")
        };
        let _ = writeln!(
            md,
            "| {} | {} | **{}** | {} / {} / {} / {} | {} | {} | {plot} |",
            i + 1,
            t.adr_trigger,
            verdict.map_or("no cells", Verdict::as_str),
            n(Verdict::Fired),
            n(Verdict::Ok),
            n(Verdict::InsufficientData),
            n(Verdict::NotEvaluated),
            worst.map_or("—".into(), |(dir, r)| format!(
                "`{dir}/{}`: {} vs {} {} ({})",
                r.cell,
                bench_analysis::triggers::fmt_value(r.observed),
                bench_analysis::triggers::fmt_value(r.threshold),
                r.unit,
                r.verdict.as_str()
            )),
            t.action,
        );
    }
    let _ = writeln!(md, "\nEvery verdict with its numbers:\n");
    for s in ev.sweeps.values() {
        let fired: Vec<&TriggerResult> = s
            .triggers
            .iter()
            .filter(|r| r.verdict != Verdict::Ok)
            .collect();
        let _ = writeln!(
            md,
            "<details><summary><code>{}</code>: {} checks, {} fired, {} not ok (source {})</summary>\n",
            s.name,
            s.triggers.len(),
            s.triggers.iter().filter(|r| r.fired).count(),
            fired.len(),
            ev.link(&format!("{}/results.csv", s.name), "results.csv")
        );
        md.push_str(&bench_analysis::triggers::markdown_table(&s.triggers));
        let _ = writeln!(md, "\n</details>\n");
    }
    md.push_str(&ev.figure(
        "sweep/p99_vs_budget",
        "Trigger 1: corrected p99 (points) vs min(lease, session TTL) × margin / 3 (dashed)",
    ));
    md.push('\n');
    if !ev.sweeps.contains_key("throttle") {
        let _ = writeln!(
            md,
            "Trigger 5 (a move off Autopilot) needs the throttle pair: {}",
            ev.absent("throttle", "results table")
        );
    } else {
        md.push_str(&ev.figure(
            "throttle/throttle_rtt",
            "Trigger 5: corrected RTT CDF, 10 % CPU quota vs unthrottled",
        ));
    }
    md.push('\n');
}

fn pause_condition_section(md: &mut String, ev: &Evidence) {
    let _ = writeln!(md, "## 4. The server-pause condition\n");
    let Some(s) = ev.sweeps.get("sweep-pause") else {
        md.push_str(&ev.absent("sweep-pause", "results table"));
        return;
    };
    let _ = writeln!(
        md,
        "The lock-server SIGSTOPped for a fixed time at a fixed interval (`server_pause` \
         column) under the same network delay. What a margin must survive, not cover as \
         jitter. Source: {}.\n",
        ev.link("sweep-pause/results.csv", "sweep-pause/results.csv")
    );
    let _ = writeln!(
        md,
        "| cell | pause | payouts/s | corrected p50 / p99 / p99.9 / max (ms) | sessions lost (expired/unknown/deadline) | lock lost | abandoned | fenced out | paid twice / stale | ledger |\n|---|---|---:|---|---|---:|---:|---:|---|---|"
    );
    for r in &s.rows {
        let _ = writeln!(
            md,
            "| `{}` | `{}` | {:.1} | {} / {} / {} / {} | {} ({}/{}/{}) | {} | {} | {} | {} / {} | {} |",
            r.cell,
            r.server_pause,
            r.throughput_per_s,
            ms(r.hb_rtt_corrected_p50_us as f64 / 1e3),
            ms(r.hb_rtt_corrected_p99_us as f64 / 1e3),
            ms(r.hb_rtt_corrected_p999_us as f64 / 1e3),
            ms(r.hb_rtt_corrected_max_us as f64 / 1e3),
            r.session_lost,
            r.session_lost_expired,
            r.session_lost_unknown,
            r.session_lost_deadline,
            r.lock_lost,
            pct(r.abandoned_insufficient_lease, r.attempts),
            r.fenced_out,
            r.paid_twice,
            r.stale_paid,
            if r.ledger_ok { "ok" } else { "**FAILED**" }
        );
    }
    // The revision's stall rule checked against what happened, cell by
    // cell, at the SDK's own period: a rule the data can contradict.
    let _ = writeln!(
        md,
        "\nThe revision's stall rule (stall + heartbeat period < usable window) against what \
         happened, per cell, at the SDK's period (U/3); the stall is the cell's corrected \
         p99.9:\n\n| cell | usable U (ms) | period (ms) | stall (ms) | stall + period | rule says | sessions lost | agree |\n|---|---:|---:|---:|---:|---|---:|---|"
    );
    let mut agree = 0;
    for r in &s.rows {
        let w = D4Window::of(r);
        let stall = r.hb_rtt_corrected_p999_us as f64 / 1e3;
        let at_risk = stall + w.period_ms >= w.usable_ms;
        let lost = r.session_lost > 0;
        agree += usize::from(at_risk == lost);
        let _ = writeln!(
            md,
            "| `{}` | {:.0} | {:.0} | {} | {:.0} | {} | {} | {} |",
            r.cell,
            w.usable_ms,
            w.period_ms,
            ms(stall),
            stall + w.period_ms,
            if at_risk {
                "sessions at risk"
            } else {
                "survives"
            },
            r.session_lost,
            if at_risk == lost { "yes" } else { "**no**" }
        );
    }
    let _ = writeln!(
        md,
        "\nThe rule agrees with the measured session losses on {agree} of {} cell(s).",
        s.rows.len()
    );
    md.push('\n');
    md.push_str(&ev.figure(
        "sweep-pause/rtt_cdf",
        "Heartbeat RTT CDF under the server pause",
    ));
    md.push('\n');
}

fn adaptive_section(md: &mut String, ev: &Evidence) {
    let _ = writeln!(md, "## 5. Adaptive vs fixed margin\n");
    let Some(a) = ev.sweeps.get("adaptive") else {
        md.push_str(&ev.absent("adaptive", "results table"));
        return;
    };
    let fixed = ev.fixed_rows();
    let recs = ev
        .sweeps
        .get("sweep")
        .map(|s| s.recommendations.clone())
        .unwrap_or_default();
    let _ = writeln!(
        md,
        "The adaptive policy (`{}`: margin = clamp(k × p99 RTT / lease, floor, ceiling)) against \
         the fixed margins of the same TTLs, same network, same seed. Sources: {}, {}.\n",
        a.rows.first().map_or("", |r| r.margin_policy.as_str()),
        ev.link("adaptive/results.csv", "adaptive/results.csv"),
        ev.link("sweep/results.csv", "sweep/results.csv")
    );
    let _ = writeln!(
        md,
        "| TTL | adaptive: margin in force | adaptive payouts/s | abandoned | triggers 1 / 3 | fixed 0.30 payouts/s | best fixed (recommended) | adaptive ÷ fixed 0.30 |\n|---|---:|---:|---:|---|---:|---|---:|"
    );
    for r in &a.rows {
        let t = |id: &str| {
            a.triggers
                .iter()
                .find(|x| x.cell == r.cell && x.trigger == id)
                .map_or("—", |x| x.verdict.as_str())
        };
        let mut at30: Vec<f64> = fixed
            .iter()
            .filter(|f| f.lease_ms == r.lease_ms && (f.margin - ADR_MARGIN).abs() < 1e-9)
            .map(|f| f.throughput_per_s)
            .collect();
        let at30 = median(&mut at30);
        let best = recs
            .iter()
            .find(|x| x.lease_ms == r.lease_ms && x.backend == r.backend)
            .map_or("not measured".to_string(), |x| {
                match (x.margin, x.throughput_per_s) {
                    (Some(m), Some(tp)) => format!("{m:.2}: {tp:.1}/s"),
                    _ => "none qualifies".into(),
                }
            });
        let _ = writeln!(
            md,
            "| {} | {:.3} | {:.1} | {} | {} / {} | {} | {} | {} |",
            human_ms(r.lease_ms),
            r.margin_effective,
            r.throughput_per_s,
            pct(r.abandoned_insufficient_lease, r.attempts),
            t(bench_analysis::triggers::RTT_P99_VS_MARGIN),
            t(bench_analysis::triggers::D4_UNSATISFIABLE),
            if at30.is_nan() {
                "not in the sweep".into()
            } else {
                format!("{at30:.1}")
            },
            best,
            if at30.is_nan() || at30 == 0.0 {
                "—".into()
            } else {
                format!("{:.2}×", r.throughput_per_s / at30)
            },
        );
    }
    let fired2 = ev
        .sweeps
        .get("sweep")
        .map(|s| {
            s.triggers
                .iter()
                .filter(|r| {
                    r.trigger == bench_analysis::triggers::MARGIN_DOMINANT_LIMITER && r.fired
                })
                .count()
        })
        .unwrap_or(0);
    let _ = writeln!(
        md,
        "\nTrigger 2 (the margin is the dominant throughput limiter → consider the adaptive \
         margin) fired on {fired2} fixed cell(s) of the sweep. One repeat per policy: a ratio \
         within run-to-run noise is not a difference.\n"
    );
}

/// The conditions the revision derives from (see [`revision`]).
pub fn conditions(ev: &Evidence) -> Vec<Condition> {
    let mut out = Vec::new();
    let of = |name: String, source: String, rows: &[&CellRow], stall: bool, rtt_rule: bool| {
        let f = |g: fn(&CellRow) -> u64| rows.iter().map(|r| g(r)).max().unwrap_or(0) as f64 / 1e3;
        Condition {
            name,
            source,
            base_ms: rows
                .iter()
                .map(|r| r.lease_ms.min(r.session_ttl_ms))
                .min()
                .unwrap_or(0) as f64,
            hop_ms: rows.iter().map(|r| r.worst_case_hop_ms).max().unwrap_or(0) as f64,
            p50_ms: f(|r| r.hb_rtt_corrected_p50_us),
            p99_ms: f(|r| r.hb_rtt_corrected_p99_hi_us.max(r.hb_rtt_corrected_p99_us)),
            stall_ms: stall.then(|| f(|r| r.hb_rtt_corrected_p999_us)),
            samples: rows.iter().map(|r| r.hb_corrected_count).min().unwrap_or(0),
            binding: true,
            rtt_rule,
        }
    };
    let fixed = ev.fixed_rows();
    let mut ttls: Vec<u64> = fixed.iter().map(|r| r.lease_ms).collect();
    ttls.sort_unstable();
    ttls.dedup();
    let delay = fixed.first().map_or(String::new(), |r| r.net_delay.clone());
    for t in &ttls {
        let rows: Vec<&CellRow> = fixed.iter().copied().filter(|r| r.lease_ms == *t).collect();
        out.push(of(
            format!("TTL {} (sweep, net delay {delay}; scaled)", human_ms(*t)),
            "sweep/results.csv".into(),
            &rows,
            false,
            false,
        ));
    }
    if !fixed.is_empty() {
        // Production: the measured network (all sweep cells' worst corrected
        // p50 and p99 interval end), unscaled, on 30 s / 15 s and a 7 s hop.
        let mut c = of(
            format!(
                "production {} lease / {} session, 7 s hop (projected from the sweep's RTTs)",
                human_ms(PRODUCTION_LEASE_MS),
                human_ms(PRODUCTION_SESSION_MS)
            ),
            "sweep/results.csv".into(),
            &fixed,
            false,
            true,
        );
        c.base_ms = PRODUCTION_LEASE_MS.min(PRODUCTION_SESSION_MS) as f64;
        c.hop_ms = PRODUCTION_HOP_MS as f64;
        out.push(c);
    }
    if let Some(s) = ev.sweeps.get("sweep-pause") {
        let mut ttls: Vec<u64> = s.rows.iter().map(|r| r.lease_ms).collect();
        ttls.sort_unstable();
        ttls.dedup();
        for t in ttls {
            let rows: Vec<&CellRow> = s.rows.iter().filter(|r| r.lease_ms == t).collect();
            out.push(of(
                format!(
                    "TTL {} under server pause {}",
                    human_ms(t),
                    rows.first().map_or("", |r| r.server_pause.as_str())
                ),
                "sweep-pause/results.csv".into(),
                &rows,
                true,
                false,
            ));
        }
    }
    if let Some(s) = ev.sweeps.get("throttle") {
        let rows: Vec<&CellRow> = s
            .rows
            .iter()
            .filter(|r| {
                !r.cpu_quota.is_empty() && r.cpu_quota != bench_analysis::triggers::UNTHROTTLED
            })
            .collect();
        if !rows.is_empty() {
            // CPU throttling stalls are absolute time (the CFS period), not
            // scaled: projected onto production like the network.
            let mut c = of(
                format!(
                    "production, workers under a CPU quota ({}; projected from the throttle run)",
                    rows[0].cpu_quota
                ),
                "throttle/results.csv".into(),
                &rows,
                false,
                true,
            );
            c.base_ms = PRODUCTION_LEASE_MS.min(PRODUCTION_SESSION_MS) as f64;
            c.hop_ms = PRODUCTION_HOP_MS as f64;
            out.push(c);
        }
    }
    out
}

fn projection_section(md: &mut String, ev: &Evidence, conditions: &[Condition]) {
    let _ = writeln!(md, "## 6. Production projection\n");
    match ev.sweeps.get("sweep").and_then(|s| s.projection.as_ref()) {
        Some(t) => {
            let _ = writeln!(
                md,
                "The bench's own projection ({}):\n\n{}",
                ev.link("sweep/projection.csv", "sweep/projection.csv"),
                t.markdown(60)
            );
        }
        None => {
            let _ = writeln!(
                md,
                "`sweep/projection.csv`: **not measured in this pack** (`bench sweep` of this \
                 build does not write it; issue 13 adds it). The arithmetic below applies the \
                 sweep's measured corrected RTTs, unscaled, to production's configuration \
                 instead.\n"
            );
        }
    }
    let Some(p) = conditions.iter().find(|c| c.name.starts_with("production")) else {
        md.push_str(&ev.absent("sweep", "results table"));
        return;
    };
    let _ = writeln!(
        md,
        "Production: lease {} ms, session {} ms (usable base {:.0} ms), worst-case hop {:.0} ms \
         (rail read timeout 5 s + 2 s); network from the sweep: corrected p50 {} ms, p99 \
         (interval end) {} ms, the worst over its cells. Heartbeat period U/3 (the SDK's).\n",
        PRODUCTION_LEASE_MS,
        PRODUCTION_SESSION_MS,
        p.base_ms,
        p.hop_ms,
        ms(p.p50_ms),
        ms(p.p99_ms)
    );
    let _ = writeln!(
        md,
        "| margin | trigger 1 budget (ms) | p99 within? | usable U (ms) | left before a heartbeat (ms) | D4 refuses in (of each period) | trigger 3 |\n|---:|---:|---|---:|---:|---:|---|"
    );
    for m in [0.10, 0.15, 0.20, 0.25, 0.30, 0.35, 0.40, 0.45, 0.50] {
        let usable = p.base_ms * (1.0 - m);
        let period = usable / 3.0;
        let w = D4Window {
            usable_ms: usable,
            period_ms: period,
            rtt_ms: p.p50_ms,
            before_heartbeat_ms: usable - period - p.p50_ms,
            hop_ms: p.hop_ms,
        };
        let budget = p.base_ms * m / 3.0;
        let _ = writeln!(
            md,
            "| {m:.2} | {budget:.0} | {} | {usable:.0} | {:.0} | {:.1} % | {} |",
            if p.p99_ms <= budget { "yes" } else { "**no**" },
            w.before_heartbeat_ms,
            w.refusal_fraction() * 100.0,
            if w.before_heartbeat_ms <= w.hop_ms {
                "**fires**"
            } else {
                "ok"
            }
        );
    }
    let budget = p.base_ms * ADR_MARGIN / 3.0;
    let usable = p.base_ms * (1.0 - ADR_MARGIN);
    let before = usable * 2.0 / 3.0 - p.p50_ms;
    let _ = writeln!(
        md,
        "\nAt ADR-006's margin {ADR_MARGIN:.2}, trigger 1's production budget ({budget:.0} ms) \
         is {:.0}× the measured p99 ({} ms), while D4 leaves {before:.0} ms just before a \
         heartbeat against a {:.0} ms hop: {}.\n",
        budget / p.p99_ms.max(1e-9),
        ms(p.p99_ms),
        p.hop_ms,
        match (p.p99_ms > budget, before <= p.hop_ms) {
            (false, true) => format!(
                "trigger 3 fires and trigger 1 does not — in production the binding constraint \
                 is D4, set by the session TTL ({PRODUCTION_SESSION_MS} ms < lease \
                 {PRODUCTION_LEASE_MS} ms), not the network"
            ),
            (true, true) => "both trigger 1 and trigger 3 fire".to_string(),
            (true, false) => "trigger 1 fires: the network binds".to_string(),
            (false, false) => "neither trigger 1 nor trigger 3 fires".to_string(),
        },
    );
}

/// The smallest grace fraction from which a scenario has no violation at every larger one.
fn clean_from(c: &ClockData, scenario: &str) -> Option<f64> {
    let mut rows: Vec<&ClockRow> = c.rows.iter().filter(|r| r.scenario == scenario).collect();
    rows.sort_by(|a, b| a.grace_fraction.total_cmp(&b.grace_fraction));
    let mut first = None;
    for r in rows.iter().rev() {
        if r.violations == 0 {
            first = Some(r.grace_fraction);
        } else {
            break;
        }
    }
    first
}

fn clock_section(md: &mut String, ev: &Evidence) {
    let _ = writeln!(
        md,
        "## 7. Clock steps: which are hazardous, and the essay\n"
    );
    let Some(c) = ev.clocks.get("clock") else {
        md.push_str(&ev.absent("clock", "clock.json"));
        return;
    };
    let at = |s: &str, f: f64| {
        c.rows
            .iter()
            .find(|r| r.scenario == s && (r.grace_fraction - f).abs() < 1e-9)
    };
    let step_ms = c.params.step_ns as f64 / 1e6;
    let _ = writeln!(
        md,
        "A deterministic simulation over the real `LockTable` and the SDK's deadline arithmetic \
         (seed {}, lease {} ms, client margin {}, bound θ + 2ρD + q = {:.3} ms, steps of {} \
         ms): violations = cases where the client still believes it holds the grant after the \
         server reassigned it. Sources: {}, {}.\n",
        c.seed,
        c.params.lease_ns / 1_000_000,
        c.params.margin,
        c.bound_ms,
        step_ms,
        ev.link("clock/clock.json", "clock/clock.json"),
        ev.link("clock/clock.csv", "clock/clock.csv")
    );
    let _ = writeln!(
        md,
        "| scenario | cases | violations at grace 0 | at grace = bound | max overrun at bound (µs) | no violation from grace = |\n|---|---:|---:|---:|---:|---|"
    );
    let mut names: Vec<&str> = Vec::new();
    for r in &c.rows {
        if !names.contains(&r.scenario.as_str()) {
            names.push(&r.scenario);
        }
    }
    for s in &names {
        let z = at(s, 0.0);
        let b = at(s, 1.0);
        let _ = writeln!(
            md,
            "| {s} | {} | {} | {} | {} | {} |",
            b.or(z).map_or(0, |r| r.cases),
            z.map_or("—".into(), |r| r.violations.to_string()),
            b.map_or("—".into(), |r| r.violations.to_string()),
            b.map_or("—".into(), |r| format!("{:.1}", r.max_overrun_us)),
            clean_from(c, s).map_or("none in the sweep".into(), |f| format!(
                "{f} × bound ({:.1} ms)",
                f * c.bound_ms
            )),
        );
    }
    let v = |s: &str| at(s, 1.0).map_or(0, |r| r.violations);
    let _ = writeln!(
        md,
        "\n**Hazardous steps** (violations at grace = bound): server clock **{}** (forward {} \
         vs backward {}), client clock **{}** (forward {} vs backward {}). A forward server \
         step makes the server's measured interval longer than real time, so it reassigns \
         early; a backward client step stretches the client's belief.\n",
        c.findings.server_hazardous_step,
        v("server-step-forward"),
        v("server-step-backward"),
        c.findings.client_hazardous_step,
        v("client-step-forward"),
        v("client-step-backward"),
    );
    let _ = writeln!(
        md,
        "**The essay** (\"Lease safety margins under clock drift\") says: *“{ESSAY_SENTENCE}”* \
         — the simulation {}. {}\n",
        if c.findings.agrees_with_essay_on_server_step {
            "agrees"
        } else {
            "**disagrees**"
        },
        if c.findings.agrees_with_essay_on_server_step {
            "A backward server step produced more violations than a forward one.".to_string()
        } else {
            format!(
                "On the server's clock a backward step makes the elapsed time *shorter* than \
                 real time, so the server reassigns *later* (safe: {} violation(s) at grace = \
                 bound), and a forward step is the one that reassigns before the holder's \
                 deadline ({} violation(s)). The essay's mechanism is right for the client's \
                 clock, whose backward step produced {} violation(s). A step needs grace of \
                 about bound + step: the step scenarios are clean only from {} × bound.",
                v("server-step-backward"),
                v("server-step-forward"),
                v("client-step-backward"),
                ["server-step-forward", "client-step-backward"]
                    .iter()
                    .filter_map(|s| clean_from(c, s))
                    .fold(f64::NAN, f64::max)
            )
        }
    );
    match ev.clocks.get("clock-margin") {
        Some(cm) => {
            let total: u64 = cm.rows.iter().map(|r| r.violations).sum();
            let cases: u64 = cm.rows.iter().map(|r| r.cases).sum();
            let _ = writeln!(
                md,
                "With ADR-006's client margin {} ({}): {total} violation(s) in {cases} cases \
                 over every scenario and grace, including grace 0 — the margin gives {:.0} ms \
                 of slack on a {} ms lease, far more than a {} ms step.\n",
                cm.params.margin,
                ev.link("clock-margin/clock.csv", "clock-margin/clock.csv"),
                cm.params.margin * cm.params.lease_ns as f64 / 1e6,
                cm.params.lease_ns / 1_000_000,
                cm.params.step_ns as f64 / 1e6
            );
        }
        None => md.push_str(&ev.absent("clock-margin", "clock.json")),
    }
    md.push_str(&ev.figure(
        "clock/clock",
        "Violation rate vs grace / bound, per scenario (margin 0)",
    ));
    md.push('\n');
}

fn fences_section(md: &mut String, ev: &Evidence) {
    let _ = writeln!(
        md,
        "## 8. The fences under a frozen worker (UC-03, trigger 4)\n"
    );
    if ev.pauses.is_empty() {
        md.push_str(&ev.absent("pause", "pause.json"));
        return;
    }
    let _ = writeln!(
        md,
        "| run | client check | rounds | fenced out (fence 1 / 2) | duplicates | paid / seeded | paid twice | stale paid | ledger | expectation | taken over after (s, min–max) |\n|---|---|---:|---|---:|---|---:|---:|---|---|---|"
    );
    for name in ["pause", "pause-uc03"] {
        let Some(p) = ev.pauses.get(name) else {
            let _ = writeln!(
                md,
                "| `{name}` | {} |||||||||| ",
                ev.absent(name, "pause.json").trim()
            );
            continue;
        };
        let mut t: Vec<f64> = p.paused.iter().filter_map(|r| r.takeover_after_s).collect();
        t.sort_by(f64::total_cmp);
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} ({} / {}) | {} | {} / {} | {} | {} | {} | {} | {} |",
            ev.link(&format!("{name}/pause.json"), name),
            if p.client_check {
                "on"
            } else {
                "**off** (UC-03)"
            },
            p.pauses,
            p.fenced_out,
            p.fenced_out_fence1,
            p.fenced_out_fence2,
            p.duplicate_attempted,
            p.paid,
            p.payouts,
            p.paid_twice,
            p.stale_paid,
            if p.ledger_ok { "ok" } else { "**FAILED**" },
            if p.expectation_met {
                "met"
            } else {
                "**NOT met**"
            },
            match (t.first(), t.last()) {
                (Some(a), Some(b)) => format!("{a:.3}–{b:.3}"),
                _ => "—".into(),
            }
        );
    }
    let _ = writeln!(
        md,
        "\nWith the check on, a fence-out would be trigger 4 (the client believed it held the \
         lease): the frozen worker must abandon instead. With it off, the fences must refuse \
         every stale submit and nothing is paid twice — the safety half of ADR-006's \
         safety/liveness split, measured.\n"
    );
    md.push_str(&ev.figure(
        "pause-uc03/timeline",
        "UC-03: freezes, takeovers and fence refusals",
    ));
    md.push('\n');
}

fn peer_section(md: &mut String, ev: &Evidence) {
    let _ = writeln!(md, "## 9. fencepost vs etcd on this machine\n");
    let Some(t) = &ev.peer else {
        md.push_str(&ev.absent("peer", "peer.csv"));
        return;
    };
    let (Some(sys), Some(store), Some(op), Some(conc), Some(ops)) = (
        t.col("system"),
        t.col("store"),
        t.col("op"),
        t.col("conc"),
        t.col("ops_per_s"),
    ) else {
        let _ = writeln!(
            md,
            "`peer/peer.csv` lacks the columns system, store, op, conc, ops_per_s.\n"
        );
        return;
    };
    let mut groups: BTreeMap<(String, String, String, String), Vec<f64>> = BTreeMap::new();
    for r in &t.rows {
        let get = |i: usize| r.get(i).cloned().unwrap_or_default();
        if let Ok(v) = get(ops).parse::<f64>() {
            groups
                .entry((get(op), get(conc), get(sys), get(store)))
                .or_default()
                .push(v);
        }
    }
    let _ = writeln!(
        md,
        "Same driver, same concurrency, systems interleaved per repeat ({}; the ratios with \
         their intervals are in {}). Median ops/s over repeats (min–max):\n",
        ev.link("peer/peer.csv", "peer/peer.csv"),
        ev.link("peer/report.md", "peer/report.md")
    );
    let _ = writeln!(
        md,
        "| op | clients | system | store | repeats | ops/s median (min–max) |\n|---|---:|---|---|---:|---|"
    );
    for ((op, conc, sys, store), mut v) in groups {
        let med = median(&mut v);
        let _ = writeln!(
            md,
            "| {op} | {conc} | {sys} | {store} | {} | {med:.0} ({:.0}–{:.0}) |",
            v.len(),
            v[0],
            v[v.len() - 1]
        );
    }
    md.push('\n');
    md.push_str(&ev.figure("peer/peer_throughput", "fencepost vs etcd throughput"));
    md.push('\n');
}

fn others_section(md: &mut String, ev: &Evidence) {
    let _ = writeln!(md, "## 10. Failover and chaos\n");
    for (name, what) in [
        ("failover", "failover (issue 14)"),
        ("chaos", "chaos (issue 16)"),
    ] {
        let files: Vec<&String> = ev
            .files
            .iter()
            .filter(|f| f.starts_with(&format!("{name}/")))
            .collect();
        let _ = write!(md, "**{what}:** ");
        if files.is_empty() {
            md.push_str(&ev.absent(name, "output"));
        } else {
            let _ = writeln!(
                md,
                "its output is in the pack: {}.",
                files
                    .iter()
                    .filter(|f| f.ends_with(".md")
                        || f.ends_with(".json")
                        || f.ends_with(".csv")
                        || f.ends_with(".svg"))
                    .map(|f| format!("[{f}]({f})"))
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            if let Some(r) = ev.step(name) {
                let _ = writeln!(md, " Step status: {}.", r.status.as_str());
            }
        }
        md.push('\n');
    }
}

fn revision_section(md: &mut String, ev: &Evidence, conditions: &[Condition]) {
    let _ = writeln!(md, "## Proposed revision of ADR-006 §6.2 / §6.5\n");
    let r = revision::derive(conditions);
    let _ = writeln!(
        md,
        "Derived in code (`bench::adr::revision`) from the conditions below — no number here is \
         typed in. For a margin m and heartbeat divisor k (period U/k, U = min(lease, session \
         TTL) × (1 − m)), a condition holds when (1) its corrected p99 (interval end) ≤ base × \
         m / 3 (trigger 1; imposed on the production projections only: a scaled cell's network \
         is not scaled with its lease, so its trigger 1 is 30× pessimistic and is reported, \
         and a stall condition's tail is the fault itself), (2) U − \
         U/k − p50 > worst-case hop (trigger 3: D4 can be met right before a heartbeat), and \
         (3) for a stall condition, stall (p99.9) + U/k < U. Rule: keep (0.30, 3) if it holds \
         everywhere binding; else keep 0.30 with the smallest divisor that holds; else the \
         feasible margin nearest 0.30 (ties to the larger).\n"
    );
    let _ = writeln!(
        md,
        "| condition | source | base (ms) | hop (ms) | p50 (ms) | p99 (ms) | stall (ms) | samples | trigger 1 binds | m needed (trigger 1) | m allowed by D4 at k = 3 | ADR-006 (0.30, 3) |\n|---|---|---:|---:|---:|---:|---:|---:|---|---:|---:|---|"
    );
    for c in conditions {
        let _ = writeln!(
            md,
            "| {} | {} | {:.0} | {:.0} | {} | {} | {} | {} | {} | {} | < {:.3} | {} |",
            c.name,
            ev.link(&c.source, &c.source),
            c.base_ms,
            c.hop_ms,
            ms(c.p50_ms),
            ms(c.p99_ms),
            c.stall_ms.map_or("—".into(), ms),
            c.samples,
            if c.rtt_rule { "yes" } else { "no (reported)" },
            if c.stall_ms.is_some() {
                "— (stall)".to_string()
            } else {
                format!("{:.3}", revision::margin_needed(c))
            },
            revision::margin_ceiling(c, ADR_DIVISOR),
            revision::violation(c, ADR_MARGIN, ADR_DIVISOR)
                .map_or("holds".into(), |v| format!("**fails**: {v}")),
        );
    }
    let _ = writeln!(
        md,
        "\nFeasible margins (every binding condition holds) per divisor:\n\n| divisor k | heartbeats per usable window | feasible margins |\n|---:|---:|---|"
    );
    for (k, ms_) in &r.feasible {
        let _ = writeln!(
            md,
            "| {k} | {k} | {} |",
            if ms_.is_empty() {
                "none".to_string()
            } else {
                ms_.iter()
                    .map(|m| format!("{m:.2}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            }
        );
    }
    let _ = writeln!(md, "\nReasoning, from the numbers:\n");
    for line in &r.reasoning {
        let _ = writeln!(md, "- {line}");
    }
    md.push('\n');
    match (r.margin, r.divisor) {
        (Some(m), Some(k)) => {
            let tag = if r.provisional {
                " (provisional: fewer than 1,000 samples behind a p99)"
            } else {
                ""
            };
            let _ = writeln!(md, "### Proposed text{tag}\n");
            let _ = writeln!(
                md,
                "**§6.2 D1.** The client computes its own deadline: deadline = t_send + lease × \
                 (1 − margin), margin = lock.client.safety-margin, default **{m:.2}** \
                 ({}measured in this pack: the binding conditions above).\n",
                if (m - ADR_MARGIN).abs() < 1e-9 {
                    "unchanged; "
                } else {
                    "was 0.30; "
                }
            );
            let _ = writeln!(
                md,
                "**§6.2, heartbeat (T-040).** Period = min(session TTL, shortest live lease) × \
                 (1 − margin) / **{k}**{}.\n",
                if k == ADR_DIVISOR {
                    " (unchanged)".to_string()
                } else {
                    format!(
                        " (was / 3): with / 3 the window just before a heartbeat is U × 2/3, \
                         and {} — D4 refuses part of every period at the ADR's own defaults",
                        r.adr_failures
                            .iter()
                            .map(|(n, v)| format!("{n}: {v}"))
                            .collect::<Vec<_>>()
                            .join("; ")
                    )
                }
            );
            let _ = writeln!(
                md,
                "**§6.5 row 1.** Measured p99 heartbeat RTT (corrected for coordinated omission, \
                 on ≥ 1,000 samples) exceeds one third of min(lease, session TTL) × margin → \
                 raise the margin or shorten the heartbeat period.\n\n\
                 **§6.5 row 3.** lock.session.ttl or lock.default.ttl changes → recheck \
                 min(lease, session TTL) × (1 − margin) × (1 − 1/{k}) − p50 RTT > worst-case \
                 rail hop (the window just before a heartbeat, not the whole usable lease; the \
                 session TTL binds when it is shorter than the lease).\n"
            );
        }
        _ => {
            let _ = writeln!(
                md,
                "### No revision can be proposed from this pack\n\nNo (margin, divisor) pair \
                 satisfies every binding condition; the reasoning above names what blocks it.\n"
            );
        }
    }
}

fn files_section(md: &mut String, ev: &Evidence) {
    let _ = writeln!(md, "## Files of this pack\n");
    let mut by_dir: BTreeMap<&str, Vec<&String>> = BTreeMap::new();
    for f in &ev.files {
        let d = f.split_once('/').map_or(".", |(d, _)| d);
        by_dir.entry(d).or_default().push(f);
    }
    for (d, files) in by_dir {
        let shown: Vec<String> = files
            .iter()
            .filter(|f| !f.contains("/hgrm/"))
            .map(|f| format!("[{}]({f})", f.rsplit('/').next().unwrap_or(f)))
            .collect();
        let hgrm = files.iter().filter(|f| f.contains("/hgrm/")).count();
        let _ = writeln!(
            md,
            "- `{d}/`: {}{}",
            shown.join(", "),
            if hgrm > 0 {
                format!(" and {hgrm} histogram file(s) in `{d}/hgrm/`")
            } else {
                String::new()
            }
        );
    }
}
