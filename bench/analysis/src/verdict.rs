//! The verdict in plain words: what `bench run|sweep` prints last and
//! `report.md` opens with. A few short lines per run: the recommended margin
//! per TTL (and heartbeat divisor, when the run swept it) or why there is
//! none, how strong the evidence is (a smoke test, or enough samples and
//! repeats for a decision, with the command that gets one for the user's own
//! lease), and advice that follows from the rule that failed. The full
//! reasoning stays in `report.md` and `summary.csv`.
//!
//! The advice follows the time base: leases, session TTLs and the rail hop
//! scale by `lease / 30 s`, so a D4 sawtooth (the window before a heartbeat ≤
//! the rail hop) is never fixed by a longer TTL, only by a smaller margin or
//! a shorter heartbeat period; and trigger 1 on a scaled lease judges a
//! network that is `30 s / lease` times harsher, relative to the lease, than
//! production's, so the production projection is the figure to read.
//! Pure: a function of the rows, the recommendations and the projection.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use crate::projection::{Production, ProjectionRow};
use crate::recommend::{Recommendation, human_ms};
use crate::results::CellRow;
use crate::summary::MIN_SAMPLES_P999;

/// The widest line the verdict prints (the terminal's 100 columns).
pub const VERDICT_WIDTH: usize = 100;
/// Repeats a decision needs: the fewest that give a 95 % interval worth reading.
pub const DECISION_REPEATS: u32 = 3;
/// Idle sessions the suggested decision run adds per cell (about 10,000 more
/// corrected samples per cell at a 1 s lease).
pub const DECISION_SESSIONS: u32 = 800;

/// Everything the verdict reads.
pub struct VerdictInput<'a> {
    /// The results table.
    pub rows: &'a [CellRow],
    /// The recommendation per TTL ([`crate::recommend`]).
    pub recommendations: &'a [Recommendation],
    /// The production projection (`projection.csv`); may be empty.
    pub projection: &'a [ProjectionRow],
    /// The production configuration the projection used.
    pub production: &'a Production,
}

/// `0.30` → `0.3`, for flags.
fn flag_num(x: f64) -> String {
    let s = format!("{x:.2}");
    s.trim_end_matches('0').trim_end_matches('.').to_owned()
}

