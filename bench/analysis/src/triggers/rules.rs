//! The five rules of ADR-006 §6.5 over one results row, each giving a
//! [`TriggerResult`] with its numbers in words, and the arithmetic they share
//! with the projection and the plots (trigger 1's budget, trigger 3's
//! [`D4Window`], lost work). Trigger 1 runs on the corrected RTT against
//! `min(lease, session TTL) × margin / 3`; trigger 5 needs the row's
//! throttled vs unthrottled partner, so it also sees the table.

use std::fmt::Write as _;

use fencepost_sdk::lease::{HEARTBEAT_DIVISOR, heartbeat_period, ppm_nearest};

use super::catalog::{TRIGGERS, Trigger, TriggerResult, Verdict};
use crate::results::CellRow;

/// Samples a p99 needs before a verdict can be "ok" (docs/measurement.md: ~100 × the tail).
pub const MIN_SAMPLES_P99: u64 = 1_000;
/// Trigger 2: the margin's share of lost work at or above which it is "dominant".
pub const MARGIN_SHARE_MIN: f64 = 0.50;
/// Trigger 2: lost work, as a fraction of attempts, below which nothing limits
/// throughput materially, so the margin cannot be the dominant limiter.
pub const LOST_WORK_MIN: f64 = 0.05;
/// Trigger 5: the `cpu_quota` of a pair's unthrottled run.
pub const UNTHROTTLED: &str = "none";
/// Trigger 1: the tail a p99 leaves above it, `1 − 0.99`: the p99 exceeds the
/// budget when more than this share of the samples does.
pub const P99_TAIL: f64 = 0.01;
/// Trigger 1: the budget is `min(lease, session TTL) × margin` over this
/// (the API's own constant, `fencepost_api::buckets::TRIGGER1_DIVISOR`).
pub const BUDGET_DIVISOR: f64 = fencepost_api::buckets::TRIGGER1_DIVISOR;

/// Builds a result for trigger `t` on `row`.
fn result(
    t: &Trigger,
    row: &CellRow,
    verdict: Verdict,
    observed: f64,
    threshold: f64,
    detail: String,
) -> TriggerResult {
    TriggerResult {
        trigger: t.id.to_owned(),
        cell: row.cell.clone(),
        fired: verdict == Verdict::Fired,
        verdict,
        observed,
        threshold,
        unit: t.unit.to_owned(),
        action: t.action.to_owned(),
        rule: t.rule.to_owned(),
        detail,
    }
}

/// Rounds milliseconds to whole microseconds, the resolution of every measured
/// time here, so that e.g. `1000 × (1 − 0.7)` compares equal to `300`.
fn to_us(ms: f64) -> f64 {
    (ms * 1000.0).round() / 1000.0
}

/// The window a handle is usable for, before the margin: the shorter of the
/// lease and the session TTL, in ms.
fn usable_base_ms(row: &CellRow) -> u64 {
    row.lease_ms.min(row.session_ttl_ms)
}

/// Trigger 1's budget, `min(lease, session TTL) × margin / 3`, in ms.
pub fn rtt_budget_ms(lease_ms: u64, session_ttl_ms: u64, margin: f64) -> f64 {
    to_us(fencepost_api::buckets::trigger1_budget(
        lease_ms.min(session_ttl_ms) as f64,
        margin,
    ))
}

/// The smallest margin for which `p99_us` stays within trigger 1's budget
/// in a cell shaped like `row`: `3 × p99 / min(lease, session TTL)`.
pub fn margin_needed(row: &CellRow, p99_us: u64) -> f64 {
    fencepost_api::buckets::trigger1_margin_for(p99_us as f64, usable_base_ms(row).max(1) as f64)
}

/// With fewer than 1,000 samples, padding to 1,000 with samples inside the
/// budget leaves the p99 above it when more than this many (1 % of 1,000) are above it.
pub const OVER_BUDGET_FLOOR: u64 = (MIN_SAMPLES_P99 as f64 * P99_TAIL) as u64;

/// Trigger 1's verdict on `n` corrected samples, `over` of them above the
/// budget: on ≥ 1,000 samples fired iff p99 > budget; with fewer, fired when
/// more than 10 are above it (any 1,000-sample p99 would be), else
/// `insufficient_data`. Shared with `projection.csv`.
pub fn trigger1_verdict(n: u64, over: u64, p99_ms: f64, budget_ms: f64) -> Verdict {
    if n >= MIN_SAMPLES_P99 {
        Verdict::of(p99_ms > budget_ms)
    } else if over > OVER_BUDGET_FLOOR {
        Verdict::Fired
    } else {
        Verdict::InsufficientData
    }
}

