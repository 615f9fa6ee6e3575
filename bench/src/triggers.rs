//! ADR-006 §6.5 "Revisit when" as data: each trigger the benchmark can measure,
//! its rule over a [`CellRow`], and the ADR's action quoted verbatim.
//!
//! `bench triggers DIR` ([`run_triggers_command`]) reads the results table,
//! evaluates every trigger on every cell, writes `triggers.json` and prints the
//! table; the exit code is 0 when none fired and 3 when any fired. Bad input
//! (missing directory, no or unreadable results table) is an `Err`, which the
//! CLI maps to exit code 2 (see [`crate::results::BadInput`]).
//!
//! Two §6.5 rows are not measurable by a benchmark run and are not evaluated:
//! "lock.session.ttl or lock.default.ttl changes" is evaluated through its
//! action (recheck `lease × (1 − margin) > worst-case rail hop`, trigger
//! [`D4_UNSATISFIABLE`]) and "a move off Autopilot" is a deployment event.

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Context as _;
use serde::{Deserialize, Serialize};

use crate::results::{CellRow, read_nonempty_results};

/// File name of the trigger verdicts in a results directory.
pub const TRIGGERS_JSON: &str = "triggers.json";

/// Exit code of `bench triggers` when no trigger fired.
pub const EXIT_NONE_FIRED: i32 = 0;
/// Exit code of `bench triggers` on bad input (any `Err` of [`run_triggers_command`]).
pub const EXIT_BAD_INPUT: i32 = 2;
/// Exit code of `bench triggers` when at least one trigger fired.
pub const EXIT_FIRED: i32 = 3;

/// Trigger 1: p99 heartbeat RTT exceeds one third of lease × margin.
pub const RTT_P99_VS_MARGIN: &str = "rtt_p99_vs_margin";
/// Trigger 2: the margin is the dominant throughput limiter.
pub const MARGIN_DOMINANT_LIMITER: &str = "margin_dominant_limiter";
/// Trigger 3: min(lease, session TTL) × (1 − margin) ≤ worst-case rail hop, so D4 can never be met.
pub const D4_UNSATISFIABLE: &str = "d4_unsatisfiable";
/// Trigger 4: a fence refused a worker that ran the client check.
pub const FENCED_OUT_WITH_CLIENT_CHECK: &str = "fenced_out_with_client_check";

/// Trigger 2: the margin's share of lost work at or above which it is "dominant".
pub const MARGIN_SHARE_MIN: f64 = 0.50;
/// Trigger 2: lost work, as a fraction of attempts, below which nothing limits
/// throughput materially, so the margin cannot be the dominant limiter.
pub const LOST_WORK_MIN: f64 = 0.05;

/// One §6.5 trigger: its id, the ADR's wording, the bench's rule and the ADR's action.
#[derive(Clone, Copy, Debug)]
pub struct Trigger {
    /// Stable id used in `triggers.json`.
    pub id: &'static str,
    /// The ADR-006 §6.5 "Trigger" cell this check implements.
    pub adr_trigger: &'static str,
    /// The rule the bench evaluates, stated over results columns.
    pub rule: &'static str,
    /// Unit of `observed` and `threshold`.
    pub unit: &'static str,
    /// The ADR-006 §6.5 "Action" cell, verbatim.
    pub action: &'static str,
}

/// The four measurable §6.5 triggers, in ADR order.
pub const TRIGGERS: [Trigger; 4] = [
    Trigger {
        id: RTT_P99_VS_MARGIN,
        adr_trigger: "Measured p99 heartbeat RTT exceeds one third of lease × margin",
        rule: "fired when hb_rtt_p99 > lease_ms × margin_effective / 3 \
               (observed = hb_rtt_p99 in ms, threshold = lease × margin / 3 in ms; \
               not evaluated without heartbeat samples)",
        unit: "ms",
        action: "Raise the margin or shorten the heartbeat period; the current margin no \
                 longer covers observed jitter.",
    },
    Trigger {
        id: MARGIN_DOMINANT_LIMITER,
        adr_trigger: "The M7 benchmark shows the margin is the dominant throughput limiter",
        rule: "lost work = abandoned_insufficient_lease + abandoned_lost + acquire_failed + \
               lock_lost (attempts that did not pay, by cause; only the first is caused by \
               the margin); fired when abandoned_insufficient_lease ≥ 50 % of lost work AND \
               lost work ≥ 5 % of attempts (observed = the margin's share of lost work in %, \
               threshold = 50 %)",
        unit: "% of lost work",
        action: "Consider the adaptive margin (V2), not a smaller fixed one.",
    },
    Trigger {
        id: D4_UNSATISFIABLE,
        adr_trigger: "lock.session.ttl or lock.default.ttl changes",
        rule: "fired when min(lease_ms, session_ttl_ms) × (1 − margin_effective) ≤ \
               worst_case_hop_ms (rail read timeout + 2 s): a handle is usable only while \
               its own and its session's deadlines are ahead (C3), so even right after a \
               grant or heartbeat no grant leaves enough lease for one rail call and D4 \
               refuses every payout (observed = that usable window in ms, threshold = \
               worst-case hop in ms). The detail also gives the window just before the \
               next heartbeat (two thirds of it, the period being a third): when that is \
               ≤ the hop, D4 refuses part of every heartbeat period",
        unit: "ms",
        action: "Recheck lease × (1 − margin) > worst-case rail hop; a TTL cut can make D4 \
                 unsatisfiable.",
    },
    Trigger {
        id: FENCED_OUT_WITH_CLIENT_CHECK,
        adr_trigger: "Any lock.fenced.out > 0 traced to a client that believed it held the lease",
        rule: "fired when fenced_out > 0 and client_check is on (with the check off the \
               fences are being demonstrated, UC-03, and a fence-out is expected)",
        unit: "fence-outs",
        action: "This ADR is being violated in code; fix the client, do not widen the fence.",
    },
];

