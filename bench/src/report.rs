//! `bench report DIR`: redraws the plots and writes `report.md` from a results
//! directory (results table, `manifest.json`, `hgrm/*.hdr`), and the per-TTL
//! margin recommendation that `bench sweep` also prints at its end.
//!
//! Recommendation rule (per TTL, i.e. per `lease_ms`): a cell qualifies when
//! triggers 1 (`rtt_p99_vs_margin`), 3 (`d4_unsatisfiable`) and 4
//! (`fenced_out_with_client_check`) do not fire on it, its ledger check passed
//! (`ledger_ok`, no `paid_twice`, no `stale_paid`), it has heartbeat samples (so
//! trigger 1 was actually checked) and it paid at least one payout. Among the
//! qualifying cells the highest `throughput_per_s` wins; cells within
//! [`THROUGHPUT_TIE_FRACTION`] of the best count as a tie, and the tie goes to the
//! larger margin (ADR-006: "We would rather pay throughput than debug a duplicate
//! payment"). Trigger 2 does not disqualify a cell: it says the margin costs
//! throughput, which the throughput ranking already accounts for; when it fires on
//! the chosen cell the reason says so.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;
use std::time::{Duration, SystemTime};

use anyhow::Context as _;
use serde::{Deserialize, Serialize};

use crate::plots::{PLOT_STEMS, draw_plots};
use crate::results::{BadInput, CellRow, read_nonempty_results};
use crate::triggers::{
    D4_UNSATISFIABLE, FENCED_OUT_WITH_CLIENT_CHECK, MARGIN_DOMINANT_LIMITER, RTT_P99_VS_MARGIN,
    TRIGGERS, TriggerResult, evaluate, evaluate_row, fmt_value, lost_work, markdown_table,
    write_triggers,
};

/// File name of the report in a results directory.
pub const REPORT_MD: &str = "report.md";
/// File name of the run manifest (written by the runner).
pub const MANIFEST_JSON: &str = "manifest.json";
/// Throughputs within this fraction of the best count as tied (run-to-run noise).
pub const THROUGHPUT_TIE_FRACTION: f64 = 0.01;

/// The recommended margin for one TTL, or why there is none.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Recommendation {
    /// The TTL (lease) the recommendation is for, in ms.
    pub lease_ms: u64,
    /// The recommended margin, `None` when no cell qualifies.
    pub margin: Option<f64>,
    /// The cell the recommendation comes from.
    pub cell: Option<String>,
    /// That cell's throughput, in payouts/s.
    pub throughput_per_s: Option<f64>,
    /// Cells of this TTL that qualified.
    pub qualifying: usize,
    /// Cells of this TTL in the table.
    pub cells: usize,
    /// Why this margin, or why none: the numbers behind the choice.
    pub reason: String,
}

/// Why a cell does not qualify for a recommendation, `None` if it does.
fn disqualification(row: &CellRow, results: &[TriggerResult; 4]) -> Option<&'static str> {
    let fired = |id: &str| results.iter().any(|r| r.trigger == id && r.fired);
    if !row.ledger_ok || row.paid_twice > 0 || row.stale_paid > 0 {
        Some("ledger check failed")
    } else if fired(FENCED_OUT_WITH_CLIENT_CHECK) {
        Some("fenced out with the client check on (trigger 4)")
    } else if fired(D4_UNSATISFIABLE) {
        Some("min(lease, session TTL) × (1 − margin) ≤ worst-case rail hop (trigger 3)")
    } else if row.hb_count == 0 {
        Some("no heartbeat samples, trigger 1 unchecked")
    } else if fired(RTT_P99_VS_MARGIN) {
        Some("p99 heartbeat RTT > lease × margin / 3 (trigger 1)")
    } else if row.payouts_paid == 0 {
        Some("no payouts paid")
    } else {
        None
    }
}

