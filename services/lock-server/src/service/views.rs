//! What a lock service shows of itself without changing anything:
//! `/readyz`, `GET /v1/config`, the `/metrics` text, and for tests and tools
//! a digest of memory and store, their audit, and the table's sizes.

use std::sync::atomic::{AtomicU64, Ordering};
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
