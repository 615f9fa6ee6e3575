//! §4: the server-pause sweep, and the revision's stall rule checked cell
//! by cell against the sessions it lost (one line per margin).

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
    // cell, at the SDK's own period: a rule the data can contradict. One
    // line per margin (its repeats collapsed); every cell is in the csv.
    let _ = writeln!(
        md,
        "\nThe revision's stall rule (stall + heartbeat period < usable window) against what \
         happened, cell by cell, at the SDK's period (U/3); the stall is the cell's corrected \
         p99.9, and a line collapses a margin's repeats (the largest stall):\n\n| margin | cells | usable U (ms) | period (ms) | stall, largest (ms) | stall + period | rule says at risk | cells that lost sessions | sessions lost | agree |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
    );
    let mut margins: Vec<f64> = s.rows.iter().map(|r| r.margin).collect();
    margins.sort_by(f64::total_cmp);
    margins.dedup();
    let (mut agree, mut cells) = (0, 0);
    for m in margins {
        let rows: Vec<_> = s.rows.iter().filter(|r| r.margin == m).collect();
        let (mut at_risk_n, mut lost_n, mut lost, mut agree_m) = (0, 0, 0, 0);
        let (mut usable, mut period, mut stall_max) = (0.0_f64, 0.0_f64, 0.0_f64);
        for r in &rows {
            let w = D4Window::of(r);
            let stall = r.hb_rtt_corrected_p999_us as f64 / 1e3;
            let at_risk = stall + w.period_ms >= w.usable_ms;
            let did_lose = r.session_lost > 0;
            at_risk_n += usize::from(at_risk);
            lost_n += usize::from(did_lose);
            lost += r.session_lost;
            agree_m += usize::from(at_risk == did_lose);
            (usable, period) = (w.usable_ms, w.period_ms);
            stall_max = stall_max.max(stall);
        }
        agree += agree_m;
        cells += rows.len();
        let _ = writeln!(
            md,
            "| {m:.2} | {} | {usable:.0} | {period:.0} | {} | {:.0} | {at_risk_n} | {lost_n} | {lost} | {} |",
            rows.len(),
            ms(stall_max),
            stall_max + period,
            if agree_m == rows.len() {
                format!("{agree_m} of {}", rows.len())
            } else {
                format!("**{agree_m} of {}**", rows.len())
            }
        );
    }
    let _ = writeln!(
        md,
        "\nThe rule agrees with the measured session losses on {agree} of {cells} cell(s).",
    );
    md.push('\n');
    md.push_str(&ev.figure(
        "sweep-pause/rtt_cdf",
        "Heartbeat RTT CDF under the server pause",
    ));
    md.push('\n');
}
