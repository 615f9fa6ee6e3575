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
