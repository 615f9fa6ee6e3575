//! The throttle experiment's parts that run anywhere: the quota parser and
//! the cgroup set-up against a fake hierarchy, and its skip message.

use experiments::cgroup::{CgroupError, CgroupVersion, CpuCgroup, QuotaSpec};

#[test]
fn quota_percent_fraction_and_period_forms_agree() {
    let q = QuotaSpec::parse("25%").unwrap();
    assert_eq!(q, QuotaSpec::parse("0.25").unwrap());
    assert_eq!(q, QuotaSpec::parse("25ms/100ms").unwrap());
    assert!((q.fraction() - 0.25).abs() < 1e-12);
    assert!(
        QuotaSpec::parse("150%").is_ok(),
        "more than one core is allowed"
    );
    assert!(QuotaSpec::parse("-5%").is_err());
}

#[test]
fn without_a_cpu_hierarchy_the_error_says_what_is_missing() {
    let root = crate::scratch("cg-none");
    let e = CpuCgroup::create_under(&root, "x", QuotaSpec::parse("10%").unwrap()).unwrap_err();
    assert!(matches!(e, CgroupError::NoHierarchy { .. }));
    let msg = experiments::throttle::skip_message(&e);
    assert!(
        msg.contains("skipped") && msg.contains("cgroup v2") && msg.contains("cgroup v1"),
        "{msg}"
    );
}

#[test]
fn v1_fallback_writes_period_and_quota_and_removes_the_group() {
    let root = crate::scratch("cg-v1");
    std::fs::create_dir_all(root.join("cpu")).unwrap();
    std::fs::write(root.join("cpu/cpu.cfs_quota_us"), "-1").unwrap();
    let g = CpuCgroup::create_under(&root, "fp", QuotaSpec::parse("10%").unwrap()).unwrap();
    assert_eq!(g.version, CgroupVersion::V1);
    assert_eq!(
        std::fs::read_to_string(root.join("cpu/fp/cpu.cfs_quota_us")).unwrap(),
        "10000"
    );
    assert_eq!(
        std::fs::read_to_string(root.join("cpu/fp/cpu.cfs_period_us")).unwrap(),
        "100000"
    );
    // A plain directory cannot be rmdir'ed with files in it; the real cgroupfs can.
    for f in ["cpu.cfs_quota_us", "cpu.cfs_period_us"] {
        std::fs::remove_file(root.join("cpu/fp").join(f)).unwrap();
    }
    drop(g);
    assert!(!root.join("cpu/fp").exists());
}

#[test]
fn v2_is_preferred_when_it_has_the_cpu_controller() {
    let root = crate::scratch("cg-v2");
    std::fs::write(root.join("cgroup.controllers"), "cpuset cpu io memory").unwrap();
    let g = CpuCgroup::create_under(&root, "fp", QuotaSpec::parse("10ms/50ms").unwrap()).unwrap();
    assert_eq!(g.version, CgroupVersion::V2);
    assert_eq!(
        std::fs::read_to_string(root.join("fp/cpu.max")).unwrap(),
        "10000 50000"
    );
    std::fs::remove_file(root.join("fp/cpu.max")).unwrap();
}

/// The experiment end to end (root can write cgroups on this machine; where it
/// cannot, the experiment exits 4 and says why, and this test checks only
/// that): two rows in the bench layout forming a throttle pair, five trigger
/// rows each, and trigger 5 evaluated on the pair from the table alone, as
/// `bench triggers DIR` does. A debug build's pair is `not_evaluated` (its
/// tail is the build's); a release build's gets a verdict with both margins.
#[test]
fn throttle_writes_a_pair_that_trigger_5_reads_from_the_table() {
    let out = crate::scratch("throttle-e2e");
    let run = std::process::Command::new(crate::bin())
        .args([
            "throttle",
            "--quota",
            "20%",
            "--ttl",
            "1s",
            "--duration",
            "2s",
        ])
        .args(["--workers", "2", "--seed", "5", "--out"])
        .arg(&out)
        .output()
        .expect("run experiments throttle");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    if run.status.code() == Some(experiments::throttle::EXIT_NO_CGROUP) {
        assert!(text.contains("skipped"), "{text}");
        eprintln!("no writable cgroup here: {text}");
        return;
    }
    assert_eq!(run.status.code(), Some(0), "{text}");
    let rows = bench_analysis::results::read_results(&out).unwrap();
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert_eq!(rows[0].cpu_quota, bench_analysis::triggers::UNTHROTTLED);
    assert!(
        rows[1].cpu_quota.contains("20.0% of a core"),
        "{}",
        rows[1].cpu_quota
    );
    for r in &rows {
        assert!(r.hb_corrected_count > 0 && r.cpu_workers_s > 0.0, "{r:?}");
        assert!(r.warmup_s > 0.0, "the default warm-up: {r:?}");
    }
    let json: Vec<bench_analysis::triggers::TriggerResult> =
        serde_json::from_str(&std::fs::read_to_string(out.join("triggers.json")).unwrap()).unwrap();
    assert_eq!(json.len(), 10, "five rows per cell");
    let t5: Vec<_> = json
        .iter()
        .filter(|t| t.trigger == bench_analysis::triggers::AUTOPILOT_THROTTLING)
        .collect();
    assert_eq!(t5.len(), 2);
    // The table alone gives the same verdict (the pair is in the rows).
    let again = bench_analysis::triggers::evaluate(&rows);
    for t in &t5 {
        let same = again
            .iter()
            .find(|a| a.trigger == t.trigger && a.cell == t.cell)
            .unwrap();
        assert_eq!(same.verdict, t.verdict);
        if cfg!(debug_assertions) {
            assert_eq!(
                t.verdict,
                bench_analysis::triggers::Verdict::NotEvaluated,
                "{t:?}"
            );
            assert!(t.detail.contains("debug build"), "{}", t.detail);
        } else {
            assert_ne!(
                t.verdict,
                bench_analysis::triggers::Verdict::NotEvaluated,
                "{t:?}"
            );
            assert!(t.detail.contains("margin needed"), "{}", t.detail);
        }
    }
    for f in [
        "hgrm/throttle=none.corrected.hdr",
        "throttle.json",
        "report.md",
    ] {
        assert!(out.join(f).is_file(), "{f}");
    }
}
