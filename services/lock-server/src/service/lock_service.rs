//! [`LockService`]: what a serving lock-server holds (the table behind its
//! mutex and the takeover it was loaded at, the election's view, the store,
//! the clock, the counters), how it starts (restoring the store, or as a
//! standby replica), and the machinery every operation shares: the serving
//! check, the generation-checked table, and [`detached`], which runs a
//! mutation's persist-and-apply half to its end.

use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard, OnceLock, Weak};
use std::time::Duration;

use fencepost_api::clock::{Clock, MonoTime};

use super::counters::Counters;
use super::error::ServiceError;
use super::metrics::Metrics;
use crate::core::{Caps, Limits, LockTable};
use crate::leader::{LeaderConfig, LeaderState, Role};
use crate::store::{Fence, LockStore, StoreError};
use crate::tls::TlsMode;

/// A serving lock-server's state. Cheap to share behind an `Arc`.
pub struct LockService {
    /// Every expiry decision reads this clock, and only this clock.
    pub(super) clock: Arc<dyn Clock>,
    /// Sessions, grants and tokens in memory; the mutex is never held across an await.
    pub(super) table: Mutex<Table>,
    /// The election's view (C1 §6); `Role::Single` on memory and SQLite.
    pub(super) leadership: Mutex<LeaderState>,
    /// How this replica takes part in the election; `None` when single-node.
    pub(super) leader_cfg: Option<LeaderConfig>,
    /// Durable tokens, holders and sessions.
    pub(super) store: Arc<dyn LockStore>,
    /// C5 counters.
    pub counters: Counters,
    /// The `/metrics` registry and the latency histograms.
    pub(super) metrics: Metrics,
    /// The transport security `/v1/config` reports; set once when serving over TLS.
    pub(super) tls_mode: OnceLock<TlsMode>,
}

/// The lock table and the takeover it was loaded at.
pub(crate) struct Table {
    table: LockTable,
    /// [`LeaderState::generation`] of the takeover that loaded `table`.
    generation: u64,
}

impl std::ops::Deref for Table {
    type Target = LockTable;
    fn deref(&self) -> &LockTable {
        &self.table
    }
}

impl std::ops::DerefMut for Table {
    fn deref_mut(&mut self) -> &mut LockTable {
        &mut self.table
    }
}

/// Runs a mutation's persist-and-apply half on its own task and waits for it.
/// If the caller is dropped (the client went away), the task still runs to its
/// end, so a store write is always followed by the matching change in memory.
pub(super) async fn detached<T: Send + 'static>(
    op: impl Future<Output = Result<T, ServiceError>> + Send + 'static,
) -> Result<T, ServiceError> {
    match tokio::spawn(op).await {
        Ok(result) => result,
        Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
        Err(e) => Err(StoreError::Task(e).into()),
    }
}

impl LockService {
    /// Builds the service with the default [`Caps`]; see [`start_with_caps`](Self::start_with_caps).
    pub async fn start(
        limits: Limits,
        store: Arc<dyn LockStore>,
        clock: Arc<dyn Clock>,
    ) -> Result<Arc<Self>, StoreError> {
        Self::start_with_caps(limits, Caps::default(), store, clock).await
    }

