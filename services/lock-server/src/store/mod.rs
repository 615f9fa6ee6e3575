//! Where grants, tokens and holders are persisted. A [`LockStore`] is the
//! durable half of the lock-server: the fencing token of every grant is issued
//! by the store and persisted before the grant is returned, so tokens only go
//! up across crashes and restarts. Leases and session liveness are *not*
//! persisted: they live in memory on the serving process (a heartbeat never
//! writes), and a restarted server restarts them from its own start instant.
//!
//! The store also keeps what memory lets go of: a key whose grant ended leaves
//! the server's memory, and its last token is read back from here when the
//! key is acquired again (the store issues `last + 1`) or asked about (L7).
//!
//! Implementations: [`memory::MemoryStore`] (`memory:`, not durable, for tests
//! and quick runs), [`sqlite::SqliteStore`] (`sqlite:PATH`, the embedded
//! default, at [`default_sqlite_path`] when no path is given) and
//! [`postgres::PostgresStore`] (`postgres://…`).
//!
//! **One write path.** Every change reaches a store as a list of [`Write`]s
//! through [`LockStore::commit`], which each backend runs as exactly one
//! transaction (one fsync); the single-write methods (`grant`, `clear_grant`,
//! …) are provided on top of it. A per-transaction guard (a leader epoch
//! check, say) belongs in each backend's `commit` and nowhere else.
//! [`open`] puts the durable stores behind [`group::GroupCommit`], which
//! merges the writes of concurrent requests into one such transaction.

pub mod group;
pub mod memory;
mod pg_batch;
pub mod postgres;
pub mod sqlite;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

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

/// A persisted session: enough to restore it at a takeover.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionRecord {
    /// The session id.
    pub id: String,
    /// Who opened it.
    pub owner_id: String,
    /// The TTL granted, ms.
    pub ttl_ms: u64,
}

/// A persisted grant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GrantRecord {
    /// Its fencing token.
    pub token: u64,
    /// The holding session.
    pub session_id: String,
    /// The lease granted, ms.
    pub lease_ms: u64,
}

/// A persisted key: its last token and its holder, if any.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KeyRecord {
    /// The key.
    pub key: String,
    /// The last token ever issued for it.
    pub last_token: u64,
    /// The current holder, if not released.
    pub holder: Option<GrantRecord>,
}

/// What a store holds: everything ([`LockStore::load`]) or what a restarted
/// server needs ([`LockStore::load_live`]).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// Sessions not deleted or expired.
    pub sessions: Vec<SessionRecord>,
    /// Keys: every key ever granted, or only those with a holder.
    pub keys: Vec<KeyRecord>,
}

/// What every write transaction of a replicated store checks first, in the
/// same transaction ([`LockStore::set_fence`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Fence {
    /// A single-node server: writes are not fenced (memory, SQLite, and a
    /// PostgreSQL store driven without leadership, as the tests do).
    #[default]
    Unfenced,
    /// A standby or a deposed leader: every write is refused ([`StoreError::Fenced`]).
    Standby,
    /// The leader of `epoch`: a write commits only if the leader row still has
    /// this epoch and its lease has not run out on the database's clock.
    Leader {
        /// The epoch this replica took.
        epoch: u64,
        /// How long a write transaction may sit idle before the database ends
        /// it (a frozen leader must not block a takeover with its row locks).
        idle_limit: Duration,
    },
}

/// One attempt to take or keep the leader row ([`LockStore::claim_leadership`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaderBid {
    /// This process's node id (random per start).
    pub node: String,
    /// The base URL standbys name in `leader`.
    pub advertise: Option<String>,
    /// The leader lease to write, from the database's clock.
    pub lease: Duration,
    /// How long past the old leader lease a takeover waits (grace).
    pub grace: Duration,
    /// `Some(epoch)`: renew this epoch's lease (fails once another replica took
    /// the row or the lease ran out). `None`: take the row if its lease plus
    /// grace has passed (or it is this node's own row), with a higher epoch.
    pub renew: Option<u64>,
}

/// The leader row after a [`LeaderBid`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaderRow {
    /// True when the bid won: this node leads `epoch`.
    pub ours: bool,
    /// The row's epoch (0 if there is no row yet).
    pub epoch: u64,
    /// The leader's advertised URL, when a live leader has one.
    pub leader: Option<String>,
}

