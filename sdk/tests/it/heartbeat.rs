//! T-040 AC4 and AC5, and the rest of §4, against the scripted mock on
//! virtual time (`start_paused` + [`TokioClock`], so advancing tokio's clock
//! moves the heartbeat's timers and the client deadlines together).

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fencepost_sdk::{
    AcquireOptions, Clock, HeartbeatFault, LockError, LockHandle, LockLost, LockLostEvent,
    LostReason, MarginPolicy, Session, TokioClock, lease,
};

use crate::mock::{Ep, Mock, Scripted};
use crate::{client, count_losses, plus_ms};

fn opts(ttl_ms: u64) -> AcquireOptions {
    AcquireOptions::default().ttl(Duration::from_millis(ttl_ms))
}

/// AC4: with the heartbeat stalled past the deadline, the check fails (at the
/// deadline, not before), the listener fires exactly once (when the task
/// runs again), and the next handle-taking call fails with no round trip.
#[tokio::test(start_paused = true)]
async fn stalled_heartbeat_past_the_deadline_fails_the_check_fires_once_and_refuses_the_next_call()
{
    let clock: Arc<dyn Clock> = Arc::new(TokioClock::new());
    let mock = Mock::start(clock.clone()).await;
    let c = client(&mock.url, clock.clone(), |c| {
        c.with_session_ttl(Duration::from_secs(3))
    });
    let session = c.open_session("ac4").await.unwrap();
    let handle = session.acquire("payout:4", opts(3_000)).await.unwrap();
    let t0 = mock.arrivals(Ep::Create)[0];
    let fired = count_losses(&session);
    // AC4 also pins the signature: Result<(), LockLost>, never a bool.
    let _signature: fn(&Session, &LockHandle) -> Result<(), LockLost> = Session::check_still_held;

    session.inject_heartbeat_fault(HeartbeatFault::Stall(Duration::from_secs(60)));
    let deadline = handle.client_deadline().min(session.client_deadline());
    assert_eq!(deadline, plus_ms(t0, 2_100));
    tokio::time::sleep(Duration::from_millis(2_099)).await;
    session
        .check_still_held(&handle)
        .expect("still held 1 ms before the deadline");
    tokio::time::sleep(Duration::from_millis(1)).await;
    let lost = session
        .check_still_held(&handle)
        .expect_err("lost at the deadline");
    assert_eq!(lost.reason, LostReason::Deadline);
    assert_eq!(lost.token, handle.token());
    assert_eq!(
        mock.count(Ep::Heartbeat),
        0,
        "the stalled task sent nothing"
    );
    assert_eq!(
        fired.load(Ordering::SeqCst),
        0,
        "the stalled task has not run yet"
    );

    // The task wakes after its stall, reports the loss once, and stops.
    tokio::time::sleep(Duration::from_secs(60)).await;
    assert_eq!(fired.load(Ordering::SeqCst), 1);
    tokio::time::sleep(Duration::from_secs(30)).await;
    assert_eq!(fired.load(Ordering::SeqCst), 1, "exactly once");
    assert_eq!(c.stats().sessions_lost_deadline, 1);

    // Every later call refuses without a round trip.
    session.check_still_held(&handle).expect_err("terminal");
    assert!(matches!(
        session.ensure_time_for(&handle, Duration::ZERO),
        Err(LockError::LockLost(_))
    ));
    assert!(matches!(
        session.acquire("other", opts(3_000)).await,
        Err(LockError::SessionLost {
            reason: LostReason::Deadline
        })
    ));
    assert!(matches!(
        session.release(handle).await,
        Err(LockError::LockLost(_))
    ));
    assert_eq!(mock.count(Ep::Release), 0);
    assert_eq!(mock.count(Ep::Acquire), 1);
    assert_eq!(mock.count(Ep::Heartbeat), 0);
}

