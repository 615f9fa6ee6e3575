//! The ADR-006 evidence pack's reading half: [`pack`] (its manifest and
//! steps), [`evidence`] (the document, a pure function of a pack directory)
//! [`revision`] (the proposed ADR-006 §6.2/§6.5 numbers, derived from the
//! data) and [`verdict`] (the tolerances and outcomes its rules share). `bench adr` runs the plan and calls these.

pub mod evidence;
pub mod pack;
pub mod revision;
pub mod verdict;
