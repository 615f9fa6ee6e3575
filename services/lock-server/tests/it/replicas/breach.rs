//! The epoch breach audit: every write transaction of a leader ends with a
//! statement that records a row in `fp_epoch_breaches` if the leader row has
//! another epoch by then. Through the fence it never does (a deposed epoch's
//! writes fail; a live leader's match); without it (the
//! `--sabotage skip-epoch-fence` path) the deposed leader's write commits
//! and the database records the breach — the checker `experiments chaos`
//! reads after each replicated run, shown firing.

use std::sync::Arc;
use std::time::{Duration, Instant};

use lock_server::store::{self, Fence, LeaderBid, LeaderRow, LockStore, SessionRecord, StoreError};

use super::PATIENCE;
use crate::support::StoreKind;

/// `(writer_epoch, row_epoch)` of every breach recorded in the schema of `url`.
async fn breaches(url: &str) -> Vec<(i64, i64)> {
    let (c, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .expect("connect");
    tokio::spawn(conn);
    c.query(
        "SELECT writer_epoch, row_epoch FROM fp_epoch_breaches ORDER BY at",
        &[],
    )
    .await
    .expect("read the breaches")
    .iter()
    .map(|r| (r.get(0), r.get(1)))
    .collect()
}

fn bid(node: &str) -> LeaderBid {
    LeaderBid {
        node: node.into(),
        advertise: Some(format!("http://{node}")),
        lease: Duration::from_millis(300),
        grace: Duration::from_millis(100),
        renew: None,
    }
}

fn sess(id: &str) -> SessionRecord {
    SessionRecord {
        id: id.into(),
        owner_id: "o".into(),
        ttl_ms: 1_000,
        principal: None,
    }
}

/// b takes the row from a once a's lease plus grace has passed.
async fn take_over(b: &dyn LockStore, after: u64) -> u64 {
    let started = Instant::now();
    loop {
        let row = b.claim_leadership(&bid("b")).await.unwrap();
        if row.ours {
            assert!(row.epoch > after, "{row:?}");
            return row.epoch;
        }
        assert!(started.elapsed() < PATIENCE, "never taken: {row:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Two stores on one fresh schema, `a` the fenced leader with session
/// `s1`, `b` not yet anything; `None` when PostgreSQL is not configured.
async fn two_stores_a_leading()
-> Option<(String, Arc<dyn LockStore>, Arc<dyn LockStore>, LeaderRow)> {
    let url = StoreKind::Postgres.fresh_url().await?;
    let (a, b) = (
        store::open(&url).await.unwrap(),
        store::open(&url).await.unwrap(),
    );
    let won = a.claim_leadership(&bid("a")).await.unwrap();
    assert!(won.ours, "{won:?}");
    a.set_fence(Fence::Leader {
        epoch: won.epoch,
        idle_limit: Duration::from_secs(1),
    });
    a.create_session(&sess("s1")).await.unwrap();
    Some((url, a, b, won))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deposed_leader_writing_without_the_fence_is_recorded_as_a_breach() {
    let Some((url, a, b, won)) = two_stores_a_leading().await else {
        return;
    };
    assert_eq!(a.grant("k", "s1", 1_000).await.unwrap(), 1);
    assert_eq!(
        breaches(&url).await,
        [],
        "a live leader's writes are no breach"
    );

    let taken = take_over(b.as_ref(), won.epoch).await;
    b.set_fence(Fence::Leader {
        epoch: taken,
        idle_limit: Duration::from_secs(1),
    });
    // Fenced, the deposed epoch's write fails and records nothing.
    assert!(matches!(
        a.grant("k2", "s1", 1_000).await,
        Err(StoreError::Fenced(_))
    ));
    assert_eq!(breaches(&url).await, [], "a refused write is no breach");
    assert_eq!(b.grant("k", "s1", 1_000).await.unwrap(), 2);
    assert_eq!(
        breaches(&url).await,
        [],
        "the new leader's writes are no breach"
    );

    // Unfenced (the sabotage), the same write commits: the breach is recorded.
    a.set_fence(Fence::Unchecked { epoch: won.epoch });
    a.grant("k2", "s1", 1_000)
        .await
        .expect("an unfenced write commits");
    assert_eq!(
        breaches(&url).await,
        [(won.epoch as i64, taken as i64)],
        "the deposed leader's committed write"
    );
}

/// A leader's lone grant, renewal or release is one statement carrying the
/// fence (store/pg_fence.rs): a live leader's lands; once another replica
/// took over, each is refused, even one that matches no row (the fence is
/// checked before the write looks for rows), and nothing of them is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deposed_leaders_one_statement_writes_are_fenced_even_when_they_match_no_row() {
    let Some((url, a, b, won)) = two_stores_a_leading().await else {
        return;
    };
    assert_eq!(a.grant("k", "s1", 1_000).await.unwrap(), 1);
    a.set_lease("k", 1, 2_000)
        .await
        .expect("a live leader renews");
    a.clear_grant("k", 1).await.expect("a live leader releases");
    assert_eq!(a.grant("k", "s1", 1_000).await.unwrap(), 2);

    let taken = take_over(b.as_ref(), won.epoch).await;
    b.set_fence(Fence::Leader {
        epoch: taken,
        idle_limit: Duration::from_secs(1),
    });
    let fenced = |what: &str, r: Result<(), StoreError>| {
        assert!(
            matches!(r, Err(StoreError::Fenced(_))),
            "the deposed leader's {what}: {r:?}"
        );
    };
    fenced("grant", a.grant("k2", "s1", 1_000).await.map(|_| ()));
    fenced("renewal", a.set_lease("k", 2, 5_000).await);
    fenced("release", a.clear_grant("k", 2).await);
    fenced(
        "release of a grant that does not exist",
        a.clear_grant("nope", 99).await,
    );

    // Nothing of them was written: k is still held with token 2, k2 never was.
    let live = b.load_live().await.unwrap();
    let held: Vec<_> = live
        .keys
        .iter()
        .map(|k| {
            (
                k.key.as_str(),
                k.holder.as_ref().map(|h| (h.token, h.lease_ms)),
            )
        })
        .collect();
    assert_eq!(held, [("k", Some((2, 1_000)))], "{live:?}");
    assert_eq!(b.last_token("k2").await.unwrap(), None);
    assert_eq!(breaches(&url).await, [], "refused writes are no breach");
}
