//! The lock service: the [`LockTable`] (pure decisions) wired to a
//! [`LockStore`] (durability) and a [`Clock`] (time). Every operation reads
//! the clock once, on entry — the instant the request was received — and
//! follows the same order: decide under the table mutex, release it, persist
//! through the store, then apply under the mutex. The mutex is never held
//! across an await, and a store failure leaves the table untouched.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use fencepost_api::clock::{Clock, MonoTime, wall_clock_rfc3339_after};
use fencepost_api::grace::GracePolicy;
use fencepost_api::lock::{
    LeaseGranted, LockErrorCode, LockInfo, LockOutcome, LockState, ServerConfigView, SessionGranted,
};

use crate::core::{CoreError, Limits, LockTable, ceil_ms};
use crate::store::{LockStore, SessionRecord, StoreError};

/// Why an operation failed: a refusal (a C1 code) or the store.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// The request was refused; nothing changed.
    #[error(transparent)]
    Refused(#[from] CoreError),
    /// The store failed; nothing changed. Retry later.
    #[error("the lock store is unavailable: {0}")]
    Store(#[from] StoreError),
}

/// The C5 counters the server keeps (gauges are computed at scrape time).
#[derive(Debug, Default)]
pub struct Counters {
    /// `lock.grants`
    pub grants: AtomicU64,
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

/// A serving lock-server's state. Cheap to share behind an `Arc`.
pub struct LockService {
    /// Every expiry decision reads this clock, and only this clock.
    clock: Arc<dyn Clock>,
    /// Sessions, grants and tokens in memory; the mutex is never held across an await.
    table: Mutex<LockTable>,
    /// Durable tokens, holders and sessions.
    store: Arc<dyn LockStore>,
    /// C5 counters.
    pub counters: Counters,
}

impl LockService {
    /// Builds the service and restores what the store holds: every session's
    /// TTL and every held grant's lease restart from now (C1 §6: a new server
    /// only ever extends what a client was promised).
    pub async fn start(
        limits: Limits,
        store: Arc<dyn LockStore>,
        clock: Arc<dyn Clock>,
    ) -> Result<Arc<Self>, StoreError> {
        let snapshot = store.load().await?;
        let now = clock.now();
        let mut table = LockTable::new(limits);
        for s in snapshot.sessions {
            table.restore_session(s.id, s.owner_id, Duration::from_millis(s.ttl_ms), now);
        }
        for k in snapshot.keys {
            let grant = k
                .holder
                .map(|h| (h.token, h.session_id, Duration::from_millis(h.lease_ms)));
            table.restore_key(k.key, k.last_token, grant, now);
        }
        Ok(Arc::new(LockService {
            clock,
            table: Mutex::new(table),
            store,
            counters: Counters::default(),
        }))
    }

    fn table(&self) -> MutexGuard<'_, LockTable> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The clock (for the sweeper).
    pub fn now(&self) -> MonoTime {
        self.clock.now()
    }

    /// L1: opens a session; it is persisted before the reply.
    pub async fn create_session(
        &self,
        owner_id: &str,
        ttl_ms: Option<u64>,
    ) -> Result<SessionGranted, ServiceError> {
        let now = self.clock.now();
        let ttl = self.table().session_ttl_for(ttl_ms);
        let id = uuid::Uuid::new_v4().simple().to_string();
        self.store
            .create_session(&SessionRecord {
                id: id.clone(),
                owner_id: owner_id.to_string(),
                ttl_ms: ttl.as_millis() as u64,
            })
            .await?;
        self.table()
            .insert_session(id.clone(), owner_id.to_string(), ttl, now);
        Ok(SessionGranted {
            session_id: id,
            ttl_ms: ttl.as_millis() as u64,
            expires_at: wall_clock_rfc3339_after(ttl),
        })
    }

    /// L2: restarts the session's TTL from this request's receipt. Memory only.
    pub async fn heartbeat(&self, session_id: &str) -> Result<Duration, ServiceError> {
        let now = self.clock.now();
        let ttl = self.table().heartbeat(session_id, now)?;
        self.counters.heartbeats.fetch_add(1, Ordering::Relaxed);
        Ok(ttl)
    }

    /// L3: deletes the session and releases its keys at once.
    pub async fn delete_session(&self, session_id: &str) -> Result<(), ServiceError> {
        let now = self.clock.now();
        self.table().check_delete_session(session_id, now)?;
        self.store.delete_session(session_id).await?;
        let released = self.table().apply_delete_session(session_id);
        self.counters
            .releases
            .fetch_add(released.len() as u64, Ordering::Relaxed);
        for (key, token) in released {
            tracing::debug!(
                event = "release",
                key,
                token,
                session_id,
                via = "session_delete"
            );
        }
        Ok(())
    }

    /// L4: grants `key` to the session with a fresh token, persisted first.
    pub async fn acquire(
        &self,
        key: &str,
        session_id: &str,
        ttl_ms: Option<u64>,
    ) -> Result<LeaseGranted, ServiceError> {
        let now = self.clock.now();
        let plan = self.table().begin_acquire(key, session_id, ttl_ms, now)?;
        let lease_ms = plan.lease.as_millis() as u64;
        let token = match self.store.grant(key, session_id, lease_ms).await {
            Ok(t) => t,
            Err(e) => {
                self.table().abort_acquire(key);
                return Err(e.into());
            }
        };
        let finished = self
            .table()
            .finish_acquire(key, session_id, token, &plan, now);
        if let Err(refused) = finished {
            // The session was deleted while the grant was being persisted.
            let _ = self.store.clear_grant(key, token).await;
            return Err(refused.into());
        }
        self.counters.grants.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(event = "grant", key, token, session_id, lease_ms);
        Ok(LeaseGranted {
            key: key.to_string(),
            token,
            lease_ms,
            expires_at: wall_clock_rfc3339_after(plan.lease),
        })
    }

    /// L5: restarts the grant's lease from this request's receipt; same token.
    pub async fn renew(
        &self,
        key: &str,
        session_id: &str,
        token: u64,
        ttl_ms: Option<u64>,
    ) -> Result<LeaseGranted, ServiceError> {
        let now = self.clock.now();
        let (lease, stored) = {
            let t = self.table();
            let lease = t.check_renew(key, session_id, token, ttl_ms, now)?;
            (lease, t.current_lease(key, token))
        };
        let lease_ms = lease.as_millis() as u64;
        if stored != Some(lease) {
            // Only a changed lease is written; a plain renew touches no disk.
            self.store.set_lease(key, token, lease_ms).await?;
        }
        if !self.table().apply_renew(key, token, lease, now) {
            return Err(CoreError {
                code: LockErrorCode::LockLost,
                message: format!("cannot renew {key} with token {token}: released meanwhile"),
                retry_after_ms: None,
            }
            .into());
        }
        self.counters.renewals.fetch_add(1, Ordering::Relaxed);
        tracing::debug!(event = "renew", key, token, session_id, lease_ms);
        Ok(LeaseGranted {
            key: key.to_string(),
            token,
            lease_ms,
            expires_at: wall_clock_rfc3339_after(lease),
        })
    }

    /// L6: releases the grant; the key is reassignable at once.
    pub async fn release(
        &self,
        key: &str,
        session_id: &str,
        token: u64,
    ) -> Result<(), ServiceError> {
        let now = self.clock.now();
        self.table().check_release(key, session_id, token, now)?;
        self.store.clear_grant(key, token).await?;
        if self.table().apply_release(key, token) {
            self.counters.releases.fetch_add(1, Ordering::Relaxed);
            tracing::debug!(event = "release", key, token, session_id);
        }
        Ok(())
    }

    /// L7: the key's state now.
    pub fn info(&self, key: &str) -> Result<LockInfo, ServiceError> {
        let now = self.clock.now();
        Ok(self.table().info(key, now)?)
    }

    /// L8: ends the current grant (HELD or GRACE) at once; the key is FREE.
    pub async fn revoke(&self, key: &str, reason: &str) -> Result<LockOutcome, ServiceError> {
        let now = self.clock.now();
        let victim = self.table().check_revoke(key, now)?;
        if let Some(token) = victim {
            self.store.clear_grant(key, token).await?;
            if self.table().apply_release(key, token) {
                self.counters.releases.fetch_add(1, Ordering::Relaxed);
            }
            tracing::debug!(event = "revoke", key, token, reason);
        }
        let state = self.table().info(key, self.clock.now())?.state;
        Ok(LockOutcome {
            key: key.to_string(),
            revoked_token: victim,
            state,
        })
    }

    /// Removes expired sessions and lapsed grants from memory, then clears them
    /// from the store (best effort: a leftover holder row only matters after a
    /// restart, where it is restored and lapses again).
    pub async fn sweep(&self) {
        let swept = self.table().sweep(self.clock.now());
        self.counters
            .expired_sessions
            .fetch_add(swept.expired_sessions.len() as u64, Ordering::Relaxed);
        self.counters
            .expired_leases
            .fetch_add(swept.expired_grants.len() as u64, Ordering::Relaxed);
        for (key, token) in &swept.expired_grants {
            if let Err(e) = self.store.clear_grant(key, *token).await {
                tracing::warn!(key, token, error = %e, "could not clear an expired grant from the store");
            }
        }
        for id in &swept.expired_sessions {
            if let Err(e) = self.store.delete_session(id).await {
                tracing::warn!(session_id = id, error = %e, "could not delete an expired session from the store");
            }
        }
    }

    /// Checks the store answers (`/readyz`).
    pub async fn ready(&self) -> Result<(), StoreError> {
        self.store.ping().await
    }

    /// `GET /v1/config`.
    pub fn config_view(&self) -> ServerConfigView {
        let limits: Limits = self.table().limits().clone();
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
            "Grants issued (L4).",
            &[(String::new(), get(&c.grants))],
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

    /// The state a key is in now (tests and tools).
    pub fn state_of(&self, key: &str) -> Option<LockState> {
        self.info(key).ok().map(|i| i.state)
    }
}

/// How often the sweeper runs.
pub const SWEEP_EVERY: Duration = Duration::from_millis(200);
