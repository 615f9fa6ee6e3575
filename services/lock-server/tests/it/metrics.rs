//! `/metrics` on prometheus-client and `/v1/config`'s `clock`: every family
//! and label value is there at 0 on a fresh server, promtool accepts the
//! text, a new grant moves the grant histogram (a re-acquire does not), a
//! single node leads, and the clock discipline is reported beside the bound.

use std::sync::Arc;
use std::time::Duration;

use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use fencepost_api::grace::GracePolicy;
use http_body_util::BodyExt;
use lock_server::Limits;
use lock_server::store;
use tower::ServiceExt;

use crate::support::{StoreKind, TestServer};

/// Every family a server on `memory:` exports, its type, and its series.
const FAMILIES: &[(&str, &str, &[&str])] = &[
    ("lock_grants_total", "counter", &["lock_grants_total"]),
    (
        "lock_reacquires_total",
        "counter",
        &["lock_reacquires_total"],
    ),
    ("lock_renewals_total", "counter", &["lock_renewals_total"]),
    ("lock_releases_total", "counter", &["lock_releases_total"]),
    (
        "lock_heartbeats_total",
        "counter",
        &["lock_heartbeats_total"],
    ),
    (
        "lock_expired_total",
        "counter",
        &[
            "lock_expired_total{kind=\"session\"}",
            "lock_expired_total{kind=\"lease\"}",
        ],
    ),
    ("lock_sessions_live", "gauge", &["lock_sessions_live"]),
    ("lock_locks_held", "gauge", &["lock_locks_held"]),
    (
        "lock_grant_duration_seconds",
        "histogram",
        &[
            "lock_grant_duration_seconds_count",
            "lock_grant_duration_seconds_sum",
            "lock_grant_duration_seconds_bucket{le=\"+Inf\"}",
        ],
    ),
    ("lock_leader_epoch", "gauge", &["lock_leader_epoch"]),
];

/// The families only a durable store (behind the group committer) exports.
const STORE_FAMILIES: &[(&str, &str, &[&str])] = &[
    (
        "lock_store_transactions_total",
        "counter",
        &["lock_store_transactions_total"],
    ),
    (
        "lock_store_writes_total",
        "counter",
        &["lock_store_writes_total"],
    ),
    (
        "lock_store_retried_alone_total",
        "counter",
        &["lock_store_retried_alone_total"],
    ),
    (
        "lock_store_commit_duration_seconds",
        "histogram",
        &[
            "lock_store_commit_duration_seconds_count",
            "lock_store_commit_duration_seconds_bucket{le=\"+Inf\"}",
        ],
    ),
];

/// The clock families (absent only when adjtimex cannot be read).
const CLOCK_FAMILIES: [&str; 3] = [
    "lock_clock_maxerror_seconds",
    "lock_clock_esterror_seconds",
    "lock_clock_synchronised",
];

/// The value of the sample line `series` (name plus labels), if present.
fn sample(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' ')?.parse().ok())
}

/// True when `text` declares `family` with type `kind`.
fn declares(text: &str, family: &str, kind: &str) -> bool {
    text.contains(&format!("# TYPE {family} {kind}\n"))
}

/// `GET /metrics` through the router: the content type and the text.
async fn scrape(s: &TestServer) -> (String, String) {
    let req = Request::builder()
        .method(Method::GET)
        .uri("/metrics")
        .body(Body::empty())
        .expect("request builds");
    let resp = s.app.clone().oneshot(req).await.expect("router answers");
    assert_eq!(resp.status(), StatusCode::OK);
    let ct = resp.headers()[header::CONTENT_TYPE]
        .to_str()
        .expect("ascii")
        .to_string();
    let bytes = resp.into_body().collect().await.expect("body").to_bytes();
    (ct, String::from_utf8(bytes.to_vec()).expect("utf-8"))
}

/// `promtool check metrics` on `text` (skipped without promtool, never under CI=true).
fn promtool_check(text: &str) {
    fencepost_harness::promtool_check_metrics(text);
}

/// Asserts every family of `families` is declared with its type and each of
/// its series reads 0.
#[track_caller]
fn all_zero(text: &str, families: &[(&str, &str, &[&str])]) {
    for (family, kind, series) in families {
        assert!(
            declares(text, family, kind),
            "no {kind} {family} in\n{text}"
        );
        for s in *series {
            assert_eq!(sample(text, s), Some(0.0), "{s} in\n{text}");
        }
    }
}

