//! [`ClientInner`]: what every session of a [`LockClient`](crate::LockClient)
//! shares — the validated configuration, the clock, the HTTP layer and the
//! metrics — and the margin it computes from them. It sits below both the
//! client (which builds it) and the sessions (which hold it), so neither
//! names the other for it.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crate::clock::Clock;
use crate::config::LockClientConfig;
use crate::lease::RttSummary;
use crate::metrics::{Metrics, PrometheusMetrics};
use crate::transport::Http;

/// What every session of a client shares.
pub(crate) struct ClientInner {
    /// The validated configuration.
    pub(crate) config: LockClientConfig,
    /// The clock every deadline is read from (a copy of `config.clock`).
    pub(crate) clock: Arc<dyn Clock>,
    /// The HTTP layer (one pooled HTTP/1.1 client, [`crate::http`]).
    pub(crate) http: Http,
    /// Histograms, counters and margin stats, and the Prometheus instruments.
    pub(crate) metrics: Metrics,
    /// Sessions opened so far; session n draws its jitter from RNG stream n.
    sessions_opened: AtomicU64,
}

impl ClientInner {
    /// The shared core of a client on a validated `config`, recording into
    /// `prom` (shared instruments) or, without, private ones built for
    /// `config`; `https://` connections are made with `tls`. Does no I/O.
    pub(crate) fn new(
        config: LockClientConfig,
        tls: Option<Arc<rustls::ClientConfig>>,
        prom: Option<PrometheusMetrics>,
    ) -> Self {
        let http = Http::new(
            &config.urls(),
            config.request_timeout,
            tls,
            config.token.as_ref(),
        );
        let adaptive = config.margin.is_adaptive();
        let prom = prom.unwrap_or_else(|| PrometheusMetrics::for_config(&config));
        ClientInner {
            clock: config.clock.clone(),
            config,
            http,
            metrics: Metrics::with_prometheus(adaptive, prom),
            sessions_opened: AtomicU64::new(0),
        }
    }

    /// The ordinal of the next session opened (0, 1, …): its RNG stream.
    pub(crate) fn next_session_ordinal(&self) -> u64 {
        self.sessions_opened.fetch_add(1, Ordering::Relaxed)
    }

    /// The margin (ppm) for a grant of `granted_ms`, under the policy and, for
    /// an adaptive policy, the RTTs it has observed (its own view, which
    /// [`LockClient::reset_measurements`](crate::LockClient::reset_measurements)
    /// leaves alone).
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
