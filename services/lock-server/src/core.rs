//! The lock table: sessions, grants and fencing tokens as plain values, and
//! every state transition as a function of the current [`MonoTime`]. No I/O,
//! no clock reads: the caller passes `now` (the instant the request was
//! received), which is what makes the boundary tests exact to the nanosecond.
//!
//! A mutation that must be persisted is split in two: a `check_*`/`begin_*`
//! that validates and decides without changing anything, and an `apply_*`/
//! `finish_*` that the service calls only after the store has persisted the
//! change. So a store failure (a 5xx) never changes state.
//!
//! The timeline of one grant (C1 "Semantics"):
//! - HELD while `now < held_until = min(started + lease, session.last + session_ttl)`;
//! - GRACE while `now < reassignable_at = min(started + lease + grace(lease),
//!   session.last + session_ttl + grace(session_ttl))`;
//! - FREE after. An explicit release (L6/L3) or a revoke (L8) frees it at once.
//!
//! The minimum is safe because the client's own belief ends at the earlier of
//! its handle deadline and its session deadline, and each is covered by its
//! own grace.

use std::collections::HashMap;
use std::time::Duration;

use fencepost_api::clock::MonoTime;
use fencepost_api::grace::GracePolicy;
use fencepost_api::lock::{LockErrorCode, LockInfo, LockState};

/// The server's TTL limits and grace (C4 `lock.*`).
#[derive(Clone, Debug, PartialEq)]
pub struct Limits {
    /// `lock.default.ttl`: the lease when L4/L5 give no `ttl_ms`.
    pub default_ttl: Duration,
    /// `lock.session.ttl`: the session TTL when L1 gives no `ttl_ms`.
    pub session_ttl: Duration,
    /// `lock.ttl.min`: requests below are clamped up.
    pub ttl_min: Duration,
    /// `lock.ttl.max`: requests above are clamped down.
    pub ttl_max: Duration,
    /// How grace is sized.
    pub grace: GracePolicy,
}

impl Default for Limits {
    /// The C4 defaults.
    fn default() -> Self {
        Limits {
            default_ttl: Duration::from_secs(30),
            session_ttl: Duration::from_secs(15),
            ttl_min: Duration::from_millis(100),
            ttl_max: Duration::from_secs(600),
            grace: GracePolicy::default(),
        }
    }
}

impl Limits {
    /// The TTL granted for a request of `requested_ms` (absent: `default`),
    /// clamped to `[ttl_min, ttl_max]`. Clamping is never an error (C1).
    pub fn clamp(&self, requested_ms: Option<u64>, default: Duration) -> Duration {
        let asked = requested_ms.map(Duration::from_millis).unwrap_or(default);
        asked.clamp(self.ttl_min, self.ttl_max)
    }
}

/// A live (or lapsed, not yet expired) session.
#[derive(Clone, Debug, PartialEq)]
pub struct Session {
    /// The session id.
    pub id: String,
    /// Who opened it.
    pub owner_id: String,
    /// The TTL granted.
    pub ttl: Duration,
    /// Receipt instant of the last successful L1/L2.
    pub last_renewed: MonoTime,
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
    /// The lease granted by the last L4/L5.
    pub lease: Duration,
    /// Receipt instant of the last L4/L5 (or the takeover instant after recovery).
    pub started: MonoTime,
}

impl Grant {
    /// The lease's server-side end.
    pub fn lease_end(&self) -> MonoTime {
        self.started.saturating_add(self.lease)
    }
}

/// Everything the server knows about one key.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct KeyEntry {
    /// The last token issued for the key (persisted by the store first).
    pub last_token: u64,
    /// The current (or lapsed, not yet cleared) grant.
    pub grant: Option<Grant>,
    /// True while an acquire is being persisted; other acquires see the key held.
    pub pending: bool,
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
    /// Never existed, or deleted (404).
    Unknown,
}

/// A refusal, carrying the C1 code and a message a person can act on.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct CoreError {
    /// The C1 code.
    pub code: LockErrorCode,
    /// One line for a person.
    pub message: String,
    /// With LOCK_HELD: when to try again.
    pub retry_after_ms: Option<u64>,
}

impl CoreError {
    fn new(code: LockErrorCode, message: impl Into<String>) -> Self {
        CoreError {
            code,
            message: message.into(),
            retry_after_ms: None,
        }
    }
}

/// What an acquire was decided to grant, before the store issues the token.
#[derive(Clone, Debug, PartialEq)]
pub struct AcquirePlan {
    /// The lease to grant (clamped).
    pub lease: Duration,
}

/// What a sweep removed; the caller clears it from the store and counts it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Swept {
    /// Sessions past `ttl + grace`.
    pub expired_sessions: Vec<String>,
    /// Grants that reached FREE without a release: `(key, token)`.
    pub expired_grants: Vec<(String, u64)>,
}

