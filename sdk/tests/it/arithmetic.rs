//! T-040 AC2 and AC3: the client deadline is `send + granted × (1 − margin)`,
//! with `send` read before the request is written and `granted` the TTL the
//! server replied with.

use std::sync::Arc;
use std::time::Duration;

use fencepost_sdk::{AcquireOptions, Clock, FakeClock, MonoTime, TokioClock};

use crate::mock::{Ep, Mock, Scripted};
use crate::{MS, client, plus_ms};

/// AC2 on a fake clock: a reply held for 400 ms does not move the deadline.
#[tokio::test]
async fn deadline_is_send_plus_70_percent_of_granted_and_a_400ms_reply_delay_does_not_move_it() {
    let t0 = MonoTime::from_nanos(1_000_000 * MS);
    let fake = FakeClock::new(t0);
    let clock: Arc<dyn Clock> = Arc::new(fake.clone());
    let mock = Mock::start(clock.clone()).await;
    let c = client(&mock.url, clock, |c| {
        c.with_session_ttl(Duration::from_secs(8))
    });

    // L1, delayed 400 ms on the fake clock before the reply is released.
    let gate = mock.gate(Ep::Create);
    let (session, ()) = tokio::join!(c.open_session("ac2"), async {
        gate.arrived.notified().await;
        fake.advance(Duration::from_millis(400));
        gate.release.notify_one();
    });
    let session = session.unwrap();
    assert_eq!(session.ttl_ms(), 8_000);
    assert_eq!(
        session.client_deadline(),
        plus_ms(t0, 5_600),
        "session: send + 0.7 × 8 s"
    );

    // L4, the same way: sent at t1, answered 400 ms later.
    let t1 = fake.now();
    let gate = mock.gate(Ep::Acquire);
    let (handle, ()) = tokio::join!(
        session.acquire(
            "payout:1",
            AcquireOptions::default().ttl(Duration::from_secs(5))
        ),
        async {
            gate.arrived.notified().await;
            fake.advance(Duration::from_millis(400));
            gate.release.notify_one();
        }
    );
    let handle = handle.unwrap();
    assert_eq!(
        fake.now(),
        plus_ms(t1, 400),
        "the reply arrived 400 ms after the send"
    );
    assert_eq!(handle.lease_ms(), 5_000);
    assert_eq!(
        handle.client_deadline(),
        plus_ms(t1, 3_500),
        "send + 0.7 × 5 s, not reply + …"
    );
    assert_eq!(
        session.remaining(&handle).unwrap(),
        Duration::from_millis(3_100)
    );
}

/// AC2 for renewals, on virtual time: the heartbeat's L5 is answered 400 ms
/// late and the new deadline still counts from its send.
#[tokio::test(start_paused = true)]
async fn renew_deadline_is_measured_from_send_not_from_reply() {
    let clock: Arc<dyn Clock> = Arc::new(TokioClock::new());
    let mock = Mock::start(clock.clone()).await;
    mock.set_default(Ep::Renew, Scripted::ok_after(Duration::from_millis(400)));
    let c = client(&mock.url, clock.clone(), |c| {
        c.with_session_ttl(Duration::from_secs(10))
    });
    let session = c.open_session("renew").await.unwrap();
    let handle = session
        .acquire("k", AcquireOptions::default().ttl(Duration::from_secs(3)))
        .await
        .unwrap();
    // Period = 3 s × 0.7 / 3 = 700 ms; a renew is due once at most 1.4 s remain:
    // sent at 0.7 s and 1.4 s, each answered 400 ms later.
    assert_eq!(session.heartbeat_period(), Duration::from_millis(700));
    tokio::time::sleep(Duration::from_secs(2)).await;
    let renews = mock.arrivals(Ep::Renew);
    assert_eq!(renews.len(), 2, "{renews:?}");
    let last = renews[1];
    assert_eq!(
        handle.client_deadline(),
        plus_ms(last, 2_100),
        "from the send, not the reply"
    );
    assert!(
        clock.now() >= plus_ms(last, 400),
        "the reply came 400 ms later"
    );
    session.check_still_held(&handle).unwrap();
}

/// AC3: the server clamps 30 s to 10 s; the deadline comes from 10 s.
#[tokio::test]
async fn a_30s_request_clamped_to_10s_gives_a_deadline_from_10s() {
    let t0 = MonoTime::from_nanos(5_000 * MS);
    let fake = FakeClock::new(t0);
    let clock: Arc<dyn Clock> = Arc::new(fake.clone());
    let mock = Mock::start(clock.clone()).await;
    assert_eq!(mock.state.ttl_max_ms, 10_000);
    let c = client(&mock.url, clock, |c| {
        c.with_session_ttl(Duration::from_secs(60))
            .with_default_ttl(Duration::from_secs(30))
    });
    let session = c.open_session("ac3").await.unwrap();
    assert_eq!(session.ttl_ms(), 10_000, "session TTL clamped too");
    assert_eq!(session.client_deadline(), plus_ms(t0, 7_000));
    let handle = session
        .acquire("payout:3", AcquireOptions::default())
        .await
        .unwrap();
    assert_eq!(handle.lease_ms(), 10_000);
    assert_eq!(
        handle.client_deadline(),
        plus_ms(t0, 7_000),
        "0.7 × 10 s, not 0.7 × 30 s"
    );
}
