//! The measurement rules end to end, on real child processes through the one cell driver:
//! a stalled heartbeat shows up as coordinated omission corrected in the
//! cell's numbers (corrected histogram vs raw); trigger 4 fires when fence 2
//! refuses a client that passed `check_still_held`, and not when only fence 1
//! refuses a claim after a lapse; the warm-up is excluded from the window.
//!
//! The sabotage is a step hook in the worker (`bench_driver::worker::StepHook`): it
//! stalls or mutes the worker's heartbeat and holds the worker at a point of
//! its payout while a rival — a second SDK client, a real holder with a real
//! token — takes the payout over.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use bench_analysis::results::CellRow;
use bench_analysis::triggers::{Verdict, evaluate_row};
use bench_core::grid::Cell;
use bench_core::hist::{Series, load_series};
use bench_driver::cell::Measurement;
use bench_driver::cell::{BoxFuture, CellPlan, Hooks, Stack, Steady, measure};
use bench_driver::rail::{RailClient, RailOutcome};
use bench_driver::worker::{Step, StepCtx, StepHook};
use fencepost_sdk::{AcquireOptions, HeartbeatFault, LockClient, LockClientConfig};

use crate::driver::{config, temp_dir};

/// Runs `plan` once on fresh services with `hook`, returning the measurement
/// and the row; histograms are saved under `dir`.
async fn run_with(
    plan: &CellPlan,
    dir: &std::path::Path,
    hook: impl Fn(&Stack) -> Option<StepHook>,
) -> (Measurement, CellRow) {
    let cfg = config(None);
    let mut stack = Stack::start(&plan.stack_spec(&cfg.runtime), dir)
        .await
        .unwrap();
    let hooks = Hooks {
        on_step: hook(&stack),
        ..Hooks::default()
    };
    let measured = measure(&mut stack, plan, &mut Steady, hooks).await;
    stack.stop().await;
    let m = measured.unwrap().expect("not interrupted");
    m.save_histograms(dir).unwrap();
    let row = bench_driver::row::cell_row(&m);
    (m, row)
}

/// A plan of `workers` workers at `lease`, margin `margin`, no warm-up.
fn plan(lease: Duration, margin: f64, workers: u32, duration: Duration) -> CellPlan {
    let mut cfg = config(None);
    cfg.workers = workers;
    cfg.duration = duration;
    cfg.warmup = Some(Duration::ZERO);
    cfg.plan(Cell::fixed(lease, margin)).in_run("issue12")
}

/// Samples of `h` at or above `us`.
fn at_least(h: &fencepost_sdk::Histogram<u64>, us: u64) -> u64 {
    h.len() - h.count_between(0, h.lowest_equivalent(us).saturating_sub(1))
}

/// A 1 s stall of the heartbeat task at a 100 ms period (a 400 ms lease at
/// margin 0.25 sets the period; a 10 s session outlives the stall): the
/// bench's corrected histogram gets one sample per scheduled tick, each at
/// least its tick's lateness, where the raw one gets none of that size —
/// the cell's numbers, the saved `.corrected` histogram and the row agree.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stalled_heartbeat_is_corrected_for_coordinated_omission_in_the_cell() {
    let dir = temp_dir("co");
    let mut p = plan(Duration::from_millis(400), 0.25, 1, Duration::from_secs(3));
    p.session_ttl = Duration::from_secs(10);
    let stalled = Arc::new(AtomicBool::new(false));
    let (m, row) = run_with(&p, &dir, |_| {
        let stalled = stalled.clone();
        Some(StepHook(Arc::new(
            move |ctx: StepCtx<'_>| -> BoxFuture<'static, ()> {
                if ctx.step == Step::Checked && !stalled.swap(true, Ordering::SeqCst) {
                    assert_eq!(
                        ctx.session.expect("fencepost backend").heartbeat_period(),
                        Duration::from_millis(100)
                    );
                    ctx.session
                        .expect("fencepost backend")
                        .inject_heartbeat_fault(HeartbeatFault::Stall(Duration::from_secs(1)));
                    // Hold the handle through the stall, so its lease keeps the period.
                    return Box::pin(tokio::time::sleep(Duration::from_millis(1_200)));
                }
                Box::pin(async {})
            },
        )))
    })
    .await;
    assert!(stalled.load(Ordering::SeqCst), "the stall was injected");
    let raw = load_series(&dir, &p.id, Series::Rtt).unwrap();
    let corrected = load_series(&dir, &p.id, Series::Corrected).unwrap();
    assert_eq!(raw, m.workers.hists.rtt, "saved raw = measured raw");
    assert_eq!(corrected, m.workers.hists.corrected);
    // The first tick due in the stall is ≥ 900 ms late, the next ones 100 ms
    // less each: at least 7 corrected samples ≥ 300 ms; the one late L2 that
    // served them all had a loopback round trip.
    assert!(
        at_least(&corrected, 300_000) >= 7,
        "corrected ≥ 300 ms: {} of {}",
        at_least(&corrected, 300_000),
        corrected.len()
    );
    assert!(
        at_least(&raw, 300_000) <= 1,
        "raw ≥ 300 ms: {} of {}",
        at_least(&raw, 300_000),
        raw.len()
    );
    assert!(
        row.hb_rtt_corrected_max_us >= corrected.lowest_equivalent(900_000),
        "{row:?}"
    );
    assert!(row.hb_rtt_corrected_max_us > row.hb_rtt_max_us, "{row:?}");
    assert!(
        row.hb_ticks_missed >= 8,
        "ticks served late by one L2: {}",
        row.hb_ticks_missed
    );
    assert_eq!(row.hb_corrected_count, corrected.len());
    assert_eq!(row.hb_count, raw.len());
    assert_eq!(
        row.hb_attempts,
        row.hb_replies + row.hb_timeouts + row.hb_errors,
        "every exchange has one outcome"
    );
}