/// The advice for a TTL where no cell qualifies, from what disqualified them.
fn advice(reasons: &BTreeMap<&'static str, usize>) -> &'static str {
    let has = |needle: &str| reasons.keys().any(|k| k.contains(needle));
    if has("ledger") || has("trigger 4") {
        "fix the client or the ledger failure before choosing a margin"
    } else if has("trigger 3") && !has("trigger 1") {
        "raise the TTL: no margin tried leaves room for one rail call"
    } else if has("trigger 1") && !has("trigger 3") {
        "raise the margin further or shorten the heartbeat period"
    } else if has("trigger 1") {
        "raise the TTL: small margins miss the RTT budget and large ones leave no room for a rail call"
    } else {
        "rerun with more load or a longer duration"
    }
}

/// The recommended margin per TTL (see the module doc for the rule), sorted by TTL.
pub fn recommendations(rows: &[CellRow]) -> Vec<Recommendation> {
    let mut by_ttl: BTreeMap<u64, Vec<&CellRow>> = BTreeMap::new();
    for row in rows {
        by_ttl.entry(row.lease_ms).or_default().push(row);
    }
    by_ttl
        .into_iter()
        .map(|(lease_ms, cells)| recommend(lease_ms, &cells))
        .collect()
}

/// The recommendation for the cells of one TTL.
fn recommend(lease_ms: u64, cells: &[&CellRow]) -> Recommendation {
    let mut qualifying = Vec::new();
    let mut reasons: BTreeMap<&'static str, usize> = BTreeMap::new();
    for &row in cells {
        let results = evaluate_row(row);
        match disqualification(row, &results) {
            None => qualifying.push((row, results)),
            Some(why) => *reasons.entry(why).or_default() += 1,
        }
    }
    let Some(best) = qualifying
        .iter()
        .map(|(r, _)| r.throughput_per_s)
        .max_by(f64::total_cmp)
    else {
        let why: Vec<String> = reasons.iter().map(|(k, n)| format!("{n} × {k}")).collect();
        return Recommendation {
            lease_ms,
            margin: None,
            cell: None,
            throughput_per_s: None,
            qualifying: 0,
            cells: cells.len(),
            reason: format!(
                "no margin qualifies ({}); {}",
                why.join("; "),
                advice(&reasons)
            ),
        };
    };
    let tied = |r: &CellRow| r.throughput_per_s >= best * (1.0 - THROUGHPUT_TIE_FRACTION);
    let (chosen, results) = qualifying
        .iter()
        .filter(|(r, _)| tied(r))
        .max_by(|(a, _), (b, _)| a.margin.total_cmp(&b.margin))
        .expect("the best cell is tied with itself");
    // Trigger 1 and 3 results hold the numbers the verdicts were made on.
    let (rtt, d4) = (&results[0], &results[2]);
    let mut reason = format!(
        "highest throughput of {} qualifying cell(s) ({:.2}/s); p99 {} ms ≤ budget {} ms; \
         usable lease {} ms > hop {} ms; no fence-outs; ledger ok",
        qualifying.len(),
        chosen.throughput_per_s,
        fmt_value(rtt.observed),
        fmt_value(rtt.threshold),
        fmt_value(d4.observed),
        fmt_value(d4.threshold),
    );
    if chosen.throughput_per_s < best {
        let _ = write!(
            reason,
            "; within {:.0} % of the best ({best:.2}/s), so the larger margin wins the tie",
            THROUGHPUT_TIE_FRACTION * 100.0
        );
    }
    if !reasons.is_empty() {
        let why: Vec<String> = reasons.iter().map(|(k, n)| format!("{n} × {k}")).collect();
        let _ = write!(reason, "; excluded: {}", why.join(", "));
    }
    if results
        .iter()
        .any(|r| r.trigger == MARGIN_DOMINANT_LIMITER && r.fired)
    {
        let _ = write!(
            reason,
            "; trigger 2 fires here: the margin is the dominant throughput limiter \
             (ADR: consider the adaptive margin (V2), not a smaller fixed one)"
        );
    }
    Recommendation {
        lease_ms,
        margin: Some(chosen.margin),
        cell: Some(chosen.cell.clone()),
        throughput_per_s: Some(chosen.throughput_per_s),
        qualifying: qualifying.len(),
        cells: cells.len(),
        reason,
    }
}

impl std::fmt::Display for Recommendation {
    /// One line: `TTL 1s: margin 0.30 (cell …, 3/5 cells qualify): why`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (&self.margin, &self.cell) {
            (Some(m), Some(cell)) => write!(
                f,
                "TTL {}: recommended margin {m:.2} (cell {cell}, {}/{} cells qualify): {}",
                human_ms(self.lease_ms),
                self.qualifying,
                self.cells,
                self.reason
            ),
            _ => write!(
                f,
                "TTL {}: no recommended margin (0/{} cells qualify): {}",
                human_ms(self.lease_ms),
                self.cells,
                self.reason
            ),
        }
    }
}

