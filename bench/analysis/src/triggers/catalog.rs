//! What the five ADR-006 §6.5 triggers are: their ids, the ADR's wording of
//! each with the rule the bench evaluates and the ADR's action ([`TRIGGERS`]),
//! and the shape of an answer ([`Verdict`], [`TriggerResult`]). No rule is
//! evaluated here.

use serde::{Deserialize, Serialize};

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
/// The sixth check, the lease-safety essay's (not ADR-006's): the host's
/// clock error exceeds the configured `lock.clock.offset-max`.
pub const CLOCK_OFFSET_BOUND: &str = "clock_offset_bound";

/// One §6.5 trigger: its id, the ADR's wording, the bench's rule and the ADR's action.
#[derive(Clone, Copy, Debug, PartialEq)]
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
               min(session, lease) × (1 − margin) / k, k the cell's heartbeat divisor, ADR-006: 3); just before the next heartbeat's reply \
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

/// The lease-safety essay's clock check, evaluated in production only (`bench
/// rules`, `bench triggers --prometheus`) beside the five of [`TRIGGERS`]: it is
/// not an ADR-006 §6.5 trigger, so `bench triggers DIR` keeps its five rows.
pub const CLOCK_CHECK: Trigger = Trigger {
    id: CLOCK_OFFSET_BOUND,
    adr_trigger: "The lease-safety essay's clock check (not ADR-006's): observed maxerror > \
                  lock.clock.offset-max",
    rule: "fired when the largest adjtimex maxerror any host reports over the window exceeds \
           lock.clock.offset-max, or a host reports its clock unsynchronised; \
           insufficient_data when no host reports it",
    unit: "ms",
    action: "The configured θ_max is not a bound this host can vouch for: restore the clock \
             discipline (chrony, ntpd) or raise lock.clock.offset-max, which widens the \
             server's grace.",
};

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
    pub(super) fn of(cond: bool) -> Verdict {
        if cond { Verdict::Fired } else { Verdict::Ok }
    }

    /// Every verdict, the worst first: the order a headline over many
    /// cells ranks them in (fired > insufficient_data > ok > not_evaluated).
    pub const WORST_FIRST: [Verdict; 4] = [
        Verdict::Fired,
        Verdict::InsufficientData,
        Verdict::Ok,
        Verdict::NotEvaluated,
    ];

    /// The headline of some cells' verdicts: the worst of them
    /// ([`Verdict::WORST_FIRST`]); `None` without cells.
    pub fn worst(verdicts: impl IntoIterator<Item = Verdict>) -> Option<Verdict> {
        let seen: Vec<Verdict> = verdicts.into_iter().collect();
        Verdict::WORST_FIRST.into_iter().find(|v| seen.contains(v))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_headline_is_the_worst_verdict_of_any_cell() {
        use Verdict::*;
        assert_eq!(Verdict::worst([Ok, NotEvaluated, Ok]), Some(Ok));
        assert_eq!(
            Verdict::worst([Ok, InsufficientData]),
            Some(InsufficientData)
        );
        assert_eq!(
            Verdict::worst([NotEvaluated, Fired, InsufficientData]),
            Some(Fired)
        );
        assert_eq!(Verdict::worst([NotEvaluated]), Some(NotEvaluated));
        assert_eq!(Verdict::worst([]), None);
    }
}
