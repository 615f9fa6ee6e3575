//! The measurement rules, SDK side (docs/measurement.md), on virtual time against the mock:
//! every heartbeat exchange has one outcome and a timed-out one is a
//! censored sample; coordinated omission is corrected (a 1 s stall at a
//! 100 ms period gives ~10 corrected samples and one raw one); a session
//! that lapses between payouts is counted; the margins applied are exposed;
//! `reset_measurements` zeroes the measurements but not the adaptive view.

use std::sync::Arc;
use std::time::Duration;

use fencepost_sdk::{
    AcquireOptions, Clock, DeadlineKind, HeartbeatFault, Histogram, LostReason, MarginPolicy,
    TokioClock, lease,
};

use crate::mock::{Ep, Mock, Scripted};
use crate::{client, count_losses};

const MS: u64 = 1_000;

/// `after − before`, for histograms that only grew in between.
fn grown(after: &Histogram<u64>, before: &Histogram<u64>) -> Histogram<u64> {
    let mut d = after.clone();
    d.subtract(before).expect("same bounds, only grew");
    d
}

/// A 1 s stall at a 100 ms period (margin 0.25, a 400 ms lease sets the
/// period; the session's 10 s TTL outlives the stall). The task wakes once,
/// sends one L2 for the ten ticks that fell due (no catch-up burst), and the
/// corrected histogram gets one sample per tick, each at least its tick's
/// lateness; the raw one gets one.
#[tokio::test(start_paused = true)]
async fn a_one_second_stall_at_100ms_gives_ten_corrected_samples_and_one_raw() {
    let clock: Arc<dyn Clock> = Arc::new(TokioClock::new());
    let mock = Mock::start(clock.clone()).await;
    let c = client(&mock.url, clock.clone(), |c| {
        c.with_session_ttl(Duration::from_secs(10))
            .with_margin(MarginPolicy::Fixed(0.25))
    });
    let session = c.open_session("stall").await.unwrap();
    let _h = session
        .acquire(
            "k",
            AcquireOptions::default().ttl(Duration::from_millis(400)),
        )
        .await
        .unwrap();
    assert_eq!(session.heartbeat_period(), Duration::from_millis(100));
    // Ticks at 100, 200, …, 1000 ms, each on time.
    tokio::time::sleep(Duration::from_millis(1_050)).await;
    let (raw0, cor0, lag0) = (
        c.rtt_histogram(),
        c.corrected_rtt_histogram(),
        c.tick_lag_histogram(),
    );
    let (stats0, l2_before) = (c.stats(), mock.count(Ep::Heartbeat));
    assert_eq!(stats0.hb_ticks, 10);
    assert_eq!(stats0.hb_ticks_missed, 0);
    assert_eq!(lag0.max(), 0, "on time on virtual time");

    // Stall 1 s from 1.05 s: the ticks due at 1.1 … 2.0 s are served at 2.05 s.
    session.inject_heartbeat_fault(HeartbeatFault::Stall(Duration::from_secs(1)));
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    tokio::task::yield_now().await;
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert_eq!(mock.count(Ep::Heartbeat), l2_before + 1, "one L2, no burst");
    let raw = grown(&c.rtt_histogram(), &raw0);
    let cor = grown(&c.corrected_rtt_histogram(), &cor0);
    let lag = grown(&c.tick_lag_histogram(), &lag0);
    assert_eq!(raw.len(), 1, "one raw sample");
    assert_eq!(cor.len(), 10, "one corrected sample per scheduled tick");
    assert_eq!(lag.len(), 1);
    assert!(lag.max() >= 950 * MS, "lag {} µs", lag.max());
    // The k-th largest corrected sample is at least the k-th largest lateness:
    // 950, 850, …, 50 ms.
    for k in 0..10u64 {
        let lateness_us = (950 - 100 * k) * MS;
        assert!(
            cor.count_between(lateness_us, u64::MAX) > k,
            "fewer than {} samples ≥ {lateness_us} µs",
            k + 1
        );
    }
    let s = c.stats();
    assert_eq!(s.hb_ticks - stats0.hb_ticks, 10);
    assert_eq!(s.hb_ticks_missed - stats0.hb_ticks_missed, 9);
    assert_eq!(s.sessions_lost(), 0);
}

