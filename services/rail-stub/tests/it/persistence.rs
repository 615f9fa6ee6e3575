//! `--ledger sqlite:PATH`: state, fences and counters survive a restart.

use fencepost_api::ledger_check::check_ledger;
use rail_stub::{Config, Fences, LedgerSpec};
use serde_json::json;

use crate::common::{Rail, assert_error, temp_path};

/// No latency, seed 1, an SQLite ledger in `dir`.
fn sqlite_config(dir: &std::path::Path) -> Config {
    Config {
        latency: "fixed:0ms".parse().unwrap(),
        seed: 1,
        ledger: LedgerSpec::Sqlite(dir.join("rail.db")),
        sabotage: None,
        fences: Fences::On,
        auth_tokens: None,
    }
}

#[tokio::test]
async fn the_sqlite_ledger_reloads_payouts_fences_and_counters_after_a_restart() {
    let dir = temp_path("reload");
    let config = sqlite_config(&dir);
    let before = {
        let rail = Rail::with_config(config.clone());
        rail.create("p-1").await;
        rail.create("p-2").await;
        rail.call("POST", "/v1/payouts/bulk", Some(json!({"count": 3})))
            .await;
        rail.fenced("claim", "p-1", 5).await;
        assert_error(&rail.fenced("submit", "p-1", 4).await, 409, "FENCED_OUT");
        assert_eq!(rail.fenced("submit", "p-1", 5).await.0, 200);
        assert_error(
            &rail.fenced("submit", "p-1", 5).await,
            409,
            "DUPLICATE_SUBMISSION",
        );
        rail.fenced("claim", "p-2", 3).await;
        assert_error(&rail.fenced("claim", "p-2", 2).await, 409, "FENCED_OUT");
        rail.ledger().await
    };
    assert_eq!(before.payouts.len(), 5);

    // A new process over the same file: same ledger, same counters, same fences.
    let rail = Rail::with_config(config);
    let after = rail.ledger().await;
    assert_eq!(after, before);
    assert!(check_ledger(&after).holds());
    assert_error(&rail.fenced("claim", "p-2", 2).await, 409, "FENCED_OUT");
    assert_error(
        &rail.fenced("submit", "p-1", 6).await,
        409,
        "DUPLICATE_SUBMISSION",
    );
    assert_eq!(rail.fenced("submit", "p-2", 3).await.0, 200);
    // R1 stays idempotent across the restart, and bulk numbering continues.
    assert_eq!(
        rail.call(
            "POST",
            "/v1/payouts",
            Some(json!({"payout_id": "p-1", "amount_minor": 100, "currency": "EUR"}))
        )
        .await
        .0,
        200
    );
    let (_, v) = rail
        .call("POST", "/v1/payouts/bulk", Some(json!({"count": 1})))
        .await;
    assert_eq!(v["first_payout_id"], "p-000004");
    let c = rail.state.counters();
    assert_eq!(
        (
            c.fenced_out_fence1,
            c.fenced_out_fence2,
            c.duplicate_attempted,
            c.paid
        ),
        (2, 1, 2, 2)
    );
    drop(rail);
    let _ = std::fs::remove_dir_all(dir);
}

#[tokio::test]
async fn a_payouts_submissions_are_bounded_counted_and_still_checkable_after_a_restart() {
    use fencepost_api::rail::MAX_LISTED_SUBMISSIONS;
    let dir = temp_path("bounded");
    let config = sqlite_config(&dir);
    let before = {
        let rail = Rail::with_config(config.clone());
        rail.create("p-1").await;
        // 100 submissions without the claim, then the payment, then 50 stale ones.
        for _ in 0..100 {
            assert_error(&rail.fenced("submit", "p-1", 3).await, 409, "NOT_CLAIMED");
        }
        rail.fenced("claim", "p-1", 5).await;
        assert_eq!(rail.fenced("submit", "p-1", 5).await.0, 200);
        for t in 0..50 {
            assert_error(
                &rail.fenced("submit", "p-1", t % 5).await,
                409,
                "FENCED_OUT",
            );
        }
        assert_error(
            &rail.fenced("submit", "p-1", 6).await,
            409,
            "DUPLICATE_SUBMISSION",
        );
        let (_, p) = rail.call("GET", "/v1/payouts/p-1", None).await;
        assert_eq!(
            p["submissions"].as_array().unwrap().len(),
            MAX_LISTED_SUBMISSIONS + 1,
            "{p}"
        );
        assert_eq!(
            p["submissions_omitted"],
            json!({"fenced_out": 50, "duplicate": 1, "not_claimed": 36, "max_fenced_token": 4})
        );
        assert_eq!(p["submissions"][MAX_LISTED_SUBMISSIONS]["outcome"], "PAID");
        let ledger = rail.ledger().await;
        let check = check_ledger(&ledger);
        assert!(check.holds(), "{:?}", check.violations);
        assert_eq!(
            (
                check.paid,
                check.fenced_out_fence2,
                check.duplicate_attempted
            ),
            (1, 50, 1)
        );
        ledger
    };
    let rail = Rail::with_config(config);
    let after = rail.ledger().await;
    assert_eq!(after, before);
    assert!(check_ledger(&after).holds());
    drop(rail);
    let _ = std::fs::remove_dir_all(dir);
}
