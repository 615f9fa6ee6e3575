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
use crate::store::SessionRecord;

impl LockService {
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
            {
                // After a lost-and-rewon leadership, the table loaded at the
                // takeover restored the session if the load came after the
                // commit; else it is added here.
                let (mut t, reloaded) = this.table_after_commit(generation)?;
                if !(reloaded && t.has_session(&id)) {
                    t.insert_session(id.clone(), owner_id, ttl, now);
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
