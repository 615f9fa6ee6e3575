//! [`LockClient`]: one configuration, one HTTP connection pool, one set of
//! metrics (and the Prometheus instruments it records into, maybe shared
//! with other clients), shared by every [`Session`] it opens. Sessions keep the client's
//! internals alive, so dropping the client does not stop them; closing or
//! dropping a session stops its heartbeat task.

use std::sync::Arc;

use fencepost_api::lock::validate_owner;
use hdrhistogram::Histogram;

use crate::clock::Clock;
use crate::config::{ConfigError, LockClientConfig};
use crate::error::LockError;
use crate::inner::ClientInner;
use crate::lease;
use crate::metrics::{ClientStats, DeadlineKind, MarginStats, PrometheusMetrics};
use crate::session::Session;
use crate::transport::duration_ms;

/// The client's rustls configuration, when it uses TLS.
fn tls_config(config: &LockClientConfig) -> Result<Option<Arc<rustls::ClientConfig>>, ConfigError> {
    if config.uses_tls() {
        crate::tls::client_config(&config.tls).map(Some)
    } else {
        Ok(None)
    }
}

/// The entry point of the SDK: holds the base URL, timeouts, margin policy,
/// clock and metrics, and opens sessions. Cheap to clone (one shared core).
#[derive(Clone)]
pub struct LockClient {
    inner: Arc<ClientInner>,
}

impl LockClient {
    /// Validates `config` and builds the client. Does no network I/O; with
    /// TLS in use ([`LockClientConfig::uses_tls`]) it reads the CA bundle (or
    /// the system's roots) and the client certificate now, so an unusable
    /// file fails here rather than at the first request.
    pub fn new(config: LockClientConfig) -> Result<Self, ConfigError> {
        config.validate()?;
        let tls = tls_config(&config)?;
        Ok(LockClient {
            inner: Arc::new(ClientInner::new(config, tls, None)),
        })
    }