/// The same stall with the session's own TTL setting the period: the session
/// is found lost at the wake-up and nothing is sent. The ticks that were due
/// before its deadline still enter the corrected histogram, censored at their
/// lateness; the loss is counted.
#[tokio::test(start_paused = true)]
async fn a_stall_that_outlives_the_session_records_the_unserved_ticks_censored() {
    let clock: Arc<dyn Clock> = Arc::new(TokioClock::new());
    let mock = Mock::start(clock.clone()).await;
    let c = client(&mock.url, clock.clone(), |c| {
        c.with_session_ttl(Duration::from_millis(400))
            .with_margin(MarginPolicy::Fixed(0.25))
    });
    let session = c.open_session("stall-lost").await.unwrap();
    assert_eq!(session.heartbeat_period(), Duration::from_millis(100));
    tokio::time::sleep(Duration::from_millis(1_050)).await;
    let cor0 = c.corrected_rtt_histogram();
    let l2_before = mock.count(Ep::Heartbeat);
    // The last L2 left at 1.0 s: deadline 1.3 s. Woken at 2.05 s, the ticks
    // at 1.1 and 1.2 s were needed (1.3 s is the deadline itself).
    session.inject_heartbeat_fault(HeartbeatFault::Stall(Duration::from_secs(1)));
    tokio::time::sleep(Duration::from_millis(1_100)).await;
    assert_eq!(session.lost_reason(), Some(LostReason::Deadline));
    assert_eq!(mock.count(Ep::Heartbeat), l2_before, "nothing sent");
    let cor = grown(&c.corrected_rtt_histogram(), &cor0);
    assert_eq!(cor.len(), 2, "the two ticks due before the deadline");
    assert!(
        cor.min() >= cor.lowest_equivalent(850 * MS)
            && cor.max() >= cor.lowest_equivalent(950 * MS),
        "min {} max {}",
        cor.min(),
        cor.max()
    );
    let s = c.stats();
    assert_eq!(s.sessions_lost_deadline, 1);
    assert_eq!(s.hb_ticks_missed, 10);
    assert!(
        c.metrics_text()
            .contains("lock_session_lost_total{reason=\"deadline\"} 1")
    );
}

/// Every L2/L5 has one outcome. Timeouts enter the raw histogram at their
/// give-up time (censored "≥"), transport errors add no sample.
#[tokio::test(start_paused = true)]
async fn every_exchange_has_one_outcome_and_a_timeout_is_a_censored_sample() {
    let clock: Arc<dyn Clock> = Arc::new(TokioClock::new());
    let mock = Mock::start(clock.clone()).await;
    mock.script(
        Ep::Heartbeat,
        [
            Scripted::ok(),
            Scripted::ok_after(Duration::from_secs(30)),
            Scripted::ok(),
            Scripted::hang_up(),
            Scripted::ok(),
        ],
    );
    let c = client(&mock.url, clock.clone(), |c| {
        c.with_session_ttl(Duration::from_secs(10))
            .with_request_timeout(Duration::from_millis(400))
    });
    let session = c.open_session("outcomes").await.unwrap();
    // Period 2.333 s: five ticks by 12 s (one failure at a time: the client
    // tolerates one failed heartbeat in a row).
    tokio::time::sleep(Duration::from_millis(12_000)).await;
    assert_eq!(session.lost_reason(), None);
    let s = c.stats();
    assert_eq!(s.hb_attempts, 5);
    assert_eq!(
        (s.hb_replies, s.hb_timeouts, s.hb_errors),
        (3, 1, 1),
        "{s:?}"
    );
    assert_eq!(s.hb_attempts, s.hb_replies + s.hb_timeouts + s.hb_errors);
    assert_eq!(s.heartbeats, 3);
    let raw = c.rtt_histogram();
    assert_eq!(raw.len(), s.hb_replies + s.hb_timeouts);
    assert!(raw.max() >= 400 * MS, "the timeout, censored at 400 ms");
    let text = c.metrics_text();
    for (outcome, n) in [("reply", 3), ("timeout", 1), ("error", 1)] {
        assert!(
            text.contains(&format!(
                "lock_heartbeat_outcomes_total{{outcome=\"{outcome}\"}} {n}"
            )),
            "{text}"
        );
    }
}

