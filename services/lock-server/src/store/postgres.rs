//! `postgres://…` — the store for deployments and for replicas sharing one
//! database. A small connection pool; the schema is applied at start. Every
//! write goes through [`LockStore::commit`]: one transaction of a few
//! array-parameter statements (one per kind of write, [`super::pg_batch`]),
//! pipelined, committed before the server replies, so tokens survive any
//! crash of the lock-server. The group committer in front of this store
//! ([`super::group`]) puts concurrent requests' writes in one commit.
//!
//! **Leadership (C1 §6).** The `fp_leader` row holds the leader's `epoch`,
//! node id, advertised URL and lease end, written on PostgreSQL's clock
//! ([`LockStore::claim_leadership`]). Every write transaction starts with
//! the fence ([`super::pg_fence`], run by [`LockStore::commit`] —
//! the one place the epoch is checked, once per batch, pipelined with the
//! batch's writes): it key-share-locks the leader row for this epoch while
//! its lease is live, and fails the transaction otherwise. A takeover first
//! locks the row `FOR UPDATE`, the one lock that conflicts with it, so it
//! waits for every write in flight and every write after it fails; the
//! leader's renewal (a plain `UPDATE` of non-key columns) does not conflict,
//! so a slow write never holds the leader's own renewal back.

use std::collections::HashMap;
use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::{Arc, Mutex};
use std::task::Poll;

use async_trait::async_trait;
use deadpool_postgres::{Manager, ManagerConfig, Pool, RecyclingMethod};
use futures_util::future::{MaybeDone, maybe_done};
use tokio_postgres::NoTls;
use tokio_postgres::error::SqlState;
use tokio_postgres::types::ToSql;

use super::error::StoreError;
use super::lock_store::LockStore;
use super::model::{
    Committed, Fence, LeaderBid, LeaderRow, SessionRecord, Snapshot, TombstoneRecord, Write,
};
use super::pg_batch::{self, Clears, Grants, Inserts, Leases, Statement};
use super::pg_fence::{
    self, BREACH_AUDIT_SQL, FENCE_SQL, FENCED_CLEAR_GRANTS_SQL, FENCED_GRANTS_SQL,
    FENCED_SET_LEASES_SQL,
};
use super::sql::{
    SELECT_LAST_TOKEN_SQL, SELECT_LOCKS_SQL, SELECT_SESSIONS_SQL, TABLES, key_record,
};

/// What PostgreSQL adds to the shared [`TABLES`]: one difference in what the
/// columns mean and how they are indexed, so that the hot path is made of
/// HOT updates (heap-only tuples: no new index entries, the old version
/// pruned in place). A row is held exactly when `holder_token` is set;
/// `holder_session` is the key's last holder and stays when the grant ends.
/// The index on `holder_session` (for L3 and the sweeper) is therefore never
/// changed by a release, nor by a grant to the session that held the key
/// last; only a grant to another session adds an index entry. (With the
/// partial index SQLite uses, every grant and every release changed an
/// indexed column: none of 37,014 updates in one `bench peer` window was
/// HOT, so each left a dead version and new index entries behind for
/// lookups and vacuum.) The fill factor leaves room on each page for the
/// new versions (set on existing tables too; it applies to pages written
/// from then on). First, the principal columns
/// ([`PRINCIPAL_COLUMNS`](super::sql::PRINCIPAL_COLUMNS)), added to tables
/// created before them.
const PG_INDEXES: &str = "
ALTER TABLE fp_sessions ADD COLUMN IF NOT EXISTS principal TEXT;
ALTER TABLE fp_tombstones ADD COLUMN IF NOT EXISTS principal TEXT;
ALTER TABLE fp_locks SET (fillfactor = 50);
CREATE INDEX IF NOT EXISTS fp_locks_holder_session ON fp_locks (holder_session);
DROP INDEX IF EXISTS fp_locks_holder_live;
DROP INDEX IF EXISTS fp_locks_holder;
";

/// The held keys (the shared schema's query selects on `holder_session`).
const PG_SELECT_HELD_LOCKS_SQL: &str = "SELECT key, last_token, holder_session, holder_token, lease_ms FROM fp_locks WHERE holder_token IS NOT NULL";

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

