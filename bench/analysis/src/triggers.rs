//! ADR-006 §6.5 "Revisit when" as data: all five triggers, each with its rule
//! over the results table, a [`Verdict`] per cell, and the ADR's action
//! quoted verbatim.
//!
//! `bench triggers DIR` ([`run_triggers_command`]) reads the results table,
//! evaluates every trigger on every cell (five rows per cell), writes
//! `triggers.json` and prints the table; the exit code is 0 when none fired
//! and 3 when any fired. Bad input (missing directory, no or unreadable
//! results table) is an `Err`, which the CLI maps to exit code 2 (see
//! [`crate::results::BadInput`]).
//!
//! A verdict is `fired`, `ok`, `insufficient_data` (the cell cannot say: too
//! few samples, an untraceable fence-out, unresolved intervals) or
//! `not_evaluated` (the trigger does not apply to the cell, with the reason:
//! trigger 4 with the client check off, trigger 5 outside a throttled vs
//! unthrottled pair). "ok" is only ever said on enough data (MEASUREMENT.md).
//!
//! Trigger 1 is evaluated on the heartbeat RTT corrected for coordinated
//! omission against `min(lease, session TTL) × margin / 3`, the same window
//! trigger 3 uses (a handle is usable only while its own and its session's
//! deadlines are ahead, C3). The §6.5 row "lock.session.ttl or
//! lock.default.ttl changes" is evaluated through its action (trigger 3, D4
//! against the window just before a heartbeat); "a move off Autopilot" through
//! the throttle experiment's pair of runs (trigger 5).

use std::fmt::Write as _;
use std::path::Path;

use anyhow::Context as _;
use fencepost_sdk::lease::{PPM, heartbeat_period};
use serde::{Deserialize, Serialize};

use crate::results::{CellRow, read_nonempty_results};

/// File name of the trigger verdicts in a results directory.
pub const TRIGGERS_JSON: &str = "triggers.json";

/// Exit code of `bench triggers` when no trigger fired.
pub const EXIT_NONE_FIRED: i32 = 0;
/// Exit code of `bench triggers` on bad input (any `Err` of [`run_triggers_command`]).
pub const EXIT_BAD_INPUT: i32 = 2;
/// Exit code of `bench triggers` when at least one trigger fired.
pub const EXIT_FIRED: i32 = 3;

/// Trigger 1: p99 heartbeat RTT exceeds one third of lease × margin.
pub const RTT_P99_VS_MARGIN: &str = "rtt_p99_vs_margin";
/// Trigger 2: the margin is the dominant throughput limiter.
pub const MARGIN_DOMINANT_LIMITER: &str = "margin_dominant_limiter";
/// Trigger 3: the usable window just before a heartbeat ≤ worst-case rail hop, so D4 refuses.
pub const D4_UNSATISFIABLE: &str = "d4_unsatisfiable";
/// Trigger 4: a fence refused a client that believed it held the lease.
pub const FENCED_OUT_WITH_CLIENT_CHECK: &str = "fenced_out_with_client_check";
/// Trigger 5: a move off Autopilot (no CPU throttling) makes the margin reducible.
pub const AUTOPILOT_THROTTLING: &str = "autopilot_throttling";

/// Samples a p99 needs before a verdict can be "ok" (MEASUREMENT.md: ~100 × the tail).
pub const MIN_SAMPLES_P99: u64 = 1_000;
/// Trigger 2: the margin's share of lost work at or above which it is "dominant".
pub const MARGIN_SHARE_MIN: f64 = 0.50;
/// Trigger 2: lost work, as a fraction of attempts, below which nothing limits
/// throughput materially, so the margin cannot be the dominant limiter.
pub const LOST_WORK_MIN: f64 = 0.05;
/// Trigger 5: the `cpu_quota` of a pair's unthrottled run.
pub const UNTHROTTLED: &str = "none";

/// One §6.5 trigger: its id, the ADR's wording, the bench's rule and the ADR's action.
#[derive(Clone, Copy, Debug)]
pub struct Trigger {
    /// Stable id used in `triggers.json`.
    pub id: &'static str,
    /// The ADR-006 §6.5 "Trigger" cell this check implements.
    pub adr_trigger: &'static str,
    /// The rule the bench evaluates, stated over results columns.
    pub rule: &'static str,
    /// Unit of `observed` and `threshold`.
    pub unit: &'static str,
    /// The ADR-006 §6.5 "Action" cell, verbatim.
    pub action: &'static str,
}

