//! The lock service: the [`LockTable`] (pure decisions) wired to a
//! [`LockStore`] (durability) and a [`Clock`] (time). Every operation reads
//! the clock once, on entry — the instant the request was received — and
//! follows the same order: decide under the table mutex, release it, persist
//! through the store, then apply under the mutex. The mutex is never held
//! across an await, and a store failure leaves the table untouched.
//!
//! **Cancel safety (C1 §8).** The persist-then-apply half of every mutation
//! (L1, L3, L4, L5 when the lease grows, L6, L8, the sweeper's clears) runs on
//! its own task ([`detached`]); the request only awaits it. When a client gives
//! up and the HTTP server drops its handler, the task still runs to its end:
//! the store's write is always followed by the matching change in memory (or,
//! on a store failure, by the undo of the decision), so memory and store agree
//! and no key is left pending. Operations that write nothing (L2, a renew that
//! does not lengthen the lease) decide and apply under one mutex hold.
//!
//! **Group commit.** The durable stores sit behind
//! [`crate::store::group::GroupCommit`]: the writes of concurrent requests are
//! committed in one transaction (one fsync), and each request's task is
//! answered with its own write's outcome once that transaction committed. The
//! order above is unchanged: a batch that fails is answered, write by write,
//! with the outcome of a retry alone, and every failed write is undone here.

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use fencepost_api::clock::{Clock, MonoTime, wall_clock_rfc3339_after};
use fencepost_api::grace::GracePolicy;
use fencepost_api::lock::{
    LeaseGranted, LockErrorCode, LockInfo, LockOutcome, LockState, ServerConfigView, SessionGranted,
};

use crate::core::{Caps, CoreError, Limits, LockTable, Swept, ceil_ms};
use crate::leader::{LeaderConfig, LeaderState, Role};
use crate::store::{Fence, LockStore, SessionRecord, StoreError};

/// Why an operation failed: a refusal (a C1 code) or the store.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// The request was refused; nothing changed.
    #[error(transparent)]
    Refused(#[from] CoreError),
    /// The store failed; nothing changed. Retry later.
    #[error("the lock store is unavailable: {0}")]
    Store(#[from] StoreError),
    /// This replica does not serve (C1 §6): a standby, a leader whose leader
    /// lease may have run out, or one deposed mid-request. Nothing changed.
    #[error("this replica is not the leader")]
    NotLeader {
        /// The serving leader's base URL, when known.
        leader: Option<String>,
    },
}

/// The C5 counters the server keeps (gauges are computed at scrape time).
#[derive(Debug, Default)]
pub struct Counters {
    /// `lock.grants`: new grants (L4 with a fresh token).
    pub grants: AtomicU64,
    /// Re-acquires by the holding session (L4 answered with its current grant).
    pub reacquires: AtomicU64,
    /// `lock.renewals`
    pub renewals: AtomicU64,
    /// `lock.releases` (L6, L3 and L8)
    pub releases: AtomicU64,
    /// `lock.expired{kind="session"}`
    pub expired_sessions: AtomicU64,
    /// `lock.expired{kind="lease"}`
    pub expired_leases: AtomicU64,
    /// Heartbeats answered (not in C5; useful next to the bench's count).
    pub heartbeats: AtomicU64,
}

fn bump(counter: &AtomicU64, n: usize) {
    counter.fetch_add(n as u64, Ordering::Relaxed);
}

/// A serving lock-server's state. Cheap to share behind an `Arc`.
pub struct LockService {
    /// Every expiry decision reads this clock, and only this clock.
    clock: Arc<dyn Clock>,
    /// Sessions, grants and tokens in memory; the mutex is never held across an await.
    table: Mutex<Table>,
    /// The election's view (C1 §6); `Role::Single` on memory and SQLite.
    leadership: Mutex<LeaderState>,
    /// How this replica takes part in the election; `None` when single-node.
    leader_cfg: Option<LeaderConfig>,
    /// Durable tokens, holders and sessions.
    store: Arc<dyn LockStore>,
    /// C5 counters.
    pub counters: Counters,
}

/// The lock table and the takeover it was loaded at.
pub(crate) struct Table {
    table: LockTable,
    /// [`LeaderState::generation`] of the takeover that loaded `table`.
    generation: u64,
}

impl std::ops::Deref for Table {
    type Target = LockTable;
    fn deref(&self) -> &LockTable {
        &self.table
    }
}

impl std::ops::DerefMut for Table {
    fn deref_mut(&mut self) -> &mut LockTable {
        &mut self.table
    }
}

/// Runs a mutation's persist-and-apply half on its own task and waits for it.
/// If the caller is dropped (the client went away), the task still runs to its
/// end, so a store write is always followed by the matching change in memory.
async fn detached<T: Send + 'static>(
    op: impl Future<Output = Result<T, ServiceError>> + Send + 'static,
) -> Result<T, ServiceError> {
    match tokio::spawn(op).await {
        Ok(result) => result,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(e) => Err(StoreError::Task(e).into()),
    }
}

