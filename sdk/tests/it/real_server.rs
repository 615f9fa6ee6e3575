//! Against a real `lock-server` process (started by fencepost-harness on a
//! free loopback port, `--store memory:`): T-040 AC6, the SIGSTOPped-server
//! test, and contention with real tokens. Real time (MonotonicClock); every
//! wait is for a condition with a deadline, never a sleep that hopes.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fencepost_api::grace::GracePolicy;
use fencepost_harness::ChildService;
use fencepost_sdk::{
    AcquireOptions, Clock, HeartbeatFault, LockClient, LockClientConfig, LockError, LockLostEvent,
    MonoTime, MonotonicClock, lease,
};

/// Starts a lock-server with 1 s default TTLs (the SDK asks for its own).
async fn start_server(test: &str) -> ChildService {
    let dir = std::env::temp_dir().join("fencepost-sdk-it");
    std::fs::create_dir_all(&dir).unwrap();
    let stderr: PathBuf = dir.join(format!("{test}-{}.log", std::process::id()));
    tokio::task::spawn_blocking(move || {
        let bin =
            fencepost_harness::binary("lock-server", "lock-server").expect("lock-server binary");
        ChildService::start(
            &bin,
            [
                "--store",
                "memory:",
                "--session-ttl",
                "1s",
                "--default-ttl",
                "1s",
            ],
            &stderr,
        )
        .expect("lock-server starts")
    })
    .await
    .unwrap()
}

fn real_client(url: String, clock: Arc<dyn Clock>, ttl: Duration) -> LockClient {
    LockClient::new(
        LockClientConfig::new(url)
            .with_clock(clock)
            .with_session_ttl(ttl)
            .with_default_ttl(ttl)
            .with_request_timeout(Duration::from_millis(400)),
    )
    .unwrap()
}

/// Records when (on `clock`) each lost-lock event fired.
fn record_losses(
    session: &fencepost_sdk::Session,
    clock: Arc<dyn Clock>,
) -> Arc<Mutex<Vec<MonoTime>>> {
    let fired: Arc<Mutex<Vec<MonoTime>>> = Arc::default();
    let f = fired.clone();
    session.on_lock_lost(move |_e: &LockLostEvent| f.lock().unwrap().push(clock.now()));
    fired
}

