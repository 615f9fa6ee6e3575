//! A write that commits while its replica loses and re-wins the leadership:
//! the table that decided it is replaced by the one the new
//! takeover loaded, before or after the commit. Each test commits one write
//! through a store that runs that takeover — `restore` of `load_live`, a new
//! generation — at the chosen moment, then checks that the write is answered
//! as what it did and that the table serving now agrees with the store.
//! Before the fix every one of them answered `503 NOT_LEADER` and, for an
//! acquire whose commit came after the load, left the grant in the store
//! with no table holding it.

use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;

use async_trait::async_trait;
use fencepost_api::clock::{FakeClock, MonoTime};
use fencepost_api::lock::LockState;

use super::lock_service::{LockService, restore};
use crate::core::Limits;
use crate::store::memory::MemoryStore;
use crate::store::{Committed, LockStore, Snapshot, StoreError, Write};

/// When the simulated takeover loads the store, relative to the commit.
#[derive(Clone, Copy, Debug)]
enum Load {
    /// Before the write commits: the new table lacks it.
    Before,
    /// After: the new table restored it.
    After,
}

/// A memory store whose next commit of a write named `armed` runs a
/// takeover of the service's table around it.
struct Retake {
    inner: MemoryStore,
    armed: Mutex<Option<(&'static str, Load)>>,
    service: OnceLock<Weak<LockService>>,
}

impl Retake {
    async fn take_over(&self) {
        let svc = self.service.get().and_then(Weak::upgrade).expect("service");
        let snapshot = self.inner.load_live().await.expect("load");
        let (limits, caps) = {
            let t = svc.table();
            (t.limits().clone(), t.caps().clone())
        };
        let (table, _) = restore(limits, caps, snapshot, svc.now());
        let generation = svc.replace_table(table);
        svc.leadership().generation = generation;
    }
}

#[async_trait]
impl LockStore for Retake {
    fn kind(&self) -> &'static str {
        "memory"
    }
    async fn load(&self) -> Result<Snapshot, StoreError> {
        self.inner.load().await
    }
    async fn load_live(&self) -> Result<Snapshot, StoreError> {
        self.inner.load_live().await
    }
    async fn last_token(&self, key: &str) -> Result<Option<u64>, StoreError> {
        self.inner.last_token(key).await
    }
    async fn commit(&self, writes: &[Write]) -> Result<Vec<Committed>, StoreError> {
        let fire = {
            let mut a = self.armed.lock().unwrap();
            match *a {
                Some((name, load)) if writes.first().is_some_and(|w| w.name() == name) => {
                    *a = None;
                    Some(load)
                }
                _ => None,
            }
        };
        if let Some(Load::Before) = fire {
            self.take_over().await;
        }
        let out = self.inner.commit(writes).await?;
        if let Some(Load::After) = fire {
            self.take_over().await;
        }
        Ok(out)
    }
    async fn ping(&self) -> Result<(), StoreError> {
        Ok(())
    }
}

async fn service() -> (Arc<LockService>, Arc<Retake>, FakeClock) {
    let store = Arc::new(Retake {
        inner: MemoryStore::default(),
        armed: Mutex::new(None),
        service: OnceLock::new(),
    });
    let clock = FakeClock::new(MonoTime::from_nanos(1_000_000_000));
    let svc = LockService::start(Limits::default(), store.clone(), Arc::new(clock.clone()))
        .await
        .unwrap();
    store.service.set(Arc::downgrade(&svc)).ok().unwrap();
    (svc, store, clock)
}

/// A session with room (10 s TTL).
async fn open(svc: &Arc<LockService>) -> String {
    svc.create_session("w", Some(10_000))
        .await
        .unwrap()
        .session_id
}

fn arm(store: &Retake, write: &'static str, load: Load) {
    *store.armed.lock().unwrap() = Some((write, load));
}

/// L4: the grant is answered with its token, and the table serving now
/// holds it, whether the takeover's load saw the commit or not.
#[tokio::test]
async fn an_acquire_committed_across_a_retake_is_granted_and_held() {
    for load in [Load::Before, Load::After] {
        let (svc, store, _) = service().await;
        let sid = open(&svc).await;
        arm(&store, "grant", load);
        let granted = svc
            .acquire("k", &sid, Some(5_000))
            .await
            .unwrap_or_else(|e| panic!("{load:?}: a committed grant answered {e:?}"));
        let info = svc.info("k").await.unwrap();
        assert_eq!(
            (info.state, info.token),
            (LockState::Held, granted.token),
            "{load:?}"
        );
        let held = store.load_live().await.unwrap().keys;
        assert_eq!(held.len(), 1, "{load:?}: {held:?}");
        assert_eq!(held[0].holder.as_ref().unwrap().token, granted.token);
        // The holder can release it: the table and the store agree.
        svc.release("k", &sid, granted.token).await.unwrap();
        assert!(store.load_live().await.unwrap().keys.is_empty(), "{load:?}");
    }
}

