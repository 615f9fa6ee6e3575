//! `postgres://…` — the store for deployments and for replicas sharing one
//! database. A small connection pool; the schema is applied at start. Each
//! write is one transaction, committed before the server replies, so tokens
//! survive any crash of the lock-server.
//!
//! **Leadership (C1 §6).** The `fp_leader` row holds the leader's `epoch`,
//! node id, advertised URL and lease end, written on PostgreSQL's clock
//! ([`LockStore::claim_leadership`]). Every write transaction starts with
//! [`PostgresStore::fence`] — the one place the epoch is checked: it
//! key-share-locks the leader row for this epoch while its lease is live. A
//! takeover first locks the row `FOR UPDATE`, the one lock that conflicts with
//! it, so it waits for every write in flight and every write after it fails;
//! the leader's renewal (a plain `UPDATE` of non-key columns) does not
//! conflict, so a slow write never holds the leader's own renewal back.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod, Transaction};
use tokio_postgres::{NoTls, SimpleQueryMessage};

use super::{
    CLEAR_GRANT_SQL, CLEAR_SESSION_GRANTS_SQL, DELETE_SESSION_SQL, Fence, GRANT_SQL,
    INSERT_SESSION_SQL, LeaderBid, LeaderRow, LockStore, SCHEMA, SELECT_HELD_LOCKS_SQL,
    SELECT_LAST_TOKEN_SQL, SELECT_LOCKS_SQL, SELECT_SESSIONS_SQL, SET_LEASE_SQL, SessionRecord,
    Snapshot, StoreError, key_record,
};

/// The leader row (PostgreSQL only: SQLite and memory are single-node).
const LEADER_SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS fp_leader (
    id         INTEGER PRIMARY KEY CHECK (id = 1),
    epoch      BIGINT NOT NULL,
    node       TEXT NOT NULL,
    advertise  TEXT,
    expires_at TIMESTAMPTZ NOT NULL
);
";

/// Renews this node's lease of its epoch while it is live on the database's clock.
const RENEW_LEADER_SQL: &str = "
UPDATE fp_leader SET expires_at = clock_timestamp() + $3::bigint * interval '1 millisecond', advertise = $2
WHERE id = 1 AND node = $1 AND epoch = $4 AND expires_at > clock_timestamp()
RETURNING epoch";

/// Run before [`TAKE_LEADER_SQL`], in its transaction: waits for every write
/// transaction holding the old epoch's fence (`FOR KEY SHARE`) to finish.
const LOCK_LEADER_SQL: &str = "SELECT 1 FROM fp_leader WHERE id = 1 FOR UPDATE";

/// Takes the row with the next epoch once the old lease plus grace has passed
/// (or the row is this node's own).
const TAKE_LEADER_SQL: &str = "
INSERT INTO fp_leader (id, epoch, node, advertise, expires_at)
VALUES (1, 1, $1, $2, clock_timestamp() + $3::bigint * interval '1 millisecond')
ON CONFLICT (id) DO UPDATE SET
    epoch      = fp_leader.epoch + 1,
    node       = excluded.node,
    advertise  = excluded.advertise,
    expires_at = clock_timestamp() + $3::bigint * interval '1 millisecond'
WHERE fp_leader.node = excluded.node
   OR fp_leader.expires_at + $4::bigint * interval '1 millisecond' <= clock_timestamp()
RETURNING epoch";

/// Ends this node's lease of its epoch now (`-infinity`: takeable at once).
const RESIGN_LEADER_SQL: &str =
    "UPDATE fp_leader SET expires_at = '-infinity' WHERE id = 1 AND node = $1 AND epoch = $2";

/// The row as a standby sees it: epoch, the leader's URL while its lease is
/// live, and whether [`TAKE_LEADER_SQL`] could take it now. Read without a
/// lock first, so standbys polling a live leader never queue behind (or
/// hold up) its writes.
const READ_LEADER_SQL: &str = "
SELECT epoch, CASE WHEN expires_at > clock_timestamp() THEN advertise END,
       node = $1 OR expires_at + $2::bigint * interval '1 millisecond' <= clock_timestamp()
FROM fp_leader WHERE id = 1";

/// How many connections the pool keeps.
const POOL_SIZE: usize = 8;

/// A store in a PostgreSQL database.
#[derive(Clone)]
pub struct PostgresStore {
    /// Connections; each call takes one for the duration of its statement.
    pool: Pool,
    /// What every write transaction checks first.
    fence: Arc<Mutex<Fence>>,
}

