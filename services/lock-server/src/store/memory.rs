//! `memory:` — the store kept in this process only. Tokens are strictly
//! increasing for the life of the process but start again after a restart, so
//! it is for tests and throwaway runs, never for anything that must survive a crash.

use std::collections::HashMap;
use std::sync::Mutex;

use async_trait::async_trait;

use super::{GrantRecord, KeyRecord, LockStore, SessionRecord, Snapshot, StoreError};

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

    async fn load(&self) -> Result<Snapshot, StoreError> {
        Ok(self.with(|t| Snapshot {
            sessions: t.sessions.values().cloned().collect(),
            keys: t.keys.values().cloned().collect(),
        }))
    }

    async fn create_session(&self, session: &SessionRecord) -> Result<(), StoreError> {
        self.with(|t| t.sessions.insert(session.id.clone(), session.clone()));
        Ok(())
    }

    async fn delete_session(&self, session_id: &str) -> Result<(), StoreError> {
        self.with(|t| {
            t.sessions.remove(session_id);
            for k in t.keys.values_mut() {
                if k.holder
                    .as_ref()
                    .is_some_and(|h| h.session_id == session_id)
                {
                    k.holder = None;
                }
            }
        });
        Ok(())
    }

    async fn grant(&self, key: &str, session_id: &str, lease_ms: u64) -> Result<u64, StoreError> {
        Ok(self.with(|t| {
            let k = t.keys.entry(key.to_string()).or_insert_with(|| KeyRecord {
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
            k.last_token
        }))
    }

    async fn set_lease(&self, key: &str, token: u64, lease_ms: u64) -> Result<(), StoreError> {
        self.with(|t| {
            if let Some(h) = t
                .keys
                .get_mut(key)
                .and_then(|k| k.holder.as_mut())
                .filter(|h| h.token == token)
            {
                h.lease_ms = lease_ms;
            }
        });
        Ok(())
    }

    async fn clear_grant(&self, key: &str, token: u64) -> Result<(), StoreError> {
        self.with(|t| {
            if let Some(k) = t.keys.get_mut(key)
                && k.holder.as_ref().is_some_and(|h| h.token == token)
            {
                k.holder = None;
            }
        });
        Ok(())
    }

    async fn ping(&self) -> Result<(), StoreError> {
        Ok(())
    }
}
