//! `postgres://…` — the store for deployments and for replicas sharing one
//! database. A small connection pool; the schema is applied at start. Each
//! write is one statement (or one transaction), committed before the server
//! replies, so tokens survive any crash of the lock-server.

use async_trait::async_trait;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use tokio_postgres::NoTls;

use super::{
    CLEAR_GRANT_SQL, CLEAR_SESSION_GRANTS_SQL, DELETE_SESSION_SQL, GRANT_SQL, INSERT_SESSION_SQL,
    LockStore, SCHEMA, SELECT_HELD_LOCKS_SQL, SELECT_LAST_TOKEN_SQL, SELECT_LOCKS_SQL,
    SELECT_SESSIONS_SQL, SET_LEASE_SQL, SessionRecord, Snapshot, StoreError, key_record,
};

/// How many connections the pool keeps.
const POOL_SIZE: usize = 8;

/// A store in a PostgreSQL database.
#[derive(Clone)]
pub struct PostgresStore {
    /// Connections; each call takes one for the duration of its statement.
    pool: Pool,
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
        let store = PostgresStore { pool };
        store.client().await?.batch_execute(SCHEMA).await?;
        Ok(store)
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
        self.client()
            .await?
            .execute(
                INSERT_SESSION_SQL,
                &[&s.id, &s.owner_id, &(s.ttl_ms as i64)],
            )
            .await?;
        Ok(())
    }

    async fn delete_session(&self, session_id: &str) -> Result<(), StoreError> {
        self.delete_sessions(&[session_id.to_string()]).await
    }

    async fn delete_sessions(&self, session_ids: &[String]) -> Result<(), StoreError> {
        let mut c = self.client().await?;
        let tx = c.transaction().await?;
        for id in session_ids {
            tx.execute(CLEAR_SESSION_GRANTS_SQL, &[id]).await?;
            tx.execute(DELETE_SESSION_SQL, &[id]).await?;
        }
        tx.commit().await?;
        Ok(())
    }

    async fn grant(&self, key: &str, session_id: &str, lease_ms: u64) -> Result<u64, StoreError> {
        let c = self.client().await?;
        let stmt = c.prepare_cached(GRANT_SQL).await?;
        let row = c
            .query_one(&stmt, &[&key, &session_id, &(lease_ms as i64)])
            .await?;
        Ok(row.get::<_, i64>(0) as u64)
    }

    async fn set_lease(&self, key: &str, token: u64, lease_ms: u64) -> Result<(), StoreError> {
        self.client()
            .await?
            .execute(SET_LEASE_SQL, &[&key, &(token as i64), &(lease_ms as i64)])
            .await?;
        Ok(())
    }

    async fn clear_grant(&self, key: &str, token: u64) -> Result<(), StoreError> {
        let c = self.client().await?;
        let stmt = c.prepare_cached(CLEAR_GRANT_SQL).await?;
        c.execute(&stmt, &[&key, &(token as i64)]).await?;
        Ok(())
    }

    async fn clear_grants(&self, grants: &[(String, u64)]) -> Result<(), StoreError> {
        let mut c = self.client().await?;
        let tx = c.transaction().await?;
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
}
