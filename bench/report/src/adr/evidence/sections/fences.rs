//! §8: the fences under a frozen worker (UC-03, trigger 4).

use std::fmt::Write as _;

use crate::adr::evidence::model::Evidence;

/// §8: the pause experiments' fences.
pub(crate) fn fences_section(md: &mut String, ev: &Evidence) {
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
