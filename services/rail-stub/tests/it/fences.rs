//! Fence 1 on R2 and R4, fence 2 on R3, duplicates, takeover, and the
//! R4 → PENDING → re-claim path, each as a scenario over HTTP.

use fencepost_api::ledger_check::check_ledger;

use rail_stub::{Config, Fences};

use crate::common::{Rail, assert_error};

/// A rail with payout `p-1` claimed by token 5.
async fn claimed_by_5() -> Rail {
    let rail = Rail::new("fixed:0ms");
    rail.create("p-1").await;
    let (s, v) = rail.fenced("claim", "p-1", 5).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(
        v,
        serde_json::json!({"payout_id": "p-1", "state": "CLAIMED", "token": 5})
    );
    rail
}

#[tokio::test]
async fn claim_with_a_token_below_the_highest_is_fenced_out_by_fence_1() {
    let rail = claimed_by_5().await;
    assert_error(&rail.fenced("claim", "p-1", 4).await, 409, "FENCED_OUT");
    let p = rail.payout("p-1").await;
    assert_eq!(
        (p["state"].as_str(), p["claim_token"].as_u64()),
        (Some("CLAIMED"), Some(5))
    );
    let c = rail.state.counters();
    assert_eq!((c.fenced_out_fence1, c.fenced_out_fence2), (1, 0));
}

#[tokio::test]
async fn release_with_a_token_below_the_highest_is_fenced_out_by_fence_1() {
    let rail = claimed_by_5().await;
    let refused = rail.fenced("release", "p-1", 3).await;
    assert_error(&refused, 409, "FENCED_OUT");
    assert!(refused.1["message"].as_str().unwrap().contains("fence 1"));
    assert_eq!(rail.payout("p-1").await["state"], "CLAIMED");
    assert_eq!(rail.state.counters().fenced_out_fence1, 1);
}

#[tokio::test]
async fn submit_with_a_token_below_the_highest_is_fenced_out_by_fence_2_and_pays_nothing() {
    let rail = claimed_by_5().await;
    // The old holder (token 4) lost its lock; the new holder's claim raised the fence to 5.
    let refused = rail.fenced("submit", "p-1", 4).await;
    assert_error(&refused, 409, "FENCED_OUT");
    assert!(refused.1["message"].as_str().unwrap().contains("fence 2"));
    let p = rail.payout("p-1").await;
    assert_eq!(p["state"], "CLAIMED");
    assert_eq!(
        p["submissions"],
        serde_json::json!([{"token": 4, "outcome": "FENCED_OUT"}])
    );
    let c = rail.state.counters();
    assert_eq!(
        (c.fenced_out_fence1, c.fenced_out_fence2, c.paid),
        (0, 1, 0)
    );
}

#[tokio::test]
async fn a_second_submission_is_a_duplicate_and_pays_nothing() {
    let rail = claimed_by_5().await;
    let (s, v) = rail.fenced("submit", "p-1", 5).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["state"], "PAID");
    assert_error(
        &rail.fenced("submit", "p-1", 5).await,
        409,
        "DUPLICATE_SUBMISSION",
    );
    // A higher token that never claimed is a duplicate too: the payout is PAID.
    assert_error(
        &rail.fenced("submit", "p-1", 9).await,
        409,
        "DUPLICATE_SUBMISSION",
    );
    let ledger = rail.ledger().await;
    let check = check_ledger(&ledger);
    assert!(check.holds(), "{:?}", check.violations);
    assert_eq!((check.paid, check.duplicate_attempted), (1, 2));
    assert_eq!(ledger.payouts[0].paid_token, Some(5));
}

#[tokio::test]
async fn a_stale_submission_on_a_paid_payout_is_fence_2_not_a_duplicate() {
    let rail = claimed_by_5().await;
    assert_eq!(rail.fenced("submit", "p-1", 5).await.0, 200);
    assert_error(&rail.fenced("submit", "p-1", 2).await, 409, "FENCED_OUT");
    let c = rail.state.counters();
    assert_eq!((c.fenced_out_fence2, c.duplicate_attempted), (1, 0));
}

#[tokio::test]
async fn claim_or_release_on_a_paid_payout_is_already_paid_and_stale_ones_are_fenced() {
    let rail = claimed_by_5().await;
    assert_eq!(rail.fenced("submit", "p-1", 5).await.0, 200);
    assert_error(&rail.fenced("claim", "p-1", 6).await, 409, "ALREADY_PAID");
    assert_error(&rail.fenced("release", "p-1", 5).await, 409, "ALREADY_PAID");
    assert_error(&rail.fenced("claim", "p-1", 1).await, 409, "FENCED_OUT");
    assert_eq!(rail.payout("p-1").await["state"], "PAID");
    let c = rail.state.counters();
    assert_eq!((c.already_paid, c.fenced_out_fence1), (2, 1));
}

