//! The etcd backend (issue 15): fencepost's client-side lease arithmetic on
//! an etcd v3 lock, through the `etcd-client` crate (gRPC).
//!
//! | fencepost (C1/C3)            | etcd, as this adapter does it |
//! |---|---|
//! | L1 open a session            | `LeaseGrant(ttl)`; deadline `send + ttl × (1 − m)` |
//! | L2 heartbeat                 | one `LeaseKeepAlive` on the session's stream, sent and answered before the next; same fixed-rate schedule, period `ttl × (1 − m) / 3` |
//! | L4 acquire                   | `txn(create_revision(key) == 0 → put(key, owner, lease))`, retried with the SDK's jittered backoff within the budget |
//! | fencing token                | the key's create revision (the txn's header revision): strictly increasing per key, cluster-wide |
//! | L5 renew                     | none: the key lives on the session's lease, so every keep-alive renews it |
//! | L6 release                   | `txn(create_revision(key) == token → delete(key))`: never deletes a successor's key |
//! | L3 close                     | `LeaseRevoke` (deletes the session's keys at once) |
//! | 410 SESSION_EXPIRED          | a keep-alive answered with TTL 0 (etcd no longer knows the lease) |
//!
//! Where etcd differs, and what that does to the measurement:
//! - **No grace.** etcd's lessor revokes a lease once its TTL has run out on
//!   the leader (it checks every 500 ms) and the key is free for the next
//!   acquire at once; fencepost's server keeps a lapsed grant in `GRACE` for
//!   `offset_max + 2ρ·lease + quantum` first. On etcd only the client margin
//!   stands between a slow client and a second holder; the fences catch the
//!   rest.
//! - **Whole seconds.** A lease TTL is an integer number of seconds
//!   ([`lease::ttl_request_s`] rounds up; the smallest etcd grants is 1 s with
//!   the flags of [`server`], 2 s with etcd's defaults). The session TTL a
//!   cell runs with on etcd is that rounded value, and the key shares it.
//! - **Keep-alive answers with the lease's TTL** (renewed to its full
//!   length) rather than a grant of the requested TTL; TTL 0 means lost.
//!
//! Measurement: every keep-alive is recorded in the SDK's own recorder
//! (`fencepost_sdk::metrics::Metrics`) with the SDK's schedule arithmetic
//! (`fencepost_sdk::schedule`): outcomes (reply/timeout/error), raw RTT with
//! timeouts censored at their give-up time, RTT corrected from the scheduled
//! send, tick lag, margins, sessions and handles lost. So `hb_*` columns mean
//! the same on both backends.

pub mod lease;
pub mod server;
mod session;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use fencepost_sdk::metrics::Metrics;
use fencepost_sdk::{
    BootTimeClock, ClientStats, Clock, Histogram, LockError, MarginPolicy, MarginStats,
};
use tokio::sync::OnceCell;

pub use session::{EtcdHandle, EtcdSession};

use super::{BackendError, HeartbeatStats, LockBackend};

/// The session TTL a cell runs with on etcd: the etcd lease every key
/// shares, `min(lease, session_ttl)` rounded up to whole seconds (at least 1 s).
pub fn session_ttl_on_etcd(lease: Duration, session_ttl: Duration) -> Duration {
    Duration::from_secs(lease::ttl_request_s(lease.min(session_ttl)).unsigned_abs())
}

/// What an [`EtcdBackend`] needs.
#[derive(Clone)]
pub struct EtcdConfig {
    /// The etcd client URL, `http://IP:PORT`.
    pub endpoint: String,
    /// The lease TTL each session asks for (rounded up to whole seconds).
    pub ttl: Duration,
    /// The client safety margin policy (the SDK's).
    pub margin: MarginPolicy,
    /// The timeout of every request (bounded by the deadline it protects).
    pub request_timeout: Duration,
    /// Seeds each session's backoff jitter (session n: ChaCha8 stream n).
    pub seed: u64,
    /// The clock every deadline is read from.
    pub clock: Arc<dyn Clock>,
}

impl std::fmt::Debug for EtcdConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("EtcdConfig")
            .field("endpoint", &self.endpoint)
            .field("ttl", &self.ttl)
            .field("margin", &self.margin)
            .field("request_timeout", &self.request_timeout)
            .field("seed", &self.seed)
            .finish_non_exhaustive()
    }
}

impl EtcdConfig {
    /// `endpoint` with a `ttl` lease: margin 0.30, 1 s request timeout,
    /// seed 0, the SDK's production clock (`CLOCK_BOOTTIME`).
    pub fn new(endpoint: impl Into<String>, ttl: Duration) -> Self {
        EtcdConfig {
            endpoint: endpoint.into(),
            ttl,
            margin: MarginPolicy::default(),
            request_timeout: Duration::from_secs(1),
            seed: 0,
            clock: Arc::new(BootTimeClock::new()),
        }
    }
}

/// An etcd lock client: one gRPC connection (made at the first session),
/// one recorder, shared by its sessions. Cheap to clone.
#[derive(Clone)]
pub struct EtcdBackend {
    inner: Arc<Inner>,
}

/// What every session of one [`EtcdBackend`] shares.
struct Inner {
    /// The configuration.
    config: EtcdConfig,
    /// The etcd client, connected on first use (connecting is async; the
    /// worker is built synchronously).
    client: OnceCell<etcd_client::Client>,
    /// The SDK's recorder: outcomes, histograms, counters, margins.
    metrics: Metrics,
    /// Sessions opened so far; session n draws its jitter from RNG stream n.
    sessions_opened: AtomicU64,
}

impl Inner {
    /// The margin (ppm) for a lease of `granted_ms` under the policy and,
    /// for an adaptive policy, the RTTs observed so far.
    fn margin_ppm(&self, granted_ms: u64) -> u64 {
        self.config.margin.margin_ppm(
            Duration::from_millis(granted_ms),
            self.metrics.rtt_summary(),
        )
    }

    /// The connected client (a cheap clone sharing the connection).
    async fn client(&self) -> Result<etcd_client::Client, BackendError> {
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
        Ok(EtcdBackend {
            inner: Arc::new(Inner {
                config,
                client: OnceCell::new(),
                metrics: Metrics::new(adaptive),
                sessions_opened: AtomicU64::new(0),
            }),
        })
    }

    /// The configuration.
    pub fn config(&self) -> &EtcdConfig {
        &self.inner.config
    }
}

impl HeartbeatStats for EtcdBackend {
    fn stats(&self) -> ClientStats {
        self.inner.metrics.stats()
    }

    fn rtt_histogram(&self) -> Histogram<u64> {
        self.inner.metrics.rtt_snapshot()
    }

    fn corrected_rtt_histogram(&self) -> Histogram<u64> {
        self.inner.metrics.corrected_snapshot()
    }

    fn tick_lag_histogram(&self) -> Histogram<u64> {
        self.inner.metrics.tick_lag_snapshot()
    }

    fn margin_stats(&self) -> MarginStats {
        self.inner.metrics.margin_stats()
    }

    fn reset_measurements(&self) {
        self.inner.metrics.reset_measurements()
    }
}

impl LockBackend for EtcdBackend {
    type Session = EtcdSession;

    async fn open_session(&self, owner: &str) -> Result<EtcdSession, BackendError> {
        let ordinal = self.inner.sessions_opened.fetch_add(1, Ordering::Relaxed);
        EtcdSession::open(self.inner.clone(), owner, ordinal).await
    }
}