/// A rival: its own SDK client acquires `payout:<id>` (waiting for the key to
/// become free), claims it and, if `pay`, submits it under its higher token.
async fn take_over(lock_url: String, rail_url: String, id: String, pay: bool) -> u64 {
    let client =
        LockClient::new(LockClientConfig::new(lock_url).with_default_ttl(Duration::from_secs(5)))
            .unwrap();
    let session = client.open_session("rival").await.unwrap();
    let h = session
        .acquire(
            &format!("payout:{id}"),
            AcquireOptions::default().wait_up_to(Duration::from_secs(20)),
        )
        .await
        .expect("the key frees once the muted session lapses");
    let token = h.token();
    let rail = RailClient::new(&rail_url, Duration::from_secs(5));
    assert_eq!(rail.claim(&id, token).await, RailOutcome::Ok);
    if pay {
        assert_eq!(rail.submit(&id, token).await, RailOutcome::Ok);
    }
    session.release(h).await.unwrap();
    session.close().await;
    token
}

/// A step hook that, on the first payout reaching `at`, mutes the worker's
/// heartbeat (its session lapses, the key frees) and holds the worker until a
/// rival has taken the payout over (and paid it, if `pay`).
fn sabotage(stack: &Stack, at: Step, pay: bool, done: Arc<AtomicBool>) -> StepHook {
    let (lock_url, rail_url) = (stack.lock_url().to_owned(), stack.rail_url().to_owned());
    StepHook(Arc::new(
        move |ctx: StepCtx<'_>| -> BoxFuture<'static, ()> {
            if ctx.step != at || done.swap(true, Ordering::SeqCst) {
                return Box::pin(async {});
            }
            ctx.session
                .expect("fencepost backend")
                .inject_heartbeat_fault(HeartbeatFault::Mute);
            let rival = take_over(
                lock_url.clone(),
                rail_url.clone(),
                ctx.payout_id.to_owned(),
                pay,
            );
            let stale = ctx.token;
            Box::pin(async move {
                let token = rival.await;
                assert!(token > stale, "the rival holds a higher token");
            })
        },
    ))
}

/// The worker passed `check_still_held` and D4, then stalled (its heartbeat
/// muted) while a rival took the payout over and paid it; its submit under
/// the stale token is refused by fence 2. That fence-out is traced to the
/// belief it recorded, and trigger 4 fires.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fence_2_refusing_a_client_that_passed_its_check_fires_trigger_4() {
    let row = sabotaged("t4-fence2", Step::Checked).await;
    assert!(row.fenced_out_fence2 >= 1, "{row:?}");
    assert!(row.fenced_out_believed_held >= 1, "{row:?}");
    assert!(row.believed_held_submits > row.fenced_out_believed_held);
    assert!(
        row.ledger_ok && row.paid_twice == 0 && row.stale_paid == 0,
        "{row:?}"
    );
    let t4 = &evaluate_row(&row, std::slice::from_ref(&row))[3];
    assert_eq!(t4.verdict, Verdict::Fired, "{t4:?}");
    assert!(t4.fired);
}