/// One durable change: what [`LockStore::commit`] takes, in order. Each
/// variant is what one single-write method of [`LockStore`] does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Write {
    /// Persists a new session (L1); fails the commit if the id is stored.
    CreateSession(SessionRecord),
    /// Forgets each session and clears every grant it holds (L3, the sweeper).
    DeleteSessions(Vec<String>),
    /// Issues the key's next token and records its holder (L4); the commit
    /// returns the token for it.
    Grant {
        /// The key.
        key: String,
        /// The holding session.
        session_id: String,
        /// The lease granted, ms.
        lease_ms: u64,
    },
    /// Records the grant's longest lease, if `(key, token)` still holds (L4, L5).
    SetLease {
        /// The key.
        key: String,
        /// The grant's token.
        token: u64,
        /// The longest lease so far, ms.
        lease_ms: u64,
    },
    /// Clears each `(key, token)` holder that is still that grant (L6, L8, expiry).
    ClearGrants(Vec<(String, u64)>),
}

impl Write {
    /// The single-write method this write stands for (`grant`, `clear_grant`,
    /// …), for logs and fault injection.
    pub fn name(&self) -> &'static str {
        match self {
            Write::CreateSession(_) => "create_session",
            Write::DeleteSessions(_) => "delete_session",
            Write::Grant { .. } => "grant",
            Write::SetLease { .. } => "set_lease",
            Write::ClearGrants(_) => "clear_grant",
        }
    }
}

/// What one committed [`Write`] returns: the token of a [`Write::Grant`],
/// `None` for every other write.
pub type Committed = Option<u64>;

/// How a [`group::GroupCommit`] has batched so far (for `/metrics` and benches).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CommitStats {
    /// Transactions committed or attempted (a batch and each of its retries).
    pub transactions: u64,
    /// Requests' commits (units) answered.
    pub units: u64,
    /// Units retried alone after their batch failed.
    pub retried_alone: u64,
    /// The most units one transaction carried.
    pub largest_batch: u64,
}

/// The durable state of a lock-server. Every method is atomic: it either
/// persists all of its effect or fails having persisted nothing. Writes that
/// name a grant by `(key, token)` are compare-and-set: they do nothing once
/// the key's holder has another token. Every write goes through
/// [`commit`](Self::commit); the single-write methods are provided.
#[async_trait]
pub trait LockStore: Send + Sync {
    /// `memory`, `sqlite` or `postgres`, for `/v1/config` and logs.
    fn kind(&self) -> &'static str;

    /// The file the store lives in, for `/v1/config` (`None` but for SQLite:
    /// a PostgreSQL URL may carry credentials and is never shown).
    fn path(&self) -> Option<PathBuf> {
        None
    }

    /// True when what is persisted survives a restart of the server (false
    /// only for `memory:`).
    fn durable(&self) -> bool {
        true
    }

    /// Reads everything persisted, every key ever granted included (tests and tools).
    async fn load(&self) -> Result<Snapshot, StoreError>;

    /// Reads what a starting server restores: every session, and only the keys
    /// that have a holder (a FREE key stays in the store until it is used).
    async fn load_live(&self) -> Result<Snapshot, StoreError>;

    /// The last token issued for `key`, or `None` if it was never granted.
    async fn last_token(&self, key: &str) -> Result<Option<u64>, StoreError>;

    /// Applies `writes` in order as one transaction — one fsync for all of
    /// them — and returns one [`Committed`] per write, in order; durable
    /// before it returns. On an error nothing of any write is persisted. The
    /// one write path of a store: a per-transaction guard goes here.
    async fn commit(&self, writes: &[Write]) -> Result<Vec<Committed>, StoreError>;

    /// How writes were batched, for a store that batches ([`group::GroupCommit`]).
    fn commit_stats(&self) -> Option<CommitStats> {
        None
    }

    /// Persists a new session.
    async fn create_session(&self, session: &SessionRecord) -> Result<(), StoreError> {
        self.commit(&[Write::CreateSession(session.clone())])
            .await
            .map(drop)
    }

    /// Forgets a session and clears every grant it holds.
    async fn delete_session(&self, session_id: &str) -> Result<(), StoreError> {
        self.delete_sessions(&[session_id.to_string()]).await
    }

    /// [`delete_session`](Self::delete_session) for each id, atomically (one
    /// transaction), for the sweeper. No ids: no transaction.
    async fn delete_sessions(&self, session_ids: &[String]) -> Result<(), StoreError> {
        if session_ids.is_empty() {
            return Ok(());
        }
        self.commit(&[Write::DeleteSessions(session_ids.to_vec())])
            .await
            .map(drop)
    }

