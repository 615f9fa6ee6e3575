//! `experiments pause --ttl 1s --pauses 5 --seed 3`, both modes, against real
//! lock-server and rail-stub processes: the counts the issue pins.

use std::process::Command;

use experiments::pause::PauseResult;
use fencepost_api::rail::SubmissionOutcome;

fn run_pause(name: &str, extra: &[&str]) -> PauseResult {
    run_pauses(name, 5, extra)
}

/// `experiments pause --ttl 1s --pauses N --seed 3 EXTRA…`'s `pause.json`,
/// the run having exited 0 and written its files.
fn run_pauses(name: &str, pauses: u32, extra: &[&str]) -> PauseResult {
    let out = crate::scratch(name);
    let status = Command::new(crate::bin())
        .args(["pause", "--ttl", "1s", "--seed", "3", "--pauses"])
        .arg(pauses.to_string())
        .arg("--out")
        .arg(&out)
        .args(extra)
        .status()
        .expect("run experiments pause");
    let json = std::fs::read(out.join("pause.json")).expect("pause.json written");
    let result: PauseResult = serde_json::from_slice(&json).expect("pause.json parses");
    assert!(
        status.success(),
        "experiments pause failed: {status}; result {result:?}"
    );
    for f in [
        "manifest.json",
        "timeline.svg",
        "timeline.png",
        "report.md",
        "events.json",
    ] {
        assert!(out.join(f).is_file(), "{f} missing");
    }
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("manifest.json")).unwrap()).unwrap();
    assert_eq!(manifest["seed"], 3);
    let _ = std::fs::remove_dir_all(&out);
    result
}

#[test]
fn frozen_worker_with_the_client_check_abandons_and_no_fence_fires() {
    let r = run_pause("pause-on", &[]);
    assert!(r.client_check);
    assert_eq!(r.pauses, 5);
    assert_eq!(r.fenced_out, 0, "{r:?}");
    assert_eq!(
        (r.paid_twice, r.stale_paid, r.duplicate_attempted),
        (0, 0, 0)
    );
    assert_eq!(r.paid, 20, "every payout of the 5 × 4 backlog is paid once");
    assert!(r.ledger_ok);
    assert!(
        r.paused
            .iter()
            .all(|p| p.outcome == "abandoned" && p.paid_token > Some(p.stale_token))
    );
}

#[test]
fn frozen_worker_without_the_client_check_is_refused_by_fence_two_every_time() {
    let r = run_pause("pause-off", &["--disable-client-check"]);
    assert!(!r.client_check);
    assert_eq!(r.pauses, 5);
    assert_eq!(r.fenced_out, 5, "one fence-2 refusal per pause: {r:?}");
    assert_eq!(r.fenced_out_fence2, 5);
    assert_eq!(
        (r.paid_twice, r.stale_paid, r.duplicate_attempted),
        (0, 0, 0)
    );
    assert_eq!(r.paid, 20);
    assert!(r.ledger_ok);
    assert!(
        r.paused
            .iter()
            .all(|p| p.outcome == "fenced_out" && p.paid_token > Some(p.stale_token))
    );
}

/// The same freeze on etcd (`--backend etcd`): etcd's lock (a key on the
/// frozen worker's lease), fencepost's client arithmetic, the rail's fences.
/// Without the client check the resumed holder's stale submit reaches fence
/// 2 once per pause; nothing is paid twice. Skipped without `etcd` on PATH,
/// except under `CI=true`, where that fails.
#[test]
fn on_etcd_a_frozen_worker_without_the_client_check_is_refused_by_fence_two() {
    if bench_driver::backend::etcd::server::etcd_binary().is_err() {
        assert!(
            std::env::var("CI").map_or(true, |v| v != "true"),
            "CI=true and no etcd on PATH for the etcd pause experiment"
        );
        eprintln!("skipping: no etcd on PATH");
        return;
    }
    let r = run_pause(
        "pause-etcd-off",
        &["--backend", "etcd", "--disable-client-check"],
    );
    assert_eq!(r.config.backend, bench_driver::backend::BackendKind::Etcd);
    assert_eq!(
        r.config.session_ttl_ms, 1_000,
        "etcd leases are whole seconds"
    );
    assert_eq!(r.pauses, 5);
    assert_eq!(
        r.fenced_out_fence2, 5,
        "one fence-2 refusal per pause: {r:?}"
    );
    assert_eq!(
        (r.paid_twice, r.stale_paid, r.duplicate_attempted),
        (0, 0, 0)
    );
    assert_eq!(r.paid, 20);
    assert!(r.ledger_ok);
    assert!(r.paused.iter().all(|p| p.outcome == "fenced_out"
        && p.paid_token > Some(p.stale_token)
        && p.takeover_after_s.is_some()));
}

