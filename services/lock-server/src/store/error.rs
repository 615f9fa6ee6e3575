//! [`StoreError`]: every way the store itself can fail (never the client's
//! request), each with its source and what the operator can do about it.

use std::path::PathBuf;

/// A failure of the store itself (never of the client's request). The server
/// answers it with `503 UNAVAILABLE` and changes nothing; each variant carries
/// its source, and its doc says what the operator can do about it.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// SQLite refused or failed: check the file's path, permissions and free
    /// disk space; a busy database clears once the other writer finishes.
    #[error("sqlite: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// PostgreSQL refused or failed a statement: check the server is up, the
    /// URL's credentials and the schema; retry once it answers.
    #[error("postgres: {0}")]
    Postgres(#[from] tokio_postgres::Error),
    /// No PostgreSQL connection could be had from the pool (the database is
    /// down, unreachable or out of connections); retry later.
    #[error("postgres pool: {0}")]
    Pool(#[from] deadpool_postgres::PoolError),
    /// The PostgreSQL pool could not be built from the URL; fix `lock.store`.
    #[error("postgres pool configuration: {0}")]
    PoolBuild(#[from] deadpool_postgres::BuildError),
    /// The store URL is not one of `memory:`, `sqlite:PATH`, `postgres://…`; fix `lock.store`.
    #[error(
        "lock.store={0:?} is not a store URL; use memory:, sqlite:PATH (sqlite: alone = the default file) or postgres://USER@HOST:PORT/DB"
    )]
    BadUrl(String),
    /// The directory for the SQLite file could not be created: check the
    /// path and its permissions, or give another with `lock.store`.
    #[error("cannot create the directory {dir}: {source}")]
    Dir {
        /// The directory.
        dir: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// This replica's write was refused by the leader fence: another replica
    /// took the leader row (a higher epoch), or this one's leader lease ran out
    /// in the database, or this replica is a standby. Nothing was persisted;
    /// the replica steps down and answers `503 NOT_LEADER`.
    #[error("not the leader: the write was fenced out ({0})")]
    Fenced(String),
    /// A store task on the blocking pool panicked or was cancelled (the
    /// runtime is shutting down); nothing was persisted, retry on a running server.
    #[error("store task failed: {0}")]
    Task(#[from] tokio::task::JoinError),
    /// The group committer stopped before answering (the runtime is shutting
    /// down): whether the write was committed is unknown; a restarted server
    /// reads what was. Retry on a running server.
    #[error("the store's committer stopped before answering")]
    CommitterGone,
    /// A session with this id is already stored (ids are 122 random bits, so
    /// this is a bug, never the client's doing); nothing in the commit was
    /// written. Retry: a new L1 draws a new id.
    #[error("a session with id {0} is already stored")]
    SessionExists(String),
}
