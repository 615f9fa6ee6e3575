//! `postgres://…` — the store for deployments and for replicas sharing one
//! database. A small connection pool; the schema is applied at start. Every
//! write goes through [`LockStore::commit`]: one transaction, one statement
//! per [`Write`] (pipelined), committed before the server replies, so tokens
//! survive any crash of the lock-server. The group committer in front of this
//! store ([`super::group`]) puts concurrent requests' writes in one commit.
//!
//! **Leadership (C1 §6).** The `fp_leader` row holds the leader's `epoch`,
//! node id, advertised URL and lease end, written on PostgreSQL's clock
//! ([`LockStore::claim_leadership`]). Every write transaction starts with
//! the fence ([`PostgresStore::fence_sql`], run by [`LockStore::commit`] —
//! the one place the epoch is checked, once per batch): it key-share-locks
//! the leader row for this epoch while its lease is live. A takeover first
//! locks the row `FOR UPDATE`, the one lock that conflicts with it, so it
//! waits for every write in flight and every write after it fails; the
//! leader's renewal (a plain `UPDATE` of non-key columns) does not conflict,
//! so a slow write never holds the leader's own renewal back.

use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::{Arc, Mutex};
use std::task::Poll;

use async_trait::async_trait;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use futures_util::future::{MaybeDone, maybe_done};
use tokio_postgres::{NoTls, SimpleQueryMessage};

use super::{
    Committed, Fence, GRANT_SQL, INSERT_SESSION_SQL, LeaderBid, LeaderRow, LockStore, SCHEMA,
    SELECT_HELD_LOCKS_SQL, SELECT_LAST_TOKEN_SQL, SELECT_LOCKS_SQL, SELECT_SESSIONS_SQL,
    SET_LEASE_SQL, SessionRecord, Snapshot, StoreError, Write, key_record,
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
    /// the epoch is checked; a batch runs it once). `None` on a single-node
    /// store. As the leader of epoch `e`: the statements that key-share-lock
    /// the leader row if it still has epoch `e` and a live lease on the
    /// database's clock, and bound how long the transaction may idle (a
    /// frozen leader's locks must not hold a takeover back) — they return a
    /// row exactly when the write may commit. A standby: [`StoreError::Fenced`]
    /// before any connection is taken.
    fn fence_sql(&self) -> Result<Option<(u64, String)>, StoreError> {
        let fence = *self.fence.lock().unwrap_or_else(|e| e.into_inner());
        match fence {
            Fence::Unfenced => Ok(None),
            Fence::Standby => Err(StoreError::Fenced("this replica is a standby".into())),
            Fence::Leader { epoch, idle_limit } => Ok(Some((
                epoch,
                // Both values are integers formatted by us: no injection.
                format!(
                    "SET LOCAL idle_in_transaction_session_timeout = {}; \
                     SELECT 1 FROM fp_leader WHERE id = 1 AND epoch = {epoch} \
                     AND expires_at > clock_timestamp() FOR KEY SHARE",
                    idle_limit.as_millis().max(1)
                ),
            ))),
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
        let fence = self.fence_sql()?;
        let c = self.client().await?;
        let stmts = Statements {
            insert_session: c.prepare_cached(INSERT_SESSION_SQL).await?,
            delete_sessions: c.prepare_cached(DELETE_SESSIONS_SQL).await?,
            grant: c.prepare_cached(GRANT_SQL).await?,
            set_lease: c.prepare_cached(SET_LEASE_SQL).await?,
            clear_grants: c.prepare_cached(CLEAR_GRANTS_SQL).await?,
        };
        let begun = match &fence {
            None => {
                if let [w] = writes {
                    // One statement is a transaction of its own: one round trip.
                    return Ok(vec![apply(&c, &stmts, w).await?]);
                }
                false
            }
            Some((epoch, fence_sql)) => {
                // A leader's batch: BEGIN and the fence first, awaited — its
                // answer decides whether any write is sent (one round trip more
                // per batch, not per write). On a refusal or an error the
                // transaction is rolled back before the connection goes back
                // to the pool.
                let fenced_in = match c.simple_query(&format!("BEGIN; {fence_sql}")).await {
                    Ok(messages) => messages
                        .iter()
                        .any(|m| matches!(m, SimpleQueryMessage::Row(_))),
                    Err(e) => {
                        let _ = c.batch_execute("ROLLBACK").await;
                        return Err(e.into());
                    }
                };
                if !fenced_in {
                    let _ = c.batch_execute("ROLLBACK").await;
                    return Err(StoreError::Fenced(format!(
                        "epoch {epoch} is over: another replica leads, or its leader lease ran out"
                    )));
                }
                true
            }
        };
        // BEGIN, one statement per write, COMMIT — all sent before any answer
        // is read (pipelined: one round trip and one WAL flush). tokio-postgres
        // sends a request when its future is first polled, so each is polled
        // once here, in this order; the server runs them in that order. Once
        // sent, they run to COMMIT (or, after an error, ROLLBACK) even if this
        // future is dropped, so the connection goes back to the pool idle.
        let mut begin = pin!(maybe_done(async {
            if begun {
                Ok(())
            } else {
                c.batch_execute("BEGIN").await
            }
        }));
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