/// Polls `cond` every 5 ms until it holds or `limit` passes; returns whether it held.
async fn wait_for(clock: &dyn Clock, limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let end = clock.now().saturating_add(limit);
    while !clock.now().has_reached(end) {
        if cond() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    cond()
}

/// T-040 AC6: hold a lock for 3× its TTL with heartbeats running and never
/// lose it; stop the heartbeat and it is lost within ttl × (1 − margin) + one period.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_server_lock_held_for_three_ttls_then_lost_within_bound_once_heartbeat_stops() {
    crate::init_tracing();
    let server = start_server("ac6").await;
    let clock: Arc<dyn Clock> = Arc::new(MonotonicClock::new());
    let ttl = Duration::from_secs(1);
    let c = real_client(server.url(), clock.clone(), ttl);
    let session = c.open_session("ac6").await.unwrap();
    let handle = session
        .acquire("ac6:lock", AcquireOptions::default())
        .await
        .unwrap();
    assert_eq!(handle.lease_ms(), 1_000);
    let fired = record_losses(&session, clock.clone());

    // 3 × TTL with heartbeats: the check never fails.
    let start = clock.now();
    let mut checks = 0;
    while !clock.now().has_reached(start.saturating_add(ttl * 3)) {
        session
            .check_still_held(&handle)
            .expect("held while heartbeats run");
        checks += 1;
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(checks > 100);
    assert!(fired.lock().unwrap().is_empty());
    assert!(c.stats().renewals >= 3, "renewed: {:?}", c.stats());
    assert!(c.stats().heartbeats >= 6, "heartbeats: {:?}", c.stats());

    // Stop the heartbeat.
    let period = session.heartbeat_period();
    assert_eq!(
        period,
        lease::heartbeat_period(1_000, Some(1_000), 300_000, lease::HEARTBEAT_DIVISOR)
    );
    let t_stop = clock.now();
    session.inject_heartbeat_fault(HeartbeatFault::Mute);
    let bound = lease::usable(ttl, 300_000) + period; // 700 ms + 233 ms
    // Tolerance: the deadline is computed from a send that precedes t_stop, so
    // the loss is due at most `bound` after t_stop; the tick that reports it
    // may additionally be late by tokio's 1 ms timer granularity plus however
    // long this shared 2-core machine takes to schedule the task. 250 ms
    // covers the latter with room; a real regression (e.g. a deadline from the
    // reply, or a missed tick) overshoots by a period or more.
    let tolerance = Duration::from_millis(250);
    let reported = wait_for(&*clock, bound + Duration::from_secs(5), || {
        !fired.lock().unwrap().is_empty()
    })
    .await;
    assert!(reported, "the loss was never reported");
    let t_lost = fired.lock().unwrap()[0];
    let took = t_lost.saturating_duration_since(t_stop);
    eprintln!("AC6: lost {took:?} after the heartbeat stopped; bound {bound:?} (+{tolerance:?})");
    assert!(
        took <= bound + tolerance,
        "lost after {took:?}; bound {bound:?} + {tolerance:?}"
    );
    assert!(session.check_still_held(&handle).is_err());
    assert_eq!(fired.lock().unwrap().len(), 1);

    // The server agrees, later: after lease + grace another session gets the
    // key, under a higher token.
    let other = c.open_session("ac6-next").await.unwrap();
    let next = other
        .acquire(
            "ac6:lock",
            AcquireOptions::default().wait_up_to(Duration::from_secs(10)),
        )
        .await
        .unwrap();
    assert!(next.token() > handle.token());
    other.release(next).await.unwrap();
    other.close().await;
}

/// A SIGSTOPped server: the check fails no later than the client deadline,
/// before the server's lease + grace (and session TTL + grace) could end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_server_sigstopped_check_fails_by_the_client_deadline_before_lease_plus_grace() {
    crate::init_tracing();
    let mut server = start_server("sigstop").await;
    let clock: Arc<dyn Clock> = Arc::new(MonotonicClock::new());
    let ttl = Duration::from_secs(2);
    let c = real_client(server.url(), clock.clone(), ttl);
    let session = c.open_session("sigstop").await.unwrap();
    let handle = session
        .acquire("sigstop:lock", AcquireOptions::default())
        .await
        .unwrap();
    let fired = record_losses(&session, clock.clone());
    // Let a few heartbeats through first.
    assert!(
        wait_for(&*clock, Duration::from_secs(10), || c.stats().heartbeats
            >= 2)
        .await
    );

    server.pause().unwrap();
    // Poll the check; every Ok must have read the clock before the deadline.
    let mut last_ok_before = MonoTime::ZERO;
    let t_fail = loop {
        let before = clock.now();
        let r = session.check_still_held(&handle);
        let after = clock.now();
        match r {
            Ok(()) => last_ok_before = before,
            Err(lost) => {
                assert_eq!(lost.token, handle.token());
                break after;
            }
        }
        assert!(
            before.saturating_duration_since(last_ok_before) < Duration::from_secs(30),
            "never failed"
        );
        tokio::time::sleep(Duration::from_millis(2)).await;
    };
    // No exchange can succeed while the server is stopped, so the deadlines are final.
    let d_handle = handle.client_deadline();
    let d_session = session.client_deadline();
    let d = d_handle.min(d_session);
    assert!(last_ok_before < d, "Ok only before the client deadline");
    assert!(
        t_fail.has_reached(d),
        "failed once the deadline was reached"
    );

    // The server measures from receipt, which is after our send; so its lease
    // ends no earlier than send + lease, and the key is reassignable no
    // earlier than that plus grace. Same for the session (ttl + grace).
    let grace = GracePolicy::default();
    let lease = Duration::from_millis(handle.lease_ms());
    let send_h = d_handle.saturating_sub(lease::usable(lease, 300_000));
    let server_end_h = send_h.saturating_add(lease + grace.grace_for(lease));
    let sttl = Duration::from_millis(session.ttl_ms());
    let send_s = d_session.saturating_sub(lease::usable(sttl, 300_000));
    let server_end_s = send_s.saturating_add(sttl + grace.grace_for(sttl));
    assert!(
        t_fail < server_end_h,
        "client gave up before the server's lease + grace"
    );
    assert!(
        t_fail < server_end_s,
        "client gave up before the server's session TTL + grace"
    );
    let slack = server_end_h
        .min(server_end_s)
        .saturating_duration_since(t_fail);
    eprintln!(
        "SIGSTOP: check failed {:?} after the client deadline, {slack:?} before the server's lease + grace",
        t_fail.saturating_duration_since(d)
    );
    assert!(
        slack >= Duration::from_millis(500),
        "at least ~0.3 × 2 s of slack: {slack:?}"
    );

    // The heartbeat task reports it too, within a period (plus its blocked request).
    assert!(
        wait_for(&*clock, Duration::from_secs(5), || !fired
            .lock()
            .unwrap()
            .is_empty())
        .await
    );
    server.resume().unwrap();
}

/// Contention on a real server: LOCK_HELD with retry_after, then a grant with a
/// higher token once the holder releases; close deletes the session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn real_server_contention_waits_for_release_and_tokens_increase() {
    let server = start_server("contention").await;
    let clock: Arc<dyn Clock> = Arc::new(MonotonicClock::new());
    let c = real_client(server.url(), clock.clone(), Duration::from_secs(5));
    let a = c.open_session("holder").await.unwrap();
    let b = c.open_session("waiter").await.unwrap();
    let ha = a
        .acquire("payout:77", AcquireOptions::default())
        .await
        .unwrap();
    let err = b
        .acquire("payout:77", AcquireOptions::default())
        .await
        .unwrap_err();
    assert!(
        matches!(err, LockError::LockHeld { attempts: 1, .. }),
        "{err}"
    );
    let first = ha.token();
    let (got, ()) = tokio::join!(
        b.acquire(
            "payout:77",
            AcquireOptions::default().wait_up_to(Duration::from_secs(10))
        ),
        async {
            tokio::time::sleep(Duration::from_millis(200)).await;
            a.release(ha).await.unwrap();
        }
    );
    let hb = got.unwrap();
    assert!(hb.token() > first);
    b.ensure_time_for(&hb, Duration::from_secs(1)).unwrap();
    a.close().await;
    b.close().await;
    // After close the server has forgotten the session: a new one can take the key at once.
    let d = c.open_session("after").await.unwrap();
    let hd = d
        .acquire("payout:77", AcquireOptions::default())
        .await
        .unwrap();
    assert!(hd.token() > hb.token());
    d.close().await;
}