impl PostgresStore {
    /// Connects to `url` (libpq-style URL; `options=-csearch_path%3DX` selects a
    /// schema) and applies the schema.
    pub async fn connect(url: &str) -> Result<Self, StoreError> {
        let config: tokio_postgres::Config = url.parse()?;
        let manager = Manager::from_config(
            config,
            NoTls,
            ManagerConfig {
                recycling_method: RecyclingMethod::Fast,
            },
        );
        let pool = Pool::builder(manager).max_size(POOL_SIZE).build()?;
        let store = PostgresStore {
            pool,
            fence: Arc::default(),
        };
        let c = store.client().await?;
        c.batch_execute(SCHEMA).await?;
        c.batch_execute(LEADER_SCHEMA).await?;
        Ok(store)
    }

    /// The leader fence, run first in every write transaction (the one place
    /// the epoch is checked; a batched write calls it once for its batch).
    /// As the leader of epoch `e`: key-share-locks the leader row if it still has
    /// epoch `e` and a live lease on the database's clock, and bounds how long
    /// the transaction may idle (a frozen leader's locks must not hold a
    /// takeover back). Fails with [`StoreError::Fenced`] otherwise; the caller
    /// drops the transaction, so nothing is written.
    pub async fn fence(&self, tx: &Transaction<'_>) -> Result<(), StoreError> {
        let fence = *self.fence.lock().unwrap_or_else(|e| e.into_inner());
        match fence {
            Fence::Unfenced => Ok(()),
            Fence::Standby => Err(StoreError::Fenced("this replica is a standby".into())),
            Fence::Leader { epoch, idle_limit } => {
                // Both values are integers formatted by us: no injection.
                let sql = format!(
                    "SET LOCAL idle_in_transaction_session_timeout = {}; \
                     SELECT 1 FROM fp_leader WHERE id = 1 AND epoch = {epoch} \
                     AND expires_at > clock_timestamp() FOR KEY SHARE",
                    idle_limit.as_millis().max(1)
                );
                let fenced_in = tx
                    .simple_query(&sql)
                    .await?
                    .iter()
                    .any(|m| matches!(m, SimpleQueryMessage::Row(_)));
                if fenced_in {
                    Ok(())
                } else {
                    Err(StoreError::Fenced(format!(
                        "epoch {epoch} is over: another replica leads, or its leader lease ran out"
                    )))
                }
            }
        }
    }

    /// Every session, and the `fp_locks` rows `locks_sql` selects.
    async fn snapshot(&self, locks_sql: &str) -> Result<Snapshot, StoreError> {
        let c = self.client().await?;
        let sessions = c
            .query(SELECT_SESSIONS_SQL, &[])
            .await?
            .iter()
            .map(|r| SessionRecord {
                id: r.get(0),
                owner_id: r.get(1),
                ttl_ms: r.get::<_, i64>(2) as u64,
            })
            .collect();
        let keys = c
            .query(locks_sql, &[])
            .await?
            .iter()
            .map(|r| key_record(r.get(0), r.get(1), r.get(2), r.get(3), r.get(4)))
            .collect();
        Ok(Snapshot { sessions, keys })
    }

    async fn client(&self) -> Result<deadpool_postgres::Object, StoreError> {
        Ok(self.pool.get().await?)
    }
}

