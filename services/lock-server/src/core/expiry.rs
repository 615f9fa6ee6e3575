//! Expiry and the gauges, driven by the two deadline-ordered queues.
//!
//! `session_q` orders sessions by lapse instant and `grant_q` grants by lease
//! end. What is due at `now` is always a *prefix* of a queue: the sessions that
//! have lapsed (of which those past `ttl + grace` expire) and the grants whose
//! lease has ended (of which those past their reassignable instant are FREE).
//! A lapsed-but-not-expired session or an ended-but-in-grace lease stays in
//! that prefix only for its grace (tens of milliseconds with the default
//! clock bounds) plus one sweep, so reading the prefix costs what has recently
//! run out, never the number of keys or sessions held.
//!
//! A sweep is decide-then-apply like every other mutation: [`LockTable::due`]
//! lists what ran out without changing anything, the service clears it from
//! the store, and [`LockTable::apply_swept`] removes from memory what is still
//! due (a grant re-granted meanwhile has another token and is left alone).

use std::collections::BTreeSet;
use std::ops::Bound;
use std::sync::Arc;

use fencepost_api::clock::MonoTime;
use fencepost_api::lock::LockState;

use super::table::LockTable;

/// What ran out by an instant; the service clears it from the store, then
/// applies it, and counts it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Swept {
    /// Sessions past `ttl + grace`.
    pub expired_sessions: Vec<String>,
    /// Grants that reached FREE without a release, `(key, token)`: by their
    /// lease, or because their session expired.
    pub expired_grants: Vec<(String, u64)>,
}

impl Swept {
    /// True when nothing ran out.
    pub fn is_empty(&self) -> bool {
        self.expired_sessions.is_empty() && self.expired_grants.is_empty()
    }
}

/// An entry of a deadline queue: `(deadline, session id or key)`.
type Due = (MonoTime, String);

/// The queue bound that selects every entry at or before `now`.
fn through(now: MonoTime) -> (Bound<Due>, Bound<Due>) {
    match now.as_nanos().checked_add(1) {
        Some(n) => (
            Bound::Unbounded,
            Bound::Excluded((MonoTime::from_nanos(n), String::new())),
        ),
        None => (Bound::Unbounded, Bound::Unbounded),
    }
}

impl LockTable {
    /// Lists what has run out by `now` — at most [`Caps::sweep_batch`] sessions
    /// plus grants — without changing anything.
    ///
    /// [`Caps::sweep_batch`]: super::Caps::sweep_batch
    pub fn due(&self, now: MonoTime) -> Swept {
        let grace = self.limits.grace;
        let batch = self.caps.sweep_batch;
        let mut out = Swept::default();
        let mut grants: BTreeSet<(String, u64)> = BTreeSet::new();
        for (_, id) in self.session_q.range(through(now)) {
            if out.expired_sessions.len() + grants.len() >= batch {
                break;
            }
            let s = &self.sessions[id];
            if now.has_reached(s.expire_at(&grace)) {
                out.expired_sessions.push(id.clone());
                for key in &s.keys {
                    if let Some(g) = self.keys.get(key).and_then(|e| e.grant.as_ref()) {
                        grants.insert((key.clone(), g.token));
                    }
                }
            }
        }
        for (_, key) in self.grant_q.range(through(now)) {
            if out.expired_sessions.len() + grants.len() >= batch {
                break;
            }
            let g = self.keys[key].grant.as_ref().expect("queued grants exist");
            if self.grant_state(g, now).0 == LockState::Free {
                grants.insert((key.clone(), g.token));
            }
        }
        out.expired_grants = grants.into_iter().collect();
        out
    }

    /// Removes from memory what [`due`](Self::due) listed and is still due at
    /// `now`: expired sessions (remembered as tombstones) with their grants,
    /// and FREE grants whose token is unchanged. Also forgets tombstones past
    /// their age. Returns the grants released that `swept` did not list (an
    /// acquire finished meanwhile for an expiring session): the caller clears
    /// them from the store too.
    pub fn apply_swept(&mut self, swept: &Swept, now: MonoTime) -> Vec<(String, u64)> {
        let grace = self.limits.grace;
        let mut unlisted = Vec::new();
        for (key, token) in &swept.expired_grants {
            let free = self
                .keys
                .get(key)
                .and_then(|e| e.grant.as_ref())
                .is_some_and(|g| {
                    g.token == *token && self.grant_state(g, now).0 == LockState::Free
                });
            if free {
                self.drop_grant(key, Some(*token));
            }
        }
        for id in &swept.expired_sessions {
            let expired = self
                .sessions
                .get(id)
                .is_some_and(|s| now.has_reached(s.expire_at(&grace)));
            if expired {
                let principal = self.session_principal(id);
                for released in self.apply_delete_session(id) {
                    if !swept.expired_grants.contains(&released) {
                        unlisted.push(released);
                    }
                }
                self.remember_expired(id.clone(), principal, now);
            }
        }
        self.forget_old_tombstones(now);
        unlisted
    }

