//! The heartbeat task of a Redlock session: the SDK's heartbeat task in
//! miniature (the etcd adapter's), on the SDK's own pieces: the fixed-rate
//! schedule ([`Due`], one beat per wake-up however many ticks fell due, each
//! tick's corrected sample), the recorder (`record_exchange`, `record_ticks`,
//! `record_unserved`, the gaps), and the deadline rule of
//! [`LeaseState::apply_keep_alive`](crate::backend::etcd::lease::LeaseState::apply_keep_alive)
//! (= `lease::apply_grant`).
//!
//! One beat every `ttl × (1 − m) / k`: an extend round for every held lock
//! (at once), or, holding none, a `PING` round that measures a round over
//! the instances and moves nothing. A beat is one heartbeat exchange: a reply
//! when a majority of instances answered every round of it, else a timeout
//! when an instance timed out, else an error; its RTT is from the beat's
//! send to its last answer (an instance's timeout: "≥").

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use fencepost_sdk::lease::{self, GrantReply};
use fencepost_sdk::metrics::Outcome;
use fencepost_sdk::schedule::{self, Due};
use fencepost_sdk::{DeadlineKind, LostReason, MonoTime};
use futures_util::future::join_all;
use tokio::time::Instant;
use tracing::debug;

use super::instance::Op;
use super::quorum::{self, Votes};
use super::round::{self, Attempt};
use super::state::{Held, Shared};

/// What one beat did, as the recorder takes it.
struct Beat {
    /// The clock just before its first request.
    send: MonoTime,
    /// The clock once its last answer (or timeout) was in.
    received: MonoTime,
    /// Its outcome as a heartbeat exchange.
    outcome: Outcome,
    /// `Some(window)` when the beat did its job (every lock extended; the
    /// ping answered by a majority): the window the gap it closes is judged
    /// against.
    acked: Option<Duration>,
}

/// A round's answers as a heartbeat exchange.
fn outcome_of(v: &Votes) -> Outcome {
    if v.yes + v.no >= quorum::majority(v.instances()) {
        Outcome::Reply
    } else if v.timeouts > 0 {
        Outcome::Timeout
    } else {
        Outcome::Error
    }
}

/// The worst of several rounds' outcomes (error over timeout over reply).
fn worst(outcomes: impl Iterator<Item = Outcome>) -> Outcome {
    outcomes.fold(Outcome::Reply, |w, o| match (w, o) {
        (Outcome::Error, _) | (_, Outcome::Error) => Outcome::Error,
        (Outcome::Timeout, _) | (_, Outcome::Timeout) => Outcome::Timeout,
        _ => Outcome::Reply,
    })
}

/// Applies one extend round to `h`: granted moves the deadline from the
/// round's send (refused if read at or after the current deadline: lost at
/// the deadline); anything else loses the lock (the round unlocked it).
/// True when extended.
fn apply_extend(s: &Shared, h: &Held, a: &Attempt, ppm: u64) -> bool {
    if !a.granted() {
        debug!(key = %h.key, votes = ?a.votes, verdict = ?a.verdict, "redlock extend failed");
        h.lease.mark_lost(LostReason::SessionExpired);
        return false;
    }
    let reply = GrantReply {
        send: a.send,
        received: a.received,
        granted_ms: quorum::ttl_ms(h.ttl),
    };
    match h.lease.apply_keep_alive(reply, ppm) {
        Ok(_) => {
            s.inner.metrics.heartbeat_ok();
            s.inner.metrics.margin_applied(DeadlineKind::Heartbeat, ppm);
            true
        }
        Err(refused) => {
            debug!(key = %h.key, %refused, "redlock extend read too late");
            h.lease.mark_lost(LostReason::Deadline);
            false
        }
    }
}

/// The beat of a session holding no lock: a `PING` round.
async fn ping(s: &Shared) -> Beat {
    let ttl = s.inner.config.ttl;
    let send = s.now();
    let timeout = s.inner.instance_timeout(ttl);
    let votes = round::ask_all(&s.inner.instances, Op::Ping, "", "", timeout).await;
    let received = s.now();
    let answered = votes.yes >= quorum::majority(votes.instances());
    Beat {
        send,
        received,
        outcome: outcome_of(&votes),
        acked: answered.then(|| lease::usable(ttl, s.inner.margin_ppm(ttl))),
    }
}

