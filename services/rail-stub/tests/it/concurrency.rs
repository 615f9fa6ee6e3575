//! Races: 16 tasks with stale and fresh tokens at the same payouts; 200
//! submissions waiting their latency in parallel; seeded latency replay.

use std::sync::Arc;
use std::time::{Duration, Instant};

use fencepost_api::ledger_check::check_ledger;
use fencepost_api::rail::{LedgerCounters, bulk_payout_id};
use rail_stub::state::LatencySampler;
use rand::SeedableRng;
use rand::seq::SliceRandom;
use rand_chacha::ChaCha8Rng;
use serde_json::json;

use crate::common::Rail;

/// Adds one refusal or payment, seen by the client, to `tally` by its code.
fn count(tally: &mut LedgerCounters, action: &str, status: u16, code: &str) {
    match (action, status, code) {
        (_, 200, _) if action == "submit" => tally.paid += 1,
        (_, 200, _) => {}
        ("submit", 409, "FENCED_OUT") => tally.fenced_out_fence2 += 1,
        (_, 409, "FENCED_OUT") => tally.fenced_out_fence1 += 1,
        ("submit", 409, "DUPLICATE_SUBMISSION") => tally.duplicate_attempted += 1,
        ("submit", 409, "NOT_CLAIMED") => tally.not_claimed += 1,
        (_, 409, "ALREADY_PAID") => tally.already_paid += 1,
        other => panic!("unexpected reply {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixteen_tasks_racing_stale_and_fresh_tokens_pay_each_payout_exactly_once() {
    const TASKS: u64 = 16;
    const PAYOUTS: u64 = 24;
    let rail = Arc::new(Rail::new("uniform:0ms..3ms"));
    let (s, v) = rail
        .call(
            "POST",
            "/v1/payouts/bulk",
            Some(json!({"count": PAYOUTS, "prefix": "race"})),
        )
        .await;
    assert_eq!(s, 201, "{v}");

    // Task t holds token t for every payout: each one is stale against every
    // higher task. Each walks the payouts in its own seeded order, so stale
    // and fresh requests interleave; every third task also releases and
    // re-claims. Every task submits each payout exactly once.
    let mut tasks = Vec::new();
    for token in 1..=TASKS {
        let rail = Arc::clone(&rail);
        tasks.push(tokio::spawn(async move {
            let mut ids: Vec<String> = (1..=PAYOUTS).map(|n| bulk_payout_id("race", n)).collect();
            ids.shuffle(&mut ChaCha8Rng::seed_from_u64(token));
            let mut tally = LedgerCounters::default();
            for id in &ids {
                let plan: &[&str] = if token % 3 == 0 {
                    &["claim", "release", "claim", "submit"]
                } else {
                    &["claim", "submit"]
                };
                for action in plan {
                    let (s, v) = rail.fenced(action, id, token).await;
                    count(
                        &mut tally,
                        action,
                        s.as_u16(),
                        v["code"].as_str().unwrap_or(""),
                    );
                    tokio::task::yield_now().await;
                }
            }
            tally
        }));
    }
    let mut client = LedgerCounters::default();
    for task in tasks {
        let t = task.await.unwrap();
        client.fenced_out_fence1 += t.fenced_out_fence1;
        client.fenced_out_fence2 += t.fenced_out_fence2;
        client.duplicate_attempted += t.duplicate_attempted;
        client.not_claimed += t.not_claimed;
        client.already_paid += t.already_paid;
        client.paid += t.paid;
    }

    let ledger = rail.ledger().await;
    let check = check_ledger(&ledger);
    assert!(check.holds(), "{:?}", check.violations);
    assert_eq!(
        (
            check.payouts,
            check.paid,
            check.paid_twice,
            check.stale_paid
        ),
        (PAYOUTS, PAYOUTS, 0, 0)
    );
    // Exactly one submission per payout paid; every other one was refused.
    assert_eq!(client.paid, PAYOUTS);
    let refused_submits =
        client.fenced_out_fence2 + client.duplicate_attempted + client.not_claimed;
    assert_eq!(refused_submits, (TASKS - 1) * PAYOUTS);
    // The server's counters equal the refusals the clients saw, one for one.
    assert_eq!(ledger.counters, client);
    assert!(
        client.fenced_out_fence1 + client.fenced_out_fence2 > 0,
        "no race happened: {client:?}"
    );
    for p in &ledger.payouts {
        assert_eq!(p.submissions.len() as u64, TASKS, "{}", p.payout_id);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_hundred_concurrent_submissions_wait_their_latency_in_parallel() {
    const N: u64 = 200;
    let latency = Duration::from_millis(50);
    let rail = Arc::new(Rail::new("fixed:50ms"));
    rail.call(
        "POST",
        "/v1/payouts/bulk",
        Some(json!({"count": N, "prefix": "par"})),
    )
    .await;
    for n in 1..=N {
        assert_eq!(
            rail.fenced("claim", &bulk_payout_id("par", n), 1).await.0,
            200
        );
    }

    let started = Instant::now();
    let tasks: Vec<_> = (1..=N)
        .map(|n| {
            let rail = Arc::clone(&rail);
            tokio::spawn(async move { rail.fenced("submit", &bulk_payout_id("par", n), 1).await })
        })
        .collect();
    for task in tasks {
        let (s, v) = task.await.unwrap();
        assert_eq!(
            (s.as_u16(), v["state"].as_str()),
            (200, Some("PAID")),
            "{v}"
        );
    }
    let elapsed = started.elapsed();

    // Serially these would take at least N × 50 ms = 10 s. In parallel they
    // take about one latency plus overhead; a quarter of serial leaves a wide
    // margin for a noisy shared machine while still failing a serialised rail.
    let serial = latency * N as u32;
    assert!(elapsed >= latency, "latency was not applied: {elapsed:?}");
    assert!(
        elapsed < serial.mul_f64(0.25),
        "200 concurrent submissions took {elapsed:?}, not well under the serial {serial:?}"
    );
    assert_eq!(rail.state.counters().paid, N);
    assert_eq!(rail.state.submissions_in_flight(), 0);
}

#[test]
fn the_same_seed_replays_the_same_latency_sequence() {
    let spec = "lognormal:p50=40ms,p99=400ms".parse().unwrap();
    let draw = |seed| {
        let s = LatencySampler::new(spec, seed);
        (0..64).map(|_| s.next_delay()).collect::<Vec<_>>()
    };
    assert_eq!(draw(7), draw(7));
    assert_ne!(draw(7), draw(8));
    let uniform = LatencySampler::new("uniform:10ms..50ms".parse().unwrap(), 3);
    let first: Vec<_> = (0..16).map(|_| uniform.next_delay()).collect();
    let again = LatencySampler::new("uniform:10ms..50ms".parse().unwrap(), 3);
    assert_eq!(
        first,
        (0..16).map(|_| again.next_delay()).collect::<Vec<_>>()
    );
}
