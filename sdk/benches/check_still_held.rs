//! `check_still_held` against one bare monotonic clock read (issue 3: target
//! ≤ 2×). The session and handle come from a tiny in-process L1/L4 server;
//! with 10-minute TTLs the heartbeat task stays asleep during the measurement.
//!
//! Run: `cargo bench -p fencepost-sdk --bench check_still_held -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;

use axum::Json;
use axum::Router;
use axum::http::StatusCode;
use axum::routing::post;
use criterion::{Criterion, criterion_group, criterion_main};
use fencepost_sdk::{AcquireOptions, Clock, LockClient, LockClientConfig, MonotonicClock};
use serde_json::{Value, json};

/// L1 and L4 only, granting whatever is asked.
fn app() -> Router {
    Router::new()
        .route(
            "/v1/sessions",
            post(|Json(b): Json<Value>| async move {
                (
                    StatusCode::CREATED,
                    Json(json!({"session_id": "bench", "ttl_ms": b["ttl_ms"], "expires_at": "x"})),
                )
            }),
        )
        .route(
            "/v1/locks/{key}/acquire",
            post(|Json(b): Json<Value>| async move {
                Json(json!({"key": "bench:key", "token": 1, "lease_ms": b["ttl_ms"], "expires_at": "x"}))
            }),
        )
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let clock = MonotonicClock::new();
    let (client, session, handle) = rt.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app()).await.unwrap() });
        let config = LockClientConfig::new(url)
            .with_clock(Arc::new(clock))
            .with_session_ttl(Duration::from_secs(600))
            .with_default_ttl(Duration::from_secs(600));
        let client = LockClient::new(config).unwrap();
        let session = client.open_session("bench").await.unwrap();
        let handle = session
            .acquire("bench:key", AcquireOptions::default())
            .await
            .unwrap();
        (client, session, handle)
    });
    let dyn_clock: Arc<dyn Clock> = Arc::new(clock);

    let mut g = c.benchmark_group("check_still_held");
    g.bench_function("bare MonotonicClock::now", |b| {
        b.iter(|| black_box(clock.now()))
    });
    g.bench_function("Arc<dyn Clock>::now", |b| {
        b.iter(|| black_box(dyn_clock.now()))
    });
    g.bench_function("Session::check_still_held", |b| {
        b.iter(|| black_box(session.check_still_held(black_box(&handle))))
    });
    g.finish();
    session
        .check_still_held(&handle)
        .expect("still held after the bench");
    drop((session, client));
}

criterion_group!(benches, bench);
criterion_main!(benches);
