//! §4: the server-pause sweep, and the revision's stall rule checked cell
//! by cell against the sessions it lost.

use std::fmt::Write as _;

use bench_analysis::triggers::D4Window;

use crate::adr::evidence::format::ms;
use crate::adr::evidence::model::Evidence;

/// §4: the server-pause sweep and the stall rule against it.
pub(crate) fn pause_condition_section(md: &mut String, ev: &Evidence) {
    let _ = writeln!(md, "## 4. The server-pause condition\n");
    let Some(s) = ev.sweeps.get("sweep-pause") else {
        md.push_str(&ev.absent("sweep-pause", "results table"));
        return;
    };
    let _ = writeln!(
        md,
        "The lock-server SIGSTOPped for a fixed time at a fixed interval (`server_pause` \
         column) under the same network delay. What a margin must survive, not cover as \
         jitter. Source: {}.\n",
        ev.link("sweep-pause/results.csv", "sweep-pause/results.csv")
    );
    let sum = |f: fn(&bench_analysis::results::CellRow) -> u64| s.rows.iter().map(f).sum::<u64>();
    let _ = writeln!(
        md,
        "Over its {} cells: sessions lost {} (expired {}, unknown {}, deadline {}), locks lost \
         {}, fenced out {}, paid twice {}, paid under a stale token {}, ledger check passed on \
         {} of {}. Every cell's row: {}.",
        s.rows.len(),
        sum(|r| r.session_lost),
        sum(|r| r.session_lost_expired),
        sum(|r| r.session_lost_unknown),
        sum(|r| r.session_lost_deadline),
        sum(|r| r.lock_lost),
        sum(|r| r.fenced_out),
        sum(|r| r.paid_twice),
        sum(|r| r.stale_paid),
        s.rows.iter().filter(|r| r.ledger_ok).count(),
        s.rows.len(),
        ev.link("sweep-pause/results.csv", "sweep-pause/results.csv")
    );
    // The revision's stall rule checked against what happened, cell by
    // cell, at the SDK's own period: a rule the data can contradict.
    let _ = writeln!(
        md,
        "\nThe revision's stall rule (stall + heartbeat period < usable window) against what \
         happened, per cell, at the SDK's period (U/3); the stall is the cell's corrected \
         p99.9:\n\n| cell | usable U (ms) | period (ms) | stall (ms) | stall + period | rule says | sessions lost | agree |\n|---|---:|---:|---:|---:|---|---:|---|"
    );
    let mut agree = 0;
    for r in &s.rows {
        let w = D4Window::of(r);
        let stall = r.hb_rtt_corrected_p999_us as f64 / 1e3;
        let at_risk = stall + w.period_ms >= w.usable_ms;
        let lost = r.session_lost > 0;
        agree += usize::from(at_risk == lost);
        let _ = writeln!(
            md,
            "| `{}` | {:.0} | {:.0} | {} | {:.0} | {} | {} | {} |",
            r.cell,
            w.usable_ms,
            w.period_ms,
            ms(stall),
            stall + w.period_ms,
            if at_risk {
                "sessions at risk"
            } else {
                "survives"
            },
            r.session_lost,
            if at_risk == lost { "yes" } else { "**no**" }
        );
    }
    let _ = writeln!(
        md,
        "\nThe rule agrees with the measured session losses on {agree} of {} cell(s).",
        s.rows.len()
    );
    md.push('\n');
    md.push_str(&ev.figure(
        "sweep-pause/rtt_cdf",
        "Heartbeat RTT CDF under the server pause",
    ));
    md.push('\n');
}
