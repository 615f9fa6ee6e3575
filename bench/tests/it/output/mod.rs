//! The bench's output half, end to end on synthetic data: the results table,
//! the histogram files, the ADR-006 §6.5 triggers, `bench triggers` exit codes,
//! the report and the plots. Rows and histograms are built here (seeded), never
//! by running a workload.

mod fixtures;
mod recommend;
mod report;
mod tables;
mod triggers;

pub(crate) use fixtures::{Scratch, healthy, synthetic_histogram};
