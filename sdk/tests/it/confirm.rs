//! D3 confirmed with the server: the server's L7 answer is ours only when
//! the key is HELD *with this handle's token*; any other grant of the key
//! loses the handle.

use std::sync::Arc;
use std::time::Duration;

use fencepost_sdk::{AcquireOptions, Clock, LockError, LostReason, TokioClock};

use crate::client;
use crate::mock::{Ep, Mock};

#[tokio::test(start_paused = true)]
async fn a_key_held_under_another_token_loses_the_handle() {
    let clock: Arc<dyn Clock> = Arc::new(TokioClock::new());
    let mock = Mock::start(clock.clone()).await;
    let c = client(&mock.url, clock.clone(), |c| {
        c.with_confirm_with_server(true)
    });
    let opts = AcquireOptions::default().ttl(Duration::from_secs(10));
    let a = c.open_session("a").await.unwrap();
    let ha = a.acquire("k", opts).await.unwrap();
    a.check_still_held_confirmed(&ha).await.unwrap();
    // The key is granted again (token 2): the mock's L7 now says HELD, token 2.
    let b = c.open_session("b").await.unwrap();
    let hb = b.acquire("k", opts).await.unwrap();
    assert_eq!((ha.token(), hb.token()), (1, 2));
    let err = a.check_still_held_confirmed(&ha).await.unwrap_err();
    assert!(
        matches!(err, LockError::LockLost(ref l) if l.reason == LostReason::NotHeldOnServer),
        "{err}"
    );
    assert!(a.check_still_held(&ha).is_err(), "loss is terminal");
    b.check_still_held_confirmed(&hb).await.unwrap();
    assert_eq!(mock.count(Ep::Info), 3);
}

/// A lost handle no longer sets the heartbeat period: the period goes back
/// to the session's own (a lost grant is never renewed).
#[tokio::test(start_paused = true)]
async fn a_lost_handle_no_longer_shortens_the_heartbeat_period() {
    let clock: Arc<dyn Clock> = Arc::new(TokioClock::new());
    let mock = Mock::start(clock.clone()).await;
    let c = client(&mock.url, clock.clone(), |c| {
        c.with_confirm_with_server(true)
            .with_session_ttl(Duration::from_secs(9))
    });
    let a = c.open_session("a").await.unwrap();
    // 9 s × 0.7 / 3 = 2.1 s.
    assert_eq!(a.heartbeat_period(), Duration::from_millis(2_100));
    let short = AcquireOptions::default().ttl(Duration::from_secs(3));
    let ha = a.acquire("k", short).await.unwrap();
    assert_eq!(ha.key(), "k");
    // 3 s × 0.7 / 3 = 0.7 s.
    assert_eq!(a.heartbeat_period(), Duration::from_millis(700));
    let b = c.open_session("b").await.unwrap();
    b.acquire("k", short).await.unwrap();
    assert!(a.check_still_held_confirmed(&ha).await.is_err());
    assert_eq!(a.heartbeat_period(), Duration::from_millis(2_100));
}