/// One trigger evaluated on one cell; an element of `triggers.json`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct TriggerResult {
    /// Trigger id, e.g. `rtt_p99_vs_margin`.
    pub trigger: String,
    /// Cell id from the results table.
    pub cell: String,
    /// Whether the trigger fired on this cell.
    pub fired: bool,
    /// The measured value compared with `threshold`, in `unit`.
    pub observed: f64,
    /// The threshold, in `unit`.
    pub threshold: f64,
    /// Unit of `observed` and `threshold`.
    pub unit: String,
    /// ADR-006 §6.5's action for this trigger, verbatim.
    pub action: String,
    /// The rule evaluated.
    pub rule: String,
    /// The numbers behind the verdict, in words.
    pub detail: String,
}

/// Looks a trigger up by id.
pub fn trigger(id: &str) -> Option<&'static Trigger> {
    TRIGGERS.iter().find(|t| t.id == id)
}

/// Evaluates every trigger on every row; results are grouped by trigger (ADR
/// order), then in row order.
pub fn evaluate(rows: &[CellRow]) -> Vec<TriggerResult> {
    let per_row: Vec<[TriggerResult; 4]> = rows.iter().map(evaluate_row).collect();
    (0..TRIGGERS.len())
        .flat_map(|t| per_row.iter().map(move |r| r[t].clone()))
        .collect()
}

/// Evaluates the four triggers on one row, in [`TRIGGERS`] order.
pub fn evaluate_row(row: &CellRow) -> [TriggerResult; 4] {
    [
        rtt_p99_vs_margin(row),
        margin_dominant_limiter(row),
        d4_unsatisfiable(row),
        fenced_out_with_client_check(row),
    ]
}

/// Builds a result for trigger `t` on `row`.
fn result(
    t: &Trigger,
    row: &CellRow,
    fired: bool,
    observed: f64,
    threshold: f64,
    detail: String,
) -> TriggerResult {
    TriggerResult {
        trigger: t.id.to_owned(),
        cell: row.cell.clone(),
        fired,
        observed,
        threshold,
        unit: t.unit.to_owned(),
        action: t.action.to_owned(),
        rule: t.rule.to_owned(),
        detail,
    }
}

/// Rounds milliseconds to whole microseconds, the resolution of every measured
/// time here, so that e.g. `1000 × (1 − 0.7)` compares equal to `300`.
fn to_us(ms: f64) -> f64 {
    (ms * 1000.0).round() / 1000.0
}

/// Trigger 1, in ms.
fn rtt_p99_vs_margin(row: &CellRow) -> TriggerResult {
    let p99_ms = row.hb_rtt_p99_us as f64 / 1000.0;
    let budget_ms = to_us(row.lease_ms as f64 * row.margin_effective / 3.0);
    let (fired, detail) = if row.hb_count == 0 {
        (false, "no heartbeat samples: not evaluated".to_owned())
    } else {
        let fired = p99_ms > budget_ms;
        let cmp = if fired { ">" } else { "≤" };
        (
            fired,
            format!(
                "p99 {p99_ms:.3} ms {cmp} {} ms × {:.2} / 3 = {budget_ms:.3} ms ({} samples)",
                row.lease_ms, row.margin_effective, row.hb_count
            ),
        )
    };
    result(&TRIGGERS[0], row, fired, p99_ms, budget_ms, detail)
}

/// Lost work of a cell: attempts that did not pay, summed over their causes.
pub fn lost_work(row: &CellRow) -> u64 {
    row.abandoned_insufficient_lease + row.abandoned_lost + row.acquire_failed + row.lock_lost
}

