//! [`RedisBackend`]: the redis lock client a worker holds — its
//! configuration ([`RedisConfig`]), its connection, and the SDK recorder its
//! renew exchanges are measured in, shared by its sessions — and its
//! heartbeat measurements.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use fencepost_sdk::LockError;
use fencepost_sdk::metrics::Metrics;

use crate::backend::redis::session::RedisSession;
use crate::backend::redis::shared::Inner;
pub use crate::backend::redis::shared::RedisConfig;
use crate::backend::{BackendError, LockBackend, SdkRecorded};

/// A redis lock client: one multiplexed connection (made at the first
/// session), one recorder, shared by its sessions. Cheap to clone.
#[derive(Clone)]
pub struct RedisBackend {
    inner: Arc<Inner>,
}

impl RedisBackend {
    /// Validates `config` (the margin policy, the URL) and builds the client. No I/O.
    pub fn new(config: RedisConfig) -> Result<Self, BackendError> {
        config
            .margin
            .validate()
            .map_err(|e| LockError::BadRequest {
                message: e.to_string(),
                input: None,
            })?;
        let client = ::redis::Client::open(config.url.as_str())?;
        let adaptive = config.margin.is_adaptive();
        let metrics = match &config.prometheus {
            Some(p) => Metrics::with_prometheus(adaptive, p.clone()),
            None => Metrics::new(adaptive),
        };
        Ok(RedisBackend {
            inner: Arc::new(Inner {
                config,
                client,
                conn: Mutex::new(None),
                metrics,
                sessions_opened: AtomicU64::new(0),
            }),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &RedisConfig {
        &self.inner.config
    }
}

impl SdkRecorded for RedisBackend {
    fn recorder(&self) -> &Metrics {
        &self.inner.metrics
    }
}

impl LockBackend for RedisBackend {
    type Session = RedisSession;

    async fn open_session(&self, owner: &str) -> Result<RedisSession, BackendError> {
        let ordinal = self.inner.sessions_opened.fetch_add(1, Ordering::Relaxed);
        RedisSession::open(self.inner.clone(), owner, ordinal).await
    }
}
