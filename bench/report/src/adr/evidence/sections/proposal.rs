//! §11, the derivation: the rules with their one definition each, the
//! conditions (scaled ones reported, production ones binding) with the
//! margin each needs, every (margin, divisor) against every binding rule,
//! and how the proposal was picked — all from
//! [`crate::adr::revision::derive`].

use std::fmt::Write as _;

use crate::adr::evidence::derived::Derived;
use crate::adr::evidence::format::ms;
use crate::adr::evidence::model::Evidence;
use crate::adr::evidence::sections::header::tag;
use crate::adr::revision::{self, ADR_DIVISOR, ADR_MARGIN, Check, DIVISORS, How, Outcome, Rule};

/// A check in a table cell: its outcome, bold unless it passes, and the ratio.
fn cell(c: Option<&Check>) -> String {
    match c {
        None => "—".into(),
        Some(c) if c.outcome == Outcome::Pass => format!("pass ({:.3}×)", c.ratio),
        Some(c) => format!("**{}** ({:.3}×)", c.outcome.word(), c.ratio),
    }
}

/// §11: the derivation.
pub(crate) fn revision_section(md: &mut String, ev: &Evidence, d: &Derived) {
    let _ = writeln!(md, "## 11. The derivation\n");
    let _ = writeln!(
        md,
        "Derived in code (`bench_report::adr::revision`) from the files of this pack. For a \
         margin m and divisor k, U = min(lease, session TTL) × (1 − m), period U/k. One \
         definition per rule:\n\n\
         - **trigger 1**: corrected p99 (95 % upper end) ≤ base × m / 3; the margin needed is \
         3 × p99 / base, everywhere in this pack;\n\
         - **D4 (ADR-006's form)**: base × (1 − m) > hop (§6.5 trigger 3 as written);\n\
         - **D4 (sawtooth)**: refusal = max(0, min(period, hop + p50 − (U − U/k))) / period ≤ \
         {:.2} %; its slack is U − U/k − p50 − hop;\n\
         - **ride-through**: production's largest freeze ridden through — predicted U − U/k − \
         RTT at production's U, times the lab's measured ÷ predicted ratio ([§4](#4-the-freeze-condition)) \
         — reaches the freeze tolerance.\n\n\
         Binding: production under the measured network and under the CPU quota (trigger 1 and \
         both D4 forms; absolute times), and production under freezes (ride-through; absolute \
         freeze lengths, ratios for leases). The scaled TTLs are reported, not binding: their \
         network is not scaled with the lease. Pick: keep (0.30, U/3) if every binding rule \
         passes; else 0.30 with the smallest divisor that passes; else the passing margin \
         closest to 0.30 (ties to the larger) with its smallest divisor; else none.\n",
        d.tol.d4_refusal * 100.0
    );
    conditions_table(md, ev, d);
    grid_table(md, d);
    reasoning(md, d);
}

/// The conditions with the margin each needs and D4's slack at ADR-006's margin.
fn conditions_table(md: &mut String, ev: &Evidence, d: &Derived) {
    let _ = writeln!(
        md,
        "| condition | source | binding | base (ms) | hop (ms) | p50 (ms) | p99, interval end (ms) | samples | margin needed | D4 (sawtooth) slack at (0.30, U/3) (ms) | at (0.30, U/4) (ms) |\n|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    for c in &d.inputs.conditions {
        let slack =
            |k: u32| revision::sawtooth(c.base_ms, c.hop_ms, c.p50_ms, ADR_MARGIN, k).slack_ms;
        let _ = writeln!(
            md,
            "| {} | {} | {} | {:.0} | {:.0} | {} | {} | {} | {:.3} | {:.1} | {:.1} |",
            c.name,
            ev.link(&c.source, &c.source),
            if c.binding {
                "yes"
            } else {
                "no (scaled, reported)"
            },
            c.base_ms,
            c.hop_ms,
            ms(c.p50_ms),
            ms(c.p99_ms),
            c.samples,
            revision::margin_needed(c.p99_ms, c.base_ms),
            slack(ADR_DIVISOR),
            slack(ADR_DIVISOR + 1),
        );
    }
}

/// Every (margin, divisor) against every binding rule.
fn grid_table(md: &mut String, d: &Derived) {
    let r = &d.revision;
    // Every pair against every binding rule: the columns are the rules.
    let cols: Vec<(Rule, &'static str)> = {
        let mut v: Vec<(Rule, &'static str)> = Vec::new();
        for c in r.grid.first().map_or(&[][..], |p| &p.checks[..]) {
            let key = (c.rule, tag(&c.condition));
            if !v.contains(&key) {
                v.push(key);
            }
        }
        v
    };
    let _ = writeln!(
        md,
        "\nEvery (margin, divisor) against every binding rule (limit ÷ now in brackets, ≥ 1 \
         passes):\n\n| margin | divisor | verdict | {} |\n|---:|---:|---|{}",
        cols.iter()
            .map(|(rule, t)| match rule {
                Rule::RideThrough => rule.name().to_owned(),
                _ => format!("{} ({t})", rule.name()),
            })
            .collect::<Vec<_>>()
            .join(" | "),
        "---|".repeat(cols.len())
    );
    for p in &r.grid {
        let cells: Vec<String> = cols
            .iter()
            .map(|(rule, t)| {
                cell(
                    p.checks
                        .iter()
                        .find(|c| c.rule == *rule && tag(&c.condition) == *t),
                )
            })
            .collect();
        let _ = writeln!(
            md,
            "| {:.2} | {} | {} | {} |",
            p.margin,
            p.divisor,
            p.outcome().word(),
            cells.join(" | ")
        );
    }
}

/// How the proposal was picked, from the numbers.
fn reasoning(md: &mut String, d: &Derived) {
    let r = &d.revision;
    let _ = writeln!(md, "\nReasoning, from the numbers:\n");
    if let Some(p) = r.pair(ADR_MARGIN, ADR_DIVISOR) {
        for c in p.checks.iter().filter(|c| c.outcome != Outcome::Pass) {
            let _ = writeln!(
                md,
                "- ADR-006's (0.30, U/3), {} on {}: **{}**: {}",
                c.rule.name(),
                c.condition,
                c.outcome.word(),
                c.text
            );
        }
    }
    let at = |k: u32| r.pair(ADR_MARGIN, k).map(|p| p.outcome());
    let _ = writeln!(
        md,
        "- margin 0.30 by divisor: {}",
        DIVISORS
            .map(|k| format!("U/{k} {}", at(k).map_or("—", |o| o.word())))
            .collect::<Vec<_>>()
            .join(", ")
    );
    let _ = writeln!(
        md,
        "- {}\n",
        match (r.how, r.margin, r.divisor) {
            (How::KeepAdr, ..) => "every binding rule passes at (0.30, U/3): keep it".to_owned(),
            (How::NewDivisor, _, Some(k)) =>
                format!("0.30 passes from U/{k}: keep the margin, change the divisor"),
            (How::NearestMargin, Some(m), Some(k)) => format!(
                "no divisor makes 0.30 pass; {m:.2} (with U/{k}) is the passing margin closest \
                 to it"
            ),
            _ => "no (margin, divisor) of the grid passes every binding rule: the table above \
                  names what fails each pair"
                .to_owned(),
        }
    );
    let _ = writeln!(
        md,
        "The proposed text this derivation gives is [the decision](#decision) at the top.\n"
    );
}