/// The five §6.5 triggers, in ADR order.
pub const TRIGGERS: [Trigger; 5] = [
    Trigger {
        id: RTT_P99_VS_MARGIN,
        adr_trigger: "Measured p99 heartbeat RTT exceeds one third of lease × margin",
        rule: "budget = min(lease_ms, session_ttl_ms) × margin_effective / 3; fired when \
               hb_rtt_corrected_p99 > budget on at least 1,000 corrected samples, or, with \
               fewer, when more than 10 of them (1 % of 1,000) exceed it, since any 1,000-sample \
               p99 would then exceed it too; ok when the p99 is within budget on at least 1,000 \
               samples; insufficient_data otherwise (observed = corrected p99 in ms, threshold = \
               budget in ms)",
        unit: "ms",
        action: "Raise the margin or shorten the heartbeat period; the current margin no \
                 longer covers observed jitter.",
    },
    Trigger {
        id: MARGIN_DOMINANT_LIMITER,
        adr_trigger: "The M7 benchmark shows the margin is the dominant throughput limiter",
        rule: "lost work = abandoned_insufficient_lease + abandoned_lost + acquire_failed + \
               lock_lost (attempts that did not pay, by cause; only the first is caused by \
               the margin); fired when abandoned_insufficient_lease ≥ 50 % of lost work AND \
               lost work ≥ 5 % of attempts (observed = the margin's share of lost work in %, \
               threshold = 50 %); insufficient_data without attempts",
        unit: "% of lost work",
        action: "Consider the adaptive margin (V2), not a smaller fixed one.",
    },
    Trigger {
        id: D4_UNSATISFIABLE,
        adr_trigger: "lock.session.ttl or lock.default.ttl changes",
        rule: "usable U = min(lease_ms, session_ttl_ms) × (1 − margin_effective) (a handle needs \
               its own and its session's deadlines ahead, C3); heartbeat period P (the SDK's: \
               min(session, lease) × (1 − margin) / 3); just before the next heartbeat's reply \
               the window is U − P − hb_rtt_corrected_p50; fired when that is ≤ \
               worst_case_hop_ms (rail read timeout + 2 s): D4 then refuses in part of every \
               heartbeat period. The detail gives that fraction, clamp((hop − (U − P − rtt)) / P, \
               0, 1) (observed = the window just before a heartbeat in ms, threshold = hop in ms)",
        unit: "ms",
        action: "Recheck lease × (1 − margin) > worst-case rail hop; a TTL cut can make D4 \
                 unsatisfiable.",
    },
    Trigger {
        id: FENCED_OUT_WITH_CLIENT_CHECK,
        adr_trigger: "Any lock.fenced.out > 0 traced to a client that believed it held the lease",
        rule: "each worker records (payout_id, token) when check_still_held and D4 passed before \
               a submit; the window's fence-outs are joined on it (fence 2 from the ledger's \
               submissions, fence 1 from the rail-stub's fenced_out log events); fired when \
               fenced_out_believed_held > 0; insufficient_data when a fence-1 refusal could not \
               be traced; not_evaluated with the client check off (nothing believed: the fences \
               are being demonstrated, UC-03)",
        unit: "fence-outs",
        action: "This ADR is being violated in code; fix the client, do not widen the fence.",
    },
    Trigger {
        id: AUTOPILOT_THROTTLING,
        adr_trigger: "A move off Autopilot removes CPU-throttling pauses",
        rule: "from a throttled vs unthrottled pair of runs (experiments throttle, release build, \
               column cpu_quota): the margin each needs so that trigger 1 stays quiet, \
               3 × hb_rtt_corrected_p99 / min(lease, session TTL), with the p99's 95 % interval; \
               fired when the intervals separate, the unthrottled run needs less, and less than \
               the margin in force (the margin is reducible off Autopilot); ok when they separate \
               otherwise; insufficient_data below 1,000 corrected samples or when the intervals \
               overlap (not resolved at 1 repeat); not_evaluated outside such a pair or in a \
               debug build (observed = this run's margin needed, threshold = margin in force)",
        unit: "margin",
        action: "The margin may be reducible — but only against measurement, never against \
                 intuition.",
    },
];

/// What a trigger says about one cell (C4: `fired|ok|insufficient_data|not_evaluated`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// The trigger's condition holds: take the ADR's action.
    Fired,
    /// It does not, on enough data.
    Ok,
    /// The cell cannot tell (too few samples, an untraced event, unresolved intervals).
    InsufficientData,
    /// The trigger does not apply to this cell (the detail says why).
    NotEvaluated,
}