/// Trigger 1, in ms, on the corrected RTT.
pub(super) fn rtt_p99_vs_margin(row: &CellRow) -> TriggerResult {
    let p99_ms = row.hb_rtt_corrected_p99_us as f64 / 1000.0;
    let budget_ms = rtt_budget_ms(row.lease_ms, row.session_ttl_ms, row.margin_effective);
    let n = row.hb_corrected_count;
    let over = row.hb_corrected_over_budget;
    let over_floor = OVER_BUDGET_FLOOR;
    let verdict = trigger1_verdict(n, over, p99_ms, budget_ms);
    let cmp = if p99_ms > budget_ms { ">" } else { "≤" };
    let mut detail = format!(
        "corrected p99 {p99_ms:.3} ms {cmp} min(lease {} ms, session {} ms) × {:.2} / 3 = \
         {budget_ms:.3} ms; {n} corrected samples, {over} above the budget; raw p99 {:.3} ms; \
         {} of {} exchanges timed out, {} session(s) lost",
        row.lease_ms,
        row.session_ttl_ms,
        row.margin_effective,
        row.hb_rtt_p99_us as f64 / 1000.0,
        row.hb_timeouts,
        row.hb_attempts,
        row.session_lost,
    );
    match verdict {
        Verdict::InsufficientData => {
            let _ = write!(
                detail,
                "; fewer than {MIN_SAMPLES_P99} samples and at most {over_floor} above the \
                 budget: the p99 is not known well enough to say ok"
            );
        }
        Verdict::Fired if n < MIN_SAMPLES_P99 => {
            let _ = write!(
                detail,
                "; fewer than {MIN_SAMPLES_P99} samples, but more than {over_floor} above the \
                 budget put the p99 of any {MIN_SAMPLES_P99} samples above it"
            );
        }
        _ => {}
    }
    result(&TRIGGERS[0], row, verdict, p99_ms, budget_ms, detail)
}

/// Lost work of a cell: attempts that did not pay, summed over their causes.
pub fn lost_work(row: &CellRow) -> u64 {
    row.abandoned_insufficient_lease + row.abandoned_lost + row.acquire_failed + row.lock_lost
}

/// Trigger 2, in % of lost work.
pub(super) fn margin_dominant_limiter(row: &CellRow) -> TriggerResult {
    let lost = lost_work(row);
    let share = if lost == 0 {
        0.0
    } else {
        row.abandoned_insufficient_lease as f64 / lost as f64
    };
    let lost_frac = if row.attempts == 0 {
        0.0
    } else {
        lost as f64 / row.attempts as f64
    };
    let dominant = lost > 0 && share >= MARGIN_SHARE_MIN;
    let material = row.attempts > 0 && lost_frac >= LOST_WORK_MIN;
    let detail = format!(
        "insufficient-lease {} of lost {lost} ({:.1} % {} 50 %); lost {lost} of {} attempts \
         ({:.1} % {} 5 %)",
        row.abandoned_insufficient_lease,
        share * 100.0,
        if dominant { "≥" } else { "<" },
        row.attempts,
        lost_frac * 100.0,
        if material { "≥" } else { "<" },
    );
    let verdict = if row.attempts == 0 {
        Verdict::InsufficientData
    } else {
        Verdict::of(dominant && material)
    };
    result(
        &TRIGGERS[1],
        row,
        verdict,
        share * 100.0,
        MARGIN_SHARE_MIN * 100.0,
        detail,
    )
}

/// Trigger 3's arithmetic for one cell, in ms.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct D4Window {
    /// `min(lease, session TTL) × (1 − margin)`: the window right after a heartbeat's send.
    pub usable_ms: f64,
    /// The SDK's heartbeat period for the cell.
    pub period_ms: f64,
    /// The corrected RTT median taken off the window (lag + round trip), 0 without samples.
    pub rtt_ms: f64,
    /// `usable − period − rtt`: what is left just before the next heartbeat's reply.
    pub before_heartbeat_ms: f64,
    /// The worst-case rail hop D4 requires.
    pub hop_ms: f64,
}

impl D4Window {
    /// Trigger 3's numbers for `row`.
    pub fn of(row: &CellRow) -> Self {
        Self::from_parts(
            row.lease_ms,
            row.session_ttl_ms,
            row.margin_effective,
            row.hb_rtt_corrected_p50_us as f64 / 1000.0,
            row.worst_case_hop_ms as f64,
            row.heartbeat_divisor,
        )
    }

