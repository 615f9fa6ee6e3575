//! Renewal observers: a hook that sees every L5 the heartbeat task sends for
//! a session's handles, so that a caller keeping a history (the bench's
//! workers) can record renewals, which are otherwise invisible to it.
//!
//! Set one per session with [`Session::set_renewal_observer`](super::Session::set_renewal_observer).
//! Unset, a renewal costs one atomic load more. The observer runs on the
//! heartbeat task, inline: it must return at once (append a line, bump a
//! counter), never block or await.

use std::sync::Arc;
use std::time::Duration;

use crate::clock::MonoTime;

/// How an observed renewal (L5) ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RenewalOutcome {
    /// `200`, same token, applied: the handle's deadline moved.
    Acknowledged {
        /// The lease the server granted (`lease_ms` of the reply).
        lease: Duration,
        /// The handle's new client deadline, `send + lease × (1 − margin)`,
        /// on the client's clock.
        deadline: MonoTime,
        /// The time left before the handle's usable deadline (the earlier of
        /// its own and its session's) when the observer is called: add it
        /// to a reading of another clock taken then to place the deadline on
        /// that clock.
        remaining: Duration,
    },
    /// The server refused it (`409 LOCK_LOST`, or a reply with another
    /// token), or its reply came too late to apply: the handle is lost.
    Refused,
    /// No usable answer (timeout, transport error, `503`, a session-level
    /// error): the server may or may not have applied it.
    Unknown,
}

/// Sees each renewal of a session's handles: [`invoked`](Self::invoked) just
/// before the L5 is sent, [`completed`](Self::completed) once with its outcome
/// (never for a renewal the SDK refused locally and did not send).
pub trait RenewalObserver: Send + Sync {
    /// An L5 of `key` under `token` is about to be sent. The returned number
    /// is handed back to [`completed`](Self::completed) (the observer's own
    /// name for this renewal; the SDK does not read it).
    fn invoked(&self, key: &str, token: u64) -> u64;

    /// The renewal `ticket` (from [`invoked`](Self::invoked)) of `key` under
    /// `token` ended with `outcome`.
    fn completed(&self, ticket: u64, key: &str, token: u64, outcome: RenewalOutcome);
}

/// The session's observer slot: set once, read by the heartbeat task.
pub(crate) type ObserverSlot = std::sync::OnceLock<Arc<dyn RenewalObserver>>;

/// One observed renewal in flight: completes it exactly once.
pub(crate) struct Observed<'a> {
    observer: &'a dyn RenewalObserver,
    ticket: u64,
    key: &'a str,
    token: u64,
}

impl<'a> Observed<'a> {
    /// Tells `slot`'s observer, if any, that the L5 of `key`/`token` is sent now.
    pub(crate) fn invoke(slot: &'a ObserverSlot, key: &'a str, token: u64) -> Option<Self> {
        let observer = slot.get()?.as_ref();
        let ticket = observer.invoked(key, token);
        Some(Observed {
            observer,
            ticket,
            key,
            token,
        })
    }

    /// Reports the outcome.
    pub(crate) fn complete(self, outcome: RenewalOutcome) {
        self.observer
            .completed(self.ticket, self.key, self.token, outcome);
    }
}
