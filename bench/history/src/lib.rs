//! A client-side operation history, Jepsen style: every step a
//! payout worker takes — session opened, lock granted, the client check's
//! verdict, claim (fence 1), submit (fence 2), rail release, lock release —
//! is recorded as an *invocation* and, when it returns, a *completion*, both
//! stamped on one monotonic clock that every process on the machine shares
//! (`CLOCK_MONOTONIC`, [`mono_ns`]). A worker killed with SIGKILL leaves its
//! invocations without completions: they stay in the history as
//! indeterminate operations, never dropped.
//!
//! A worker records through a [`Recorder`] (the driver's worker holds one as its
//! observer seam), which appends one JSON line per
//! [`Event`] to its own file, unbuffered, so a kill loses nothing written.
//! [`load`] joins the lines of many files into [`Op`]s; [`check`] is the pure
//! checker over those ops and the rail's final ledger.
//!
//! The crate knows nothing of how a history was produced: the driver's
//! workers record into it, `experiments chaos` loads and checks it.

pub mod check;
mod op;
mod record;

pub use op::{Event, Op, OpKind, Outcome, mono_ns};
pub use record::{HistoryError, Pending, Recorder, load, read_events};
