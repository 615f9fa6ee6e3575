//! `bench adr`'s plan: the steps it would run and what marks one not
//! available in this build.

use std::path::Path;

use bench::adr::{Features, plan};

#[test]
fn the_plan_marks_what_this_build_cannot_run() {
    let out = Path::new("/tmp/pack");
    let none = plan(false, 1, out, &Features::default());
    let names: Vec<&str> = none.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(
        names,
        [
            "sweep",
            "freeze",
            "adaptive",
            "long-hold",
            "pause",
            "pause-uc03",
            "clock",
            "clock-margin",
            "throttle",
            "failover",
            "chaos",
            "pause-etcd",
            "pause-etcd-uc03",
            "pause-redis",
            "pause-redis-uc03",
            "pause-redlock",
            "pause-redlock-uc03",
            "peer"
        ]
    );
    assert!(none[0].unavailable.is_none());
    assert!(none[3].args.windows(2).any(|w| w == ["--steps", "3"]));
    assert!(
        none[4]
            .unavailable
            .as_deref()
            .unwrap()
            .contains("experiments binary")
    );
    assert!(!none[0].args.iter().any(|a| a == "--repeat"));
    assert!(
        none[0]
            .args
            .windows(2)
            .any(|w| w == ["--margin", "0.1..0.5:0.05"])
    );
    let redlock = &none[names
        .iter()
        .position(|n| *n == "pause-redlock-uc03")
        .unwrap()];
    assert!(
        redlock
            .args
            .windows(2)
            .any(|w| w == ["--backend", "redlock"])
    );
    assert!(redlock.args.iter().any(|a| a == "--disable-client-check"));
    let services = Features {
        experiments: Some("/x/experiments".into()),
        etcd: true,
        ..Features::default()
    };
    let some = plan(false, 1, out, &services);
    let why = |name: &str| {
        some.iter()
            .find(|s| s.name == name)
            .and_then(|s| s.unavailable.clone())
    };
    assert_eq!(why("pause-etcd"), None);
    assert_eq!(
        why("pause-redis").as_deref(),
        Some("`redis-server` is not on PATH")
    );
    let with = Features {
        sweep_repeat: true,
        ..Features::default()
    };
    let full = plan(false, 1, out, &with);
    assert!(full[0].args.windows(2).any(|w| w == ["--repeat", "3"]));
    let quick = plan(true, 1, out, &with);
    assert!(
        !quick[0].args.iter().any(|a| a == "--repeat"),
        "one repeat when quick"
    );
}
