//! The redis session's renew task: the SDK's heartbeat task in miniature,
//! as the etcd adapter's keep-alive task is, on the SDK's own pieces — the
//! fixed-rate schedule ([`schedule::Due`]), the recorder (`record_exchange`,
//! `record_ticks`, `record_unserved`, the gaps), and the deadline rule
//! (`lease::apply_grant`, through `LeaseState::apply_keep_alive`).
//!
//! Every period one exchange: the renew script with every key the session
//! holds (none is fine: the exchange still measures the round trip and
//! keeps the session's deadline). Recorded as the heartbeat (`hb_*`); each
//! key it carried is also counted as a renewal (`renew_*` counts, no RTT
//! sample of its own: its RTT is the exchange's). On a reply, each renewed
//! grant's deadline becomes `send + lease × (1 − m)` and the session's
//! `send + session TTL × (1 − m)`; a key
//! refused (expired, or another holder's) loses the session (as a fencepost
//! `410`: `session_lost_expired`). A timeout or an error moves nothing: the
//! deadlines decide (D5).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use fencepost_sdk::lease::GrantReply;
use fencepost_sdk::metrics::{Outcome, RenewOutcome};
use fencepost_sdk::schedule::{self, Due};
use fencepost_sdk::{DeadlineKind, LostReason, MonoTime};
use tokio::time::Instant;
use tracing::debug;

use super::scripts;
use super::shared::{Grant, RENEW, Shared, lock};
use crate::backend::BackendError;

/// What one renew exchange produced.
enum Renewed {
    /// A reply: per key carried, renewed or refused.
    Reply(Vec<bool>),
    /// No answer within the timeout.
    Timeout,
    /// The connection or the script failed.
    Error(BackendError),
}

/// One renew exchange carrying `grants`, bounded by `timeout`.
async fn renew_once(s: &Shared, grants: &[Arc<Grant>], timeout: Duration) -> Renewed {
    let keys: Vec<&str> = grants.iter().map(|g| g.lock_key.as_str()).collect();
    let lease = s.lease_ms().to_string();
    let args: Vec<&str> = std::iter::once(lease.as_str())
        .chain(grants.iter().map(|g| g.value.as_str()))
        .collect();
    match s.eval(&RENEW, &keys, &args, timeout).await {
        Ok(v) => match scripts::decode_renew(&v, grants.len()) {
            Some(flags) => Renewed::Reply(flags),
            None => Renewed::Error(BackendError::Unexpected("a renew reply of another shape")),
        },
        Err(BackendError::Lock(fencepost_sdk::LockError::Timeout { .. })) => Renewed::Timeout,
        Err(e) => Renewed::Error(e),
    }
}

/// Applies a reply (`reply` grants the lease): each grant's deadline, the
/// session's (over the session TTL), the gap; a refused key loses the session.
fn apply_reply(s: &Shared, grants: &[Arc<Grant>], flags: &[bool], reply: GrantReply, ppm: u64) {
    let metrics = &s.inner.metrics;
    for (g, renewed) in grants.iter().zip(flags) {
        if !renewed {
            // Released while the exchange was in flight: our own DEL, not a loss.
            if !lock(&s.grants).iter().any(|held| Arc::ptr_eq(held, g)) {
                continue;
            }
            metrics.record_renewal(RenewOutcome::Refused, None);
            debug!(key = %g.key, token = g.token, "renew refused: the key expired or changed hands");
            s.lease.mark_lost(LostReason::SessionExpired);
            continue;
        }
        metrics.record_renewal(RenewOutcome::Ok, None);
        match g.lease.apply_keep_alive(reply, ppm) {
            Ok(_) => metrics.margin_applied(DeadlineKind::Renew, ppm),
            Err(_) => {
                g.lease.mark_lost(LostReason::Deadline);
            }
        }
    }
    let before = s.lease.deadline();
    let session = GrantReply {
        granted_ms: s.session_ms(),
        ..reply
    };
    match s.lease.apply_keep_alive(session, ppm) {
        Ok(_) => {
            // The SDK's gap: last acknowledged send to this receipt.
            let last = MonoTime::from_nanos(
                s.last_ack_send_nanos
                    .swap(reply.send.as_nanos(), Ordering::AcqRel),
            );
            metrics.record_gap(
                reply.received.saturating_duration_since(last),
                before.saturating_duration_since(last),
            );
            metrics.heartbeat_ok();
            metrics.margin_applied(DeadlineKind::Heartbeat, ppm);
        }
        Err(refused) => {
            debug!(%refused, "renew reply read after the session deadline");
            s.lease.mark_lost(LostReason::Deadline);
        }
    }
}

/// One tick's exchange: sends, records, applies.
async fn tick(s: &Shared, due: &Due, lag: Duration, timeout: Duration) {
    let metrics = &s.inner.metrics;
    let grants: Vec<Arc<Grant>> = lock(&s.grants).clone();
    let ppm = s.inner.margin_ppm();
    let send = s.now();
    let result = renew_once(s, &grants, timeout).await;
    let received = s.now();
    let rtt = received.saturating_duration_since(send);
    metrics.record_ticks(due.count, Some(lag));
    let outcome = match &result {
        Renewed::Reply(_) => Outcome::Reply,
        Renewed::Timeout => Outcome::Timeout,
        Renewed::Error(_) => Outcome::Error,
    };
    metrics.record_exchange(outcome, rtt, due.corrected(rtt, lag));
    let reply = GrantReply {
        send,
        received,
        granted_ms: s.lease_ms(),
    };
    match result {
        Renewed::Reply(flags) => apply_reply(s, &grants, &flags, reply, ppm),
        failed => {
            let o = match failed {
                Renewed::Timeout => RenewOutcome::Timeout,
                _ => RenewOutcome::Error,
            };
            for _ in &grants {
                metrics.record_renewal(o, None);
            }
            if let Renewed::Error(e) = failed {
                debug!(error = %e, "renew failed; retrying next tick");
            }
        }
    }
}

/// The renew task: one exchange per wake-up at a fixed rate of
/// `lease × (1 − m) / k`, until the session is lost (or the task is aborted).
pub(super) async fn renew_task(s: Arc<Shared>) {
    let metrics = &s.inner.metrics;
    let origin = Instant::now();
    let offset = |t: Instant| t.saturating_duration_since(origin);
    let mut period = s.period();
    let mut next_due = period;
    loop {
        tokio::time::sleep_until(origin + next_due).await;
        let due = Due::at(next_due, period, offset(Instant::now()));
        let now = s.now();
        if let Some(reason) = s.lost_at(now) {
            // Ticks due before the deadline were needed and never served.
            metrics.record_ticks(due.count, None);
            if reason == LostReason::Deadline {
                let overrun = now.saturating_duration_since(s.lease.deadline());
                metrics.record_unserved(due.unserved(offset(Instant::now()), overrun));
            }
            s.report_loss(now);
            return;
        }
        // `now` is before the deadline here, so this is at least 1 ms.
        let timeout = s.timeout_at(now).unwrap_or(Duration::from_millis(1));
        let lag = due.lag(offset(Instant::now()));
        tick(&s, &due, lag, timeout).await;
        if s.lost_at(s.now()).is_some() {
            s.report_loss(s.now());
            return;
        }
        next_due = due.next();
        let p = s.period();
        if p != period {
            next_due = schedule::rebase(next_due, period, p, offset(Instant::now()));
            period = p;
        }
    }
}