    /// A client on `config` that records into `metrics` (cheap, shared
    /// instruments) instead of private ones: give several clients the same
    /// `PrometheusMetrics` and register it once
    /// ([`PrometheusMetrics::register`]) to export one set of families for
    /// all of them. Build it for this configuration
    /// ([`PrometheusMetrics::for_config`]) so that the heartbeat histograms
    /// carry its trigger-1 budgets as boundaries.
    pub fn with_prometheus(
        config: LockClientConfig,
        metrics: PrometheusMetrics,
    ) -> Result<Self, ConfigError> {
        config.validate()?;
        let tls = tls_config(&config)?;
        Ok(LockClient {
            inner: Arc::new(ClientInner::new(config, tls, Some(metrics))),
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
        inner.metrics.margin_applied(DeadlineKind::Open, ppm);
        let ordinal = inner.next_session_ordinal();
        Ok(Session::start(
            inner.clone(),
            granted.session_id,
            owner_id,
            granted.ttl_ms,
            (reply.send, deadline),
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

    /// A copy of the raw heartbeat RTT histogram (`lock.heartbeat.rtt`), µs,
    /// 3 significant digits: every L2 exchange that got a reply (any
    /// status), send to reply, and every one that timed out, recorded at the
    /// time it was given up: a right-censored sample, "≥" its value.
    /// Exchanges that failed in transport have no RTT (they are counted in
    /// [`ClientStats::hb_errors`]). Renewals (L5) are in
    /// [`renew_rtt_histogram`](Self::renew_rtt_histogram).
    pub fn rtt_histogram(&self) -> Histogram<u64> {
        self.inner.metrics.rtt_snapshot()
    }

    /// A copy of the heartbeat RTT histogram corrected for coordinated
    /// omission, µs: measured from the *scheduled* send time. The heartbeat
    /// runs at a fixed rate; a late wake-up serves every scheduled tick that
    /// fell due with one L2 (no catch-up burst) and records one sample per
    /// such tick, `reply − scheduled(tick)`, each at least that tick's
    /// lateness. Ticks that
    /// were due before the session deadline but found the session lost
    /// record their lateness (censored, "≥"). After a stall of S at period P
    /// this histogram gets about S / P samples where the raw one gets one.
    pub fn corrected_rtt_histogram(&self) -> Histogram<u64> {
        self.inner.metrics.corrected_snapshot()
    }

    /// A copy of the raw renewal RTT histogram (`lock_renewal_rtt_seconds`),
    /// µs: every L5 that got a reply (any status, `LOCK_LOST` included),
    /// send to reply, and every one that timed out at its give-up time
    /// (censored, "≥"). Outcomes: [`ClientStats::renew_attempts`] and the
    /// counts beside it.
    pub fn renew_rtt_histogram(&self) -> Histogram<u64> {
        self.inner.metrics.renew_rtt_snapshot()
    }

    /// A copy of the renewal RTT histogram measured from the scheduled
    /// heartbeat tick that sent each L5 (`reply − scheduled`,
    /// coordinated-omission corrected), µs.
    pub fn renew_corrected_rtt_histogram(&self) -> Histogram<u64> {
        self.inner.metrics.renew_corrected_snapshot()
    }

    /// A copy of the tick-lag histogram, µs: for every heartbeat tick that
    /// sent, its scheduled time to the actual send (0 when on time).
    pub fn tick_lag_histogram(&self) -> Histogram<u64> {
        self.inner.metrics.tick_lag_snapshot()
    }

    /// A copy of the heartbeat gap histogram, µs
    /// ([`Metrics::gap_snapshot`](crate::Metrics::gap_snapshot)): per session,
    /// from the send of the last acknowledged L1/L2 to the receipt of the next
    /// acknowledgement (the time its deadline was exposed), plus one censored
    /// gap ("≥") per session lost at its deadline, at the moment the loss was
    /// found. Gaps longer than their window are counted in
    /// [`ClientStats::hb_gaps_over_window`].
    pub fn gap_histogram(&self) -> Histogram<u64> {
        self.inner.metrics.gap_snapshot()
    }

    /// Empties the four heartbeat histograms (raw, corrected, tick lag, gaps)
    /// *and* the adaptive margin's own RTT view, which puts an adaptive
    /// margin back into warm-up (its ceiling until 20 samples). For a
    /// warm-up cut that keeps the policy's view, use
    /// [`reset_measurements`](Self::reset_measurements). The Prometheus
    /// instruments are not reset (they are monotonic).
    pub fn reset_rtt(&self) {
        self.inner.metrics.reset_rtt();
    }

    /// Zeroes every measurement: the four histograms, every counter of
    /// [`stats`](Self::stats) (heartbeat outcomes and ticks, sessions and
    /// handles lost, leases abandoned) and the [`margin_stats`](Self::margin_stats).
    /// Not the adaptive margin policy's own RTT view: the policy keeps the
    /// margin it has learnt. For the bench's warm-up exclusion.
    ///
    /// Nor the Prometheus instruments ([`prometheus`](Self::prometheus),
    /// [`metrics_text`](Self::metrics_text)): they are monotonic, as
    /// Prometheus expects of counters and histograms; a scraper takes
    /// `increase()` over its own window.
    pub fn reset_measurements(&self) {
        self.inner.metrics.reset_measurements();
    }

    /// The client's counters.
    pub fn stats(&self) -> ClientStats {
        self.inner.metrics.stats()
    }

    /// The margins actually applied at each client-deadline computation
    /// (`margin_effective`), per exchange (L1, L2, L4, L5, L7): count, mean,
    /// min, max. Under a fixed policy every one is that margin; under the
    /// adaptive policy they show what it chose.
    pub fn margin_stats(&self) -> MarginStats {
        self.inner.metrics.margin_stats()
    }

    /// The Prometheus instruments the client records into: the ones given
    /// with [`with_prometheus`](Self::with_prometheus) (shared), else the client's
    /// private ones. Register them into the application's registry with
    /// [`PrometheusMetrics::register`].
    pub fn prometheus(&self) -> &PrometheusMetrics {
        self.inner.metrics.prometheus()
    }

    /// The SDK's metric families in the classic Prometheus text format
    /// ([`metrics::CONTENT_TYPE`](crate::metrics::CONTENT_TYPE),
    /// `prometheus-client`'s `prometheus_text` encoder): a private registry
    /// holding [`prometheus`](Self::prometheus) alone, encoded now. The
    /// families: `lock_heartbeat_rtt_seconds`,
    /// `lock_heartbeat_rtt_corrected_seconds`,
    /// `lock_heartbeat_tick_lag_seconds`, `lock_heartbeat_gap_seconds`
    /// (histograms whose boundaries include this configuration's trigger-1
    /// budgets), `lock_heartbeat_gaps_over_window_total`,
    /// `lock_heartbeat_outcomes_total{outcome}`, `lock_heartbeat_ticks_total`,
    /// `lock_heartbeat_ticks_missed_total`, `lock_session_lost_total{reason}`,
    /// `lock_handles_lost_total`, `lock_lease_abandoned_total`,
    /// `lock_acquires_total{outcome}`, `lock_margin_effective{exchange}`
    /// (histogram) and the clock gauges `lock_clock_maxerror_seconds`,
    /// `lock_clock_esterror_seconds`, `lock_clock_synchronised` (read from
    /// the kernel now; absent when it cannot be read).
    ///
    /// Values count since the instruments were built and are never reset.
    /// When the client was given shared instruments
    /// ([`with_prometheus`](Self::with_prometheus)), the text is those
    /// instruments': the sum over every client sharing them, not this
    /// client's part (that is [`stats`](Self::stats)).
    pub fn metrics_text(&self) -> String {
        self.inner.metrics.prometheus_text()
    }
}
