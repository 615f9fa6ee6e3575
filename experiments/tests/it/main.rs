//! The experiments' integration tests: one binary, one module per experiment.
//! Tests against real processes run the `experiments` binary and wait for it
//! to finish (it waits on conditions with deadlines, never on hopeful sleeps);
//! they pin counts, never timings.

mod chaos;
mod cli;
mod clock;
mod docker;
mod failover;
mod pause;
mod throttle;

use std::path::PathBuf;

/// A fresh, empty directory under the system temp dir.
pub fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "fencepost-experiments-{name}-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("scratch dir");
    dir
}

/// `FENCEPOST_TEST_PG_URL`, or `None` (the test skips, saying so); under
/// `CI=true` a missing one is a failure, never a skip.
pub fn pg_url() -> Option<String> {
    match std::env::var("FENCEPOST_TEST_PG_URL") {
        Ok(u) if !u.is_empty() => Some(u),
        _ if std::env::var("CI").is_ok_and(|v| v == "true") => {
            panic!("CI=true but FENCEPOST_TEST_PG_URL is not set: .ci/run must start PostgreSQL")
        }
        _ => {
            eprintln!("skipping: set FENCEPOST_TEST_PG_URL (scripts/pg-test-cluster.sh start)");
            None
        }
    }
}

/// The `experiments` binary under test.
pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_experiments")
}
