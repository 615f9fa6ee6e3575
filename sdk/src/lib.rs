//! `fencepost-sdk`: the client side of ADR-006 (contract C3), where lease
//! arithmetic is written once.
//!
//! A [`LockClient`] opens [`Session`]s (L1). A session runs one heartbeat task
//! that sends L2 every period and renews (L5) the handles close to their end.
//! [`Session::acquire`] (L4) is bounded by a wait budget, with exponential
//! backoff and full jitter from a seeded RNG. Every grant becomes a
//! [`LockHandle`] whose *client deadline* is
//! `send + granted × (1 − margin)`, with `send` read from the [`Clock`]
//! immediately before the request was written and `granted` the TTL in the
//! reply. [`Session::check_still_held`] compares one clock read with that
//! deadline (and the session's); [`Session::ensure_time_for`] refuses a step
//! whose worst-case cost does not fit in the remaining lease (ADR-006 D4).
//!
//! Returning `Ok` from either is a liveness narrowing, never a permission: the
//! fencing token ([`LockHandle::token`]), checked downstream, is the safety
//! mechanism.
//!
//! The production clock is [`BootTimeClock`] (`CLOCK_BOOTTIME`, which keeps
//! counting while the host is suspended). The client measures its heartbeat
//! honestly (docs/measurement.md): every exchange's outcome in [`ClientStats`], the
//! raw RTT with timeouts as censored samples ([`LockClient::rtt_histogram`]),
//! the RTT from the scheduled send ([`LockClient::corrected_rtt_histogram`]),
//! the tick lag, and the margins applied ([`LockClient::margin_stats`]).
//!
//! ```no_run
//! # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
//! use std::time::Duration;
//! use fencepost_sdk::{AcquireOptions, LockClient, LockClientConfig};
//!
//! let client = LockClient::new(LockClientConfig::from_env("http://127.0.0.1:7070")?)?;
//! let session = client.open_session("worker-1").await?;
//! let lock = session
//!     .acquire("payout:42", AcquireOptions::default().wait_up_to(Duration::from_secs(5)))
//!     .await?;
//! session.ensure_time_for(&lock, Duration::from_secs(7))?; // before the irreversible step
//! // ... call downstream with lock.token() ...
//! session.release(lock).await?;
//! session.close().await;
//! # Ok(()) }
//! ```

#![warn(missing_docs)]

mod acquire;
mod client;
pub mod clock;
mod config;
mod error;
pub mod http;
mod inner;
pub mod lease;
pub mod metrics;
mod session;
#[cfg(test)]
mod test_support;
pub mod tls;
mod transport;

pub use acquire::{AcquireOptions, Backoff};
pub use client::LockClient;
pub use clock::{BootTimeClock, Clock, FakeClock, MonoTime, MonotonicClock, TokioClock};
pub use config::{ApiToken, ConfigError, LockClientConfig, MarginPolicy, TlsSettings};
pub use error::{LockError, LockLost, LostReason, ReplyProblem};
pub use metrics::{
    ClientStats, DeadlineKind, MarginStats, MarginSummary, PrometheusMetrics, RenewOutcome,
};
pub use session::schedule;
pub use session::{
    HeartbeatFault, ListenerOutcome, LockHandle, LockLostEvent, RenewalObserver, RenewalOutcome,
    Session,
};

/// The rustls the SDK is built on (ring provider), so that an
/// [`HttpClient::with_options`](http::HttpClient::with_options) caller builds
/// its `ClientConfig` with the same version.
pub use rustls;

/// The HDR histogram type [`LockClient::rtt_histogram`] (and the corrected and
/// tick-lag histograms) return (values in µs).
pub use hdrhistogram::Histogram;
/// The `prometheus-client` the SDK's instruments are built on, so an embedding
/// application registers them into a [`Registry`](prometheus_client::registry::Registry)
/// of the same version.
pub use prometheus_client;
