//! The etcd backend: fencepost's client-side lease arithmetic on
//! an etcd v3 lock, through the `etcd-client` crate (gRPC).
//!
//! | fencepost (C1/C3)            | etcd, as this adapter does it |
//! |---|---|
//! | L1 open a session            | `LeaseGrant(ttl)`; deadline `send + ttl × (1 − m)` |
//! | L2 heartbeat                 | one `LeaseKeepAlive` on the session's stream, sent and answered before the next; same fixed-rate schedule, period `ttl × (1 − m) / 3` |
//! | L4 acquire                   | `txn(create_revision(key) == 0 → put(key, owner, lease))`, retried with the SDK's jittered backoff within the budget |
//! | fencing token                | the key's create revision (the txn's header revision): strictly increasing per key, cluster-wide |
//! | L5 renew                     | none: the key lives on the session's lease, so every keep-alive renews it |
//! | L6 release                   | `txn(create_revision(key) == token → delete(key))`: never deletes a successor's key |
//! | L3 close                     | `LeaseRevoke` (deletes the session's keys at once) |
//! | 410 SESSION_EXPIRED          | a keep-alive answered with TTL 0 (etcd no longer knows the lease) |
//!
//! Where etcd differs, and what that does to the measurement:
//! - **No grace.** etcd's lessor revokes a lease once its TTL has run out on
//!   the leader (it checks every 500 ms) and the key is free for the next
//!   acquire at once; fencepost's server keeps a lapsed grant in `GRACE` for
//!   `offset_max + 2ρ·lease + quantum` first. On etcd only the client margin
//!   stands between a slow client and a second holder; the fences catch the
//!   rest.
//! - **Whole seconds.** A lease TTL is an integer number of seconds
//!   ([`lease::ttl_request_s`] rounds up; the smallest etcd grants is 1 s with
//!   the flags of [`server`], 2 s with etcd's defaults). The session TTL a
//!   cell runs with on etcd is that rounded value, and the key shares it.
//! - **Keep-alive answers with the lease's TTL** (renewed to its full
//!   length) rather than a grant of the requested TTL; TTL 0 means lost.
//!
//! Measurement: every keep-alive is recorded in the SDK's own recorder
//! (`fencepost_sdk::metrics::Metrics`) with the SDK's schedule arithmetic
//! (`fencepost_sdk::schedule`): outcomes (reply/timeout/error), raw RTT with
//! timeouts censored at their give-up time, RTT corrected from the scheduled
//! send, tick lag, margins, sessions and handles lost. So `hb_*` columns mean
//! the same on both backends.

pub mod backend;
pub mod lease;
pub mod server;
mod session;
mod shared;

pub use backend::{EtcdBackend, session_ttl_on_etcd};
pub use session::{EtcdHandle, EtcdSession};
pub use shared::EtcdConfig;