/// L4 whose session was gone from the table the takeover loaded: the grant
/// cannot be acknowledged, so its row is cleared (no grant left in the
/// store that no table holds) and the answer says why.
#[tokio::test]
async fn an_acquire_that_cannot_be_adopted_leaves_no_grant_behind() {
    let (svc, store, _) = service().await;
    let sid = svc
        .create_session("w", Some(10_000))
        .await
        .unwrap()
        .session_id;
    // The session is deleted from the store behind the table's back, so the
    // takeover's load (before the grant commits) does not restore it.
    store
        .inner
        .delete_session(&sid)
        .await
        .expect("delete in the store");
    arm(&store, "grant", Load::Before);
    let refused = svc.acquire("k", &sid, Some(5_000)).await;
    assert!(refused.is_err(), "{refused:?}");
    let held = store.load_live().await.unwrap().keys;
    assert!(held.is_empty(), "an orphan grant was left: {held:?}");
}

/// L1 and L3: a session created across a retake is live on the table
/// serving now; one deleted across a retake is gone from it.
#[tokio::test]
async fn sessions_created_and_deleted_across_a_retake_are_answered_as_done() {
    for load in [Load::Before, Load::After] {
        let (svc, store, _) = service().await;
        arm(&store, "create_session", load);
        let sid = svc
            .create_session("w", Some(10_000))
            .await
            .unwrap_or_else(|e| panic!("{load:?}: a committed L1 answered {e:?}"))
            .session_id;
        svc.heartbeat(&sid)
            .await
            .expect("live on the serving table");
        arm(&store, "delete_session", load);
        svc.delete_session(&sid)
            .await
            .unwrap_or_else(|e| panic!("{load:?}: a committed L3 answered {e:?}"));
        assert!(svc.heartbeat(&sid).await.is_err(), "{load:?}: still live");
        assert!(store.load_live().await.unwrap().sessions.is_empty());
    }
}

/// L5 that lengthens the lease (a store write) and L6 across a retake.
#[tokio::test]
async fn renew_and_release_across_a_retake_are_answered_as_done() {
    for load in [Load::Before, Load::After] {
        let (svc, store, clock) = service().await;
        let sid = open(&svc).await;
        let g = svc.acquire("k", &sid, Some(1_000)).await.unwrap();
        clock.advance(Duration::from_millis(100));
        arm(&store, "set_lease", load);
        let renewed = svc
            .renew("k", &sid, g.token, Some(5_000))
            .await
            .unwrap_or_else(|e| panic!("{load:?}: a committed L5 answered {e:?}"));
        assert_eq!(renewed.token, g.token);
        arm(&store, "clear_grant", load);
        svc.release("k", &sid, g.token)
            .await
            .unwrap_or_else(|e| panic!("{load:?}: a committed L6 answered {e:?}"));
        assert_eq!(svc.info("k").await.unwrap().state, LockState::Free);
    }
}

/// The sweeper's expiry across a retake whose load came first: the table
/// loaded then restarted the session's TTL, but the store deleted it, so
/// the table serving now drops it too and answers 410 for it (a session
/// live in memory and gone from the store would vanish at the next
/// takeover, with the grants its client believes it holds).
#[tokio::test]
async fn a_sweep_committed_across_a_retake_expires_on_the_serving_table() {
    use fencepost_api::lock::LockErrorCode;
    let (svc, store, clock) = service().await;
    let sid = svc
        .create_session("w", Some(1_000))
        .await
        .unwrap()
        .session_id;
    svc.acquire("k", &sid, Some(1_000)).await.unwrap();
    clock.advance(Duration::from_secs(10));
    arm(&store, "clear_grant", Load::Before);
    svc.sweep().await;
    match svc.heartbeat(&sid).await {
        Err(super::ServiceError::Refused(e)) => assert_eq!(e.code, LockErrorCode::SessionExpired),
        other => panic!("the swept session answered {other:?}"),
    }
    assert_eq!(svc.info("k").await.unwrap().state, LockState::Free);
    let snap = store.load_live().await.unwrap();
    assert!(snap.sessions.is_empty() && snap.keys.is_empty(), "{snap:?}");
}
