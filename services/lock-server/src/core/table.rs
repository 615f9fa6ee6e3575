//! [`LockTable`]: the whole in-memory state of a serving lock-server, and
//! every state transition of sessions and grants, decided at the `now` the
//! caller passes (the module docs of [`core`](super) give the timeline and
//! the decide-then-apply split). Expiry and the gauges are in
//! [`expiry`](super::expiry), the whole-table views for tests in
//! [`audit`](super::audit).

use std::collections::{BTreeSet, HashMap, VecDeque};
use std::sync::Arc;
use std::time::Duration;

use fencepost_api::clock::MonoTime;
use fencepost_api::lock::{LockErrorCode, LockInfo, LockState};

use super::error::{
    CoreError, lock_held, lock_unknown, lost, session_expired, session_not_yours, session_unknown,
};
use super::limits::{Caps, Limits, Sabotage};
use super::model::{AcquirePlan, Caller, Grant, KeyEntry, Session, SessionStatus};

/// The whole in-memory state of a serving lock-server.
#[derive(Debug, Default)]
pub struct LockTable {
    pub(super) limits: Limits,
    pub(super) caps: Caps,
    pub(super) sessions: HashMap<String, Session>,
    /// Every session once, by `(lapse_at, id)`: expiry and the live gauge read its due prefix.
    pub(super) session_q: BTreeSet<(MonoTime, String)>,
    /// Keys with a grant or a pending acquire; a FREE key is not here.
    pub(super) keys: HashMap<String, KeyEntry>,
    /// Every grant once, by `(lease_end, key)`: expiry and the held gauge read its due prefix.
    pub(super) grant_q: BTreeSet<(MonoTime, String)>,
    /// Expired session ids and when they expired, so L2 can say 410 not 404.
    pub(super) tombstones: HashMap<String, MonoTime>,
    /// The same ids, oldest first, to forget them by age and by count.
    pub(super) tombstone_q: VecDeque<(MonoTime, String)>,
    /// The principal of each tombstoned session opened with auth on, so its
    /// owner hears 410 and everyone else 403. Forgotten with the tombstone.
    pub(super) tombstone_principals: HashMap<String, Arc<str>>,
}

/// The `retry_after_ms` hint for a key whose acquire is being persisted.
const PENDING_RETRY_MS: u64 = 5;
/// The cap on `retry_after_ms` for a HELD key, so waiters notice early releases.
const HELD_RETRY_CAP: Duration = Duration::from_secs(1);

impl LockTable {
    /// An empty table with these limits and the default [`Caps`].
    pub fn new(limits: Limits) -> Self {
        Self::with_caps(limits, Caps::default())
    }

    /// An empty table with these limits and caps.
    pub fn with_caps(limits: Limits, caps: Caps) -> Self {
        LockTable {
            limits,
            caps,
            ..Default::default()
        }
    }

    /// The limits in force.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    /// The caps in force.
    pub fn caps(&self) -> &Caps {
        &self.caps
    }

    // ----- sessions -----------------------------------------------------

    /// How session `id` stands at `now`.
    pub fn session_status(&self, id: &str, now: MonoTime) -> SessionStatus {
        match self.sessions.get(id) {
            Some(s) if !now.has_reached(s.lapse_at()) => SessionStatus::Live,
            Some(s) if !now.has_reached(s.expire_at(&self.limits.grace)) => SessionStatus::Lapsed,
            Some(_) => SessionStatus::Expired,
            None if self.tombstones.contains_key(id) => SessionStatus::Expired,
            None => SessionStatus::Unknown,
        }
    }

    /// The principal session `id` is bound to (live, lapsed or tombstoned);
    /// `None` when it was opened with auth off or is unknown.
    pub fn session_principal(&self, id: &str) -> Option<Arc<str>> {
        match self.sessions.get(id) {
            Some(s) => s.principal.clone(),
            None => self.tombstone_principals.get(id).cloned(),
        }
    }