/// The epoch breach audit: a write transaction of the leader of
/// epoch `e` ends with the audit of [`super::pg_fence`], which records a row here if the
/// leader row has another epoch at that statement. The fence key-share-locks
/// the row at the transaction's start, and a takeover must lock it `FOR
/// UPDATE` first, so while the fence works this table stays empty; a row is
/// a write committed by a deposed leader after another replica took over —
/// what the fence exists to prevent, recorded by the database whatever the
/// fence's code did. `experiments chaos` reads it after every replicated run.
const BREACH_SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS fp_epoch_breaches (
    writer_epoch BIGINT NOT NULL,
    row_epoch    BIGINT NOT NULL,
    at           TIMESTAMPTZ NOT NULL
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
        c.batch_execute(TABLES).await?;
        c.batch_execute(PG_INDEXES).await?;
        c.batch_execute(LEADER_SCHEMA).await?;
        c.batch_execute(BREACH_SCHEMA).await?;
        Ok(store)
    }

    /// The leader fence, run first in every write transaction (the one place
    /// the epoch is checked; a batch runs it once): `None` on a single-node
    /// store; as the leader of epoch `e`, the parameters of [`FENCE_SQL`]
    /// (`e` and the idle limit in milliseconds). The fence fails the
    /// transaction exactly when the write may not commit, which aborts it, so
    /// the writes after it can be sent without waiting for its answer. A
    /// standby: [`StoreError::Fenced`] before any connection is taken.
    fn fence(fence: Fence) -> Result<Option<(i64, String)>, StoreError> {
        match fence {
            Fence::Unfenced | Fence::Unchecked { .. } => Ok(None),
            Fence::Standby => Err(StoreError::Fenced("this replica is a standby".into())),
            Fence::Leader { epoch, idle_limit } => Ok(Some((
                epoch as i64,
                idle_limit.as_millis().max(1).to_string(),
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
                principal: r.get(3),
            })
            .collect();
        let keys = c
            .query(locks_sql, &[])
            .await?
            .iter()
            .map(|r| key_record(r.get(0), r.get(1), r.get(2), r.get(3), r.get(4)))
            .collect();
        let tombstones = c
            .query(pg_batch::PG_TOMBSTONE_SELECT_SQL, &[])
            .await?
            .iter()
            .map(|r| TombstoneRecord {
                id: r.get(0),
                age_ms: r.get::<_, i64>(1).max(0) as u64,
                principal: r.get(2),
            })
            .collect();
        Ok(Snapshot {
            sessions,
            keys,
            tombstones,
        })
    }

    async fn client(&self) -> Result<deadpool_postgres::Object, StoreError> {
        Ok(self.pool.get().await?)
    }
}

/// The prepared statement of each kind of [`Statement`], on one connection.
struct Prepared {
    insert_sessions: tokio_postgres::Statement,
    grants: tokio_postgres::Statement,
    set_leases: tokio_postgres::Statement,
    clear_grants: tokio_postgres::Statement,
    delete_sessions: tokio_postgres::Statement,
    record_expired: tokio_postgres::Statement,
    /// The fence and the audit of a leader's transaction ([`super::pg_fence`]).
    fence: tokio_postgres::Statement,
    audit: tokio_postgres::Statement,
    /// A leader's one-statement writes, fenced and audited ([`super::pg_fence`]).
    fenced_grants: tokio_postgres::Statement,
    fenced_set_leases: tokio_postgres::Statement,
    fenced_clear_grants: tokio_postgres::Statement,
}

impl Prepared {
    /// The connection's cached statements (prepared on its first batch).
    async fn on(c: &deadpool_postgres::Object) -> Result<Self, tokio_postgres::Error> {
        Ok(Prepared {
            insert_sessions: c.prepare_cached(pg_batch::INSERT_SESSIONS_SQL).await?,
            grants: c.prepare_cached(pg_batch::GRANTS_SQL).await?,
            set_leases: c.prepare_cached(pg_batch::SET_LEASES_SQL).await?,
            clear_grants: c.prepare_cached(pg_batch::CLEAR_GRANTS_SQL).await?,
            delete_sessions: c.prepare_cached(pg_batch::DELETE_SESSIONS_SQL).await?,
            record_expired: c.prepare_cached(pg_batch::PG_RECORD_EXPIRED_SQL).await?,
            fence: c.prepare_cached(&FENCE_SQL).await?,
            audit: c.prepare_cached(&BREACH_AUDIT_SQL).await?,
            fenced_grants: c.prepare_cached(&FENCED_GRANTS_SQL).await?,
            fenced_set_leases: c.prepare_cached(&FENCED_SET_LEASES_SQL).await?,
            fenced_clear_grants: c.prepare_cached(&FENCED_CLEAR_GRANTS_SQL).await?,
        })
    }
}

/// Polls `f` once: a tokio-postgres request is sent on its first poll.
async fn send<F: Future>(mut f: Pin<&mut MaybeDone<F>>) {
    std::future::poll_fn(|cx| {
        let _ = f.as_mut().poll(cx);
        Poll::Ready(())
    })
    .await
}

/// One statement of a batch's [`pg_batch::plan`] on `c` (inside the batch's
/// transaction, or alone); the `(batch index, token)` of each grant in it.
/// With `fenced` (a leader's epoch), the statement runs alone in its fenced,
/// audited form ([`super::pg_fence`]); only the kinds
/// [`pg_fence::runs_alone`] names have one.
async fn run(
    c: &tokio_postgres::Client,
    p: &Prepared,
    s: &Statement<'_>,
    fenced: Option<&i64>,
) -> Result<Vec<(usize, u64)>, tokio_postgres::Error> {
    if fenced.is_some() {
        assert!(pg_fence::runs_alone(s), "no fenced form of {s:?}");
    }
    match s {
        Statement::InsertSessions(Inserts {
            ids,
            owners,
            ttls,
            principals,
        }) => {
            c.execute(&p.insert_sessions, &[ids, owners, ttls, principals])
                .await?;
        }
        Statement::Grants(Grants {
            keys,
            sessions,
            leases,
            writes,
        }) => {
            let rows = match fenced {
                None => c.query(&p.grants, &[keys, sessions, leases]).await?,
                Some(e) => {
                    c.query(&p.fenced_grants, &[keys, sessions, leases, e])
                        .await?
                }
            };
            // Keys are distinct within the statement (pg_batch): one row each.
            let at: HashMap<&str, usize> =
                keys.iter().copied().zip(writes.iter().copied()).collect();
            return Ok(rows
                .iter()
                .map(|r| (at[r.get::<_, &str>(0)], r.get::<_, i64>(1) as u64))
                .collect());
        }
        Statement::SetLeases(Leases {
            keys,
            tokens,
            leases,
        }) => {
            match fenced {
                None => c.execute(&p.set_leases, &[keys, tokens, leases]).await?,
                Some(e) => {
                    c.execute(&p.fenced_set_leases, &[keys, tokens, leases, e])
                        .await?
                }
            };
        }
        Statement::ClearGrants(Clears { keys, tokens }) => {
            match fenced {
                None => c.execute(&p.clear_grants, &[keys, tokens]).await?,
                Some(e) => {
                    c.execute(&p.fenced_clear_grants, &[keys, tokens, e])
                        .await?
                }
            };
        }
        Statement::DeleteSessions(ids) => {
            c.execute(&p.delete_sessions, &[ids]).await?;
        }
        Statement::RecordExpired {
            ids,
            principals,
            keep_ms,
        } => {
            c.execute(&p.record_expired, &[ids, keep_ms, principals])
                .await?;
        }
    }
    Ok(vec![])
}

/// The error of a leader's write that failed with `e`: [`StoreError::Fenced`]
/// if the fence refused it (`division_by_zero`), logged here, where it is
/// known (the request that waited for it may be gone: its client gave up).
fn fence_refused(epoch: i64, writes: usize, e: tokio_postgres::Error) -> StoreError {
    if e.code() != Some(&SqlState::DIVISION_BY_ZERO) {
        return e.into();
    }
    tracing::warn!(
        event = "write_fenced",
        epoch,
        writes,
        "a write batch was refused by the epoch fence: another replica leads"
    );
    StoreError::Fenced(format!(
        "epoch {epoch} is over: another replica leads, or its leader lease ran out"
    ))
}

/// Puts each grant's token in its write's place.
fn place(out: &mut [Committed], tokens: Vec<(usize, u64)>) {
    for (at, token) in tokens {
        out[at] = Some(token);
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
        self.snapshot(PG_SELECT_HELD_LOCKS_SQL).await
    }

    async fn last_token(&self, key: &str) -> Result<Option<u64>, StoreError> {
        let c = self.client().await?;
        let stmt = c.prepare_cached(SELECT_LAST_TOKEN_SQL).await?;
        let row = c.query_opt(&stmt, &[&key]).await?;
        Ok(row.map(|r| r.get::<_, i64>(0) as u64))
    }

    async fn commit(&self, writes: &[Write]) -> Result<Vec<Committed>, StoreError> {
        let current = *self.fence.lock().unwrap_or_else(|e| e.into_inner());
        let fence = Self::fence(current)?;
        let writer_epoch = current.writer_epoch().map(|e| e as i64);
        let plan = pg_batch::plan(writes);
        let mut out = vec![None; writes.len()];
        let c = self.client().await?;
        let prepared = Prepared::on(&c).await?;
        if let [s] = plan.as_slice() {
            // One statement is a transaction of its own: one round trip. On a
            // single node, as it is; on a leader, in its fenced and audited
            // form, where the kind of write has one (pg_fence).
            match (&fence, writer_epoch) {
                (None, None) => {
                    place(&mut out, run(&c, &prepared, s, None).await?);
                    return Ok(out);
                }
                (Some((epoch, _)), _) if pg_fence::runs_alone(s) => {
                    match run(&c, &prepared, s, Some(epoch)).await {
                        Ok(tokens) => place(&mut out, tokens),
                        Err(e) => return Err(fence_refused(*epoch, writes.len(), e)),
                    }
                    return Ok(out);
                }
                _ => {}
            }
        }
        // BEGIN, on a leader the fence, one statement per kind of write, on a
        // leader the breach audit, COMMIT — all sent before any answer is
        // read (pipelined: one round trip and one WAL flush). tokio-postgres
        // sends a request when its future is first polled, so each is polled
        // once here, in this order; the server runs them in that order. The
        // fence fails (an error, which aborts the transaction) unless the
        // leader row still has this epoch and a live lease: every statement
        // after it then fails and COMMIT rolls back, so nothing of a fenced
        // batch is written. Once sent, they run to COMMIT (or ROLLBACK) even
        // if this future is dropped, so the connection goes back to the pool
        // idle. The fence and the audit are prepared statements, like the
        // writes: PostgreSQL plans none of them again per transaction.
        let fence_params: Option<[&(dyn ToSql + Sync); 2]> =
            fence.as_ref().map(|(epoch, idle)| [epoch as _, idle as _]);
        let audit_params: Option<[&(dyn ToSql + Sync); 1]> =
            writer_epoch.as_ref().map(|epoch| [epoch as _]);
        let mut begin = pin!(maybe_done(c.batch_execute("BEGIN")));
        let mut fenced = fence_params
            .as_ref()
            .map(|p| Box::pin(maybe_done(c.execute(&prepared.fence, p))));
        let mut ran: Vec<_> = plan
            .iter()
            .map(|s| Box::pin(maybe_done(run(&c, &prepared, s, None))))
            .collect();
        // A leader's transaction ends with the epoch breach audit (see
        // BREACH_SCHEMA), pipelined like the rest: no round trip of its own.
        // A query of its own, never one string with COMMIT: in an aborted
        // transaction it fails, and a failed statement skips the rest of its
        // query string, which would leave the connection in the transaction.
        let mut audit = audit_params
            .as_ref()
            .map(|p| Box::pin(maybe_done(c.execute(&prepared.audit, p))));
        let mut commit = pin!(maybe_done(c.batch_execute("COMMIT")));
        send(begin.as_mut()).await;
        if let Some(f) = &mut fenced {
            send(f.as_mut()).await;
        }
        for r in &mut ran {
            send(r.as_mut()).await;
        }
        if let Some(a) = &mut audit {
            send(a.as_mut()).await;
        }
        send(commit.as_mut()).await;
        begin.as_mut().await;
        if let Err(e) = begin.as_mut().take_output().expect("awaited") {
            commit.as_mut().await;
            return Err(e.into());
        }
        if let (Some(f), Some((epoch, _))) = (&mut fenced, &fence) {
            f.as_mut().await;
            if let Err(e) = f.as_mut().take_output().expect("awaited") {
                commit.as_mut().await;
                return Err(fence_refused(*epoch, writes.len(), e));
            }
        }
        for r in &mut ran {
            r.as_mut().await;
            // A failed statement aborted the transaction: COMMIT rolls it back.
            match r.as_mut().take_output().expect("awaited") {
                Ok(tokens) => place(&mut out, tokens),
                Err(e) => {
                    commit.as_mut().await;
                    return Err(e.into());
                }
            }
        }
        if let Some(a) = &mut audit {
            a.as_mut().await;
            if let Err(e) = a.as_mut().take_output().expect("awaited") {
                commit.as_mut().await;
                return Err(e.into());
            }
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
