//! R1 idempotency and CONFLICT, R5's shape, R7 bulk seeding, /healthz.

use fencepost_api::rail::{MAX_BULK_COUNT, bulk_payout_id};
use serde_json::json;

use crate::common::{Rail, assert_error};

#[tokio::test]
async fn r1_is_created_once_then_idempotent_and_conflicts_on_another_body() {
    let rail = Rail::new("fixed:0ms");
    let body = json!({"payout_id": "p-1", "amount_minor": 1250, "currency": "EUR"});
    let (s, first) = rail.call("POST", "/v1/payouts", Some(body.clone())).await;
    assert_eq!(s, 201, "{first}");
    let (s, again) = rail.call("POST", "/v1/payouts", Some(body)).await;
    assert_eq!(s, 200, "{again}");
    assert_eq!(first, again);
    for other in [
        json!({"payout_id": "p-1", "amount_minor": 1251, "currency": "EUR"}),
        json!({"payout_id": "p-1", "amount_minor": 1250, "currency": "USD"}),
    ] {
        let refused = rail.call("POST", "/v1/payouts", Some(other)).await;
        assert_error(&refused, 409, "CONFLICT");
        assert!(refused.1["message"].as_str().unwrap().contains("1250 EUR"));
    }
    assert_eq!(rail.ledger().await.payouts.len(), 1);
}

#[tokio::test]
async fn r5_shows_state_tokens_and_every_submission() {
    let rail = Rail::new("fixed:0ms");
    rail.create("p-1").await;
    assert_eq!(
        rail.payout("p-1").await,
        json!({"payout_id": "p-1", "amount_minor": 100, "currency": "EUR", "state": "PENDING",
               "claim_token": null, "highest_token": 0, "submissions": []})
    );
    rail.fenced("submit", "p-1", 1).await;
    rail.fenced("claim", "p-1", 2).await;
    rail.fenced("submit", "p-1", 2).await;
    rail.fenced("submit", "p-1", 2).await;
    assert_eq!(
        rail.payout("p-1").await,
        json!({"payout_id": "p-1", "amount_minor": 100, "currency": "EUR", "state": "PAID",
               "claim_token": 2, "paid_token": 2, "highest_token": 2,
               "submissions": [{"token": 1, "outcome": "NOT_CLAIMED"},
                               {"token": 2, "outcome": "PAID"},
                               {"token": 2, "outcome": "DUPLICATE"}]})
    );
}

#[tokio::test]
async fn bulk_seeds_numbered_pending_payouts_and_skips_numbers_taken() {
    let rail = Rail::new("fixed:0ms");
    let (s, v) = rail
        .call("POST", "/v1/payouts/bulk", Some(json!({"count": 3})))
        .await;
    assert_eq!(s, 201, "{v}");
    assert_eq!(
        v,
        json!({"created": 3, "first_payout_id": "p-000001", "last_payout_id": "p-000003"})
    );
    let (s, v) = rail
        .call(
            "POST",
            "/v1/payouts/bulk",
            Some(json!({"count": 2, "prefix": "p"})),
        )
        .await;
    assert_eq!(s, 201, "{v}");
    assert_eq!(v["first_payout_id"], bulk_payout_id("p", 4));
    let (s, v) = rail
        .call(
            "POST",
            "/v1/payouts/bulk",
            Some(json!({"count": 1, "prefix": "run7"})),
        )
        .await;
    assert_eq!(
        (s.as_u16(), v["first_payout_id"].as_str()),
        (201, Some("run7-000001"))
    );
    let ledger = rail.ledger().await;
    assert_eq!(ledger.payouts.len(), 6);
    assert!(
        ledger
            .payouts
            .iter()
            .all(|p| p.state == fencepost_api::PayoutState::Pending)
    );
    // A bulk-made payout is an ordinary one.
    assert_eq!(rail.fenced("claim", "p-000002", 1).await.0, 200);
}

#[tokio::test]
async fn bulk_refuses_zero_absurd_and_negative_counts_naming_the_limit() {
    let rail = Rail::new("fixed:0ms");
    for count in [json!(0), json!(MAX_BULK_COUNT + 1), json!(u64::MAX)] {
        let refused = rail
            .call("POST", "/v1/payouts/bulk", Some(json!({"count": count})))
            .await;
        assert_error(&refused, 400, "BAD_REQUEST");
        assert!(
            refused.1["message"].as_str().unwrap().contains("1000000"),
            "{}",
            refused.1
        );
    }
    assert_error(
        &rail
            .call("POST", "/v1/payouts/bulk", Some(json!({"count": -5})))
            .await,
        400,
        "BAD_REQUEST",
    );
    assert_error(
        &rail
            .call(
                "POST",
                "/v1/payouts/bulk",
                Some(json!({"count": 2, "prefix": "a/b"})),
            )
            .await,
        400,
        "BAD_REQUEST",
    );
    assert!(rail.ledger().await.payouts.is_empty());
}

#[tokio::test]
async fn healthz_is_200_and_shows_seed_and_latency() {
    let rail = Rail::new("uniform:10ms..50ms");
    let (s, v) = rail.call("GET", "/healthz", None).await;
    assert_eq!(s, 200);
    assert_eq!(
        (v["seed"].as_u64(), v["latency"].as_str()),
        (Some(1), Some("uniform:10ms..50ms"))
    );
}