/// The whole in-memory state of a serving lock-server.
#[derive(Debug, Default)]
pub struct LockTable {
    limits: Limits,
    sessions: HashMap<String, Session>,
    /// Ids of sessions that expired, with when, so L2 can say 410 not 404.
    expired: HashMap<String, MonoTime>,
    keys: HashMap<String, KeyEntry>,
}

/// How long an expired session id is remembered (for 410 vs 404).
const TOMBSTONE_KEEP: Duration = Duration::from_secs(3600);
/// The `retry_after_ms` hint for a key whose acquire is being persisted.
const PENDING_RETRY_MS: u64 = 5;
/// The cap on `retry_after_ms` for a HELD key, so waiters notice early releases.
const HELD_RETRY_CAP: Duration = Duration::from_secs(1);

impl LockTable {
    /// An empty table with these limits.
    pub fn new(limits: Limits) -> Self {
        LockTable {
            limits,
            ..Default::default()
        }
    }

    /// The limits in force.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    // ----- sessions -----------------------------------------------------

    /// How session `id` stands at `now`.
    pub fn session_status(&self, id: &str, now: MonoTime) -> SessionStatus {
        match self.sessions.get(id) {
            Some(s) if !now.has_reached(s.lapse_at()) => SessionStatus::Live,
            Some(s) if !now.has_reached(s.expire_at(&self.limits.grace)) => SessionStatus::Lapsed,
            Some(_) => SessionStatus::Expired,
            None if self.expired.contains_key(id) => SessionStatus::Expired,
            None => SessionStatus::Unknown,
        }
    }

    fn require_live(&self, id: &str, now: MonoTime) -> Result<&Session, CoreError> {
        match self.session_status(id, now) {
            SessionStatus::Live => Ok(&self.sessions[id]),
            SessionStatus::Lapsed | SessionStatus::Expired => Err(CoreError::new(
                LockErrorCode::SessionExpired,
                format!("session {id} has expired on the server; open a new session"),
            )),
            SessionStatus::Unknown => Err(session_unknown(id)),
        }
    }

    /// The session TTL granted for an L1 asking for `requested_ms`.
    pub fn session_ttl_for(&self, requested_ms: Option<u64>) -> Duration {
        self.limits.clamp(requested_ms, self.limits.session_ttl)
    }

    /// Adds a session (after the store persisted it) whose clock starts at `now`.
    pub fn insert_session(&mut self, id: String, owner_id: String, ttl: Duration, now: MonoTime) {
        self.sessions.insert(
            id.clone(),
            Session {
                id,
                owner_id,
                ttl,
                last_renewed: now,
            },
        );
    }

    /// L2: restarts the session's TTL from `now`. Memory only: a heartbeat never
    /// writes to the store. Refused once the session lapsed (no resurrection).
    pub fn heartbeat(&mut self, id: &str, now: MonoTime) -> Result<Duration, CoreError> {
        self.require_live(id, now)?;
        let s = self.sessions.get_mut(id).expect("live session exists");
        s.last_renewed = now;
        Ok(s.ttl)
    }

    /// L3 check: the session may be deleted unless unknown or already expired.
    pub fn check_delete_session(&self, id: &str, now: MonoTime) -> Result<(), CoreError> {
        match self.session_status(id, now) {
            SessionStatus::Live | SessionStatus::Lapsed => Ok(()),
            SessionStatus::Expired => Err(CoreError::new(
                LockErrorCode::SessionExpired,
                format!("session {id} has already expired"),
            )),
            SessionStatus::Unknown => Err(session_unknown(id)),
        }
    }

    /// L3 apply: forgets the session and frees every key it holds, at once.
    /// Returns the `(key, token)` pairs released.
    pub fn apply_delete_session(&mut self, id: &str) -> Vec<(String, u64)> {
        self.sessions.remove(id);
        let mut released = Vec::new();
        for (key, entry) in &mut self.keys {
            if entry.grant.as_ref().is_some_and(|g| g.session_id == id) {
                let g = entry.grant.take().expect("checked");
                released.push((key.clone(), g.token));
            }
        }
        released
    }

    // ----- grants -------------------------------------------------------

    /// When `g` stops being HELD: its lease end or its session's lapse, whichever is first.
    fn held_until(&self, g: &Grant) -> MonoTime {
        match self.sessions.get(&g.session_id) {
            Some(s) => g.lease_end().min(s.lapse_at()),
            None => MonoTime::ZERO,
        }
    }

    /// When `g` becomes reassignable: lease end + grace(lease), or session
    /// lapse + grace(session ttl), whichever is first.
    fn reassignable_at(&self, g: &Grant) -> MonoTime {
        let by_lease = g
            .lease_end()
            .saturating_add(self.limits.grace.grace_for(g.lease));
        match self.sessions.get(&g.session_id) {
            Some(s) => by_lease.min(s.expire_at(&self.limits.grace)),
            None => MonoTime::ZERO,
        }
    }

