//! Long holds and multi-step payouts (`--hold`, `--steps`) end to end: a
//! cell whose payouts hold their lock for longer than the lease renews it
//! (L5), pays every leg of the ledger at most once under one grant per
//! attempt, and keeps the ledger check; bad values of the two flags exit 2.

use std::collections::BTreeMap;
use std::process::Command;
use std::time::Duration;

use bench_core::grid::Cell;
use bench_driver::cell::{Hooks, Stack, Steady, measure};
use bench_driver::worker::leg_number;
use fencepost_api::rail::{PayoutState, SubmissionOutcome, bulk_payout_id};

use crate::driver::{config, temp_dir};

/// Payouts of 2–3 leases' work (`--hold` lognormal p50 20 s, p99 60 s
/// against the 30 s production lease, at `--ttl 1s`: 667 ms and 2 s) in
/// three legs: the workers renew, the ledger holds `payouts × 3` payouts,
/// every paid one paid by exactly one submission, and the legs of each
/// payout are paid in order (a later holder resumes at the first unpaid one).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_long_hold_renews_and_pays_every_leg_once_in_order() {
    const STEPS: u32 = 3;
    let mut cfg = config(None);
    cfg.workers = 4;
    cfg.payouts = 200;
    cfg.duration = Duration::from_secs(3);
    cfg.warmup = Some(Duration::ZERO);
    cfg.hold = Some("lognormal:p50=20s,p99=60s".parse().unwrap());
    cfg.steps = STEPS;
    let plan = cfg
        .plan(Cell::fixed(Duration::from_secs(1), 0.3))
        .in_run("hold");
    assert_eq!(
        plan.hold.map(|h| h.p50()),
        Some(Duration::from_nanos(666_666_667)),
        "the hold is scaled by the time base (1 s / 30 s)"
    );
    let dir = temp_dir("hold");
    let mut stack = Stack::start(&plan.stack_spec(&cfg.runtime), &dir)
        .await
        .unwrap();
    let measured = measure(&mut stack, &plan, &mut Steady, Hooks::default()).await;
    let ledger = stack.rail().ledger().await;
    stack.stop().await;
    let m = measured.unwrap().expect("not interrupted");
    let row = bench_driver::row::cell_row(&m);
    assert!(
        row.renewals > 0,
        "payouts outliving the lease renew: {row:?}"
    );
    // Renewals are an exchange of their own: every one has one outcome,
    // their RTTs are in their own histograms, never in the heartbeat's.
    assert_eq!(
        row.renew_attempts,
        row.renewals + row.renew_refusals + row.renew_timeouts + row.renew_errors,
        "{row:?}"
    );
    assert!(row.renew_count >= row.renewals, "{row:?}");
    assert!(row.renew_rtt_p50_us > 0 && row.renew_rtt_p99_us >= row.renew_rtt_p50_us);
    assert!(
        row.renew_rtt_corrected_p99_us >= row.renew_rtt_p50_us,
        "{row:?}"
    );
    assert_eq!(
        row.hb_count,
        row.hb_replies + row.hb_timeouts,
        "L2 only: {row:?}"
    );
    assert!(row.renewals_per_payout > 0.0, "{row:?}");
    assert_eq!(
        (row.steps, row.hold.starts_with("lognormal:")),
        (STEPS, true)
    );
    assert!(
        row.ledger_ok && row.paid_twice == 0 && row.stale_paid == 0,
        "{row:?}"
    );
    assert!(row.payouts_paid >= u64::from(STEPS), "{row:?}");

    let ledger = ledger.unwrap();
    assert_eq!(ledger.payouts.len() as u64, cfg.payouts * u64::from(STEPS));
    let paid: BTreeMap<String, usize> = ledger
        .payouts
        .iter()
        .map(|p| {
            let paying = p
                .submissions
                .iter()
                .filter(|s| s.outcome == SubmissionOutcome::Paid)
                .count();
            assert_eq!(
                paying,
                usize::from(p.state == PayoutState::Paid),
                "{}: one paying submission iff PAID",
                p.payout_id
            );
            (p.payout_id.clone(), paying)
        })
        .collect();
    let leg_paid = |n: u64, j: u32| paid[&bulk_payout_id("bench", leg_number(n, STEPS, j))] == 1;
    let mut complete = 0;
    for n in 1..=cfg.payouts {
        let legs: Vec<bool> = (0..STEPS).map(|j| leg_paid(n, j)).collect();
        assert!(
            legs.windows(2).all(|w| w[0] || !w[1]),
            "payout {n}: a leg paid before an earlier one: {legs:?}"
        );
        complete += u64::from(legs.iter().all(|&l| l));
    }
    assert!(complete > 0, "some payout finished all its legs");
}

