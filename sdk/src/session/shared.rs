//! [`SessionShared`]: what a session's calls and its heartbeat task share
//! (the session's liveness, its handle registry, listeners, faults), the
//! session's side of the deadline arithmetic, and the one place that
//! *reports* losses (logs, counters, listeners), exactly once each.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rand_chacha::ChaCha8Rng;
use tokio::sync::Notify;
use tracing::warn;

use super::fault::FaultState;
use super::handle::{HandleShared, Liveness};
use super::listeners::{Listeners, LockLostEvent};
use super::mutex::lock;
use super::renewals::ObserverSlot;
use crate::clock::{Clock, MonoTime};
use crate::error::LostReason;
use crate::inner::ClientInner;
use crate::lease::{self, GrantRefused, GrantReply};
use crate::metrics::DeadlineKind;

/// Everything a session's calls and its heartbeat task share.
pub(crate) struct SessionShared {
    /// The client's configuration, HTTP layer and metrics.
    pub(crate) client: Arc<ClientInner>,
    /// The client's clock (copied here: one pointer hop less on the hot check).
    pub(crate) clock: Arc<dyn Clock>,
    /// The session id the server assigned (the holder's secret, C1 §5).
    pub(crate) id: Arc<str>,
    /// The owner id given at open.
    pub(crate) owner_id: String,
    /// The session's deadline and loss flag, shared with every handle.
    pub(crate) live: Arc<Liveness>,
    /// The session TTL granted by the latest L1/L2, ms.
    pub(crate) ttl_ms: AtomicU64,
    /// The send time (ns on the client's clock) of the last acknowledged
    /// L1/L2: the start of the heartbeat gap in progress.
    pub(crate) last_ack_send_nanos: AtomicU64,
    /// Live handles, plus lost ones the heartbeat task has not reported yet.
    /// A std mutex, held only to add/remove/copy (never across an await).
    pub(crate) handles: Mutex<Vec<Arc<HandleShared>>>,
    /// Lost-lock listeners and the losses reported to them.
    pub(crate) listeners: Listeners,
    /// Set once the session loss has been reported (exactly once).
    pub(crate) loss_reported: AtomicBool,
    /// Wakes the heartbeat task early: a new handle (the period may shrink)
    /// or an injected fault.
    pub(crate) wake: Notify,
    /// The acquire jitter RNG (ChaCha8, client seed, stream = session
    /// ordinal). A std mutex held only to draw one delay.
    pub(crate) rng: Mutex<ChaCha8Rng>,
    /// Injected heartbeat faults.
    pub(crate) faults: FaultState,
    /// The renewal observer, if one was set.
    pub(crate) renewals: ObserverSlot,
}

impl SessionShared {
    /// The margin (ppm) for a grant of `granted_ms`.
    pub(crate) fn margin_ppm(&self, granted_ms: u64) -> u64 {
        self.client.margin_ppm(granted_ms)
    }

    /// Applies a successful L2 (the session's equivalent of
    /// [`HandleShared::apply_grant`]): the session deadline becomes
    /// `send + ttl × (1 − margin)` and the granted TTL is remembered; a reply
    /// read at or after the deadline is refused and moves nothing.
    ///
    /// An applied reply closes a heartbeat gap: `received − last acknowledged
    /// send`, exposed to the window `deadline before − last acknowledged
    /// send`; this reply's send starts the next one.
    pub(crate) fn apply_heartbeat(&self, reply: GrantReply) -> Result<MonoTime, GrantRefused> {
        let ppm = self.margin_ppm(reply.granted_ms);
        let before = self.live.deadline();
        let deadline = self.live.apply_grant(reply, ppm)?;
        let last = MonoTime::from_nanos(
            self.last_ack_send_nanos
                .swap(reply.send.as_nanos(), Ordering::AcqRel),
        );
        self.client.metrics.record_gap(
            reply.received.saturating_duration_since(last),
            before.saturating_duration_since(last),
        );
        self.ttl_ms.store(reply.granted_ms, Ordering::Release);
        self.client
            .metrics
            .margin_applied(DeadlineKind::Heartbeat, ppm);
        Ok(deadline)
    }

    /// Applies a successful L5 to `h` ([`HandleShared::apply_grant`] with the
    /// margin for the granted lease).
    pub(crate) fn apply_renew(
        &self,
        h: &HandleShared,
        reply: GrantReply,
    ) -> Result<MonoTime, GrantRefused> {
        let ppm = self.margin_ppm(reply.granted_ms);
        let deadline = h.apply_grant(reply, ppm)?;
        self.client.metrics.margin_applied(DeadlineKind::Renew, ppm);
        Ok(deadline)
    }