#[tokio::test]
async fn a_higher_token_takes_over_a_claim_and_the_same_token_again_is_idempotent() {
    let rail = claimed_by_5().await;
    assert_eq!(rail.fenced("claim", "p-1", 5).await.0, 200);
    let (s, v) = rail.fenced("claim", "p-1", 8).await;
    assert_eq!((s.as_u16(), v["token"].as_u64()), (200, Some(8)));
    let p = rail.payout("p-1").await;
    assert_eq!(
        (p["claim_token"].as_u64(), p["highest_token"].as_u64()),
        (Some(8), Some(8))
    );
    // The old holder can neither claim back, nor release, nor pay.
    assert_error(&rail.fenced("claim", "p-1", 5).await, 409, "FENCED_OUT");
    assert_error(&rail.fenced("release", "p-1", 5).await, 409, "FENCED_OUT");
    assert_error(&rail.fenced("submit", "p-1", 5).await, 409, "FENCED_OUT");
    assert_eq!(rail.fenced("submit", "p-1", 8).await.0, 200);
    assert!(check_ledger(&rail.ledger().await).holds());
}

#[tokio::test]
async fn submitting_without_holding_the_claim_is_not_claimed_and_pays_nothing() {
    let rail = Rail::new("fixed:0ms");
    rail.create("p-1").await;
    assert_error(&rail.fenced("submit", "p-1", 3).await, 409, "NOT_CLAIMED");
    assert_eq!(rail.fenced("claim", "p-1", 3).await.0, 200);
    // A higher token that never claimed does not hold the claim either, and
    // (being refused) does not raise the fence.
    assert_error(&rail.fenced("submit", "p-1", 4).await, 409, "NOT_CLAIMED");
    let p = rail.payout("p-1").await;
    assert_eq!(
        (p["state"].as_str(), p["highest_token"].as_u64()),
        (Some("CLAIMED"), Some(3))
    );
    assert_eq!(rail.state.counters().not_claimed, 2);
    assert_eq!(rail.fenced("submit", "p-1", 3).await.0, 200);
}

#[tokio::test]
async fn release_returns_to_pending_then_a_higher_token_reclaims_and_pays() {
    let rail = claimed_by_5().await;
    let (s, v) = rail.fenced("release", "p-1", 5).await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["state"], "PENDING");
    let p = rail.payout("p-1").await;
    assert_eq!(
        (p["state"].as_str(), p["claim_token"].is_null()),
        (Some("PENDING"), true)
    );
    // The releasing holder's token stays the floor: nothing below 5 gets back in.
    assert_error(&rail.fenced("claim", "p-1", 4).await, 409, "FENCED_OUT");
    // The released holder cannot pay without claiming again.
    assert_error(&rail.fenced("submit", "p-1", 5).await, 409, "NOT_CLAIMED");
    assert_eq!(rail.fenced("claim", "p-1", 6).await.1["state"], "CLAIMED");
    assert_eq!(rail.fenced("submit", "p-1", 6).await.1["state"], "PAID");
    let p = rail.payout("p-1").await;
    assert_eq!(
        (p["paid_token"].as_u64(), p["highest_token"].as_u64()),
        (Some(6), Some(6))
    );
    assert!(check_ledger(&rail.ledger().await).holds());
}

#[tokio::test]
async fn fenced_requests_on_unknown_payouts_are_payout_unknown() {
    let rail = Rail::new("fixed:0ms");
    for action in ["claim", "submit", "release"] {
        assert_error(&rail.fenced(action, "nope", 1).await, 404, "PAYOUT_UNKNOWN");
    }
    assert_error(
        &rail.call("GET", "/v1/payouts/nope", None).await,
        404,
        "PAYOUT_UNKNOWN",
    );
}

/// `--fences off` (a lock service without tokens): a stale holder's claim
/// takes the payout and its submit pays, where fence 1 and fence 2 would
/// refuse both; `/healthz` says the fences are off.
#[tokio::test]
async fn with_fences_off_a_stale_token_claims_and_pays() {
    let rail = Rail::with_config(Config {
        latency: "fixed:0ms".parse().unwrap(),
        fences: Fences::Off,
        ..Config::default()
    });
    rail.create("p-1").await;
    assert_eq!(rail.fenced("claim", "p-1", 5).await.0, 200);
    let (s, v) = rail.fenced("claim", "p-1", 4).await;
    assert_eq!(s, 200, "fence 1 is off: {v}");
    let (s, v) = rail.fenced("submit", "p-1", 4).await;
    assert_eq!(
        (s.as_u16(), v["state"].as_str()),
        (200, Some("PAID")),
        "{v}"
    );
    let c = rail.state.counters();
    assert_eq!(
        (c.fenced_out_fence1, c.fenced_out_fence2, c.paid),
        (0, 0, 1)
    );
    assert_eq!(rail.call("GET", "/healthz", None).await.1["fences"], "off");
}
