//! What can go wrong in `experiments failover`: [`FailoverError`] ends the
//! run (exit 1); [`PgRestartError`] only skips the PostgreSQL restart fault,
//! its message recorded in the fault's `skipped`.

use std::path::PathBuf;

use bench_analysis::frame::TableError;
use bench_driver::cell::{CellError, StackError};
use fencepost_api::latency::LatencySpecError;
use fencepost_harness::HarnessError;

use crate::output::RunDirError;
use crate::plots::PlotError;

/// Why `experiments failover` failed (exit 1).
#[derive(Debug, thiserror::Error)]
pub enum FailoverError {
    /// The output directory could not be made or written; [`RunDirError`] says what to do.
    #[error(transparent)]
    RunDir(#[from] RunDirError),
    /// The production rail latency is not a spec: a bug (it is a constant).
    #[error(transparent)]
    Latency(#[from] LatencySpecError),
    /// PostgreSQL could not be reached at `--pg-url`: start it
    /// (`scripts/pg-test-cluster.sh start`) or fix the URL.
    #[error("--pg-url {url}: cannot connect: {error}")]
    Connect {
        /// The URL given.
        url: String,
        /// The driver's error (in the message, so not also a `source()`).
        error: tokio_postgres::Error,
    },
    /// The run's fresh schema could not be created: the `--pg-url` user
    /// needs the right to create schemas in its database.
    #[error(transparent)]
    Postgres(#[from] tokio_postgres::Error),
    /// A lock-server replica or the rail-stub could not be found or started:
    /// the harness's message names the binary (build it) or ends with its
    /// stderr (read its log in the output directory).
    #[error("{0}")]
    Service(HarnessError),
    /// The thread starting a service panicked or was cancelled (the runtime
    /// is shutting down): nothing to retry.
    #[error(transparent)]
    Join(#[from] tokio::task::JoinError),
    /// The `/readyz` probe's HTTP client could not be built (a broken
    /// installation): report it.
    #[error(transparent)]
    Probe(#[from] reqwest::Error),
    /// No replica served `/readyz` in time after the start: read the
    /// lock-servers' logs and check PostgreSQL.
    #[error("no replica became leader")]
    NoLeader,
    /// The workers' stack could not start; [`StackError`] says what to do.
    #[error(transparent)]
    Stack(#[from] StackError),
    /// The cell failed (its faults included); its doc says what to do.
    #[error(transparent)]
    Cell(#[from] CellError),
    /// Ctrl-C ended the run early: nothing is reported; rerun.
    #[error("interrupted")]
    Interrupted,
    /// The schedule returned without opening the measured window: a bug, report it.
    #[error("the window never opened")]
    NeverOpened,
    /// The schedule was driven a second time (it owns the fault task): a bug, report it.
    #[error("the failover schedule runs once")]
    RunsOnce,
    /// `results.csv`/`.parquet` could not be written; [`TableError`] says what to do.
    #[error(transparent)]
    Results(#[from] TableError),
    /// The throughput plot could not be drawn; [`PlotError`] says what to do.
    #[error(transparent)]
    Plot(#[from] PlotError),
}

impl From<HarnessError> for FailoverError {
    // Not `#[from]`: some of the harness's messages spell out their OS
    // error and also return it as their `source()`; a chain would say it twice.
    fn from(e: HarnessError) -> Self {
        FailoverError::Service(e)
    }
}

/// Why PostgreSQL could not be restarted (the fault is then skipped). Each
/// message is the one the fault's `skipped` records.
#[derive(Debug, thiserror::Error)]
pub enum PgRestartError {
    /// No PostgreSQL server is installed where `scripts/pg-test-cluster.sh`
    /// looks: install one (`apt-get install -y postgresql`).
    #[error("no pg_ctl under /usr/lib/postgresql")]
    NoPgCtl,
    /// A directory or file the restart needs could not be read, or `pg_ctl`
    /// could not be run: the OS error says why.
    #[error("{error}")]
    Io {
        /// The path read, or the `pg_ctl` run.
        path: PathBuf,
        /// The OS error (in the message, so not also a `source()`).
        error: std::io::Error,
    },
    /// `pg_ctl restart` failed: its stderr (in the message) says why; check
    /// `--pg-dir`.
    #[error("pg_ctl restart of {}: {stderr}", data.display())]
    Failed {
        /// The cluster's data directory.
        data: PathBuf,
        /// What `pg_ctl` wrote on stderr.
        stderr: String,
    },
    /// A PostgreSQL container started again after a kill did not accept a
    /// query within its time: read `postgres.log` in the run's directory.
    #[error(
        "PostgreSQL at {addr} did not accept a query within {patience:?} of its restart: {last}"
    )]
    NotBack {
        /// Where it was asked.
        addr: std::net::SocketAddr,
        /// How long it was given.
        patience: std::time::Duration,
        /// The last answer (the connection's error).
        last: String,
    },
}

#[cfg(test)]
mod tests {
    use bench_core::error::Chain;

    use super::*;

    #[test]
    fn a_service_that_cannot_start_names_its_os_error_once() {
        let e = FailoverError::from(HarnessError::Spawn {
            path: "target/debug/lock-server".into(),
            error: std::io::Error::other("permission denied"),
        });
        assert_eq!(
            Chain(&e).to_string(),
            "cannot start target/debug/lock-server: permission denied"
        );
    }

    #[test]
    fn a_skipped_restart_records_the_os_error_alone() {
        let e = PgRestartError::Io {
            path: "/usr/lib/postgresql".into(),
            error: std::io::Error::other("no such directory"),
        };
        assert_eq!(e.to_string(), "no such directory");
        assert_eq!(Chain(&e).to_string(), "no such directory");
    }
}
