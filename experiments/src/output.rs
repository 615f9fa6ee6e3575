//! The results layout every experiment shares with the bench: an output
//! directory (default `data/runs/<timestamp>-<experiment>/`), `manifest.json`
//! through `bench_analysis::manifest::Manifest` (seed, configuration, commit, machine),
//! JSON files, and a `report.md` section that `bench report` can include;
//! and the runtime and exit-code plumbing of the experiments' `main`s.

use std::future::Future;
use std::path::{Path, PathBuf};

use bench_analysis::manifest::{Manifest, ManifestError, now_rfc3339};
use bench_core::error::Chain;
use serde::Serialize;

/// The file every experiment writes its report section into.
pub const REPORT_MD: &str = "report.md";

/// Why an experiment's output directory could not be made or written.
///
/// The I/O variants print the OS error alone, as the experiments always
/// have; the path is in the value for a caller that wants it.
#[derive(Debug, thiserror::Error)]
pub enum RunDirError {
    /// The directory could not be created: pass another `--out`, or fix
    /// the permissions of its parent.
    #[error("{error}")]
    Create {
        /// The directory.
        dir: PathBuf,
        /// The OS error (in the message, so not also a `source()`).
        error: std::io::Error,
    },
    /// A file in it could not be written: check the disk, and that nothing
    /// else (a directory of that name) is in the way.
    #[error("{error}")]
    Write {
        /// The file.
        path: PathBuf,
        /// The OS error (in the message, so not also a `source()`).
        error: std::io::Error,
    },
    /// The configuration or a result could not be serialised: a bug, report it.
    #[error(transparent)]
    Json(#[from] serde_json::Error),
    /// `manifest.json` could not be written; [`ManifestError`] says what to do.
    #[error(transparent)]
    Manifest(#[from] ManifestError),
}

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
    ) -> Result<Self, RunDirError> {
        let dir = match out {
            Some(p) => p.to_path_buf(),
            None => default_out(experiment),
        };
        if let Err(error) = std::fs::create_dir_all(&dir) {
            return Err(RunDirError::Create { dir, error });
        }
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

    /// Writes `contents` to `name`.
    pub fn write(&self, name: &str, contents: impl AsRef<[u8]>) -> Result<(), RunDirError> {
        let path = self.path(name);
        std::fs::write(&path, contents).map_err(|error| RunDirError::Write { path, error })
    }

    /// Writes `value` as pretty JSON to `name`.
    pub fn write_json(&self, name: &str, value: &impl Serialize) -> Result<(), RunDirError> {
        self.write(name, serde_json::to_vec_pretty(value)?)
    }

    /// Writes the `report.md` section and stamps the manifest finished.
    pub fn finish(mut self, report_section: &str) -> Result<PathBuf, RunDirError> {
        self.write(REPORT_MD, report_section)?;
        self.manifest.finish();
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
/// 1 after printing the error with its causes.
pub fn exit_code<T, E: std::error::Error + 'static>(
    name: &str,
    result: Result<T, E>,
    done: impl FnOnce(T) -> i32,
) -> i32 {
    match result {
        Ok(t) => done(t),
        Err(e) => {
            eprintln!("experiments {name}: {}", Chain(&e));
            1
        }
    }
}