    /// Trigger 3's numbers for a lease, session TTL (ms), margin, corrected RTT
    /// median (ms), worst-case hop (ms) and heartbeat divisor k (period U / k;
    /// 0 reads as ADR-006's 3); `bench rules` takes the static part,
    /// `usable − period`, from here.
    pub fn from_parts(
        lease_ms: u64,
        session_ttl_ms: u64,
        margin: f64,
        rtt_ms: f64,
        hop_ms: f64,
        divisor: u32,
    ) -> Self {
        let usable_ms = to_us(lease_ms.min(session_ttl_ms) as f64 * (1.0 - margin));
        let ppm = ppm_nearest(margin);
        let k = if divisor == 0 {
            HEARTBEAT_DIVISOR
        } else {
            divisor
        };
        let period = heartbeat_period(session_ttl_ms, Some(lease_ms), ppm, k);
        let period_ms = to_us(period.as_secs_f64() * 1e3);
        D4Window {
            usable_ms,
            period_ms,
            rtt_ms,
            before_heartbeat_ms: to_us(usable_ms - period_ms - rtt_ms),
            hop_ms,
        }
    }

    /// The fraction of each heartbeat period in which D4 refuses: the
    /// remaining lease falls linearly from `usable − rtt` to `usable − period
    /// − rtt`, and D4 refuses where it is ≤ the hop.
    pub fn refusal_fraction(&self) -> f64 {
        if self.period_ms <= 0.0 {
            return if self.before_heartbeat_ms <= self.hop_ms {
                1.0
            } else {
                0.0
            };
        }
        ((self.hop_ms - self.before_heartbeat_ms) / self.period_ms).clamp(0.0, 1.0)
    }
}

/// Trigger 3, in ms: the window just before a heartbeat against the hop.
pub(super) fn d4_unsatisfiable(row: &CellRow) -> TriggerResult {
    let w = D4Window::of(row);
    let fired = w.before_heartbeat_ms <= w.hop_ms;
    let binding = if row.session_ttl_ms < row.lease_ms {
        "session TTL"
    } else {
        "lease"
    };
    let mut detail = format!(
        "min(lease {} ms, session {} ms) × (1 − {:.2}) = {:.1} ms (the {binding} binds); \
         heartbeat period {:.1} ms; just before a heartbeat's reply {:.1} − {:.1} − {:.3} \
         (corrected p50) = {:.1} ms {} worst-case hop {:.0} ms: D4 refuses in {:.1} % of each \
         heartbeat period",
        row.lease_ms,
        row.session_ttl_ms,
        row.margin_effective,
        w.usable_ms,
        w.period_ms,
        w.usable_ms,
        w.period_ms,
        w.rtt_ms,
        w.before_heartbeat_ms,
        if fired { "≤" } else { ">" },
        w.hop_ms,
        w.refusal_fraction() * 100.0,
    );
    if w.usable_ms - w.rtt_ms <= w.hop_ms {
        detail.push_str(
            " (every payout: even right after a heartbeat no lease is left for one rail call)",
        );
    }
    result(
        &TRIGGERS[2],
        row,
        Verdict::of(fired),
        w.before_heartbeat_ms,
        w.hop_ms,
        detail,
    )
}

/// Trigger 4, a count of traced fence-outs.
pub(super) fn fenced_out_with_client_check(row: &CellRow) -> TriggerResult {
    let traced = format!(
        "fence 1: {} ({} untraced), fence 2: {} ({} untraced); {} of them hit a (payout, token) \
         a worker believed held; {} submits after a passed check recorded",
        row.fenced_out_fence1,
        row.fenced_out_fence1_untraced,
        row.fenced_out_fence2,
        row.fenced_out_fence2_untraced,
        row.fenced_out_believed_held,
        row.believed_held_submits,
    );
    let (verdict, detail) = if !row.client_check {
        (
            Verdict::NotEvaluated,
            format!(
                "client check off (UC-03): no worker believed it held the lease, the fences \
                 are being demonstrated; {traced}"
            ),
        )
    } else if row.fenced_out_believed_held > 0 {
        (Verdict::Fired, traced)
    } else if row.fenced_out_fence1_untraced + row.fenced_out_fence2_untraced > 0 {
        (
            Verdict::InsufficientData,
            format!(
                "{traced}: a refusal the rail-stub's log (fence 1) or ledger listing (fence 2) \
                 did not show cannot be traced"
            ),
        )
    } else {
        (Verdict::Ok, traced)
    };
    result(
        &TRIGGERS[3],
        row,
        verdict,
        row.fenced_out_believed_held as f64,
        0.0,
        detail,
    )
}

