//! `sqlite:PATH` — the embedded default. One connection in WAL mode with
//! `synchronous=FULL`, so a grant's token is on disk before the grant is
//! returned and survives a kill -9 (and a power loss). Calls run on tokio's
//! blocking pool; the connection mutex is never held across an await. Every
//! write is one transaction of `commit_tx` (batched by the group committer
//! in front of this store, see [`super::group`]).
//!
//! The file is opened in exclusive locking mode and locked at start: a second
//! lock-server on the same file (easy with one default path) fails to start
//! instead of granting the same keys from its own memory.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, params};

use super::error::StoreError;
use super::lock_store::LockStore;
use super::model::{Committed, SessionRecord, Snapshot, TombstoneRecord, Write};
use super::sql::{
    CLEAR_GRANT_SQL, CLEAR_SESSION_GRANTS_SQL, DELETE_SESSION_SQL, GRANT_SQL, INSERT_SESSION_SQL,
    PRINCIPAL_COLUMNS, SELECT_HELD_LOCKS_SQL, SELECT_LAST_TOKEN_SQL, SELECT_LOCKS_SQL,
    SELECT_SESSIONS_SQL, SET_LEASE_SQL, SQLITE_INDEXES, TABLES, key_record,
};

/// Forgets tombstones older than `?1` ms on SQLite's wall clock
/// (`julianday('now')`, in ms since the Unix epoch; it works in every SQLite
/// version, where `unixepoch('subsec')` needs 3.42).
const PRUNE_TOMBSTONES_SQL: &str = "DELETE FROM fp_tombstones WHERE expired_at_ms < CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER) - ?1";
/// Records (or refreshes) the tombstone of `?1`, stamped with that clock.
const INSERT_TOMBSTONE_SQL: &str = "INSERT INTO fp_tombstones (id, expired_at_ms, principal) VALUES (?1, CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER), ?2) ON CONFLICT (id) DO UPDATE SET expired_at_ms = excluded.expired_at_ms, principal = excluded.principal";
/// Every tombstone, oldest first: id, age in ms on that clock, principal.
const SELECT_TOMBSTONES_SQL: &str = "SELECT id, CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER) - expired_at_ms, principal FROM fp_tombstones ORDER BY expired_at_ms, id";

/// Adds each of the principal columns that `conn`'s tables lack
/// (files created before it); new files get them here too.
fn add_principal_columns(conn: &Connection) -> Result<(), rusqlite::Error> {
    for (table, column) in PRINCIPAL_COLUMNS {
        let present: i64 = conn.query_row(
            "SELECT count(*) FROM pragma_table_info(?1) WHERE name = ?2",
            params![table, column],
            |r| r.get(0),
        )?;
        if present == 0 {
            // Both names are constants of ours: no injection.
            conn.execute_batch(&format!("ALTER TABLE {table} ADD COLUMN {column} TEXT"))?;
        }
    }
    Ok(())
}

/// A store in one SQLite file.
#[derive(Debug, Clone)]
pub struct SqliteStore {
    /// The one connection; SQLite serialises writers anyway.
    conn: Arc<Mutex<Connection>>,
    /// The file, for logs.
    path: PathBuf,
}

