//! The heartbeat task of one session (T-040 §4).
//!
//! Every period (`min(session_ttl, shortest live lease) × (1 − margin) / k`, k
//! the heartbeat divisor, 3 by default)
//! it: reports losses discovered since the last tick (a deadline reached, a
//! flag set by a call); then sends, all at once, L2 and an L5 for each live
//! handle with at most two and a half periods left ([`lease::renew_due`]).
//! Each exchange has its own timeout,
//! bounded by the deadline it protects, so N slow renews cost one renew's
//! time, and none is sent once its deadline (the handle's or the session's)
//! has passed. On 200 the deadline moves to `send + granted × (1 − margin)`.
//! 404/410 or the local deadline make the session LOST (every handle lost,
//! listeners fired here, `session_lost` logged) and end the task. 503 and
//! transport errors change nothing: the next tick retries, and only the
//! deadline decides. A failed exchange never moves a deadline (D5).
//!
//! The schedule is fixed-rate ([`schedule`](super::schedule)): tick `n + 1`
//! is due at tick `n` plus the period (recomputed when the period changes),
//! not at the late wake-up plus the period. A wake-up after a stall serves
//! every tick that fell due with one L2, never a burst of catch-up L2s; the
//! skipped ticks are counted (`hb_ticks_missed`) and each gets its corrected
//! sample. Every exchange records its outcome (reply, timeout, error), its
//! raw RTT (a timeout at the time it was given up: censored) and its RTT
//! from the scheduled send: an L2 into the heartbeat's recorders, an L5
//! into the renewal's own (outcome ok, refused, timeout or error).
//!
//! The task sleeps on tokio timers only and reads deadlines through the
//! client's [`Clock`](crate::Clock); the schedule and the tick lag are on the
//! timer's clock (the same time under `TokioClock`; under the production
//! `BootTimeClock` they differ only across a host suspend, which the timers
//! do not count). No lock is held across a request.

use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinSet;
use tokio::time::Instant;
use tracing::{debug, error, warn};

use super::handle::HandleShared;
use super::mutex::lock;
use super::renewals::{Observed, RenewalOutcome};
use super::schedule::{self, Due};
use super::shared::SessionShared;
use crate::clock::{MonoTime, timer_now};
use crate::error::{LockError, LostReason};
use crate::lease::{self, GrantReply};
use crate::metrics::{Outcome, RenewOutcome};
use crate::transport::{GrantRef, Reply};

/// The task body: tick at a fixed rate until the session is lost (or the
/// task is aborted by close/drop).
pub(crate) async fn run(s: Arc<SessionShared>) {
    let origin = timer_now();
    let offset = |t: Instant| t.saturating_duration_since(origin);
    let mut period = s.current_period();
    let mut next_due = period;
    loop {
        if let Some(stall) = s.faults.take_stall() {
            debug!(session_id = %s.id, ?stall, "heartbeat stalled (injected fault)");
            tokio::time::sleep(stall).await;
            continue;
        }
        tokio::select! {
            // A due tick wins over a pending wake-up, so a stream of
            // acquires cannot postpone the heartbeat.
            biased;
            _ = tokio::time::sleep_until(origin + next_due) => {}
            // A new handle (the period may be shorter now) or a fault.
            _ = s.wake.notified() => {
                let p = s.current_period();
                if p != period {
                    next_due = schedule::rebase(next_due, period, p, offset(timer_now()));
                    period = p;
                }
                continue;
            }
        }
        let due = Due::at(next_due, period, offset(timer_now()));
        let tick = Tick { due, origin };
        if tick.run(&s).await.is_break() {
            debug!(session_id = %s.id, "heartbeat task ends: session lost");
            return;
        }
        next_due = due.next();
        let p = s.current_period();
        if p != period {
            next_due = schedule::rebase(next_due, period, p, offset(timer_now()));
            period = p;
        }
    }
}

/// One wake-up: the scheduled ticks it serves, on the timer's clock.
#[derive(Clone, Copy)]
struct Tick {
    /// The scheduled ticks due.
    due: Due,
    /// The task's start, the zero of `due`'s offsets.
    origin: Instant,
}