/// `1500` → `1s 500ms`.
fn human_ms(ms: u64) -> String {
    humantime::format_duration(Duration::from_millis(ms)).to_string()
}

/// The recommendations as plain text, one [`Recommendation`] line per TTL.
pub fn format_recommendations(recs: &[Recommendation]) -> String {
    let mut out = String::from("Recommended client safety margin per TTL:\n");
    for r in recs {
        let _ = writeln!(out, "  {r}");
    }
    out
}

/// The recommendations as a Markdown table.
pub fn markdown_recommendations(recs: &[Recommendation]) -> String {
    let mut out = String::from(
        "| TTL | recommended margin | cell | throughput (payouts/s) | qualifying cells | why |\n\
         |---|---:|---|---:|---:|---|\n",
    );
    for r in recs {
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {}/{} | {} |",
            human_ms(r.lease_ms),
            r.margin
                .map_or_else(|| "**none**".to_owned(), |m| format!("**{m:.2}**")),
            r.cell
                .as_deref()
                .map_or_else(|| "—".to_owned(), |c| format!("`{c}`")),
            r.throughput_per_s
                .map_or_else(|| "—".to_owned(), |t| format!("{t:.2}")),
            r.qualifying,
            r.cells,
            r.reason.replace('|', "\\|"),
        );
    }
    out
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

