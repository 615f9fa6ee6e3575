//! What `bench triggers` writes and prints: `triggers.json`, the aligned
//! terminal table, the Markdown table of `report.md`, the exit code, and the
//! command itself ([`run_triggers_command`]) with its error
//! ([`TriggersError`]).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use super::catalog::{CLOCK_OFFSET_BOUND, TriggerResult, Verdict};
use super::verdicts::evaluate;
use crate::results::{BadInput, read_nonempty_results};

/// File name of the trigger verdicts in a results directory.
pub const TRIGGERS_JSON: &str = "triggers.json";

/// Exit code of `bench triggers` when no trigger fired.
pub const EXIT_NONE_FIRED: i32 = 0;
/// Exit code of `bench triggers` on bad input (any `Err` of [`run_triggers_command`]).
pub const EXIT_BAD_INPUT: i32 = 2;
/// Exit code of `bench triggers` when at least one trigger fired.
pub const EXIT_FIRED: i32 = 3;

/// Why `triggers.json` could not be written. The message is its own context
/// ("writing /x/triggers.json"); the cause is its `source()`.
#[derive(Debug, thiserror::Error)]
pub enum WriteError {
    /// The verdicts could not be serialised; a bug, not a data problem.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// The file could not be written; check the directory is writable and no
    /// directory is in the file's place.
    #[error("writing {path}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
}