/// The other run of `row`'s throttled vs unthrottled pair, if it has one:
/// same run, repeat, TTL and margin, one of the two unthrottled.
fn throttle_partner<'a>(row: &CellRow, table: &'a [CellRow]) -> Option<&'a CellRow> {
    if row.cpu_quota.is_empty() {
        return None;
    }
    table.iter().find(|o| {
        !o.cpu_quota.is_empty()
            && o.cpu_quota != row.cpu_quota
            && (o.cpu_quota == UNTHROTTLED) != (row.cpu_quota == UNTHROTTLED)
            && o.run_id == row.run_id
            && o.repeat == row.repeat
            && o.lease_ms == row.lease_ms
            && o.margin == row.margin
    })
}

/// The margin a run needs (trigger 1 quiet), with the 95 % interval of its p99.
fn margin_needed_ci(row: &CellRow) -> (f64, f64, f64) {
    (
        margin_needed(row, row.hb_rtt_corrected_p99_lo_us),
        margin_needed(row, row.hb_rtt_corrected_p99_us),
        margin_needed(row, row.hb_rtt_corrected_p99_hi_us),
    )
}

/// Trigger 5, a margin: from the throttled vs unthrottled pair, if any.
pub(super) fn autopilot_throttling(row: &CellRow, table: &[CellRow]) -> TriggerResult {
    let t = &TRIGGERS[4];
    let margin = row.margin_effective;
    let not_evaluated = |why: String| result(t, row, Verdict::NotEvaluated, 0.0, margin, why);
    let Some(partner) = throttle_partner(row, table) else {
        return not_evaluated(if row.cpu_quota.is_empty() {
            "needs a throttled vs unthrottled pair of runs (experiments throttle, release \
             build); this cell is not one"
                .to_owned()
        } else {
            format!(
                "cpu_quota {} but its pair's other run is not in the table",
                row.cpu_quota
            )
        });
    };
    let (unthrottled, throttled) = if row.cpu_quota == UNTHROTTLED {
        (row, partner)
    } else {
        (partner, row)
    };
    let own_need = margin_needed(row, row.hb_rtt_corrected_p99_us);
    if [row, partner].iter().any(|r| r.build_profile != "release") {
        return not_evaluated(
            "a debug build measured this pair: its heartbeat tail is the build's, not \
             Autopilot's; rerun experiments throttle from a release build"
                .to_owned(),
        );
    }
    let (u_lo, u_mid, u_hi) = margin_needed_ci(unthrottled);
    let (t_lo, t_mid, t_hi) = margin_needed_ci(throttled);
    let numbers = format!(
        "margin needed (3 × corrected p99 / min(lease, session)): unthrottled {u_mid:.3} \
         [{u_lo:.3}, {u_hi:.3}], throttled ({}) {t_mid:.3} [{t_lo:.3}, {t_hi:.3}] (95 % \
         intervals of the p99, independent samples assumed); margin in force {margin:.2}",
        throttled.cpu_quota
    );
    let few = [unthrottled, throttled]
        .iter()
        .map(|r| r.hb_corrected_count)
        .min()
        .unwrap_or(0);
    let (verdict, why) = if few < MIN_SAMPLES_P99 {
        (
            Verdict::InsufficientData,
            format!("a run has only {few} corrected samples (< {MIN_SAMPLES_P99})"),
        )
    } else if u_hi < t_lo {
        if u_hi < margin {
            (
                Verdict::Fired,
                format!(
                    "without throttling the margin needed drops below the margin in force: \
                     reducible, by trigger 1's budget alone, to at most {u_hi:.3} (the upper \
                     end of the unthrottled interval; triggers 3 and the clock grace still \
                     bound it)"
                ),
            )
        } else {
            (
                Verdict::Ok,
                "throttling costs margin, but the unthrottled run needs at least the margin in \
                 force: not reducible"
                    .to_owned(),
            )
        }
    } else if t_hi < u_lo {
        (
            Verdict::Ok,
            "the throttled run needs less margin than the unthrottled one: no throttling \
             pauses to remove"
                .to_owned(),
        )
    } else {
        (
            Verdict::InsufficientData,
            "the intervals overlap: not resolved at 1 repeat".to_owned(),
        )
    };
    result(
        t,
        row,
        verdict,
        own_need,
        margin,
        format!("{numbers}; {why}"),
    )
}
