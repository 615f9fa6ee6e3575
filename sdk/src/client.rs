//! [`LockClient`]: one configuration, one HTTP connection pool, one set of
//! metrics, shared by every [`Session`] it opens. Sessions keep the client's
//! internals alive, so dropping the client does not stop them; closing or
//! dropping a session stops its heartbeat task.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use fencepost_api::lock::validate_owner;
use hdrhistogram::Histogram;

use crate::clock::Clock;
use crate::config::{ConfigError, LockClientConfig};
use crate::error::LockError;
use crate::lease::{self, RttSummary};
use crate::metrics::{ClientStats, Metrics};
use crate::session::Session;
use crate::transport::Http;

/// The entry point of the SDK: holds the base URL, timeouts, margin policy,
/// clock and metrics, and opens sessions. Cheap to clone (one shared core).
#[derive(Clone)]
pub struct LockClient {
    inner: Arc<ClientInner>,
}

/// What every session of a client shares.
pub(crate) struct ClientInner {
    /// The validated configuration.
    pub(crate) config: LockClientConfig,
    /// The clock every deadline is read from (a copy of `config.clock`).
    pub(crate) clock: Arc<dyn Clock>,
    /// The HTTP layer (one pooled reqwest client).
    pub(crate) http: Http,
    /// RTT histogram and counters.
    pub(crate) metrics: Metrics,
    /// Sessions opened so far; session n draws its jitter from RNG stream n.
    sessions_opened: AtomicU64,
}

impl ClientInner {
    /// The margin (ppm) for a grant of `granted_ms`, under the policy and, for
    /// an adaptive policy, the RTTs observed so far.
    pub(crate) fn margin_ppm(&self, granted_ms: u64) -> u64 {
        let rtt = if self.config.margin.is_adaptive() {
            self.metrics.rtt_summary()
        } else {
            RttSummary::default()
        };
        self.config
            .margin
            .margin_ppm(Duration::from_millis(granted_ms), rtt)
    }
}

impl LockClient {
    /// Validates `config` and builds the client. Does no I/O.
    pub fn new(config: LockClientConfig) -> Result<Self, ConfigError> {
        config.validate()?;
        let http =
            Http::new(&config.base_url, config.request_timeout).map_err(ConfigError::HttpClient)?;
        Ok(LockClient {
            inner: Arc::new(ClientInner {
                clock: config.clock.clone(),
                config,
                http,
                metrics: Metrics::new(),
                sessions_opened: AtomicU64::new(0),
            }),
        })
    }

    /// Opens a session (L1) for `owner_id` and starts its heartbeat task.
    /// Must be called inside a tokio runtime. The session's client deadline is
    /// `send + granted_ttl × (1 − margin)`.
    pub async fn open_session(&self, owner_id: &str) -> Result<Session, LockError> {
        validate_owner(owner_id).map_err(LockError::invalid_input)?;
        let inner = &self.inner;
        let reply = inner
            .http
            .create_session(
                &*inner.clock,
                owner_id,
                duration_ms(inner.config.session_ttl),
                inner.config.request_timeout,
            )
            .await;
        let granted = reply.result?;
        let ppm = inner.margin_ppm(granted.ttl_ms);
        let deadline = lease::client_deadline(reply.send, granted.ttl_ms, ppm);
        let ordinal = inner.sessions_opened.fetch_add(1, Ordering::Relaxed);
        Ok(Session::start(
            inner.clone(),
            granted.session_id,
            owner_id,
            granted.ttl_ms,
            deadline,
            ordinal,
        ))
    }

    /// The validated configuration.
    pub fn config(&self) -> &LockClientConfig {
        &self.inner.config
    }

    /// The clock the client reads deadlines from.
    pub fn clock(&self) -> Arc<dyn Clock> {
        self.inner.clock.clone()
    }

    /// A copy of the heartbeat RTT histogram (`lock.heartbeat.rtt`): every
    /// L2/L5 exchange that got a reply, send to reply, in µs, 3 significant
    /// digits. Exchanges that timed out or failed in transport have no RTT.
    pub fn rtt_histogram(&self) -> Histogram<u64> {
        self.inner.metrics.rtt_snapshot()
    }

    /// Empties the RTT histogram (the bench does this per cell). An adaptive
    /// margin goes back to warm-up (its ceiling) until it has 20 samples again.
    pub fn reset_rtt(&self) {
        self.inner.metrics.reset_rtt();
    }

    /// The client's counters.
    pub fn stats(&self) -> ClientStats {
        self.inner.metrics.stats()
    }

    /// The C5 SDK metrics in the Prometheus text format:
    /// `lock_heartbeat_rtt_seconds` (summary), `lock_session_lost_total{reason}`,
    /// `lock_lease_abandoned_total`.
    pub fn metrics_text(&self) -> String {
        self.inner.metrics.prometheus_text()
    }
}

/// A duration as whole milliseconds for the wire, at least 1.
pub(crate) fn duration_ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}
