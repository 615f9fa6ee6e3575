//! What every session of one etcd backend shares: its configuration
//! ([`EtcdConfig`]), its connection, made at the first session, and the SDK's
//! recorder its keep-alives are measured in.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use fencepost_sdk::metrics::Metrics;
use fencepost_sdk::{BootTimeClock, Clock, MarginPolicy, PrometheusMetrics};
use tokio::sync::OnceCell;

use crate::backend::BackendError;

/// What an etcd backend needs.
#[derive(Clone)]
pub struct EtcdConfig {
    /// The etcd client URL, `http://IP:PORT`.
    pub endpoint: String,
    /// The lease TTL each session asks for (rounded up to whole seconds).
    pub ttl: Duration,
    /// The client safety margin policy (the SDK's).
    pub margin: MarginPolicy,
    /// The heartbeat divisor k: keep-alives every `ttl × (1 − m) / k` (the
    /// SDK's `lock.client.heartbeat-divisor`).
    pub heartbeat_divisor: u32,
    /// The timeout of every request (bounded by the deadline it protects).
    pub request_timeout: Duration,
    /// Seeds each session's backoff jitter (session n: ChaCha8 stream n).
    pub seed: u64,
    /// The clock every deadline is read from.
    pub clock: Arc<dyn Clock>,
    /// Shared Prometheus instruments (`--metrics-listen`), as the SDK's
    /// clients take them; `None`: private ones.
    pub prometheus: Option<PrometheusMetrics>,
}

impl std::fmt::Debug for EtcdConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdConfig")
            .field("endpoint", &self.endpoint)
            .field("ttl", &self.ttl)
            .field("margin", &self.margin)
            .field("heartbeat_divisor", &self.heartbeat_divisor)
            .field("request_timeout", &self.request_timeout)
            .field("seed", &self.seed)
            .finish_non_exhaustive()
    }
}

impl EtcdConfig {
    /// `endpoint` with a `ttl` lease: margin 0.30, heartbeat divisor 3, 1 s request timeout,
    /// seed 0, the SDK's production clock (`CLOCK_BOOTTIME`).
    pub fn new(endpoint: impl Into<String>, ttl: Duration) -> Self {
        EtcdConfig {
            endpoint: endpoint.into(),
            ttl,
            margin: MarginPolicy::default(),
            heartbeat_divisor: fencepost_sdk::lease::HEARTBEAT_DIVISOR,
            request_timeout: Duration::from_secs(1),
            seed: 0,
            clock: Arc::new(BootTimeClock::new()),
            prometheus: None,
        }
    }
}

/// What every session of one `EtcdBackend` shares.
pub(crate) struct Inner {
    /// The configuration.
    pub(crate) config: EtcdConfig,
    /// The etcd client, connected on first use (connecting is async; the
    /// worker is built synchronously).
    pub(crate) client: OnceCell<etcd_client::Client>,
    /// The SDK's recorder: outcomes, histograms, counters, margins.
    pub(crate) metrics: Metrics,
    /// Sessions opened so far; session n draws its jitter from RNG stream n.
    pub(crate) sessions_opened: AtomicU64,
}

impl Inner {
    /// The margin (ppm) for a lease of `granted_ms` under the policy and,
    /// for an adaptive policy, the RTTs observed so far.
    pub(crate) fn margin_ppm(&self, granted_ms: u64) -> u64 {
        self.config.margin.margin_ppm(
            Duration::from_millis(granted_ms),
            self.metrics.rtt_summary(),
        )
    }

    /// The connected client (a cheap clone sharing the connection).
    pub(crate) async fn client(&self) -> Result<etcd_client::Client, BackendError> {
        let options = etcd_client::ConnectOptions::new()
            .with_connect_timeout(self.config.request_timeout)
            .with_tcp_keepalive(Duration::from_secs(30));
        let c = self
            .client
            .get_or_try_init(|| {
                etcd_client::Client::connect([self.config.endpoint.as_str()], Some(options))
            })
            .await?;
        Ok(c.clone())
    }
}
