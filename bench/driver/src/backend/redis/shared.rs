//! What the redis adapter's pieces share: the configuration
//! ([`RedisConfig`]), the connection and recorder of one backend
//! ([`Inner`]), and of one session, the state its calls and its renew task
//! share ([`Shared`], [`Grant`]), with the scripts they run ([`eval`]).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, LazyLock, Mutex, MutexGuard};
use std::time::Duration;

use ::redis::Script;
use ::redis::aio::MultiplexedConnection;
use fencepost_sdk::lease;
use fencepost_sdk::metrics::Metrics;
use fencepost_sdk::{
    BootTimeClock, Clock, LockError, LostReason, MarginPolicy, MonoTime, PrometheusMetrics,
};
use rand_chacha::ChaCha8Rng;
use tracing::warn;

use super::scripts;
use crate::backend::BackendError;
use crate::backend::etcd::lease::LeaseState;

/// What a redis backend needs.
#[derive(Clone)]
pub struct RedisConfig {
    /// The Redis URL, `redis://IP:PORT`.
    pub url: String,
    /// The lease: every lock's `PX`, and the renew that extends it.
    pub ttl: Duration,
    /// The session TTL: the client-side session's deadline is `send +
    /// session_ttl × (1 − m)` from each answered renew, as the SDK's is
    /// from each heartbeat (Redis keeps no session).
    pub session_ttl: Duration,
    /// The client safety margin policy (the SDK's).
    pub margin: MarginPolicy,
    /// The heartbeat divisor k: renews every `min(ttl, session_ttl) × (1 − m) / k`.
    pub heartbeat_divisor: u32,
    /// The timeout of every request (bounded by the deadline it protects).
    pub request_timeout: Duration,
    /// Seeds each session's owner id and backoff jitter (session n: ChaCha8 stream n).
    pub seed: u64,
    /// The clock every deadline is read from.
    pub clock: Arc<dyn Clock>,
    /// Shared Prometheus instruments (`--metrics-listen`); `None`: private ones.
    pub prometheus: Option<PrometheusMetrics>,
}

impl std::fmt::Debug for RedisConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisConfig")
            .field("url", &self.url)
            .field("ttl", &self.ttl)
            .field("session_ttl", &self.session_ttl)
            .field("margin", &self.margin)
            .field("heartbeat_divisor", &self.heartbeat_divisor)
            .field("request_timeout", &self.request_timeout)
            .field("seed", &self.seed)
            .finish_non_exhaustive()
    }
}

impl RedisConfig {
    /// `url` with a `ttl` lease and session TTL: margin 0.30, heartbeat
    /// divisor 3, 1 s request timeout, seed 0, the SDK's production clock
    /// (`CLOCK_BOOTTIME`).
    pub fn new(url: impl Into<String>, ttl: Duration) -> Self {
        RedisConfig {
            url: url.into(),
            ttl,
            session_ttl: ttl,
            margin: MarginPolicy::default(),
            heartbeat_divisor: fencepost_sdk::lease::HEARTBEAT_DIVISOR,
            request_timeout: Duration::from_secs(1),
            seed: 0,
            clock: Arc::new(BootTimeClock::new()),
            prometheus: None,
        }
    }

    /// The lease in ms (at least 1: `PX 0` is refused by Redis).
    pub fn lease_ms(&self) -> u64 {
        u64::try_from(self.ttl.as_millis())
            .unwrap_or(u64::MAX)
            .max(1)
    }

    /// The session TTL in ms (at least 1).
    pub fn session_ms(&self) -> u64 {
        u64::try_from(self.session_ttl.as_millis())
            .unwrap_or(u64::MAX)
            .max(1)
    }
}

/// What every session of one [`RedisBackend`] shares.
pub(crate) struct Inner {
    /// The configuration.
    pub(crate) config: RedisConfig,
    /// The Redis client (parsed URL; no connection of its own).
    pub(super) client: ::redis::Client,
    /// The multiplexed connection, made on first use and dropped after a
    /// transport error so the next call reconnects (a restarted server).
    /// A std mutex held only to clone or replace it, never across I/O.
    pub(super) conn: Mutex<Option<MultiplexedConnection>>,
    /// The SDK's recorder: outcomes, histograms, counters, margins.
    pub(crate) metrics: Metrics,
    /// Sessions opened so far; session n draws its owner id and jitter from stream n.
    pub(super) sessions_opened: AtomicU64,
}

