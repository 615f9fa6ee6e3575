//! `bench-analysis`: what fencepost's results say. Pure over the files a run
//! wrote (and the rows it holds): it reads no service and runs no load.
//!
//! - [`results`]: the results table ([`results::CellRow`], `results.parquet` /
//!   `results.csv`), the schema every other part reads;
//! - [`frame`]: the parquet and csv files every table is written as;
//! - [`manifest`]: `manifest.json`, what reproduces a results directory;
//! - [`stats`]: intervals (bootstrap over repeats, t on repeat means);
//! - [`summary`]: `summary.csv`, one row per point of the grid over its repeats;
//! - [`triggers`]: ADR-006 §6.5's five revisit triggers, evaluated per cell;
//! - [`recommend`]: the per-TTL margin recommendation; [`verdict`]: it in
//!   plain words, with the evidence strength and advice;
//! - [`projection`]: the measured RTTs projected onto production;
//! - [`production_rtt`]: an RTT distribution measured in production (a
//!   Prometheus histogram), which `bench adr --rtt-from` projects instead;
//! - [`peer`]: `bench peer`'s rows, ratios and verdicts; [`peer_plan`]: its
//!   plan; [`peer_limits`]: the physical limits; [`peer_sessions`]: the
//!   live-sessions dimension (`peer_sessions.csv`, the scale verdict) and
//!   [`peer_sessions_fit`]: its extrapolation to the counts not reached;
//!   [`peer_csv`]: `peer.csv` read back; [`targets`]: a performance target
//!   judged over repeats one by one, and the A/B rule of a change.
//!
//! It depends on the shared vocabulary ([`bench_core`]) only, never on the
//! driver that produced the results.

pub mod frame;
pub mod manifest;
pub mod peer;
pub mod peer_csv;
pub mod peer_limits;
pub mod peer_plan;
pub mod peer_sessions;
pub mod peer_sessions_fit;
pub mod pool;
pub mod production_rtt;
pub mod projection;
pub mod recommend;
pub mod results;
pub mod stats;
pub mod summary;
pub mod targets;
pub mod triggers;
pub mod verdict;