impl Tick {
    /// How late an exchange sent now is: now − the earliest tick served.
    fn lag_now(&self) -> Duration {
        self.due
            .lag(timer_now().saturating_duration_since(self.origin))
    }

    /// One tick. `Break` once the session is lost and reported.
    async fn run(self, s: &Arc<SessionShared>) -> ControlFlow<()> {
        let clock = &*s.clock;
        let metrics = &s.client.metrics;

        // 1. Losses discovered since the last tick, and the local deadlines.
        let now = clock.now();
        if let Some(reason) = s.live.lost_at(now) {
            // The ticks due before the deadline were needed and never served:
            // censored corrected samples at their lateness now.
            metrics.record_ticks(self.due.count, None);
            if reason == LostReason::Deadline {
                let overrun = now.saturating_duration_since(s.live.deadline());
                let at = timer_now().saturating_duration_since(self.origin);
                metrics.record_unserved(self.due.unserved(at, overrun));
            }
            s.report_session_loss(now);
            return ControlFlow::Break(());
        }
        s.report_handle_losses(now);
        if s.faults.muted() {
            metrics.record_ticks(self.due.count, None);
            return ControlFlow::Continue(());
        }

        // 2. The handles due for L5: at most two and a half periods left
        //    (lease::renew_due: two attempts, each with a period to complete).
        let period = s.current_period();
        let due: Vec<_> = lock(&s.handles)
            .iter()
            .filter(|h| {
                h.flagged().is_none()
                    && lease::renew_due(lease::remaining(now, h.own.deadline()), period)
            })
            .cloned()
            .collect();

        // 3. L2 and every due L5 at once, each with its own timeout bounded by the
        //    deadline it protects: N slow renews take one renew's time, so they
        //    cannot push the next L2 past the session deadline.
        let mut renews = JoinSet::new();
        for h in due {
            renews.spawn(renew(s.clone(), h, self));
        }
        let ((), ()) = tokio::join!(heartbeat(s, self), async {
            while let Some(done) = renews.join_next().await {
                if let Err(e) = done {
                    error!(session_id = %s.id, error = %e, "a renew task failed");
                }
            }
        });

        // 4. Report what this tick found.
        let now = clock.now();
        if s.live.lost_reason().is_some() {
            s.report_session_loss(now);
            return ControlFlow::Break(());
        }
        s.report_handle_losses(now);
        ControlFlow::Continue(())
    }
}

/// One L2. On 200 the session deadline moves to `send + ttl × (1 − margin)`
/// ([`SessionShared::apply_heartbeat`]); 404/410 lose the session; anything
/// else moves nothing.
async fn heartbeat(s: &SessionShared, tick: Tick) {
    let clock = &*s.clock;
    let metrics = &s.client.metrics;
    let now = clock.now();
    // Never sent past the deadline; no point waiting for a reply past it.
    let Some(left) = time_left(now, s.live.deadline()) else {
        s.live.mark_lost(LostReason::Deadline);
        metrics.record_ticks(tick.due.count, None);
        return;
    };
    let timeout = s.client.config.request_timeout.min(left);
    let lag = tick.lag_now();
    let reply = s.client.http.heartbeat(clock, &s.id, timeout).await;
    metrics.record_ticks(tick.due.count, Some(lag));
    record(s, &reply, tick.due.corrected(reply.elapsed(), lag));
    match reply.result {
        Ok(hb) => {
            let grant = GrantReply {
                send: reply.send,
                received: reply.received,
                granted_ms: hb.ttl_ms,
            };
            match s.apply_heartbeat(grant) {
                Ok(_) => s.client.metrics.heartbeat_ok(),
                Err(refused) => {
                    // Someone may already have been told LockLost, and loss is terminal.
                    debug!(session_id = %s.id, ttl_ms = hb.ttl_ms, %refused, "heartbeat reply refused");
                    s.live.mark_lost(LostReason::Deadline);
                }
            }
        }
        Err(e) => match e.heartbeat_loss() {
            Some(reason) => {
                if matches!(
                    e,
                    LockError::Unauthenticated { .. } | LockError::Forbidden { .. }
                ) {
                    // The session cannot be kept alive: the token was
                    // withdrawn, or the session is not bound to it.
                    warn!(error = %e, "heartbeat refused by the server's authorization; the session is lost");
                }
                s.live.mark_lost(reason);
            }
            None => debug!(session_id = %s.id, error = %e, "heartbeat failed; retrying next tick"),
        },
    }
}

