//! `/metrics`: the C5 counters carry the right values, the backlog age
//! follows the oldest unpaid payout on the (fake) monotonic clock, every
//! family and label value is there at 0 on a fresh ledger, and promtool
//! accepts the text.

use std::time::Duration;

use crate::common::Rail;

/// The value of the sample line `series` (name plus labels), if present.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

#[tokio::test]
async fn metrics_show_the_fence_and_duplicate_counters() {
    let rail = Rail::new("fixed:0ms");
    let text = rail.metrics().await;
    for series in [
        "lock_fenced_out_total{fence=\"1\"}",
        "lock_fenced_out_total{fence=\"2\"}",
        "rail_duplicate_attempted_total",
        "payout_backlog_age_seconds",
    ] {
        assert_eq!(sample(&text, series), Some(0.0), "{series} in\n{text}");
    }
    assert!(text.contains("# TYPE lock_fenced_out_total counter"));
    assert!(text.contains("# TYPE payout_backlog_age_seconds gauge"));

    rail.create("p-1").await;
    rail.fenced("claim", "p-1", 5).await;
    rail.fenced("claim", "p-1", 4).await; // fence 1
    rail.fenced("release", "p-1", 3).await; // fence 1
    rail.fenced("submit", "p-1", 2).await; // fence 2
    rail.fenced("submit", "p-1", 5).await; // paid
    rail.fenced("submit", "p-1", 5).await; // duplicate
    rail.fenced("submit", "p-1", 1).await; // fence 2
    let text = rail.metrics().await;
    assert_eq!(
        sample(&text, "lock_fenced_out_total{fence=\"1\"}"),
        Some(2.0),
        "{text}"
    );
    assert_eq!(
        sample(&text, "lock_fenced_out_total{fence=\"2\"}"),
        Some(2.0),
        "{text}"
    );
    assert_eq!(
        sample(&text, "rail_duplicate_attempted_total"),
        Some(1.0),
        "{text}"
    );
    assert_eq!(
        sample(&text, "rail_payouts_paid_total"),
        Some(1.0),
        "{text}"
    );
    assert_eq!(sample(&text, "rail_payouts"), Some(1.0), "{text}");
}

#[tokio::test]
async fn backlog_age_is_the_oldest_pending_or_claimed_payout_and_zero_when_none() {
    let rail = Rail::new("fixed:0ms");
    rail.create("old").await;
    rail.clock.advance(Duration::from_secs(3));
    rail.create("new").await;
    rail.clock.advance(Duration::from_millis(1500));
    let age = |text: &str| sample(text, "payout_backlog_age_seconds").unwrap();
    assert!((age(&rail.metrics().await) - 4.5).abs() < 1e-6);
    // Claimed still counts as backlog.
    rail.fenced("claim", "old", 1).await;
    assert!((age(&rail.metrics().await) - 4.5).abs() < 1e-6);
    rail.fenced("submit", "old", 1).await;
    assert!((age(&rail.metrics().await) - 1.5).abs() < 1e-6);
    rail.fenced("claim", "new", 1).await;
    rail.fenced("submit", "new", 1).await;
    assert_eq!(age(&rail.metrics().await), 0.0);
}

/// Every family `/metrics` exports, with its type and the series of a fresh ledger.
const FAMILIES: &[(&str, &str, &[&str])] = &[
    (
        "lock_fenced_out_total",
        "counter",
        &[
            "lock_fenced_out_total{fence=\"1\"}",
            "lock_fenced_out_total{fence=\"2\"}",
        ],
    ),
    (
        "rail_duplicate_attempted_total",
        "counter",
        &["rail_duplicate_attempted_total"],
    ),
    (
        "payout_backlog_age_seconds",
        "gauge",
        &["payout_backlog_age_seconds"],
    ),
    (
        "rail_payouts_paid_total",
        "counter",
        &["rail_payouts_paid_total"],
    ),
    (
        "rail_submit_not_claimed_total",
        "counter",
        &["rail_submit_not_claimed_total"],
    ),
    (
        "rail_already_paid_total",
        "counter",
        &["rail_already_paid_total"],
    ),
    ("rail_payouts", "gauge", &["rail_payouts"]),
    (
        "rail_submissions_in_flight",
        "gauge",
        &["rail_submissions_in_flight"],
    ),
];

#[tokio::test]
async fn a_fresh_ledger_shows_every_family_and_label_value_at_zero() {
    let rail = Rail::new("fixed:0ms");
    let text = rail.metrics().await;
    for (family, kind, series) in FAMILIES {
        assert!(
            text.contains(&format!("# TYPE {family} {kind}\n")),
            "no {kind} {family} in\n{text}"
        );
        for s in *series {
            assert_eq!(sample(&text, s), Some(0.0), "{s} in\n{text}");
        }
    }
    let types = text.lines().filter(|l| l.starts_with("# TYPE ")).count();
    assert_eq!(types, FAMILIES.len(), "an undocumented family in\n{text}");
}

/// `promtool check metrics` on `text`; `false` when promtool is not installed
/// (then the check is skipped, but never with `CI=true`).
fn promtool_check(text: &str) -> bool {
    fencepost_harness::promtool_check_metrics(text)
}

#[tokio::test]
async fn promtool_accepts_the_exposition_fresh_and_after_traffic() {
    let rail = Rail::new("fixed:0ms");
    promtool_check(&rail.metrics().await);
    rail.create("p-1").await;
    rail.fenced("claim", "p-1", 5).await;
    rail.fenced("claim", "p-1", 4).await;
    rail.fenced("submit", "p-1", 5).await;
    rail.fenced("submit", "p-1", 5).await;
    promtool_check(&rail.metrics().await);
}
