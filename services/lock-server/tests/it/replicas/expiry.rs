//! Expiry across a leader change: a session expired under one leader still
//! answers 410 under the next (the tombstones are in the store).

use std::time::{Duration, Instant};

use serde_json::json;

use super::{PATIENCE, Replicas, metric, others};
use crate::support::{StoreKind, open_session_over_http as open_session, post};

/// C1: an expired session's id answers `410 SESSION_EXPIRED`, on the leader
/// that expired it and on the one after it: the old leader's sweeper leaves
/// a tombstone in the store, and the new leader restores it at takeover.
/// (Before tombstones were persisted the new leader answered 404.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_expired_under_the_old_leader_answers_410_under_the_new_one() {
    let Some(url) = StoreKind::Postgres.fresh_url().await else {
        return;
    };
    let mut r = Replicas::start(&url);
    let old = r.await_one_leader(&[0, 1, 2]).await;
    let old_url = r.nodes[old].url();
    let sid = open_session(&r.client, &old_url, 200).await;
    // The old leader's sweeper expires it (TTL 200 ms + grace 100 ms).
    let deadline = Instant::now() + PATIENCE;
    while metric(&r.client, &old_url, "lock_expired_total{kind=\"session\"}")
        .await
        .unwrap_or(0.0)
        < 1.0
    {
        assert!(Instant::now() < deadline, "never expired\n{}", r.logs());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    r.nodes[old].kill9();
    let new = r.await_one_leader(&others(&[0, 1, 2], old)).await;
    let new_url = r.nodes[new].url();
    let (st, body) = post(
        &r.client,
        format!("{new_url}/v1/sessions/{sid}/heartbeat"),
        json!({}),
    )
    .await
    .expect("L2");
    assert_eq!(
        (st, body["code"].as_str()),
        (410, Some("SESSION_EXPIRED")),
        "{body}"
    );
}