    /// Builds the service and restores what the store holds: every session's
    /// TTL and every held grant's lease restart from now (C1 §6: a new server
    /// only ever extends what a client was promised). Only held keys are read;
    /// FREE keys stay in the store until used. A holder row whose session is
    /// gone is cleared, so memory and store agree from the start.
    pub async fn start_with_caps(
        limits: Limits,
        caps: Caps,
        store: Arc<dyn LockStore>,
        clock: Arc<dyn Clock>,
    ) -> Result<Arc<Self>, StoreError> {
        if !store.durable() {
            tracing::warn!(
                store = store.kind(),
                "lock.store=memory: is not durable: tokens start again at 1 after a restart, so a \
                 paused holder's old token can outrank new holders at the fences; use sqlite: or postgres:// \
                 for anything but tests"
            );
        }
        let snapshot = store.load_live().await?;
        let (table, restored) = restore(limits, caps, snapshot, clock.now());
        store.clear_grants(&restored.orphans).await?;
        let commit_duration = store.commit_duration();
        Ok(Arc::new_cyclic(|me: &Weak<LockService>| LockService {
            clock,
            table: Mutex::new(Table {
                table,
                generation: 0,
            }),
            leadership: Mutex::new(LeaderState::new(Role::Single)),
            leader_cfg: None,
            store,
            counters: Counters::default(),
            metrics: Metrics::new(me.clone(), commit_duration),
            tls_mode: OnceLock::new(),
        }))
    }

    /// Builds a replica over a shared (PostgreSQL) store: it starts as a
    /// standby, loads nothing and writes nothing; [`elect_once`](Self::elect_once)
    /// (run by [`crate::run`]) takes the leader row when it may, then loads
    /// the store. A single-node store starts as [`start_with_caps`](Self::start_with_caps) does.
    pub async fn start_replica(
        limits: Limits,
        caps: Caps,
        store: Arc<dyn LockStore>,
        clock: Arc<dyn Clock>,
        leader: LeaderConfig,
    ) -> Result<Arc<Self>, StoreError> {
        if !store.replicated() {
            return Self::start_with_caps(limits, caps, store, clock).await;
        }
        store.set_fence(Fence::Standby);
        let commit_duration = store.commit_duration();
        Ok(Arc::new_cyclic(|me: &Weak<LockService>| LockService {
            clock,
            table: Mutex::new(Table {
                table: LockTable::with_caps(limits, caps),
                generation: 0,
            }),
            leadership: Mutex::new(LeaderState::new(Role::Standby)),
            leader_cfg: Some(leader),
            store,
            counters: Counters::default(),
            metrics: Metrics::new(me.clone(), commit_duration),
            tls_mode: OnceLock::new(),
        }))
    }