    /// [`apply_swept`](Self::apply_swept) on a table loaded at a takeover
    /// while the sweep's store writes were in flight (a lost-and-rewon
    /// leadership), before or after they committed: what the store cleared
    /// and deleted leaves memory too, due here or not (a table loaded before
    /// the commit restarted those TTLs and leases), and the deleted sessions
    /// are tombstoned. The store is what the next load reads; memory must
    /// not hold a grant or a session it no longer has.
    pub fn apply_swept_committed(&mut self, swept: &Swept, now: MonoTime) {
        for (key, token) in &swept.expired_grants {
            self.drop_grant(key, Some(*token));
        }
        for id in &swept.expired_sessions {
            let principal = self.session_principal(id);
            self.apply_delete_session(id);
            self.remember_expired(id.clone(), principal, now);
        }
        self.forget_old_tombstones(now);
    }

    /// [`due`](Self::due) then [`apply_swept`](Self::apply_swept), in memory
    /// only (for callers without a store).
    pub fn sweep(&mut self, now: MonoTime) -> Swept {
        let swept = self.due(now);
        self.apply_swept(&swept, now);
        swept
    }

    /// Keeps `id` as expired (410) with the principal it was bound to,
    /// forgetting the oldest beyond the count cap.
    pub(super) fn remember_expired(
        &mut self,
        id: String,
        principal: Option<Arc<str>>,
        now: MonoTime,
    ) {
        match principal {
            Some(p) => self.tombstone_principals.insert(id.clone(), p),
            None => self.tombstone_principals.remove(&id),
        };
        self.tombstones.insert(id.clone(), now);
        self.tombstone_q.push_back((now, id));
        while self.tombstone_q.len() > self.caps.max_tombstones {
            self.pop_tombstone();
        }
    }

    /// Forgets tombstones older than [`Caps::tombstone_keep`](super::Caps::tombstone_keep).
    fn forget_old_tombstones(&mut self, now: MonoTime) {
        let keep = self.caps.tombstone_keep;
        while self
            .tombstone_q
            .front()
            .is_some_and(|(at, _)| now.has_reached(at.saturating_add(keep)))
        {
            self.pop_tombstone();
        }
    }

    fn pop_tombstone(&mut self) {
        if let Some((at, id)) = self.tombstone_q.pop_front()
            && self.tombstones.get(&id) == Some(&at)
        {
            self.tombstones.remove(&id);
            self.tombstone_principals.remove(&id);
        }
    }

    /// Live sessions and HELD keys at `now`, for the gauges: the totals the
    /// maps keep, less the due prefixes of the queues (sessions lapsed, leases
    /// ended, and grants of lapsed sessions).
    pub fn gauges(&self, now: MonoTime) -> (u64, u64) {
        let mut lapsed = 0usize;
        let mut held_by_lapsed = 0usize;
        for (_, id) in self.session_q.range(through(now)) {
            lapsed += 1;
            held_by_lapsed += self.sessions[id]
                .keys
                .iter()
                .filter_map(|k| self.keys.get(k).and_then(|e| e.grant.as_ref()))
                .filter(|g| !now.has_reached(g.lease_end))
                .count();
        }
        let ended = self.grant_q.range(through(now)).count();
        let live = self.sessions.len() - lapsed;
        let held = self.grant_q.len() - ended - held_by_lapsed;
        (live as u64, held as u64)
    }

    /// How many sessions, keys and tombstones the table holds (for tests and
    /// the bounded-state check).
    pub fn sizes(&self) -> TableSizes {
        TableSizes {
            sessions: self.sessions.len(),
            keys: self.keys.len(),
            tombstones: self.tombstones.len(),
        }
    }
}

/// The sizes of a table's maps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TableSizes {
    /// Sessions held (live, or lapsed and not yet expired).
    pub sessions: usize,
    /// Keys with a grant or a pending acquire.
    pub keys: usize,
    /// Expired-session ids remembered.
    pub tombstones: usize,
}
