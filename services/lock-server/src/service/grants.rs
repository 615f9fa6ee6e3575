//! The lock operations of C1: L4 (acquire, or the holder's re-acquire), L5
//! (renew), L6 (release), L7 (info) and L8 (revoke), each decided on the
//! table, persisted, then applied, as the [`service`](super) docs describe.

use std::sync::Arc;
use std::time::Duration;

use fencepost_api::clock::{MonoTime, wall_clock_rfc3339_after};
use fencepost_api::lock::{LeaseGranted, LockErrorCode, LockInfo, LockOutcome, LockState};

use super::counters::bump;
use super::error::ServiceError;
use super::lock_service::{LockService, detached};
use crate::core::{Caller, CoreError, LockTable};

/// The reply to an L4 or L5 that granted `lease` with `token`.
fn lease_granted(key: &str, token: u64, lease: Duration) -> LeaseGranted {
    LeaseGranted {
        key: key.to_string(),
        token,
        lease_ms: lease.as_millis() as u64,
        expires_at: wall_clock_rfc3339_after(lease),
    }
}

/// What an L4 answered: the grant, and whether it is a new one (a fresh
/// token) or the holder's current grant (a re-acquire).
#[derive(Clone, Debug)]
pub struct Acquired {
    /// The reply.
    pub granted: LeaseGranted,
    /// True for a new grant, false for a re-acquire by the holder.
    pub fresh: bool,
}

impl LockService {
    /// L4: a new grant with a fresh token when the key is free; when the
    /// session already holds the key, the answer is its current grant
    /// (same token), the lease restarted from this request's receipt and never
    /// shortened (C1 §7).
    pub async fn acquire(
        self: &Arc<Self>,
        key: &str,
        session_id: &str,
        ttl_ms: Option<u64>,
    ) -> Result<LeaseGranted, ServiceError> {
        Ok(self.acquire_outcome(key, session_id, ttl_ms).await?.granted)
    }

    /// [`acquire`](Self::acquire), saying whether the grant is new (auth off).
    pub async fn acquire_outcome(
        self: &Arc<Self>,
        key: &str,
        session_id: &str,
        ttl_ms: Option<u64>,
    ) -> Result<Acquired, ServiceError> {
        self.acquire_as(Caller::Anyone, key, session_id, ttl_ms)
            .await
    }

    /// L4 on the caller's session (the binding checked under the same table
    /// hold as the decision, before the key is marked), saying whether the
    /// grant is new.
    pub async fn acquire_as(
        self: &Arc<Self>,
        caller: Caller<'_>,
        key: &str,
        session_id: &str,
        ttl_ms: Option<u64>,
    ) -> Result<Acquired, ServiceError> {
        let now = self.clock.now();
        let generation = self.serving(now)?;
        let (plan, persist) = {
            let mut t = self.table();
            t.check_caller(session_id, caller)?;
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
            return Ok(Acquired {
                granted,
                fresh: false,
            });
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
            let finished = {
                let (mut t, reloaded) = this.table_after_commit(generation)?;
                if reloaded {
                    t.adopt_grant(&key, &sid, token, plan.lease, now)
                } else {
                    t.finish_acquire(&key, &sid, token, &plan, now)
                }
            };
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
        self.fenced(granted).map(|granted| Acquired {
            granted,
            fresh: true,
        })
    }

    /// L5 with auth off: [`renew_as`](Self::renew_as) by [`Caller::Anyone`].
    pub async fn renew(
        self: &Arc<Self>,
        key: &str,
        session_id: &str,
        token: u64,
        ttl_ms: Option<u64>,
    ) -> Result<LeaseGranted, ServiceError> {
        self.renew_as(Caller::Anyone, key, session_id, token, ttl_ms)
            .await
    }

    /// L5: the grant's lease ends at `max(its end, receipt + lease)`; same
    /// token. The session must be the caller's.
    pub async fn renew_as(
        self: &Arc<Self>,
        caller: Caller<'_>,
        key: &str,
        session_id: &str,
        token: u64,
        ttl_ms: Option<u64>,
    ) -> Result<LeaseGranted, ServiceError> {
        let now = self.clock.now();
        let generation = self.serving(now)?;
        let (lease, persist) = {
            let mut t = self.table();
            t.check_caller(session_id, caller)?;
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
            // After a lost-and-rewon leadership the table it serves from now
            // holds the grant if the store did (the write only lengthens it).
            if !this
                .table_after_commit(generation)?
                .0
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

    /// L6 with auth off: [`release_as`](Self::release_as) by [`Caller::Anyone`].
    pub async fn release(
        self: &Arc<Self>,
        key: &str,
        session_id: &str,
        token: u64,
    ) -> Result<(), ServiceError> {
        self.release_as(Caller::Anyone, key, session_id, token)
            .await
    }

    /// L6: releases the grant; the key is reassignable at once. The session
    /// must be the caller's.
    pub async fn release_as(
        self: &Arc<Self>,
        caller: Caller<'_>,
        key: &str,
        session_id: &str,
        token: u64,
    ) -> Result<(), ServiceError> {
        let now = self.clock.now();
        let generation = self.serving(now)?;
        {
            let t = self.table();
            t.check_caller(session_id, caller)?;
            t.check_release(key, session_id, token, now)?;
        }
        let (this, key) = (Arc::clone(self), key.to_string());
        let released = detached(async move {
            this.store.clear_grant(&key, token).await?;
            // The grant is gone from the store: from whichever table serves.
            if this
                .table_after_commit(generation)?
                .0
                .apply_release(&key, token)
            {
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
                if this
                    .table_after_commit(generation)?
                    .0
                    .apply_release(&k, token)
                {
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