impl SqliteStore {
    /// Opens (creating if needed) the database at `path` and applies the schema.
    pub async fn open(path: &Path) -> Result<Self, StoreError> {
        let path = path.to_path_buf();
        let p = path.clone();
        let conn = tokio::task::spawn_blocking(move || -> Result<Connection, StoreError> {
            let conn = Connection::open(&p)?;
            // Set first: a file held by another process fails within this.
            conn.busy_timeout(std::time::Duration::from_secs(1))?;
            // Exclusive before WAL: the lock the first write takes is kept
            // until the connection closes (and no shared-memory index is used).
            conn.pragma_update(None, "locking_mode", "EXCLUSIVE")?;
            conn.pragma_update(None, "journal_mode", "WAL")?;
            conn.pragma_update(None, "synchronous", "FULL")?;
            // A 32 MiB page cache: random keys of a large table stay in it.
            conn.pragma_update(None, "cache_size", -32_768)?;
            conn.execute_batch(&sqlite_schema())?;
            add_principal_columns(&conn)?;
            conn.execute_batch("BEGIN EXCLUSIVE; COMMIT;")?;
            Ok(conn)
        })
        .await??;
        Ok(SqliteStore {
            conn: Arc::new(Mutex::new(conn)),
            path,
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Runs `f` with the connection on the blocking pool.
    async fn run<T, F>(&self, f: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&mut Connection) -> Result<T, rusqlite::Error> + Send + 'static,
    {
        let conn = self.conn.clone();
        tokio::task::spawn_blocking(move || {
            let mut guard = conn.lock().unwrap_or_else(|e| e.into_inner());
            f(&mut guard).map_err(StoreError::from)
        })
        .await?
    }
}

/// The shared tables, with `fp_locks` as a `WITHOUT ROWID` table in new files:
/// the key's b-tree is the table, so a grant or release dirties one leaf
/// instead of a table leaf and an index leaf (fewer distinct pages per commit
/// and per checkpoint when the keys are many). Files created earlier keep
/// their rowid table; both work.
fn sqlite_schema() -> String {
    let tables = TABLES.replacen(
        "    lease_ms       BIGINT\n);",
        "    lease_ms       BIGINT\n) WITHOUT ROWID;",
        1,
    );
    format!("{tables}{SQLITE_INDEXES}")
}

/// SQLite's placeholders are `?1`; the shared SQL uses PostgreSQL's `$1`.
fn q(sql: &str) -> String {
    sql.replace('$', "?")
}

#[async_trait]
impl LockStore for SqliteStore {
    fn kind(&self) -> &'static str {
        "sqlite"
    }

    fn path(&self) -> Option<PathBuf> {
        Some(self.path.clone())
    }

    async fn load(&self) -> Result<Snapshot, StoreError> {
        self.run(|c| read_snapshot(c, SELECT_LOCKS_SQL)).await
    }

    async fn load_live(&self) -> Result<Snapshot, StoreError> {
        self.run(|c| read_snapshot(c, SELECT_HELD_LOCKS_SQL)).await
    }

    async fn last_token(&self, key: &str) -> Result<Option<u64>, StoreError> {
        let key = key.to_string();
        self.run(move |c| {
            c.prepare_cached(&q(SELECT_LAST_TOKEN_SQL))?
                .query_row(params![key], |r| r.get::<_, i64>(0))
                .optional()
                .map(|t| t.map(|t| t as u64))
        })
        .await
    }

    async fn commit(&self, writes: &[Write]) -> Result<Vec<Committed>, StoreError> {
        let writes = writes.to_vec();
        self.run(move |c| commit_tx(c, &writes)).await
    }

    async fn ping(&self) -> Result<(), StoreError> {
        self.run(|c| {
            c.query_row("SELECT 1", [], |_| Ok(()))
                .optional()
                .map(|_| ())
        })
        .await
    }
}

/// The one write transaction: `writes` in order, then one COMMIT (one WAL
/// fsync under `synchronous=FULL`). Any error rolls all of them back.
fn commit_tx(c: &mut Connection, writes: &[Write]) -> Result<Vec<Committed>, rusqlite::Error> {
    let tx = c.transaction()?;
    let mut out = Vec::with_capacity(writes.len());
    for w in writes {
        out.push(apply(&tx, w)?);
    }
    tx.commit()?;
    Ok(out)
}

/// One write inside [`commit_tx`]'s transaction; a grant's token.
fn apply(tx: &rusqlite::Transaction<'_>, w: &Write) -> Result<Committed, rusqlite::Error> {
    match w {
        Write::CreateSession(s) => {
            tx.prepare_cached(&q(INSERT_SESSION_SQL))?.execute(params![
                s.id,
                s.owner_id,
                s.ttl_ms as i64,
                s.principal
            ])?;
        }
        Write::DeleteSessions(ids) => {
            for id in ids {
                tx.prepare_cached(&q(CLEAR_SESSION_GRANTS_SQL))?
                    .execute(params![id])?;
                tx.prepare_cached(&q(DELETE_SESSION_SQL))?
                    .execute(params![id])?;
            }
        }
        Write::Grant {
            key,
            session_id,
            lease_ms,
        } => {
            let token: i64 = tx
                .prepare_cached(&q(GRANT_SQL))?
                .query_row(params![key, session_id, *lease_ms as i64], |r| r.get(0))?;
            return Ok(Some(token as u64));
        }
        Write::SetLease {
            key,
            token,
            lease_ms,
        } => {
            tx.prepare_cached(&q(SET_LEASE_SQL))?.execute(params![
                key,
                *token as i64,
                *lease_ms as i64
            ])?;
        }
        Write::ClearGrants(grants) => {
            for (key, token) in grants {
                tx.prepare_cached(&q(CLEAR_GRANT_SQL))?
                    .execute(params![key, *token as i64])?;
            }
        }
        Write::RecordExpired {
            ids,
            principals,
            keep_ms,
        } => {
            tx.prepare_cached(PRUNE_TOMBSTONES_SQL)?
                .execute(params![i64::try_from(*keep_ms).unwrap_or(i64::MAX)])?;
            for (i, id) in ids.iter().enumerate() {
                let principal = principals.get(i).cloned().flatten();
                tx.prepare_cached(INSERT_TOMBSTONE_SQL)?
                    .execute(params![id, principal])?;
            }
        }
    }
    Ok(None)
}

/// Every session, and the `fp_locks` rows `locks_sql` selects.
fn read_snapshot(c: &mut Connection, locks_sql: &str) -> Result<Snapshot, rusqlite::Error> {
    let sessions = c
        .prepare(SELECT_SESSIONS_SQL)?
        .query_map([], |r| {
            Ok(SessionRecord {
                id: r.get(0)?,
                owner_id: r.get(1)?,
                ttl_ms: r.get::<_, i64>(2)? as u64,
                principal: r.get(3)?,
            })
        })?
        .collect::<Result<Vec<_>, _>>()?;
    let keys = c
        .prepare(locks_sql)?
        .query_map([], |r| {
            Ok(key_record(
                r.get(0)?,
                r.get(1)?,
                r.get(2)?,
                r.get(3)?,
                r.get(4)?,
            ))
        })?
        .collect::<Result<Vec<_>, _>>()?;
    let tombstones = c
        .prepare(SELECT_TOMBSTONES_SQL)?
        .query_map([], |r| {
            Ok(TombstoneRecord {
                id: r.get(0)?,
                age_ms: r.get::<_, i64>(1)?.max(0) as u64,
                principal: r.get(2)?,
            })
        })?
        .collect::<Result<Vec<_>, _>>()?;
    Ok(Snapshot {
        sessions,
        keys,
        tombstones,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn new_files_get_fp_locks_without_rowid() {
        let schema = super::sqlite_schema();
        assert_eq!(schema.matches("WITHOUT ROWID").count(), 1, "{schema}");
        let conn = rusqlite::Connection::open_in_memory().unwrap();
        conn.execute_batch(&schema).unwrap();
        let sql: String = conn
            .query_row(
                "SELECT sql FROM sqlite_master WHERE name = 'fp_locks'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert!(sql.ends_with("WITHOUT ROWID"), "{sql}");
    }
}