    /// The heartbeat period:
    /// `min(session_ttl, shortest live lease) × (1 − margin) / k`.
    pub(crate) fn current_period(&self) -> Duration {
        let ttl = self.ttl_ms.load(Ordering::Acquire);
        let shortest = lock(&self.handles)
            .iter()
            .filter(|h| h.flagged().is_none())
            .map(|h| h.lease_ms())
            .min();
        let base = shortest.map_or(ttl, |l| l.min(ttl));
        let k = self.client.config.heartbeat_divisor;
        lease::heartbeat_period(ttl, shortest, self.margin_ppm(base), k)
    }

    /// Reports the session loss once: `session_lost` log, counter, every
    /// handle lost, listeners fired; a loss at the deadline also records its
    /// censored heartbeat gap (`now − last acknowledged send`, ≥ the window,
    /// counted over it), so every such loss has exactly one. Called by the heartbeat task when it
    /// finds the loss, and by [`stop`](Self::stop) for one it had not reported.
    pub(crate) fn report_session_loss(&self, now: MonoTime) {
        let reason = self.live.mark_lost(LostReason::Deadline);
        if self.loss_reported.swap(true, Ordering::AcqRel) {
            return;
        }
        let handles = std::mem::take(&mut *lock(&self.handles));
        if reason == LostReason::SessionClosed {
            return;
        }
        let overrun = now.saturating_duration_since(self.live.deadline());
        warn!(
            name: "session_lost",
            event = "session_lost",
            session_id = %self.id,
            owner_id = %self.owner_id,
            reason = reason.session_label().unwrap_or("deadline"),
            overrun_ms = overrun.as_millis() as u64,
            handles = handles.len(),
            "session lost: {reason}"
        );
        if reason == LostReason::Deadline {
            let last = MonoTime::from_nanos(self.last_ack_send_nanos.load(Ordering::Acquire));
            self.client
                .metrics
                .record_lost_gap(now.saturating_duration_since(last));
        }
        self.client.metrics.session_lost(reason);
        for h in handles {
            let r = h.own.mark_lost(reason);
            self.report_handle(&h, r);
        }
    }

    /// The session is being closed or dropped (its heartbeat task stopped).
    /// A loss in force at `now` (a flag, or the deadline) that the task had
    /// not reported is reported now, so no lost session goes uncounted;
    /// otherwise the session and its handles become `SessionClosed`, silently.
    pub(crate) fn stop(&self, now: MonoTime) {
        let reason = self
            .live
            .lost_at(now)
            .unwrap_or_else(|| self.live.mark_lost(LostReason::SessionClosed));
        if reason != LostReason::SessionClosed {
            self.report_session_loss(now);
        } else if !self.loss_reported.swap(true, Ordering::AcqRel) {
            for h in std::mem::take(&mut *lock(&self.handles)) {
                h.own.mark_lost(LostReason::SessionClosed);
            }
        }
    }

    /// Reports every registered handle that is lost (flag set, or its own
    /// deadline reached at `now`) and drops it from the registry: a
    /// `lease_expired` log and the listeners. Called by the heartbeat task only.
    pub(crate) fn report_handle_losses(&self, now: MonoTime) {
        let mut lost = Vec::new();
        lock(&self.handles).retain(|h| {
            let gone = h.own.lost_reason().is_some() || now.has_reached(h.own.deadline());
            if gone {
                lost.push(h.clone());
            }
            !gone
        });
        for h in lost {
            let reason = h.own.mark_lost(LostReason::Deadline);
            let deadline = h.own.deadline();
            let ago_ms = if now >= deadline {
                now.saturating_duration_since(deadline).as_millis() as i64
            } else {
                -(deadline.saturating_duration_since(now).as_millis() as i64)
            };
            warn!(
                name: "lease_expired",
                event = "lease_expired",
                key = %h.key,
                token = h.token,
                session_id = %self.id,
                client_deadline_ms_ago = ago_ms,
                reason = %reason,
                "lease lost: {reason}"
            );
            self.report_handle(&h, reason);
        }
    }

    /// Counts one lost handle and tells the listeners.
    fn report_handle(&self, h: &HandleShared, reason: LostReason) {
        self.client.metrics.handle_lost();
        self.listeners.report(LockLostEvent {
            key: h.key.clone(),
            token: h.token,
            session_id: self.id.clone(),
            reason,
        });
    }
}
