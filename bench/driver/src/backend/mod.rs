//! The lock services a payout worker can run on, behind one small
//! trait pair the worker is generic over: [`LockBackend`] (open a session,
//! and the client's heartbeat measurements, [`HeartbeatStats`]) and
//! [`BackendSession`] (acquire, the client-side checks, release, close).
//!
//! - [`fencepost`]: the SDK itself; `LockClient` and `Session` implement the
//!   traits by delegation, nothing is re-implemented.
//! - [`etcd`]: an adapter that applies the SDK's lease arithmetic
//!   (`fencepost_sdk::lease`) to etcd: a session is an etcd lease kept alive on
//!   a gRPC stream, acquire is `txn(create_revision(key) == 0 → put(key, lease))`,
//!   the fencing token is the key's create revision, release deletes the key
//!   if its create revision is still the token. Its keep-alives are recorded
//!   in the SDK's own recorder (`fencepost_sdk::metrics::Metrics`), so every
//!   results column means the same on both backends.
//!
//! - [`redis`]: an adapter on one Redis instance: acquire is one Lua script
//!   (`SET NX PX` and, when it succeeds, `INCR` of the key's fencing
//!   counter), the renew script (compare-value `PEXPIRE` of every held key)
//!   is the heartbeat, release is a compare-value `DEL`; the session lives
//!   in the client. Recorded in the SDK's recorder too.
//! - [`redlock`]: the Redlock algorithm over N independent redis-servers:
//!   a lock is a random value set with `SET NX PX` on a majority within its
//!   validity, extended by compare-value-and-`PEXPIRE` rounds recorded as
//!   heartbeats, released by compare-value-and-`DEL` on every instance. It
//!   has no fencing token (`token()` is 0).
//!
//! The report puts the backends side by side, cell by cell.
//!
//! The worker ([`crate::worker::Worker`]) is written once against these
//! traits; [`crate::worker::build_worker`] picks the backend a
//! [`crate::worker::WorkerEnv`] names.

pub mod etcd;
pub mod fencepost;
pub mod redis;
pub mod redlock;

use std::future::Future;
use std::time::Duration;

use fencepost_sdk::{ClientStats, Histogram, LockError, LockLost, MarginStats};

pub use bench_core::backend::{BackendKind, RailFences};

