//! The heartbeat task of one session (T-040 §4).
//!
//! Every period (`min(session_ttl, shortest live lease) × (1 − margin) / 3`)
//! it: reports losses discovered since the last tick (a deadline reached, a
//! flag set by a call); sends L2 and, on 200, moves the session deadline to
//! `send + ttl × (1 − margin)`; sends L5 for each live handle with under two
//! periods left (boundary included). 404/410 or the local deadline make the session LOST (every
//! handle lost, listeners fired here, `session_lost` logged) and end the task.
//! 503 and transport errors change nothing: the next tick retries, and only
//! the deadline decides. A failed exchange never moves a deadline (D5).
//!
//! The task sleeps on tokio timers only and reads time through the client's
//! [`Clock`](crate::Clock). No lock is held across a request.

use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::Duration;

use tracing::{debug, error};

use super::shared::SessionShared;
use crate::clock::timer_now;
use crate::error::{LockError, LostReason};
use crate::lease::{self, GrantReply};
use crate::transport::GrantRef;

/// The task body: tick every period until the session is lost (or the task
/// is aborted by close/drop).
pub(crate) async fn run(s: Arc<SessionShared>) {
    let mut last_tick = timer_now();
    loop {
        if let Some(stall) = s.faults.take_stall() {
            debug!(session_id = %s.id, ?stall, "heartbeat stalled (injected fault)");
            tokio::time::sleep(stall).await;
        } else {
            let next = last_tick + s.current_period();
            tokio::select! {
                // A due tick wins over a pending wake-up, so a stream of
                // acquires cannot postpone the heartbeat.
                biased;
                _ = tokio::time::sleep_until(next) => {}
                // A new handle (the period may be shorter now) or a fault:
                // recompute before sleeping again.
                _ = s.wake.notified() => continue,
            }
        }
        last_tick = timer_now();
        if tick(&s).await.is_break() {
            debug!(session_id = %s.id, "heartbeat task ends: session lost");
            return;
        }
    }
}

/// One tick. `Break` once the session is lost and reported.
async fn tick(s: &SessionShared) -> ControlFlow<()> {
    let clock = &*s.clock;
    let cfg = &s.client.config;
    let metrics = &s.client.metrics;

    // 1. Losses discovered since the last tick, and the local deadlines.
    let now = clock.now();
    if s.live.lost_reason().is_some() || now.has_reached(s.live.deadline()) {
        s.report_session_loss(now);
        return ControlFlow::Break(());
    }
    s.report_handle_losses(now);
    if s.faults.muted() {
        return ControlFlow::Continue(());
    }

    // 2. L2. No point waiting for a reply past the deadline it would extend.
    let old_deadline = s.live.deadline();
    let timeout = cfg
        .request_timeout
        .min(lease::remaining(now, old_deadline))
        .max(Duration::from_millis(1));
    let reply = s.client.http.heartbeat(clock, &s.id, timeout).await;
    if reply.got_reply() {
        metrics.record_rtt(reply.received.saturating_duration_since(reply.send));
    }
    match reply.result {
        Ok(hb) => {
            let grant = GrantReply {
                send: reply.send,
                received: reply.received,
                granted_ms: hb.ttl_ms,
            };
            match s.apply_heartbeat(grant) {
                Ok(_) => metrics.heartbeat_ok(),
                Err(refused) => {
                    // Someone may already have been told LockLost, and loss is terminal.
                    debug!(session_id = %s.id, ttl_ms = hb.ttl_ms, %refused, "heartbeat reply refused");
                    s.live.mark_lost(LostReason::Deadline);
                }
            }
        }
        Err(e) => match e.session_loss() {
            Some(reason) => {
                s.live.mark_lost(reason);
            }
            None => debug!(session_id = %s.id, error = %e, "heartbeat failed; retrying next tick"),
        },
    }
    if s.live.lost_reason().is_some() {
        s.report_session_loss(clock.now());
        return ControlFlow::Break(());
    }

    // 3. L5 for every live handle with under two periods left. The boundary
    //    is included: on exact (virtual) time a handle acquired on a tick has
    //    exactly two periods left one tick later, and must still get two
    //    renew attempts before its deadline.
    let period = s.current_period();
    let due: Vec<_> = {
        let now = clock.now();
        let handles = s.handles.lock().unwrap_or_else(|e| e.into_inner());
        handles
            .iter()
            .filter(|h| {
                h.flagged().is_none() && lease::remaining(now, h.own.deadline()) <= period * 2
            })
            .cloned()
            .collect()
    };
    for h in due {
        let now = clock.now();
        let own_deadline = h.own.deadline();
        if now.has_reached(own_deadline) {
            h.own.mark_lost(LostReason::Deadline);
            continue;
        }
        let timeout = cfg
            .request_timeout
            .min(lease::remaining(now, own_deadline))
            .max(Duration::from_millis(1));
        let grant = GrantRef {
            key: &h.key,
            token: h.token,
        };
        let reply = s
            .client
            .http
            .renew(clock, grant, &s.id, h.requested_ttl_ms, timeout)
            .await;
        if reply.got_reply() {
            metrics.record_rtt(reply.received.saturating_duration_since(reply.send));
        }
        match reply.result {
            Ok(g) if g.token != h.token => {
                // C1: renew never changes the token. Trust neither value.
                error!(key = %h.key, token = h.token, reply_token = g.token, "renew answered with another token");
                h.own.mark_lost(LostReason::LeaseLost);
            }
            Ok(g) => {
                let grant = GrantReply {
                    send: reply.send,
                    received: reply.received,
                    granted_ms: g.lease_ms,
                };
                match s.apply_renew(&h, grant) {
                    Ok(_) => metrics.renewal_ok(),
                    Err(refused) => {
                        debug!(key = %h.key, token = h.token, %refused, "renew reply refused");
                        h.own.mark_lost(LostReason::Deadline);
                    }
                }
            }
            Err(LockError::LockLost(_)) => {
                h.own.mark_lost(LostReason::LeaseLost);
            }
            Err(e) => match e.session_loss() {
                Some(reason) => {
                    s.live.mark_lost(reason);
                    break;
                }
                None => debug!(key = %h.key, error = %e, "renew failed; retrying next tick"),
            },
        }
    }

    // 4. Report what this tick found.
    let now = clock.now();
    if s.live.lost_reason().is_some() {
        s.report_session_loss(now);
        return ControlFlow::Break(());
    }
    s.report_handle_losses(now);
    ControlFlow::Continue(())
}