/// Why `bench triggers` could not evaluate a directory; the CLI exits
/// [`EXIT_BAD_INPUT`] on any of them.
#[derive(Debug, thiserror::Error)]
pub enum TriggersError {
    /// The results table is missing, unreadable or empty; see [`BadInput`].
    #[error(transparent)]
    BadInput(#[from] BadInput),
    /// The verdicts could not be written; see [`WriteError`].
    #[error(transparent)]
    Write(#[from] WriteError),
}

/// The exit code of `bench triggers` for these results: 3 if any fired, else 0.
pub fn exit_code(results: &[TriggerResult]) -> i32 {
    if results.iter().any(|r| r.fired) {
        EXIT_FIRED
    } else {
        EXIT_NONE_FIRED
    }
}

/// Writes `triggers.json` (a JSON array of [`TriggerResult`]) into `dir`.
pub fn write_triggers(dir: &Path, results: &[TriggerResult]) -> Result<(), WriteError> {
    let path = dir.join(TRIGGERS_JSON);
    let json = serde_json::to_string_pretty(results)?;
    std::fs::write(&path, json + "\n").map_err(|source| WriteError::Write { path, source })
}

/// Formats a number for the tables: integers plainly, the rest with 3 decimals.
pub fn fmt_value(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else {
        format!("{v:.3}")
    }
}

/// The verdict word of a result in the terminal table.
fn verdict_word(r: &TriggerResult) -> &'static str {
    match r.verdict {
        Verdict::Fired => "FIRED",
        v => v.as_str(),
    }
}

/// The trigger table as aligned plain text for a terminal, then a summary line.
pub fn format_table(results: &[TriggerResult]) -> String {
    let header = [
        "trigger",
        "cell",
        "observed",
        "threshold",
        "verdict",
        "action",
    ];
    let rows: Vec<[String; 6]> = results
        .iter()
        .map(|r| {
            [
                r.trigger.clone(),
                r.cell.clone(),
                format!("{} {}", fmt_value(r.observed), r.unit),
                format!("{} {}", fmt_value(r.threshold), r.unit),
                verdict_word(r).to_owned(),
                if r.fired {
                    r.action.clone()
                } else {
                    "—".to_owned()
                },
            ]
        })
        .collect();
    let mut widths = header.map(|h| h.chars().count());
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |cells: &[String]| {
        let mut text = String::new();
        for (i, (cell, w)) in cells.iter().zip(widths).enumerate() {
            if i + 1 == cells.len() {
                text.push_str(cell);
            } else {
                let pad = w - cell.chars().count();
                let _ = write!(text, "{cell}{}  ", " ".repeat(pad));
            }
        }
        out.push_str(text.trim_end());
        out.push('\n');
    };
    line(&header.map(str::to_owned));
    line(&widths.map(|w| "-".repeat(w)));
    for row in &rows {
        line(row);
    }
    let count = |v: Verdict| results.iter().filter(|r| r.verdict == v).count();
    let fired: Vec<String> = results
        .iter()
        .filter(|r| r.fired)
        .map(|r| format!("{}@{}", r.trigger, r.cell))
        .collect();
    let _ = writeln!(
        out,
        "\n{} of {} checks fired{}; {} ok, {} insufficient_data, {} not_evaluated",
        fired.len(),
        results.len(),
        if fired.is_empty() {
            String::new()
        } else {
            format!(": {}", fired.join(", "))
        },
        count(Verdict::Ok),
        count(Verdict::InsufficientData),
        count(Verdict::NotEvaluated),
    );
    out
}

/// The trigger table as Markdown (for `report.md`).
pub fn markdown_table(results: &[TriggerResult]) -> String {
    let mut out = String::from(
        "| trigger | cell | observed | threshold | verdict | detail | action |\n\
         |---|---|---:|---:|---|---|---|\n",
    );
    for r in results {
        let verdict = match r.verdict {
            Verdict::Fired => "**FIRED**".to_owned(),
            v => v.as_str().to_owned(),
        };
        let action = if r.fired { r.action.as_str() } else { "—" };
        let _ = writeln!(
            out,
            "| `{}` | `{}` | {} {} | {} {} | {verdict} | {} | {action} |",
            r.trigger,
            r.cell,
            fmt_value(r.observed),
            r.unit,
            fmt_value(r.threshold),
            r.unit,
            r.detail.replace('|', "\\|"),
        );
    }
    out
}

/// `bench triggers DIR`: reads the results, evaluates, prints the table to
/// stdout and returns the exit code (0 none fired, 3 any fired). `DIR` is
/// only read: `triggers.json` is written only into `write_to` when given
/// (`--write`: `DIR` itself; `--out OUT`: `OUT`, created). Every `Err` is
/// bad input: the CLI exits 2.
pub fn run_triggers_command(dir: &Path, write_to: Option<&Path>) -> Result<i32, TriggersError> {
    let rows = read_nonempty_results(dir)?;
    let results = evaluate(&rows);
    if let Some(to) = write_to {
        std::fs::create_dir_all(to).map_err(|source| WriteError::Write {
            path: to.to_owned(),
            source,
        })?;
        write_triggers(to, &results)?;
    }
    print!("{}", format_table(&results));
    if let Some(line) = clock_line(dir) {
        println!("{line}");
    }
    Ok(exit_code(&results))
}

/// The lease-safety essay's clock check on a lab run: not evaluated (the
/// bench, its lock-server and its rail-stub share one host and one clock, so
/// no offset between clocks arises), but the host's reading the run recorded
/// is shown, so a run on a production host can be judged by eye. `None` for a
/// run that recorded none (before telemetry was recorded) or without a manifest.
fn clock_line(dir: &Path) -> Option<String> {
    let c = crate::manifest::Manifest::read(dir).ok()?.machine.clock?;
    let vouches = c.synchronised && c.maxerror_us <= c.offset_max_ms * 1000;
    Some(format!(
        "{CLOCK_OFFSET_BOUND}: not evaluated on a lab run (one host, one clock); this host's \
         clock discipline when the run started: maxerror {:.1} ms, esterror {:.1} ms, {}, \
         against lock.clock.offset-max {} ms: {} (manifest.json machine.clock; in production \
         the check runs on live telemetry, bench triggers --prometheus)",
        c.maxerror_us as f64 / 1e3,
        c.esterror_us as f64 / 1e3,
        if c.synchronised {
            "synchronised"
        } else {
            "unsynchronised"
        },
        c.offset_max_ms,
        if vouches {
            "it vouches for the bound"
        } else {
            "it would not vouch for the bound"
        },
    ))
}
