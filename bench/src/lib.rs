//! `bench`: fencepost's M7 load driver (C4). It runs real payout workers on the
//! SDK against a lock-server and a rail-stub, cell by cell over a grid of
//! margins and TTLs, and writes a results directory: `results.parquet` /
//! `results.csv`, raw RTT histograms, `manifest.json`, `triggers.json`,
//! `report.md` and plots.
//!
//! Modules: [`cli`] (flags), [`grid`] (flag values, cells), [`drive`] (run and
//! sweep orchestration), [`runner`] (a run's cells), [`cell`] (the one cell
//! driver every cell of the bench and the experiments runs through: stack,
//! pool, measured window), [`timebase`] (production numbers scaled to a
//! cell's lease), [`worker`] (the payout worker), [`backend`] (the lock
//! services it runs on: fencepost's SDK, or etcd through an adapter),
//! [`history`] (the operation history of issue 16 and its checker), [`peer`] (`bench peer`: fencepost vs etcd, one driver), [`proxy`] (the
//! delay proxy and its zero-delay baseline), [`cpu`] (CPU seconds from
//! `/proc`), [`docker`] (`--runtime docker`), [`rail`] (the rail client),
//! [`manifest`], and the output half: [`results`], [`hist`], [`triggers`],
//! [`report`], [`plots`], and issue 13's evidence: [`stats`] (intervals),
//! [`summary`] (`summary.csv`), [`projection`] (`projection.csv`); and
//! [`adr`] (`bench adr`: the ADR-006 evidence pack).

pub mod adr;
pub mod backend;
pub mod cell;
pub mod cli;
pub mod cpu;
pub mod docker;
pub mod drive;
pub mod grid;
pub mod hist;
pub mod history;
pub mod manifest;
pub mod peer;
pub mod plots;
pub mod projection;
pub mod proxy;
pub mod rail;
pub mod recommend;
pub mod report;
pub mod results;
pub mod runner;
pub mod stats;
pub mod summary;
pub mod timebase;
pub mod triggers;
pub mod worker;
