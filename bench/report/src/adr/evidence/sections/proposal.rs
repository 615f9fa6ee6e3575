//! The proposed revision of ADR-006 §6.2 / §6.5: the conditions, the
//! feasible (margin, divisor) pairs, the reasoning, and the proposed text,
//! all derived by [`crate::adr::revision::derive`].

use std::fmt::Write as _;

use crate::adr::evidence::format::ms;
use crate::adr::evidence::model::Evidence;
use crate::adr::revision::{self, ADR_DIVISOR, ADR_MARGIN, Condition};

/// The proposed revision, derived from `conditions`.
pub(crate) fn revision_section(md: &mut String, ev: &Evidence, conditions: &[Condition]) {
    let _ = writeln!(md, "## 11. The derivation\n");
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
         (3) for a stall condition, stall (p99.9) + U/k < U, with the p99.9 measured: more \
         than 0.1 % of its heartbeats timing out (the stall outlasting the time left before \
         the deadline) makes it censored (≥) and fails every pair. Rule: keep (0.30, 3) if it holds \
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
            c.stall_ms.map_or("—".into(), |s| {
                if c.stall_censored() {
                    format!("≥ {}", ms(s))
                } else {
                    ms(s)
                }
            }),
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
    // One line: the divisor k is also the heartbeats per usable window.
    let feasible: Vec<String> = r
        .feasible
        .iter()
        .map(|(k, ms_)| {
            let list = if ms_.is_empty() {
                "none".to_string()
            } else {
                ms_.iter()
                    .map(|m| format!("{m:.2}"))
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            format!("k = {k}: {list}")
        })
        .collect();
    let _ = writeln!(
        md,
        "\nFeasible margins (every binding condition holds) per divisor k (k heartbeats per \
         usable window): {}.",
        feasible.join("; ")
    );
    let _ = writeln!(md, "\nReasoning, from the numbers:\n");
    for line in &r.reasoning {
        let _ = writeln!(md, "- {line}");
    }
    let _ = writeln!(
        md,
        "\nThe proposed text this derivation gives is [the decision](#decision) at the top.\n"
    );
}
