//! Why `bench peer` stopped ([`PeerRunError`]), shared by the run
//! (`peer`) and the systems it starts (`peer_systems`).

use std::path::{Path, PathBuf};
use std::time::Duration;

use bench_analysis::manifest::ManifestError;
use bench_driver::backend::etcd::server::EtcdServerError;
use bench_driver::backend::redis::server::RedisServerError;
use bench_driver::cell::StackError;
use bench_driver::peer::PeerError;

/// How long a lock-server may take to answer `/readyz` (PostgreSQL: leadership).
pub(crate) const READY_TIMEOUT: Duration = Duration::from_secs(60);

/// Why `bench peer` stopped (exit 1). Each message is its own context; the
/// cause, where there is one, is its `source()`.
#[derive(Debug, thiserror::Error)]
pub enum PeerRunError {
    /// A file or directory of the run could not be written; check `--out`.
    #[error("writing {path}")]
    Write {
        /// The file or directory.
        path: PathBuf,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// `manifest.json` could not be written.
    #[error(transparent)]
    Manifest(#[from] ManifestError),
    /// The fsync ceiling could not be measured in a store's directory: the
    /// error names the probe file; check the directory (`--pg-dir`) and its disk.
    #[error(transparent)]
    Fsync(bench_core::fsync::FsyncError),
    /// The fsync loop's thread panicked: a bug; report it.
    #[error("the fsync loop's thread: {0}")]
    FsyncThread(#[from] tokio::task::JoinError),
    /// The plan could not be recorded as JSON (a bug).
    #[error("recording the plan")]
    Plan(#[source] serde_json::Error),
    /// A lock-server child did not start; its log is under `servers/`.
    #[error(transparent)]
    Start(#[from] StackError),
    /// The lock-server could not be polled for readiness.
    #[error("polling the lock-server")]
    Poll(#[source] reqwest::Error),
    /// The lock-server did not serve `/readyz` in time (on PostgreSQL it must
    /// hold the leader lease); see its log under `servers/`.
    #[error("the lock-server on {store} did not become ready within {READY_TIMEOUT:?}")]
    NotReady {
        /// The store URL, redacted.
        store: String,
    },
    /// PostgreSQL could not be reached; check `--pg-url`.
    #[error("cannot reach PostgreSQL at {url}")]
    PgConnect {
        /// The URL, redacted.
        url: String,
        /// The driver's error.
        #[source]
        source: tokio_postgres::Error,
    },
    /// The run's schema could not be created; check the role's rights.
    #[error("creating schema {schema}")]
    PgSchema {
        /// The schema.
        schema: String,
        /// The driver's error.
        #[source]
        source: tokio_postgres::Error,
    },
    /// The postgres store was planned without a URL (a bug: `resolve` checks it).
    #[error("no PostgreSQL URL")]
    NoPgUrl,
    /// etcd did not start; see its log under `servers/etcd`.
    #[error(transparent)]
    Etcd(#[from] EtcdServerError),
    /// A redis-server did not start; see its log under `servers/redis-STORE`.
    #[error(transparent)]
    Redis(#[from] RedisServerError),
    /// A measurement failed before its window (a client could not connect or
    /// open its session/lease).
    #[error("{label} {op} at {conc}")]
    Measure {
        /// `system/store`.
        label: String,
        /// The operation.
        op: &'static str,
        /// The concurrency.
        conc: usize,
        /// Why.
        #[source]
        source: PeerError,
    },
}

/// `result`, or [`PeerRunError::Write`] naming `path`.
pub(crate) fn written<T>(path: &Path, result: std::io::Result<T>) -> Result<T, PeerRunError> {
    result.map_err(|source| PeerRunError::Write {
        path: path.to_owned(),
        source,
    })
}
