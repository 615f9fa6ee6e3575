//! What every session of one Redlock backend shares: its configuration
//! ([`RedlockConfig`]), its instances (one connection each, made on first
//! use), and the SDK's recorder its extend rounds are measured in.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use fencepost_sdk::metrics::Metrics;
use fencepost_sdk::{BootTimeClock, Clock, MarginPolicy, PrometheusMetrics};

use super::error::RedlockError;
use super::instance::{Instance, RedisInstance};
use super::quorum;
use super::round::Instances;

/// What a Redlock backend needs.
#[derive(Clone)]
pub struct RedlockConfig {
    /// The instances' URLs, `redis://IP:PORT`: independent redis-servers
    /// (no replication between them). Any number ≥ 1; the bench runs 3 or 5.
    pub urls: Vec<String>,
    /// The lock TTL the heartbeat is paced by (a held lock with a shorter
    /// TTL paces it faster): the worker's lease.
    pub ttl: Duration,
    /// The client safety margin policy (the SDK's); raised to Redlock's
    /// drift allowance where it is smaller (see [`quorum::margin_floor_ppm`]).
    pub margin: MarginPolicy,
    /// The heartbeat divisor k: an extend round every `ttl × (1 − m) / k`.
    pub heartbeat_divisor: u32,
    /// The per-instance timeout of a round; `None`: a tenth of the lock's
    /// TTL. Always at most `request_timeout` and at least 1 ms.
    pub instance_timeout: Option<Duration>,
    /// The upper bound of every request's timeout.
    pub request_timeout: Duration,
    /// Seeds each session's lock values and backoff jitter (session n:
    /// ChaCha8 stream n).
    pub seed: u64,
    /// The clock every deadline and round is timed on.
    pub clock: Arc<dyn Clock>,
    /// Shared Prometheus instruments (`--metrics-listen`); `None`: private ones.
    pub prometheus: Option<PrometheusMetrics>,
}

impl std::fmt::Debug for RedlockConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedlockConfig")
            .field("urls", &self.urls)
            .field("ttl", &self.ttl)
            .field("margin", &self.margin)
            .field("heartbeat_divisor", &self.heartbeat_divisor)
            .field("instance_timeout", &self.instance_timeout)
            .field("request_timeout", &self.request_timeout)
            .field("seed", &self.seed)
            .finish_non_exhaustive()
    }
}

impl RedlockConfig {
    /// `urls` pacing its heartbeat by `ttl`, with margin 0.30, heartbeat
    /// divisor 3, a per-instance timeout of a tenth of the TTL, a 1 s request
    /// timeout, seed 0 and the SDK's production clock (`CLOCK_BOOTTIME`).
    pub fn new<S: Into<String>>(urls: impl IntoIterator<Item = S>, ttl: Duration) -> Self {
        RedlockConfig {
            urls: urls.into_iter().map(Into::into).collect(),
            ttl,
            margin: MarginPolicy::default(),
            heartbeat_divisor: fencepost_sdk::lease::HEARTBEAT_DIVISOR,
            instance_timeout: None,
            request_timeout: Duration::from_secs(1),
            seed: 0,
            clock: Arc::new(BootTimeClock::new()),
            prometheus: None,
        }
    }
}

/// What every session of one `RedlockBackend` shares.
pub(crate) struct Inner {
    /// The configuration.
    pub(crate) config: RedlockConfig,
    /// The instances, in the order of `config.urls`.
    pub(crate) instances: Instances,
    /// The SDK's recorder: outcomes, histograms, counters, margins.
    pub(crate) metrics: Metrics,
    /// Sessions opened so far; session n draws from RNG stream n.
    pub(crate) sessions_opened: AtomicU64,
}

impl Inner {
    /// The instances of `config.urls` (parsed, not connected) and a recorder.
    pub(crate) fn new(config: RedlockConfig, metrics: Metrics) -> Result<Self, RedlockError> {
        if config.urls.is_empty() {
            return Err(RedlockError::NoInstances);
        }
        let connect = config.request_timeout;
        let instances = config
            .urls
            .iter()
            .map(|u| {
                RedisInstance::new(u.trim(), connect).map(|i| Arc::new(i) as Arc<dyn Instance>)
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(RedlockError::Url)?;
        Ok(Inner {
            config,
            instances: instances.into(),
            metrics,
            sessions_opened: AtomicU64::new(0),
        })
    }

    /// `config` over the given instances (tests: scripted ones).
    #[cfg(test)]
    pub(crate) fn with_instances(config: RedlockConfig, instances: Instances) -> Self {
        Inner {
            config,
            instances,
            metrics: Metrics::new(false),
            sessions_opened: AtomicU64::new(0),
        }
    }

    /// The margin (ppm) a deadline of a `ttl` lock is computed with: the
    /// policy's (adaptive: from the RTTs seen so far), raised to Redlock's
    /// drift allowance.
    pub(crate) fn margin_ppm(&self, ttl: Duration) -> u64 {
        let ppm = self
            .config
            .margin
            .margin_ppm(ttl, self.metrics.rtt_summary());
        quorum::effective_margin_ppm(ttl, ppm)
    }

    /// The per-instance timeout of a round on a `ttl` lock.
    pub(crate) fn instance_timeout(&self, ttl: Duration) -> Duration {
        self.config
            .instance_timeout
            .unwrap_or(ttl / 10)
            .min(self.config.request_timeout)
            .max(Duration::from_millis(1))
    }
}
