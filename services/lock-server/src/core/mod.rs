//! The lock table: sessions, grants and fencing tokens as plain values, and
//! every state transition as a function of the current
//! [`MonoTime`](fencepost_api::clock::MonoTime). No I/O,
//! no clock reads: the caller passes `now` (the instant the request was
//! received), which is what makes the boundary tests exact to the nanosecond.
//!
//! A mutation that must be persisted is split in two: a `check_*`/`begin_*`
//! that validates and decides without changing anything that a failure would
//! have to undo, and an `apply_*`/`finish_*` that the service calls only after
//! the store has persisted the change. So a store failure (a 5xx) never changes
//! state, not even by leaving an empty key behind.
//!
//! The timeline of one grant (C1 "Semantics"):
//! - HELD while `now < held_until = min(lease_end, session.last + session_ttl)`;
//! - GRACE while `now < reassignable_at = min(free_at,
//!   session.last + session_ttl + grace(session_ttl))`;
//! - FREE after. An explicit release (L6/L3) or a revoke (L8) frees it at once.
//!
//! `lease_end` is the latest `receipt + lease` of any L4/L5 of the grant and
//! `free_at` the latest `receipt + lease + grace(lease)`: a renew (or the
//! holder's re-acquire) never makes either earlier (C1 §7), because the holder
//! may be going by any reply it received. The minimum with the session is safe
//! because the client's own belief ends at the earlier of its handle deadline
//! and its session deadline, and each is covered by its own grace.
//!
//! What the table holds is bounded ([`Caps`]): a key is in memory only while
//! a grant is (or is being) recorded for it — a FREE key leaves memory, and
//! its last token stays in the store; sessions are capped; expired-session
//! tombstones are kept for a while and up to a count. Expiry is driven by two
//! deadline-ordered sets (sessions by lapse, grants by lease end) and L3 finds
//! a session's keys through its own index, so no operation walks every key or
//! every session: each touches the entries it names plus the due prefix of a
//! queue ([`expiry`]).

mod audit;
mod error;
mod expiry;
mod limits;
mod model;
mod table;

pub use error::CoreError;
pub use expiry::{Swept, TableSizes};
pub use limits::{Caps, Limits, Sabotage};
pub use model::{AcquirePlan, Caller, Grant, KeyEntry, Session, SessionStatus};
pub use table::{LockTable, ceil_ms};