/// `0.10, 0.30`.
fn margins(ms: &[f64]) -> String {
    ms.iter()
        .map(|m| format!("{m:.2}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Appends `text` word-wrapped to [`VERDICT_WIDTH`], the first line after
/// `first`, the others after `indent`.
fn wrap(out: &mut Vec<String>, first: &str, indent: &str, text: &str) {
    let mut line = first.to_owned();
    let mut empty = true;
    for word in text.split_whitespace() {
        if !empty && line.chars().count() + 1 + word.chars().count() > VERDICT_WIDTH {
            out.push(std::mem::replace(&mut line, indent.to_owned()));
            empty = true;
        }
        if !empty {
            line.push(' ');
        }
        line.push_str(word);
        empty = false;
    }
    out.push(line);
}

/// A short name for a rule of [`crate::recommend`] that excluded margins.
fn rule_name(why: &str) -> &'static str {
    if why.contains("ledger") {
        "ledger check failed"
    } else if why.contains("trigger 4") {
        "believed fence-out (trigger 4)"
    } else if why.contains("trigger 3") {
        "D4 sawtooth, the window before a heartbeat ≤ the rail hop (trigger 3)"
    } else if why.contains("margin needed") {
        "below the margin needed (trigger 1)"
    } else if why.contains("trigger 1") {
        "p99 RTT over its budget (trigger 1)"
    } else if why.contains("heartbeat samples") {
        "no heartbeat samples"
    } else {
        "no payouts"
    }
}

/// The advice for one TTL, from the rules that excluded its margins.
fn advice(rec: &Recommendation, prod: &Production) -> Vec<String> {
    let has = |needle: &str| rec.excluded.iter().any(|(k, _)| k.contains(needle));
    let mut out = Vec::new();
    if rec.margin.is_some() {
        return out;
    }
    if has("ledger") {
        out.push("fix the ledger failure before choosing a margin.".to_owned());
        return out;
    }
    if has("trigger 4") {
        out.push(
            "a believed fence-out is a safety failure (the client thought it held the lease): \
             find its cause (report.md, fences) before trusting any margin."
                .to_owned(),
        );
    }
    if has("trigger 3") {
        out.push(
            "a smaller margin or a larger heartbeat divisor (--heartbeat-divisor, a shorter \
             heartbeat period) widens the window before a heartbeat. A longer TTL does not: \
             under time scaling the rail hop grows with it."
                .to_owned(),
        );
    }
    if (has("trigger 1") || has("margin needed")) && rec.lease_ms < prod.lease_ms {
        out.push(format!(
            "trigger 1 at a {} lease judges a loopback network {}× harsher, relative to the \
             lease, than at {}: read the production line below before raising the margin.",
            human_ms(rec.lease_ms),
            (prod.lease_ms as f64 / rec.lease_ms.max(1) as f64).round(),
            human_ms(prod.lease_ms),
        ));
    } else if has("trigger 1") || has("margin needed") {
        out.push("a larger margin, or find what makes the heartbeat RTT's tail.".to_owned());
    }
    if out.is_empty() {
        out.push("rerun with more load or a longer duration.".to_owned());
    }
    out
}

/// The heartbeat divisors of `rows` at `lease_ms` and `margin`.
fn divisors(rows: &[CellRow], lease_ms: u64, margin: Option<f64>) -> BTreeSet<u32> {
    rows.iter()
        .filter(|r| r.lease_ms == lease_ms)
        .filter(|r| margin.is_none_or(|m| (r.margin - m).abs() < 1e-9))
        .map(|r| r.heartbeat_divisor)
        .collect()
}

/// Every heartbeat divisor of the run.
fn all_divisors(rows: &[CellRow]) -> BTreeSet<u32> {
    rows.iter().map(|r| r.heartbeat_divisor).collect()
}

/// The verdict's lines (module doc), each at most [`VERDICT_WIDTH`] wide
/// (a flag's value longer than that excepted).
pub fn verdict_lines(v: &VerdictInput<'_>) -> Vec<String> {
    let mut out = vec!["Verdict".to_owned()];
    let swept_divisor = all_divisors(v.rows).len() > 1;
    for rec in v.recommendations {
        let ttl = match rec.backend.as_str() {
            "fencepost" => format!("TTL {}", human_ms(rec.lease_ms)),
            b => format!("TTL {} on {b}", human_ms(rec.lease_ms)),
        };
        let head = match rec.margin {
            Some(m) => {
                let div = match divisors(v.rows, rec.lease_ms, Some(m)) {
                    d if swept_divisor && d.len() == 1 => {
                        format!(", heartbeat divisor {}", d.first().copied().unwrap_or(3))
                    }
                    _ => String::new(),
                };
                let how = if rec.resolved {
                    "the highest throughput, resolved".to_owned()
                } else {
                    format!(
                        "throughput not resolved at {} repeat(s), so the larger margin",
                        rec.n_repeats
                    )
                };
                format!(
                    "{ttl}: margin {m:.2}{div} ({}/{} margins pass; {how}).",
                    rec.qualifying, rec.cells
                )
            }
            None if rec.cells == 0 => {
                wrap(
                    &mut out,
                    "  ",
                    "    ",
                    &format!(
                        "{ttl}: no fixed margin in this run, nothing to recommend; the adaptive \
                         policy's throughput and the margin it used are in report.md."
                    ),
                );
                continue;
            }
            None => format!("{ttl}: no margin passes (0/{} tried).", rec.cells),
        };
        wrap(&mut out, "  ", "    ", &head);
        for (why, ms) in &rec.excluded {
            wrap(
                &mut out,
                "    failed: ",
                "      ",
                &format!("{} at {}", rule_name(why), margins(ms)),
            );
        }
        for a in advice(rec, v.production) {
            wrap(&mut out, "    advice: ", "      ", &a);
        }
    }
    out.extend(evidence(v));
    let partial: Vec<&str> = v
        .rows
        .iter()
        .filter(|r| r.stopped_by == crate::triggers::INTERRUPTED)
        .map(|r| r.cell.as_str())
        .collect();
    if !partial.is_empty() {
        wrap(
            &mut out,
            "Partial ",
            "  ",
            &format!(
                "({} of {} cells, interrupted before the window's end): {}. Their figures \
                 cover the shorter window measured and their triggers cannot say ok; a \
                 sweep's --resume measures them again.",
                partial.len(),
                v.rows.len(),
                partial.join(", ")
            ),
        );
    }
    if let Some(p) = v
        .projection
        .iter()
        .find(|p| p.production_margin && p.backend == "fencepost")
        .or_else(|| v.projection.iter().find(|p| p.production_margin))
    {
        wrap(
            &mut out,
            "Production ",
            "  ",
            &format!(
                "({} lease, margin {:.2}, the measured RTT unscaled): p99 {:.1} ms against a \
                 {:.0} ms budget, trigger 1 {}; D4 window {:.0} ms vs hop {} ms, trigger 3 {}.",
                human_ms(p.lease_ms),
                p.margin,
                p.rtt_corrected_p99_us as f64 / 1e3,
                p.trigger1_budget_ms,
                p.trigger1_verdict,
                p.trigger3_window_ms,
                p.worst_case_hop_ms,
                p.trigger3_verdict,
            ),
        );
    }
    out.push("The reasoning: report.md (first section) and summary.csv.".to_owned());
    out
}

/// How strong the evidence is, and the command for a decision when it is a smoke test.
fn evidence(v: &VerdictInput<'_>) -> Vec<String> {
    let mut out = Vec::new();
    let per_cell: Vec<u64> = v.rows.iter().map(|r| r.hb_corrected_count).collect();
    let (lo, hi) = (
        per_cell.iter().copied().min().unwrap_or(0),
        per_cell.iter().copied().max().unwrap_or(0),
    );
    let leases: BTreeSet<u64> = v.rows.iter().map(|r| r.lease_ms).collect();
    let pooled_min = leases
        .iter()
        .map(|l| {
            v.rows
                .iter()
                .filter(|r| r.lease_ms == *l)
                .map(|r| r.hb_corrected_count)
                .sum::<u64>()
        })
        .min()
        .unwrap_or(0);
    let repeats = v
        .recommendations
        .iter()
        .map(|r| r.n_repeats)
        .min()
        .unwrap_or(0);
    let cells = if lo == hi {
        format!("{lo}")
    } else {
        format!("{lo}–{hi}")
    };
    if pooled_min >= MIN_SAMPLES_P999 && repeats >= DECISION_REPEATS {
        wrap(
            &mut out,
            "Evidence: ",
            "  ",
            &format!(
                "enough for a decision: {cells} heartbeat samples per cell, at least \
                 {pooled_min} per TTL, {repeats} repeats."
            ),
        );
        return out;
    }
    wrap(
        &mut out,
        "Evidence: ",
        "  ",
        &format!(
            "smoke test: {cells} heartbeat samples per cell, {repeats} repeat(s); a decision \
             needs {MIN_SAMPLES_P999} per TTL and {DECISION_REPEATS} repeats. For one on your \
             network, with your production lease in --projection-lease:"
        ),
    );
    let ttls: Vec<String> = leases.iter().map(|l| human_ms(*l)).collect();
    let mut ms: Vec<f64> = v.rows.iter().map(|r| r.margin).collect();
    ms.sort_by(f64::total_cmp);
    ms.dedup_by(|a, b| (*a - *b).abs() < 1e-9);
    let ms: Vec<String> = ms.into_iter().map(flag_num).collect();
    let divs = all_divisors(v.rows);
    let policies: BTreeSet<&str> = v.rows.iter().map(|r| r.margin_policy.as_str()).collect();
    let policy_flag = if policies.iter().any(|p| *p != "fixed") {
        let p: Vec<&str> = policies.into_iter().collect();
        format!(" --margin-policy {}", p.join(","))
    } else {
        String::new()
    };
    let div_flag = if divs.len() > 1 {
        let d: Vec<String> = divs.iter().map(u32::to_string).collect();
        format!(" --heartbeat-divisor {}", d.join(","))
    } else {
        String::new()
    };
    let command = format!(
        "bench sweep --ttl {} --margin {}{policy_flag}{div_flag} --repeat {DECISION_REPEATS} \
         --sessions {DECISION_SESSIONS} --projection-lease {}",
        ttls.join(","),
        ms.join(","),
        human_ms(v.production.lease_ms),
    );
    // Broken with shell continuations, so it stays one command to paste.
    let mut line = "  ".to_owned();
    for (k, word) in command.split(' ').enumerate() {
        let flag = word.starts_with("--");
        if k > 0 && flag && line.chars().count() + 1 + word.len() + 12 > VERDICT_WIDTH {
            out.push(format!("{line} \\"));
            line = "    ".to_owned();
        } else if k > 0 {
            line.push(' ');
        }
        line.push_str(word);
    }
    out.push(line);
    out.push(
        "  or `bench adr` for the whole ADR-006 evidence pack (about 35 min of measurement)."
            .to_owned(),
    );
    out
}

/// The verdict as terminal text: its lines joined.
pub fn format_verdict(v: &VerdictInput<'_>) -> String {
    let mut s = String::new();
    for l in verdict_lines(v) {
        let _ = writeln!(s, "{l}");
    }
    s
}

#[cfg(test)]
mod tests;
