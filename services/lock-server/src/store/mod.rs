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

mod error;
pub mod group;
mod lock_store;
pub mod memory;
mod model;
mod pg_batch;
mod pg_fence;
pub mod postgres;
mod sql;
pub mod sqlite;

use std::path::PathBuf;
use std::sync::Arc;

pub use error::StoreError;
pub use lock_store::LockStore;
pub use model::{
    CommitStats, Committed, Fence, GrantRecord, KeyRecord, LeaderBid, LeaderRow, SessionRecord,
    Snapshot, TombstoneRecord, Write,
};

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
