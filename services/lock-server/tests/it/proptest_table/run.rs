//! [`Run`]: one sequence's table under test, its clock, the store stand-in
//! and the model, and each operation driven the way the service drives it
//! (decide, persist, apply), with the checks on its own outcome. The
//! invariants checked after every step are in
//! [`invariants`](super::invariants).

use std::collections::HashMap;
use std::time::Duration;

use fencepost_api::clock::{Clock, FakeClock, MonoTime};
use fencepost_api::lock::LockErrorCode;
use lock_server::core::{AcquirePlan, LockTable};

use super::model::{FakeStore, MGrant, MSession, Model};
use super::ops::{KEYS, Op, Sess, Tok, caps, limits};

/// An acquire whose store write is in flight.
pub(super) struct InFlight {
    pub(super) key: String,
    pub(super) session: String,
    pub(super) plan: AcquirePlan,
    pub(super) receipt: MonoTime,
}

/// One run: the table under test, its clock, the store stand-in and the model.
pub(super) struct Run {
    pub(super) table: LockTable,
    pub(super) clock: FakeClock,
    pub(super) store: FakeStore,
    pub(super) model: Model,
    pub(super) in_flight: Vec<InFlight>,
    /// Outcome labels, for the coverage check.
    pub(super) seen: Vec<&'static str>,
}

pub(super) type Check = Result<(), String>;

pub(super) fn fail(why: impl Into<String>) -> Check {
    Err(why.into())
}

impl Run {
    pub(super) fn new() -> Self {
        Run {
            table: LockTable::with_caps(limits(), caps()),
            clock: FakeClock::new(MonoTime::from_nanos(1_000_000_000)),
            store: FakeStore::default(),
            model: Model {
                limits: limits(),
                sessions: Vec::new(),
                grants: HashMap::new(),
                last_token: HashMap::new(),
            },
            in_flight: Vec::new(),
            seen: Vec::new(),
        }
    }

    pub(super) fn sess_id(&self, s: &Sess, key: &str) -> String {
        let latest = || {
            self.model
                .sessions
                .last()
                .map_or_else(|| "nobody".to_string(), |s| s.id.clone())
        };
        match s {
            Sess::Pool(i) if !self.model.sessions.is_empty() => self.model.sessions
                [i % self.model.sessions.len()]
            .id
            .clone(),
            Sess::Holder => self
                .model
                .grants
                .get(key)
                .map_or_else(latest, |g| g.session.clone()),
            Sess::Pool(_) => latest(),
            Sess::Unknown => "f".repeat(32),
        }
    }

    pub(super) fn token(&self, t: &Tok, key: &str) -> u64 {
        let right = self
            .model
            .grants
            .get(key)
            .map(|g| g.token)
            .or_else(|| self.model.last_token.get(key).copied())
            .unwrap_or(1);
        match t {
            Tok::Right => right,
            Tok::Off(d) => right.wrapping_add_signed(i64::from(*d)),
        }
    }

    /// A refusal (or a store failure) must leave the table exactly as it was.
    pub(super) fn refused(&mut self, before: &str, label: &'static str, what: &str) -> Check {
        self.seen.push(label);
        let after = self.table.digest();
        if after != before {
            return fail(format!(
                "a refused operation ({what}) changed the table:\n  before: {before}\n  after:  {after}"
            ));
        }
        Ok(())
    }

    /// Checks a new grant of `key` to `session` with `token`, decided at `receipt`, and records it.
    pub(super) fn granted(
        &mut self,
        key: &str,
        session: &str,
        token: u64,
        lease: Duration,
        receipt: MonoTime,
    ) -> Check {
        self.seen.push("grant");
        let last = self.model.last_token.get(key).copied().unwrap_or(0);
        if token <= last {
            return fail(format!(
                "{key}: granted token {token}, not above the last token {last}"
            ));
        }
        if !self.model.live(session, receipt) {
            return fail(format!(
                "{key}: granted to session {session}, which its client no longer believes live"
            ));
        }
        if let Some(prev) = self.model.grants.get(key) {
            let free_at = self.model.reassignable_at(prev);
            if !receipt.has_reached(free_at) {
                return fail(format!(
                    "{key}: token {token} granted to {session} at {receipt:?} while token {} of {} \
                     may still be believed (reassignable at {free_at:?}): two grants of one key believed at once",
                    prev.token, prev.session
                ));
            }
        }
        self.model.last_token.insert(key.to_string(), token);
        self.model.grants.insert(
            key.to_string(),
            MGrant {
                session: session.to_string(),
                token,
                promises: vec![(receipt.saturating_add(lease), lease)],
            },
        );
        Ok(())
    }