    /// The session binding, checked under the same hold of the
    /// table as the operation it guards and before it changes anything:
    /// with auth on, session `id` must be bound to the caller's principal.
    /// A session that is someone else's and one that does not exist get the
    /// same `403 FORBIDDEN`, so no caller learns whether an id it may not use
    /// exists; the owner of a lapsed or expired (tombstoned) session passes,
    /// and then hears 410 from the operation itself. With auth off, nothing
    /// is checked.
    pub fn check_caller(&self, id: &str, caller: Caller<'_>) -> Result<(), CoreError> {
        let Caller::Principal(name) = caller else {
            return Ok(());
        };
        let bound = match self.sessions.get(id) {
            Some(s) => s.principal.as_deref(),
            None => self.tombstone_principals.get(id).map(|p| &**p),
        };
        if bound == Some(name) {
            Ok(())
        } else {
            Err(session_not_yours())
        }
    }

    fn require_live(&self, id: &str, now: MonoTime, verb: &str) -> Result<&Session, CoreError> {
        match self.session_status(id, now) {
            SessionStatus::Live => Ok(&self.sessions[id]),
            SessionStatus::Lapsed | SessionStatus::Expired => Err(session_expired(verb)),
            SessionStatus::Unknown => Err(session_unknown()),
        }
    }

    /// The session TTL granted for an L1 asking for `requested_ms`.
    pub fn session_ttl_for(&self, requested_ms: Option<u64>) -> Duration {
        self.limits.clamp(requested_ms, self.limits.session_ttl)
    }

    /// L1 check: there is room for one more session ([`Caps::max_sessions`]).
    pub fn check_create_session(&self) -> Result<(), CoreError> {
        if self.sessions.len() >= self.caps.max_sessions {
            return Err(CoreError::new(
                LockErrorCode::Unavailable,
                format!(
                    "the server holds {} sessions, its limit; close sessions you no longer use (DELETE /v1/sessions/ID) or retry later",
                    self.sessions.len()
                ),
            ));
        }
        Ok(())
    }

    /// Adds a session (after the store persisted it) whose clock starts at
    /// `now`, bound to `principal` (`None`: opened with auth off).
    pub fn insert_session(
        &mut self,
        id: String,
        owner_id: String,
        principal: Option<Arc<str>>,
        ttl: Duration,
        now: MonoTime,
    ) {
        let session = Session {
            id: id.clone(),
            owner_id,
            principal,
            ttl,
            last_renewed: now,
            keys: BTreeSet::new(),
        };
        self.session_q.insert((session.lapse_at(), id.clone()));
        if let Some(old) = self.sessions.insert(id.clone(), session) {
            // An id is never reused; if it were, its old queue place goes.
            self.session_q.remove(&(old.lapse_at(), id));
        }
    }

    /// L2: restarts the session's TTL from `now`. Memory only: a heartbeat never
    /// writes to the store. Refused once the session lapsed (no resurrection).
    pub fn heartbeat(&mut self, id: &str, now: MonoTime) -> Result<Duration, CoreError> {
        self.require_live(id, now, "heartbeat")?;
        let s = self.sessions.get_mut(id).expect("live session exists");
        let old = s.lapse_at();
        s.last_renewed = now;
        let new = s.lapse_at();
        let ttl = s.ttl;
        if new != old {
            self.session_q.remove(&(old, id.to_string()));
            self.session_q.insert((new, id.to_string()));
        }
        Ok(ttl)
    }

    /// L3 check: the session may be deleted unless unknown or already expired.
    /// Returns the keys it holds now (the store's delete clears their rows).
    pub fn check_delete_session(&self, id: &str, now: MonoTime) -> Result<Vec<String>, CoreError> {
        match self.session_status(id, now) {
            SessionStatus::Live | SessionStatus::Lapsed => {
                Ok(self.sessions[id].keys.iter().cloned().collect())
            }
            SessionStatus::Expired => Err(CoreError::new(
                LockErrorCode::SessionExpired,
                "this session has already expired; its locks are released",
            )),
            SessionStatus::Unknown => Err(session_unknown()),
        }
    }

