//! Bad input: every client mistake is a 4xx with a C2 `{"code","message"}`
//! body a person can act on, never a 5xx and never axum's plain text.

use fencepost_api::lock::MAX_BODY_BYTES;
use serde_json::Value;

use crate::common::{Rail, assert_error};

#[tokio::test]
async fn malformed_ill_typed_missing_and_negative_inputs_are_bad_request() {
    let rail = Rail::new("fixed:0ms");
    rail.create("p-1").await;
    let cases: &[(&str, &str, &str, &str)] = &[
        // (method, path, body, a word the message must contain)
        ("POST", "/v1/payouts", "{not json", "expected JSON such as"),
        ("POST", "/v1/payouts", "", "empty"),
        ("POST", "/v1/payouts", "[1,2]", "invalid type"),
        (
            "POST",
            "/v1/payouts",
            r#"{"payout_id":"x","currency":"EUR"}"#,
            "amount_minor",
        ),
        (
            "POST",
            "/v1/payouts",
            r#"{"payout_id":"x","amount_minor":"12","currency":"EUR"}"#,
            "invalid type",
        ),
        (
            "POST",
            "/v1/payouts",
            r#"{"payout_id":"x","amount_minor":-5,"currency":"EUR"}"#,
            "non-negative",
        ),
        (
            "POST",
            "/v1/payouts",
            r#"{"payout_id":"x","amount_minor":1.5,"currency":"EUR"}"#,
            "invalid type",
        ),
        (
            "POST",
            "/v1/payouts",
            r#"{"payout_id":"x","amount_minor":5,"currency":"euro"}"#,
            "currency",
        ),
        (
            "POST",
            "/v1/payouts",
            r#"{"payout_id":"","amount_minor":5,"currency":"EUR"}"#,
            "payout_id",
        ),
        (
            "POST",
            "/v1/payouts",
            r#"{"payout_id":"a b","amount_minor":5,"currency":"EUR"}"#,
            "payout_id",
        ),
        (
            "POST",
            "/v1/payouts",
            r#"{"payout_id":"bulk","amount_minor":5,"currency":"EUR"}"#,
            "reserved",
        ),
        (
            "POST",
            "/v1/payouts/p-1/claim",
            "{}",
            "missing field `token`",
        ),
        ("POST", "/v1/payouts/p-1/claim", r#"{"token":-1}"#, "token"),
        (
            "POST",
            "/v1/payouts/p-1/submit",
            r#"{"token":"7"}"#,
            "invalid type",
        ),
        ("POST", "/v1/payouts/p-1/release", "null", "invalid type"),
        (
            "POST",
            "/v1/payouts/p-1/claim",
            r#"{"token":18446744073709551616}"#,
            "token",
        ),
        ("POST", "/v1/payouts/bulk", r#"{"prefix":"x"}"#, "count"),
        ("GET", "/v1/payouts/a%20b", "", "payout_id"),
    ];
    for (method, path, body, word) in cases {
        let (status, text) = rail.raw(method, path, body.to_string()).await;
        let v: Value = serde_json::from_str(&text)
            .unwrap_or_else(|_| panic!("{path} {body}: not JSON: {text}"));
        assert_eq!(status, 400, "{method} {path} {body}: {v}");
        assert_eq!(v["code"], "BAD_REQUEST", "{v}");
        let message = v["message"].as_str().unwrap();
        assert!(
            message.contains(word),
            "{method} {path} {body}: {message:?} should mention {word:?}"
        );
    }
    // Nothing above changed anything.
    let ledger = rail.ledger().await;
    assert_eq!(ledger.payouts.len(), 1);
    assert_eq!(ledger.counters, Default::default());
}

#[tokio::test]
async fn unknown_fields_are_ignored() {
    let rail = Rail::new("fixed:0ms");
    let (s, v) = rail
        .raw(
            "POST",
            "/v1/payouts",
            r#"{"payout_id":"p-1","amount_minor":5,"currency":"EUR","memo":"hi"}"#,
        )
        .await;
    assert_eq!(s, 201, "{v}");
    let (s, v) = rail
        .raw(
            "POST",
            "/v1/payouts/p-1/claim",
            r#"{"token":3,"worker":"w1"}"#,
        )
        .await;
    assert_eq!(s, 200, "{v}");
}

#[tokio::test]
async fn a_body_over_64_kib_is_payload_too_large() {
    let rail = Rail::new("fixed:0ms");
    rail.create("p-1").await;
    // Valid JSON, padded past the limit with whitespace.
    let mut big = r#"{"token": 1}"#.to_string();
    big.push_str(&" ".repeat(MAX_BODY_BYTES));
    let (s, text) = rail.raw("POST", "/v1/payouts/p-1/claim", big).await;
    let v: Value = serde_json::from_str(&text).unwrap();
    assert_error(&(s, v), 413, "PAYLOAD_TOO_LARGE");
    // Exactly at the limit is fine.
    let mut at_limit = r#"{"token": 1}"#.to_string();
    at_limit.push_str(&" ".repeat(MAX_BODY_BYTES - at_limit.len()));
    assert_eq!(
        rail.raw("POST", "/v1/payouts/p-1/claim", at_limit).await.0,
        200
    );
}

#[tokio::test]
async fn unknown_paths_and_wrong_methods_get_json_errors() {
    let rail = Rail::new("fixed:0ms");
    assert_error(
        &rail.call("GET", "/v1/nothing", None).await,
        404,
        "NOT_FOUND",
    );
    assert_error(
        &rail.call("GET", "/v1/payouts/p-1/claim", None).await,
        405,
        "METHOD_NOT_ALLOWED",
    );
    assert_error(
        &rail.call("DELETE", "/v1/ledger", None).await,
        405,
        "METHOD_NOT_ALLOWED",
    );
}
