//! `bench`: fencepost's M7 load driver (C4), the command line over the
//! measurement libraries. It runs real payout workers on the SDK against a
//! lock-server and a rail-stub, cell by cell over a grid of margins and TTLs,
//! and writes a results directory: `results.parquet` / `results.csv`, raw RTT
//! histograms, `manifest.json`, `triggers.json`, `report.md` and plots.
//!
//! The libraries, each with one concern and imports pointing one way:
//! - `bench-core`: the shared vocabulary (grid, time base, histograms, CPU);
//! - `bench-history`: the operation history and its checker;
//! - `bench-driver`: runs a cell (stack, pool, worker, worker processes,
//!   backends, proxy, faults) and makes its results row;
//! - `bench-analysis`: the results table, statistics, triggers, recommendation;
//! - `bench-report`: plots, `report.md`, the ADR-006 evidence.
//!
//! This crate holds the commands: [`cli`] (flags), [`drive`] (`run`, `sweep`,
//! `replay`), [`runner`] (a run's cells; `bench_driver::row` turns each
//! measurement into a results row), [`peer`] (`bench peer`), [`peer_sessions`] (`bench peer
//! --sessions`), [`prometheus`] (`bench rules`,
//! `bench triggers --prometheus`) and [`adr`] (`bench adr`); [`values`] holds the value parsers their flags share.

pub mod adr;
pub mod cli;
pub mod docs;
pub mod drive;
pub mod peer;
pub mod peer_error;
pub mod peer_sessions;
pub mod peer_systems;
pub mod prometheus;
pub mod rtt_from;
pub mod runner;
pub mod values;
