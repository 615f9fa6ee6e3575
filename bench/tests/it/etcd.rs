//! The etcd backend end to end, against a real etcd child process: the
//! adapter grants, fences and loses like the SDK does, and a bench cell on
//! etcd pays with no duplicate and no fence-out. Without `etcd` on PATH these
//! tests are skipped with a message, except under `CI=true`, where a missing
//! etcd fails them (`.ci/run` installs `etcd-server`).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bench::runner;
use bench_core::grid::Cell;
use bench_driver::backend::etcd::server::{EtcdServer, etcd_binary};
use bench_driver::backend::etcd::{EtcdBackend, EtcdConfig};
use bench_driver::backend::{
    BackendError, BackendKind, BackendSession, HeartbeatStats, LockBackend,
};
use fencepost_sdk::{LockError, LostReason};
use tokio::sync::watch;

/// Whether etcd can be started here; under `CI=true` its absence is a failure.
fn etcd_here() -> bool {
    match etcd_binary() {
        Ok(_) => true,
        Err(e) if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!("CI=true and no etcd to test the etcd backend against: {e:#}")
        }
        Err(e) => {
            eprintln!("skipping: {e:#}");
            false
        }
    }
}

fn temp_dir(tag: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!(
        "fencepost-etcd-{tag}-{}-{}",
        std::process::id(),
        rand::random::<u32>()
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Waits for `cond` to hold, up to `limit`, polling; false if it never did.
async fn eventually(limit: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = tokio::time::Instant::now() + limit;
    while tokio::time::Instant::now() < deadline {
        if cond() {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    cond()
}

/// A held key blocks a second session; its release lets it in under a higher
/// create revision; keep-alives move the session deadline and are all
/// accounted for; D4 refuses a step longer than the lease; and a lease that
/// etcd forgets (revoked behind the client's back) loses the session, fires
/// the listener once for the held key, and every check fails from then on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_adapter_grants_fences_and_loses_on_a_real_etcd() {
    if !etcd_here() {
        return;
    }
    let dir = temp_dir("adapter");
    let etcd = EtcdServer::start(&dir).await.expect("etcd starts");
    let mut config = EtcdConfig::new(etcd.url(), Duration::from_secs(1));
    config.seed = 11;
    let a_client = EtcdBackend::new(config.clone()).unwrap();
    let b_client = EtcdBackend::new(config).unwrap();
    let a = a_client.open_session("a").await.expect("session a");
    let b = b_client.open_session("b").await.expect("session b");
    assert_eq!(a.granted_ms(), 1_000, "a 1 s etcd lease (min TTL 1 s)");

    let h1 = a
        .acquire("payout:x", Duration::from_secs(1), Duration::ZERO)
        .await
        .expect("a gets the free key");
    let refused = b
        .acquire("payout:x", Duration::from_secs(1), Duration::ZERO)
        .await
        .expect_err("b must not get a held key");
    assert!(
        matches!(
            refused,
            BackendError::Lock(LockError::LockHeld { attempts: 1, .. })
        ),
        "{refused:?}"
    );
    let t1 = h1.token();
    a.release(h1).await.expect("a releases");
    let h2 = b
        .acquire(
            "payout:x",
            Duration::from_secs(1),
            Duration::from_millis(200),
        )
        .await
        .expect("b gets the released key");
    assert!(
        h2.token() > t1,
        "create revisions only go up: {} after {t1}",
        h2.token()
    );
    b.release(h2).await.unwrap();

    // Keep-alives: at a 1 s lease and margin 0.3 the period is 233 ms.
    let first_deadline = a.client_deadline();
    assert!(
        eventually(Duration::from_secs(10), || a_client.stats().hb_replies >= 3).await,
        "no keep-alives answered: {:?}",
        a_client.stats()
    );
    assert!(
        a.client_deadline() > first_deadline,
        "keep-alives move the deadline"
    );
    let st = a_client.stats();
    assert_eq!(
        st.hb_attempts,
        st.hb_replies + st.hb_timeouts + st.hb_errors
    );
    assert_eq!(
        st.heartbeats, st.hb_replies,
        "every reply renewed the lease"
    );
    assert!(a_client.rtt_histogram().len() >= 3);
    assert!(a_client.corrected_rtt_histogram().len() >= a_client.rtt_histogram().len());

    let held = a
        .acquire("payout:y", Duration::from_secs(1), Duration::ZERO)
        .await
        .unwrap();
    a.check_still_held(&held).expect("held");
    assert!(matches!(
        a.ensure_time_for(&held, Duration::from_secs(1)),
        Err(LockError::InsufficientLease { .. })
    ));
    let lost = Arc::new(AtomicU64::new(0));
    let l = lost.clone();
    a.on_lock_lost(Box::new(move || {
        l.fetch_add(1, Ordering::SeqCst);
    }));

    // etcd forgets the lease: the next keep-alive answers TTL 0.
    let mut admin = etcd_client::Client::connect([etcd.url()], None)
        .await
        .unwrap();
    admin.lease_revoke(a.lease_id()).await.unwrap();
    assert!(
        eventually(Duration::from_secs(10), || a.is_lost()).await,
        "the session outlived its lease"
    );
    assert_eq!(a.lost_reason(), Some(LostReason::SessionExpired));
    assert!(
        eventually(Duration::from_secs(5), || lost.load(Ordering::SeqCst) == 1).await,
        "the listener fired {} times for one held key",
        lost.load(Ordering::SeqCst)
    );
    let err = a.check_still_held(&held).unwrap_err();
    assert_eq!(err.reason, LostReason::SessionExpired);
    assert_eq!(a_client.stats().sessions_lost_expired, 1);
    assert_eq!(a_client.stats().handles_lost, 1);
    // The revoke deleted the key, so b gets it.
    let h3 = b
        .acquire(
            "payout:y",
            Duration::from_secs(1),
            Duration::from_millis(500),
        )
        .await
        .expect("the lost session's key is free");
    assert!(h3.token() > held.token());
    b.release(h3).await.unwrap();
    a.close().await;
    b.close().await;
    drop(etcd);
    let _ = std::fs::remove_dir_all(&dir);
}

/// `bench run --backend etcd --ttl 2s` in small: payouts are paid, none
/// twice, no fence refuses anything, the ledger holds, and the row says
/// etcd with the whole-second session TTL it ran with.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bench_cell_on_etcd_pays_with_no_duplicate_and_no_fence_out() {
    if !etcd_here() {
        return;
    }
    let mut cfg = crate::driver::config(None);
    cfg.workers = 4;
    cfg.duration = Duration::from_secs(3);
    cfg.backends = vec![BackendKind::Etcd];
    let cfg = cfg.on_backend(BackendKind::Etcd);
    let plan = cfg.plan(Cell::fixed(Duration::from_secs(2), 0.3));
    assert_eq!(plan.id, "backend=etcd_ttl=2s_margin=0.30");
    let out = temp_dir("cell");
    let (_tx, rx) = watch::channel(false);
    let result = runner::run_cell(&cfg, &plan, &out, rx, &|_| {}, false, None)
        .await
        .expect("the cell runs")
        .expect("not interrupted");
    let r = &result.row;
    assert_eq!(r.backend, "etcd");
    assert_eq!(r.session_ttl_ms, 1_000, "2 s × 15/30 = 1 s: already whole");
    assert!(r.payouts_paid > 0, "{r:?}");
    assert_eq!((r.duplicate_attempted, r.fenced_out), (0, 0), "{r:?}");
    assert_eq!((r.paid_twice, r.stale_paid), (0, 0));
    assert!(r.ledger_ok);
    assert!(r.hb_count > 0, "keep-alives recorded as heartbeats: {r:?}");
    // The SDK's gaps, over LeaseGrant and keep-alives, at the same rule.
    assert!(r.hb_gap_count > 0, "{r:?}");
    assert_eq!(r.hb_gaps_over_window, r.session_lost_deadline, "{r:?}");
    let _ = std::fs::remove_dir_all(&out);
}
