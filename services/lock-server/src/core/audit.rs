//! Seeing the table whole, for tests: a canonical [`LockTable::digest`] (so a
//! test can assert that a refused request changed nothing) and
//! [`LockTable::audit`], which checks that the indexes and queues agree with
//! the maps they index.

use std::collections::BTreeSet;

use super::table::LockTable;

impl LockTable {
    /// A canonical text of the whole table (sorted), so tests can assert that a
    /// refused request changed nothing.
    pub fn digest(&self) -> String {
        let mut sessions: Vec<_> = self.sessions.values().map(|s| format!("{s:?}")).collect();
        sessions.sort();
        let mut expired: Vec<_> = self.tombstones.iter().map(|e| format!("{e:?}")).collect();
        expired.sort();
        let mut keys: Vec<_> = self.keys.iter().map(|k| format!("{k:?}")).collect();
        keys.sort();
        format!(
            "sessions={sessions:?}\nexpired={expired:?}\nkeys={keys:?}\nsession_q={:?}\ngrant_q={:?}\ntombstone_q={:?}",
            self.session_q, self.grant_q, self.tombstone_q
        )
    }

    /// Checks the table's own consistency: every grant's session exists and
    /// lists the key; every listed key has that session's grant; each session
    /// and grant is queued exactly once at its deadline; no key is empty; the
    /// tombstone queue covers the tombstones; the caps hold.
    pub fn audit(&self) -> Result<(), String> {
        let mut queued_grants = 0;
        for (key, e) in &self.keys {
            if e.grant.is_none() && !e.pending {
                return Err(format!("{key}: an empty entry stayed in memory"));
            }
            let Some(g) = &e.grant else { continue };
            let Some(s) = self.sessions.get(&g.session_id) else {
                return Err(format!("{key}: its grant's session is gone"));
            };
            if !s.keys.contains(key) {
                return Err(format!("{key}: missing from its session's index"));
            }
            if !self.grant_q.contains(&(g.lease_end, key.clone())) {
                return Err(format!("{key}: not queued at its lease end"));
            }
            if g.free_at < g.lease_end || g.longest_lease < g.lease {
                return Err(format!("{key}: grant fields out of order: {g:?}"));
            }
            queued_grants += 1;
        }
        if queued_grants != self.grant_q.len() {
            return Err(format!(
                "{} grants queued for {queued_grants} grants",
                self.grant_q.len()
            ));
        }
        for (id, s) in &self.sessions {
            if !self.session_q.contains(&(s.lapse_at(), id.clone())) {
                return Err(format!("session not queued at its lapse: {s:?}"));
            }
            for key in &s.keys {
                let holder = self.keys.get(key).and_then(|e| e.grant.as_ref());
                if holder.is_none_or(|g| g.session_id != *id) {
                    return Err(format!(
                        "{key}: indexed under a session that does not hold it"
                    ));
                }
            }
        }
        if self.session_q.len() != self.sessions.len() {
            return Err(format!(
                "{} sessions queued for {} sessions",
                self.session_q.len(),
                self.sessions.len()
            ));
        }
        for (id, at) in &self.tombstones {
            if !self.tombstone_q.contains(&(*at, id.clone())) {
                return Err(format!("tombstone {at:?} not queued"));
            }
        }
        if self.tombstones.len() > self.caps.max_tombstones {
            return Err(format!("{} tombstones over the cap", self.tombstones.len()));
        }
        if let Some(id) = self
            .tombstone_principals
            .keys()
            .find(|id| !self.tombstones.contains_key(*id))
        {
            // No id in the message (C1 §5): its length is enough to tell.
            return Err(format!(
                "a principal kept for a forgotten tombstone ({} chars)",
                id.len()
            ));
        }
        Ok(())
    }

    /// What memory would have the store hold: session ids, and
    /// `(key, token, session)` for every grant (to compare with the store).
    pub fn records(&self) -> (BTreeSet<String>, BTreeSet<(String, u64, String)>) {
        let sessions = self.sessions.keys().cloned().collect();
        let holders = self
            .keys
            .iter()
            .filter_map(|(k, e)| {
                e.grant
                    .as_ref()
                    .map(|g| (k.clone(), g.token, g.session_id.clone()))
            })
            .collect();
        (sessions, holders)
    }
}