/// Why a backend call failed. Each variant says what the caller can do.
#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    /// The SDK's error (fencepost, or an etcd check expressed in the SDK's
    /// terms: `LockLost`, `InsufficientLease`, `SessionLost`, `LockHeld`,
    /// `Timeout`). Its own doc says what to do.
    #[error(transparent)]
    Lock(#[from] LockError),
    /// etcd answered with an error or could not be reached. Transient unless
    /// the message says otherwise; retry later.
    #[error("etcd: {0}")]
    Etcd(etcd_client::Error),
    /// Redis answered with an error or could not be reached. Transient
    /// unless the message says otherwise (a bad URL); retry later.
    #[error("redis: {0}")]
    Redis(::redis::RedisError),
    /// A Redlock round gave no lock (no majority, or no validity left), or
    /// its configuration is refused. Its own doc says what to do.
    #[error(transparent)]
    Redlock(#[from] redlock::error::RedlockError),
    /// etcd's reply is not what the adapter asked for (a txn without a
    /// header, a keep-alive for another lease): a version mismatch. Report it.
    #[error("unexpected reply from etcd: {0}")]
    Unexpected(&'static str),
}

impl From<::redis::RedisError> for BackendError {
    // Not `#[from]`, for the same reason as etcd's.
    fn from(e: ::redis::RedisError) -> Self {
        BackendError::Redis(e)
    }
}

impl From<etcd_client::Error> for BackendError {
    // Not `#[from]`: the cause is in the message, so it is not also a
    // `source()` (a `{:#}` chain would print it twice).
    fn from(e: etcd_client::Error) -> Self {
        BackendError::Etcd(e)
    }
}

/// The heartbeat measurements of one client, the same on every backend
/// (the SDK's hooks, see `docs/contract-notes.md`, C3/C5). Object safe: the
/// pool reads them through `&dyn HeartbeatStats`.
pub trait HeartbeatStats: Send + Sync {
    /// The counters: heartbeat outcomes (reply, timeout, error), ticks,
    /// renewals, sessions and handles lost, leases abandoned.
    fn stats(&self) -> ClientStats;
    /// Raw heartbeat RTT, µs (timeouts at their give-up time, "≥").
    fn rtt_histogram(&self) -> Histogram<u64>;
    /// Heartbeat RTT from the scheduled send (coordinated omission corrected), µs.
    fn corrected_rtt_histogram(&self) -> Histogram<u64>;
    /// Scheduled → actual send of every tick that sent, µs.
    fn tick_lag_histogram(&self) -> Histogram<u64>;
    /// Heartbeat gaps (the SDK's `gap_histogram`), µs.
    fn gap_histogram(&self) -> Histogram<u64>;
    /// Raw lease renewal (L5) RTT, µs (timeouts censored); empty where the
    /// backend renews no lease of its own (etcd: locks ride the session's lease).
    fn renew_rtt_histogram(&self) -> Histogram<u64>;
    /// Renewal RTT from the scheduled tick that sent it, µs.
    fn renew_corrected_histogram(&self) -> Histogram<u64>;
    /// The margins applied at each deadline computation.
    fn margin_stats(&self) -> MarginStats;
    /// Zeroes every measurement but the adaptive margin's own RTT view (warm-up cut).
    fn reset_measurements(&self);
}

/// A backend adapter whose heartbeat measurements are the SDK's own
/// recorder (etcd, redis, redlock): [`HeartbeatStats`] is that recorder's,
/// read the same way for each.
pub trait SdkRecorded: Send + Sync {
    /// The recorder every session of this backend records in.
    fn recorder(&self) -> &fencepost_sdk::metrics::Metrics;
}

impl<T: SdkRecorded> HeartbeatStats for T {
    fn stats(&self) -> ClientStats {
        self.recorder().stats()
    }

    fn rtt_histogram(&self) -> Histogram<u64> {
        self.recorder().rtt_snapshot()
    }

    fn corrected_rtt_histogram(&self) -> Histogram<u64> {
        self.recorder().corrected_snapshot()
    }

    fn tick_lag_histogram(&self) -> Histogram<u64> {
        self.recorder().tick_lag_snapshot()
    }

    fn gap_histogram(&self) -> Histogram<u64> {
        self.recorder().gap_snapshot()
    }

    fn renew_rtt_histogram(&self) -> Histogram<u64> {
        self.recorder().renew_rtt_snapshot()
    }

    fn renew_corrected_histogram(&self) -> Histogram<u64> {
        self.recorder().renew_corrected_snapshot()
    }

    fn margin_stats(&self) -> MarginStats {
        self.recorder().margin_stats()
    }

    fn reset_measurements(&self) {
        self.recorder().reset_measurements()
    }
}

/// A lock client: opens sessions, and measures its heartbeats.
pub trait LockBackend: HeartbeatStats + 'static {
    /// One session of this backend.
    type Session: BackendSession;

    /// Opens a session for `owner` (L1; etcd: a lease grant and its keep-alive
    /// stream) and starts its heartbeat. Its client deadline is
    /// `send + granted × (1 − margin)`.
    fn open_session(
        &self,
        owner: &str,
    ) -> impl Future<Output = Result<Self::Session, BackendError>> + Send;
}

/// One session: its grants and the client-side checks of ADR-006 (D3, D4).
pub trait BackendSession: Send + Sync + Sized + 'static {
    /// A granted lock.
    type Handle: Send + Sync;

    /// The fencing token of `handle` (strictly increasing per key).
    fn token(handle: &Self::Handle) -> u64;

    /// Calls `listener` once for every handle of this session that is lost
    /// (not for those the caller released).
    fn on_lock_lost(&self, listener: Box<dyn Fn() + Send + Sync>);

    /// Whether the session is lost (a loss flag, or its client deadline passed).
    fn is_lost(&self) -> bool;

    /// Acquires `key` for `ttl`, waiting up to `budget` for a held key.
    fn acquire(
        &self,
        key: &str,
        ttl: Duration,
        budget: Duration,
    ) -> impl Future<Output = Result<Self::Handle, BackendError>> + Send;

    /// The usable client-side lease left on `handle`.
    fn remaining(&self, handle: &Self::Handle) -> Result<Duration, LockLost>;

    /// D3: `Ok` while the handle's and the session's client deadlines are ahead.
    fn check_still_held(&self, handle: &Self::Handle) -> Result<(), LockLost>;

    /// D4: `Ok` only if more than `worst_case_cost` of lease is left.
    fn ensure_time_for(
        &self,
        handle: &Self::Handle,
        worst_case_cost: Duration,
    ) -> Result<(), LockError>;

    /// Releases `handle` (L6; etcd: delete the key if it is still this grant).
    fn release(
        &self,
        handle: Self::Handle,
    ) -> impl Future<Output = Result<(), BackendError>> + Send;

    /// Ends the session (L3; etcd: revoke the lease), best effort, never fails.
    fn close(self) -> impl Future<Output = ()> + Send;

    /// The SDK session behind this one, on the fencepost backend (tests'
    /// step hooks inject heartbeat faults into it); `None` elsewhere.
    fn as_sdk(&self) -> Option<&fencepost_sdk::Session> {
        None
    }
}
