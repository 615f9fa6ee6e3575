//! The independent side of the check: [`FakeStore`], what a `LockStore`
//! would hold, and [`Model`], what each client was promised (sessions by
//! their last renewal, grants by every lease end a reply carried), with the
//! instants until which a holder may believe in its grant.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use fencepost_api::clock::MonoTime;
use lock_server::core::Limits;

/// What a `LockStore` would hold: sessions, holders `(token, session, lease)`
/// and the last token per key (issued `last + 1`).
#[derive(Default)]
pub(super) struct FakeStore {
    pub(super) sessions: BTreeMap<String, Duration>,
    pub(super) holders: BTreeMap<String, (u64, String, Duration)>,
    pub(super) last: HashMap<String, u64>,
}

impl FakeStore {
    /// `LockStore::grant`: the key's next token, with its holder.
    pub(super) fn grant(&mut self, key: &str, session: &str, lease: Duration) -> u64 {
        let t = self.last.entry(key.to_string()).or_default();
        *t += 1;
        let token = *t;
        self.holders
            .insert(key.to_string(), (token, session.to_string(), lease));
        token
    }

    /// `LockStore::clear_grant`: compare-and-clear.
    pub(super) fn clear(&mut self, key: &str, token: u64) {
        if self.holders.get(key).is_some_and(|h| h.0 == token) {
            self.holders.remove(key);
        }
    }

    /// `LockStore::delete_session`.
    pub(super) fn delete_session(&mut self, id: &str) {
        self.sessions.remove(id);
        self.holders.retain(|_, h| h.1 != id);
    }

    /// `LockStore::set_lease`: compare-and-set.
    pub(super) fn set_lease(&mut self, key: &str, token: u64, lease: Duration) {
        if let Some(h) = self.holders.get_mut(key).filter(|h| h.0 == token) {
            h.2 = lease;
        }
    }
}

/// A session as its client was promised it.
pub(super) struct MSession {
    pub(super) id: String,
    pub(super) ttl: Duration,
    /// Receipt of its last successful L1/L2.
    pub(super) renewed: MonoTime,
    /// Deleted (L3) or expired (swept): it can never be granted anything again.
    pub(super) gone: bool,
}

impl MSession {
    /// The client's belief in the session ends here (C1: `receipt + ttl`).
    pub(super) fn lapse(&self) -> MonoTime {
        self.renewed.saturating_add(self.ttl)
    }
}

/// A grant as its holder was promised it.
#[derive(Clone)]
pub(super) struct MGrant {
    pub(super) session: String,
    pub(super) token: u64,
    /// Every `(receipt + lease, lease)` a successful L4/L5 reply carried.
    pub(super) promises: Vec<(MonoTime, Duration)>,
}

/// What the run has seen.
pub(super) struct Model {
    pub(super) limits: Limits,
    pub(super) sessions: Vec<MSession>,
    /// Per key: the grant its holder may still believe in, until an explicit end.
    pub(super) grants: HashMap<String, MGrant>,
    /// Per key: the last token a grant carried.
    pub(super) last_token: HashMap<String, u64>,
}

impl Model {
    pub(super) fn session(&self, id: &str) -> Option<&MSession> {
        self.sessions.iter().find(|s| s.id == id)
    }

    pub(super) fn session_mut(&mut self, id: &str) -> Option<&mut MSession> {
        self.sessions.iter_mut().find(|s| s.id == id)
    }

    /// Until when the holder may believe in `g`'s lease (no grace): the latest
    /// promise, since any reply may be the one it got.
    pub(super) fn lease_end(&self, g: &MGrant) -> MonoTime {
        g.promises.iter().map(|p| p.0).max().expect("an L4 promise")
    }

    /// Until when the holder may believe it holds `g` (no grace).
    pub(super) fn held_until(&self, g: &MGrant) -> MonoTime {
        let lapse = self
            .session(&g.session)
            .map_or(MonoTime::ZERO, MSession::lapse);
        self.lease_end(g).min(lapse)
    }

    /// From when `g`'s key may go to someone else: each belief plus its grace.
    pub(super) fn reassignable_at(&self, g: &MGrant) -> MonoTime {
        let grace = |d| self.limits.grace.grace_for(d);
        let by_lease = g
            .promises
            .iter()
            .map(|&(end, lease)| end.saturating_add(grace(lease)))
            .max()
            .expect("an L4 promise");
        let by_session = self
            .session(&g.session)
            .map_or(MonoTime::ZERO, |s| s.lapse().saturating_add(grace(s.ttl)));
        by_lease.min(by_session)
    }

    pub(super) fn live(&self, id: &str, now: MonoTime) -> bool {
        self.session(id)
            .is_some_and(|s| !s.gone && !now.has_reached(s.lapse()))
    }
}
