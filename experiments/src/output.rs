//! The results layout every experiment shares with the bench: an output
//! directory (default `data/runs/<timestamp>-<experiment>/`), `manifest.json`
//! through `bench_analysis::manifest::Manifest` (seed, configuration, commit, machine),
//! JSON files, and a `report.md` section that `bench report` can include;
//! and the runtime and exit-code plumbing of the experiments' `main`s.

use std::future::Future;
use std::path::{Path, PathBuf};

use bench_analysis::manifest::{Manifest, now_rfc3339};
use serde::Serialize;

/// The file every experiment writes its report section into.
pub const REPORT_MD: &str = "report.md";

/// An experiment's output directory with its manifest.
pub struct RunDir {
    /// The directory.
    pub dir: PathBuf,
    /// The manifest, rewritten by [`RunDir::finish`].
    manifest: Manifest,
}

impl RunDir {
    /// Creates `out` (or `data/runs/<timestamp>-<experiment>/`), prints the
    /// seed and writes a first `manifest.json` for `experiments <experiment>`.
    pub fn create(
        experiment: &str,
        out: Option<&Path>,
        seed: u64,
        config: &impl Serialize,
    ) -> anyhow::Result<Self> {
        let dir = match out {
            Some(p) => p.to_path_buf(),
            None => default_out(experiment),
        };
        std::fs::create_dir_all(&dir)?;
        println!(
            "experiments {experiment}: seed {seed}, output {}",
            dir.display()
        );
        let manifest = Manifest::new(
            &format!("experiments {experiment}"),
            seed,
            serde_json::to_value(config)?,
        );
        manifest.write(&dir)?;
        Ok(RunDir { dir, manifest })
    }

    /// A path inside the directory.
    pub fn path(&self, name: &str) -> PathBuf {
        self.dir.join(name)
    }

    /// Writes `value` as pretty JSON to `name`.
    pub fn write_json(&self, name: &str, value: &impl Serialize) -> anyhow::Result<()> {
        std::fs::write(self.path(name), serde_json::to_vec_pretty(value)?)?;
        Ok(())
    }

    /// Writes the `report.md` section and stamps the manifest finished.
    pub fn finish(mut self, report_section: &str) -> anyhow::Result<PathBuf> {
        std::fs::write(self.path(REPORT_MD), report_section)?;
        self.manifest.finished_at = Some(now_rfc3339());
        self.manifest.cells_done = vec![
            self.manifest
                .command
                .trim_start_matches("experiments ")
                .to_string(),
        ];
        self.manifest.write(&self.dir)?;
        Ok(self.dir)
    }
}

/// `data/runs/<timestamp>-<experiment>` (the bench's naming).
pub fn default_out(experiment: &str) -> PathBuf {
    PathBuf::from("data/runs").join(format!("{}-{experiment}", now_rfc3339().replace(':', "")))
}

/// Runs an experiment's async body on a fresh multi-thread runtime.
pub fn block_on<T>(body: impl Future<Output = T>) -> T {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
        .block_on(body)
}

/// The exit code of `experiments <name>`: what `done` makes of a result, or
/// 1 after printing the error.
pub fn exit_code<T>(name: &str, result: anyhow::Result<T>, done: impl FnOnce(T) -> i32) -> i32 {
    match result {
        Ok(t) => done(t),
        Err(e) => {
            eprintln!("experiments {name}: {e:#}");
            1
        }
    }
}