/// The reply to an L4 or L5 that granted `lease` with `token`.
fn lease_granted(key: &str, token: u64, lease: Duration) -> LeaseGranted {
    LeaseGranted {
        key: key.to_string(),
        token,
        lease_ms: lease.as_millis() as u64,
        expires_at: wall_clock_rfc3339_after(lease),
    }
}

impl LockService {
    /// Builds the service with the default [`Caps`]; see [`start_with_caps`](Self::start_with_caps).
    pub async fn start(
        limits: Limits,
        store: Arc<dyn LockStore>,
        clock: Arc<dyn Clock>,
    ) -> Result<Arc<Self>, StoreError> {
        Self::start_with_caps(limits, Caps::default(), store, clock).await
    }

    /// Builds the service and restores what the store holds: every session's
    /// TTL and every held grant's lease restart from now (C1 §6: a new server
    /// only ever extends what a client was promised). Only held keys are read;
    /// FREE keys stay in the store until used. A holder row whose session is
    /// gone is cleared, so memory and store agree from the start.
    pub async fn start_with_caps(
        limits: Limits,
        caps: Caps,
        store: Arc<dyn LockStore>,
        clock: Arc<dyn Clock>,
    ) -> Result<Arc<Self>, StoreError> {
        if !store.durable() {
            tracing::warn!(
                store = store.kind(),
                "lock.store=memory: is not durable: tokens start again at 1 after a restart, so a \
                 paused holder's old token can outrank new holders at the fences; use sqlite: or postgres:// \
                 for anything but tests"
            );
        }
        let snapshot = store.load_live().await?;
        let now = clock.now();
        let mut table = LockTable::with_caps(limits, caps);
        for s in snapshot.sessions {
            table.restore_session(s.id, s.owner_id, Duration::from_millis(s.ttl_ms), now);
        }
        let mut orphans = Vec::new();
        for k in snapshot.keys {
            let Some(h) = k.holder else { continue };
            let lease = Duration::from_millis(h.lease_ms);
            if !table.restore_grant(k.key.clone(), h.token, h.session_id, lease, now) {
                orphans.push((k.key, h.token));
            }
        }
        store.clear_grants(&orphans).await?;
        Ok(Arc::new(LockService {
            clock,
            table: Mutex::new(Table {
                table,
                generation: 0,
            }),
            leadership: Mutex::new(LeaderState::new(Role::Single)),
            leader_cfg: None,
            store,
            counters: Counters::default(),
        }))
    }

    /// Builds a replica over a shared (PostgreSQL) store: it starts as a
    /// standby, loads nothing and writes nothing; [`elect_once`](Self::elect_once)
    /// (run by [`crate::run`]) takes the leader row when it may, then loads
    /// the store. A single-node store starts as [`start_with_caps`](Self::start_with_caps) does.
    pub async fn start_replica(
        limits: Limits,
        caps: Caps,
        store: Arc<dyn LockStore>,
        clock: Arc<dyn Clock>,
        leader: LeaderConfig,
    ) -> Result<Arc<Self>, StoreError> {
        if !store.replicated() {
            return Self::start_with_caps(limits, caps, store, clock).await;
        }
        store.set_fence(Fence::Standby);
        Ok(Arc::new(LockService {
            clock,
            table: Mutex::new(Table {
                table: LockTable::with_caps(limits, caps),
                generation: 0,
            }),
            leadership: Mutex::new(LeaderState::new(Role::Standby)),
            leader_cfg: Some(leader),
            store,
            counters: Counters::default(),
        }))
    }

