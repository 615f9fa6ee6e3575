//! [`LockStore`]: the trait every backend implements. One write path
//! ([`LockStore::commit`]), the single-write methods provided on top of it,
//! and the leader-row calls a replicated store answers.

use std::path::PathBuf;

use async_trait::async_trait;
use prometheus_client::metrics::histogram::Histogram;

use super::error::StoreError;
use super::model::{
    CommitStats, Committed, Fence, LeaderBid, LeaderRow, SessionRecord, Snapshot, Write,
};

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
    ///
    /// [`group::GroupCommit`]: super::group::GroupCommit
    fn commit_stats(&self) -> Option<CommitStats> {
        None
    }

    /// The duration of each transaction the store committed (a group commit
    /// or a retry alone), for a store that batches; `/metrics` exports it as
    /// `lock_store_commit_duration_seconds`. A handle on the store's own
    /// histogram: cloning it shares the counts.
    fn commit_duration(&self) -> Option<Histogram> {
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

    /// The sweeper's expiry of `session_ids`, in one transaction: each is
    /// deleted with its grants and leaves a tombstone, so the next server to
    /// load the store (a new leader, a restart) still answers 410 for it;
    /// tombstones older than `keep` are forgotten. Each id comes with the
    /// principal it was bound to (`None`: auth off), kept in its tombstone.
    /// No ids: no transaction.
    async fn expire_sessions(
        &self,
        expired: &[(String, Option<String>)],
        keep: std::time::Duration,
    ) -> Result<(), StoreError> {
        if expired.is_empty() {
            return Ok(());
        }
        let ids: Vec<String> = expired.iter().map(|(id, _)| id.clone()).collect();
        self.commit(&[
            Write::DeleteSessions(ids.clone()),
            Write::RecordExpired {
                ids,
                principals: expired.iter().map(|(_, p)| p.clone()).collect(),
                keep_ms: u64::try_from(keep.as_millis()).unwrap_or(u64::MAX),
            },
        ])
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
