//! The one place a cell's [`Measurement`] (the driver's output) becomes a
//! results row ([`CellRow`], the analysis' input): the bench and every
//! experiment go through [`cell_row`]. A new column is a field of `CellRow`
//! and a line here. It lives in the driver, which sits above the analysis
//! (the analysis never depends on the driver that produced its rows).

use bench_analysis::results::CellRow;
use bench_analysis::triggers::rtt_budget_ms;
use bench_core::hist::RttSummary;
use bench_core::{grid, hist};

use crate::cell::measurement::Measurement;

/// The build of this binary: `release` or `debug` (the `build_profile` column).
pub const BUILD_PROFILE: &str = if cfg!(debug_assertions) {
    "debug"
} else {
    "release"
};

/// What a row reads off a measurement's histograms: each summarised, the
/// p99's interval, and the corrected samples over trigger 1's budget at the
/// margin the SDK applied.
struct Summaries {
    corrected: RttSummary,
    ci99: (u64, u64),
    tick_lag: RttSummary,
    gap: RttSummary,
    rail: RttSummary,
    margin_effective: f64,
    over_budget: u64,
}

impl Summaries {
    fn of(m: &Measurement) -> Self {
        let (plan, hists) = (&m.plan, &m.workers.hists);
        let corrected = hist::summarize(&hists.corrected);
        let margin_effective = m.margin_effective();
        let budget_us = (rtt_budget_ms(
            plan.lease.as_millis() as u64,
            plan.session_ttl.as_millis() as u64,
            margin_effective,
        ) * 1e3) as u64;
        Summaries {
            over_budget: corrected.count - hists.corrected.count_between(0, budget_us),
            corrected,
            ci99: hist::quantile_ci95(&hists.corrected, 0.99).unwrap_or_default(),
            tick_lag: hist::summarize(&hists.tick_lag),
            gap: hist::summarize(&hists.gap),
            rail: hist::summarize(&hists.rail),
            margin_effective,
        }
    }
}

