//! [`RedlockError`]: why a Redlock call failed, in the adapter's own terms
//! (the SDK's `LockError` covers the client-side checks).

use std::time::Duration;

use super::instance::InstanceError;

/// Why a Redlock call failed. Each variant says what the caller can do.
#[derive(Debug, thiserror::Error)]
pub enum RedlockError {
    /// The configuration has no instance URL: give one or more.
    #[error("redlock needs at least one instance URL (redis://IP:PORT); none was given")]
    NoInstances,
    /// An instance URL does not parse: fix it.
    #[error("a redlock instance URL is refused: {0}")]
    Url(InstanceError),
    /// The last lock round set the key on fewer than a majority of the
    /// instances: another owner holds it, or too many instances are down
    /// or slow. Retry later.
    #[error(
        "redlock: {key} was set on {yes} of {instances} instances ({no} held by another value, \
         {failed} failed or timed out); a lock needs {needed}"
    )]
    NoQuorum {
        /// The key.
        key: String,
        /// Instances that set it.
        yes: usize,
        /// Instances where another value held it.
        no: usize,
        /// Instances that failed or timed out.
        failed: usize,
        /// The instances asked.
        instances: usize,
        /// The majority.
        needed: usize,
    },
    /// A majority set the key, but the round took so long that the client
    /// deadline (at most `ttl − drift` after the send) had passed: the key was
    /// unlocked everywhere. Retry with a longer TTL or faster instances.
    #[error(
        "redlock: {key} was set on a majority, but the round took {elapsed:?} of its {ttl:?} TTL \
         and left no usable lease; it was unlocked on every instance"
    )]
    NoValidity {
        /// The key.
        key: String,
        /// From the send to the last answer.
        elapsed: Duration,
        /// The TTL asked for.
        ttl: Duration,
    },
}
