//! `promtool check metrics` for the tests of every `/metrics` exposition
//! (the SDK's, the lock-server's, the rail-stub's): one way to find promtool,
//! to skip without it, and to refuse a skip under CI.

use std::io::Write as _;
use std::process::{Command, Stdio};

/// Runs `promtool check metrics` (`$PROMTOOL`, else `promtool` on PATH) on
/// `text` and panics unless it exits 0 with nothing to say (no error, no
/// lint). Returns `false`, with a message, when promtool is not installed,
/// so the caller's check is skipped; under `CI=true` a missing promtool
/// panics instead. For tests.
pub fn promtool_check_metrics(text: &str) -> bool {
    let bin = std::env::var("PROMTOOL").unwrap_or_else(|_| "promtool".into());
    let child = Command::new(&bin)
        .args(["check", "metrics"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn();
    let mut child = match child {
        Ok(c) => c,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            assert!(
                !std::env::var("CI").is_ok_and(|v| v == "true"),
                "CI=true but promtool ({bin}) is not installed: {e}"
            );
            eprintln!("skipping the promtool check: {bin} is not installed ({e})");
            return false;
        }
        Err(e) => panic!("cannot run {bin}: {e}"),
    };
    child
        .stdin
        .take()
        .expect("promtool's stdin")
        .write_all(text.as_bytes())
        .expect("write to promtool");
    let out = child.wait_with_output().expect("promtool runs");
    let said = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        out.status.success(),
        "promtool check metrics failed ({}):\n{said}\n--- text:\n{text}",
        out.status
    );
    assert!(
        said.trim().is_empty(),
        "promtool lint:\n{said}\n--- text:\n{text}"
    );
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The check fails on what promtool refuses: a counter without `_total`
    /// (lint) and a broken line (error); a clean exposition passes.
    #[test]
    fn refuses_lint_and_errors_and_passes_clean_text() {
        let clean = "# HELP x_total A count.\n# TYPE x_total counter\nx_total 1\n";
        if !promtool_check_metrics(clean) {
            return; // No promtool here (and not CI): nothing to show.
        }
        for bad in ["# HELP x A count.\n# TYPE x counter\nx 1\n", "x{ 1\n"] {
            let caught = std::panic::catch_unwind(|| promtool_check_metrics(bad));
            assert!(caught.is_err(), "promtool accepted {bad:?}");
        }
    }
}
