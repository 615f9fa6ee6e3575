//! [`RedlockBackend`]: the Redlock client a worker holds and its
//! heartbeat (extend round) measurements.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use fencepost_sdk::LockError;
use fencepost_sdk::metrics::Metrics;

use super::session::RedlockSession;
use super::shared::{Inner, RedlockConfig};
use crate::backend::{BackendError, LockBackend, SdkRecorded};

/// A Redlock client: one connection per instance (made at the first
/// round), one recorder, shared by its sessions. Cheap to clone.
#[derive(Clone)]
pub struct RedlockBackend {
    inner: Arc<Inner>,
}

impl RedlockBackend {
    /// Validates `config` (the margin policy, at least one parseable URL)
    /// and builds the client. No I/O.
    pub fn new(config: RedlockConfig) -> Result<Self, BackendError> {
        config
            .margin
            .validate()
            .map_err(|e| LockError::BadRequest {
                message: e.to_string(),
                input: None,
            })?;
        let adaptive = config.margin.is_adaptive();
        let metrics = match &config.prometheus {
            Some(p) => Metrics::with_prometheus(adaptive, p.clone()),
            None => Metrics::new(adaptive),
        };
        let inner = Inner::new(config, metrics).map_err(BackendError::from)?;
        Ok(RedlockBackend {
            inner: Arc::new(inner),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &RedlockConfig {
        &self.inner.config
    }

    /// How many instances a round goes to.
    pub fn instances(&self) -> usize {
        self.inner.instances.len()
    }
}

impl SdkRecorded for RedlockBackend {
    fn recorder(&self) -> &Metrics {
        &self.inner.metrics
    }
}

impl LockBackend for RedlockBackend {
    type Session = RedlockSession;

    /// A client-side session: no I/O, never fails.
    async fn open_session(&self, owner: &str) -> Result<RedlockSession, BackendError> {
        let ordinal = self.inner.sessions_opened.fetch_add(1, Ordering::Relaxed);
        Ok(RedlockSession::open(self.inner.clone(), owner, ordinal))
    }
}
