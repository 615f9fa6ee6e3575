//! The session operations of C1: L1 (open, persisted before the reply), L2
//! (heartbeat, memory only) and L3 (delete, releasing the session's keys).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use fencepost_api::clock::wall_clock_rfc3339_after;
use fencepost_api::lock::SessionGranted;

use super::counters::bump;
use super::error::ServiceError;
use super::lock_service::{LockService, detached};
use crate::core::Caller;
use crate::store::SessionRecord;

impl LockService {
    /// L1 with auth off: [`create_session_as`](Self::create_session_as) by [`Caller::Anyone`].
    pub async fn create_session(
        self: &Arc<Self>,
        owner_id: &str,
        ttl_ms: Option<u64>,
    ) -> Result<SessionGranted, ServiceError> {
        self.create_session_as(Caller::Anyone, owner_id, ttl_ms)
            .await
    }

    /// L1: opens a session bound to the caller's principal (none with auth
    /// off); it is persisted, binding included, before the reply.
    pub async fn create_session_as(
        self: &Arc<Self>,
        caller: Caller<'_>,
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
            principal: caller.principal().map(str::to_string),
        };
        let this = Arc::clone(self);
        let created = detached(async move {
            this.store.create_session(&record).await?;
            let SessionRecord {
                id,
                owner_id,
                principal,
                ..
            } = record;
            {
                // After a lost-and-rewon leadership, the table loaded at the
                // takeover restored the session if the load came after the
                // commit; else it is added here.
                let (mut t, reloaded) = this.table_after_commit(generation)?;
                if !(reloaded && t.has_session(&id)) {
                    t.insert_session(id.clone(), owner_id, principal.map(Into::into), ttl, now);
                }
            }
            Ok(SessionGranted {
                session_id: id,
                ttl_ms: ttl.as_millis() as u64,
                expires_at: wall_clock_rfc3339_after(ttl),
            })
        })
        .await;
        self.fenced(created)
    }

    /// L2 with auth off: [`heartbeat_as`](Self::heartbeat_as) by [`Caller::Anyone`].
    pub async fn heartbeat(&self, session_id: &str) -> Result<Duration, ServiceError> {
        self.heartbeat_as(Caller::Anyone, session_id).await
    }

    /// L2: restarts the session's TTL from this request's receipt, if the
    /// session is the caller's (checked under the same table hold). Memory only.
    pub async fn heartbeat_as(
        &self,
        caller: Caller<'_>,
        session_id: &str,
    ) -> Result<Duration, ServiceError> {
        let now = self.clock.now();
        self.serving(now)?;
        let ttl = {
            let mut t = self.table();
            t.check_caller(session_id, caller)?;
            t.heartbeat(session_id, now)?
        };
        self.counters.heartbeats.fetch_add(1, Ordering::Relaxed);
        Ok(ttl)
    }

    /// L3 with auth off: [`delete_session_as`](Self::delete_session_as) by [`Caller::Anyone`].
    pub async fn delete_session(self: &Arc<Self>, session_id: &str) -> Result<(), ServiceError> {
        self.delete_session_as(Caller::Anyone, session_id).await
    }

    /// L3: deletes the caller's session and releases its keys at once.
    pub async fn delete_session_as(
        self: &Arc<Self>,
        caller: Caller<'_>,
        session_id: &str,
    ) -> Result<(), ServiceError> {
        let now = self.clock.now();
        let generation = self.serving(now)?;
        let held_before = {
            let t = self.table();
            t.check_caller(session_id, caller)?;
            t.check_delete_session(session_id, now)?
        };
        let (this, id) = (Arc::clone(self), session_id.to_string());
        let deleted = detached(async move {
            this.store.delete_session(&id).await?;
            let released = this
                .table_after_commit(generation)?
                .0
                .apply_delete_session(&id);
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
}
