//! One grant walked through HELD → GRACE → FREE on the fake clock, at the
//! exact nanosecond boundaries, with the derived grace of a 10 s lease.

use std::time::Duration;

use axum::http::{Method, StatusCode};
use fencepost_api::clock::Clock;
use fencepost_api::grace::GracePolicy;
use serde_json::json;

use crate::support::TestServer;

const NS: Duration = Duration::from_nanos(1);

#[tokio::test]
async fn a_ten_second_grant_is_held_then_in_grace_for_53ms_then_free_to_the_nanosecond() {
    let s = TestServer::memory().await;
    // The derived grace with the C4 defaults: 50 ms + 2 * 100e-6 * 10 s + 1 ms.
    let grace = GracePolicy::default().grace_for(Duration::from_secs(10));
    assert_eq!(grace, Duration::from_millis(53));

    let holder = s.open_session("holder", 600_000).await;
    let rival = s.open_session("rival", 600_000).await;
    let t0 = s.clock.now();
    let (st, body) = s.acquire("k", &holder, 10_000).await;
    assert_eq!(st, StatusCode::OK, "{body}");
    assert_eq!(body["lease_ms"], 10_000);
    assert_eq!(body["token"], 1);

    let lease_end = t0.saturating_add(Duration::from_secs(10));
    let free_at = lease_end.saturating_add(grace);

    s.clock.set(lease_end.saturating_sub(NS));
    assert_eq!(s.state("k").await, "HELD");

    s.clock.set(lease_end);
    assert_eq!(s.state("k").await, "GRACE");
    let (st, body) = s.acquire("k", &rival, 10_000).await;
    assert_eq!(st, StatusCode::CONFLICT);
    assert_eq!(body["code"], "LOCK_HELD");
    assert_eq!(body["retry_after_ms"], 53);

    s.clock.set(free_at.saturating_sub(NS));
    assert_eq!(s.state("k").await, "GRACE");
    let (st, body) = s.acquire("k", &rival, 10_000).await;
    assert_eq!(
        (st, body["retry_after_ms"].clone()),
        (StatusCode::CONFLICT, json!(1))
    );

    s.clock.set(free_at);
    assert_eq!(s.state("k").await, "FREE");
    let (st, body) = s.acquire("k", &rival, 10_000).await;
    assert_eq!(st, StatusCode::OK, "{body}");
    assert_eq!(body["token"], 2);
}

#[tokio::test]
async fn renew_one_nanosecond_before_the_lease_end_succeeds_and_at_the_end_is_lost() {
    let s = TestServer::memory().await;
    let holder = s.open_session("holder", 600_000).await;
    let t0 = s.clock.now();
    let (_, body) = s.acquire("k", &holder, 1_000).await;
    let token = body["token"].as_u64().unwrap();
    let renew = json!({"session_id": holder, "token": token, "ttl_ms": 1_000});

    // 1 ns before the end: renewed, from this instant, same token.
    let t1 = t0.saturating_add(Duration::from_secs(1)).saturating_sub(NS);
    s.clock.set(t1);
    let (st, body) = s
        .call(Method::POST, "/v1/locks/k/renew", Some(renew.clone()))
        .await;
    assert_eq!(st, StatusCode::OK, "{body}");
    assert_eq!(body["token"], token);

    // Exactly at the renewed lease's end: LOCK_LOST, even though the key is in grace.
    s.clock.set(t1.saturating_add(Duration::from_secs(1)));
    assert_eq!(s.state("k").await, "GRACE");
    let (st, body) = s
        .call(Method::POST, "/v1/locks/k/renew", Some(renew.clone()))
        .await;
    assert_eq!(st, StatusCode::CONFLICT);
    assert_eq!(body["code"], "LOCK_LOST");
    // And the refused renew resurrected nothing.
    assert_eq!(s.state("k").await, "GRACE");
}

#[tokio::test]
async fn an_expired_session_frees_its_locks_only_after_its_grace() {
    let s = TestServer::memory().await;
    let holder = s.open_session("holder", 1_000).await;
    let rival = s.open_session("rival", 600_000).await;
    let t0 = s.clock.now();
    let (st, _) = s.acquire("k", &holder, 30_000).await;
    assert_eq!(st, StatusCode::OK);

    // The session lapses at t0 + 1 s: heartbeats refused, its grant in GRACE.
    let lapse = t0.saturating_add(Duration::from_secs(1));
    s.clock.set(lapse.saturating_sub(NS));
    assert_eq!(s.state("k").await, "HELD");
    s.clock.set(lapse);
    assert_eq!(s.state("k").await, "GRACE");
    let (st, body) = s
        .call(
            Method::POST,
            &format!("/v1/sessions/{holder}/heartbeat"),
            None,
        )
        .await;
    assert_eq!(
        (st, body["code"].as_str()),
        (StatusCode::GONE, Some("SESSION_EXPIRED"))
    );

    // Reassignable at lapse + grace(1 s) = 50 ms + 0.2 ms + 1 ms.
    let grace = GracePolicy::default().grace_for(Duration::from_secs(1));
    assert_eq!(grace, Duration::from_micros(51_200));
    s.clock.set(lapse.saturating_add(grace).saturating_sub(NS));
    assert_eq!(s.acquire("k", &rival, 1_000).await.0, StatusCode::CONFLICT);
    s.clock.set(lapse.saturating_add(grace));
    let (st, body) = s.acquire("k", &rival, 1_000).await;
    assert_eq!(st, StatusCode::OK, "{body}");
    assert_eq!(body["token"], 2);
    // After the sweeper retires it, the session still answers 410, not 404.
    s.service.sweep().await;
    let (st, _) = s
        .call(
            Method::POST,
            &format!("/v1/sessions/{holder}/heartbeat"),
            None,
        )
        .await;
    assert_eq!(st, StatusCode::GONE);
}