/// A 2-worker cell at a 1 s lease whose first payout to reach `at` is
/// sabotaged (see [`sabotage`]); the row.
async fn sabotaged(tag: &str, at: Step) -> CellRow {
    let dir = temp_dir(tag);
    let p = plan(Duration::from_secs(1), 0.3, 2, Duration::from_secs(3));
    let done = Arc::new(AtomicBool::new(false));
    let (_, row) = run_with(&p, &dir, |s| Some(sabotage(s, at, true, done.clone()))).await;
    assert!(done.load(Ordering::SeqCst), "the sabotage ran");
    row
}

/// The worker's session lapsed after its acquire and before its claim; a
/// rival claimed (and paid) the payout, and the worker's claim under the stale
/// token is refused by fence 1. The worker never passed its check for that
/// token, so nothing it believed was fenced: trigger 4 stays ok, and the
/// fence-1 refusal is traced in the rail-stub's log (nothing untraced).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_fence_1_refusing_a_claim_after_a_lapse_does_not_fire_trigger_4() {
    let row = sabotaged("t4-fence1", Step::Acquired).await;
    assert!(row.fenced_out_fence1 >= 1, "{row:?}");
    assert_eq!(
        row.fenced_out_fence1_untraced, 0,
        "traced in the log: {row:?}"
    );
    assert_eq!(row.fenced_out_believed_held, 0, "{row:?}");
    assert!(row.ledger_ok, "{row:?}");
    let t4 = &evaluate_row(&row, std::slice::from_ref(&row))[3];
    assert_eq!(t4.verdict, Verdict::Ok, "{t4:?}");
}

/// A rail slower than the workers' read timeout but within D4's worst-case
/// hop (decisions after 200 ms; read timeout 166 ms, hop 233 ms at a 1 s
/// lease): every submit times out at the client while the rail still decides
/// it. A worker that released the lock at once let a successor claim the
/// payout before the late decision, which fence 2 then refused — a fence-out
/// of a client that believed it held the lease (trigger 4; the pause run of
/// one was found). After an unknown outcome the worker holds the lock
/// until the hop has passed since the send: the late decision pays, the
/// successor finds it PAID, nothing is fenced.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_submit_that_times_out_keeps_the_lock_for_the_worst_case_hop() {
    let dir = temp_dir("slow-rail");
    let mut cfg = config(None);
    cfg.rail_latency = "fixed:6s".parse().unwrap(); // × 1 s / 30 s = 200 ms
    cfg.workers = 2;
    cfg.duration = Duration::from_secs(2);
    cfg.warmup = Some(Duration::ZERO);
    let p = cfg
        .plan(Cell::fixed(Duration::from_secs(1), 0.1))
        .in_run("issue12");
    assert!(
        p.rail_read_timeout < Duration::from_millis(200)
            && p.worst_case_hop > Duration::from_millis(200)
    );
    let (_, row) = run_with(&p, &dir, |_| None).await;
    assert!(
        row.rail_transport_errors >= 2,
        "the submits timed out: {row:?}"
    );
    assert!(row.payouts_paid >= 2, "the rail paid them anyway: {row:?}");
    assert_eq!(
        (row.fenced_out, row.fenced_out_believed_held),
        (0, 0),
        "{row:?}"
    );
    assert!(row.ledger_ok && row.paid_twice == 0, "{row:?}");
}

/// The warm-up runs the workload but enters no figure: the window's ledger
/// difference pays less than the whole ledger holds, and the window is the
/// duration, not duration + warm-up.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_warm_up_is_excluded_from_the_window() {
    let dir = temp_dir("warmup");
    let mut p = plan(Duration::from_secs(1), 0.3, 2, Duration::from_secs(1));
    p.warmup = Duration::from_millis(800);
    let (m, row) = run_with(&p, &dir, |_| None).await;
    assert!(
        m.ledger_after.paid > row.payouts_paid,
        "payments of the warm-up are not the window's: {} vs {}",
        m.ledger_after.paid,
        row.payouts_paid
    );
    assert!(row.payouts_paid > 0);
    assert!(row.duration_s >= 1.0, "{}", row.duration_s);
    assert_eq!(row.warmup_s, 0.8);
    assert!(
        row.cpu_bench_s >= 0.0 && row.cpu_lock_server_s >= 0.0 && row.cpu_rail_stub_s >= 0.0,
        "CPU seconds of every process: {row:?}"
    );
    assert!(
        row.rail_measured_count > 0 && row.rail_measured_p50_ms > 0.0,
        "the rail latency the workers saw: {row:?}"
    );
}
