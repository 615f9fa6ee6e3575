//! §10b: long payouts, from `long-hold/results.csv`: what a margin costs a
//! payout that outlives its lease (ADR-006 §6.3) — the renewals it needs
//! and how often D4 abandons it between two of its steps.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use bench_analysis::results::CellRow;

use crate::adr::evidence::model::Evidence;

/// One margin of the long-hold step, summed over its repeats.
#[derive(Default)]
struct PerMargin {
    cells: usize,
    attempts: u64,
    legs_paid: u64,
    steps: u32,
    renewals: u64,
    renew_attempts: u64,
    renew_timeouts: u64,
    renew_refusals: u64,
    renew_p99_us: u64,
    mid_payout: u64,
    abandoned: u64,
    ledger_failed: usize,
}

impl PerMargin {
    fn add(&mut self, r: &CellRow) {
        self.ledger_failed += usize::from(!r.ledger_ok);
        self.cells += 1;
        self.attempts += r.attempts;
        self.legs_paid += r.payouts_paid;
        self.steps = r.steps.max(1);
        self.renewals += r.renewals;
        self.renew_attempts += r.renew_attempts;
        self.renew_timeouts += r.renew_timeouts;
        self.renew_refusals += r.renew_refusals;
        self.renew_p99_us = self.renew_p99_us.max(r.renew_rtt_p99_us);
        self.mid_payout += r.abandoned_mid_payout;
        self.abandoned += r.abandoned_insufficient_lease + r.abandoned_lost;
    }

    /// Payouts finished: legs paid over the legs of one payout.
    fn payouts(&self) -> f64 {
        self.legs_paid as f64 / f64::from(self.steps.max(1))
    }
}

/// The rows of the long-hold step, summed per margin (ascending).
fn per_margin(rows: &[CellRow]) -> BTreeMap<u64, PerMargin> {
    let mut out: BTreeMap<u64, PerMargin> = BTreeMap::new();
    for r in rows {
        let key = (r.margin * 1e6).round() as u64;
        out.entry(key).or_default().add(r);
    }
    out
}

/// A ratio with two decimals, or `—` over nothing.
fn ratio(n: f64, d: f64) -> String {
    if d > 0.0 {
        format!("{:.2}", n / d)
    } else {
        "—".into()
    }
}

/// §10b: renewals per payout and abandonment mid-payout per margin.
pub(crate) fn long_hold_section(md: &mut String, ev: &Evidence) {
    let _ = writeln!(md, "## 10b. Long payouts: the renewals a margin costs\n");
    let Some(rows) = ev.long_hold.as_ref().filter(|r| !r.is_empty()) else {
        md.push_str(&ev.absent("long-hold", "results.csv"));
        return;
    };
    let first = &rows[0];
    let _ = writeln!(
        md,
        "ADR-006 §6.3 names the margin's cost for long payouts: a renewal they would \
         otherwise not need. Here every payout does `{}` of work (production time, scaled \
         with the lease) in {} steps under one lock grant, each step claimed, checked (D4) \
         and submitted on its own, so a share of payouts outlive their lease and finish only \
         on renewals (L5); a D4 refusal between two steps abandons the payout mid-way and a \
         later holder resumes it ({}). Summed over repeats per margin:\n",
        first.hold,
        first.steps,
        ev.link("long-hold/results.csv", "long-hold/results.csv"),
    );
    let _ = writeln!(
        md,
        "| margin | cells | payouts finished | renewals per payout | renewals sent | \
         timed out | refused | renewal RTT p99, worst cell (ms) | abandoned mid-payout | \
         of attempts | all abandonment | ledger |\n\
         |---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"
    );
    for (ppm, m) in per_margin(rows) {
        let _ = writeln!(
            md,
            "| {:.2} | {} | {:.0} | {} | {} | {} | {} | {:.1} | {} | {} | {} | {} |",
            ppm as f64 / 1e6,
            m.cells,
            m.payouts(),
            ratio(m.renewals as f64, m.payouts()),
            m.renew_attempts,
            m.renew_timeouts,
            m.renew_refusals,
            m.renew_p99_us as f64 / 1e3,
            m.mid_payout,
            ratio(m.mid_payout as f64 * 100.0, m.attempts as f64) + " %",
            m.abandoned,
            if m.ledger_failed == 0 {
                "ok".to_owned()
            } else {
                format!("FAILED in {}", m.ledger_failed)
            },
        );
    }
    let _ = writeln!(
        md,
        "\nA larger margin shortens the usable window of every grant and renewal, so a payout \
         of the same length needs more renewals, and D4 has less lease left before each step. \
         These figures are reported beside the decision, not weighed in it: the proposal of \
         §11 is derived from the heartbeat and freeze evidence alone.\n"
    );
}
