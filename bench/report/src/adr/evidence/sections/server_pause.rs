//! §4: the freeze condition — the lock-server frozen (SIGSTOP) for a fixed
//! time at a fixed interval. Sessions lost per exposure for every (TTL,
//! margin, divisor, freeze length), never pooled over margins or divisors,
//! and the largest freeze each (margin, divisor) rode through, predicted
//! beside measured.

use std::fmt::Write as _;

use crate::adr::evidence::conditions::{FREEZE_STEPS, freeze_rows};
use crate::adr::evidence::derived::Derived;
use crate::adr::evidence::format::ms;
use crate::adr::evidence::model::Evidence;
use crate::adr::revision::freeze::FreezeCell;
use crate::adr::revision::{FreezeInputs, Outcome};
use crate::adr::verdict::Tolerances;
use bench_analysis::results::CellRow;

/// §4: the freeze cells, their lost shares, and the ride-through predicted
/// against measured.
pub(crate) fn pause_condition_section(md: &mut String, ev: &Evidence, d: &Derived) {
    let _ = writeln!(md, "## 4. The freeze condition\n");
    let Some(f) = &d.inputs.freezes else {
        md.push_str(&ev.absent(FREEZE_STEPS[0], "results table"));
        return;
    };
    let rows = freeze_rows(ev);
    let steps: Vec<&str> = FREEZE_STEPS
        .iter()
        .copied()
        .filter(|n| rows.iter().any(|(s, _)| s == n))
        .collect();
    freeze_counts(md, ev, &rows, &steps);
    let cells = lost_per_exposure_table(md, f, &d.tol);
    ride_through_table(md, d, &cells);
    let stem = format!("{}/rtt_cdf", steps.first().copied().unwrap_or("freeze"));
    md.push_str(&ev.figure(&stem, "Heartbeat RTT CDF under the freezes"));
    md.push('\n');
}

/// Where the freeze cells come from and what they counted over all of them.
fn freeze_counts(md: &mut String, ev: &Evidence, rows: &[(&str, &CellRow)], steps: &[&str]) {
    let sources: Vec<String> = steps
        .iter()
        .map(|n| {
            let p = format!("{n}/results.csv");
            ev.link(&p, &p)
        })
        .collect();
    let sum = |g: fn(&CellRow) -> u64| rows.iter().map(|(_, r)| g(r)).sum::<u64>();
    let _ = writeln!(
        md,
        "The lock-server frozen for FOR every EVERY (`server_pause` column `EVERY:FOR`) under \
         the same network delay: a fault the margin and the heartbeat must ride through, not \
         jitter to cover. Sources: {}. Over its {} cells: sessions lost {} (deadline {}), \
         fenced out {}, paid twice {}, paid under a stale token {}, ledger check passed on {} \
         of {}.\n",
        sources.join(", "),
        rows.len(),
        sum(|r| r.session_lost),
        sum(|r| r.session_lost_deadline),
        sum(|r| r.fenced_out),
        sum(|r| r.paid_twice),
        sum(|r| r.stale_paid),
        rows.iter().filter(|(_, r)| r.ledger_ok).count(),
        rows.len(),
    );
}

/// Sessions lost per exposure, one line per (TTL, margin, divisor, freeze),
/// with its verdict; the cells in that order.
fn lost_per_exposure_table(md: &mut String, f: &FreezeInputs, tol: &Tolerances) -> Vec<FreezeCell> {
    let estimated = f.cells.iter().any(|c| c.estimated);
    let gaps = f.cells.iter().all(|c| c.from_gaps);
    let _ = writeln!(
        md,
        "Sessions lost per exposure, one line per (TTL, margin, divisor, freeze), its repeats \
         summed and nothing else: exposures = freezes × sessions open (workers + idle \
         sessions){}; lost = {}. Tolerance {:.2} %, a verdict from {} exposures.\n",
        if estimated {
            "; freezes **estimated** as floor(duration / EVERY) where the table predates the \
             `server_pauses` column"
        } else {
            ""
        },
        if gaps {
            "heartbeat gaps longer than the usable window (`hb_gaps_over_window`)"
        } else {
            "sessions lost at their deadline (`session_lost_deadline`) where heartbeat gaps \
             were not recorded"
        },
        tol.lost_per_exposure * 100.0,
        tol.min_exposures()
    );
    let _ = writeln!(
        md,
        "| TTL base (ms) | margin | divisor | freeze (ms) | cells | exposures | lost | lost share | verdict |\n|---:|---:|---:|---:|---:|---:|---:|---:|---|"
    );
    let mut cells = f.cells.clone();
    cells.sort_by(|a, b| {
        a.base_ms
            .total_cmp(&b.base_ms)
            .then(a.margin.total_cmp(&b.margin))
            .then(a.divisor.cmp(&b.divisor))
            .then(a.freeze_ms.total_cmp(&b.freeze_ms))
    });
    for c in &cells {
        let o = c.outcome(tol);
        let _ = writeln!(
            md,
            "| {:.0} | {:.2} | {} | {:.0} | {} | {}{} | {} | {:.3} % | {} |",
            c.base_ms,
            c.margin,
            c.divisor,
            c.freeze_ms,
            c.cells,
            c.exposures,
            if c.estimated { " (est.)" } else { "" },
            c.lost,
            c.share() * 100.0,
            if o == Outcome::Pass {
                o.word().to_owned()
            } else {
                format!("**{}**", o.word())
            }
        );
    }
    cells
}

