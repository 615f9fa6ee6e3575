//! The plain values the lock table is made of: a [`Session`], a [`Grant`],
//! what memory holds per key ([`KeyEntry`]), how a session stands at an
//! instant ([`SessionStatus`]) and what an acquire was decided to do
//! ([`AcquirePlan`]). Their own arithmetic (a session's lapse and expiry) is
//! here; every transition is in [`table`].
//!
//! [`table`]: super::table

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use fencepost_api::clock::MonoTime;
use fencepost_api::grace::GracePolicy;

/// A live (or lapsed, not yet expired) session.
#[derive(Clone, Debug, PartialEq)]
pub struct Session {
    /// The session id.
    pub id: String,
    /// Who opened it.
    pub owner_id: String,
    /// The principal (API token NAME) that opened it; `None` when it was
    /// opened with auth off. Only that principal may use it while auth is on.
    pub principal: Option<Arc<str>>,
    /// The TTL granted.
    pub ttl: Duration,
    /// Receipt instant of the last successful L1/L2.
    pub last_renewed: MonoTime,
    /// The keys this session holds a grant on: L3 and expiry find them here.
    pub keys: BTreeSet<String>,
}

impl Session {
    /// When the session lapses: heartbeats, acquires and renews are refused
    /// from here on (410), and its grants go to GRACE.
    pub fn lapse_at(&self) -> MonoTime {
        self.last_renewed.saturating_add(self.ttl)
    }

    /// When the session expires for good and its grants become reassignable:
    /// `ttl + grace` after the last successful L1/L2.
    pub fn expire_at(&self, grace: &GracePolicy) -> MonoTime {
        self.lapse_at().saturating_add(grace.grace_for(self.ttl))
    }
}

/// A grant of a key to a session.
#[derive(Clone, Debug, PartialEq)]
pub struct Grant {
    /// The fencing token.
    pub token: u64,
    /// The holding session.
    pub session_id: String,
    /// The lease the latest L4/L5 reply carried.
    pub lease: Duration,
    /// The longest lease granted over the grant's life: what the store keeps,
    /// so a restarted server (which restarts leases from its takeover) never
    /// ends the grant before any reply promised.
    pub longest_lease: Duration,
    /// The lease's server-side end: the latest `receipt + lease` of any L4/L5.
    pub lease_end: MonoTime,
    /// When the lease side lets the key go: the latest `receipt + lease + grace(lease)`.
    pub free_at: MonoTime,
}

impl Grant {
    /// The lease's server-side end.
    pub fn lease_end(&self) -> MonoTime {
        self.lease_end
    }
}

/// Everything the server holds in memory about one key: a grant, or an
/// acquire being persisted (or both, while a FREE grant is being replaced).
/// A key with neither is not in memory at all.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct KeyEntry {
    /// The current (or lapsed, not yet cleared) grant.
    pub grant: Option<Grant>,
    /// True while an acquire is being persisted; other acquires see the key held.
    pub pending: bool,
}

/// Who makes a request, as far as the session binding goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Caller<'a> {
    /// Auth is off: any caller may use any session (the behaviour before
    /// API tokens; nothing is checked).
    Anyone,
    /// An authenticated request: only sessions bound to this principal (the
    /// token's NAME) may be used.
    Principal(&'a str),
}

impl<'a> Caller<'a> {
    /// The principal, if auth is on.
    pub fn principal(self) -> Option<&'a str> {
        match self {
            Caller::Anyone => None,
            Caller::Principal(p) => Some(p),
        }
    }
}

/// How a session id stands at an instant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SessionStatus {
    /// Heartbeats and acquires are accepted.
    Live,
    /// Past `ttl` (410): nothing is accepted; its grants are in GRACE.
    Lapsed,
    /// Past `ttl + grace` and removed, or known only as expired (410).
    Expired,
    /// Never existed, or deleted, or expired long enough ago to be forgotten (404).
    Unknown,
}

/// What an acquire was decided to do, before anything is persisted.
#[derive(Clone, Debug, PartialEq)]
pub struct AcquirePlan {
    /// The lease to grant (clamped), from this request's receipt.
    pub lease: Duration,
    /// `Some(token)` when the requesting session already holds the key (C1 §7):
    /// the answer is that grant, extended like a renew ([`LockTable::apply_renew`]),
    /// and nothing is pending. `None`: a new grant, the key marked pending.
    ///
    /// [`LockTable::apply_renew`]: super::LockTable::apply_renew
    pub reacquire: Option<u64>,
}