/// `--hold` and `--steps` refuse bad values with exit 2, naming the flag.
#[test]
fn bad_hold_and_steps_exit_2_naming_the_flag() {
    let cases: &[(&[&str], &str)] = &[
        (
            &["run", "--hold", "gaussian:20s"],
            "--hold \"gaussian:20s\"",
        ),
        (&["sweep", "--hold", "lognormal:p50=60s,p99=20s"], "--hold"),
        (&["run", "--hold", "-1s"], "--hold"),
        (
            &["run", "--steps", "0"],
            "'--steps <K>': must be a whole number 1..=100",
        ),
        (&["sweep", "--steps", "101"], "--steps"),
    ];
    for (args, needle) in cases {
        let out = Command::new(env!("CARGO_BIN_EXE_bench"))
            .args(*args)
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains(needle),
            "{args:?} does not say {needle:?}: {err}"
        );
    }
}

/// The evidence document's long-payout section reads `long-hold/`'s table:
/// per margin, summed over repeats, the renewals per payout finished
/// (renewals ÷ legs paid × steps) and the abandonment mid-payout.
#[test]
fn the_evidence_shows_renewals_per_payout_and_mid_payout_abandonment_per_margin() {
    use bench_analysis::results::write_results;
    use bench_report::adr::evidence::{load, render};

    let dir = crate::output::Scratch::new("long-hold-pack");
    let row = |repeat: u32, margin: f64, renewals: u64, mid: u64| {
        let mut r = crate::output::healthy(&format!("m{margin}_r{repeat}"), margin, 1000);
        (r.repeat, r.hold, r.steps) = (repeat, "lognormal:p50=666ms,p99=2s".into(), 3);
        (r.payouts_paid, r.attempts, r.renewals, r.renew_attempts) = (30, 20, renewals, renewals);
        r.abandoned_mid_payout = mid;
        r
    };
    let rows = [
        row(0, 0.1, 5, 0),
        row(1, 0.1, 7, 1),
        row(0, 0.5, 20, 4),
        row(1, 0.5, 22, 6),
    ];
    write_results(&dir.path().join("long-hold"), &rows).unwrap();
    let md = render(&load(dir.path()).unwrap());
    assert!(md.contains("## 10b. Long payouts"), "{md}");
    // 0.1: 12 renewals over 60 legs / 3 = 20 payouts; 1 of 40 attempts.
    assert!(md.contains("| 0.10 | 2 | 20 | 0.60 | 12 |"), "{md}");
    assert!(md.contains("| 1 | 2.50 % |"), "{md}");
    // 0.5: 42 over 20 payouts; 10 of 40 attempts.
    assert!(md.contains("| 0.50 | 2 | 20 | 2.10 | 42 |"), "{md}");
    assert!(md.contains("| 10 | 25.00 % |"), "{md}");
    // Without the step, the section says it was not measured.
    let empty = crate::output::Scratch::new("no-long-hold");
    let md = render(&load(empty.path()).unwrap());
    assert!(md.contains("## 10b. Long payouts"));
    assert!(!md.contains("renewals per payout |"));
}