#[tokio::test]
async fn a_fresh_memory_server_shows_every_family_at_zero_and_promtool_accepts_it() {
    let s = TestServer::memory().await;
    let (ct, text) = scrape(&s).await;
    assert_eq!(ct, "text/plain; version=0.0.4; charset=utf-8");
    all_zero(&text, FAMILIES);
    assert_eq!(sample(&text, "lock_leader"), Some(1.0), "{text}");
    assert_eq!(sample(&text, "lock_clock_offset_max_seconds"), Some(0.05));
    for (family, _, _) in STORE_FAMILIES {
        assert!(!text.contains(family), "{family} on memory: in\n{text}");
    }
    if fencepost_api::clock_discipline::read().is_ok() {
        for family in CLOCK_FAMILIES {
            assert!(declares(&text, family, "gauge"), "no {family} in\n{text}");
        }
        let synced = sample(&text, "lock_clock_synchronised").expect("a value");
        assert!(synced == 0.0 || synced == 1.0, "{text}");
    }
    // Every bucket of the server ladder is there, spelt as `le_label` does.
    for b in fencepost_api::buckets::server_bounds() {
        let le = fencepost_api::buckets::le_label(b);
        let series = format!("lock_grant_duration_seconds_bucket{{le=\"{le}\"}}");
        assert_eq!(sample(&text, &series), Some(0.0), "{series} in\n{text}");
    }
    promtool_check(&text);
}

#[tokio::test]
async fn a_fresh_sqlite_server_adds_the_store_families_at_zero() {
    let url = StoreKind::Sqlite.fresh_url().await.expect("a url");
    let s = TestServer::new(Limits::default(), store::open(&url).await.expect("opens")).await;
    let (_, text) = scrape(&s).await;
    all_zero(&text, FAMILIES);
    all_zero(&text, STORE_FAMILIES);
    promtool_check(&text);
}

#[tokio::test]
async fn a_new_grant_moves_the_grant_histogram_and_a_reacquire_does_not() {
    let url = StoreKind::Sqlite.fresh_url().await.expect("a url");
    let s = TestServer::new(Limits::default(), store::open(&url).await.expect("opens")).await;
    let a = s.open_session("a", 60_000).await;
    let (st, _) = s.acquire("k", &a, 5_000).await;
    assert_eq!(st, StatusCode::OK);
    let (_, text) = scrape(&s).await;
    assert_eq!(
        sample(&text, "lock_grant_duration_seconds_count"),
        Some(1.0),
        "{text}"
    );
    assert!(sample(&text, "lock_grant_duration_seconds_sum").unwrap() > 0.0);
    assert_eq!(sample(&text, "lock_grants_total"), Some(1.0));
    // The session's creation and the grant: two transactions, each timed.
    let commits = sample(&text, "lock_store_commit_duration_seconds_count").unwrap();
    assert_eq!(
        Some(commits),
        sample(&text, "lock_store_transactions_total"),
        "{text}"
    );
    assert!(commits >= 2.0, "{text}");
    // The holder's re-acquire is no new grant; a refused L4 is none either.
    s.acquire("k", &a, 5_000).await;
    let b = s.open_session("b", 60_000).await;
    let (st, _) = s.acquire("k", &b, 5_000).await;
    assert_eq!(st, StatusCode::CONFLICT);
    let (_, text) = scrape(&s).await;
    assert_eq!(
        sample(&text, "lock_grant_duration_seconds_count"),
        Some(1.0),
        "{text}"
    );
    assert_eq!(sample(&text, "lock_reacquires_total"), Some(1.0));
    promtool_check(&text);
}

#[tokio::test]
async fn config_reports_the_clock_discipline_beside_the_offset_bound() {
    let s = TestServer::memory().await;
    let (st, cfg) = s.call(Method::GET, "/v1/config", None).await;
    assert_eq!(st, StatusCode::OK);
    let clock = &cfg["clock"];
    assert_eq!(clock["offset_max_ms"], 50.0, "{cfg}");
    assert_eq!(cfg["clock_offset_max_ms"], 50.0, "{cfg}");
    match fencepost_api::clock_discipline::read() {
        Ok(d) => {
            assert!(clock["maxerror_ms"].as_f64().is_some(), "{cfg}");
            assert!(clock["esterror_ms"].as_f64().is_some(), "{cfg}");
            assert_eq!(clock["synchronised"], d.synchronised, "{cfg}");
            let within = clock["within_offset_max"].as_bool().expect("a bool");
            assert_eq!(
                within,
                d.synchronised && clock["maxerror_ms"].as_f64().unwrap() <= 50.0,
                "{cfg}"
            );
            assert!(clock.get("error").is_none(), "{cfg}");
        }
        Err(_) => assert!(clock["error"].as_str().is_some(), "{cfg}"),
    }
}

#[tokio::test]
async fn a_fixed_grace_has_no_offset_bound_to_report() {
    let limits = Limits {
        grace: GracePolicy::Fixed(Duration::from_millis(200)),
        ..Limits::default()
    };
    let s = TestServer::new(limits, Arc::new(store::memory::MemoryStore::default())).await;
    let (_, cfg) = s.call(Method::GET, "/v1/config", None).await;
    assert!(cfg["clock"].is_object(), "{cfg}");
    assert!(cfg["clock"].get("offset_max_ms").is_none(), "{cfg}");
    assert!(cfg["clock"].get("within_offset_max").is_none(), "{cfg}");
    let (_, text) = scrape(&s).await;
    assert!(!text.contains("lock_clock_offset_max_seconds"), "{text}");
    promtool_check(&text);
}
