//! `experiments chaos` against real processes: a short healthy run finds no
//! violation (and exercises the freeze inside the critical section and the
//! trigger-4 report), and the same schedules against a rail-stub with its
//! fences off (`--sabotage no-fences`) are caught and exit 1.

use std::process::Command;

use experiments::chaos::ChaosResult;

fn run_chaos(name: &str, extra: &[&str]) -> (bool, ChaosResult) {
    let out = crate::scratch(name);
    let status = Command::new(crate::bin())
        .args(["chaos", "--runs", "2", "--seed", "1", "--out"])
        .arg(&out)
        .args(extra)
        .status()
        .expect("run experiments chaos");
    let json = std::fs::read(out.join("chaos.json")).expect("chaos.json written");
    let result: ChaosResult = serde_json::from_slice(&json).expect("chaos.json parses");
    for r in &result.per_run {
        let dir = out.join(format!("runs/run-{:04}", r.run));
        assert!(
            dir.join("history.jsonl").is_file() || dir.join("history.jsonl.gz").is_file(),
            "run {} has no history",
            r.run
        );
    }
    let _ = std::fs::remove_dir_all(&out);
    (status.success(), result)
}

#[test]
fn healthy_chaos_runs_check_every_operation_and_find_no_violation() {
    let (ok, r) = run_chaos("chaos-ok", &[]);
    assert!(ok, "exit status: {r:#?}");
    assert_eq!(r.runs, 2);
    assert_eq!(r.violations(), 0, "{:#?}", r.per_run);
    assert!(r.operations_checked > 100, "{}", r.operations_checked);
    // Every run freezes a worker inside its critical section; the fences
    // refuse its stale submit and the run reports it as a trigger-4 event.
    assert!(r.faults["worker_freeze_in_cs"] >= 2, "{:?}", r.faults);
    assert!(r.trigger4_events >= 1, "{r:#?}");
}

#[test]
fn chaos_against_a_rail_without_fences_reports_violations_and_exits_1() {
    let (ok, r) = run_chaos("chaos-sabotage", &["--sabotage", "no-fences"]);
    assert!(!ok, "a sabotaged chaos run must exit 1");
    assert!(r.paid_twice + r.stale_paid > 0, "{:#?}", r.per_run);
    assert_eq!(r.config.sabotage.as_deref(), Some("no-fences"));
}

#[test]
fn replicas_and_docker_are_refused_with_a_reason() {
    for (args, why) in [
        (&["--replicas", "3"][..], "--replicas 3"),
        (&["--runtime", "docker"][..], "--runtime docker"),
        (&["--only-run", "5", "--runs", "2"][..], "--only-run 5"),
    ] {
        let out = Command::new(crate::bin())
            .arg("chaos")
            .args(args)
            .output()
            .expect("run experiments chaos");
        assert_eq!(out.status.code(), Some(1), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(why), "{args:?}: {err}");
    }
}