    pub(crate) fn table(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The table, if it is still the one loaded at takeover `generation`
    /// (else the work was decided by an earlier leadership: not applied).
    fn table_in(&self, generation: u64) -> Result<MutexGuard<'_, Table>, ServiceError> {
        let t = self.table();
        if t.generation == generation {
            Ok(t)
        } else {
            Err(ServiceError::NotLeader { leader: None })
        }
    }

    /// Installs the table a takeover loaded; returns its generation.
    pub(crate) fn replace_table(&self, table: LockTable) -> u64 {
        let mut t = self.table();
        t.table = table;
        t.generation += 1;
        t.generation
    }

    /// The election's view.
    pub(crate) fn leadership(&self) -> MutexGuard<'_, LeaderState> {
        self.leadership.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// How this replica takes part in the election (`None`: single-node).
    pub fn leader_config(&self) -> Option<&LeaderConfig> {
        self.leader_cfg.as_ref()
    }

    /// The store.
    pub(crate) fn store(&self) -> &Arc<dyn LockStore> {
        &self.store
    }

    /// This replica's role, epoch and known leader now.
    pub fn leader_state(&self) -> LeaderState {
        self.leadership().clone()
    }

    /// Refuses a request received at `now` unless this replica serves; else
    /// the generation of the table it serves from.
    fn serving(&self, now: MonoTime) -> Result<u64, ServiceError> {
        let l = self.leadership();
        if l.serves(now) {
            Ok(l.generation)
        } else {
            Err(ServiceError::NotLeader { leader: l.hint() })
        }
    }

    /// The clock (for the sweeper).
    pub fn now(&self) -> MonoTime {
        self.clock.now()
    }

    /// L1: opens a session; it is persisted before the reply.
    pub async fn create_session(
        self: &Arc<Self>,
        owner_id: &str,
        ttl_ms: Option<u64>,
    ) -> Result<SessionGranted, ServiceError> {
        let now = self.clock.now();
        let generation = self.serving(now)?;
        let ttl = {
            let t = self.table();
            t.check_create_session()?;
            t.session_ttl_for(ttl_ms)
        };
        let record = SessionRecord {
            id: uuid::Uuid::new_v4().simple().to_string(),
            owner_id: owner_id.to_string(),
            ttl_ms: ttl.as_millis() as u64,
        };
        let this = Arc::clone(self);
        let created = detached(async move {
            this.store.create_session(&record).await?;
            let SessionRecord { id, owner_id, .. } = record;
            this.table_in(generation)?
                .insert_session(id.clone(), owner_id, ttl, now);
            Ok(SessionGranted {
                session_id: id,
                ttl_ms: ttl.as_millis() as u64,
                expires_at: wall_clock_rfc3339_after(ttl),
            })
        })
        .await;
        self.fenced(created)
    }

    /// L2: restarts the session's TTL from this request's receipt. Memory only.
    pub async fn heartbeat(&self, session_id: &str) -> Result<Duration, ServiceError> {
        let now = self.clock.now();
        self.serving(now)?;
        let ttl = self.table().heartbeat(session_id, now)?;
        self.counters.heartbeats.fetch_add(1, Ordering::Relaxed);
        Ok(ttl)
    }

    /// L3: deletes the session and releases its keys at once.
    pub async fn delete_session(self: &Arc<Self>, session_id: &str) -> Result<(), ServiceError> {
        let now = self.clock.now();
        let generation = self.serving(now)?;
        let held_before = self.table().check_delete_session(session_id, now)?;
        let (this, id) = (Arc::clone(self), session_id.to_string());
        let deleted = detached(async move {
            this.store.delete_session(&id).await?;
            let released = this.table_in(generation)?.apply_delete_session(&id);
            bump(&this.counters.releases, released.len());
            // A grant that finished while the delete was being written may
            // have reached the store after it: clear those rows too.
            let late: Vec<(String, u64)> = released
                .into_iter()
                .filter(|(k, _)| !held_before.contains(k))
                .collect();
            this.clear_late(&late).await;
            tracing::debug!(
                event = "release",
                keys = held_before.len(),
                via = "session_delete"
            );
            Ok(())
        })
        .await;
        self.fenced(deleted)
    }

