//! [`Session::acquire`]: the bounded L4 loop (T-041) and the registration
//! of a grant as a [`LockHandle`]. The shape of the loop's options and its
//! backoff live in [`crate::acquire`].

use std::sync::Arc;
use std::time::Duration;

use fencepost_api::lock::{LeaseGranted, validate_key};
use tracing::debug;

use super::api::Session;
use super::handle::{HandleShared, LockHandle};
use super::mutex::lock;
use crate::acquire::{AcquireOptions, Backoff};
use crate::error::{LockError, ReplyProblem};
use crate::lease::{self, GrantReply};
use crate::metrics::{DeadlineKind, Metrics};
use crate::transport::duration_ms;

impl Session {
    /// L4, bounded (T-041). Tries at once; on `LOCK_HELD`, a 503 or a
    /// transport failure, waits `max(retry_after, jitter)` (full-jitter
    /// exponential backoff from the session's seeded RNG), never past
    /// `opts.wait_budget`, and tries again, at most `opts.max_attempts` times.
    /// Gives up with [`LockError::LockHeld`] (or the last transient error)
    /// when the budget is spent, or at once when `retry_after` says the key
    /// cannot be free within what is left.
    ///
    /// Nothing is sent on a lost session or once the session's client
    /// deadline has passed ([`LockError::SessionLost`], no round trip), and
    /// each attempt's timeout is bounded by the session's remaining time.
    ///
    /// The handle's deadline is `send + granted × (1 − margin)` with `send`
    /// read just before the successful request was written. After a lost
    /// reply (timeout) a retry within the budget is the holder's re-acquire
    /// (C1 §7): the server returns the same token with the lease restarted
    /// at that request's receipt, and the deadline counts from *that*
    /// attempt's send.
    ///
    /// Every call with a valid key counts once in
    /// `lock_acquires_total` ([`ClientStats::acquires_granted`](crate::ClientStats::acquires_granted),
    /// `acquires_failed`): `granted` when it returns a handle, `failed` for
    /// any other end, including a call dropped (cancelled) before it ended.
    pub async fn acquire(&self, key: &str, opts: AcquireOptions) -> Result<LockHandle, LockError> {
        validate_key(key).map_err(LockError::invalid_input)?;
        let mut count = AcquireCount {
            metrics: &self.shared.client.metrics,
            granted: false,
        };
        let result = self.acquire_valid(key, opts).await;
        count.granted = result.is_ok();
        result
    }

    /// [`acquire`](Self::acquire) for a validated key: the loop.
    async fn acquire_valid(
        &self,
        key: &str,
        opts: AcquireOptions,
    ) -> Result<LockHandle, LockError> {
        let s = &self.shared;
        let ttl_ms = duration_ms(opts.ttl.unwrap_or(s.client.config.default_ttl));
        let start = s.clock.now();
        let mut slept = Duration::ZERO;
        let mut backoff = Backoff::new(opts.base_backoff, opts.max_backoff);
        let mut attempts: u32 = 0;
        loop {
            // Never sent on a lost session, nor once its deadline has passed
            // (that is recorded as the loss; the heartbeat task reports it).
            let now = s.clock.now();
            if let Some(reason) = s.live.lost_at(now) {
                s.wake.notify_one();
                return Err(LockError::SessionLost { reason });
            }
            // A grant read after the session deadline would be lost at birth.
            let timeout = s
                .client
                .config
                .request_timeout
                .min(lease::remaining(now, s.live.deadline()))
                .max(Duration::from_millis(1));
            attempts += 1;
            let reply = s
                .client
                .http
                .acquire(&*s.clock, key, &s.id, ttl_ms, timeout)
                .await;
            let err = match reply.result {
                Ok(granted) => {
                    let grant = GrantReply {
                        send: reply.send,
                        received: reply.received,
                        granted_ms: granted.lease_ms,
                    };
                    return self.register_grant(key, ttl_ms, grant, granted);
                }
                Err(e) => e,
            };
            if let Some(reason) = err.session_loss() {
                s.live.mark_lost(reason);
                s.wake.notify_one();
                return Err(err);
            }
            let hint = match &err {
                LockError::LockHeld { retry_after_ms, .. } => {
                    Duration::from_millis(retry_after_ms.unwrap_or(0))
                }
                e if e.is_transient() => Duration::ZERO,
                _ => return Err(err),
            };
            let give_up = |err: LockError| match err {
                LockError::LockHeld { retry_after_ms, .. } => LockError::LockHeld {
                    key: key.to_string(),
                    retry_after_ms,
                    attempts,
                },
                other => other,
            };
            // Both are lower bounds of the time spent; the larger one counts
            // (a fake clock may not move while the timers do).
            let spent = s.clock.now().saturating_duration_since(start).max(slept);
            let left = opts.wait_budget.saturating_sub(spent);
            if attempts >= opts.max_attempts || left.is_zero() || hint > left {
                debug!(key, attempts, ?spent, error = %err, "acquire gives up");
                return Err(give_up(err));
            }
            let jitter = {
                let mut rng = lock(&s.rng);
                backoff.next_delay(&mut *rng)
            };
            let wait = hint.max(jitter).min(left);
            debug!(key, attempts, ?wait, error = %err, "acquire retries");
            tokio::time::sleep(wait).await;
            slept += wait;
        }
    }

    /// Turns a successful L4 into a registered handle.
    fn register_grant(
        &self,
        key: &str,
        requested_ttl_ms: u64,
        grant: GrantReply,
        granted: LeaseGranted,
    ) -> Result<LockHandle, LockError> {
        let s = &self.shared;
        if granted.key != key {
            return Err(LockError::UnexpectedReply {
                status: 200,
                problem: ReplyProblem::WrongKey {
                    asked: key.to_string(),
                    answered: granted.key,
                },
            });
        }
        let ppm = s.margin_ppm(grant.granted_ms);
        s.client.metrics.margin_applied(DeadlineKind::Acquire, ppm);
        let shared = Arc::new(HandleShared::granted(
            key,
            granted.token,
            requested_ttl_ms,
            grant,
            ppm,
            s.live.clone(),
        ));
        {
            // Checked under the registry lock: the heartbeat task sets the
            // session flag before it empties the registry, so a handle is
            // either refused here or reported by the task, never neither.
            let mut handles = lock(&s.handles);
            if let Some(reason) = s.live.lost_reason() {
                return Err(LockError::SessionLost { reason });
            }
            handles.push(shared.clone());
        }
        // The period may have shrunk with this lease.
        s.wake.notify_one();
        Ok(LockHandle { shared })
    }
}

/// Counts one acquire call when it ends (or is dropped): failed unless `granted`.
struct AcquireCount<'a> {
    metrics: &'a Metrics,
    granted: bool,
}

impl Drop for AcquireCount<'_> {
    fn drop(&mut self) {
        self.metrics.acquire_finished(self.granted);
    }
}
