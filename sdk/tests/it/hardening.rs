//! Hardening, SDK side, on virtual time against the scripted mock: renews of
//! one tick run concurrently (N slow renews cannot push the next heartbeat
//! past the session deadline), nothing is sent on a session whose local
//! deadline has passed, and a holder's re-acquire after a lost L4 reply
//! counts its deadline from the retry's send.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use fencepost_sdk::{AcquireOptions, Clock, HeartbeatFault, LockError, LostReason, TokioClock};

use crate::mock::{Ep, Mock, Scripted};
use crate::{client, count_losses, plus_ms};

fn opts(ttl_ms: u64) -> AcquireOptions {
    AcquireOptions::default().ttl(Duration::from_millis(ttl_ms))
}

/// Eight handles, every L2 and every L5 answered in 1.5 s. Sent one after
/// another, the renews of one tick would take 12 s, past both the handles'
/// and the session's 7 s of usable lease; sent together they take 1.5 s.
#[tokio::test(start_paused = true)]
async fn eight_renews_answered_in_1_5_s_each_do_not_lose_the_session() {
    let clock: Arc<dyn Clock> = Arc::new(TokioClock::new());
    let mock = Mock::start(clock.clone()).await;
    let slow = Scripted::ok_after(Duration::from_millis(1_500));
    mock.set_default(Ep::Heartbeat, slow.clone());
    mock.set_default(Ep::Renew, slow);
    let c = client(&mock.url, clock.clone(), |c| {
        c.with_session_ttl(Duration::from_secs(10))
    });
    let session = c.open_session("slow-renews").await.unwrap();
    let mut handles = Vec::new();
    for i in 0..8 {
        handles.push(
            session
                .acquire(&format!("k{i}"), opts(10_000))
                .await
                .unwrap(),
        );
    }
    let fired = count_losses(&session);
    // 60 s: about 25 ticks, each renewing every handle.
    for _ in 0..600 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        for h in &handles {
            session.check_still_held(h).expect("held throughout");
        }
    }
    assert_eq!(fired.load(Ordering::SeqCst), 0);
    assert_eq!(session.lost_reason(), None);
    assert!(
        mock.count(Ep::Renew) >= 8 * 20,
        "renews: {}",
        mock.count(Ep::Renew)
    );
    // Each tick's renews left together: arrivals come in groups of 8 at one instant.
    let renews = mock.arrivals(Ep::Renew);
    for group in renews.chunks(8).filter(|g| g.len() == 8) {
        assert_eq!(
            group[0], group[7],
            "one tick's renews are concurrent: {group:?}"
        );
    }
}

/// A session whose deadline passed unnoticed (the heartbeat task stalled, no
/// check ran) refuses L4 locally: no request, the session's loss as the error.
#[tokio::test(start_paused = true)]
async fn acquire_on_a_session_past_its_deadline_is_refused_without_a_request() {
    let clock: Arc<dyn Clock> = Arc::new(TokioClock::new());
    let mock = Mock::start(clock.clone()).await;
    let c = client(&mock.url, clock.clone(), |c| {
        c.with_session_ttl(Duration::from_secs(3))
    });
    let session = c.open_session("lapsed").await.unwrap();
    session.inject_heartbeat_fault(HeartbeatFault::Stall(Duration::from_secs(60)));
    let deadline = session.client_deadline();
    assert_eq!(deadline, plus_ms(mock.arrivals(Ep::Create)[0], 2_100));
    tokio::time::sleep(Duration::from_millis(2_100)).await;
    assert!(clock.now().has_reached(deadline));
    let err = session.acquire("k", opts(3_000)).await.unwrap_err();
    assert!(
        matches!(
            err,
            LockError::SessionLost {
                reason: LostReason::Deadline
            }
        ),
        "{err}"
    );
    assert_eq!(mock.count(Ep::Acquire), 0, "nothing was sent");
    assert_eq!(mock.count(Ep::Heartbeat), 0);
}

/// L2 hangs (every one times out at the session deadline); a handle acquired
/// later has its own deadline after the session's. No L5 is ever sent at or
/// after the session deadline: renews leave at the tick's start, and the
/// tick after a lapsed deadline sends nothing.
#[tokio::test(start_paused = true)]
async fn renew_is_never_sent_past_the_session_deadline() {
    let clock: Arc<dyn Clock> = Arc::new(TokioClock::new());
    let mock = Mock::start(clock.clone()).await;
    mock.set_default(Ep::Heartbeat, Scripted::ok_after(Duration::from_secs(30)));
    let c = client(&mock.url, clock.clone(), |c| {
        c.with_session_ttl(Duration::from_secs(3))
    });
    let session = c.open_session("no-late-renew").await.unwrap();
    let session_deadline = session.client_deadline();
    tokio::time::sleep(Duration::from_millis(500)).await;
    let h = session.acquire("k", opts(3_000)).await.unwrap();
    assert!(h.client_deadline() > session_deadline);
    tokio::time::sleep(Duration::from_secs(5)).await;
    assert_eq!(session.lost_reason(), Some(LostReason::Deadline));
    assert!(mock.count(Ep::Heartbeat) >= 1);
    for t in mock.arrivals(Ep::Renew) {
        assert!(
            !t.has_reached(session_deadline),
            "L5 at {t:?}, session deadline {session_deadline:?}"
        );
    }
    assert_eq!(c.stats().sessions_lost_deadline, 1);
}

/// C1 §7: the first L4's reply is lost (the client times out after the
/// server granted); the retry gets the same token, its lease restarted at the
/// retry's receipt, and the handle's deadline counts from the retry's send.
#[tokio::test(start_paused = true)]
async fn holder_reacquire_after_a_lost_reply_counts_from_the_retry_send() {
    let clock: Arc<dyn Clock> = Arc::new(TokioClock::new());
    let mock = Mock::start(clock.clone()).await;
    mock.script(Ep::Acquire, [Scripted::ok_after(Duration::from_secs(1))]);
    let c = client(&mock.url, clock.clone(), |c| {
        c.with_request_timeout(Duration::from_millis(400))
    });
    let session = c.open_session("reacquire").await.unwrap();
    let h = session
        .acquire("payout:7", opts(3_000).wait_up_to(Duration::from_secs(5)))
        .await
        .unwrap();
    let arrivals = mock.arrivals(Ep::Acquire);
    assert_eq!(arrivals.len(), 2, "one lost reply, one retry: {arrivals:?}");
    assert!(
        arrivals[1].saturating_duration_since(arrivals[0]) >= Duration::from_millis(400),
        "the retry follows the timeout"
    );
    assert_eq!(
        h.token(),
        1,
        "the holder's re-acquire returns the same token"
    );
    assert_eq!(h.lease_ms(), 3_000);
    assert_eq!(
        h.client_deadline(),
        plus_ms(arrivals[1], 2_100),
        "from the retry's send"
    );
    assert_ne!(h.client_deadline(), plus_ms(arrivals[0], 2_100));
    session.check_still_held(&h).unwrap();
}