    /// Checks an accepted renew or re-acquire of the model's grant and records its promise.
    pub(super) fn extended(
        &mut self,
        key: &str,
        session: &str,
        token: u64,
        lease: Duration,
        now: MonoTime,
        what: &'static str,
    ) -> Check {
        let Some(g) = self.model.grants.get(key).cloned() else {
            return fail(format!("{key}: {what} accepted with no grant"));
        };
        if g.token != token || g.session != session {
            return fail(format!(
                "{key}: {what} by {session} with token {token} accepted; the grant is {} of {}",
                g.token, g.session
            ));
        }
        let held = self.model.held_until(&g);
        if now.has_reached(held) {
            return fail(format!(
                "{key}: {what} accepted at {now:?}, after the holder's belief ended at {held:?}"
            ));
        }
        // As the service does: persist a longer lease first, then apply.
        if let Some(longest) = self.table.lease_to_persist(key, token, lease) {
            self.store.set_lease(key, token, longest);
        }
        if !self.table.apply_renew(key, token, lease, now) {
            return fail(format!("{key}: a checked {what} did not apply"));
        }
        let g = self.model.grants.get_mut(key).expect("checked");
        g.promises.push((now.saturating_add(lease), lease));
        self.seen.push(what);
        Ok(())
    }

    pub(super) fn step(&mut self, op: &Op) -> Check {
        let now = self.clock.now();
        let before = self.table.digest();
        match op {
            Op::Open { ttl_ms } => match self.table.check_create_session() {
                Ok(()) => {
                    let ttl = self.table.session_ttl_for(*ttl_ms);
                    let id = format!("s{:02}", self.model.sessions.len());
                    self.store.sessions.insert(id.clone(), ttl);
                    self.table
                        .insert_session(id.clone(), "owner".into(), None, ttl, now);
                    self.model.sessions.push(MSession {
                        id,
                        ttl,
                        renewed: now,
                        gone: false,
                    });
                    self.seen.push("open");
                }
                Err(e) => {
                    if self.table.sizes().sessions < caps().max_sessions {
                        return fail(format!("L1 refused below the session cap: {e}"));
                    }
                    self.refused(&before, "open refused at the cap", "L1")?;
                }
            },
            Op::Heartbeat { sess } => {
                let id = self.sess_id(sess, "");
                let live = self.model.live(&id, now);
                match self.table.heartbeat(&id, now) {
                    Ok(ttl) => {
                        if !live {
                            return fail(format!("heartbeat accepted for {id}, which is not live"));
                        }
                        let s = self.model.session_mut(&id).expect("live");
                        if ttl != s.ttl {
                            return fail(format!(
                                "heartbeat granted {ttl:?}, session has {:?}",
                                s.ttl
                            ));
                        }
                        s.renewed = now;
                        self.seen.push("heartbeat");
                    }
                    Err(e) => {
                        if live {
                            return fail(format!("heartbeat of live session {id} refused: {e}"));
                        }
                        self.refused(&before, "heartbeat refused", "L2")?;
                    }
                }
            }
            Op::Delete { sess } => {
                let id = self.sess_id(sess, "");
                match self.table.check_delete_session(&id, now) {
                    Ok(_) => {
                        self.store.delete_session(&id);
                        let mut released = self.table.apply_delete_session(&id);
                        let Some(s) = self.model.session_mut(&id) else {
                            return fail(format!("deleted {id}, which was never opened"));
                        };
                        s.gone = true;
                        let mut expected: Vec<(String, u64)> = self
                            .model
                            .grants
                            .iter()
                            .filter(|(_, g)| g.session == id)
                            .map(|(k, g)| (k.clone(), g.token))
                            .collect();
                        self.model.grants.retain(|_, g| g.session != id);
                        released.sort();
                        expected.sort();
                        // The table may have let go of grants that ran out; never of others.
                        if released.iter().any(|r| !expected.contains(r)) {
                            return fail(format!(
                                "L3 of {id} released {released:?}; its grants were {expected:?}"
                            ));
                        }
                        self.seen.push("delete");
                    }
                    Err(_) => self.refused(&before, "delete refused", "L3")?,
                }
            }
            Op::Acquire {
                key,
                sess,
                ttl_ms,
                store_fails,
            } => self.acquire(op, KEYS[*key], sess, *ttl_ms, *store_fails, now, &before)?,
            Op::Begin { key, sess, ttl_ms } => {
                self.acquire(op, KEYS[*key], sess, *ttl_ms, false, now, &before)?
            }
            Op::Finish { slot, store_fails } => {
                if !self.in_flight.is_empty() {
                    let f = self.in_flight.remove(slot % self.in_flight.len());
                    if *store_fails {
                        self.table.abort_acquire(&f.key);
                        self.seen.push("finish store failed");
                    } else {
                        self.finish(f)?;
                    }
                }
            }
            Op::Renew {
                key,
                sess,
                tok,
                ttl_ms,
            } => {
                let key = KEYS[*key];
                let id = self.sess_id(sess, key);
                let token = self.token(tok, key);
                match self.table.check_renew(key, &id, token, *ttl_ms, now) {
                    Ok(lease) => self.extended(key, &id, token, lease, now, "renew")?,
                    Err(_) => self.refused(&before, "renew refused", "L5")?,
                }
            }
            Op::Release { key, sess, tok } => {
                let key = KEYS[*key];
                let id = self.sess_id(sess, key);
                let token = self.token(tok, key);
                match self.table.check_release(key, &id, token, now) {
                    Ok(()) => {
                        let g = self.model.grants.get(key);
                        if !g.is_some_and(|g| g.token == token && g.session == id) {
                            return fail(format!(
                                "{key}: release by {id} with token {token} accepted, not the grant"
                            ));
                        }
                        self.store.clear(key, token);
                        if !self.table.apply_release(key, token) {
                            return fail(format!("{key}: a checked release did not apply"));
                        }
                        self.model.grants.remove(key);
                        self.seen.push("release");
                    }
                    Err(_) => self.refused(&before, "release refused", "L6")?,
                }
            }
            Op::Revoke { key } => {
                let key = KEYS[*key];
                match self.table.check_revoke(key, now) {
                    Ok(Some(token)) => {
                        if self.model.grants.get(key).map(|g| g.token) != Some(token) {
                            return fail(format!(
                                "{key}: revoke would end token {token}, not the grant"
                            ));
                        }
                        self.store.clear(key, token);
                        self.table.apply_release(key, token);
                        self.model.grants.remove(key);
                        self.seen.push("revoke");
                    }
                    Ok(None) => self.refused(&before, "revoke nothing", "L8")?,
                    Err(_) => self.refused(&before, "revoke refused", "L8")?,
                }
            }
            Op::Advance { ms } => self.clock.advance(Duration::from_millis(*ms)),
            Op::Sweep => self.sweep(now)?,
            Op::Restart => self.restart(now),
        }
        self.check_all(matches!(op, Op::Sweep))
    }