/// Reads `manifest.json` if present: `Ok(None)` when absent, a note when unreadable.
fn read_manifest(dir: &Path) -> Result<Option<serde_json::Value>, String> {
    let path = dir.join(MANIFEST_JSON);
    if !path.is_file() {
        return Ok(None);
    }
    std::fs::read_to_string(&path)
        .map_err(|e| e.to_string())
        .and_then(|text| serde_json::from_str(&text).map_err(|e| e.to_string()))
        .map(Some)
        .map_err(|e| format!("{MANIFEST_JSON} is unreadable: {e}"))
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
/// `report.md`. Every `Err` is bad input or an I/O failure: the CLI exits 2.
pub fn write_report(dir: &Path) -> anyhow::Result<()> {
    if !dir.is_dir() {
        return Err(BadInput::NoDir(dir.to_owned()).into());
    }
    let rows = read_nonempty_results(dir)?;
    let manifest = read_manifest(dir);
    let triggers = evaluate(&rows);
    write_triggers(dir, &triggers)?;
    let plots = draw_plots(dir, &rows)?;
    let recs = recommendations(&rows);

    let mut md = String::new();
    let _ = writeln!(md, "# fencepost bench report\n");
    let _ = writeln!(
        md,
        "ADR-006 client safety margin sweep: {} cell(s), run {}, margins {}, TTLs {}, \
         {} worker(s), rail latency {}.\n",
        rows.len(),
        distinct(&rows, |r| format!("`{}`", r.run_id)),
        distinct(&rows, |r| format!("{:.2}", r.margin)),
        distinct(&rows, |r| human_ms(r.lease_ms)),
        distinct(&rows, |r| r.workers.to_string()),
        distinct(&rows, |r| format!("`{}`", r.rail_latency)),
    );
    let _ = writeln!(md, "| | |\n|---|---|");
    let _ = writeln!(
        md,
        "| report generated | {} |",
        humantime::format_rfc3339_seconds(SystemTime::now())
    );
    let _ = writeln!(
        md,
        "| seed(s) in the table | {} |",
        distinct(&rows, |r| r.seed.to_string())
    );
    match &manifest {
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
            let _ = writeln!(md, "| manifest | {} |", note.replace('|', "\\|"));
        }
    }
    if let Ok(Some(m)) = &manifest {
        let pretty = serde_json::to_string_pretty(m).unwrap_or_default();
        let _ = writeln!(
            md,
            "\n<details><summary>full manifest (configuration)</summary>\n\n```json\n{pretty}\n```\n</details>"
        );
    }

    let _ = writeln!(md, "\n## Results\n");
    let _ = writeln!(
        md,
        "Counts are read from the rail ledger and the services' counters, never inferred. \
         Lost work = abandoned (insufficient lease) + abandoned (lock lost) + acquire failed + \
         lock lost. Every column is described in `data/README.md`.\n"
    );
    let _ = writeln!(
        md,
        "| cell | margin | TTL | hb p50 (ms) | hb p99 (ms) | throughput (payouts/s) | paid | \
         abandoned, insufficient lease | lost work / attempts | lock_lost | fenced_out | \
         duplicates | ledger |\n\
         |---|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
    );
    for r in &rows {
        let _ = writeln!(
            md,
            "| `{}` | {:.2} | {} | {:.3} | {:.3} | {:.2} | {} | {} | {}/{} | {} | {} | {} | {} |",
            r.cell,
            r.margin,
            human_ms(r.lease_ms),
            r.hb_rtt_p50_us as f64 / 1000.0,
            r.hb_rtt_p99_us as f64 / 1000.0,
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

    let fired = triggers.iter().filter(|t| t.fired).count();
    let _ = writeln!(md, "\n## ADR-006 §6.5 revisit triggers\n");
    let _ = writeln!(
        md,
        "{fired} of {} checks fired (`bench triggers` exit code {}). The action column quotes \
         ADR-006 §6.5 for each check that fired.\n",
        triggers.len(),
        crate::triggers::exit_code(&triggers)
    );
    md.push_str(&markdown_table(&triggers));
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
        fmt_value(crate::triggers::LOST_WORK_MIN * 100.0)
    );

    let _ = writeln!(md, "\n## Plots\n");
    let captions = [
        "Heartbeat RTT CDF per cell (log x, from hgrm/*.hdr)",
        "Throughput vs margin, one line per TTL",
        "Abandonment vs margin: insufficient lease (solid) and all lost work (dashed), % of attempts",
        "Heartbeat RTT p99 vs the lease × margin / 3 budget (trigger 1; log y)",
    ];
    for (stem, caption) in PLOT_STEMS.iter().zip(captions) {
        let _ = writeln!(
            md,
            "### {caption}\n\n![{caption}]({stem}.svg)\n\nPNG: [{stem}.png]({stem}.png)\n"
        );
    }
    if !plots.skipped_cells.is_empty() {
        let _ = writeln!(md, "Cells missing from the RTT CDF:\n");
        for (cell, why) in &plots.skipped_cells {
            let _ = writeln!(md, "- `{cell}`: {why}");
        }
        md.push('\n');
    }

    let _ = writeln!(md, "## Summary: recommended margin per TTL\n");
    let _ = writeln!(
        md,
        "Rule: among a TTL's cells where triggers 1, 3 and 4 do not fire, the ledger check \
         passed, heartbeats were measured and payouts were made, take the highest throughput; \
         throughputs within {:.0} % of the best are a tie, and a tie goes to the larger margin.\n",
        THROUGHPUT_TIE_FRACTION * 100.0
    );
    md.push_str(&markdown_recommendations(&recs));

    let path = dir.join(REPORT_MD);
    std::fs::write(&path, md).with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}
