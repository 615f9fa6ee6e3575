//! `check_still_held` against one bare clock read (target ≤ 2×), on
//! the production `BootTimeClock` (`CLOCK_BOOTTIME`) and on `MonotonicClock`. The session and handle come from a tiny in-process L1/L4 server;
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
use fencepost_sdk::{
    AcquireOptions, BootTimeClock, Clock, LockClient, LockClientConfig, LockHandle, MonotonicClock,
    Session,
};
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

/// A client on `clock`, with one session and one handle (10-minute TTLs).
async fn held(url: &str, clock: Arc<dyn Clock>) -> (LockClient, Session, LockHandle) {
    let config = LockClientConfig::new(url)
        .with_clock(clock)
        .with_session_ttl(Duration::from_secs(600))
        .with_default_ttl(Duration::from_secs(600));
    let client = LockClient::new(config).unwrap();
    let session = client.open_session("bench").await.unwrap();
    let handle = session
        .acquire("bench:key", AcquireOptions::default())
        .await
        .unwrap();
    (client, session, handle)
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let mono = MonotonicClock::new();
    let boot = BootTimeClock::new();
    assert!(
        boot.is_boottime(),
        "CLOCK_BOOTTIME is available on this host"
    );
    let (on_mono, on_boot) = rt.block_on(async {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, app()).await.unwrap() });
        (
            held(&url, Arc::new(mono)).await,
            held(&url, Arc::new(boot)).await,
        )
    });
    let dyn_clock: Arc<dyn Clock> = Arc::new(boot);

    let mut g = c.benchmark_group("check_still_held");
    g.bench_function("bare MonotonicClock::now", |b| {
        b.iter(|| black_box(mono.now()))
    });
    g.bench_function("bare BootTimeClock::now", |b| {
        b.iter(|| black_box(boot.now()))
    });
    g.bench_function("Arc<dyn Clock>::now (BootTimeClock)", |b| {
        b.iter(|| black_box(dyn_clock.now()))
    });
    g.bench_function("Session::check_still_held (MonotonicClock)", |b| {
        b.iter(|| black_box(on_mono.1.check_still_held(black_box(&on_mono.2))))
    });
    g.bench_function("Session::check_still_held (BootTimeClock, default)", |b| {
        b.iter(|| black_box(on_boot.1.check_still_held(black_box(&on_boot.2))))
    });
    g.finish();
    for (_, session, handle) in [&on_mono, &on_boot] {
        session
            .check_still_held(handle)
            .expect("still held after the bench");
    }
    drop((on_mono, on_boot));
}

criterion_group!(benches, bench);
criterion_main!(benches);
