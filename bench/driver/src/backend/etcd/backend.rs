//! [`EtcdBackend`]: the etcd lock client a worker holds, its heartbeat
//! measurements, and the session TTL a cell runs with on etcd.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use fencepost_sdk::LockError;
use fencepost_sdk::metrics::Metrics;
use tokio::sync::OnceCell;

use crate::backend::etcd::lease;
use crate::backend::etcd::session::EtcdSession;
use crate::backend::etcd::shared::{EtcdConfig, Inner};
use crate::backend::{BackendError, LockBackend, SdkRecorded};

/// The session TTL a cell runs with on etcd: the etcd lease every key
/// shares, `min(lease, session_ttl)` rounded up to whole seconds (at least 1 s).
pub fn session_ttl_on_etcd(lease: Duration, session_ttl: Duration) -> Duration {
    Duration::from_secs(lease::ttl_request_s(lease.min(session_ttl)).unsigned_abs())
}

/// An etcd lock client: one gRPC connection (made at the first session),
/// one recorder, shared by its sessions. Cheap to clone.
#[derive(Clone)]
pub struct EtcdBackend {
    inner: Arc<Inner>,
}

impl EtcdBackend {
    /// Validates `config` (the margin policy) and builds the client. No I/O.
    pub fn new(config: EtcdConfig) -> Result<Self, BackendError> {
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
        Ok(EtcdBackend {
            inner: Arc::new(Inner {
                config,
                client: OnceCell::new(),
                metrics,
                sessions_opened: AtomicU64::new(0),
            }),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &EtcdConfig {
        &self.inner.config
    }
}

impl SdkRecorded for EtcdBackend {
    fn recorder(&self) -> &Metrics {
        &self.inner.metrics
    }
}

impl LockBackend for EtcdBackend {
    type Session = EtcdSession;

    async fn open_session(&self, owner: &str) -> Result<EtcdSession, BackendError> {
        let ordinal = self.inner.sessions_opened.fetch_add(1, Ordering::Relaxed);
        EtcdSession::open(self.inner.clone(), owner, ordinal).await
    }
}
