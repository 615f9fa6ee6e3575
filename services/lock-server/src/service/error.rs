//! [`ServiceError`]: why a service operation failed: a refusal with its C1
//! code, the store, or a replica that does not serve. Nothing changed in any
//! of the three cases.

use crate::core::CoreError;
use crate::store::StoreError;

/// Why an operation failed: a refusal (a C1 code) or the store.
#[derive(Debug, thiserror::Error)]
pub enum ServiceError {
    /// The request was refused; nothing changed.
    #[error(transparent)]
    Refused(#[from] CoreError),
    /// The store failed; nothing changed. Retry later.
    #[error("the lock store is unavailable: {0}")]
    Store(#[from] StoreError),
    /// This replica does not serve (C1 §6): a standby, a leader whose leader
    /// lease may have run out, or one deposed mid-request. Nothing changed.
    #[error("this replica is not the leader")]
    NotLeader {
        /// The serving leader's base URL, when known.
        leader: Option<String>,
    },
}
