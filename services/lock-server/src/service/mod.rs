//! The lock service: the [`LockTable`] (pure decisions) wired to a
//! [`LockStore`] (durability) and a [`Clock`] (time). Every operation reads
//! the clock once, on entry — the instant the request was received — and
//! follows the same order: decide under the table mutex, release it, persist
//! through the store, then apply under the mutex. The mutex is never held
//! across an await, and a store failure leaves the table untouched.
//!
//! **Cancel safety (C1 §8).** The persist-then-apply half of every mutation
//! (L1, L3, L4, L5 when the lease grows, L6, L8, the sweeper's clears) runs on
//! its own task ([`detached`]); the request only awaits it. When a client gives
//! up and the HTTP server drops its handler, the task still runs to its end:
//! the store's write is always followed by the matching change in memory (or,
//! on a store failure, by the undo of the decision), so memory and store agree
//! and no key is left pending. Operations that write nothing (L2, a renew that
//! does not lengthen the lease) decide and apply under one mutex hold.
//!
//! **Group commit.** The durable stores sit behind
//! [`crate::store::group::GroupCommit`]: the writes of concurrent requests are
//! committed in one transaction (one fsync), and each request's task is
//! answered with its own write's outcome once that transaction committed. The
//! order above is unchanged: a batch that fails is answered, write by write,
//! with the outcome of a retry alone, and every failed write is undone here.
//!
//! Layout: [`LockService`] itself, its start and the machinery the operations
//! share are in `lock_service.rs`; the operations in `sessions.rs` (L1–L3),
//! `grants.rs` (L4–L8) and `sweep.rs`; the read-only views (`/readyz`,
//! `/v1/config`, digests) in `views.rs`; the `/metrics` registry and the
//! clock-discipline reading in `metrics.rs`; the replica's election
//! rounds in `election.rs`; [`ServiceError`] and [`Counters`] apart, below them.
//!
//! [`LockTable`]: crate::core::LockTable
//! [`LockStore`]: crate::store::LockStore
//! [`Clock`]: fencepost_api::Clock
//! [`detached`]: lock_service::detached

mod counters;
mod election;
mod error;
mod grants;
mod lock_service;
mod metrics;
#[cfg(test)]
mod rewon;
mod sessions;
mod sweep;
mod telemetry;
mod views;

pub use counters::Counters;
pub use error::ServiceError;
pub use grants::Acquired;
pub use lock_service::{LockService, SWEEP_EVERY};
pub use metrics::CONTENT_TYPE as METRICS_CONTENT_TYPE;
