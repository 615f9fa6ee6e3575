//! §3: the five ADR-006 §6.5 triggers over every results table of the pack,
//! the worst cell of each, and every verdict with its numbers.

use std::fmt::Write as _;

use bench_analysis::triggers::{TRIGGERS, TriggerResult, Verdict};

use crate::adr::evidence::model::Evidence;

/// The plot that shows trigger `id` at work: (stem, caption).
fn trigger_plot(id: &str) -> (&'static str, &'static str) {
    match id {
        bench_analysis::triggers::RTT_P99_VS_MARGIN => {
            ("sweep/p99_vs_budget", "Corrected p99 vs trigger 1's budget")
        }
        bench_analysis::triggers::MARGIN_DOMINANT_LIMITER => {
            ("sweep/abandonment_vs_margin", "Abandonment vs margin")
        }
        bench_analysis::triggers::D4_UNSATISFIABLE => {
            ("sweep/throughput_vs_margin", "Throughput vs margin")
        }
        bench_analysis::triggers::FENCED_OUT_WITH_CLIENT_CHECK => (
            "pause-uc03/timeline",
            "UC-03 pause timeline: the fences at work",
        ),
        _ => (
            "throttle/throttle_rtt",
            "Corrected RTT CDF, throttled vs unthrottled",
        ),
    }
}

/// §3: every trigger's headline verdict and worst cell, then every verdict.
pub(crate) fn triggers_section(md: &mut String, ev: &Evidence) {
    let _ = writeln!(md, "## 3. The five ADR-006 §6.5 triggers\n");
    if ev.sweeps.is_empty() {
        md.push_str(&ev.absent("sweep", "results table"));
        return;
    }
    let _ = writeln!(
        md,
        "Each trigger evaluated (by `bench triggers`' own function) on every cell of every \
         results table of the pack: the sweep, the server-pause sweep, the adaptive sweep and \
         the throttle pair. The headline verdict is the worst over the cells: fired > \
         insufficient_data > ok > not_evaluated.\n"
    );
    let _ = writeln!(
        md,
        "| # | ADR-006 §6.5 trigger | verdict | fired / ok / insufficient / not evaluated | worst cell: observed vs threshold | ADR action | plot |\n|---|---|---|---|---|---|---|"
    );
    for (i, t) in TRIGGERS.iter().enumerate() {
        let all: Vec<(&str, &TriggerResult)> = ev
            .sweeps
            .values()
            .flat_map(|s| s.triggers.iter().map(move |r| (s.name.as_str(), r)))
            .filter(|(_, r)| r.trigger == t.id)
            .collect();
        let n = |v: Verdict| all.iter().filter(|(_, r)| r.verdict == v).count();
        let verdict = [
            Verdict::Fired,
            Verdict::InsufficientData,
            Verdict::Ok,
            Verdict::NotEvaluated,
        ]
        .into_iter()
        .find(|&v| n(v) > 0);
        // Worst: a fired cell with the largest observed/threshold, else the
        // evaluated cell closest to firing.
        let ratio = |r: &TriggerResult| {
            if i == 2 {
                // Trigger 3 fires when observed ≤ threshold.
                r.threshold / r.observed.max(1e-9)
            } else {
                r.observed / r.threshold.max(1e-9)
            }
        };
        let worst = all
            .iter()
            .filter(|(_, r)| r.verdict != Verdict::NotEvaluated)
            .max_by(|a, b| {
                (a.1.fired, ratio(a.1))
                    .partial_cmp(&(b.1.fired, ratio(b.1)))
                    .unwrap_or(std::cmp::Ordering::Equal)
            });
        let (stem, caption) = trigger_plot(t.id);
        let plot = if ev.files.contains(&format!("{stem}.svg")) {
            format!("[{caption}]({stem}.svg)")
        } else {
            format!("`{stem}.svg` not drawn")
        };
        let _ = writeln!(
            md,
            "| {} | {} | **{}** | {} / {} / {} / {} | {} | {} | {plot} |",
            i + 1,
            t.adr_trigger,
            verdict.map_or("no cells", Verdict::as_str),
            n(Verdict::Fired),
            n(Verdict::Ok),
            n(Verdict::InsufficientData),
            n(Verdict::NotEvaluated),
            worst.map_or("—".into(), |(dir, r)| format!(
                "`{dir}/{}`: {} vs {} {} ({})",
                r.cell,
                bench_analysis::triggers::fmt_value(r.observed),
                bench_analysis::triggers::fmt_value(r.threshold),
                r.unit,
                r.verdict.as_str()
            )),
            t.action,
        );
    }
    let _ = writeln!(
        md,
        "\nEvery verdict with its numbers: [appendix A](#appendix-a-every-trigger-verdict).\n"
    );
    md.push_str(&ev.figure(
        "sweep/p99_vs_budget",
        "Trigger 1: corrected p99 (points) vs min(lease, session TTL) × margin / 3 (dashed)",
    ));
    md.push('\n');
    if !ev.sweeps.contains_key("throttle") {
        let _ = writeln!(
            md,
            "Trigger 5 (a move off Autopilot) needs the throttle pair: {}",
            ev.absent("throttle", "results table")
        );
    }
}

/// Appendix A: every trigger verdict, collapsed per step with a count line.
pub(crate) fn triggers_appendix(md: &mut String, ev: &Evidence) {
    let _ = writeln!(md, "## Appendix A. Every trigger verdict\n");
    if ev.sweeps.is_empty() {
        md.push_str(&ev.absent("sweep", "results table"));
        return;
    }
    for s in ev.sweeps.values() {
        let fired: Vec<&TriggerResult> = s
            .triggers
            .iter()
            .filter(|r| r.verdict != Verdict::Ok)
            .collect();
        let _ = writeln!(
            md,
            "<details><summary><code>{}</code>: {} checks, {} fired, {} not ok (source {})</summary>\n",
            s.name,
            s.triggers.len(),
            s.triggers.iter().filter(|r| r.fired).count(),
            fired.len(),
            ev.link(&format!("{}/results.csv", s.name), "results.csv")
        );
        md.push_str(&bench_analysis::triggers::markdown_table(&s.triggers));
        let _ = writeln!(md, "\n</details>\n");
    }
}