impl Verdict {
    /// The word in `triggers.json`.
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Fired => "fired",
            Verdict::Ok => "ok",
            Verdict::InsufficientData => "insufficient_data",
            Verdict::NotEvaluated => "not_evaluated",
        }
    }

    /// Fired if `cond`, else ok.
    fn of(cond: bool) -> Verdict {
        if cond { Verdict::Fired } else { Verdict::Ok }
    }
}

/// One trigger evaluated on one cell; an element of `triggers.json`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct TriggerResult {
    /// Trigger id, e.g. `rtt_p99_vs_margin`.
    pub trigger: String,
    /// Cell id from the results table.
    pub cell: String,
    /// Whether the trigger fired on this cell (`verdict == fired`).
    pub fired: bool,
    /// The verdict.
    pub verdict: Verdict,
    /// The measured value compared with `threshold`, in `unit` (0 when not evaluated).
    pub observed: f64,
    /// The threshold, in `unit`.
    pub threshold: f64,
    /// ADR-006 §6.5's action for this trigger, verbatim.
    pub action: String,
    /// Unit of `observed` and `threshold`.
    pub unit: String,
    /// The rule evaluated.
    pub rule: String,
    /// The numbers behind the verdict, in words.
    pub detail: String,
}

/// Looks a trigger up by id.
pub fn trigger(id: &str) -> Option<&'static Trigger> {
    TRIGGERS.iter().find(|t| t.id == id)
}

/// Evaluates every trigger on every row; results are grouped by trigger (ADR
/// order), then in row order.
pub fn evaluate(rows: &[CellRow]) -> Vec<TriggerResult> {
    let per_row: Vec<[TriggerResult; 5]> = rows.iter().map(|r| evaluate_row(r, rows)).collect();
    (0..TRIGGERS.len())
        .flat_map(|t| per_row.iter().map(move |r| r[t].clone()))
        .collect()
}

/// Evaluates the five triggers on `row`, in [`TRIGGERS`] order; `table` is
/// the results table it belongs to (trigger 5 looks for its pair there).
pub fn evaluate_row(row: &CellRow, table: &[CellRow]) -> [TriggerResult; 5] {
    [
        rtt_p99_vs_margin(row),
        margin_dominant_limiter(row),
        d4_unsatisfiable(row),
        fenced_out_with_client_check(row),
        autopilot_throttling(row, table),
    ]
}

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
    to_us(lease_ms.min(session_ttl_ms) as f64 * margin / 3.0)
}

/// The smallest margin for which `p99_us` stays within trigger 1's budget
/// in a cell shaped like `row`: `3 × p99 / min(lease, session TTL)`.
pub fn margin_needed(row: &CellRow, p99_us: u64) -> f64 {
    3.0 * p99_us as f64 / 1000.0 / usable_base_ms(row).max(1) as f64
}