    /// L3 apply: forgets the session and frees every key it holds, at once.
    /// Returns the `(key, token)` pairs released.
    pub fn apply_delete_session(&mut self, id: &str) -> Vec<(String, u64)> {
        let Some(session) = self.sessions.remove(id) else {
            return Vec::new();
        };
        self.session_q.remove(&(session.lapse_at(), id.to_string()));
        let mut released = Vec::with_capacity(session.keys.len());
        for key in session.keys {
            if let Some(token) = self.drop_grant(&key, None) {
                released.push((key, token));
            }
        }
        released
    }

    // ----- grants -------------------------------------------------------

    /// When `g` stops being HELD: its lease end or its session's lapse, whichever is first.
    fn held_until(&self, g: &Grant) -> MonoTime {
        match self.sessions.get(&g.session_id) {
            Some(s) => g.lease_end.min(s.lapse_at()),
            None => MonoTime::ZERO,
        }
    }

    /// When `g` becomes reassignable: its lease side's `free_at`, or session
    /// lapse + grace(session ttl), whichever is first.
    fn reassignable_at(&self, g: &Grant) -> MonoTime {
        match self.sessions.get(&g.session_id) {
            Some(s) => g.free_at.min(s.expire_at(&self.limits.grace)),
            None => MonoTime::ZERO,
        }
    }

    /// A grant's state at `now`, and how long until that state ends.
    pub(super) fn grant_state(&self, g: &Grant, now: MonoTime) -> (LockState, Duration) {
        let held_until = self.held_until(g);
        if !now.has_reached(held_until) {
            return (LockState::Held, held_until.saturating_duration_since(now));
        }
        let free_at = self.reassignable_at(g);
        if !now.has_reached(free_at) {
            return (LockState::Grace, free_at.saturating_duration_since(now));
        }
        (LockState::Free, Duration::ZERO)
    }

    /// L4 check. A new grant marks the key pending while the store issues the
    /// token: call [`finish_acquire`](Self::finish_acquire) or
    /// [`abort_acquire`](Self::abort_acquire) next. When the requesting session
    /// already holds the key (HELD), the plan says so and nothing changes: the
    /// caller extends that grant like a renew (C1 §7: same token, the lease
    /// restarted from this request's receipt, never shortened).
    pub fn begin_acquire(
        &mut self,
        key: &str,
        session_id: &str,
        requested_ms: Option<u64>,
        now: MonoTime,
    ) -> Result<AcquirePlan, CoreError> {
        self.require_live(session_id, now, "acquire")?;
        let lease = self.limits.clamp(requested_ms, self.limits.default_ttl);
        if let Some(entry) = self.keys.get(key) {
            if entry.pending {
                return Err(lock_held(key, PENDING_RETRY_MS, "being granted"));
            }
            if let Some(g) = &entry.grant {
                match self.grant_state(g, now) {
                    (LockState::Free, _) => {}
                    (LockState::Held, _) if g.session_id == session_id => {
                        return Ok(AcquirePlan {
                            lease,
                            reacquire: Some(g.token),
                        });
                    }
                    (state, left) => {
                        let left = match state {
                            LockState::Held => {
                                // Cannot be free before held end + grace unless released.
                                let until = self.reassignable_at(g).saturating_duration_since(now);
                                until.min(HELD_RETRY_CAP)
                            }
                            _ => left,
                        };
                        let what = if state == LockState::Held {
                            "held by another grant"
                        } else {
                            "in grace after its last grant"
                        };
                        return Err(lock_held(key, ceil_ms(left).max(1), what));
                    }
                }
            }
        }
        self.keys.entry(key.to_string()).or_default().pending = true;
        Ok(AcquirePlan {
            lease,
            reacquire: None,
        })
    }

