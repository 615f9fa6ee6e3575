//! The rules over a whole table, and questions about the answers: which
//! trigger fired on which cell, with what verdict.

use super::catalog::{TRIGGERS, TriggerResult, Verdict};
use super::rules::{
    autopilot_throttling, d4_unsatisfiable, fenced_out_with_client_check, margin_dominant_limiter,
    rtt_p99_vs_margin,
};
use crate::results::CellRow;

/// Evaluates every trigger on every row; results are grouped by trigger (ADR
/// order), then in row order.
pub fn evaluate(rows: &[CellRow]) -> Vec<TriggerResult> {
    let per_row: Vec<[TriggerResult; 5]> = rows.iter().map(|r| evaluate_row(r, rows)).collect();
    (0..TRIGGERS.len())
        .flat_map(|t| per_row.iter().map(move |r| r[t].clone()))
        .collect()
}

/// Evaluates the five triggers on `row`, in [`TRIGGERS`] order; `table` is
/// the results table it belongs to (trigger 5 looks for its pair there).
/// On a partial cell (`stopped_by` = `interrupted`) an `ok` becomes
/// `insufficient_data`: its window was cut short, so an absence proves
/// nothing (a `fired` stands: what fired was measured).
pub fn evaluate_row(row: &CellRow, table: &[CellRow]) -> [TriggerResult; 5] {
    let mut results = [
        rtt_p99_vs_margin(row),
        margin_dominant_limiter(row),
        d4_unsatisfiable(row),
        fenced_out_with_client_check(row),
        autopilot_throttling(row, table),
    ];
    if row.stopped_by == INTERRUPTED {
        for r in results.iter_mut().filter(|r| r.verdict == Verdict::Ok) {
            r.verdict = Verdict::InsufficientData;
            r.detail.push_str(
                "; the cell is partial (an interrupt closed its window early): not enough to say ok",
            );
        }
    }
    results
}

/// The `stopped_by` of a partial cell, whose window an interrupt closed early.
pub const INTERRUPTED: &str = "interrupted";

/// Whether trigger `id` fired on `cell`.
pub fn fired(results: &[TriggerResult], id: &str, cell: &str) -> bool {
    results
        .iter()
        .any(|r| r.fired && r.trigger == id && r.cell == cell)
}

/// The verdict of trigger `id` on `cell`, if evaluated.
pub fn verdict_of(results: &[TriggerResult], id: &str, cell: &str) -> Option<Verdict> {
    results
        .iter()
        .find(|r| r.trigger == id && r.cell == cell)
        .map(|r| r.verdict)
}
