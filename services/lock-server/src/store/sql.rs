//! The SQL both SQL backends share: the `fp_sessions`, `fp_locks` and
//! `fp_tombstones` tables (each store writes and reads the last on its own
//! clock),
//! SQLite's holder index, the statements of every single write and read, and
//! [`key_record`], which turns one `fp_locks` row into a [`KeyRecord`].

use super::model::{GrantRecord, KeyRecord};

/// The tables both SQL stores share (SQLite creates `fp_locks` `WITHOUT
/// ROWID`, see [`sqlite`](super::sqlite)). Each store adds its own index on
/// `holder_session` ([`SQLITE_INDEXES`]; PostgreSQL's, and what a held row
/// means there, are in [`postgres`](super::postgres)).
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
CREATE TABLE IF NOT EXISTS fp_tombstones (
    id            TEXT PRIMARY KEY,
    expired_at_ms BIGINT NOT NULL
);
CREATE INDEX IF NOT EXISTS fp_tombstones_at ON fp_tombstones (expired_at_ms);
";

/// The binding columns: the principal (API token NAME) a session is bound to,
/// and the one its tombstone keeps; NULL for a session opened with auth off
/// and in every row written before. Added to existing tables on open
/// (PostgreSQL: `ADD COLUMN IF NOT EXISTS`; SQLite, which has no such
/// clause, adds each column its `pragma_table_info` lacks).
pub(crate) const PRINCIPAL_COLUMNS: [(&str, &str); 2] =
    [("fp_sessions", "principal"), ("fp_tombstones", "principal")];

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
    "INSERT INTO fp_sessions (id, owner_id, ttl_ms, principal) VALUES ($1, $2, $3, $4)";
pub(crate) const SET_LEASE_SQL: &str =
    "UPDATE fp_locks SET lease_ms = $3 WHERE key = $1 AND holder_token = $2";
pub(crate) const SELECT_SESSIONS_SQL: &str =
    "SELECT id, owner_id, ttl_ms, principal FROM fp_sessions";
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