    /// Issues the key's next token — strictly greater than every token ever
    /// issued for it, including by earlier processes — and records `session_id`
    /// as its holder with `lease_ms`, durably, before returning the token.
    async fn grant(&self, key: &str, session_id: &str, lease_ms: u64) -> Result<u64, StoreError> {
        let write = Write::Grant {
            key: key.to_string(),
            session_id: session_id.to_string(),
            lease_ms,
        };
        let committed = self.commit(&[write]).await?;
        Ok(committed
            .first()
            .copied()
            .flatten()
            .expect("a store's commit returns a token for each grant"))
    }

    /// Records a grant's longest lease so far (what a restart restores) for
    /// `(key, token)`; a no-op if that grant is no longer the holder.
    async fn set_lease(&self, key: &str, token: u64, lease_ms: u64) -> Result<(), StoreError> {
        let write = Write::SetLease {
            key: key.to_string(),
            token,
            lease_ms,
        };
        self.commit(&[write]).await.map(drop)
    }

    /// Clears the holder of `key` if it is still the grant with `token`
    /// (release, revoke, expiry); the key's last token is kept.
    async fn clear_grant(&self, key: &str, token: u64) -> Result<(), StoreError> {
        self.clear_grants(&[(key.to_string(), token)]).await
    }

    /// [`clear_grant`](Self::clear_grant) for each pair, atomically (one
    /// transaction), for the sweeper. No pairs: no transaction.
    async fn clear_grants(&self, grants: &[(String, u64)]) -> Result<(), StoreError> {
        if grants.is_empty() {
            return Ok(());
        }
        self.commit(&[Write::ClearGrants(grants.to_vec())])
            .await
            .map(drop)
    }

    /// Checks the store answers (for `/readyz`).
    async fn ping(&self) -> Result<(), StoreError>;

    /// True when several lock-servers may share this store, one leading at a
    /// time (PostgreSQL). `memory:` and `sqlite:` are single-node.
    fn replicated(&self) -> bool {
        false
    }

    /// Sets what every later write transaction checks first ([`Fence`]). A
    /// no-op on single-node stores.
    fn set_fence(&self, _fence: Fence) {}

    /// Takes or renews the leader row, atomically, on the database's clock.
    /// Single-node stores always answer "ours, epoch 0".
    async fn claim_leadership(&self, _bid: &LeaderBid) -> Result<LeaderRow, StoreError> {
        Ok(LeaderRow {
            ours: true,
            epoch: 0,
            leader: None,
        })
    }

    /// Gives up the leader row of `epoch` held by `node` at once (a clean
    /// shutdown that serves nothing more), so a standby need not wait out the
    /// lease. A no-op when the row has moved on, and on single-node stores.
    async fn resign_leadership(&self, _node: &str, _epoch: u64) -> Result<(), StoreError> {
        Ok(())
    }
}

/// The SQLite file `lock.store` means by default (and by `sqlite:` alone):
/// `$XDG_STATE_HOME/fencepost/lock.sqlite`, else
/// `$HOME/.local/state/fencepost/lock.sqlite`, else `./fencepost-lock.sqlite`
/// — one stable path, so tokens keep rising across restarts (C1 §1).
pub fn default_sqlite_path() -> PathBuf {
    fencepost_api::default_state_file("lock.sqlite")
}

/// The `lock.store` default: `sqlite:` and [`default_sqlite_path`].
pub fn default_store_url() -> String {
    format!("sqlite:{}", default_sqlite_path().display())
}

/// Opens the store named by a `lock.store` URL: `memory:`, `sqlite:PATH`
/// (`sqlite:` alone: [`default_sqlite_path`]; the directory is created), or
/// `postgres://…` (migrations are applied at start). The durable stores come
/// behind a [`group::GroupCommit`]; `memory:` writes nothing to disk and is
/// returned as it is.
pub async fn open(url: &str) -> Result<Arc<dyn LockStore>, StoreError> {
    if url == "memory:" {
        return Ok(Arc::new(memory::MemoryStore::default()));
    }
    if let Some(path) = url.strip_prefix("sqlite:") {
        let path = if path.is_empty() {
            default_sqlite_path()
        } else {
            PathBuf::from(path)
        };
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            std::fs::create_dir_all(dir).map_err(|source| StoreError::Dir {
                dir: dir.to_path_buf(),
                source,
            })?;
        }
        let store = sqlite::SqliteStore::open(&path).await?;
        return Ok(Arc::new(group::GroupCommit::new(Arc::new(store))));
    }
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        let store = postgres::PostgresStore::connect(url).await?;
        return Ok(Arc::new(group::GroupCommit::with_in_flight(
            Arc::new(store),
            group::POSTGRES_IN_FLIGHT,
        )));
    }
    Err(StoreError::BadUrl(url.to_string()))
}