/// AC5: a 503 on one tick and 200 on the next keeps the session; nothing fires.
#[tokio::test(start_paused = true)]
async fn a_503_then_200_keeps_the_session_and_fires_nothing() {
    let clock: Arc<dyn Clock> = Arc::new(TokioClock::new());
    let mock = Mock::start(clock.clone()).await;
    // One failed tick at a time (two in a row reach the deadline: the third
    // tick after a success falls on it, by the divisor 3).
    mock.script(
        Ep::Heartbeat,
        [
            Scripted::err(503, "NOT_LEADER"),
            Scripted::ok(),
            Scripted::err(503, "UNAVAILABLE"),
        ],
    );
    mock.script(Ep::Renew, [Scripted::err(503, "NOT_LEADER")]);
    let c = client(&mock.url, clock.clone(), |c| {
        c.with_session_ttl(Duration::from_secs(3))
    });
    let session = c.open_session("ac5").await.unwrap();
    let handle = session.acquire("payout:5", opts(3_000)).await.unwrap();
    let fired = count_losses(&session);

    for _ in 0..100 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        session.check_still_held(&handle).expect("never lost");
    }
    assert!(
        mock.count(Ep::Heartbeat) >= 10,
        "{}",
        mock.count(Ep::Heartbeat)
    );
    assert!(mock.count(Ep::Renew) >= 5);
    assert_eq!(fired.load(Ordering::SeqCst), 0);
    assert_eq!(session.lost_reason(), None);
    let last_hb = *mock.arrivals(Ep::Heartbeat).last().unwrap();
    assert_eq!(session.client_deadline(), plus_ms(last_hb, 2_100));
    let stats = c.stats();
    assert_eq!(
        stats.sessions_lost_deadline + stats.sessions_lost_expired + stats.sessions_lost_unknown,
        0
    );
}

/// §4: 503s and I/O errors never lose the session by themselves; the deadline does.
#[tokio::test(start_paused = true)]
async fn only_the_deadline_decides_repeated_503s_lose_the_session_at_its_deadline() {
    let clock: Arc<dyn Clock> = Arc::new(TokioClock::new());
    let mock = Mock::start(clock.clone()).await;
    mock.set_default(Ep::Heartbeat, Scripted::err(503, "UNAVAILABLE"));
    mock.set_default(Ep::Renew, Scripted::err(503, "UNAVAILABLE"));
    let c = client(&mock.url, clock.clone(), |c| {
        c.with_session_ttl(Duration::from_secs(3))
    });
    let session = c.open_session("503s").await.unwrap();
    let t0 = mock.arrivals(Ep::Create)[0];
    let handle = session.acquire("k", opts(10_000)).await.unwrap();
    let fired = count_losses(&session);
    tokio::time::sleep(Duration::from_millis(2_099)).await;
    session.check_still_held(&handle).unwrap();
    assert_eq!(fired.load(Ordering::SeqCst), 0);
    // Ticks at 0.7, 1.4, 2.1 s: the one at 2.1 s finds the deadline reached.
    tokio::time::sleep(Duration::from_millis(2)).await;
    assert!(clock.now() >= plus_ms(t0, 2_100));
    assert_eq!(
        session.check_still_held(&handle).unwrap_err().reason,
        LostReason::Deadline
    );
    assert_eq!(fired.load(Ordering::SeqCst), 1);
    assert_eq!(session.lost_reason(), Some(LostReason::Deadline));
    assert!(
        c.metrics_text()
            .contains("lock_session_lost_total{reason=\"deadline\"} 1")
    );
}

/// §4: 410 loses the session at once; listeners fire once per handle, on the
/// heartbeat task, in registration order; a panicking or failing listener is
/// caught; one registered afterwards fires at once for every loss.
#[tokio::test(start_paused = true)]
async fn session_410_loses_every_handle_and_listeners_fire_in_order_on_the_heartbeat_task() {
    let clock: Arc<dyn Clock> = Arc::new(TokioClock::new());
    let mock = Mock::start(clock.clone()).await;
    let c = client(&mock.url, clock.clone(), |c| {
        c.with_session_ttl(Duration::from_secs(3))
    });
    let session = c.open_session("410").await.unwrap();
    let a = session.acquire("a", opts(3_000)).await.unwrap();
    let b = session.acquire("b", opts(3_000)).await.unwrap();
    let log: Arc<Mutex<Vec<String>>> = Arc::default();
    let tasks: Arc<Mutex<Vec<Option<tokio::task::Id>>>> = Arc::default();
    let (l1, t1) = (log.clone(), tasks.clone());
    session.on_lock_lost(move |e: &LockLostEvent| {
        l1.lock()
            .unwrap()
            .push(format!("1:{}:{:?}", e.key, e.reason));
        t1.lock().unwrap().push(tokio::task::try_id());
    });
    session.on_lock_lost(|_e: &LockLostEvent| -> () { panic!("a listener that panics") });
    session.on_lock_lost(|_e: &LockLostEvent| Err::<(), _>("a listener that fails"));
    let l3 = log.clone();
    session.on_lock_lost(move |e: &LockLostEvent| {
        l3.lock().unwrap().push(format!("3:{}", e.key));
    });
    mock.script(Ep::Heartbeat, [Scripted::err(410, "SESSION_EXPIRED")]);

    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(
        *log.lock().unwrap(),
        ["1:a:SessionExpired", "3:a", "1:b:SessionExpired", "3:b"]
    );
    let here = tokio::task::try_id();
    assert!(
        tasks
            .lock()
            .unwrap()
            .iter()
            .all(|t| t.is_some() && *t != here),
        "fired on the heartbeat task"
    );
    assert_eq!(
        session.check_still_held(&a).unwrap_err().reason,
        LostReason::SessionExpired
    );
    assert_eq!(
        session.check_still_held(&b).unwrap_err().reason,
        LostReason::SessionExpired
    );
    assert_eq!(c.stats().sessions_lost_expired, 1);
    assert_eq!(c.stats().handles_lost, 2);

    // A late listener fires at once, once per lost handle.
    let late = count_losses(&session);
    assert_eq!(late.load(Ordering::SeqCst), 2);
    tokio::time::sleep(Duration::from_secs(10)).await;
    assert_eq!(log.lock().unwrap().len(), 4, "nothing fires twice");
    let acquires = mock.count(Ep::Acquire);
    assert!(matches!(
        session.acquire("c", opts(3_000)).await,
        Err(LockError::SessionLost {
            reason: LostReason::SessionExpired
        })
    ));
    assert_eq!(mock.count(Ep::Acquire), acquires, "no round trip");
}

