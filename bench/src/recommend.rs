//! The per-TTL margin recommendation that `bench sweep` prints at its end and
//! `report.md` ends with.
//!
//! Rule (per TTL, i.e. per `lease_ms`, and per backend when a run has
//! cells on both fencepost and etcd): a cell qualifies when
//! triggers 1 (`rtt_p99_vs_margin`), 3 (`d4_unsatisfiable`) and 4
//! (`fenced_out_with_client_check`) do not fire on it, its ledger check passed
//! (`ledger_ok`, no `paid_twice`, no `stale_paid`), it has corrected heartbeat
//! samples and it paid at least one payout. A recommendation whose cell's
//! trigger 1 is `insufficient_data` (fewer than 1,000 corrected samples) is
//! marked *provisional*: its p99 is not known well enough. Among the
//! qualifying cells the highest `throughput_per_s` wins; cells within
//! [`THROUGHPUT_TIE_FRACTION`] of the best count as a tie, and the tie goes to the
//! larger margin (ADR-006: "We would rather pay throughput than debug a duplicate
//! payment"). Trigger 2 does not disqualify a cell: it says the margin costs
//! throughput, which the throughput ranking already accounts for; when it fires on
//! the chosen cell the reason says so.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::results::CellRow;
use crate::triggers::{
    D4_UNSATISFIABLE, FENCED_OUT_WITH_CLIENT_CHECK, MARGIN_DOMINANT_LIMITER, MIN_SAMPLES_P99,
    RTT_P99_VS_MARGIN, TriggerResult, Verdict, evaluate_row, fmt_value,
};

/// Throughputs within this fraction of the best count as tied (run-to-run noise).
pub const THROUGHPUT_TIE_FRACTION: f64 = 0.01;

/// The recommended margin for one TTL, or why there is none.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Recommendation {
    /// The TTL (lease) the recommendation is for, in ms.
    pub lease_ms: u64,
    /// The backend of its cells (`fencepost` or `etcd`).
    #[serde(default = "fencepost")]
    pub backend: String,
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
    /// The chosen cell's trigger 1 had too few samples to say ok (see the module doc).
    #[serde(default)]
    pub provisional: bool,
}

/// Why a cell does not qualify for a recommendation, `None` if it does.
fn disqualification(row: &CellRow, results: &[TriggerResult; 5]) -> Option<&'static str> {
    let fired = |id: &str| results.iter().any(|r| r.trigger == id && r.fired);
    if !row.ledger_ok || row.paid_twice > 0 || row.stale_paid > 0 {
        Some("ledger check failed")
    } else if fired(FENCED_OUT_WITH_CLIENT_CHECK) {
        Some("fenced out although the client believed it held the lease (trigger 4)")
    } else if fired(D4_UNSATISFIABLE) {
        Some("the window just before a heartbeat ≤ worst-case rail hop (trigger 3)")
    } else if row.hb_corrected_count == 0 {
        Some("no heartbeat samples, trigger 1 unchecked")
    } else if fired(RTT_P99_VS_MARGIN) {
        Some("corrected p99 heartbeat RTT > min(lease, session TTL) × margin / 3 (trigger 1)")
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

/// The default backend of a recommendation read from before issue 15.
fn fencepost() -> String {
    "fencepost".into()
}

/// The recommended margin per TTL (see the module doc for the rule), sorted
/// by TTL, fencepost before etcd.
pub fn recommendations(rows: &[CellRow]) -> Vec<Recommendation> {
    let mut by_ttl: BTreeMap<(u64, bool), Vec<&CellRow>> = BTreeMap::new();
    for row in rows {
        let etcd = row.backend == "etcd";
        by_ttl.entry((row.lease_ms, etcd)).or_default().push(row);
    }
    by_ttl
        .into_iter()
        .map(|((lease_ms, _), cells)| recommend(lease_ms, &cells, rows))
        .collect()
}

/// `TTL 1s`, or `TTL 1s on etcd`.
fn ttl_label(r: &Recommendation) -> String {
    match r.backend.as_str() {
        "fencepost" => format!("TTL {}", human_ms(r.lease_ms)),
        other => format!("TTL {} on {other}", human_ms(r.lease_ms)),
    }
}

/// The recommendation for the cells of one TTL on one backend (`table`:
/// every row, for trigger 5).
fn recommend(lease_ms: u64, cells: &[&CellRow], table: &[CellRow]) -> Recommendation {
    let backend = cells.first().map_or_else(fencepost, |r| r.backend.clone());
    let mut qualifying = Vec::new();
    let mut reasons: BTreeMap<&'static str, usize> = BTreeMap::new();
    for &row in cells {
        let results = evaluate_row(row, table);
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
            backend,
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
            provisional: false,
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
    let provisional = results[0].verdict == Verdict::InsufficientData;
    let mut reason = format!(
        "highest throughput of {} qualifying cell(s) ({:.2}/s); corrected p99 {} ms ≤ budget \
         {} ms; window before a heartbeat {} ms > hop {} ms; no believed fence-outs; ledger ok",
        qualifying.len(),
        chosen.throughput_per_s,
        fmt_value(rtt.observed),
        fmt_value(rtt.threshold),
        fmt_value(d4.observed),
        fmt_value(d4.threshold),
    );
    if provisional {
        let _ = write!(
            reason,
            "; provisional: trigger 1 has {} corrected samples, fewer than the {MIN_SAMPLES_P99} \
             a p99 needs (rerun with a longer --duration or more --workers)",
            chosen.hb_corrected_count
        );
    }
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
        backend,
        margin: Some(chosen.margin),
        cell: Some(chosen.cell.clone()),
        throughput_per_s: Some(chosen.throughput_per_s),
        qualifying: qualifying.len(),
        cells: cells.len(),
        reason,
        provisional,
    }
}

impl std::fmt::Display for Recommendation {
    /// One line: `TTL 1s: margin 0.30 (cell …, 3/5 cells qualify): why`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (&self.margin, &self.cell) {
            (Some(m), Some(cell)) => write!(
                f,
                "{}: recommended margin {m:.2}{} (cell {cell}, {}/{} cells qualify): {}",
                ttl_label(self),
                if self.provisional {
                    " (provisional)"
                } else {
                    ""
                },
                self.qualifying,
                self.cells,
                self.reason
            ),
            _ => write!(
                f,
                "{}: no recommended margin (0/{} cells qualify): {}",
                ttl_label(self),
                self.cells,
                self.reason
            ),
        }
    }
}

/// `1500` → `1s 500ms`.
pub(crate) fn human_ms(ms: u64) -> String {
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
            ttl_label(r).trim_start_matches("TTL "),
            r.margin.map_or_else(
                || "**none**".to_owned(),
                |m| if r.provisional {
                    format!("**{m:.2}** (provisional)")
                } else {
                    format!("**{m:.2}**")
                }
            ),
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
