//! The command line: help teaches with examples, bad values exit 2 naming the flag.

use std::process::Command;

fn run(args: &[&str]) -> (i32, String) {
    let out = Command::new(crate::bin())
        .args(args)
        .output()
        .expect("run experiments");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.code().unwrap_or(-1), text)
}

#[test]
fn help_lists_every_experiment_with_examples() {
    let (code, text) = run(&["--help"]);
    assert_eq!(code, 0);
    for s in [
        "pause",
        "clock",
        "throttle",
        "failover",
        "--disable-client-check",
        "Examples",
    ] {
        assert!(text.contains(s), "help lacks {s}:\n{text}");
    }
    assert!(
        !text.lines().any(|l| l.starts_with("  worker ")),
        "the internal worker stays hidden"
    );
}

#[test]
fn bad_values_exit_two_and_name_the_flag() {
    for (args, flag) in [
        (vec!["pause", "--ttl", "soon"], "--ttl"),
        (vec!["pause", "--ttl", "0s"], "--ttl"),
        (vec!["pause", "--pauses", "0"], "--pauses"),
        (vec!["pause", "--margin", "1.5"], "--margin"),
        (vec!["clock", "--fractions", "0.5,-1"], "--fractions"),
        (vec!["clock", "--cases", "0"], "--cases"),
        (vec!["throttle", "--quota", "0%"], "--quota"),
        (vec!["chaos", "--hold", "sometimes"], "--hold"),
        (vec!["chaos", "--steps", "0"], "--steps"),
        (vec!["chaos", "--long-holds", "--ttl", "2s"], "--long-holds"),
        (vec!["chaos", "--long-holds", "--workers", "3"], "--workers"),
    ] {
        let (code, text) = run(&args);
        assert_eq!(code, 2, "{args:?}: {text}");
        assert!(text.contains(flag), "{args:?} does not name {flag}: {text}");
    }
}

#[test]
fn clock_records_its_seed_and_writes_the_layout() {
    let out = crate::scratch("clock-cli");
    let (code, text) = run(&[
        "clock",
        "--cases",
        "20",
        "--seed",
        "9",
        "--out",
        out.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("seed 9"));
    for f in [
        "clock.json",
        "clock.csv",
        "clock.svg",
        "clock.png",
        "manifest.json",
        "report.md",
    ] {
        assert!(out.join(f).is_file(), "{f} missing");
    }
    let csv = std::fs::read_to_string(out.join("clock.csv")).unwrap();
    assert_eq!(
        csv.lines().count(),
        1 + 6 * 10,
        "a header and one row per (scenario, fraction)"
    );
    let _ = std::fs::remove_dir_all(&out);
}
