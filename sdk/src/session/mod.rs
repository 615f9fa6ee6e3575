//! [`Session`]: one lock-server session, its heartbeat task, its handles and
//! its listeners, and the calls that take a handle.
//!
//! The concepts live in their own files: [`handle`] (deadlines and loss flags
//! in atomics, [`LockHandle`]), [`shared`] (what the calls and the heartbeat
//! task share, and the one place losses are reported), [`listeners`],
//! [`fault`] (injected heartbeat faults), [`renewals`] (the renewal observer), [`heartbeat`] (the task),
//! [`schedule`] (its fixed rate and coordinated-omission correction) and
//! [`acquire`](mod@acquire) (the bounded L4 loop).
//!
//! Anyone may *discover* a loss (a check that finds a deadline reached, a
//! call that gets 404/410/409) and set the flag; the heartbeat task
//! *reports* it (listeners, `session_lost` / `lease_expired` logs, counters),
//! once, or `close`/`drop` does for a loss the task had not reached yet. Loss is terminal: a flag once set is never cleared, and a successful
//! reply that arrives after the deadline it would have extended does not
//! revive anything.
//!
//! This module is a facade: [`Session`] itself is in `api.rs`, and every
//! part imports its siblings, never this module.

mod acquire;
mod api;
mod fault;
mod handle;
mod heartbeat;
mod listeners;
mod mutex;
mod renewals;
pub mod schedule;
mod shared;

pub use api::Session;
pub use fault::HeartbeatFault;
pub use handle::LockHandle;
pub use listeners::{ListenerOutcome, LockLostEvent};
pub use renewals::{RenewalObserver, RenewalOutcome};