    /// The table, locked (poisoning ignored); never held across an await.
    pub(crate) fn table(&self) -> MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The table, if it is still the one loaded at takeover `generation`
    /// (else the work was decided by an earlier leadership: not applied).
    pub(super) fn table_in(&self, generation: u64) -> Result<MutexGuard<'_, Table>, ServiceError> {
        let t = self.table();
        if t.generation == generation {
            Ok(t)
        } else {
            Err(ServiceError::NotLeader { leader: None })
        }
    }

    /// The table a committed write is applied to: the one loaded at
    /// `generation` while it still is (`false`); else, when this replica
    /// lost and re-won the leadership while the write was in flight, the
    /// table it serves from now (`true`), loaded at that takeover, before or
    /// after the write committed. The caller reconciles the write with it,
    /// so a committed write is answered as what it did, not as a failure.
    /// `NOT_LEADER` when this replica does not serve now (the write is in the
    /// store; the next leader loads it, and the SDK's retry finds it: an L4
    /// by the session that holds the key answers the grant it has).
    pub(super) fn table_after_commit(
        &self,
        generation: u64,
    ) -> Result<(MutexGuard<'_, Table>, bool), ServiceError> {
        {
            let t = self.table();
            if t.generation == generation {
                return Ok((t, false));
            }
        }
        let serving = self.serving(self.clock.now())?;
        let t = self.table();
        if t.generation == serving {
            Ok((t, true))
        } else {
            Err(ServiceError::NotLeader { leader: None })
        }
    }

    /// Installs the table a takeover loaded; returns its generation.
    pub(crate) fn replace_table(&self, table: LockTable) -> u64 {
        let mut t = self.table();
        t.table = table;
        t.generation += 1;
        t.generation
    }

    /// The election's view.
    pub(crate) fn leadership(&self) -> MutexGuard<'_, LeaderState> {
        self.leadership.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// How this replica takes part in the election (`None`: single-node).
    pub fn leader_config(&self) -> Option<&LeaderConfig> {
        self.leader_cfg.as_ref()
    }

    /// Records the transport security this service is served with
    /// ([`crate::run_tls`] sets it; the first call wins). `/v1/config`
    /// reports it; until set it is [`TlsMode::None`].
    pub fn set_tls_mode(&self, mode: TlsMode) {
        let _ = self.tls_mode.set(mode);
    }

    /// The transport security this service is served with.
    pub fn tls_mode(&self) -> TlsMode {
        self.tls_mode.get().copied().unwrap_or_default()
    }

    /// The store.
    pub(crate) fn store(&self) -> &Arc<dyn LockStore> {
        &self.store
    }

    /// This replica's role, epoch and known leader now.
    pub fn leader_state(&self) -> LeaderState {
        self.leadership().clone()
    }

    /// Refuses a request received at `now` unless this replica serves; else
    /// the generation of the table it serves from.
    pub(super) fn serving(&self, now: MonoTime) -> Result<u64, ServiceError> {
        let l = self.leadership();
        if l.serves(now) {
            Ok(l.generation)
        } else {
            Err(ServiceError::NotLeader { leader: l.hint() })
        }
    }

    /// The clock (for the sweeper).
    pub fn now(&self) -> MonoTime {
        self.clock.now()
    }

    /// Clears holder rows that memory already let go of (best effort: a row
    /// left behind is cleared at the next start, as an orphan).
    pub(super) async fn clear_late(&self, grants: &[(String, u64)]) {
        if grants.is_empty() {
            return;
        }
        if let Err(e) = self.store.clear_grants(grants).await {
            tracing::warn!(grants = grants.len(), error = %e, "could not clear released grants from the store");
        }
    }
}

/// How often the sweeper runs.
pub const SWEEP_EVERY: Duration = Duration::from_millis(200);

/// What [`restore`] restored from a snapshot.
pub(crate) struct Restored {
    /// Sessions restored.
    pub sessions: usize,
    /// Grants restored.
    pub grants: usize,
    /// Tombstones restored (expired ids that answer 410 again).
    pub tombstones: usize,
    /// Holder rows whose session is gone: the caller clears them in the store.
    pub orphans: Vec<(String, u64)>,
}

/// A table rebuilt from what a store holds, at `now` (a start or a
/// takeover, C1 §6): every session's TTL and every grant's lease restarted
/// from `now` (only ever extending what a client was promised), and every
/// tombstone younger than the keep, so an id that expired before answers
/// 410, not 404, whichever server expired it.
pub(crate) fn restore(
    limits: Limits,
    caps: Caps,
    snapshot: crate::store::Snapshot,
    now: MonoTime,
) -> (LockTable, Restored) {
    let mut table = LockTable::with_caps(limits, caps);
    let sessions = snapshot.sessions.len();
    for s in snapshot.sessions {
        table.restore_session(
            s.id,
            s.owner_id,
            s.principal.map(Into::into),
            Duration::from_millis(s.ttl_ms),
            now,
        );
    }
    let mut orphans = Vec::new();
    let mut grants = 0usize;
    for k in snapshot.keys {
        let Some(h) = k.holder else { continue };
        let lease = Duration::from_millis(h.lease_ms);
        if table.restore_grant(k.key.clone(), h.token, h.session_id, lease, now) {
            grants += 1;
        } else {
            orphans.push((k.key, h.token));
        }
    }
    let tombstones = snapshot.tombstones.len();
    for t in snapshot.tombstones {
        table.restore_tombstone(
            t.id,
            t.principal.map(Into::into),
            Duration::from_millis(t.age_ms),
            now,
        );
    }
    (
        table,
        Restored {
            sessions,
            grants,
            tombstones,
            orphans,
        },
    )
}