    /// L4 (or its decision only, for [`Op::Begin`](super::ops::Op::Begin)).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn acquire(
        &mut self,
        op: &Op,
        key: &str,
        sess: &Sess,
        ttl_ms: Option<u64>,
        store_fails: bool,
        now: MonoTime,
        before: &str,
    ) -> Check {
        let id = self.sess_id(sess, key);
        let plan = match self.table.begin_acquire(key, &id, ttl_ms, now) {
            Ok(plan) => plan,
            Err(e) => {
                let label = match e.code {
                    LockErrorCode::LockHeld => "acquire LOCK_HELD",
                    _ => "acquire refused",
                };
                return self.refused(before, label, "L4");
            }
        };
        if let Some(token) = plan.reacquire {
            if self.table.digest() != before {
                return fail(format!("{key}: a re-acquire's decision changed the table"));
            }
            return self.extended(key, &id, token, plan.lease, now, "reacquire");
        }
        let f = InFlight {
            key: key.to_string(),
            session: id,
            plan,
            receipt: now,
        };
        if matches!(op, Op::Begin { .. }) {
            self.seen.push("begin");
            self.in_flight.push(f);
            return Ok(());
        }
        if store_fails {
            // A 503: the store issued nothing; the table must be as before.
            self.table.abort_acquire(key);
            return self.refused(before, "acquire store failed", "L4 503");
        }
        self.finish(f)
    }

    /// The store write of an acquire returns: issue the token and apply it.
    pub(super) fn finish(&mut self, f: InFlight) -> Check {
        let token = self.store.grant(&f.key, &f.session, f.plan.lease);
        match self
            .table
            .finish_acquire(&f.key, &f.session, token, &f.plan, f.receipt)
        {
            Ok(()) => self.granted(&f.key, &f.session, token, f.plan.lease, f.receipt),
            Err(e) => {
                // The session went away while the write was in flight: no grant.
                if self.model.session(&f.session).is_some_and(|s| !s.gone) {
                    return fail(format!(
                        "{}: finish refused for a session that still exists: {e}",
                        f.key
                    ));
                }
                self.store.clear(&f.key, token);
                // The token was issued and is spent.
                self.model.last_token.insert(f.key.clone(), token);
                self.seen.push("finish refused");
                Ok(())
            }
        }
    }

    /// The sweeper: due, persist, apply, as the service does.
    pub(super) fn sweep(&mut self, now: MonoTime) -> Check {
        let before = self.table.digest();
        let swept = self.table.due(now);
        if self.table.digest() != before {
            return fail("due() changed the table");
        }
        // A session goes with all its grants, so the last one may overshoot by those.
        if swept.expired_sessions.len() + swept.expired_grants.len()
            > caps().sweep_batch + KEYS.len()
        {
            return fail(format!("a sweep went past its batch: {swept:?}"));
        }
        for (key, token) in &swept.expired_grants {
            self.store.clear(key, *token);
        }
        for id in &swept.expired_sessions {
            self.store.delete_session(id);
        }
        let late = self.table.apply_swept(&swept, now);
        if !late.is_empty() {
            return fail(format!("a sweep released unlisted grants {late:?}"));
        }
        for (key, token) in &swept.expired_grants {
            let Some(g) = self.model.grants.get(key) else {
                return fail(format!(
                    "sweep expired {key} token {token}, which has no grant"
                ));
            };
            if g.token != *token {
                return fail(format!(
                    "sweep expired {key} token {token}, grant is {}",
                    g.token
                ));
            }
            let free_at = self.model.reassignable_at(g);
            if !now.has_reached(free_at) {
                return fail(format!(
                    "sweep expired {key} token {token} at {now:?}, before {free_at:?}"
                ));
            }
            self.model.grants.remove(key);
            self.seen.push("sweep grant");
        }
        for id in &swept.expired_sessions {
            let grace = self.model.limits.grace;
            let Some(s) = self.model.session_mut(id) else {
                return fail(format!("sweep expired {id}, never opened"));
            };
            let end = s.lapse().saturating_add(grace.grace_for(s.ttl));
            if !now.has_reached(end) {
                return fail(format!("sweep expired {id} at {now:?}, before {end:?}"));
            }
            s.gone = true;
            self.model.grants.retain(|_, g| g.session != *id);
            self.seen.push("sweep session");
        }
        Ok(())
    }

    /// A new process: restores sessions and held grants from the store, every
    /// TTL and lease restarted from `now`; writes in flight are lost.
    pub(super) fn restart(&mut self, now: MonoTime) {
        self.in_flight.clear();
        let mut table = LockTable::with_caps(limits(), caps());
        for (id, ttl) in &self.store.sessions {
            table.restore_session(id.clone(), "owner".into(), None, *ttl, now);
        }
        let mut orphans = Vec::new();
        for (key, (token, session, lease)) in &self.store.holders {
            if !table.restore_grant(key.clone(), *token, session.clone(), *lease, now) {
                orphans.push((key.clone(), *token));
            }
        }
        for (key, token) in orphans {
            self.store.clear(&key, token);
        }
        self.table = table;
        // The new server restarts every session's TTL and every grant's lease
        // from its takeover (C1 §6): it extends, in the server's favour, what
        // the model allows; the earlier promises stay, so a restore that ended
        // a grant before any of them would still be caught.
        for s in self.model.sessions.iter_mut() {
            if self.store.sessions.contains_key(&s.id) {
                s.renewed = now;
            }
        }
        for (key, g) in self.model.grants.iter_mut() {
            if let Some((token, _, lease)) = self.store.holders.get(key)
                && *token == g.token
            {
                g.promises.push((now.saturating_add(*lease), *lease));
            }
        }
        self.seen.push("restart");
    }
}
