//! `experiments failover` for real: three replicas on PostgreSQL
//! (`FENCEPOST_TEST_PG_URL`; fails under `CI=true` without it), short phases,
//! no PostgreSQL restart (no `--pg-dir`: that step is skipped and says so).
//! Pins counts, never timings: every fault that ran found a new leader, the
//! must-be-zero counters are zero, the outputs exist.

use std::process::Command;

#[test]
fn failover_elects_a_new_leader_after_kill9_and_sigstop_and_nothing_is_paid_twice() {
    let Some(url) = crate::pg_url() else {
        return;
    };
    let out = crate::scratch("failover");
    let run = Command::new(crate::bin())
        .args([
            "failover",
            "--seed",
            "5",
            "--phase",
            "1500ms",
            "--workers",
            "2",
            "--pg-url",
        ])
        .arg(&url)
        .arg("--out")
        .arg(&out)
        .env_remove("FENCEPOST_PG_DIR")
        .output()
        .expect("run experiments failover");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    assert_eq!(run.status.code(), Some(0), "{text}");
    let json: serde_json::Value =
        serde_json::from_slice(&std::fs::read(out.join("failover.json")).expect("failover.json"))
            .expect("JSON");
    let faults = json["faults"].as_array().expect("faults");
    assert_eq!(faults.len(), 3, "{json}");
    for f in &faults[..2] {
        assert!(f["skipped"].is_null(), "{f}");
        assert!(
            f["time_to_leader_ms"].as_f64().is_some(),
            "no new leader: {f}"
        );
        assert_ne!(f["leader_before"], f["leader_after"], "{f}");
    }
    assert_eq!(faults[1]["thawed_2xx"], 0, "{}", faults[1]);
    assert!(
        faults[2]["skipped"]
            .as_str()
            .is_some_and(|s| s.contains("--pg-dir")),
        "{}",
        faults[2]
    );
    for pair in json["must_be_zero"].as_array().expect("must_be_zero") {
        assert_eq!(pair[1], 0, "{pair}");
    }
    assert!(
        json["row"]["payouts_paid"].as_u64().unwrap_or(0) > 0,
        "{json}"
    );
    for f in [
        "report.md",
        "failover.svg",
        "failover.png",
        "results.csv",
        "manifest.json",
    ] {
        assert!(out.join(f).is_file(), "{f} missing");
    }
}