/// One L5 for `h`, on its own task. Refused locally (nothing sent) once the
/// handle's or the session's deadline has passed; the timeout is bounded by
/// the earlier of the two. On 200 the handle's deadline moves to
/// `send + lease × (1 − margin)` ([`HandleShared::apply_grant`]).
async fn renew(s: Arc<SessionShared>, h: Arc<HandleShared>, tick: Tick) {
    let clock = &*s.clock;
    let now = clock.now();
    // check_at records which deadline passed (the session's or the handle's).
    if h.check_at(now).is_err() {
        return;
    }
    let Some(left) = time_left(now, h.usable_deadline()) else {
        return;
    };
    let timeout = s.client.config.request_timeout.min(left);
    let grant = GrantRef {
        key: &h.key,
        token: h.token,
    };
    let lag = tick.lag_now();
    let observed = Observed::invoke(&s.renewals, &h.key, h.token);
    let reply = s
        .client
        .http
        .renew(clock, grant, &s.id, h.requested_ttl_ms, timeout)
        .await;
    // A reply (any status) or a timeout (censored) is an RTT sample; a
    // transport failure is none.
    let exchange = reply.outcome();
    let sample = (exchange != Outcome::Error)
        .then(|| (reply.elapsed(), reply.elapsed().saturating_add(lag)));
    // The outcome for the metrics, and for the renewal observer.
    let (outcome, observed_outcome) = match reply.result {
        Ok(g) if g.token != h.token => {
            // C1: renew never changes the token. Trust neither value.
            error!(key = %h.key, token = h.token, reply_token = g.token, "renew answered with another token");
            h.own.mark_lost(LostReason::LeaseLost);
            (RenewOutcome::Error, RenewalOutcome::Refused)
        }
        Ok(g) => {
            let grant = GrantReply {
                send: reply.send,
                received: reply.received,
                granted_ms: g.lease_ms,
            };
            match s.apply_renew(&h, grant) {
                Ok(deadline) => (
                    RenewOutcome::Ok,
                    RenewalOutcome::Acknowledged {
                        lease: Duration::from_millis(g.lease_ms),
                        deadline,
                        remaining: lease::remaining(clock.now(), h.usable_deadline()),
                    },
                ),
                Err(refused) => {
                    debug!(key = %h.key, token = h.token, %refused, "renew reply refused");
                    h.own.mark_lost(LostReason::Deadline);
                    (RenewOutcome::Error, RenewalOutcome::Refused)
                }
            }
        }
        Err(LockError::LockLost(_)) => {
            h.own.mark_lost(LostReason::LeaseLost);
            (RenewOutcome::Refused, RenewalOutcome::Refused)
        }
        Err(e) => {
            match e.session_loss() {
                Some(reason) => {
                    s.live.mark_lost(reason);
                }
                None => debug!(key = %h.key, error = %e, "renew failed; retrying next tick"),
            }
            let outcome = if exchange == Outcome::Timeout {
                RenewOutcome::Timeout
            } else {
                RenewOutcome::Error
            };
            (outcome, RenewalOutcome::Unknown)
        }
    };
    s.client.metrics.record_renewal(outcome, sample);
    if let Some(o) = observed {
        o.complete(observed_outcome);
    }
}

/// The time left before `deadline` at `now` (at least 1 ms, the smallest
/// timeout worth setting), or `None` once it has passed.
fn time_left(now: MonoTime, deadline: MonoTime) -> Option<Duration> {
    (!now.has_reached(deadline))
        .then(|| lease::remaining(now, deadline).max(Duration::from_millis(1)))
}

/// Records one L2 exchange: its outcome, its raw RTT and its corrected samples.
fn record<T>(s: &SessionShared, reply: &Reply<T>, corrected: impl IntoIterator<Item = Duration>) {
    s.client
        .metrics
        .record_exchange(reply.outcome(), reply.elapsed(), corrected);
}