    /// L4 apply: records the grant the store persisted with `token`, leased
    /// from `started` (the request's receipt), replacing a FREE grant if one
    /// was left. Fails if the session vanished meanwhile (deleted or expired);
    /// the caller then clears the grant from the store. A re-acquire plan is
    /// applied as [`apply_renew`](Self::apply_renew).
    pub fn finish_acquire(
        &mut self,
        key: &str,
        session_id: &str,
        token: u64,
        plan: &AcquirePlan,
        started: MonoTime,
    ) -> Result<(), CoreError> {
        if let Some(held) = plan.reacquire {
            return match self.apply_renew(key, held, plan.lease, started) {
                true => Ok(()),
                false => Err(lost(key, held, "acquire", "released meanwhile")),
            };
        }
        if let Some(e) = self.keys.get_mut(key) {
            e.pending = false;
        }
        // A FREE grant left over from before is replaced (or, on failure, dropped).
        self.drop_grant(key, None);
        if !self.sessions.contains_key(session_id) {
            self.evict_if_empty(key);
            return Err(session_unknown());
        }
        let lease_end =
            started.saturating_add(if self.limits.sabotage == Some(Sabotage::EarlyExpiry) {
                plan.lease / 2
            } else {
                plan.lease
            });
        let grant = Grant {
            token,
            session_id: session_id.to_string(),
            lease: plan.lease,
            longest_lease: plan.lease,
            lease_end,
            free_at: lease_end.saturating_add(self.limits.grace.grace_for(plan.lease)),
        };
        self.grant_q.insert((lease_end, key.to_string()));
        self.sessions
            .get_mut(session_id)
            .expect("checked")
            .keys
            .insert(key.to_string());
        self.keys.entry(key.to_string()).or_default().grant = Some(grant);
        Ok(())
    }

    /// A grant the store committed while this table replaced the one that
    /// decided it: the replica lost and re-won the leadership during the
    /// commit, and this table was loaded at the takeover, before or after
    /// the commit. `Ok` when this table holds the grant (the load saw it), or
    /// adopts it (the commit came after the load) because the key has no
    /// other grant and no acquire in flight here and the session is live:
    /// leased from `started`, as [`finish_acquire`](Self::finish_acquire)
    /// would. Otherwise the refusal (`LOCK_HELD`, or the session's 410/404),
    /// and nothing changes: the caller clears the row, so no grant it could
    /// not acknowledge is left in the store.
    pub fn adopt_grant(
        &mut self,
        key: &str,
        session_id: &str,
        token: u64,
        lease: Duration,
        started: MonoTime,
    ) -> Result<(), CoreError> {
        if let Some(e) = self.keys.get(key) {
            if let Some(g) = &e.grant {
                return if g.token == token && g.session_id == session_id {
                    Ok(())
                } else {
                    Err(lock_held(key, 1, "granted again since a takeover"))
                };
            }
            if e.pending {
                return Err(lock_held(key, PENDING_RETRY_MS, "being granted"));
            }
        }
        self.require_live(session_id, started, "acquire")?;
        self.keys.entry(key.to_string()).or_default().pending = true;
        let plan = AcquirePlan {
            lease,
            reacquire: None,
        };
        self.finish_acquire(key, session_id, token, &plan, started)
    }

    /// Whether session `id` is in the table (live, lapsed or not yet swept).
    pub fn has_session(&self, id: &str) -> bool {
        self.sessions.contains_key(id)
    }

    /// L4 failure: the store did not issue a token; the table is as it was
    /// before [`begin_acquire`](Self::begin_acquire).
    pub fn abort_acquire(&mut self, key: &str) {
        if let Some(e) = self.keys.get_mut(key) {
            e.pending = false;
        }
        self.evict_if_empty(key);
    }

