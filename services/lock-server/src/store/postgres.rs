//! `postgres://…` — the store for deployments and for replicas sharing one
//! database. A small connection pool; the schema is applied at start. Every
//! write goes through [`LockStore::commit`]: one transaction, one statement
//! per [`Write`] (pipelined), committed before the server replies, so tokens
//! survive any crash of the lock-server. The group committer in front of this
//! store ([`super::group`]) puts concurrent requests' writes in one commit.

use std::future::Future;
use std::pin::{Pin, pin};
use std::task::Poll;

use async_trait::async_trait;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use futures_util::future::{MaybeDone, maybe_done};
use tokio_postgres::NoTls;

use super::{
    Committed, GRANT_SQL, INSERT_SESSION_SQL, LockStore, SCHEMA, SELECT_HELD_LOCKS_SQL,
    SELECT_LAST_TOKEN_SQL, SELECT_LOCKS_SQL, SELECT_SESSIONS_SQL, SET_LEASE_SQL, SessionRecord,
    Snapshot, StoreError, Write, key_record,
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

/// L3 and the sweeper's session delete in one statement (so that one write
/// is one statement and pipelined writes run in their order).
const DELETE_SESSIONS_SQL: &str = "
WITH gone AS (DELETE FROM fp_sessions WHERE id = ANY($1::text[]))
UPDATE fp_locks SET holder_session = NULL, holder_token = NULL, lease_ms = NULL
WHERE holder_session = ANY($1::text[])";

/// Clears each `(key, token)` that is still the holder, in one statement.
const CLEAR_GRANTS_SQL: &str = "
UPDATE fp_locks SET holder_session = NULL, holder_token = NULL, lease_ms = NULL
FROM unnest($1::text[], $2::bigint[]) AS c(key, token)
WHERE fp_locks.key = c.key AND fp_locks.holder_token = c.token";

/// The prepared statement of each kind of [`Write`], on one connection.
struct Statements {
    insert_session: tokio_postgres::Statement,
    delete_sessions: tokio_postgres::Statement,
    grant: tokio_postgres::Statement,
    set_lease: tokio_postgres::Statement,
    clear_grants: tokio_postgres::Statement,
}

/// Polls `f` once: a tokio-postgres request is sent on its first poll.
async fn send<F: Future>(mut f: Pin<&mut MaybeDone<F>>) {
    std::future::poll_fn(|cx| {
        let _ = f.as_mut().poll(cx);
        Poll::Ready(())
    })
    .await
}

/// One write as one statement on `tx` (inside the batch's transaction, or
/// alone); a grant's token.
async fn apply(
    tx: &tokio_postgres::Client,
    stmts: &Statements,
    w: &Write,
) -> Result<Committed, tokio_postgres::Error> {
    match w {
        Write::CreateSession(s) => {
            tx.execute(
                &stmts.insert_session,
                &[&s.id, &s.owner_id, &(s.ttl_ms as i64)],
            )
            .await?;
        }
        Write::DeleteSessions(ids) => {
            tx.execute(&stmts.delete_sessions, &[ids]).await?;
        }
        Write::Grant {
            key,
            session_id,
            lease_ms,
        } => {
            let row = tx
                .query_one(&stmts.grant, &[key, session_id, &(*lease_ms as i64)])
                .await?;
            return Ok(Some(row.get::<_, i64>(0) as u64));
        }
        Write::SetLease {
            key,
            token,
            lease_ms,
        } => {
            tx.execute(
                &stmts.set_lease,
                &[key, &(*token as i64), &(*lease_ms as i64)],
            )
            .await?;
        }
        Write::ClearGrants(grants) => {
            let (keys, tokens): (Vec<&str>, Vec<i64>) =
                grants.iter().map(|(k, t)| (k.as_str(), *t as i64)).unzip();
            tx.execute(&stmts.clear_grants, &[&keys, &tokens]).await?;
        }
    }
    Ok(None)
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

    async fn commit(&self, writes: &[Write]) -> Result<Vec<Committed>, StoreError> {
        let c = self.client().await?;
        let stmts = Statements {
            insert_session: c.prepare_cached(INSERT_SESSION_SQL).await?,
            delete_sessions: c.prepare_cached(DELETE_SESSIONS_SQL).await?,
            grant: c.prepare_cached(GRANT_SQL).await?,
            set_lease: c.prepare_cached(SET_LEASE_SQL).await?,
            clear_grants: c.prepare_cached(CLEAR_GRANTS_SQL).await?,
        };
        if let [w] = writes {
            // One statement is a transaction of its own: one round trip.
            return Ok(vec![apply(&c, &stmts, w).await?]);
        }
        // BEGIN, one statement per write, COMMIT — all sent before any answer
        // is read (pipelined: one round trip and one WAL flush). tokio-postgres
        // sends a request when its future is first polled, so each is polled
        // once here, in this order; the server runs them in that order. Once
        // sent, they run to COMMIT (or, after an error, ROLLBACK) even if this
        // future is dropped, so the connection goes back to the pool idle.
        let mut begin = pin!(maybe_done(c.batch_execute("BEGIN")));
        let mut applied: Vec<_> = writes
            .iter()
            .map(|w| Box::pin(maybe_done(apply(&c, &stmts, w))))
            .collect();
        let mut commit = pin!(maybe_done(c.batch_execute("COMMIT")));
        send(begin.as_mut()).await;
        for a in &mut applied {
            send(a.as_mut()).await;
        }
        send(commit.as_mut()).await;
        begin.as_mut().await;
        begin.as_mut().take_output().expect("awaited")?;
        let mut out = Vec::with_capacity(writes.len());
        for a in &mut applied {
            a.as_mut().await;
            // A failed write aborted the transaction: COMMIT rolls it back.
            out.push(a.as_mut().take_output().expect("awaited")?);
        }
        commit.as_mut().await;
        commit.as_mut().take_output().expect("awaited")?;
        Ok(out)
    }

    async fn ping(&self) -> Result<(), StoreError> {
        self.client().await?.simple_query("SELECT 1").await?;
        Ok(())
    }
}