    /// Clears holder rows that memory already let go of (best effort: a row
    /// left behind is cleared at the next start, as an orphan).
    async fn clear_late(&self, grants: &[(String, u64)]) {
        if grants.is_empty() {
            return;
        }
        if let Err(e) = self.store.clear_grants(grants).await {
            tracing::warn!(grants = grants.len(), error = %e, "could not clear released grants from the store");
        }
    }

    /// L4: grants `key` to the session with a fresh token, persisted first. If
    /// the session already holds the key, the answer is its current grant
    /// (same token), the lease restarted from this request's receipt and never
    /// shortened (C1 §7).
    pub async fn acquire(
        self: &Arc<Self>,
        key: &str,
        session_id: &str,
        ttl_ms: Option<u64>,
    ) -> Result<LeaseGranted, ServiceError> {
        let now = self.clock.now();
        let generation = self.serving(now)?;
        let (plan, persist) = {
            let mut t = self.table();
            let plan = t.begin_acquire(key, session_id, ttl_ms, now)?;
            let persist = plan
                .reacquire
                .and_then(|token| renew_in_memory(&mut t, key, token, plan.lease, now));
            (plan, persist)
        };
        if let Some(token) = plan.reacquire {
            let granted = self
                .persist_lease(key, token, plan.lease, persist, now, generation)
                .await
                .map_err(|e| match e {
                    // Released while the longer lease was being written: the
                    // key may be free now, so this is an acquire to retry.
                    ServiceError::Refused(c) if c.code == LockErrorCode::LockLost => {
                        ServiceError::Refused(CoreError {
                            code: LockErrorCode::LockHeld,
                            message: format!(
                                "lock {key} changed while being re-acquired; retry after 1 ms"
                            ),
                            retry_after_ms: Some(1),
                        })
                    }
                    other => other,
                })?;
            bump(&self.counters.reacquires, 1);
            tracing::debug!(event = "reacquire", key, token, lease_ms = granted.lease_ms);
            return Ok(granted);
        }
        let (this, key, sid) = (Arc::clone(self), key.to_string(), session_id.to_string());
        let granted = detached(async move {
            let lease_ms = plan.lease.as_millis() as u64;
            let token = match this.store.grant(&key, &sid, lease_ms).await {
                Ok(t) => t,
                Err(e) => {
                    if let Ok(mut t) = this.table_in(generation) {
                        t.abort_acquire(&key);
                    }
                    return Err(e.into());
                }
            };
            let finished = this
                .table_in(generation)?
                .finish_acquire(&key, &sid, token, &plan, now);
            if let Err(refused) = finished {
                // The session went away while the grant was being persisted.
                this.clear_late(&[(key.clone(), token)]).await;
                return Err(refused.into());
            }
            bump(&this.counters.grants, 1);
            tracing::debug!(event = "grant", key, token, lease_ms);
            Ok(lease_granted(&key, token, plan.lease))
        })
        .await;
        self.fenced(granted)
    }

    /// L5: the grant's lease ends at `max(its end, receipt + lease)`; same token.
    pub async fn renew(
        self: &Arc<Self>,
        key: &str,
        session_id: &str,
        token: u64,
        ttl_ms: Option<u64>,
    ) -> Result<LeaseGranted, ServiceError> {
        let now = self.clock.now();
        let generation = self.serving(now)?;
        let (lease, persist) = {
            let mut t = self.table();
            let lease = t.check_renew(key, session_id, token, ttl_ms, now)?;
            (lease, renew_in_memory(&mut t, key, token, lease, now))
        };
        let granted = self
            .persist_lease(key, token, lease, persist, now, generation)
            .await?;
        bump(&self.counters.renewals, 1);
        tracing::debug!(event = "renew", key, token, lease_ms = granted.lease_ms);
        Ok(granted)
    }