#[async_trait]
impl LockStore for PostgresStore {
    fn kind(&self) -> &'static str {
        "postgres"
    }

    async fn load(&self) -> Result<Snapshot, StoreError> {
        self.snapshot(SELECT_LOCKS_SQL).await
    }

    async fn load_live(&self) -> Result<Snapshot, StoreError> {
        self.snapshot(SELECT_HELD_LOCKS_SQL).await
    }

    async fn last_token(&self, key: &str) -> Result<Option<u64>, StoreError> {
        let c = self.client().await?;
        let stmt = c.prepare_cached(SELECT_LAST_TOKEN_SQL).await?;
        let row = c.query_opt(&stmt, &[&key]).await?;
        Ok(row.map(|r| r.get::<_, i64>(0) as u64))
    }

    async fn create_session(&self, s: &SessionRecord) -> Result<(), StoreError> {
        let mut c = self.client().await?;
        let tx = c.transaction().await?;
        self.fence(&tx).await?;
        tx.execute(
            INSERT_SESSION_SQL,
            &[&s.id, &s.owner_id, &(s.ttl_ms as i64)],
        )
        .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn delete_session(&self, session_id: &str) -> Result<(), StoreError> {
        self.delete_sessions(&[session_id.to_string()]).await
    }

    async fn delete_sessions(&self, session_ids: &[String]) -> Result<(), StoreError> {
        if session_ids.is_empty() {
            return Ok(());
        }
        let mut c = self.client().await?;
        let tx = c.transaction().await?;
        self.fence(&tx).await?;
        for id in session_ids {
            tx.execute(CLEAR_SESSION_GRANTS_SQL, &[id]).await?;
            tx.execute(DELETE_SESSION_SQL, &[id]).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn grant(&self, key: &str, session_id: &str, lease_ms: u64) -> Result<u64, StoreError> {
        let mut c = self.client().await?;
        let tx = c.transaction().await?;
        self.fence(&tx).await?;
        let stmt = tx.prepare_cached(GRANT_SQL).await?;
        let row = tx
            .query_one(&stmt, &[&key, &session_id, &(lease_ms as i64)])
            .await?;
        tx.commit().await?;
        Ok(row.get::<_, i64>(0) as u64)
    }

    async fn set_lease(&self, key: &str, token: u64, lease_ms: u64) -> Result<(), StoreError> {
        let mut c = self.client().await?;
        let tx = c.transaction().await?;
        self.fence(&tx).await?;
        tx.execute(SET_LEASE_SQL, &[&key, &(token as i64), &(lease_ms as i64)])
            .await?;
        tx.commit().await?;
        Ok(())
    }

    async fn clear_grant(&self, key: &str, token: u64) -> Result<(), StoreError> {
        self.clear_grants(&[(key.to_string(), token)]).await
    }

    async fn clear_grants(&self, grants: &[(String, u64)]) -> Result<(), StoreError> {
        if grants.is_empty() {
            return Ok(());
        }
        let mut c = self.client().await?;
        let tx = c.transaction().await?;
        self.fence(&tx).await?;
        for (key, token) in grants {
            tx.execute(CLEAR_GRANT_SQL, &[key, &(*token as i64)])
                .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn ping(&self) -> Result<(), StoreError> {
        self.client().await?.simple_query("SELECT 1").await?;
        Ok(())
    }

    fn replicated(&self) -> bool {
        true
    }

    async fn resign_leadership(&self, node: &str, epoch: u64) -> Result<(), StoreError> {
        self.set_fence(Fence::Standby);
        self.client()
            .await?
            .execute(RESIGN_LEADER_SQL, &[&node, &(epoch as i64)])
            .await?;
        Ok(())
    }

    fn set_fence(&self, fence: Fence) {
        *self.fence.lock().unwrap_or_else(|e| e.into_inner()) = fence;
    }

    async fn claim_leadership(&self, bid: &LeaderBid) -> Result<LeaderRow, StoreError> {
        let mut c = self.client().await?;
        let lease_ms = bid.lease.as_millis() as i64;
        let won = match bid.renew {
            Some(epoch) => {
                c.query_opt(
                    RENEW_LEADER_SQL,
                    &[&bid.node, &bid.advertise, &lease_ms, &(epoch as i64)],
                )
                .await?
            }
            None => {
                let grace_ms = bid.grace.as_millis() as i64;
                let row = c
                    .query_opt(READ_LEADER_SQL, &[&bid.node, &grace_ms])
                    .await?;
                if let Some(r) = row.filter(|r| !r.get::<_, bool>(2)) {
                    return Ok(LeaderRow {
                        ours: false,
                        epoch: r.get::<_, i64>(0) as u64,
                        leader: r.get(1),
                    });
                }
                let tx = c.transaction().await?;
                tx.execute(LOCK_LEADER_SQL, &[]).await?;
                let won = tx
                    .query_opt(
                        TAKE_LEADER_SQL,
                        &[&bid.node, &bid.advertise, &lease_ms, &grace_ms],
                    )
                    .await?;
                tx.commit().await?;
                won
            }
        };
        if let Some(row) = won {
            return Ok(LeaderRow {
                ours: true,
                epoch: row.get::<_, i64>(0) as u64,
                leader: bid.advertise.clone(),
            });
        }
        let grace_ms = bid.grace.as_millis() as i64;
        let row = c
            .query_opt(READ_LEADER_SQL, &[&bid.node, &grace_ms])
            .await?;
        Ok(LeaderRow {
            ours: false,
            epoch: row.as_ref().map_or(0, |r| r.get::<_, i64>(0) as u64),
            leader: row.and_then(|r| r.get::<_, Option<String>>(1)),
        })
    }
}