impl Inner {
    /// The margin (ppm) for the lease under the policy and, for an adaptive
    /// policy, the RTTs observed so far.
    pub(crate) fn margin_ppm(&self) -> u64 {
        self.config
            .margin
            .margin_ppm(self.config.ttl, self.metrics.rtt_summary())
    }

    /// The connection (a cheap clone sharing it), connecting within `timeout` if needed.
    pub(crate) async fn conn(
        &self,
        timeout: Duration,
    ) -> Result<MultiplexedConnection, BackendError> {
        if let Some(c) = self.conn.lock().unwrap_or_else(|e| e.into_inner()).clone() {
            return Ok(c);
        }
        // Our own timeouts bound every call; the crate's would cut them short.
        let config = ::redis::AsyncConnectionConfig::new()
            .set_connection_timeout(Some(timeout))
            .set_response_timeout(None);
        let c = tokio::time::timeout(
            timeout,
            self.client
                .get_multiplexed_async_connection_with_config(&config),
        )
        .await
        .map_err(|_| LockError::Timeout { after: timeout })??;
        *self.conn.lock().unwrap_or_else(|e| e.into_inner()) = Some(c.clone());
        Ok(c)
    }

    /// Forgets the connection after a transport error: the next call reconnects.
    pub(crate) fn reset_conn(&self) {
        self.conn.lock().unwrap_or_else(|e| e.into_inner()).take();
    }
}

/// The acquire script ([`scripts::ACQUIRE`]).
pub(super) static ACQUIRE: LazyLock<Script> = LazyLock::new(|| Script::new(scripts::ACQUIRE));
/// The renew script ([`scripts::RENEW`]).
pub(super) static RENEW: LazyLock<Script> = LazyLock::new(|| Script::new(scripts::RENEW));
/// The release script ([`scripts::RELEASE`]).
pub(super) static RELEASE: LazyLock<Script> = LazyLock::new(|| Script::new(scripts::RELEASE));

/// Locks a std mutex, ignoring poisoning (nothing here is left half-updated).
pub(super) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A listener the worker registered.
pub(super) type Listener = Box<dyn Fn() + Send + Sync>;

/// One grant as the session tracks it.
#[derive(Debug)]
pub(super) struct Grant {
    /// The caller's key (`payout:N`).
    pub(super) key: Arc<str>,
    /// The Redis key holding the lock.
    pub(super) lock_key: String,
    /// The fencing token.
    pub(super) token: u64,
    /// The value stored (`OWNER:TOKEN`), compared by renew and release.
    pub(super) value: String,
    /// The grant's client deadline and loss flag.
    pub(super) lease: LeaseState,
}

/// What the session's calls and its renew task share.
pub(super) struct Shared {
    /// The backend: configuration, connection, recorder.
    pub(super) inner: Arc<Inner>,
    /// The owner id in every value this session writes (unique per session).
    pub(super) owner: String,
    /// The session's client deadline and loss flag.
    pub(super) lease: LeaseState,
    /// The send (ns on the clock) of the last acknowledged renew exchange:
    /// the start of the heartbeat gap in progress.
    pub(super) last_ack_send_nanos: AtomicU64,
    /// Grants held and not released: renewed on every tick, reported lost with the session.
    pub(super) grants: Mutex<Vec<Arc<Grant>>>,
    /// Values whose release was not confirmed (timeout, error): never
    /// taken back as "ours" by a later acquire (their expiry is unknown).
    pub(super) unconfirmed: Mutex<Vec<String>>,
    /// Lost-lock listeners, called once per lost grant.
    pub(super) listeners: Mutex<Vec<Listener>>,
    /// Grants reported lost so far (a listener registered later is told of each).
    pub(super) handles_reported: AtomicU64,
    /// Set once the session's loss (or close) has been dealt with.
    pub(super) reported: AtomicBool,
    /// The session's seeded backoff jitter.
    pub(super) rng: Mutex<ChaCha8Rng>,
}

impl Shared {
    pub(super) fn now(&self) -> MonoTime {
        self.inner.config.clock.now()
    }

    /// The lease every grant asks for, ms.
    pub(super) fn lease_ms(&self) -> u64 {
        self.inner.config.lease_ms()
    }

    /// The session TTL, ms.
    pub(super) fn session_ms(&self) -> u64 {
        self.inner.config.session_ms()
    }

