//! `memory:` — the store kept in this process only. Tokens are strictly
//! increasing for the life of the process but start again after a restart, so
//! it is for tests and throwaway runs, never for anything that must survive a
//! crash ([`LockStore::durable`] is false, and the server says so at start and
//! in `/v1/config`).

use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Mutex;

use async_trait::async_trait;

use super::error::StoreError;
use super::lock_store::LockStore;
use super::model::{
    Committed, GrantRecord, KeyRecord, SessionRecord, Snapshot, TombstoneRecord, Write,
};

/// Tombstones `memory:` keeps at most (it has no clock to age them by; the
/// oldest go first).
const MAX_TOMBSTONES: usize = 100_000;

/// An in-process store.
#[derive(Debug, Default)]
pub struct MemoryStore {
    /// The whole "database", behind one mutex (never held across an await).
    inner: Mutex<Tables>,
}

#[derive(Debug, Default)]
struct Tables {
    sessions: HashMap<String, SessionRecord>,
    keys: HashMap<String, KeyRecord>,
    /// Session id to the keys it holds, so a session delete touches only those
    /// (the SQL stores have an index for the same).
    held_by: HashMap<String, HashSet<String>>,
    /// Expired sessions' ids and principals, oldest first (no ages: this
    /// store has no clock).
    tombstones: VecDeque<(String, Option<String>)>,
}

impl Tables {
    /// Clears `key`'s holder, and its place in the holder index.
    fn clear(&mut self, key: &str) {
        if let Some(h) = self.keys.get_mut(key).and_then(|k| k.holder.take())
            && let Some(keys) = self.held_by.get_mut(&h.session_id)
        {
            keys.remove(key);
            if keys.is_empty() {
                self.held_by.remove(&h.session_id);
            }
        }
    }

    fn delete_session(&mut self, session_id: &str) {
        self.sessions.remove(session_id);
        for key in self.held_by.remove(session_id).unwrap_or_default() {
            if let Some(k) = self.keys.get_mut(&key) {
                k.holder = None;
            }
        }
    }

    /// Applies one write (it cannot fail once checked); a grant's token.
    fn apply(&mut self, w: &Write) -> Committed {
        match w {
            Write::CreateSession(s) => {
                self.sessions.insert(s.id.clone(), s.clone());
            }
            Write::DeleteSessions(ids) => ids.iter().for_each(|id| self.delete_session(id)),
            Write::Grant {
                key,
                session_id,
                lease_ms,
            } => return Some(self.grant(key, session_id, *lease_ms)),
            Write::SetLease {
                key,
                token,
                lease_ms,
            } => {
                if let Some(h) = self
                    .keys
                    .get_mut(key)
                    .and_then(|k| k.holder.as_mut())
                    .filter(|h| h.token == *token)
                {
                    h.lease_ms = *lease_ms;
                }
            }
            Write::ClearGrants(grants) => grants
                .iter()
                .for_each(|(key, token)| self.clear_grant(key, *token)),
            Write::RecordExpired {
                ids, principals, ..
            } => {
                // An id expires once (ids are random); a repeat would only
                // restore one tombstone twice, which a table does idempotently.
                self.tombstones.extend(
                    ids.iter()
                        .enumerate()
                        .map(|(i, id)| (id.clone(), principals.get(i).cloned().flatten())),
                );
                let over = self.tombstones.len().saturating_sub(MAX_TOMBSTONES);
                self.tombstones.drain(..over);
            }
        }
        None
    }

    fn tombstone_records(&self) -> Vec<TombstoneRecord> {
        self.tombstones
            .iter()
            .map(|(id, principal)| TombstoneRecord {
                id: id.clone(),
                age_ms: 0,
                principal: principal.clone(),
            })
            .collect()
    }

    fn grant(&mut self, key: &str, session_id: &str, lease_ms: u64) -> u64 {
        self.clear(key);
        let k = self
            .keys
            .entry(key.to_string())
            .or_insert_with(|| KeyRecord {
                key: key.to_string(),
                last_token: 0,
                holder: None,
            });
        k.last_token += 1;
        k.holder = Some(GrantRecord {
            token: k.last_token,
            session_id: session_id.to_string(),
            lease_ms,
        });
        let token = k.last_token;
        self.held_by
            .entry(session_id.to_string())
            .or_default()
            .insert(key.to_string());
        token
    }

    fn clear_grant(&mut self, key: &str, token: u64) {
        if self
            .keys
            .get(key)
            .and_then(|k| k.holder.as_ref())
            .is_some_and(|h| h.token == token)
        {
            self.clear(key);
        }
    }
}

impl MemoryStore {
    fn with<T>(&self, f: impl FnOnce(&mut Tables) -> T) -> T {
        f(&mut self.inner.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

#[async_trait]
impl LockStore for MemoryStore {
    fn kind(&self) -> &'static str {
        "memory"
    }

    fn durable(&self) -> bool {
        false
    }

    async fn load(&self) -> Result<Snapshot, StoreError> {
        Ok(self.with(|t| Snapshot {
            sessions: t.sessions.values().cloned().collect(),
            keys: t.keys.values().cloned().collect(),
            tombstones: t.tombstone_records(),
        }))
    }

    async fn load_live(&self) -> Result<Snapshot, StoreError> {
        Ok(self.with(|t| Snapshot {
            sessions: t.sessions.values().cloned().collect(),
            keys: t
                .keys
                .values()
                .filter(|k| k.holder.is_some())
                .cloned()
                .collect(),
            tombstones: t.tombstone_records(),
        }))
    }

    async fn last_token(&self, key: &str) -> Result<Option<u64>, StoreError> {
        Ok(self.with(|t| t.keys.get(key).map(|k| k.last_token)))
    }

    async fn commit(&self, writes: &[Write]) -> Result<Vec<Committed>, StoreError> {
        self.with(|t| {
            // Check what can fail before applying anything: all or nothing.
            let mut new_ids = HashSet::new();
            for w in writes {
                if let Write::CreateSession(s) = w
                    && (t.sessions.contains_key(&s.id) || !new_ids.insert(s.id.as_str()))
                {
                    return Err(StoreError::SessionExists(s.id.clone()));
                }
            }
            Ok(writes.iter().map(|w| t.apply(w)).collect())
        })
    }

    async fn ping(&self) -> Result<(), StoreError> {
        Ok(())
    }
}
