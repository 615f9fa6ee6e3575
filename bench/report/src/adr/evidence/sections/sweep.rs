//! §1 and §2, from the main sweep: the heartbeat RTT per TTL (corrected,
//! merged over the TTL's cells) and throughput and abandonment per margin.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use bench_analysis::recommend::human_ms;
use bench_analysis::results::CellRow;
use bench_analysis::triggers::lost_work;

use crate::adr::evidence::format::{median, ms, pct, sig3};
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
         (all margins), ms. Source: {}. Intervals: {}.\n",
        ev.link("sweep/results.csv", "sweep/results.csv"),
        s.rtt.first().map_or("—", |t| t.method.as_str())
    );
    let _ = writeln!(
        md,
        "| TTL | cells | samples | p50 | p90 | p99 [95 %] ≥ | p99.9 [95 %] ≥ | max ≥ | raw p50 | raw p99 ≥ |\n|---|---:|---:|---:|---:|---|---|---:|---:|---:|"
    );
    for t in &s.rtt {
        let _ = writeln!(
            md,
            "| {} | {} | {} | {} | {} | {} [{}, {}] | {} [{}, {}] | {} | {} | {} |",
            human_ms(t.lease_ms),
            t.cells,
            t.corrected.n,
            ms(t.corrected.p50),
            ms(t.corrected.p90),
            ms(t.corrected.p99),
            ms(t.corrected.p99_ci.0),
            ms(t.corrected.p99_ci.1),
            ms(t.corrected.p999),
            ms(t.corrected.p999_ci.0),
            ms(t.corrected.p999_ci.1),
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
        "Fixed margins, fencepost, `--net-delay`. Payouts/s: the median over repeats (min–max). \
         Abandoned: a count pooled over the repeats (Σ refused ÷ Σ attempts), not a median — D4 \
         refused for insufficient lease (the margin's own cost); lost work = every attempt that \
         did not pay. Counts come from the rail ledger. Source: {}.\n",
        ev.link("sweep/results.csv", "sweep/results.csv")
    );
    md.push_str(&repeat_note(ev));
    let mut groups: BTreeMap<(i64, u64), Vec<&CellRow>> = BTreeMap::new();
    for r in &rows {
        groups
            .entry(((r.margin * 1000.0).round() as i64, r.lease_ms))
            .or_default()
            .push(r);
    }
    let mut ttls: Vec<u64> = rows.iter().map(|r| r.lease_ms).collect();
    ttls.sort_unstable();
    ttls.dedup();
    let _ = write!(md, "\n| margin |");
    for t in &ttls {
        let _ = write!(
            md,
            " TTL {}: payouts/s median (min–max), abandoned (pooled) |",
            human_ms(*t)
        );
    }
    let _ = write!(md, "\n|---:|");
    for _ in &ttls {
        md.push_str("---|");
    }
    md.push('\n');
    let mut margins: Vec<i64> = groups.keys().map(|k| k.0).collect();
    margins.dedup();
    let mut safety = (0u64, 0u64, 0u64, 0u64);
    for m in margins {
        let _ = write!(md, "| {:.2} |", m as f64 / 1000.0);
        for t in &ttls {
            match groups.get(&(m, *t)) {
                Some(g) => {
                    let mut tp: Vec<f64> = g.iter().map(|r| r.throughput_per_s).collect();
                    let med = median(&mut tp);
                    let attempts: u64 = g.iter().map(|r| r.attempts).sum();
                    let ab: u64 = g.iter().map(|r| r.abandoned_insufficient_lease).sum();
                    for r in g {
                        safety.0 += r.session_lost;
                        safety.1 += r.fenced_out;
                        safety.2 += r.paid_twice;
                        safety.3 += r.stale_paid;
                    }
                    let _ = write!(
                        md,
                        " {} ({}–{}), {} |",
                        sig3(med),
                        sig3(tp[0]),
                        sig3(tp[tp.len() - 1]),
                        pct(ab, attempts)
                    );
                }
                None => md.push_str(" — |"),
            }
        }
        md.push('\n');
    }
    let lost: u64 = rows.iter().map(|r| lost_work(r)).sum();
    let attempts: u64 = rows.iter().map(|r| r.attempts).sum();
    let _ = writeln!(
        md,
        "\nOver every cell above: lost work {}, sessions lost {}, fenced out {}, paid twice {}, \
         paid under a stale token {}. Every column per cell: {}; per point with intervals: {}.",
        pct(lost, attempts),
        safety.0,
        safety.1,
        safety.2,
        safety.3,
        ev.link("sweep/results.csv", "sweep/results.csv"),
        ev.link("sweep/summary.csv", "sweep/summary.csv")
    );
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
            "\n**A different question: the margin for a lease of that TTL.** `bench report`'s rule \
             (best throughput among the margins where the ledger holds, triggers 1, 3 and 4 stay \
             quiet on every repeat and the margin is above the floor m_min; overlapping \
             intervals go to the larger margin) answers which margin to use *if your lease \
             were* 1 s, 2 s or 5 s under this network. It imposes trigger 1 on the scaled \
             lease, which the network makes 30× harsher than production, so it can find no \
             margin where [the decision](#decision) (the \
             production configuration, trigger 1 on production's budget) holds. Both read the \
             same pooled histograms.\n"
        );
        md.push_str(&bench_analysis::recommend::markdown_recommendations(
            &s.recommendations,
        ));
    }
    md.push('\n');
}
