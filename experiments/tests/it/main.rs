//! The experiments' integration tests: one binary, one module per experiment.
//! Tests against real processes run the `experiments` binary and wait for it
//! to finish (it waits on conditions with deadlines, never on hopeful sleeps);
//! they pin counts, never timings.

mod chaos;
mod cli;
mod clock;
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

/// The `experiments` binary under test.
pub fn bin() -> &'static str {
    env!("CARGO_BIN_EXE_experiments")
}