    /// The second half of a renew or re-acquire: when the lease grew past every
    /// earlier one (`persist`), the store records it first, then memory applies
    /// it; otherwise memory already has it.
    async fn persist_lease(
        self: &Arc<Self>,
        key: &str,
        token: u64,
        lease: Duration,
        persist: Option<Duration>,
        now: MonoTime,
        generation: u64,
    ) -> Result<LeaseGranted, ServiceError> {
        let Some(longest) = persist else {
            return Ok(lease_granted(key, token, lease));
        };
        let (this, key) = (Arc::clone(self), key.to_string());
        let granted = detached(async move {
            this.store
                .set_lease(&key, token, longest.as_millis() as u64)
                .await?;
            if !this
                .table_in(generation)?
                .apply_renew(&key, token, lease, now)
            {
                return Err(CoreError {
                    code: LockErrorCode::LockLost,
                    message: format!(
                        "cannot renew {key} with token {token}: released meanwhile; the grant is gone for good"
                    ),
                    retry_after_ms: None,
                }
                .into());
            }
            Ok(lease_granted(&key, token, lease))
        })
        .await;
        self.fenced(granted)
    }

    /// L6: releases the grant; the key is reassignable at once.
    pub async fn release(
        self: &Arc<Self>,
        key: &str,
        session_id: &str,
        token: u64,
    ) -> Result<(), ServiceError> {
        let now = self.clock.now();
        let generation = self.serving(now)?;
        self.table().check_release(key, session_id, token, now)?;
        let (this, key) = (Arc::clone(self), key.to_string());
        let released = detached(async move {
            this.store.clear_grant(&key, token).await?;
            if this.table_in(generation)?.apply_release(&key, token) {
                bump(&this.counters.releases, 1);
                tracing::debug!(event = "release", key, token);
            }
            Ok(())
        })
        .await;
        self.fenced(released)
    }

    /// L7: the key's state now. A key memory holds nothing for is FREE with the
    /// store's last token, or LOCK_UNKNOWN if the store never granted it.
    pub async fn info(&self, key: &str) -> Result<LockInfo, ServiceError> {
        let now = self.clock.now();
        self.serving(now)?;
        let refused = match self.table().info(key, now) {
            Ok(info) => return Ok(info),
            Err(e) => e,
        };
        if refused.code != LockErrorCode::LockUnknown {
            return Err(refused.into());
        }
        match self.store.last_token(key).await? {
            Some(token) => Ok(LockInfo {
                key: key.to_string(),
                state: LockState::Free,
                token,
                owner_id: None,
                remaining_ms: None,
            }),
            None => Err(refused.into()),
        }
    }

    /// L8: ends the current grant (HELD or GRACE) at once; the key is FREE.
    pub async fn revoke(
        self: &Arc<Self>,
        key: &str,
        reason: &str,
    ) -> Result<LockOutcome, ServiceError> {
        let now = self.clock.now();
        let generation = self.serving(now)?;
        let checked = self.table().check_revoke(key, now);
        let victim = match checked {
            Ok(v) => v,
            Err(e) if e.code == LockErrorCode::LockUnknown => {
                // Not in memory: FREE if the store knows it, else never granted.
                self.store.last_token(key).await?.ok_or(e)?;
                None
            }
            Err(e) => return Err(e.into()),
        };
        if let Some(token) = victim {
            let (this, k) = (Arc::clone(self), key.to_string());
            let revoked = detached(async move {
                this.store.clear_grant(&k, token).await?;
                if this.table_in(generation)?.apply_release(&k, token) {
                    bump(&this.counters.releases, 1);
                }
                Ok(())
            })
            .await;
            self.fenced(revoked)?;
            tracing::debug!(event = "revoke", key, token, reason);
        }
        let state = self.info(key).await?.state;
        Ok(LockOutcome {
            key: key.to_string(),
            revoked_token: victim,
            state,
        })
    }