/// Whether redis-server can be started here; under `CI=true` its absence
/// is a failure, never a skip.
fn redis_here() -> bool {
    match bench_driver::backend::redis::server::redis_binary() {
        Ok(_) => true,
        Err(e) if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!("CI=true and no redis-server for the redis pause experiment: {e}")
        }
        Err(e) => {
            eprintln!("skipping: {e}");
            false
        }
    }
}

/// On one redis-server (`--backend redis`): `SET NX PX` and a per-key
/// counter as the token, the rail's fences on. Without the client check the
/// resumed holder's stale submit carries a counter value below its
/// successor's and fence 2 refuses it, once per pause; nothing is paid twice.
#[test]
fn on_redis_a_frozen_worker_without_the_client_check_is_refused_by_fence_two() {
    if !redis_here() {
        return;
    }
    let r = run_pauses(
        "pause-redis-off",
        2,
        &["--backend", "redis", "--disable-client-check"],
    );
    assert_eq!(r.config.backend, bench_driver::backend::BackendKind::Redis);
    assert!(r.config.rail_fences);
    assert_eq!(
        r.fenced_out_fence2, 2,
        "one fence-2 refusal per pause: {r:?}"
    );
    assert_eq!(
        (r.paid_twice, r.stale_paid, r.duplicate_attempted),
        (0, 0, 0)
    );
    assert_eq!(r.paid, 8);
    assert!(r.ledger_ok && r.expectation_met);
    assert!(r.paused.iter().all(|p| p.outcome == "fenced_out"
        && p.paid_token > Some(p.stale_token)
        && p.takeover_after_s.is_some()));
}

/// On redlock (`--backend redlock`: no fencing token, the rail's fences
/// off) the same freeze pays twice without the client check: nothing can
/// fence the resumed holder. The run meets its expectation (it shows the
/// consequence of a lock without a token) and the ledger check still calls
/// the double payment a violation; the fenced counts are not applicable.
#[test]
fn on_redlock_a_frozen_worker_without_the_client_check_pays_a_second_time() {
    if !redis_here() {
        return;
    }
    let r = run_pauses(
        "pause-redlock-off",
        2,
        &["--backend", "redlock", "--disable-client-check"],
    );
    assert_eq!(
        r.config.backend,
        bench_driver::backend::BackendKind::Redlock
    );
    assert!(!r.config.rail_fences);
    assert_eq!(r.paid_twice, 2, "every resumed holder paid again: {r:?}");
    assert_eq!(r.fenced_out, 0, "fences off: nothing is ever fenced");
    assert!(!r.ledger_ok, "a double payment is never ledger ok");
    assert!(r.expectation_met, "{}", r.expectation);
    assert!(r.expectation.contains("without a fencing token"));
    assert!(
        r.paused
            .iter()
            .all(|p| p.outcome == "paid" && p.stale_submissions == [SubmissionOutcome::Paid])
    );
}

/// With the client check on, neither redis backend fences anything: the
/// resumed holder finds its deadline passed and stops itself.
#[test]
fn on_redis_and_redlock_the_client_check_stops_the_resumed_holder() {
    if !redis_here() {
        return;
    }
    for backend in ["redis", "redlock"] {
        let r = run_pauses(&format!("pause-{backend}-on"), 2, &["--backend", backend]);
        assert_eq!(r.fenced_out, 0, "{backend}: {r:?}");
        assert_eq!(
            (r.paid_twice, r.stale_paid, r.duplicate_attempted),
            (0, 0, 0),
            "{backend}"
        );
        assert_eq!(r.paid, 8, "{backend}");
        assert!(r.ledger_ok && r.expectation_met, "{backend}: {r:?}");
        assert!(
            r.paused.iter().all(|p| p.outcome == "abandoned"),
            "{backend}: {:?}",
            r.paused
        );
    }
}
