//! Heartbeat gaps on virtual time (`start_paused` + [`TokioClock`]): a gap
//! runs from the send of the last acknowledged L1/L2 to the receipt of the
//! next acknowledgement, and a session lost at its deadline adds one
//! censored gap, at least its window, counted over it. Also the heartbeat
//! divisor setting and its validation.

use std::sync::Arc;
use std::time::Duration;

use fencepost_sdk::{
    Clock, HeartbeatFault, LockClient, LockClientConfig, LostReason, TokioClock, lease,
};

use crate::client;
use crate::mock::{Ep, Mock, Scripted};

const MS_US: u64 = 1_000;

/// A healthy session's gaps are one period each (instant replies), none over
/// its window, for the default divisor and for k = 4.
#[tokio::test(start_paused = true)]
async fn a_healthy_sessions_gaps_are_one_period_and_none_outlasts_the_window() {
    for (k, period_ms) in [(3u32, 700u64), (4, 525)] {
        let clock: Arc<dyn Clock> = Arc::new(TokioClock::new());
        let mock = Mock::start(clock.clone()).await;
        let c = client(&mock.url, clock.clone(), |c| {
            c.with_session_ttl(Duration::from_secs(3))
                .with_heartbeat_divisor(k)
        });
        let session = c.open_session("gaps").await.unwrap();
        assert_eq!(
            session.heartbeat_period().as_millis(),
            u128::from(period_ms)
        );
        tokio::time::sleep(Duration::from_secs(10)).await;
        assert_eq!(session.lost_reason(), None);

        let gaps = c.gap_histogram();
        let acked = c.stats().heartbeats;
        assert!(acked >= 10, "k = {k}: {acked} heartbeats");
        assert_eq!(gaps.len(), acked, "k = {k}: one gap per acknowledged L2");
        // Replies are instant: every gap is a period (HDR's 3 digits of slack).
        let (lo, hi) = (gaps.min(), gaps.max());
        assert!(
            lo >= (period_ms - 1) * MS_US && hi <= (period_ms + 1) * MS_US,
            "k = {k}: gaps {lo}..{hi} µs, period {period_ms} ms"
        );
        assert_eq!(c.stats().hb_gaps_over_window, 0, "k = {k}");
    }
}

/// One slow reply (RTT 500 ms) and then silence: the session is lost at its
/// deadline, which was set by that slow reply's *send*, so the censored gap
/// (from that send to the loss) is at least the window U = 2.1 s. Taken from
/// the slow reply's receipt it would be U − 500 ms.
#[tokio::test(start_paused = true)]
async fn a_slow_reply_then_silence_is_one_gap_over_the_window_measured_from_the_send() {
    let clock: Arc<dyn Clock> = Arc::new(TokioClock::new());
    let mock = Mock::start(clock.clone()).await;
    mock.script(
        Ep::Heartbeat,
        [Scripted::ok_after(Duration::from_millis(500))],
    );
    mock.set_default(Ep::Heartbeat, Scripted::ok_after(Duration::from_secs(600)));
    let c = client(&mock.url, clock.clone(), |c| {
        c.with_session_ttl(Duration::from_secs(3))
    });
    let session = c.open_session("slow-then-silent").await.unwrap();
    let window_us = 2_100 * MS_US;
    tokio::time::sleep(Duration::from_secs(10)).await;

    assert_eq!(session.lost_reason(), Some(LostReason::Deadline));
    let stats = c.stats();
    assert_eq!(stats.heartbeats, 1, "only the slow reply was acknowledged");
    assert_eq!(stats.sessions_lost_deadline, 1);
    assert_eq!(
        stats.hb_gaps_over_window, 1,
        "exactly one gap over the window"
    );
    let gaps = c.gap_histogram();
    assert_eq!(gaps.len(), 2, "the slow reply's gap and the censored one");
    // The first gap: L1's send to the slow reply's receipt, one period + 500 ms.
    assert!(
        (1_199 * MS_US..=1_201 * MS_US).contains(&gaps.min()),
        "{}",
        gaps.min()
    );
    assert!(
        gaps.max() >= window_us,
        "censored gap {} µs < window {window_us} µs",
        gaps.max()
    );
}

/// Over one client, every session lost at its deadline has exactly one gap
/// over its window and no other loss has one: a stalled session, a muted one,
/// a session the server expired (410) and a healthy one.
#[tokio::test(start_paused = true)]
async fn gaps_over_the_window_equal_sessions_lost_at_their_deadline() {
    let clock: Arc<dyn Clock> = Arc::new(TokioClock::new());
    let mock = Mock::start(clock.clone()).await;
    let c = client(&mock.url, clock.clone(), |c| {
        c.with_session_ttl(Duration::from_secs(3))
    });
    // Alone, so that its first L2 is the one refused as expired.
    mock.script(Ep::Heartbeat, [Scripted::err(410, "SESSION_EXPIRED")]);
    let expired = c.open_session("expired").await.unwrap();
    tokio::time::sleep(Duration::from_secs(1)).await;
    let stalled = c.open_session("stalled").await.unwrap();
    let muted = c.open_session("muted").await.unwrap();
    let healthy = c.open_session("healthy").await.unwrap();
    tokio::time::sleep(Duration::from_millis(1_500)).await;
    stalled.inject_heartbeat_fault(HeartbeatFault::Stall(Duration::from_secs(5)));
    muted.inject_heartbeat_fault(HeartbeatFault::Mute);
    tokio::time::sleep(Duration::from_secs(8)).await;

    assert_eq!(stalled.lost_reason(), Some(LostReason::Deadline));
    assert_eq!(muted.lost_reason(), Some(LostReason::Deadline));
    assert_eq!(expired.lost_reason(), Some(LostReason::SessionExpired));
    assert_eq!(healthy.lost_reason(), None);
    let stats = c.stats();
    assert_eq!(stats.sessions_lost_deadline, 2);
    assert_eq!(stats.sessions_lost_expired, 1);
    assert_eq!(stats.hb_gaps_over_window, stats.sessions_lost_deadline);
    assert!(c.gap_histogram().max() >= 2_100 * MS_US);
}

/// The divisor is a setting: 2..=10, from code or `LOCK_CLIENT_HEARTBEAT_DIVISOR`;
/// anything else is refused naming the key and the value.
#[test]
fn the_heartbeat_divisor_is_validated_and_read_from_the_environment() {
    let cfg = LockClientConfig::new("http://127.0.0.1:1");
    assert_eq!(cfg.heartbeat_divisor, lease::HEARTBEAT_DIVISOR);
    for k in [0, 1, 11] {
        let e = LockClient::new(cfg.clone().with_heartbeat_divisor(k))
            .err()
            .expect("refused");
        let text = e.to_string();
        assert!(
            text.contains(&format!("lock.client.heartbeat-divisor={k}")),
            "{text}"
        );
    }
    for k in [2, 10] {
        LockClient::new(cfg.clone().with_heartbeat_divisor(k)).expect("accepted");
    }
    let env = |v: &'static str| {
        move |name: &str| (name == "LOCK_CLIENT_HEARTBEAT_DIVISOR").then(|| v.to_string())
    };
    let read = LockClientConfig::from_lookup("http://127.0.0.1:1", env("4")).unwrap();
    assert_eq!(read.heartbeat_divisor, 4);
    let e = LockClientConfig::from_lookup("http://127.0.0.1:1", env("three")).expect_err("refused");
    assert!(
        e.to_string()
            .contains("lock.client.heartbeat-divisor=three"),
        "{e}"
    );
}