    /// Removes `key`'s grant (only if it has `token`, when given) from the key,
    /// its session's index and the grant queue; evicts the key if nothing is
    /// left. Returns the token removed.
    pub(super) fn drop_grant(&mut self, key: &str, token: Option<u64>) -> Option<u64> {
        let entry = self.keys.get_mut(key)?;
        if token.is_some_and(|t| entry.grant.as_ref().is_none_or(|g| g.token != t)) {
            return None;
        }
        let g = entry.grant.take()?;
        self.grant_q.remove(&(g.lease_end, key.to_string()));
        if let Some(s) = self.sessions.get_mut(&g.session_id) {
            s.keys.remove(key);
        }
        self.evict_if_empty(key);
        Some(g.token)
    }

    /// A key with no grant and no pending acquire leaves memory.
    fn evict_if_empty(&mut self, key: &str) {
        if self
            .keys
            .get(key)
            .is_some_and(|e| e.grant.is_none() && !e.pending)
        {
            self.keys.remove(key);
        }
    }

    /// Finds the current grant for an L5/L6 and checks ownership and liveness.
    fn owned_grant(
        &self,
        key: &str,
        session_id: &str,
        token: u64,
        now: MonoTime,
        verb: &str,
    ) -> Result<&Grant, CoreError> {
        match self.session_status(session_id, now) {
            SessionStatus::Live => {}
            SessionStatus::Lapsed | SessionStatus::Expired => {
                return Err(session_expired(&format!("{verb} {key}")));
            }
            SessionStatus::Unknown => return Err(session_unknown()),
        }
        let g = self
            .keys
            .get(key)
            .and_then(|e| e.grant.as_ref())
            .ok_or_else(|| lost(key, token, verb, "no current grant"))?;
        if g.token != token {
            return Err(lost(
                key,
                token,
                verb,
                &format!("the current token is {}", g.token),
            ));
        }
        if g.session_id != session_id {
            return Err(lost(key, token, verb, "another session holds it"));
        }
        if now.has_reached(self.held_until(g)) {
            return Err(lost(
                key,
                token,
                verb,
                "its lease already ended on the server",
            ));
        }
        Ok(g)
    }

    /// L5 check: the renewed lease, if the grant is still HELD by this session
    /// and token. A late renew is refused even in grace (no resurrection).
    pub fn check_renew(
        &self,
        key: &str,
        session_id: &str,
        token: u64,
        requested_ms: Option<u64>,
        now: MonoTime,
    ) -> Result<Duration, CoreError> {
        self.owned_grant(key, session_id, token, now, "renew")?;
        Ok(self.limits.clamp(requested_ms, self.limits.default_ttl))
    }

    /// The lease the store must record before a renew (or re-acquire) of
    /// `(key, token)` with `lease` applies: `Some(lease)` when it is longer
    /// than every lease granted so far; `None` when the store needs no write
    /// (a plain renew touches no disk).
    pub fn lease_to_persist(&self, key: &str, token: u64, lease: Duration) -> Option<Duration> {
        let g = self.keys.get(key)?.grant.as_ref()?;
        (g.token == token && lease > g.longest_lease).then_some(lease)
    }

    /// L5 apply (and the holder's re-acquire): the lease's end becomes
    /// `max(lease_end, now + lease)` (C1 §7: never earlier), same token.
    /// Returns false if the grant changed since the check.
    pub fn apply_renew(&mut self, key: &str, token: u64, lease: Duration, now: MonoTime) -> bool {
        let grace = self.limits.grace.grace_for(lease);
        let Some(g) = self
            .keys
            .get_mut(key)
            .and_then(|e| e.grant.as_mut())
            .filter(|g| g.token == token)
        else {
            return false;
        };
        let old_end = g.lease_end;
        let end = now.saturating_add(lease);
        g.lease = lease;
        g.longest_lease = g.longest_lease.max(lease);
        g.lease_end = old_end.max(end);
        g.free_at = g.free_at.max(end.saturating_add(grace));
        if g.lease_end != old_end {
            let new_end = g.lease_end;
            self.grant_q.remove(&(old_end, key.to_string()));
            self.grant_q.insert((new_end, key.to_string()));
        }
        true
    }