/// The tables both SQL stores share (SQLite creates `fp_locks` `WITHOUT
/// ROWID`, see [`sqlite`]). Each store adds its own index on
/// `holder_session` ([`SQLITE_INDEXES`]; PostgreSQL's, and what a held row
/// means there, are in [`postgres`]).
pub(crate) const TABLES: &str = "
CREATE TABLE IF NOT EXISTS fp_sessions (
    id       TEXT PRIMARY KEY,
    owner_id TEXT NOT NULL,
    ttl_ms   BIGINT NOT NULL
);
CREATE TABLE IF NOT EXISTS fp_locks (
    key            TEXT PRIMARY KEY,
    last_token     BIGINT NOT NULL,
    holder_session TEXT,
    holder_token   BIGINT,
    lease_ms       BIGINT
);
";

/// SQLite's holder index. It is partial: it holds the held keys only, so a
/// grant or release of one of a million FREE keys touches one small, hot
/// index page rather than a random leaf of a million NULL entries (the full
/// index of earlier versions is dropped).
pub(crate) const SQLITE_INDEXES: &str = "
CREATE INDEX IF NOT EXISTS fp_locks_holder_live ON fp_locks (holder_session) WHERE holder_session IS NOT NULL;
DROP INDEX IF EXISTS fp_locks_holder;
";

/// Issues the next token and sets the holder in one statement.
pub(crate) const GRANT_SQL: &str = "
INSERT INTO fp_locks (key, last_token, holder_session, holder_token, lease_ms)
VALUES ($1, 1, $2, 1, $3)
ON CONFLICT (key) DO UPDATE SET
    last_token     = fp_locks.last_token + 1,
    holder_session = excluded.holder_session,
    holder_token   = fp_locks.last_token + 1,
    lease_ms       = excluded.lease_ms
RETURNING last_token";

pub(crate) const CLEAR_GRANT_SQL: &str = "UPDATE fp_locks SET holder_session = NULL, holder_token = NULL, lease_ms = NULL WHERE key = $1 AND holder_token = $2";
pub(crate) const CLEAR_SESSION_GRANTS_SQL: &str = "UPDATE fp_locks SET holder_session = NULL, holder_token = NULL, lease_ms = NULL WHERE holder_session = $1";
pub(crate) const DELETE_SESSION_SQL: &str = "DELETE FROM fp_sessions WHERE id = $1";
pub(crate) const INSERT_SESSION_SQL: &str =
    "INSERT INTO fp_sessions (id, owner_id, ttl_ms) VALUES ($1, $2, $3)";
pub(crate) const SET_LEASE_SQL: &str =
    "UPDATE fp_locks SET lease_ms = $3 WHERE key = $1 AND holder_token = $2";
pub(crate) const SELECT_SESSIONS_SQL: &str = "SELECT id, owner_id, ttl_ms FROM fp_sessions";
pub(crate) const SELECT_LOCKS_SQL: &str =
    "SELECT key, last_token, holder_session, holder_token, lease_ms FROM fp_locks";
pub(crate) const SELECT_HELD_LOCKS_SQL: &str = "SELECT key, last_token, holder_session, holder_token, lease_ms FROM fp_locks WHERE holder_session IS NOT NULL";
pub(crate) const SELECT_LAST_TOKEN_SQL: &str = "SELECT last_token FROM fp_locks WHERE key = $1";

/// Builds a [`KeyRecord`] from one `fp_locks` row's columns.
pub(crate) fn key_record(
    key: String,
    last_token: i64,
    holder_session: Option<String>,
    holder_token: Option<i64>,
    lease_ms: Option<i64>,
) -> KeyRecord {
    let holder = match (holder_session, holder_token, lease_ms) {
        (Some(session_id), Some(token), Some(lease_ms)) => Some(GrantRecord {
            token: token as u64,
            session_id,
            lease_ms: lease_ms as u64,
        }),
        _ => None,
    };
    KeyRecord {
        key,
        last_token: last_token as u64,
        holder,
    }
}
