//! The invariants checked after every step of a [`Run`]: the table audits
//! clean, memory and store agree, and what L7 says of each key agrees with
//! the model — the last token issued, HELD only while its holder believes
//! it, never FREE (or evicted) while a holder may still believe it, and no
//! FREE key left in memory after a complete sweep.

use std::collections::BTreeSet;

use fencepost_api::clock::Clock;
use fencepost_api::lock::{LockErrorCode, LockState};

use super::model::Model;
use super::ops::KEYS;
use super::run::{Check, Run, fail};

impl Run {
    /// What the table says about each key agrees with the model; memory and
    /// store agree; the table is internally consistent.
    pub(super) fn check_all(&mut self, after_sweep: bool) -> Check {
        let now = self.clock.now();
        self.table
            .audit()
            .map_err(|e| format!("table audit: {e}"))?;
        let (sessions, holders) = self.table.records();
        let stored: BTreeSet<String> = self.store.sessions.keys().cloned().collect();
        if sessions != stored {
            return fail(format!(
                "memory has sessions {sessions:?}, the store {stored:?}"
            ));
        }
        let stored: BTreeSet<(String, u64, String)> = self
            .store
            .holders
            .iter()
            .map(|(k, h)| (k.clone(), h.0, h.1.clone()))
            .collect();
        if holders != stored {
            return fail(format!("memory holds {holders:?}, the store {stored:?}"));
        }
        for key in KEYS {
            let believed = self.model.grants.get(*key);
            let may_be_believed =
                |m: &Model| believed.is_some_and(|g| !now.has_reached(m.reassignable_at(g)));
            match self.table.info(key, now) {
                Ok(info) => {
                    let last = self.model.last_token.get(*key).copied();
                    if Some(info.token) != last {
                        return fail(format!(
                            "{key}: L7 token {} but the last token issued is {last:?}",
                            info.token
                        ));
                    }
                    match info.state {
                        LockState::Held => {
                            let Some(g) = believed else {
                                return fail(format!("{key}: HELD with no grant in the model"));
                            };
                            if now.has_reached(self.model.held_until(g)) {
                                return fail(format!(
                                    "{key}: HELD at {now:?}, after its holder's belief ended"
                                ));
                            }
                            self.seen.push("state HELD");
                        }
                        LockState::Grace => self.seen.push("state GRACE"),
                        LockState::Free => {
                            if may_be_believed(&self.model) {
                                return fail(format!(
                                    "{key}: FREE at {now:?} while its holder may still believe it"
                                ));
                            }
                            if after_sweep
                                && self.in_flight.iter().all(|f| f.key != *key)
                                && self.table.due(now).is_empty()
                            {
                                return fail(format!(
                                    "{key}: FREE but still in memory after a complete sweep"
                                ));
                            }
                            self.seen.push("state FREE");
                        }
                    }
                }
                Err(e) if e.code == LockErrorCode::LockUnknown => {
                    if may_be_believed(&self.model) {
                        return fail(format!(
                            "{key}: not in memory while its holder may still believe it"
                        ));
                    }
                    if self.model.last_token.contains_key(*key) {
                        self.seen.push("evicted");
                    }
                }
                Err(e) => return fail(format!("{key}: L7 failed: {e}")),
            }
        }
        Ok(())
    }
}