    /// L6 check: only the holding session with the matching token, while HELD.
    pub fn check_release(
        &self,
        key: &str,
        session_id: &str,
        token: u64,
        now: MonoTime,
    ) -> Result<(), CoreError> {
        self.owned_grant(key, session_id, token, now, "release")
            .map(|_| ())
    }

    /// L6/L8 apply: removes the grant if it still has `token`; the key is
    /// reassignable at once (and leaves memory).
    pub fn apply_release(&mut self, key: &str, token: u64) -> bool {
        self.drop_grant(key, Some(token)).is_some()
    }

    /// L8 check: the token a revoke would end (HELD or GRACE), or `None` if
    /// nothing is held. A key the table holds nothing for is LOCK_UNKNOWN here;
    /// the caller asks the store whether it was ever granted.
    pub fn check_revoke(&self, key: &str, now: MonoTime) -> Result<Option<u64>, CoreError> {
        let entry = self.keys.get(key).ok_or_else(|| lock_unknown(key))?;
        Ok(entry
            .grant
            .as_ref()
            .and_then(|g| (self.grant_state(g, now).0 != LockState::Free).then_some(g.token)))
    }

    /// L7: the key's state at `now`, for a key with a grant in memory (its
    /// token is the last issued). Without one — never granted, or FREE and
    /// evicted, or its first acquire still being persisted — it is LOCK_UNKNOWN
    /// here, and the caller asks the store for the last token.
    pub fn info(&self, key: &str, now: MonoTime) -> Result<LockInfo, CoreError> {
        let g = self
            .keys
            .get(key)
            .and_then(|e| e.grant.as_ref())
            .ok_or_else(|| lock_unknown(key))?;
        let mut info = LockInfo {
            key: key.to_string(),
            state: LockState::Free,
            token: g.token,
            owner_id: None,
            remaining_ms: None,
        };
        let (state, left) = self.grant_state(g, now);
        if state != LockState::Free {
            info.state = state;
            info.owner_id = self.sessions.get(&g.session_id).map(|s| s.owner_id.clone());
            info.remaining_ms = Some(ceil_ms(left));
        }
        Ok(info)
    }

    // ----- recovery -----------------------------------------------------

    /// Restores a persisted session at a takeover: its TTL restarts from
    /// `now` (C1 §6); it stays bound to its `principal`.
    pub fn restore_session(
        &mut self,
        id: String,
        owner_id: String,
        principal: Option<Arc<str>>,
        ttl: Duration,
        now: MonoTime,
    ) {
        self.insert_session(id, owner_id, principal, ttl, now);
    }

    /// Restores a persisted tombstone that is `age` old at `now`: the id
    /// answers 410 again, for what is left of its keep (the count cap
    /// applies as for any expiry). Call oldest first. An id that is a live
    /// session (restored before) is left alone; one older than the keep is
    /// not restored.
    pub fn restore_tombstone(
        &mut self,
        id: String,
        principal: Option<Arc<str>>,
        age: Duration,
        now: MonoTime,
    ) {
        if age >= self.caps.tombstone_keep || self.sessions.contains_key(&id) {
            return;
        }
        self.remember_expired(id, principal, now.saturating_sub(age));
    }

    /// Restores a persisted grant with its lease restarted from `now` — only
    /// ever extending what a client was promised. Returns false (nothing
    /// restored) when its session is not restored; the caller clears the row.
    pub fn restore_grant(
        &mut self,
        key: String,
        token: u64,
        session_id: String,
        lease: Duration,
        now: MonoTime,
    ) -> bool {
        if !self.sessions.contains_key(&session_id) {
            return false;
        }
        let plan = AcquirePlan {
            lease,
            reacquire: None,
        };
        self.keys.entry(key.clone()).or_default().pending = true;
        self.finish_acquire(&key, &session_id, token, &plan, now)
            .is_ok()
    }
}

/// Whole milliseconds, rounded up.
pub fn ceil_ms(d: Duration) -> u64 {
    u64::try_from(d.as_nanos().div_ceil(1_000_000)).unwrap_or(u64::MAX)
}
