//! The renewal observer (`Session::set_renewal_observer`) against the
//! scripted mock on virtual time: told before each L5 is sent and once with
//! its outcome (acknowledged with the new deadline, refused, unknown).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use fencepost_sdk::{AcquireOptions, Clock, RenewalObserver, RenewalOutcome, TokioClock};

use crate::client;
use crate::mock::{Ep, Mock, Scripted};

/// What the observer saw, in order: `invoked` as `(ticket, key, token, None)`,
/// `completed` as `(ticket, key, token, Some(outcome))`.
type Seen = Vec<(u64, String, u64, Option<RenewalOutcome>)>;

#[derive(Default)]
struct Log {
    seen: Mutex<Seen>,
    when: Mutex<Vec<fencepost_sdk::MonoTime>>,
    clock: Mutex<Option<Arc<dyn Clock>>>,
}

impl RenewalObserver for Log {
    fn invoked(&self, key: &str, token: u64) -> u64 {
        let mut seen = self.seen.lock().unwrap();
        if let Some(c) = &*self.clock.lock().unwrap() {
            self.when.lock().unwrap().push(c.now());
        }
        let ticket = 100 + seen.len() as u64;
        seen.push((ticket, key.to_string(), token, None));
        ticket
    }

    fn completed(&self, ticket: u64, key: &str, token: u64, outcome: RenewalOutcome) {
        self.seen
            .lock()
            .unwrap()
            .push((ticket, key.to_string(), token, Some(outcome)));
    }
}

#[tokio::test(start_paused = true)]
async fn the_observer_sees_each_renewal_sent_and_how_it_ended() {
    let clock: Arc<dyn Clock> = Arc::new(TokioClock::new());
    let mock = Mock::start(clock.clone()).await;
    mock.script(
        Ep::Renew,
        [
            Scripted::ok(),
            Scripted::hang_up(),
            Scripted::err(409, "LOCK_LOST"),
        ],
    );
    let c = client(&mock.url, clock.clone(), |c| {
        c.with_session_ttl(Duration::from_secs(10))
    });
    let session = c.open_session("observed").await.unwrap();
    let log = Arc::new(Log::default());
    *log.clock.lock().unwrap() = Some(clock.clone());
    assert!(session.set_renewal_observer(log.clone()));
    assert!(
        !session.set_renewal_observer(Arc::new(Log::default())),
        "one observer per session"
    );
    let h = session
        .acquire(
            "k",
            AcquireOptions::default().ttl(Duration::from_millis(3_000)),
        )
        .await
        .unwrap();
    let granted = h.client_deadline();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let seen = log.seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 6, "{seen:?}");
    // Invoked, then completed, three times; the tickets come back.
    for (i, pair) in seen.chunks(2).enumerate() {
        assert_eq!(pair[0].0, pair[1].0);
        assert_eq!((pair[0].1.as_str(), pair[0].2), ("k", h.token()));
        assert!(pair[0].3.is_none(), "renewal {i} invoked first");
    }
    let Some(RenewalOutcome::Acknowledged {
        lease,
        deadline,
        remaining,
    }) = seen[1].3
    else {
        panic!("the first renewal was acknowledged: {seen:?}");
    };
    assert_eq!(lease, Duration::from_millis(3_000));
    // send + 3 s × (1 − 0.3), the send being the invocation (no time passes
    // on the mock): later than the grant's deadline.
    let sent = log.when.lock().unwrap()[0];
    assert_eq!(deadline, sent.saturating_add(Duration::from_millis(2_100)));
    assert!(deadline > granted);
    assert_eq!(remaining, Duration::from_millis(2_100));
    assert_eq!(seen[3].3, Some(RenewalOutcome::Unknown));
    assert_eq!(seen[5].3, Some(RenewalOutcome::Refused));
    assert!(session.check_still_held(&h).is_err(), "409 lost it");
}