/// The one constructor of a results row: configuration from the plan,
/// counts from the ledger difference, client-side counts from the pool,
/// the RTT summary from the merged histogram, and throughput over the
/// measured window.
pub fn cell_row(m: &Measurement) -> CellRow {
    let (plan, tally, rtt) = (&m.plan, &m.workers.tally, m.rtt());
    let hb = &m.workers.heartbeat;
    let Summaries {
        corrected,
        ci99: (ci_lo, ci_hi),
        tick_lag,
        gap,
        rail,
        margin_effective,
        over_budget,
    } = Summaries::of(m);
    let rail_ms = |us: u64| {
        if rail.count == 0 {
            f64::NAN
        } else {
            us as f64 / 1e3
        }
    };
    let window_s = m.window.as_secs_f64();
    let spec_or_none = |s: Option<String>| s.unwrap_or_else(|| "none".into());
    CellRow {
        run_id: plan.run_id.clone(),
        margin: plan.margin,
        margin_policy: plan.policy.to_string(),
        lease_ms: plan.lease.as_millis() as u64,
        session_ttl_ms: plan.session_ttl.as_millis() as u64,
        workers: plan.workers,
        duration_s: window_s,
        rail_p50_ms: plan.rail_latency.p50().as_secs_f64() * 1e3,
        rail_p99_ms: plan.rail_latency.p99().as_secs_f64() * 1e3,
        hb_count: rtt.count,
        hb_rtt_p50_us: rtt.p50,
        hb_rtt_p90_us: rtt.p90,
        hb_rtt_p99_us: rtt.p99,
        hb_rtt_p999_us: rtt.p999,
        hb_rtt_max_us: rtt.max,
        payouts_paid: m.ledger.paid,
        throughput_per_s: if window_s > 0.0 {
            m.ledger.paid as f64 / window_s
        } else {
            0.0
        },
        abandoned_insufficient_lease: tally.abandoned_insufficient_lease,
        lock_lost: tally.lock_lost,
        renewals: m.workers.renewals,
        fenced_out: m.ledger.fenced_out_total,
        duplicate_attempted: m.ledger.duplicate_attempted,
        usable_lease_fraction: tally.usable_lease_fraction,
        hb_attempts: hb.attempts,
        hb_timeouts: hb.timeouts,
        hb_errors: hb.errors,
        session_lost: hb.sessions_lost(),
        hb_tick_lag_p99_us: tick_lag.p99,
        hb_rtt_corrected_p50_us: corrected.p50,
        hb_rtt_corrected_p99_us: corrected.p99,
        hb_rtt_corrected_p999_us: corrected.p999,
        fenced_out_fence1: m.ledger.fenced_out_fence1,
        fenced_out_fence2: m.ledger.fenced_out_fence2,
        fenced_out_believed_held: m.fences.believed_held(),
        rail_measured_p50_ms: rail_ms(rail.p50),
        rail_measured_p99_ms: rail_ms(rail.p99),
        cpu_bench_s: m.cpu.bench_s,
        cpu_lock_server_s: m.cpu.lock_server_s,
        cpu_rail_stub_s: m.cpu.rail_stub_s,
        repeat: plan.repeat,
        cell: plan.id.clone(),
        seed: plan.seed,
        net_delay: spec_or_none(plan.conditions.net_delay.map(|d| d.to_string())),
        server_pause: spec_or_none(plan.conditions.server_pause.map(|p| p.to_string())),
        rail_latency: plan.rail_latency.to_string(),
        rail_read_timeout_ms: plan.rail_read_timeout.as_millis() as u64,
        worst_case_hop_ms: plan.worst_case_hop.as_millis() as u64,
        client_check: plan.client_check,
        acquire_failed: tally.acquire_failed,
        abandoned_lost: tally.abandoned_lost,
        attempts: tally.attempts,
        paid_twice: m.ledger.paid_twice,
        stale_paid: m.ledger.stale_paid,
        ledger_ok: m.ledger.holds(),
        margin_effective,
        hb_rtt_mean_us: rtt.mean,
        hb_replies: hb.replies,
        hb_ticks: hb.ticks,
        hb_ticks_missed: hb.ticks_missed,
        session_lost_expired: hb.sessions_lost_expired,
        session_lost_unknown: hb.sessions_lost_unknown,
        session_lost_deadline: hb.sessions_lost_deadline,
        hb_corrected_count: corrected.count,
        hb_rtt_corrected_max_us: corrected.max,
        hb_rtt_corrected_p99_lo_us: ci_lo,
        hb_rtt_corrected_p99_hi_us: ci_hi,
        hb_corrected_over_budget: over_budget,
        hb_tick_lag_max_us: tick_lag.max,
        rail_measured_count: rail.count,
        rail_transport_errors: tally.rail_transport_errors,
        believed_held_submits: m.fences.believed_submits,
        fenced_out_fence1_untraced: m.fences.fence1_untraced(),
        fenced_out_fence2_untraced: m.fences.fence2_untraced(),
        cpu_workers_s: m.workers.cpu_workers_s,
        warmup_s: plan.warmup.as_secs_f64(),
        build_profile: BUILD_PROFILE.to_owned(),
        cpu_quota: plan.cpu_quota.clone().unwrap_or_default(),
        backend: m.backend.to_string(),
        margin_applied_count: m.workers.margins.count,
        group: grid::group_of(&plan.id).to_owned(),
        idle_sessions: m.idle_sessions,
        stopped_by: m.stopped_by.to_string(),
        lock_server_rss_peak_kb: m.lock_server_rss_peak_kb.map_or(f64::NAN, |kb| kb as f64),
        idle_reopened: m.idle_reopened,
        tls: if plan.conditions.tls { "tls" } else { "none" }.to_owned(),
        heartbeat_divisor: plan.heartbeat_divisor,
        hb_gap_count: gap.count,
        hb_gap_p50_us: gap.p50,
        hb_gap_p99_us: gap.p99,
        hb_gap_max_us: gap.max,
        hb_gaps_over_window: hb.gaps_over_window,
        ..appended_columns(m)
    }
}