/// §4: a renew answered 409 LOCK_LOST loses that handle only.
#[tokio::test(start_paused = true)]
async fn renew_refused_with_lock_lost_loses_only_that_handle() {
    let clock: Arc<dyn Clock> = Arc::new(TokioClock::new());
    let mock = Mock::start(clock.clone()).await;
    mock.script(Ep::Renew, [Scripted::err(409, "LOCK_LOST")]);
    let c = client(&mock.url, clock.clone(), |c| {
        c.with_session_ttl(Duration::from_secs(10))
    });
    let session = c.open_session("409").await.unwrap();
    let short = session.acquire("short", opts(3_000)).await.unwrap();
    let long = session.acquire("long", opts(10_000)).await.unwrap();
    let events: Arc<Mutex<Vec<LockLostEvent>>> = Arc::default();
    let e2 = events.clone();
    session.on_lock_lost(move |e: &LockLostEvent| e2.lock().unwrap().push(e.clone()));
    tokio::time::sleep(Duration::from_secs(2)).await;
    let ev = events.lock().unwrap().clone();
    assert_eq!(ev.len(), 1);
    assert_eq!(&*ev[0].key, "short");
    assert_eq!(ev[0].token, short.token());
    assert_eq!(ev[0].reason, LostReason::LeaseLost);
    assert_eq!(
        session.check_still_held(&short).unwrap_err().reason,
        LostReason::LeaseLost
    );
    session
        .check_still_held(&long)
        .expect("the other handle is unaffected");
    assert_eq!(session.lost_reason(), None);
    // With `short` gone the period follows the 10 s lease: 10 × 0.7 / 3.
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(
        session.heartbeat_period(),
        Duration::from_nanos(2_333_333_333)
    );
    session.release(long).await.unwrap();
}

/// T-040 AC6 on virtual time: a 1 s lease held for 30 TTLs never lapses.
#[tokio::test(start_paused = true)]
async fn heartbeat_holds_a_short_lease_for_thirty_ttls() {
    let clock: Arc<dyn Clock> = Arc::new(TokioClock::new());
    let mock = Mock::start(clock.clone()).await;
    mock.set_default(Ep::Heartbeat, Scripted::ok_after(Duration::from_millis(20)));
    mock.set_default(Ep::Renew, Scripted::ok_after(Duration::from_millis(20)));
    let c = client(&mock.url, clock.clone(), |c| {
        c.with_session_ttl(Duration::from_secs(1))
    });
    let session = c.open_session("hold").await.unwrap();
    let handle = session.acquire("k", opts(1_000)).await.unwrap();
    let fired = count_losses(&session);
    for _ in 0..600 {
        tokio::time::sleep(Duration::from_millis(50)).await;
        session.check_still_held(&handle).expect("held throughout");
    }
    assert_eq!(fired.load(Ordering::SeqCst), 0);
    assert!(
        mock.count(Ep::Renew) >= 30,
        "renewed: {}",
        mock.count(Ep::Renew)
    );
    assert_eq!(handle.lease_ms(), 1_000);
    // Every L2 RTT is in the heartbeat histogram, every L5 RTT in the
    // renewal's (20 ms each, 3 significant digits).
    let (h, r, stats) = (c.rtt_histogram(), c.renew_rtt_histogram(), c.stats());
    assert_eq!(h.len(), stats.heartbeats);
    assert_eq!(
        (r.len(), stats.renew_attempts),
        (stats.renewals, stats.renewals)
    );
    assert_eq!(c.renew_corrected_rtt_histogram().len(), stats.renewals);
    for q in [h.value_at_quantile(0.5), r.value_at_quantile(0.5)] {
        assert!((19_900..=20_100).contains(&q), "{q}");
    }
    c.reset_rtt();
    assert_eq!(c.rtt_histogram().len(), 0);
    session.close().await;
    assert_eq!(mock.count(Ep::Delete), 1);
}

