//! The SDK's measurements (C5, docs/measurement.md). One [`Metrics`] per client,
//! shared by its sessions and their heartbeat tasks:
//!
//! - three HDR histograms (µs, 3 significant digits): the raw heartbeat RTT
//!   (`lock.heartbeat.rtt`: every L2/L5 that got a reply, plus every one that
//!   timed out, recorded at the time it was given up, right-censored "≥"),
//!   the RTT corrected for coordinated omission (measured from the
//!   *scheduled* send, one sample per scheduled tick, see
//!   `session/schedule.rs`), and the tick lag (scheduled → actual send);
//! - the outcome of every heartbeat exchange (`lock.heartbeat.outcomes`:
//!   reply, timeout, error), the scheduled ticks and those that sent no L2
//!   of their own;
//! - `lock.session.lost` by reason, handles lost, `lock.lease.abandoned`;
//! - the margins actually applied at each deadline computation ([`MarginStats`]);
//! - the adaptive margin policy's own RTT view, which
//!   [`reset_measurements`](Metrics::reset_measurements) leaves alone.
//!
//! Counters are relaxed atomics read one by one, never as a consistent set.
//! Histograms sit behind std mutexes held only to record or copy.
//!
//! Layout: the read-out values in `stats.rs`, the accumulators in
//! `cells.rs`, [`Metrics`] in `collector.rs`, the Prometheus text in
//! `text.rs`; this module only re-exports them.

mod cells;
mod collector;
mod stats;
mod text;

pub use collector::Metrics;
pub use stats::{ClientStats, DeadlineKind, MarginStats, MarginSummary, Outcome};