/// The beat of a session holding `held`: an extend round for each, at once.
async fn extend(s: &Shared, held: &[Arc<Held>]) -> Beat {
    let clock = &*s.inner.config.clock;
    let send = s.now();
    let last = s.last_ack_send();
    let rounds = held.iter().map(|h| async move {
        let ppm = s.inner.margin_ppm(h.ttl);
        let before = h.lease.deadline();
        let timeout = s.timeout_at(h.ttl, before, clock.now());
        let op = Op::Extend {
            ttl_ms: quorum::ttl_ms(h.ttl),
        };
        let a = round::attempt(
            &s.inner.instances,
            clock,
            op,
            &h.key,
            &h.value,
            (h.ttl, timeout),
        )
        .await;
        // A lock released meanwhile is left alone.
        let ended = h.ended.load(Ordering::Acquire);
        let extended = ended || apply_extend(s, h, &a, ppm);
        (a, extended, before.saturating_duration_since(last))
    });
    let done = join_all(rounds).await;
    let received = done.iter().map(|(a, ..)| a.received).max().unwrap_or(send);
    let now = s.now();
    for h in held {
        s.report_loss(h, now);
    }
    let window = done.iter().map(|(.., w)| *w).min().unwrap_or_default();
    Beat {
        send,
        received,
        outcome: worst(done.iter().map(|(a, ..)| outcome_of(&a.votes))),
        acked: done.iter().all(|(_, ok, _)| *ok).then_some(window),
    }
}

/// Records `b`'s gap when it did its job: from the last such beat's send
/// to this one's last answer, against its window.
fn record_gap(s: &Shared, b: &Beat) {
    if let Some(window) = b.acked {
        let last = MonoTime::from_nanos(
            s.last_ack_send_nanos
                .swap(b.send.as_nanos(), Ordering::AcqRel),
        );
        s.inner
            .metrics
            .record_gap(b.received.saturating_duration_since(last), window);
    }
}

/// Reports the held locks whose deadline has passed at `now`; true when
/// one had.
fn deadline_losses(s: &Shared, now: MonoTime) -> bool {
    let mut any = false;
    for h in s.held_now() {
        if h.lease.lost_at(now).is_some() {
            s.report_loss(&h, now);
            any = true;
        }
    }
    any
}

/// The heartbeat task: one beat per wake-up at a fixed rate of
/// `ttl × (1 − m) / k`, until the session is lost (or the task is aborted).
pub(crate) async fn heartbeat_task(s: Arc<Shared>) {
    let metrics = &s.inner.metrics;
    let origin = Instant::now();
    let offset = |t: Instant| t.saturating_duration_since(origin);
    let mut period = s.period(&s.held_now());
    let mut next_due = period;
    loop {
        tokio::time::sleep_until(origin + next_due).await;
        let due = Due::at(next_due, period, offset(Instant::now()));
        let now = s.now();
        let deadlines: Vec<MonoTime> = s.held_now().iter().map(|h| h.lease.deadline()).collect();
        if deadline_losses(&s, now) {
            // Ticks due before the first deadline were needed and never served.
            metrics.record_ticks(due.count, None);
            let first = deadlines.into_iter().min().unwrap_or(now);
            let overrun = now.saturating_duration_since(first);
            metrics.record_unserved(due.unserved(offset(Instant::now()), overrun));
            return;
        }
        let held = s.held_now();
        let lag = due.lag(offset(Instant::now()));
        let beat = if held.is_empty() {
            ping(&s).await
        } else {
            extend(&s, &held).await
        };
        let rtt = beat.received.saturating_duration_since(beat.send);
        metrics.record_ticks(due.count, Some(lag));
        metrics.record_exchange(beat.outcome, rtt, due.corrected(rtt, lag));
        record_gap(&s, &beat);
        if s.lost_reason().is_some() {
            return;
        }
        next_due = due.next();
        let p = s.period(&s.held_now());
        if p != period {
            next_due = schedule::rebase(next_due, period, p, offset(Instant::now()));
            period = p;
        }
    }
}