    /// The renew period: the SDK's heartbeat period, `min(session TTL,
    /// lease) × (1 − m) / k`.
    pub(super) fn period(&self) -> Duration {
        let k = self.inner.config.heartbeat_divisor;
        let ppm = self.inner.margin_ppm();
        lease::heartbeat_period(self.session_ms(), Some(self.lease_ms()), ppm, k)
    }

    /// The send of the last acknowledged exchange.
    pub(super) fn last_ack_send(&self) -> MonoTime {
        MonoTime::from_nanos(self.last_ack_send_nanos.load(Ordering::Acquire))
    }

    /// The loss in force at `now`: the session's flag or deadline, or a held
    /// grant's deadline (then the session is lost at its deadline too).
    pub(super) fn lost_at(&self, now: MonoTime) -> Option<LostReason> {
        if let Some(r) = self.lease.lost_at(now) {
            return Some(r);
        }
        let expired = lock(&self.grants)
            .iter()
            .any(|g| g.lease.lost_at(now).is_some());
        expired.then(|| self.lease.mark_lost(LostReason::Deadline))
    }

    /// Reports the session's loss once: counters, the `session_lost` log,
    /// and every listener once per grant still held.
    pub(super) fn report_loss(&self, now: MonoTime) {
        let Some(reason) = self.lost_at(now) else {
            return;
        };
        if self.reported.swap(true, Ordering::AcqRel) {
            return;
        }
        let metrics = &self.inner.metrics;
        if reason == LostReason::Deadline {
            // The SDK's censored gap: one over-window gap per deadline loss.
            metrics.record_lost_gap(now.saturating_duration_since(self.last_ack_send()));
        }
        metrics.session_lost(reason);
        let grants = std::mem::take(&mut *lock(&self.grants));
        warn!(
            name: "session_lost",
            event = "session_lost",
            backend = "redis",
            owner = %self.owner,
            reason = %reason,
            handles = grants.len(),
            "redis session lost: {reason}"
        );
        let listeners = lock(&self.listeners);
        for _ in &grants {
            metrics.handle_lost();
            self.handles_reported.fetch_add(1, Ordering::Relaxed);
            for l in listeners.iter() {
                l();
            }
        }
    }

    /// The session ends (close or drop): a loss in force is reported;
    /// otherwise the session and its grants end silently as closed.
    pub(super) fn stop(&self, now: MonoTime) {
        match self.lost_at(now) {
            Some(r) if r != LostReason::SessionClosed => self.report_loss(now),
            _ => {
                self.lease.mark_lost(LostReason::SessionClosed);
                if !self.reported.swap(true, Ordering::AcqRel) {
                    lock(&self.grants).clear();
                }
            }
        }
    }

    /// The timeout for a request sent at `now`: the request timeout, bounded
    /// by the time left on the session (at least 1 ms); `None` once it has passed.
    pub(super) fn timeout_at(&self, now: MonoTime) -> Option<Duration> {
        let deadline = self.lease.deadline();
        (!now.has_reached(deadline)).then(|| {
            self.inner
                .config
                .request_timeout
                .min(lease::remaining(now, deadline))
                .max(Duration::from_millis(1))
        })
    }

    /// Runs `script` on the backend's connection ([`eval`]).
    pub(super) async fn eval(
        &self,
        script: &Script,
        keys: &[&str],
        args: &[&str],
        timeout: Duration,
    ) -> Result<::redis::Value, BackendError> {
        eval(&self.inner, script, keys, args, timeout).await
    }
}

/// Runs `script` with `keys` and `args` within `timeout` (connecting first
/// if needed); a transport error drops the connection so the next call
/// reconnects (a restarted server).
pub(super) async fn eval(
    inner: &Inner,
    script: &Script,
    keys: &[&str],
    args: &[&str],
    timeout: Duration,
) -> Result<::redis::Value, BackendError> {
    let call = async {
        let mut conn = inner.conn(timeout).await?;
        let mut inv = script.prepare_invoke();
        for k in keys {
            inv.key(*k);
        }
        for a in args {
            inv.arg(*a);
        }
        let v: ::redis::Value = inv.invoke_async(&mut conn).await?;
        Ok::<_, BackendError>(v)
    };
    let r = tokio::time::timeout(timeout, call)
        .await
        .map_err(|_| BackendError::from(LockError::Timeout { after: timeout }))
        .and_then(|r| r);
    if let Err(BackendError::Redis(e)) = &r
        && (e.is_io_error() || e.is_connection_dropped() || e.is_unrecoverable_error())
    {
        inner.reset_conn();
    }
    r
}
