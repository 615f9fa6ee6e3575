//! A payout worker in its own OS process, and the protocol between it and
//! the process that drives it — the one place both sides are written, so any
//! command can host worker processes (today `experiments`: the pause,
//! throttle and chaos experiments).
//!
//! - [`spec`]: what the child is given, as ONE serialised value
//!   ([`WorkerSpec`], the JSON of its `--spec` argument), which carries the
//!   SDK's own margin policy;
//! - [`line`]: what it prints, one JSON line each ([`WorkerLine`]), its
//!   final `done` line with the SDK's own margin summary;
//! - [`parent`]: starting it ([`WorkerChild`], [`ProcessSpawner`] for a
//!   cell's pool), reading its lines, its process state;
//! - [`child`]: its `main` (round mode and continuous mode).
//!
//! The hosting executable has a hidden subcommand
//! [`parent::WORKER_SUBCOMMAND`] taking [`parent::SPEC_FLAG`] that calls
//! [`child::main`]; the parent starts that same executable.

pub mod child;
pub mod line;
pub mod parent;
pub mod spec;

pub use line::{Counter, WorkerLine};
pub use parent::{OnSpawn, ProcessSpawner, WorkerChild, WorkerProcError, proc_state, wait_stopped};
pub use spec::{
    AppliedMargins, FreezePoint, FreezeStep, Freezes, HistorySpec, WorkerMode, WorkerSpec,
};