    /// Retires what has run out: lists it (at most one batch), clears it from
    /// the store, then removes it from memory. What the store could not clear
    /// stays in memory (it is FREE there by its times anyway) for the next sweep.
    pub async fn sweep(self: &Arc<Self>) {
        let now = self.clock.now();
        let Ok(generation) = self.serving(now) else {
            return;
        };
        let swept = self.table().due(now);
        if swept.is_empty() {
            // Still ages the tombstones out.
            self.table().apply_swept(&swept, now);
            return;
        }
        let this = Arc::clone(self);
        let swept = detached(async move {
            let mut applied = Swept::default();
            let cleared = this.store.clear_grants(&swept.expired_grants).await;
            match &cleared {
                Ok(()) => applied.expired_grants = swept.expired_grants,
                Err(e) => tracing::warn!(grants = swept.expired_grants.len(), error = %e,
                    "could not clear expired grants from the store; retrying at the next sweep"),
            }
            let deleted = this.store.delete_sessions(&swept.expired_sessions).await;
            match &deleted {
                Ok(()) => applied.expired_sessions = swept.expired_sessions,
                Err(e) => tracing::warn!(sessions = swept.expired_sessions.len(), error = %e,
                    "could not delete expired sessions from the store; retrying at the next sweep"),
            }
            for r in [&cleared, &deleted] {
                if let Err(StoreError::Fenced(why)) = r {
                    return Err(StoreError::Fenced(why.clone()).into());
                }
            }
            let late = this.table_in(generation)?.apply_swept(&applied, now);
            bump(
                &this.counters.expired_sessions,
                applied.expired_sessions.len(),
            );
            bump(
                &this.counters.expired_leases,
                applied.expired_grants.len() + late.len(),
            );
            this.clear_late(&late).await;
            Ok(())
        })
        .await;
        let _ = self.fenced(swept);
    }

    /// `/readyz`: this replica serves and the store answers.
    pub async fn ready(&self) -> Result<(), ServiceError> {
        self.serving(self.clock.now())?;
        Ok(self.store.ping().await?)
    }

    /// `GET /v1/config`.
    pub fn config_view(&self) -> ServerConfigView {
        let limits: Limits = self.table().limits().clone();
        let lead = self.leader_state();
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let (mode, grace_ms, offset, drift, quantum) = match limits.grace {
            GracePolicy::Fixed(g) => ("fixed", Some(ceil_ms(g)), None, None, None),
            GracePolicy::Derived(p) => (
                "derived",
                None,
                Some(ms(p.offset_max)),
                Some(p.drift_ppm),
                Some(ms(p.quantum)),
            ),
        };
        ServerConfigView {
            default_ttl_ms: limits.default_ttl.as_millis() as u64,
            session_ttl_ms: limits.session_ttl.as_millis() as u64,
            ttl_min_ms: limits.ttl_min.as_millis() as u64,
            ttl_max_ms: limits.ttl_max.as_millis() as u64,
            grace_mode: mode.to_string(),
            grace_ms,
            clock_offset_max_ms: offset,
            clock_drift_ppm: drift,
            clock_quantum_ms: quantum,
            grace_for_default_ttl_ms: ms(limits.grace.grace_for(limits.default_ttl)),
            grace_for_session_ttl_ms: ms(limits.grace.grace_for(limits.session_ttl)),
            store: self.store.kind().to_string(),
            store_path: self.store.path().map(|p| p.display().to_string()),
            durable: self.store.durable(),
            role: Some(lead.role.as_str().to_string()),
            epoch: self.leader_cfg.as_ref().map(|_| lead.epoch),
            leader: lead.leader.clone(),
            leader_lease_ms: self.leader_cfg.as_ref().map(|c| c.lease.as_millis() as u64),
        }
    }

