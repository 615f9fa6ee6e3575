//! `adr-006-revision.md`: the rows of ADR-006 §6.2 (the margin and the
//! heartbeat period) and §6.5 (the trigger thresholds) the derivation would
//! change, in the ADR's own form (setting, current, proposed, evidence),
//! each number computed from the pack and each row linked to the anchor of
//! `adr-006-evidence.md` that shows it. A pure function of the derivation.

use std::fmt::Write as _;

use crate::adr::evidence::derived::Derived;
use crate::adr::evidence::sections::header::tag;
use crate::adr::pack::EVIDENCE_MD;
use crate::adr::revision::{self, ADR_DIVISOR, ADR_MARGIN};

/// A link into the evidence document.
fn at(anchor: &str, text: &str) -> String {
    format!("[{text}]({EVIDENCE_MD}#{anchor})")
}

/// The proposed revision, as Markdown.
pub fn render_revision(d: &Derived) -> String {
    let mut md = String::new();
    let r = &d.revision;
    let _ = writeln!(md, "# ADR-006: proposed revision\n");
    let _ = writeln!(
        md,
        "Written by `bench adr` beside {} from the same files, under its tolerances (sessions \
         lost per freeze ≤ {:.2} %, D4 refusals ≤ {:.2} % of a heartbeat period, freezes to \
         ride through: {}). Production: min(lease, session TTL) = {}.\n",
        at("decision", EVIDENCE_MD),
        d.tol.lost_per_exposure * 100.0,
        d.tol.d4_refusal * 100.0,
        r.freeze_tolerance_ms
            .map_or("not measured".into(), |f| format!("{f:.0} ms")),
        d.inputs
            .conditions
            .iter()
            .find(|c| c.binding)
            .map_or("not measured".into(), |c| format!("{:.0} ms", c.base_ms)),
    );
    let (Some(m), Some(k)) = (r.margin, r.divisor) else {
        let _ = writeln!(
            md,
            "**No revision can be derived**: no (margin, divisor) passes every binding rule \
             ({}). ADR-006 §6.2 and §6.5 stay as written until the failing rules are resolved.",
            at("11-the-derivation", "the table of every pair")
        );
        return md;
    };
    let Some(p) = d.inputs.conditions.iter().find(|c| c.binding) else {
        return md;
    };
    let period = |m: f64, k: u32| p.base_ms * (1.0 - m) / f64::from(k);
    let same = |changed: bool| if changed { "" } else { " (unchanged)" };
    let _ = writeln!(
        md,
        "## §6.2 Client margin and heartbeat\n\n| setting | current | proposed | evidence |\n|---|---|---|---|"
    );
    let _ = writeln!(
        md,
        "| client margin (D1) | {ADR_MARGIN:.2} | **{m:.2}**{} | {} |",
        same((m - ADR_MARGIN).abs() > 1e-9),
        at("decision", "decision, per-(margin, divisor) table")
    );
    let _ = writeln!(
        md,
        "| heartbeat period | min(session TTL, shortest live lease) × (1 − margin) / \
         {ADR_DIVISOR} = {:.0} ms | min(session TTL, shortest live lease) × (1 − margin) / \
         **{k}** = {:.0} ms{} | {} |",
        period(ADR_MARGIN, ADR_DIVISOR),
        period(m, k),
        same(k != ADR_DIVISOR),
        at("11-the-derivation", "every pair against every rule")
    );
    let cur3 = revision::sawtooth(p.base_ms, p.hop_ms, 0.0, ADR_MARGIN, ADR_DIVISOR);
    let new = revision::sawtooth(p.base_ms, p.hop_ms, 0.0, m, k);
    let _ = writeln!(
        md,
        "\n## §6.5 Revisit triggers\n\n| trigger | current | proposed | evidence |\n|---|---|---|---|"
    );
    let _ = writeln!(
        md,
        "| (1) heartbeat RTT | p99 RTT > min(lease, session TTL) × margin / 3 = {:.0} ms | \
         corrected p99 (95 % upper end, ≥ {} samples) > min(lease, session TTL) × margin / 3 \
         = **{:.0} ms**; margin needed = 3 × p99 / base | {} |",
        fencepost_api::buckets::trigger1_budget(p.base_ms, ADR_MARGIN),
        revision::MIN_SAMPLES_BINDING,
        fencepost_api::buckets::trigger1_budget(p.base_ms, m),
        at("3-the-five-adr-006-65-triggers", "§3 headline")
    );
    let _ = writeln!(
        md,
        "| (3) D4 after a TTL change | lease × (1 − margin) > worst-case hop: {:.0} ms > {:.0} \
         ms | hop + p50 RTT > U − U/k = **{:.0} ms** (the bottom of the sawtooth) for more \
         than {:.2} % of a heartbeat period; today's form gives {:.0} ms − p50 at U/{ADR_DIVISOR}, \
         no slack | {} |",
        cur3.usable_ms,
        p.hop_ms,
        new.bottom_ms,
        d.tol.d4_refusal * 100.0,
        cur3.bottom_ms,
        at("6-production-projection", "§6 production")
    );
    if let Some(c) = r.pair(m, k).and_then(|pr| {
        pr.checks
            .iter()
            .find(|c| c.rule == revision::Rule::RideThrough)
    }) {
        let need = r.freeze_tolerance_ms.unwrap_or(0.0);
        let _ = writeln!(
            md,
            "| (new) lock-server freezes | — | a freeze longer than **{:.0} ms** (production's \
             projected ride-through at ({m:.2}, U/{k}), which must stay ≥ the {need:.0} ms \
             tolerance), or sessions lost per freeze > {:.2} %: {} | {} |",
            c.ratio * need,
            d.tol.lost_per_exposure * 100.0,
            c.text,
            at("4-the-freeze-condition", "§4 freezes")
        );
    }
    let quota = d
        .inputs
        .conditions
        .iter()
        .find(|c| c.binding && tag(&c.name) == "quota");
    if let Some(q) = quota {
        let _ = writeln!(
            md,
            "| (5) CPU-throttled hosts | a move off them may make the margin reducible | margin \
             needed (3 × p99 / base) under the quota **{:.3}**, without it **{:.3}**; D4 \
             (sawtooth) under the quota decides the divisor | {} |",
            revision::margin_needed(q.p99_ms, q.base_ms),
            revision::margin_needed(p.p99_ms, p.base_ms),
            at("3-the-five-adr-006-65-triggers", "§3 headline")
        );
    }
    md
}