/// The largest freeze ridden through per (margin, divisor), predicted
/// beside measured, and where the two disagree.
fn ride_through_table(md: &mut String, d: &Derived, cells: &[FreezeCell]) {
    let tol = &d.tol;
    let _ = writeln!(
        md,
        "\nThe largest freeze ridden through per (margin, divisor), predicted (U − U/k − RTT; \
         RTT = the corrected p99, interval end, of the same TTL's non-freeze sweep cells, or \
         the freeze cells' median p50 without them) beside measured (the largest freeze length \
         within tolerance, every shorter one within it too):\n\n| TTL base (ms) | margin | divisor | U − U/k (ms) | RTT (ms) | predicted (ms) | measured (ms) | measured ÷ predicted | agree |\n|---:|---:|---:|---:|---:|---:|---|---:|---|"
    );
    let mut disagree = Vec::new();
    for m in &d.revision.measured {
        let rtt = cells
            .iter()
            .find(|c| c.base_ms == m.base_ms && c.margin == m.margin && c.divisor == m.divisor)
            .map_or(f64::NAN, |c| c.rtt_ms);
        let measured = match (m.ridden_ms, m.stopped_at) {
            (Some(r), _) => format!("≥ {r:.0}"),
            (None, Some((s, Outcome::Insufficient))) => {
                format!("insufficient data at {s:.0}")
            }
            (None, Some((s, _))) => format!("< {s:.0}"),
            (None, None) => "—".into(),
        };
        // The prediction says a tested freeze is ridden through iff it is
        // ≤ predicted; the measurement says so per freeze.
        let tested: Vec<_> = cells
            .iter()
            .filter(|c| c.base_ms == m.base_ms && c.margin == m.margin && c.divisor == m.divisor)
            .filter(|c| c.outcome(tol) != Outcome::Insufficient)
            .collect();
        let wrong: Vec<String> = tested
            .iter()
            .filter(|c| (c.freeze_ms <= m.predicted_ms) != (c.outcome(tol) == Outcome::Pass))
            .map(|c| {
                format!(
                    "{:.0} ms ({} predicted, {:.3} % lost)",
                    c.freeze_ms,
                    if c.freeze_ms <= m.predicted_ms {
                        "ridden through"
                    } else {
                        "lost"
                    },
                    c.share() * 100.0
                )
            })
            .collect();
        if !wrong.is_empty() {
            disagree.push(format!(
                "({:.2}, U/{}) at TTL base {:.0} ms: {}",
                m.margin,
                m.divisor,
                m.base_ms,
                wrong.join(", ")
            ));
        }
        let usable = m.base_ms * (1.0 - m.margin);
        let _ = writeln!(
            md,
            "| {:.0} | {:.2} | {} | {:.0} | {} | {:.0} | {measured} | {} | {} |",
            m.base_ms,
            m.margin,
            m.divisor,
            usable - usable / f64::from(m.divisor),
            ms(rtt),
            m.predicted_ms,
            m.ratio().map_or("—".into(), |r| format!("{r:.2}")),
            if tested.is_empty() {
                "—"
            } else if wrong.is_empty() {
                "yes"
            } else {
                "**no**"
            }
        );
    }
    if disagree.is_empty() {
        let _ = writeln!(
            md,
            "\nThe prediction agrees with every freeze length measured with enough exposures.\n"
        );
    } else {
        let _ = writeln!(
            md,
            "\nWhere they disagree: {}. Why: the prediction subtracts one RTT quantile from the \
             bottom of the sawtooth, while a session is lost when one gap between its \
             acknowledged heartbeats outlasts its window — an extreme over every session × \
             every freeze, which adds the phase the freeze hits the period at and the backlog of \
             heartbeats the server answers after it thaws. The measured value is the one the \
             derivation uses; the ratio carries the difference to production.\n",
            disagree.join("; ")
        );
    }
}
