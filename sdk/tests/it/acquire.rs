//! T-041: the bounded acquire. Budget respected, `retry_after_ms` honoured,
//! jitter reproducible for a seed, and always a final answer.

use std::sync::Arc;
use std::time::Duration;

use fencepost_sdk::{AcquireOptions, Clock, FakeClock, LockError, MonoTime, TokioClock};

use crate::client;
use crate::mock::{Ep, Mock, Scripted};

/// Gaps between consecutive arrivals.
fn gaps(arrivals: &[MonoTime]) -> Vec<Duration> {
    arrivals
        .windows(2)
        .map(|w| w[1].saturating_duration_since(w[0]))
        .collect()
}

#[tokio::test(start_paused = true)]
async fn acquire_honours_retry_after_and_gives_up_within_the_budget() {
    let clock: Arc<dyn Clock> = Arc::new(TokioClock::new());
    let mock = Mock::start(clock.clone()).await;
    mock.set_default(Ep::Acquire, Scripted::held(Some(300)));
    let c = client(&mock.url, clock.clone(), |c| c);
    let session = c.open_session("budget").await.unwrap();
    let start = clock.now();
    let err = session
        .acquire(
            "busy",
            AcquireOptions::default().wait_up_to(Duration::from_secs(1)),
        )
        .await
        .unwrap_err();
    let spent = clock.now().saturating_duration_since(start);
    let arrivals = mock.arrivals(Ep::Acquire);
    match err {
        LockError::LockHeld {
            key,
            retry_after_ms,
            attempts,
        } => {
            assert_eq!(key, "busy");
            assert_eq!(retry_after_ms, Some(300));
            assert_eq!(attempts as usize, arrivals.len());
        }
        other => panic!("expected LockHeld, got {other}"),
    }
    assert!(
        spent <= Duration::from_secs(1),
        "budget respected: {spent:?}"
    );
    assert!(arrivals.len() >= 3, "{arrivals:?}");
    for g in gaps(&arrivals) {
        assert!(
            g >= Duration::from_millis(300),
            "waited at least retry_after: {g:?}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn acquire_succeeds_once_the_key_frees_within_the_budget() {
    let clock: Arc<dyn Clock> = Arc::new(TokioClock::new());
    let mock = Mock::start(clock.clone()).await;
    mock.script(
        Ep::Acquire,
        [
            Scripted::held(Some(100)),
            Scripted::err(503, "UNAVAILABLE"),
            Scripted::held(None),
        ],
    );
    let c = client(&mock.url, clock.clone(), |c| c);
    let session = c.open_session("frees").await.unwrap();
    let h = session
        .acquire(
            "k",
            AcquireOptions::default().wait_up_to(Duration::from_secs(10)),
        )
        .await
        .unwrap();
    assert_eq!(mock.count(Ep::Acquire), 4);
    assert_eq!(h.token(), 1);
    let sent = *mock.arrivals(Ep::Acquire).last().unwrap();
    // Default lease 30 s, clamped by the mock to 10 s: 7 s usable.
    assert_eq!(h.lease_ms(), 10_000);
    assert_eq!(
        h.client_deadline(),
        sent.saturating_add(Duration::from_secs(7))
    );
}

#[tokio::test(start_paused = true)]
async fn acquire_gives_up_at_once_when_retry_after_exceeds_the_budget() {
    let clock: Arc<dyn Clock> = Arc::new(TokioClock::new());
    let mock = Mock::start(clock.clone()).await;
    mock.set_default(Ep::Acquire, Scripted::held(Some(5_000)));
    let c = client(&mock.url, clock.clone(), |c| c);
    let session = c.open_session("hint").await.unwrap();
    let start = clock.now();
    let err = session
        .acquire(
            "k",
            AcquireOptions::default().wait_up_to(Duration::from_secs(1)),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err, LockError::LockHeld { attempts: 1, .. }),
        "{err}"
    );
    assert_eq!(clock.now(), start, "no pointless wait");
    // A zero budget is one attempt.
    let err = session
        .acquire("k", AcquireOptions::default())
        .await
        .unwrap_err();
    assert!(
        matches!(err, LockError::LockHeld { attempts: 1, .. }),
        "{err}"
    );
    assert_eq!(mock.count(Ep::Acquire), 2);
}

#[tokio::test(start_paused = true)]
async fn acquire_jitter_is_reproducible_for_a_seed() {
    async fn run(seed: u64) -> Vec<Duration> {
        let clock: Arc<dyn Clock> = Arc::new(TokioClock::new());
        let mock = Mock::start(clock.clone()).await;
        mock.set_default(Ep::Acquire, Scripted::held(None));
        let c = client(&mock.url, clock, |c| c.with_seed(seed));
        let session = c.open_session("jitter").await.unwrap();
        let opts = AcquireOptions::default()
            .wait_up_to(Duration::from_secs(60))
            .backoff(Duration::from_millis(10), Duration::from_millis(500))
            .max_attempts(8);
        let err = session.acquire("k", opts).await.unwrap_err();
        assert!(
            matches!(err, LockError::LockHeld { attempts: 8, .. }),
            "{err}"
        );
        gaps(&mock.arrivals(Ep::Acquire))
    }
    let a = run(42).await;
    let b = run(42).await;
    let other = run(43).await;
    assert_eq!(a.len(), 7);
    assert_eq!(a, b, "same seed, same waits");
    assert_ne!(a, other, "another seed, other waits");
    // Full jitter: the n-th wait is at most min(500 ms, 10 ms × 2^n).
    for (n, g) in a.iter().enumerate() {
        let ceiling = Duration::from_millis((10u64 << n).min(500));
        assert!(*g <= ceiling, "wait {n} = {g:?} > {ceiling:?}");
    }
}

/// A clock that never moves cannot make the loop endless: the attempt cap
/// and the time actually slept bound it.
#[tokio::test]
async fn acquire_stops_at_max_attempts_even_on_a_clock_that_does_not_move() {
    let clock: Arc<dyn Clock> = Arc::new(FakeClock::new(MonoTime::from_nanos(1)));
    let mock = Mock::start(clock.clone()).await;
    mock.set_default(Ep::Acquire, Scripted::held(None));
    let c = client(&mock.url, clock, |c| c);
    let session = c.open_session("frozen").await.unwrap();
    let opts = AcquireOptions::default()
        .wait_up_to(Duration::from_secs(3_600))
        .backoff(Duration::from_millis(1), Duration::from_millis(1))
        .max_attempts(5);
    let err = session.acquire("k", opts).await.unwrap_err();
    assert!(
        matches!(err, LockError::LockHeld { attempts: 5, .. }),
        "{err}"
    );
    assert_eq!(mock.count(Ep::Acquire), 5);
}

#[tokio::test(start_paused = true)]
async fn acquire_does_not_retry_what_cannot_succeed() {
    let clock: Arc<dyn Clock> = Arc::new(TokioClock::new());
    let mock = Mock::start(clock.clone()).await;
    mock.script(Ep::Acquire, [Scripted::err(400, "BAD_REQUEST")]);
    let c = client(&mock.url, clock, |c| c);
    let session = c.open_session("bad").await.unwrap();
    let long = AcquireOptions::default().wait_up_to(Duration::from_secs(60));
    assert!(matches!(
        session.acquire("k", long).await,
        Err(LockError::BadRequest { .. })
    ));
    assert_eq!(mock.count(Ep::Acquire), 1);
    // A key outside C1's alphabet is refused before anything is sent.
    assert!(matches!(
        session.acquire("white space", long).await,
        Err(LockError::BadRequest { .. })
    ));
    assert_eq!(mock.count(Ep::Acquire), 1);
}
