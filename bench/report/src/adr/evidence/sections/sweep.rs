//! §1 and §2, from the main sweep: the heartbeat RTT per TTL (corrected,
//! merged over the TTL's cells) and throughput and abandonment per margin.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use bench_analysis::recommend::human_ms;
use bench_analysis::results::CellRow;
use bench_analysis::triggers::lost_work;

use crate::adr::evidence::format::{median, ms, pct};
use crate::adr::evidence::model::Evidence;

/// §1: the corrected heartbeat RTT per TTL of the sweep.
pub(crate) fn rtt_section(md: &mut String, ev: &Evidence) {
    let _ = writeln!(md, "## 1. Heartbeat RTT, measured (corrected)\n");
    let Some(s) = ev.sweeps.get("sweep") else {
        md.push_str(&ev.absent("sweep", "results table"));
        return;
    };
    let _ = writeln!(
        md,
        "Every cell's corrected histogram (`sweep/hgrm/<cell>.corrected.hdr`) merged per TTL \
         (all margins), ms. Source: {}.\n",
        ev.link("sweep/results.csv", "sweep/results.csv")
    );
    let _ = writeln!(
        md,
        "| TTL | cells | samples | p50 | p90 | p99 [95 %] ≥ | p99.9 ≥ | max ≥ | raw p50 | raw p99 ≥ |\n|---|---:|---:|---:|---:|---|---:|---:|---:|---:|"
    );
    for t in &s.rtt {
        let _ = writeln!(
            md,
            "| {} | {}{} | {} | {} | {} | {} [{}, {}] | {} | {} | {} | {} |",
            human_ms(t.lease_ms),
            t.cells,
            if t.missing > 0 {
                format!(" ({} without histogram)", t.missing)
            } else {
                String::new()
            },
            t.corrected.n,
            ms(t.corrected.p50),
            ms(t.corrected.p90),
            ms(t.corrected.p99),
            ms(t.corrected.p99_ci.0),
            ms(t.corrected.p99_ci.1),
            ms(t.corrected.p999),
            ms(t.corrected.max),
            ms(t.raw.p50),
            ms(t.raw.p99),
        );
    }
    if let Some(o) = s.manifest.as_ref().and_then(|m| m.get("proxy_overhead")) {
        let f = |k: &str| o.get(k).and_then(|v| v.as_f64()).unwrap_or(f64::NAN);
        let _ = writeln!(
            md,
            "\nThe delay proxy's own overhead at zero delay (measured once, `sweep/manifest.json`): \
             p50 {} µs, p99 {} µs over {} samples — included in the figures above.",
            f("overhead_p50_us"),
            f("overhead_p99_us"),
            f("samples")
        );
    }
    md.push('\n');
    md.push_str(&ev.figure(
        "sweep/rtt_cdf",
        "Heartbeat RTT CDF per cell, raw (solid) and corrected (dashed)",
    ));
    md.push('\n');
    md.push_str(&ev.figure(
        "sweep/rtt_spectrum",
        "Heartbeat RTT percentile spectrum per cell (x = 1/(1 − q))",
    ));
    md.push('\n');
}

/// The note that the sweep has no repeats to give intervals over, if so.
fn repeat_note(ev: &Evidence) -> String {
    let has_repeat = ev
        .step("sweep")
        .is_some_and(|r| r.step.args.iter().any(|a| a == "--repeat"));
    if has_repeat {
        String::new()
    } else {
        "**95 % CIs over repeats: not measured in this pack** (one repeat per cell: `bench sweep \
         --repeat` is not available in this build, or `--quick`); the min–max column is a \
         single value.\n"
            .into()
    }
}

/// §2: throughput and abandonment per fixed margin of the sweep.
pub(crate) fn margin_section(md: &mut String, ev: &Evidence) {
    let _ = writeln!(md, "## 2. Throughput and abandonment per margin\n");
    let rows = ev.fixed_rows();
    if rows.is_empty() {
        md.push_str(&ev.absent("sweep", "fixed-margin cells"));
        return;
    }
    let _ = writeln!(
        md,
        "Fixed margins, fencepost, `--net-delay`; medians over repeats (min–max). Abandoned = \
         D4 refused for insufficient lease (the margin's own cost); lost work = every attempt \
         that did not pay. Counts come from the rail ledger. Source: {}.\n",
        ev.link("sweep/results.csv", "sweep/results.csv")
    );
    md.push_str(&repeat_note(ev));
    let _ = writeln!(
        md,
        "\n| TTL | margin | repeats | payouts/s median (min–max) | abandoned (insufficient lease) | lost work | sessions lost | fenced out | paid twice / stale |\n|---|---:|---:|---|---:|---:|---:|---:|---|"
    );
    let mut groups: BTreeMap<(u64, i64), Vec<&CellRow>> = BTreeMap::new();
    for r in &rows {
        groups
            .entry((r.lease_ms, (r.margin * 1000.0).round() as i64))
            .or_default()
            .push(r);
    }
    for ((lease, _), g) in &groups {
        let mut tp: Vec<f64> = g.iter().map(|r| r.throughput_per_s).collect();
        let med = median(&mut tp);
        let (lo, hi) = (tp[0], tp[tp.len() - 1]);
        let attempts: u64 = g.iter().map(|r| r.attempts).sum();
        let sum = |f: fn(&CellRow) -> u64| g.iter().map(|r| f(r)).sum::<u64>();
        let _ = writeln!(
            md,
            "| {} | {:.2} | {} | {med:.1} ({lo:.1}–{hi:.1}) | {} | {} | {} | {} | {} / {} |",
            human_ms(*lease),
            g[0].margin,
            g.len(),
            pct(sum(|r| r.abandoned_insufficient_lease), attempts),
            pct(g.iter().map(|r| lost_work(r)).sum(), attempts),
            sum(|r| r.session_lost),
            sum(|r| r.fenced_out),
            sum(|r| r.paid_twice),
            sum(|r| r.stale_paid),
        );
    }
    if let Some(t) = ev.sweeps.get("sweep").and_then(|s| s.summary.as_ref()) {
        let _ = writeln!(
            md,
            "\nConfidence intervals over repeats ({}):\n\n{}",
            ev.link("sweep/summary.csv", "sweep/summary.csv"),
            t.markdown(60)
        );
    }
    md.push('\n');
    md.push_str(&ev.figure(
        "sweep/throughput_vs_margin",
        "Throughput vs margin, one line per TTL",
    ));
    md.push('\n');
    md.push_str(&ev.figure(
        "sweep/abandonment_vs_margin",
        "Abandonment vs margin: insufficient lease (solid), all lost work (dashed)",
    ));
    if let Some(s) = ev.sweeps.get("sweep") {
        let _ = writeln!(
            md,
            "\nThe bench's recommendation per TTL (`bench report`'s rule: best throughput among cells where triggers 1, 3, 4 stay quiet and the ledger holds; a 1 % tie goes to the larger margin):\n"
        );
        md.push_str(&bench_analysis::recommend::markdown_recommendations(
            &s.recommendations,
        ));
    }
    md.push('\n');
}