/// Trigger 2, in % of lost work.
fn margin_dominant_limiter(row: &CellRow) -> TriggerResult {
    let lost = lost_work(row);
    let share = if lost == 0 {
        0.0
    } else {
        row.abandoned_insufficient_lease as f64 / lost as f64
    };
    let lost_frac = if row.attempts == 0 {
        0.0
    } else {
        lost as f64 / row.attempts as f64
    };
    let dominant = lost > 0 && share >= MARGIN_SHARE_MIN;
    let material = row.attempts > 0 && lost_frac >= LOST_WORK_MIN;
    let detail = format!(
        "insufficient-lease {} of lost {lost} ({:.1} % {} 50 %); lost {lost} of {} attempts \
         ({:.1} % {} 5 %)",
        row.abandoned_insufficient_lease,
        share * 100.0,
        if dominant { "≥" } else { "<" },
        row.attempts,
        lost_frac * 100.0,
        if material { "≥" } else { "<" },
    );
    result(
        &TRIGGERS[1],
        row,
        dominant && material,
        share * 100.0,
        MARGIN_SHARE_MIN * 100.0,
        detail,
    )
}

/// Trigger 3, in ms: the usable window is bounded by the shorter of the lease
/// and the session TTL, since both deadlines must be ahead.
fn d4_unsatisfiable(row: &CellRow) -> TriggerResult {
    let ttl_ms = row.lease_ms.min(row.session_ttl_ms);
    let usable_ms = to_us(ttl_ms as f64 * (1.0 - row.margin_effective));
    let before_heartbeat_ms = to_us(usable_ms * 2.0 / 3.0);
    let hop_ms = row.worst_case_hop_ms as f64;
    let fired = usable_ms <= hop_ms;
    let binding = if row.session_ttl_ms < row.lease_ms {
        "session TTL"
    } else {
        "lease"
    };
    let mut detail = format!(
        "min(lease {} ms, session {} ms) × (1 − {:.2}) = {usable_ms:.1} ms {} worst-case hop {hop_ms:.0} ms (the {binding} binds)",
        row.lease_ms,
        row.session_ttl_ms,
        row.margin_effective,
        if fired { "≤" } else { ">" }
    );
    if !fired && before_heartbeat_ms <= hop_ms {
        detail.push_str(&format!(
            "; just before a heartbeat only {before_heartbeat_ms:.1} ms are left, so D4 refuses payouts in part of every heartbeat period"
        ));
    }
    result(&TRIGGERS[2], row, fired, usable_ms, hop_ms, detail)
}

/// Trigger 4, a count.
fn fenced_out_with_client_check(row: &CellRow) -> TriggerResult {
    let fired = row.fenced_out > 0 && row.client_check;
    let detail = match (row.fenced_out, row.client_check) {
        (0, _) => "no fence-outs".to_owned(),
        (n, true) => format!("{n} fence-outs with the client check on"),
        (n, false) => {
            format!("{n} fence-outs with the client check off (UC-03): the fences held, expected")
        }
    };
    result(&TRIGGERS[3], row, fired, row.fenced_out as f64, 0.0, detail)
}

/// Whether trigger `id` fired on `cell`.
pub fn fired(results: &[TriggerResult], id: &str, cell: &str) -> bool {
    results
        .iter()
        .any(|r| r.fired && r.trigger == id && r.cell == cell)
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
pub fn write_triggers(dir: &Path, results: &[TriggerResult]) -> anyhow::Result<()> {
    let path = dir.join(TRIGGERS_JSON);
    let json = serde_json::to_string_pretty(results)?;
    std::fs::write(&path, json + "\n").with_context(|| format!("writing {}", path.display()))
}

/// Formats a number for the tables: integers plainly, the rest with 3 decimals.
pub fn fmt_value(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else {
        format!("{v:.3}")
    }
}

/// The verdict word of a result.
fn verdict(r: &TriggerResult) -> &'static str {
    if r.fired { "FIRED" } else { "ok" }
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
                verdict(r).to_owned(),
                r.action.clone(),
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
    let fired: Vec<&TriggerResult> = results.iter().filter(|r| r.fired).collect();
    let _ = writeln!(
        out,
        "\n{} of {} checks fired{}",
        fired.len(),
        results.len(),
        if fired.is_empty() {
            String::new()
        } else {
            let names: Vec<String> = fired
                .iter()
                .map(|r| format!("{}@{}", r.trigger, r.cell))
                .collect();
            format!(": {}", names.join(", "))
        }
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
        let verdict = if r.fired { "**FIRED**" } else { "ok" };
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

/// `bench triggers DIR`: reads the results, evaluates, writes `triggers.json`,
/// prints the table to stdout and returns the exit code (0 none fired, 3 any
/// fired). Every `Err` is bad input: the CLI exits 2.
pub fn run_triggers_command(dir: &Path) -> anyhow::Result<i32> {
    let rows = read_nonempty_results(dir)?;
    let results = evaluate(&rows);
    write_triggers(dir, &results)?;
    print!("{}", format_table(&results));
    Ok(exit_code(&results))
}