/// Adaptive margin: `ceiling` until 20 RTTs are known, then
/// `clamp(k × p99 / lease, floor, ceiling)`.
#[tokio::test(start_paused = true)]
async fn adaptive_margin_uses_its_ceiling_during_warmup_then_k_p99_over_lease() {
    let clock: Arc<dyn Clock> = Arc::new(TokioClock::new());
    let mock = Mock::start(clock.clone()).await;
    mock.set_default(Ep::Heartbeat, Scripted::ok_after(Duration::from_millis(25)));
    let policy = MarginPolicy::Adaptive {
        k: 4.0,
        floor: 0.05,
        ceiling: 0.5,
    };
    let c = client(&mock.url, clock.clone(), |c| {
        c.with_session_ttl(Duration::from_secs(10))
            .with_margin(policy)
    });
    let session = c.open_session("adaptive").await.unwrap();
    // Warm-up: no RTT yet, so the margin is the ceiling, 0.5.
    assert_eq!(
        session.client_deadline(),
        plus_ms(mock.arrivals(Ep::Create)[0], 5_000)
    );
    let cold = session.acquire("cold", opts(1_000)).await.unwrap();
    assert_eq!(
        cold.client_deadline(),
        plus_ms(mock.arrivals(Ep::Acquire)[0], 500)
    );
    session.release(cold).await.unwrap();

    // 20+ heartbeats at 25 ms each (period 10 s × 0.5 / 3 while warming up).
    while c.rtt_histogram().len() < 20 {
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let p99_us = c.rtt_histogram().value_at_quantile(0.99);
    assert!((25_000..25_100).contains(&p99_us), "{p99_us}");
    let warm = session.acquire("warm", opts(1_000)).await.unwrap();
    let rtt = lease::RttSummary {
        samples: 20,
        p99_us,
    };
    let margin = lease::adaptive_margin(4.0, 0.05, 0.5, Duration::from_secs(1), rtt);
    assert!(
        (margin - 0.1).abs() < 0.001,
        "4 × 25 ms / 1 s ≈ 0.1, got {margin}"
    );
    let send = mock.arrivals(Ep::Acquire)[1];
    assert_eq!(
        warm.client_deadline(),
        lease::client_deadline(send, 1_000, lease::ppm_ceil(margin))
    );
    // ≈ send + 0.9 s: a fast network buys back most of the lease.
    assert!(warm.client_deadline() > plus_ms(send, 899));
    // Resetting the histogram puts the policy back into warm-up.
    c.reset_rtt();
    let again = session.acquire("again", opts(1_000)).await.unwrap();
    assert_eq!(
        again.client_deadline(),
        plus_ms(mock.arrivals(Ep::Acquire)[2], 500)
    );
}

/// D4: `ensure_time_for` needs remaining > cost, and counts refusals.
#[tokio::test(start_paused = true)]
async fn ensure_time_for_requires_strictly_more_lease_than_the_cost() {
    let clock: Arc<dyn Clock> = Arc::new(TokioClock::new());
    let mock = Mock::start(clock.clone()).await;
    let c = client(&mock.url, clock.clone(), |c| {
        c.with_session_ttl(Duration::from_secs(10))
    });
    let session = c.open_session("d4").await.unwrap();
    session.inject_heartbeat_fault(HeartbeatFault::Mute);
    let h = session.acquire("k", opts(10_000)).await.unwrap();
    // 7 s usable.
    session
        .ensure_time_for(&h, Duration::from_millis(6_999))
        .unwrap();
    let err = session
        .ensure_time_for(&h, Duration::from_secs(7))
        .unwrap_err();
    assert!(
        matches!(err, LockError::InsufficientLease { remaining, needed }
            if remaining == Duration::from_secs(7) && needed == Duration::from_secs(7)),
        "{err}"
    );
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert!(session.ensure_time_for(&h, Duration::from_secs(2)).is_err());
    session
        .ensure_time_for(&h, Duration::from_millis(1_999))
        .unwrap();
    assert_eq!(c.stats().leases_abandoned, 2);
    assert!(c.metrics_text().contains("lock_lease_abandoned_total 2"));
}

/// The optional server-confirmed check: one L7 hop; the server's answer may
/// lose the handle or shrink its deadline, never extend it.
#[tokio::test(start_paused = true)]
async fn confirmed_check_asks_the_server_and_only_shrinks_the_deadline() {
    let clock: Arc<dyn Clock> = Arc::new(TokioClock::new());
    let mock = Mock::start(clock.clone()).await;
    let local = client(&mock.url, clock.clone(), |c| c);
    let s1 = local.open_session("local").await.unwrap();
    let h1 = s1.acquire("k1", opts(10_000)).await.unwrap();
    s1.check_still_held_confirmed(&h1).await.unwrap();
    assert_eq!(mock.count(Ep::Info), 0, "off by default: no hop");

    let confirming = client(&mock.url, clock.clone(), |c| {
        c.with_confirm_with_server(true)
    });
    let s2 = confirming.open_session("confirm").await.unwrap();
    let h2 = s2.acquire("k2", opts(10_000)).await.unwrap();
    let before = h2.client_deadline();
    // The mock reports remaining_ms = 500: the deadline shrinks to send + 0.7 × 500 ms.
    s2.check_still_held_confirmed(&h2).await.unwrap();
    assert_eq!(mock.count(Ep::Info), 1);
    let send = mock.arrivals(Ep::Info)[0];
    assert_eq!(h2.client_deadline(), plus_ms(send, 350));
    assert!(h2.client_deadline() < before);
    // A server that says the key is unknown loses the handle.
    mock.script(Ep::Info, [Scripted::err(404, "LOCK_UNKNOWN")]);
    let err = s2.check_still_held_confirmed(&h2).await.unwrap_err();
    assert!(
        matches!(err, LockError::LockLost(ref l) if l.reason == LostReason::NotHeldOnServer),
        "{err}"
    );
    assert!(s2.check_still_held(&h2).is_err());
}

/// A `MakeWriter` into a shared buffer, to read the JSON log lines back.
#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl std::io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// C5: `lease_expired` and `session_lost` are structured events with their fields.
#[tokio::test(start_paused = true)]
async fn lease_expired_and_session_lost_are_logged_with_their_c5_fields() {
    let buf = Captured::default();
    let writer = buf.clone();
    let subscriber = tracing_subscriber::fmt()
        .json()
        .with_writer(move || writer.clone())
        .with_max_level(tracing::Level::INFO)
        .finish();
    // current_thread runtime: every task runs on this thread, under this subscriber.
    let _guard = tracing::subscriber::set_default(subscriber);

    let clock: Arc<dyn Clock> = Arc::new(TokioClock::new());
    let mock = Mock::start(clock.clone()).await;
    mock.script(Ep::Renew, [Scripted::err(409, "LOCK_LOST")]);
    let c = client(&mock.url, clock.clone(), |c| {
        c.with_session_ttl(Duration::from_secs(3))
    });
    let session = c.open_session("logs").await.unwrap();
    let h = session.acquire("payout:9", opts(3_000)).await.unwrap();
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(
        session.check_still_held(&h).unwrap_err().reason,
        LostReason::LeaseLost
    );
    mock.script(Ep::Heartbeat, [Scripted::err(404, "SESSION_UNKNOWN")]);
    tokio::time::sleep(Duration::from_millis(800)).await;
    assert_eq!(session.lost_reason(), Some(LostReason::SessionUnknown));

    let text = String::from_utf8(buf.0.lock().unwrap().clone()).unwrap();
    let events: Vec<serde_json::Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let find = |name: &str| {
        events
            .iter()
            .find(|e| e["fields"]["event"] == name)
            .unwrap_or_else(|| panic!("no {name} event in:\n{text}"))["fields"]
            .clone()
    };
    let lease = find("lease_expired");
    assert_eq!(lease["key"], "payout:9");
    assert_eq!(lease["token"], 1);
    assert_eq!(lease["session_id"], session.id());
    assert!(lease["client_deadline_ms_ago"].is_i64(), "{lease}");
    let lost = find("session_lost");
    assert_eq!(lost["session_id"], session.id());
    assert_eq!(lost["owner_id"], "logs");
    assert_eq!(lost["reason"], "unknown");
    assert!(lost["overrun_ms"].is_u64(), "{lost}");
    assert_eq!(c.stats().sessions_lost_unknown, 1);
}
