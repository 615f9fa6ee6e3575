//! The values a store persists and is asked to persist: the records of
//! sessions, grants and keys, a [`Snapshot`] of them, the [`Write`]s a commit
//! applies, and the leader fence and bid of a replicated store.

use std::time::Duration;

/// A persisted session: enough to restore it at a takeover.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionRecord {
    /// The session id.
    pub id: String,
    /// Who opened it.
    pub owner_id: String,
    /// The TTL granted, ms.
    pub ttl_ms: u64,
    /// The principal (API token NAME) it is bound to; `None` when it was
    /// opened with auth off (a NULL column, also in rows written before
    /// API tokens existed).
    pub principal: Option<String>,
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

/// A persisted tombstone: an expired session's id, so that it answers
/// `410 SESSION_EXPIRED` on whichever server loads the store next (a new
/// leader, a restarted single node), not `404 SESSION_UNKNOWN`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TombstoneRecord {
    /// The expired session's id.
    pub id: String,
    /// How long ago it expired when the store was read, ms, on the
    /// database's clock (0 for `memory:`, which has none).
    pub age_ms: u64,
    /// The principal the session was bound to (`None`: auth off).
    pub principal: Option<String>,
}

/// What a store holds: everything ([`LockStore::load`]) or what a restarted
/// server needs ([`LockStore::load_live`]).
///
/// [`LockStore::load`]: super::LockStore::load
/// [`LockStore::load_live`]: super::LockStore::load_live
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Snapshot {
    /// Sessions not deleted or expired.
    pub sessions: Vec<SessionRecord>,
    /// Keys: every key ever granted, or only those with a holder.
    pub keys: Vec<KeyRecord>,
    /// Tombstones of expired sessions, oldest first.
    pub tombstones: Vec<TombstoneRecord>,
}

/// What every write transaction of a replicated store checks first, in the
/// same transaction ([`LockStore::set_fence`]).
///
/// [`LockStore::set_fence`]: super::LockStore::set_fence
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Fence {
    /// A single-node server: writes are not fenced (memory, SQLite, and a
    /// PostgreSQL store driven without leadership, as the tests do).
    #[default]
    Unfenced,
    /// A standby or a deposed leader: every write is refused ([`StoreError::Fenced`]).
    ///
    /// [`StoreError::Fenced`]: super::StoreError::Fenced
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
    /// TEST (`--sabotage skip-epoch-fence`): the leader of `epoch` writing
    /// without the fence. Its writes still carry the epoch breach audit, so
    /// what the missing fence lets through is recorded.
    Unchecked {
        /// The epoch this replica took.
        epoch: u64,
    },
}

impl Fence {
    /// The epoch this replica writes as, if it writes as a leader.
    pub fn writer_epoch(&self) -> Option<u64> {
        match self {
            Fence::Leader { epoch, .. } | Fence::Unchecked { epoch } => Some(*epoch),
            Fence::Unfenced | Fence::Standby => None,
        }
    }
}

/// One attempt to take or keep the leader row ([`LockStore::claim_leadership`]).
///
/// [`LockStore::claim_leadership`]: super::LockStore::claim_leadership
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
///
/// [`LockStore::commit`]: super::LockStore::commit
/// [`LockStore`]: super::LockStore
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
    /// Records a tombstone for each id (the sweeper, beside the
    /// [`DeleteSessions`](Write::DeleteSessions) of the same ids) and forgets
    /// the tombstones older than `keep_ms` (the server's tombstone age).
    RecordExpired {
        /// The expired sessions.
        ids: Vec<String>,
        /// The principal each of `ids` was bound to (same length; `None`:
        /// opened with auth off), so its owner hears 410 and others 403.
        principals: Vec<Option<String>>,
        /// How long a tombstone is kept, ms.
        keep_ms: u64,
    },
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
            Write::RecordExpired { .. } => "record_expired",
        }
    }
}

/// What one committed [`Write`] returns: the token of a [`Write::Grant`],
/// `None` for every other write.
pub type Committed = Option<u64>;

/// How a [`group::GroupCommit`] has batched so far (for `/metrics` and benches).
///
/// [`group::GroupCommit`]: super::group::GroupCommit
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