/// With fewer than 1,000 samples, padding to 1,000 with samples inside the
/// budget leaves the p99 above it when more than this many (1 % of 1,000) are above it.
const OVER_BUDGET_FLOOR: u64 = (MIN_SAMPLES_P99 as f64 * 0.01) as u64;

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
fn rtt_p99_vs_margin(row: &CellRow) -> TriggerResult {
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
fn margin_dominant_limiter(row: &CellRow) -> TriggerResult {
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
        let usable_ms = to_us(usable_base_ms(row) as f64 * (1.0 - row.margin_effective));
        let ppm = (row.margin_effective * PPM as f64).round() as u64;
        let period = heartbeat_period(row.session_ttl_ms, Some(row.lease_ms), ppm);
        let period_ms = to_us(period.as_secs_f64() * 1e3);
        let rtt_ms = row.hb_rtt_corrected_p50_us as f64 / 1000.0;
        D4Window {
            usable_ms,
            period_ms,
            rtt_ms,
            before_heartbeat_ms: to_us(usable_ms - period_ms - rtt_ms),
            hop_ms: row.worst_case_hop_ms as f64,
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
fn d4_unsatisfiable(row: &CellRow) -> TriggerResult {
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
fn fenced_out_with_client_check(row: &CellRow) -> TriggerResult {
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
fn autopilot_throttling(row: &CellRow, table: &[CellRow]) -> TriggerResult {
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

/// Whether trigger `id` fired on `cell`.
pub fn fired(results: &[TriggerResult], id: &str, cell: &str) -> bool {
    results
        .iter()
        .any(|r| r.fired && r.trigger == id && r.cell == cell)
}

/// The verdict of trigger `id` on `cell`, if evaluated.
pub fn verdict_of(results: &[TriggerResult], id: &str, cell: &str) -> Option<Verdict> {
    results
        .iter()
        .find(|r| r.trigger == id && r.cell == cell)
        .map(|r| r.verdict)
}

/// The exit code of `bench triggers` for these results: 3 if any fired, else 0.
pub fn exit_code(results: &[TriggerResult]) -> i32 {
    if results.iter().any(|r| r.fired) {
        EXIT_FIRED
    } else {
        EXIT_NONE_FIRED
    }
}

/// Writes `triggers.json` (a JSON array of [`TriggerResult`]) into `dir`.
pub fn write_triggers(dir: &Path, results: &[TriggerResult]) -> anyhow::Result<()> {
    let path = dir.join(TRIGGERS_JSON);
    let json = serde_json::to_string_pretty(results)?;
    std::fs::write(&path, json + "\n").with_context(|| format!("writing {}", path.display()))
}

/// Formats a number for the tables: integers plainly, the rest with 3 decimals.
pub fn fmt_value(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{v:.0}")
    } else {
        format!("{v:.3}")
    }
}

/// The verdict word of a result in the terminal table.
fn verdict_word(r: &TriggerResult) -> &'static str {
    match r.verdict {
        Verdict::Fired => "FIRED",
        v => v.as_str(),
    }
}

/// The trigger table as aligned plain text for a terminal, then a summary line.
pub fn format_table(results: &[TriggerResult]) -> String {
    let header = [
        "trigger",
        "cell",
        "observed",
        "threshold",
        "verdict",
        "action",
    ];
    let rows: Vec<[String; 6]> = results
        .iter()
        .map(|r| {
            [
                r.trigger.clone(),
                r.cell.clone(),
                format!("{} {}", fmt_value(r.observed), r.unit),
                format!("{} {}", fmt_value(r.threshold), r.unit),
                verdict_word(r).to_owned(),
                if r.fired {
                    r.action.clone()
                } else {
                    "—".to_owned()
                },
            ]
        })
        .collect();
    let mut widths = header.map(|h| h.chars().count());
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let mut line = |cells: &[String]| {
        let mut text = String::new();
        for (i, (cell, w)) in cells.iter().zip(widths).enumerate() {
            if i + 1 == cells.len() {
                text.push_str(cell);
            } else {
                let pad = w - cell.chars().count();
                let _ = write!(text, "{cell}{}  ", " ".repeat(pad));
            }
        }
        out.push_str(text.trim_end());
        out.push('\n');
    };
    line(&header.map(str::to_owned));
    line(&widths.map(|w| "-".repeat(w)));
    for row in &rows {
        line(row);
    }
    let count = |v: Verdict| results.iter().filter(|r| r.verdict == v).count();
    let fired: Vec<String> = results
        .iter()
        .filter(|r| r.fired)
        .map(|r| format!("{}@{}", r.trigger, r.cell))
        .collect();
    let _ = writeln!(
        out,
        "\n{} of {} checks fired{}; {} ok, {} insufficient_data, {} not_evaluated",
        fired.len(),
        results.len(),
        if fired.is_empty() {
            String::new()
        } else {
            format!(": {}", fired.join(", "))
        },
        count(Verdict::Ok),
        count(Verdict::InsufficientData),
        count(Verdict::NotEvaluated),
    );
    out
}

/// The trigger table as Markdown (for `report.md`).
pub fn markdown_table(results: &[TriggerResult]) -> String {
    let mut out = String::from(
        "| trigger | cell | observed | threshold | verdict | detail | action |\n\
         |---|---|---:|---:|---|---|---|\n",
    );
    for r in results {
        let verdict = match r.verdict {
            Verdict::Fired => "**FIRED**".to_owned(),
            v => v.as_str().to_owned(),
        };
        let action = if r.fired { r.action.as_str() } else { "—" };
        let _ = writeln!(
            out,
            "| `{}` | `{}` | {} {} | {} {} | {verdict} | {} | {action} |",
            r.trigger,
            r.cell,
            fmt_value(r.observed),
            r.unit,
            fmt_value(r.threshold),
            r.unit,
            r.detail.replace('|', "\\|"),
        );
    }
    out
}

/// `bench triggers DIR`: reads the results, evaluates, writes `triggers.json`,
/// prints the table to stdout and returns the exit code (0 none fired, 3 any
/// fired). Every `Err` is bad input: the CLI exits 2.
pub fn run_triggers_command(dir: &Path) -> anyhow::Result<i32> {
    let rows = read_nonempty_results(dir)?;
    let results = evaluate(&rows);
    write_triggers(dir, &results)?;
    print!("{}", format_table(&results));
    Ok(exit_code(&results))
}
