//! What a Redlock session's calls and its heartbeat task share
//! ([`Shared`]): the granted locks ([`Held`]), the session's loss, its
//! listeners and its seeded randomness; and how a loss is reported, once.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use fencepost_sdk::lease;
use fencepost_sdk::{LostReason, MonoTime};
use rand::RngCore as _;
use rand_chacha::ChaCha8Rng;
use tracing::warn;

use super::quorum;
use super::shared::Inner;
use crate::backend::etcd::lease::LeaseState;

/// Locks a std mutex, ignoring poisoning (nothing here is left half-updated).
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// A listener the worker registered.
pub(crate) type Listener = Box<dyn Fn() + Send + Sync>;

/// One granted lock, shared by its handle and the session's heartbeat task.
pub(crate) struct Held {
    /// The key.
    pub(crate) key: Arc<str>,
    /// The random value this acquire set: only this value extends or deletes.
    pub(crate) value: String,
    /// The TTL every round of this lock asks for.
    pub(crate) ttl: Duration,
    /// The client deadline and loss flag.
    pub(crate) lease: LeaseState,
    /// Set once the lock's end (loss, release, drop of its handle, close)
    /// has been dealt with: the heartbeat leaves it alone from then on.
    pub(crate) ended: AtomicBool,
}

impl Held {
    /// A granted lock, its client deadline in `lease`.
    pub(crate) fn new(key: &str, value: &str, ttl: Duration, lease: LeaseState) -> Self {
        Held {
            key: Arc::from(key),
            value: value.to_string(),
            ttl,
            lease,
            ended: AtomicBool::new(false),
        }
    }
}

/// What a session's calls and its heartbeat task share.
pub(crate) struct Shared {
    /// The backend: configuration, instances, recorder.
    pub(crate) inner: Arc<Inner>,
    /// The owner id: the prefix of every lock value.
    pub(crate) owner: String,
    /// Why the session is lost, once it is.
    pub(crate) lost: Mutex<Option<LostReason>>,
    /// Locks granted and not ended.
    pub(crate) held: Mutex<Vec<Arc<Held>>>,
    /// Lost-lock listeners, called once per lost lock.
    pub(crate) listeners: Mutex<Vec<Listener>>,
    /// Locks reported lost so far (a listener registered later is told of each).
    pub(crate) handles_reported: AtomicU64,
    /// The send (ns on the clock) of the last heartbeat round that did its
    /// job (every lock extended; a ping answered by a majority): the start of
    /// the gap in progress.
    pub(crate) last_ack_send_nanos: AtomicU64,
    /// The session's seeded lock values and backoff jitter.
    pub(crate) rng: Mutex<ChaCha8Rng>,
}

impl Shared {
    /// One reading of the configured clock.
    pub(crate) fn now(&self) -> MonoTime {
        self.inner.config.clock.now()
    }

    /// A fresh lock value: the owner and 128 seeded random bits.
    pub(crate) fn new_value(&self) -> String {
        let mut rng = lock(&self.rng);
        format!(
            "{}:{:016x}{:016x}",
            self.owner,
            rng.next_u64(),
            rng.next_u64()
        )
    }

    /// The locks held now.
    pub(crate) fn held_now(&self) -> Vec<Arc<Held>> {
        lock(&self.held).clone()
    }

    /// The TTL the heartbeat is paced by: the configured one, or a shorter
    /// held lock's.
    pub(crate) fn pacing_ttl(&self, held: &[Arc<Held>]) -> Duration {
        held.iter()
            .map(|h| h.ttl)
            .fold(self.inner.config.ttl, Duration::min)
    }

    /// The heartbeat period: the SDK's, `ttl × (1 − m) / k` on the pacing TTL.
    pub(crate) fn period(&self, held: &[Arc<Held>]) -> Duration {
        let ttl = self.pacing_ttl(held);
        let k = self.inner.config.heartbeat_divisor;
        lease::heartbeat_period(quorum::ttl_ms(ttl), None, self.inner.margin_ppm(ttl), k)
    }

    /// The send of the last heartbeat round that did its job.
    pub(crate) fn last_ack_send(&self) -> MonoTime {
        MonoTime::from_nanos(self.last_ack_send_nanos.load(Ordering::Acquire))
    }

    /// The loss recorded on the session, if any.
    pub(crate) fn lost_reason(&self) -> Option<LostReason> {
        *lock(&self.lost)
    }

    /// Records the session's loss unless one is recorded.
    pub(crate) fn mark_lost(&self, why: LostReason) {
        lock(&self.lost).get_or_insert(why);
    }

    /// Reports the loss of `h` once: counters, the `session_lost` log, the
    /// session's loss, and every listener once. Nothing for an ended lock.
    pub(crate) fn report_loss(&self, h: &Held, now: MonoTime) {
        let Some(reason) = h.lease.lost_at(now) else {
            return;
        };
        if h.ended.swap(true, Ordering::AcqRel) {
            return;
        }
        let metrics = &self.inner.metrics;
        if reason == LostReason::Deadline {
            metrics.record_lost_gap(now.saturating_duration_since(self.last_ack_send()));
        }
        metrics.session_lost(reason);
        self.mark_lost(reason);
        lock(&self.held).retain(|x| !std::ptr::eq(&**x, h));
        warn!(
            name: "session_lost",
            event = "session_lost",
            backend = "redlock",
            key = %h.key,
            reason = %reason,
            "redlock lock lost: {reason}"
        );
        metrics.handle_lost();
        self.handles_reported.fetch_add(1, Ordering::Relaxed);
        for l in lock(&self.listeners).iter() {
            l();
        }
    }

    /// Ends `h` without a loss (released, or its handle dropped): the
    /// heartbeat leaves it alone. False when it had ended already.
    pub(crate) fn end(&self, h: &Held) -> bool {
        let first = !h.ended.swap(true, Ordering::AcqRel);
        lock(&self.held).retain(|x| !std::ptr::eq(&**x, h));
        first
    }

    /// The session ends (close or drop): it is marked closed (unless lost
    /// already) and its registry emptied, under the registry lock; a loss in
    /// force is reported; the other locks end silently as closed. Returns
    /// the locks still held.
    pub(crate) fn stop(&self, now: MonoTime) -> Vec<Arc<Held>> {
        let held = {
            let mut registry = lock(&self.held);
            self.mark_lost(LostReason::SessionClosed);
            std::mem::take(&mut *registry)
        };
        for h in &held {
            match h.lease.lost_at(now) {
                Some(r) if r != LostReason::SessionClosed => self.report_loss(h, now),
                _ => {
                    h.lease.mark_lost(LostReason::SessionClosed);
                    h.ended.store(true, Ordering::Release);
                }
            }
        }
        held
    }

    /// The per-instance timeout of a round on a `ttl` lock whose deadline is
    /// `deadline`, sent at `now`: bounded by the lease left (at least 1 ms).
    pub(crate) fn timeout_at(&self, ttl: Duration, deadline: MonoTime, now: MonoTime) -> Duration {
        self.inner
            .instance_timeout(ttl)
            .min(lease::remaining(now, deadline))
            .max(Duration::from_millis(1))
    }
}
