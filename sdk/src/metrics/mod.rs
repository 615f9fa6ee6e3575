//! The SDK's measurements (C5, docs/measurement.md). One [`Metrics`] per client,
//! shared by its sessions and their heartbeat tasks:
//!
//! - four HDR histograms (µs, 3 significant digits): the raw heartbeat RTT
//!   (`lock.heartbeat.rtt`: every L2 that got a reply, plus every one that
//!   timed out, recorded at the time it was given up, right-censored "≥"),
//!   the RTT corrected for coordinated omission (measured from the
//!   *scheduled* send, one sample per scheduled tick, see
//!   `session/schedule.rs`), the tick lag (scheduled → actual send), and the
//!   heartbeat gaps (send of the last acknowledged L1/L2 to the receipt of
//!   the next acknowledgement, plus one censored gap per session lost at its
//!   deadline) with the count of gaps longer than their window;
//! - the outcome of every heartbeat exchange (`lock.heartbeat.outcomes`:
//!   reply, timeout, error), the scheduled ticks and those that sent no L2
//!   of their own;
//! - renewals (L5) as an exchange of their own: two more HDR histograms,
//!   the raw renewal RTT (replies, and timeouts censored "≥") and the RTT
//!   from the scheduled tick, and every renewal's outcome ([`RenewOutcome`]:
//!   ok, refused with `LOCK_LOST`, timeout, error);
//! - `lock.session.lost` by reason, handles lost, `lock.lease.abandoned`,
//!   acquire calls granted and failed;
//! - the margins applied at each deadline computation ([`MarginStats`]);
//! - the adaptive margin policy's own RTT view, which
//!   [`reset_measurements`](Metrics::reset_measurements) leaves alone.
//!
//! These are exact and resettable (the bench reads them per cell). Everything
//! recorded is also recorded into a [`PrometheusMetrics`]: `prometheus-client`
//! instruments (histograms with explicit boundaries, counters with every label
//! value pre-created at 0, the clock gauges read at each encode) that are
//! monotonic, never reset, and may be shared by several clients. They are
//! what [`LockClient::metrics_text`](crate::LockClient::metrics_text) encodes
//! (classic text format, [`CONTENT_TYPE`]) and what an application registers
//! into its own registry ([`PrometheusMetrics::register`]). There is no
//! hand-written exposition.
//!
//! Counters are relaxed atomics read one by one, never as a consistent set.
//! Histograms sit behind std mutexes held only to record or copy.
//!
//! Layout: the read-out values in `stats.rs`, the accumulators in
//! `cells.rs`, [`Metrics`] in `collector.rs`, the Prometheus instruments in
//! `prometheus.rs`; this module only re-exports them.

mod cells;
mod collector;
mod prometheus;
mod stats;

pub use collector::Metrics;
pub use prometheus::{CONTENT_TYPE, PrometheusMetrics, margin_bounds};
pub use stats::{ClientStats, DeadlineKind, MarginStats, MarginSummary, Outcome, RenewOutcome};