    /// A grant's state at `now`, and how long until that state ends.
    fn grant_state(&self, g: &Grant, now: MonoTime) -> (LockState, Duration) {
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

    /// L4 check: decides an acquire and marks the key pending while the store
    /// issues the token. Call [`finish_acquire`](Self::finish_acquire) or
    /// [`abort_acquire`](Self::abort_acquire) next.
    pub fn begin_acquire(
        &mut self,
        key: &str,
        session_id: &str,
        requested_ms: Option<u64>,
        now: MonoTime,
    ) -> Result<AcquirePlan, CoreError> {
        self.require_live(session_id, now)?;
        if let Some(entry) = self.keys.get(key) {
            if entry.pending {
                return Err(lock_held(key, PENDING_RETRY_MS, "being granted"));
            }
            if let Some(g) = &entry.grant {
                match self.grant_state(g, now) {
                    (LockState::Free, _) => {}
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
            lease: self.limits.clamp(requested_ms, self.limits.default_ttl),
        })
    }

    /// L4 apply: records the grant the store persisted with `token`, leased
    /// from `started` (the request's receipt). Fails if the session vanished
    /// meanwhile; the caller then clears the grant from the store.
    pub fn finish_acquire(
        &mut self,
        key: &str,
        session_id: &str,
        token: u64,
        plan: &AcquirePlan,
        started: MonoTime,
    ) -> Result<(), CoreError> {
        let session_alive = self.sessions.contains_key(session_id);
        let entry = self.keys.entry(key.to_string()).or_default();
        entry.pending = false;
        entry.last_token = entry.last_token.max(token);
        if !session_alive {
            entry.grant = None;
            return Err(session_unknown(session_id));
        }
        entry.grant = Some(Grant {
            token,
            session_id: session_id.to_string(),
            lease: plan.lease,
            started,
        });
        Ok(())
    }

    /// L4 failure: the store did not issue a token; nothing changed.
    pub fn abort_acquire(&mut self, key: &str) {
        if let Some(e) = self.keys.get_mut(key) {
            e.pending = false;
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
                return Err(CoreError::new(
                    LockErrorCode::SessionExpired,
                    format!("session {session_id} has expired; cannot {verb} {key}"),
                ));
            }
            SessionStatus::Unknown => return Err(session_unknown(session_id)),
        }
        let lost = |why: &str| {
            CoreError::new(
                LockErrorCode::LockLost,
                format!(
                    "cannot {verb} {key} with token {token}: {why}; the grant is gone for good"
                ),
            )
        };
        let g = self
            .keys
            .get(key)
            .and_then(|e| e.grant.as_ref())
            .ok_or_else(|| lost("no current grant"))?;
        if g.token != token {
            return Err(lost(&format!("the current token is {}", g.token)));
        }
        if g.session_id != session_id {
            return Err(lost("another session holds it"));
        }
        if now.has_reached(self.held_until(g)) {
            return Err(lost("its lease already ended on the server"));
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

    /// The lease the store has for this grant now, to know whether a renew must persist.
    pub fn current_lease(&self, key: &str, token: u64) -> Option<Duration> {
        let g = self.keys.get(key)?.grant.as_ref()?;
        (g.token == token).then_some(g.lease)
    }

    /// L5 apply: restarts the lease from `now` (same token). Returns false if
    /// the grant changed since the check.
    pub fn apply_renew(&mut self, key: &str, token: u64, lease: Duration, now: MonoTime) -> bool {
        match self.keys.get_mut(key).and_then(|e| e.grant.as_mut()) {
            Some(g) if g.token == token => {
                g.lease = lease;
                g.started = now;
                true
            }
            _ => false,
        }
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
    /// reassignable at once.
    pub fn apply_release(&mut self, key: &str, token: u64) -> bool {
        match self.keys.get_mut(key) {
            Some(e) if e.grant.as_ref().is_some_and(|g| g.token == token) => {
                e.grant = None;
                true
            }
            _ => false,
        }
    }

    /// L8 check: the token a revoke would end (HELD or GRACE), or `None` if
    /// nothing is held. Unknown keys are LOCK_UNKNOWN.
    pub fn check_revoke(&self, key: &str, now: MonoTime) -> Result<Option<u64>, CoreError> {
        let entry = self.keys.get(key).ok_or_else(|| lock_unknown(key))?;
        Ok(entry
            .grant
            .as_ref()
            .and_then(|g| (self.grant_state(g, now).0 != LockState::Free).then_some(g.token)))
    }

    /// L7: the key's state at `now`.
    pub fn info(&self, key: &str, now: MonoTime) -> Result<LockInfo, CoreError> {
        let entry = self.keys.get(key).ok_or_else(|| lock_unknown(key))?;
        let mut info = LockInfo {
            key: key.to_string(),
            state: LockState::Free,
            token: entry.last_token,
            owner_id: None,
            remaining_ms: None,
        };
        if let Some(g) = &entry.grant {
            let (state, left) = self.grant_state(g, now);
            if state != LockState::Free {
                info.state = state;
                info.owner_id = self.sessions.get(&g.session_id).map(|s| s.owner_id.clone());
                info.remaining_ms = Some(ceil_ms(left));
            }
        }
        Ok(info)
    }

    /// Live sessions and HELD keys at `now`, for the gauges.
    pub fn gauges(&self, now: MonoTime) -> (u64, u64) {
        let live = self
            .sessions
            .values()
            .filter(|s| !now.has_reached(s.lapse_at()))
            .count() as u64;
        let held = self
            .keys
            .values()
            .filter_map(|e| e.grant.as_ref())
            .filter(|g| self.grant_state(g, now).0 == LockState::Held)
            .count() as u64;
        (live, held)
    }

    /// Removes what has run out by `now`: sessions past `ttl + grace` (their
    /// grants with them) and grants that reached FREE without a release.
    pub fn sweep(&mut self, now: MonoTime) -> Swept {
        let mut out = Swept::default();
        let grace = self.limits.grace;
        let dead: Vec<String> = self
            .sessions
            .values()
            .filter(|s| now.has_reached(s.expire_at(&grace)))
            .map(|s| s.id.clone())
            .collect();
        let mut lapsed_grants = Vec::new();
        for (key, entry) in &self.keys {
            if let Some(g) = &entry.grant
                && self.grant_state(g, now).0 == LockState::Free
            {
                lapsed_grants.push((key.clone(), g.token));
            }
        }
        for (key, token) in lapsed_grants {
            self.apply_release(&key, token);
            out.expired_grants.push((key, token));
        }
        for id in dead {
            self.sessions.remove(&id);
            self.expired.insert(id.clone(), now);
            out.expired_sessions.push(id);
        }
        self.expired
            .retain(|_, at| !now.has_reached(at.saturating_add(TOMBSTONE_KEEP)));
        out
    }

    /// A canonical text of the whole table (sorted), so tests can assert that a
    /// refused request changed nothing.
    pub fn digest(&self) -> String {
        let mut sessions: Vec<_> = self.sessions.values().map(|s| format!("{s:?}")).collect();
        sessions.sort();
        let mut expired: Vec<_> = self.expired.iter().map(|e| format!("{e:?}")).collect();
        expired.sort();
        let mut keys: Vec<_> = self.keys.iter().map(|k| format!("{k:?}")).collect();
        keys.sort();
        format!("sessions={sessions:?}\nexpired={expired:?}\nkeys={keys:?}")
    }

    // ----- recovery -----------------------------------------------------

    /// Restores a persisted session at a takeover: its TTL restarts from `now` (C1 §6).
    pub fn restore_session(&mut self, id: String, owner_id: String, ttl: Duration, now: MonoTime) {
        self.insert_session(id, owner_id, ttl, now);
    }

    /// Restores a persisted key: its last token and, if held, the grant with a
    /// lease restarted from `now` — only ever extending what a client was promised.
    pub fn restore_key(
        &mut self,
        key: String,
        last_token: u64,
        grant: Option<(u64, String, Duration)>,
        now: MonoTime,
    ) {
        let grant = grant.and_then(|(token, session_id, lease)| {
            self.sessions.contains_key(&session_id).then_some(Grant {
                token,
                session_id,
                lease,
                started: now,
            })
        });
        self.keys.insert(
            key,
            KeyEntry {
                last_token,
                grant,
                pending: false,
            },
        );
    }
}

fn session_unknown(id: &str) -> CoreError {
    CoreError::new(
        LockErrorCode::SessionUnknown,
        format!(
            "no session {id} (never opened, or deleted); open a session with POST /v1/sessions"
        ),
    )
}

fn lock_unknown(key: &str) -> CoreError {
    CoreError::new(
        LockErrorCode::LockUnknown,
        format!("lock {key} has never been granted"),
    )
}

fn lock_held(key: &str, retry_after_ms: u64, what: &str) -> CoreError {
    CoreError {
        code: LockErrorCode::LockHeld,
        message: format!("lock {key} is {what}; retry after {retry_after_ms} ms"),
        retry_after_ms: Some(retry_after_ms),
    }
}

/// Whole milliseconds, rounded up.
pub fn ceil_ms(d: Duration) -> u64 {
    u64::try_from(d.as_nanos().div_ceil(1_000_000)).unwrap_or(u64::MAX)
}
