//! The sweeper's round: retire what ran out (expired sessions and FREE
//! grants), cleared from the store first, then from memory, one batch at a
//! time. [`crate::run`] runs it every [`SWEEP_EVERY`](super::SWEEP_EVERY).

use std::sync::Arc;

use super::counters::bump;
use super::lock_service::{LockService, detached};
use crate::core::Swept;
use crate::store::StoreError;

impl LockService {
    /// Retires what has run out: lists it (at most one batch), clears it from
    /// the store, then removes it from memory. What the store could not clear
    /// stays in memory (it is FREE there by its times anyway) for the next sweep.
    pub async fn sweep(self: &Arc<Self>) {
        let now = self.clock.now();
        let Ok(generation) = self.serving(now) else {
            return;
        };
        let (swept, expired) = {
            let t = self.table();
            let swept = t.due(now);
            // Each expiring session with its principal, for its tombstone.
            let expired: Vec<(String, Option<String>)> = swept
                .expired_sessions
                .iter()
                .map(|id| (id.clone(), t.session_principal(id).map(|p| p.to_string())))
                .collect();
            (swept, expired)
        };
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
            let keep = this.table().caps().tombstone_keep;
            let deleted = this.store.expire_sessions(&expired, keep).await;
            match &deleted {
                Ok(()) => applied.expired_sessions = swept.expired_sessions,
                Err(e) => tracing::warn!(sessions = swept.expired_sessions.len(), error = %e,
                    "could not expire sessions in the store; retrying at the next sweep"),
            }
            for r in [&cleared, &deleted] {
                if let Err(StoreError::Fenced(why)) = r {
                    return Err(StoreError::Fenced(why.clone()).into());
                }
            }
            let late = {
                let (mut t, reloaded) = this.table_after_commit(generation)?;
                if reloaded {
                    t.apply_swept_committed(&applied, now);
                    Vec::new()
                } else {
                    t.apply_swept(&applied, now)
                }
            };
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
}
