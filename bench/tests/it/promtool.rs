//! The generated Prometheus rules: the committed files under
//! deploy/prometheus/ are what `bench rules` writes now, `promtool check rules`
//! accepts them, `promtool test rules` passes deploy/prometheus/tests.yaml on
//! the short-window file, and fails once trigger 1's budget is ×10 (a rules
//! file that does not measure what the tests say must not pass them).
//! Without promtool the promtool tests are skipped with a message, except
//! under `CI=true`, where its absence fails them (`.ci/run` installs it).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use bench_analysis::triggers::{DEFAULT_FOR, Params, render};

/// The repository root (bench's parent).
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("bench has a parent")
        .to_owned()
}

/// The short-window parameters of deploy/prometheus/test-rules.yaml: the
/// production lock configuration with a 5 min window, `for: 1m` and a 6 s
/// hop (at 7 s trigger 3 fires whatever the RTT, so it could not be quiet).
pub fn test_params() -> (Params, Duration) {
    (
        Params {
            window: Duration::from_secs(300),
            hop: Duration::from_secs(6),
            ..Params::default()
        },
        Duration::from_secs(60),
    )
}

/// `name` from PATH (or `/usr/bin`), if runnable; under `CI=true` its absence panics.
pub fn tool(name: &str) -> Option<PathBuf> {
    let candidates = std::env::var_os("PATH")
        .map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .unwrap_or_default()
        .into_iter()
        .chain([PathBuf::from("/usr/bin")])
        .map(|d| d.join(name));
    for c in candidates {
        if c.is_file() {
            return Some(c);
        }
    }
    if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!("CI=true and no {name} on PATH (Debian: apt-get install prometheus)");
    }
    eprintln!("skipping: no {name} on PATH (Debian: apt-get install prometheus)");
    None
}

fn temp_dir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "fencepost-rules-{tag}-{}-{}",
        std::process::id(),
        rand::random::<u32>()
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Runs promtool with `args` in `dir`: (success, stdout + stderr).
fn promtool(bin: &Path, dir: &Path, args: &[&str]) -> (bool, String) {
    let out = Command::new(bin)
        .args(args)
        .current_dir(dir)
        .output()
        .expect("promtool runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

/// A directory holding tests.yaml and `rules` as test-rules.yaml.
fn test_dir(tag: &str, rules: &str) -> PathBuf {
    let d = temp_dir(tag);
    std::fs::write(d.join("test-rules.yaml"), rules).unwrap();
    std::fs::copy(
        repo().join("deploy/prometheus/tests.yaml"),
        d.join("tests.yaml"),
    )
    .unwrap();
    d
}

#[test]
fn committed_rules_files_are_what_bench_rules_generates() {
    let dir = repo().join("deploy/prometheus");
    let prod = render(&Params::default(), DEFAULT_FOR);
    let (p, f) = test_params();
    let short = render(&p, f);
    for (file, want) in [("fencepost-rules.yaml", prod), ("test-rules.yaml", short)] {
        let have = std::fs::read_to_string(dir.join(file)).unwrap_or_default();
        assert!(
            have == want,
            "deploy/prometheus/{file} is not what `bench rules` generates now; regenerate it \
             with the command in its header (docs/alerts.md)"
        );
    }
    // The header's command line is the one that regenerates the short file.
    let header = format!("#   {}\n", bench_analysis::triggers::command_line(&p, f));
    assert!(render(&p, f).contains(&header));
}

#[test]
fn promtool_checks_and_tests_the_generated_rules() {
    let Some(bin) = tool("promtool") else { return };
    let d = repo().join("deploy/prometheus");
    for file in ["fencepost-rules.yaml", "test-rules.yaml"] {
        let (ok, out) = promtool(&bin, &d, &["check", "rules", file]);
        assert!(ok, "promtool check rules {file}:\n{out}");
    }
    let (p, f) = test_params();
    let t = test_dir("ok", &render(&p, f));
    let (ok, out) = promtool(&bin, &t, &["test", "rules", "tests.yaml"]);
    assert!(ok, "promtool test rules tests.yaml:\n{out}");
    let _ = std::fs::remove_dir_all(t);
}

#[test]
fn promtool_tests_fail_when_trigger1_budget_is_ten_times_too_large() {
    let Some(bin) = tool("promtool") else { return };
    let (p, f) = test_params();
    let rules = render(&p, f);
    let le = format!("le=\"{}\"", p.budget_le());
    let ten = format!("le=\"{}\"", p.budget_secs() * 10.0);
    assert!(rules.contains(&le), "the rules select {le}");
    let sabotaged = rules.replace(&le, &ten);
    let t = test_dir("sabotage", &sabotaged);
    let (ok, out) = promtool(&bin, &t, &["test", "rules", "tests.yaml"]);
    assert!(
        !ok,
        "promtool test rules passed with trigger 1's budget at {ten}:\n{out}"
    );
    assert!(out.contains("FencepostRttP99VsMargin"), "{out}");
    let _ = std::fs::remove_dir_all(t);
}