    /// Prometheus text for `/metrics` (C5 names, dots as underscores).
    pub fn metrics_text(&self) -> String {
        let (live, held) = self.table().gauges(self.clock.now());
        let c = &self.counters;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let mut out = String::with_capacity(1024);
        let mut counter = |name: &str, help: &str, lines: &[(String, u64)]| {
            out.push_str(&format!("# HELP {name} {help}\n# TYPE {name} counter\n"));
            for (labels, v) in lines {
                out.push_str(&format!("{name}{labels} {v}\n"));
            }
        };
        counter(
            "lock_grants_total",
            "Grants issued (L4 with a new token).",
            &[(String::new(), get(&c.grants))],
        );
        counter(
            "lock_reacquires_total",
            "L4 by the holding session, answered with its current grant.",
            &[(String::new(), get(&c.reacquires))],
        );
        counter(
            "lock_renewals_total",
            "Renewals accepted (L5).",
            &[(String::new(), get(&c.renewals))],
        );
        counter(
            "lock_releases_total",
            "Grants released (L6, L3, L8).",
            &[(String::new(), get(&c.releases))],
        );
        counter(
            "lock_heartbeats_total",
            "Heartbeats accepted (L2).",
            &[(String::new(), get(&c.heartbeats))],
        );
        if let Some(st) = self.store.commit_stats() {
            counter(
                "lock_store_transactions_total",
                "Store transactions (one fsync each): group commits and their retries alone.",
                &[(String::new(), st.transactions)],
            );
            counter(
                "lock_store_writes_total",
                "Requests' store writes answered by the group committer (batched or alone).",
                &[(String::new(), st.units)],
            );
            counter(
                "lock_store_retried_alone_total",
                "Writes retried in a transaction of their own after their batch failed.",
                &[(String::new(), st.retried_alone)],
            );
        }
        counter(
            "lock_expired_total",
            "Sessions and leases that ran out on the server.",
            &[
                ("{kind=\"session\"}".into(), get(&c.expired_sessions)),
                ("{kind=\"lease\"}".into(), get(&c.expired_leases)),
            ],
        );
        out.push_str(&format!(
            "# HELP lock_sessions_live Sessions not lapsed.\n# TYPE lock_sessions_live gauge\nlock_sessions_live {live}\n"
        ));
        out.push_str(&format!(
            "# HELP lock_locks_held Keys HELD now.\n# TYPE lock_locks_held gauge\nlock_locks_held {held}\n"
        ));
        out
    }

    /// A canonical text of the in-memory table and the store's contents, so a
    /// test can assert that a refused request changed nothing.
    pub async fn state_digest(&self) -> String {
        let table = self.table().digest();
        let mut stored = self
            .store
            .load()
            .await
            .map(|s| {
                let mut v: Vec<String> = s.sessions.iter().map(|x| format!("{x:?}")).collect();
                v.extend(s.keys.iter().map(|x| format!("{x:?}")));
                v
            })
            .unwrap_or_else(|e| vec![format!("store error: {e}")]);
        stored.sort();
        format!("{table}\nstore={stored:?}")
    }

    /// Where memory and store disagree (empty when they agree), plus the
    /// table's own inconsistencies: sessions in one and not the other, and
    /// holders (`key`, token, session) in one and not the other. Meaningful
    /// when no request is in flight (tests and tools).
    pub async fn audit(&self) -> Vec<String> {
        let mut problems = Vec::new();
        let (sessions, holders) = {
            let t = self.table();
            if let Err(e) = t.audit() {
                problems.push(format!("table: {e}"));
            }
            t.records()
        };
        let snap = match self.store.load().await {
            Ok(s) => s,
            Err(e) => return vec![format!("store: {e}")],
        };
        let stored_sessions: std::collections::BTreeSet<String> =
            snap.sessions.into_iter().map(|s| s.id).collect();
        let stored_holders: std::collections::BTreeSet<(String, u64, String)> = snap
            .keys
            .into_iter()
            .filter_map(|k| k.holder.map(|h| (k.key, h.token, h.session_id)))
            .collect();
        for s in sessions.symmetric_difference(&stored_sessions) {
            let side = if sessions.contains(s) {
                "memory"
            } else {
                "the store"
            };
            problems.push(format!("a session only in {side}"));
        }
        for h in holders.symmetric_difference(&stored_holders) {
            let side = if holders.contains(h) {
                "memory"
            } else {
                "the store"
            };
            problems.push(format!("{}: token {} held only in {side}", h.0, h.1));
        }
        problems
    }

    /// The table's sizes (tests and the scale benchmark).
    pub fn table_sizes(&self) -> crate::core::TableSizes {
        self.table().sizes()
    }
}

/// Extends `(key, token)` in memory with `lease` from `now` if the store needs
/// no write first; else returns the lease the store must record first.
fn renew_in_memory(
    t: &mut LockTable,
    key: &str,
    token: u64,
    lease: Duration,
    now: MonoTime,
) -> Option<Duration> {
    let persist = t.lease_to_persist(key, token, lease);
    if persist.is_none() {
        let applied = t.apply_renew(key, token, lease, now);
        debug_assert!(applied, "a checked grant renews");
    }
    persist
}

/// How often the sweeper runs.
pub const SWEEP_EVERY: Duration = Duration::from_millis(200);
