//! `bench-report`: what a person reads. Pure over the analysis of a results
//! directory: [`plots`] (SVG and PNG with plotters), [`report`] (`report.md`
//! of a run, `bench report`), [`compare`] (the lock services side by side),
//! [`peer`] (`bench peer`'s section, summary and plot), [`peer_sessions`]
//! (`bench peer --sessions`: cost against live sessions), [`adr`] (the
//! ADR-006 evidence document and the revision it proposes),
//! [`docs_facts`] (`bench docs`: the computed numbers the docs quote) and
//! [`lock_services`] (the lock services side by side, for both).
//!
//! It reads results through [`bench_analysis`] and never imports the driver.

pub mod adr;
pub mod compare;
pub mod docs_facts;
pub mod lock_services;
pub mod peer;
pub mod peer_sessions;
pub mod plots;
pub mod report;
