//! What a lock service shows of itself without changing anything:
//! `/readyz`, `GET /v1/config` (the `/metrics` text is in `metrics.rs`), and
//! for tests and tools a digest of memory and store, their audit, and the table's sizes.

use std::time::Duration;

use fencepost_api::grace::GracePolicy;
use fencepost_api::lock::ServerConfigView;

use super::error::ServiceError;
use super::lock_service::LockService;
use crate::core::{Limits, ceil_ms};

impl LockService {
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
            clock: Some(self.clock_view()),
            // The router fills it in: it is the one that knows the auth mode.
            auth: None,
            tls: self.tls_mode().as_str().to_string(),
        }
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