/// The columns appended last: the freezes applied, long holds and
/// multi-step payouts (`--hold`, `--steps`), the rail's fences; every other
/// column at its default, for [`cell_row`] to fill.
fn appended_columns(m: &Measurement) -> CellRow {
    let (plan, tally) = (&m.plan, &m.workers.tally);
    CellRow {
        server_pauses: m.server_pauses,
        hold: plan
            .hold
            .map_or_else(|| "none".to_owned(), |h| h.to_string()),
        steps: plan.steps,
        abandoned_mid_payout: tally.abandoned_mid_payout,
        rail_fences: m.rail_fences.to_string(),
        ..renewal_columns(m)
    }
}

/// The renewal (L5) columns: its counts, its raw and corrected RTT, and the
/// renewals per payout finished; every other column at its default.
fn renewal_columns(m: &Measurement) -> CellRow {
    let (hb, hists) = (&m.workers.heartbeat, &m.workers.hists);
    let (raw, corrected) = (
        hist::summarize(&hists.renew),
        hist::summarize(&hists.renew_corrected),
    );
    // `payouts_paid` counts ledger payouts: legs, `steps` to a payout.
    let payouts = m.ledger.paid as f64 / f64::from(m.plan.steps.max(1));
    CellRow {
        renew_attempts: hb.renew_attempts,
        renew_timeouts: hb.renew_timeouts,
        renew_refusals: hb.renew_refusals,
        renew_errors: hb.renew_errors,
        renew_count: raw.count,
        renew_rtt_p50_us: raw.p50,
        renew_rtt_p99_us: raw.p99,
        renew_rtt_corrected_p50_us: corrected.p50,
        renew_rtt_corrected_p99_us: corrected.p99,
        renewals_per_payout: if payouts > 0.0 {
            m.workers.renewals as f64 / payouts
        } else {
            f64::NAN
        },
        ..CellRow::default()
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use fencepost_api::ledger_check::{LedgerCheck, Violation, ViolationKind};

    use crate::cell::{CellPlan, Conditions, FenceTrace, Measurement, PoolReport, ledger_delta};
    use bench_core::backend::BackendKind;
    use bench_core::cpu::CpuUse;
    use bench_core::grid::{PauseSpec, PolicySpec};
    use bench_core::timebase::TimeBase;

    use super::*;

    fn plan() -> CellPlan {
        let lease = Duration::from_secs(1);
        CellPlan {
            id: "ttl=1s_margin=0.30".into(),
            run_id: "run".into(),
            lease,
            margin: 0.3,
            policy: PolicySpec::Fixed,
            repeat: 0,
            session_ttl: Duration::from_millis(500),
            heartbeat_divisor: 4,
            time_base: TimeBase::for_lease(lease, true),
            rail_latency: "fixed:2ms".parse().unwrap(),
            rail_read_timeout: Duration::from_millis(166),
            worst_case_hop: Duration::from_millis(233),
            acquire_budget: lease / 4,
            client_check: true,
            workers: 4,
            duration: Duration::from_secs(10),
            payouts: 100,
            payout_prefix: "bench".into(),
            seed: 9,
            conditions: Conditions {
                net_delay: None,
                tls: false,
                server_pause: Some(PauseSpec {
                    every: Duration::from_secs(2),
                    pause_for: Duration::from_millis(300),
                }),
            },
            warmup: Duration::from_millis(350),
            cpu_quota: None,
            sampling: Default::default(),
            hold: None,
            steps: 1,
        }
    }

    fn check(paid: u64, paid_twice: u64, fenced: u64, violations: usize) -> LedgerCheck {
        LedgerCheck {
            payouts: 1000,
            paid,
            paid_twice,
            stale_paid: 0,
            fenced_out_fence1: fenced,
            fenced_out_fence2: 0,
            fenced_out_total: fenced,
            duplicate_attempted: 0,
            not_claimed: 0,
            violations: (0..violations)
                .map(|_| Violation {
                    payout_id: None,
                    kind: ViolationKind::PaidTwice,
                    detail: "x".into(),
                })
                .collect(),
        }
    }

    /// Every ledger count of a row is the window's difference, the throughput
    /// is over the measured window (not the requested duration), and the
    /// configuration comes from the plan, nothing patched in afterwards.
    #[test]
    fn a_row_takes_every_ledger_count_as_a_difference_and_the_measured_window() {
        let before = check(40, 1, 2, 1);
        let after = check(90, 1, 5, 1);
        let mut workers = PoolReport::default();
        // 99 gaps of 87 ms (a period at k = 4) and one censored 400 ms one.
        for _ in 0..99 {
            workers.hists.gap.record(87_000).unwrap();
        }
        workers.hists.gap.record(400_000).unwrap();
        workers.heartbeat.gaps_over_window = 1;
        workers.heartbeat.sessions_lost_deadline = 1;
        let m = Measurement {
            plan: plan(),
            window: Duration::from_secs(4),
            ledger: ledger_delta(&before, &after),
            ledger_after: after,
            workers,
            cpu: CpuUse::default(),
            fences: FenceTrace::default(),
            backend: BackendKind::Fencepost,
            rail_fences: Default::default(),
            blocks: None,
            stopped_by: Default::default(),
            idle_sessions: 0,
            lock_server_rss_peak_kb: None,
            idle_reopened: 0,
            server_pauses: 2,
        };
        let row = cell_row(&m);
        assert_eq!(row.heartbeat_divisor, 4);
        assert_eq!((row.hb_gap_count, row.hb_gaps_over_window), (100, 1));
        assert_eq!(row.hb_gaps_over_window, row.session_lost_deadline);
        assert!((86_900..=87_100).contains(&row.hb_gap_p50_us), "{row:?}");
        assert!(row.hb_gap_max_us >= 400_000, "{row:?}");
        assert_eq!(row.server_pauses, 2);
        assert_eq!(row.payouts_paid, 50);
        assert_eq!(
            row.paid_twice, 0,
            "the earlier double payment is not this cell's"
        );
        assert_eq!(row.fenced_out, 3);
        assert!(
            !row.ledger_ok,
            "the invariant is judged on the whole ledger"
        );
        assert_eq!(
            row.throughput_per_s, 12.5,
            "50 paid over 4 s, not over --duration 10 s"
        );
        assert_eq!(row.duration_s, 4.0);
        assert_eq!(
            (row.run_id.as_str(), row.cell.as_str(), row.seed),
            ("run", "ttl=1s_margin=0.30", 9)
        );
        assert_eq!(
            (
                row.session_ttl_ms,
                row.rail_read_timeout_ms,
                row.worst_case_hop_ms
            ),
            (500, 166, 233)
        );
        assert_eq!(
            (row.server_pause.as_str(), row.net_delay.as_str()),
            ("2s:300ms", "none")
        );
        assert_eq!(row.margin_effective, 0.3);
        assert_eq!(
            (row.fenced_out_fence1, row.fenced_out_fence2),
            (3, 0),
            "fence 1 and fence 2 apart, each a window difference"
        );
        assert_eq!(row.warmup_s, 0.35);
        assert!(
            row.rail_measured_p50_ms.is_nan() && row.cpu_lock_server_s.is_nan(),
            "no submits and no pid: not measured, never 0"
        );
        assert_eq!(row.cpu_quota, "", "not part of a throttle pair");
        assert_eq!(row.rail_fences, "on");
    }
}