/// A session that lapses between payouts, with no handle and no call in
/// flight, is seen by `lost_reason` and counted when the worker closes it,
/// although its heartbeat task never reported it.
#[tokio::test(start_paused = true)]
async fn a_session_that_lapses_between_payouts_is_counted_when_closed_or_dropped() {
    let clock: Arc<dyn Clock> = Arc::new(TokioClock::new());
    let mock = Mock::start(clock.clone()).await;
    let c = client(&mock.url, clock.clone(), |c| {
        c.with_session_ttl(Duration::from_secs(3))
    });
    for close in [true, false] {
        let session = c.open_session("between-payouts").await.unwrap();
        let fired = count_losses(&session);
        session.inject_heartbeat_fault(HeartbeatFault::Stall(Duration::from_secs(600)));
        tokio::time::sleep(Duration::from_millis(2_200)).await;
        assert_eq!(session.lost_reason(), Some(LostReason::Deadline));
        if close {
            session.close().await;
        } else {
            drop(session);
        }
        assert_eq!(
            fired.load(std::sync::atomic::Ordering::SeqCst),
            0,
            "no handle"
        );
    }
    assert_eq!(c.stats().sessions_lost_deadline, 2);
    // Closing a live session is not a loss.
    let live = c.open_session("live").await.unwrap();
    live.close().await;
    assert_eq!(c.stats().sessions_lost(), 2);
}

/// `margin_stats` shows the margin applied at every deadline computation,
/// by exchange; `reset_measurements` zeroes it with every histogram and
/// counter, but the adaptive policy keeps its view (no return to its ceiling),
/// unlike `reset_rtt`.
#[tokio::test(start_paused = true)]
async fn margin_stats_show_the_applied_margins_and_reset_keeps_the_adaptive_view() {
    let clock: Arc<dyn Clock> = Arc::new(TokioClock::new());
    let mock = Mock::start(clock.clone()).await;
    mock.set_default(Ep::Heartbeat, Scripted::ok_after(Duration::from_millis(25)));
    let c = client(&mock.url, clock.clone(), |c| {
        c.with_session_ttl(Duration::from_secs(10))
            .with_margin(MarginPolicy::Adaptive {
                k: 4.0,
                floor: 0.05,
                ceiling: 0.5,
            })
    });
    let session = c.open_session("margins").await.unwrap();
    let cold = session
        .acquire(
            "cold",
            AcquireOptions::default().ttl(Duration::from_secs(1)),
        )
        .await
        .unwrap();
    session.release(cold).await.unwrap();
    let m = c.margin_stats();
    assert_eq!(m.get(DeadlineKind::Open).count, 1);
    assert_eq!(
        m.get(DeadlineKind::Open).mean(),
        Some(0.5),
        "warm-up: the ceiling"
    );
    assert_eq!(m.get(DeadlineKind::Acquire).mean(), Some(0.5));
    while c.rtt_histogram().len() < 20 {
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    let heartbeats = c.margin_stats().get(DeadlineKind::Heartbeat);
    assert_eq!(heartbeats.count, c.stats().heartbeats);
    assert_eq!(heartbeats.max_ppm, 500_000);
    assert!(heartbeats.min_ppm < 500_000, "{heartbeats:?}");

    c.reset_measurements();
    assert_eq!(c.stats(), Default::default());
    assert_eq!(c.margin_stats(), Default::default());
    assert_eq!(c.rtt_histogram().len(), 0);
    assert_eq!(c.corrected_rtt_histogram().len(), 0);
    assert_eq!(c.tick_lag_histogram().len(), 0);
    // The policy still knows the 25 ms RTT: 4 × 25 ms / 1 s ≈ 0.1, not 0.5.
    let warm = session
        .acquire(
            "warm",
            AcquireOptions::default().ttl(Duration::from_secs(1)),
        )
        .await
        .unwrap();
    let applied = c.margin_stats().get(DeadlineKind::Acquire);
    assert_eq!(applied.count, 1);
    let mean = applied.mean().unwrap();
    assert!((mean - 0.1).abs() < 0.002, "learnt margin kept: {mean}");
    let send = *mock.arrivals(Ep::Acquire).last().unwrap();
    assert_eq!(
        warm.client_deadline(),
        lease::client_deadline(send, 1_000, applied.max_ppm)
    );
    // reset_rtt does throw the policy back to its ceiling.
    c.reset_rtt();
    session.release(warm).await.unwrap();
    session
        .acquire(
            "again",
            AcquireOptions::default().ttl(Duration::from_secs(1)),
        )
        .await
        .unwrap();
    assert_eq!(c.margin_stats().get(DeadlineKind::Acquire).max_ppm, 500_000);
}
