//! Three `lock-server` processes over one PostgreSQL schema (C1 §6): exactly
//! one serves, the others answer `503 NOT_LEADER` naming it; kill -9 and
//! SIGSTOP of the leader both lead to a new leader that keeps the old grants
//! (restarted from its takeover) and reassigns them only after lease + grace,
//! with a higher token; a thawed old leader answers no 2xx; contention across
//! a failover never overlaps. Every wait is for a condition with a deadline.

use std::time::{Duration, Instant};

use fencepost_harness::ChildService;
use serde_json::{Value, json};

use crate::support::{StoreKind, open_session_over_http as open_session, post, temp_dir};

mod breach;
mod expiry;

/// How long any wait for a condition may take before the test fails.
const PATIENCE: Duration = Duration::from_secs(60);
/// The leader lease the replicas run with.
const LEADER_LEASE: Duration = Duration::from_millis(1000);
/// The fixed grace the replicas run with (also the takeover's grace).
const GRACE: Duration = Duration::from_millis(100);

/// Three replicas on one store.
struct Replicas {
    nodes: Vec<ChildService>,
    client: reqwest::Client,
}

impl Replicas {
    /// Starts three replicas on `url`.
    fn start(url: &str) -> Self {
        let bin =
            fencepost_harness::binary("lock-server", "lock-server").expect("lock-server binary");
        let nodes = (0..3)
            .map(|i| {
                let log = temp_dir(&format!("replica-{i}")).join("stderr.log");
                ChildService::start(
                    &bin,
                    ["--store", url, "--leader-lease", "1s", "--grace", "100ms"],
                    &log,
                )
                .expect("replica starts")
            })
            .collect();
        Replicas {
            nodes,
            client: reqwest::Client::builder()
                .timeout(Duration::from_secs(2))
                .build()
                .expect("client"),
        }
    }

    fn urls(&self) -> Vec<String> {
        self.nodes.iter().map(|n| n.url()).collect()
    }

    /// The indices of the replicas whose `/readyz` answers 200 now.
    async fn ready(&self, among: &[usize]) -> Vec<usize> {
        let mut ready = Vec::new();
        for &i in among {
            let r = self
                .client
                .get(format!("{}/readyz", self.nodes[i].url()))
                .send()
                .await;
            if r.is_ok_and(|r| r.status() == 200) {
                ready.push(i);
            }
        }
        ready
    }

    /// Waits until exactly one of `among` is ready and every other one of
    /// `among` answers L1 with NOT_LEADER naming it; returns the leader.
    async fn await_one_leader(&self, among: &[usize]) -> usize {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let ready = self.ready(among).await;
            if let [leader] = ready[..] {
                let url = self.nodes[leader].url();
                let mut all_name_it = true;
                for &i in among.iter().filter(|&&i| i != leader) {
                    let (st, body) = post(
                        &self.client,
                        format!("{}/v1/sessions", self.nodes[i].url()),
                        json!({"owner_id": "probe", "ttl_ms": 1000}),
                    )
                    .await
                    .expect("a standby answers");
                    assert_eq!(st, 503, "a standby served L1: {body}");
                    assert_eq!(body["code"], "NOT_LEADER", "{body}");
                    all_name_it &= body["leader"] == url.as_str();
                }
                if all_name_it {
                    return leader;
                }
            }
            assert!(
                ready.len() <= 1,
                "two replicas ready at once: {ready:?}\n{}",
                self.logs()
            );
            assert!(
                Instant::now() < deadline,
                "no single leader among {among:?} after {PATIENCE:?} (ready: {ready:?})\n{}",
                self.logs()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    fn logs(&self) -> String {
        self.nodes
            .iter()
            .enumerate()
            .map(|(i, n)| format!("--- replica {i} ---\n{}", n.stderr_tail(15)))
            .collect::<Vec<_>>()
            .join("\n")
    }
}

async fn get_json(c: &reqwest::Client, url: String) -> Value {
    c.get(url)
        .send()
        .await
        .expect("GET")
        .json()
        .await
        .expect("JSON")
}

/// The value of an unlabelled sample `name` in `base`'s `/metrics`.
async fn metric(c: &reqwest::Client, base: &str, name: &str) -> Option<f64> {
    let text = c.get(format!("{base}/metrics")).send().await.ok()?;
    let text = text.text().await.ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(' ')?.parse().ok())
}

async fn acquire(
    c: &reqwest::Client,
    base: &str,
    key: &str,
    sid: &str,
    ttl_ms: u64,
) -> (u16, Value) {
    post(
        c,
        format!("{base}/v1/locks/{key}/acquire"),
        json!({"session_id": sid, "ttl_ms": ttl_ms}),
    )
    .await
    .expect("L4")
}

fn others(all: &[usize], but: usize) -> Vec<usize> {
    all.iter().copied().filter(|&i| i != but).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_replicas_have_exactly_one_leader_and_the_others_name_it() {
    let Some(url) = StoreKind::Postgres.fresh_url().await else {
        return;
    };
    let r = Replicas::start(&url);
    let leader = r.await_one_leader(&[0, 1, 2]).await;
    let lead_url = r.nodes[leader].url();
    let conf = get_json(&r.client, format!("{lead_url}/v1/config")).await;
    assert_eq!(conf["role"], "leader", "{conf}");
    assert_eq!(conf["leader_lease_ms"], 1000, "{conf}");
    let epoch = conf["epoch"].as_u64().expect("epoch");
    assert!(epoch >= 1, "{conf}");
    // The election's gauges: 1 on the leader, 0 on the standbys, one epoch.
    for (i, lead) in (0..3).map(|i| (i, f64::from(u8::from(i == leader)))) {
        let base = r.nodes[i].url();
        let got = (
            metric(&r.client, &base, "lock_leader").await,
            metric(&r.client, &base, "lock_leader_epoch").await,
        );
        assert_eq!(got, (Some(lead), Some(epoch as f64)), "replica {i}");
    }
    for i in others(&[0, 1, 2], leader) {
        let base = r.nodes[i].url();
        let conf = get_json(&r.client, format!("{base}/v1/config")).await;
        assert_eq!(conf["role"], "standby", "{conf}");
        assert_eq!(conf["leader"], lead_url.as_str(), "{conf}");
        assert_eq!(conf["epoch"], epoch, "{conf}");
        // Every C1 request is refused, each naming the leader; /readyz too.
        let sid = "0123456789abcdef0123456789abcdef";
        let calls = [
            (
                "POST",
                format!("{base}/v1/sessions/{sid}/heartbeat"),
                json!({}),
            ),
            (
                "POST",
                format!("{base}/v1/locks/k/acquire"),
                json!({"session_id": sid}),
            ),
            (
                "POST",
                format!("{base}/v1/locks/k/renew"),
                json!({"session_id": sid, "token": 1}),
            ),
            (
                "POST",
                format!("{base}/v1/locks/k/release"),
                json!({"session_id": sid, "token": 1}),
            ),
            (
                "POST",
                format!("{base}/v1/locks/k/revoke"),
                json!({"reason": "test"}),
            ),
            ("GET", format!("{base}/v1/locks/k"), Value::Null),
            ("DELETE", format!("{base}/v1/sessions/{sid}"), Value::Null),
            ("GET", format!("{base}/readyz"), Value::Null),
        ];
        for (method, url, body) in calls {
            let req = match method {
                "POST" => r.client.post(&url).json(&body),
                "GET" => r.client.get(&url),
                _ => r.client.delete(&url),
            };
            let resp = req.send().await.expect("standby answers");
            let st = resp.status().as_u16();
            let body: Value = resp.json().await.unwrap_or(Value::Null);
            assert_eq!(st, 503, "{method} {url}: {body}");
            assert_eq!(body["code"], "NOT_LEADER", "{method} {url}: {body}");
            assert_eq!(body["leader"], lead_url.as_str(), "{method} {url}: {body}");
        }
    }
    // The leader serves.
    let sid = open_session(&r.client, &lead_url, 5_000).await;
    let (st, body) = acquire(&r.client, &lead_url, "k", &sid, 5_000).await;
    assert_eq!(st, 200, "{body}");
}

/// Grants `key` on the leader, fails the leader with `fault`, and checks the
/// new leader: the grant is still HELD/GRACE right after the takeover, it is
/// reassigned only after its restarted lease + grace, with a higher token.
async fn failover_keeps_the_grant_then_reassigns_it(fault: &str) {
    let Some(url) = StoreKind::Postgres.fresh_url().await else {
        return;
    };
    let mut r = Replicas::start(&url);
    let old = r.await_one_leader(&[0, 1, 2]).await;
    let old_url = r.nodes[old].url();
    let lease_ms = 3_000u64;
    let sid = open_session(&r.client, &old_url, lease_ms).await;
    let (st, body) = acquire(&r.client, &old_url, "payout:1", &sid, lease_ms).await;
    assert_eq!(st, 200, "{body}");
    let first = body["token"].as_u64().unwrap();
    let failed_at = Instant::now();
    match fault {
        "kill9" => r.nodes[old].kill9(),
        _ => r.nodes[old].pause().expect("SIGSTOP"),
    }
    let rest = others(&[0, 1, 2], old);
    let new = r.await_one_leader(&rest).await;
    let new_url = r.nodes[new].url();
    // Right after the takeover the grant is still there, with its token.
    let info = get_json(&r.client, format!("{new_url}/v1/locks/payout:1")).await;
    assert!(
        info["state"] == "HELD" || info["state"] == "GRACE",
        "the new leader dropped a live grant: {info}"
    );
    assert_eq!(info["token"], first, "{info}");
    if fault == "sigstop" {
        // Thawed, the old leader answers no 2xx to a heartbeat, renew or acquire.
        r.nodes[old].resume().expect("SIGCONT");
        let c = &r.client;
        let (st, body) = post(
            c,
            format!("{old_url}/v1/sessions/{sid}/heartbeat"),
            json!({}),
        )
        .await
        .expect("thawed L2");
        assert_eq!(
            (st, body["code"].as_str()),
            (503, Some("NOT_LEADER")),
            "L2: {body}"
        );
        let (st, body) = post(
            c,
            format!("{old_url}/v1/locks/payout:1/renew"),
            json!({"session_id": sid, "token": first, "ttl_ms": lease_ms}),
        )
        .await
        .expect("thawed L5");
        assert_eq!(
            (st, body["code"].as_str()),
            (503, Some("NOT_LEADER")),
            "L5: {body}"
        );
        let (st, body) = acquire(c, &old_url, "payout:2", &sid, lease_ms).await;
        assert_eq!(
            (st, body["code"].as_str()),
            (503, Some("NOT_LEADER")),
            "L4: {body}"
        );
        // It learns it is a standby and names the new leader.
        let deadline = Instant::now() + PATIENCE;
        loop {
            let conf = get_json(c, format!("{old_url}/v1/config")).await;
            if conf["role"] == "standby" && conf["leader"] == new_url.as_str() {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "the thawed leader still says {conf}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    // Another session gets the key only after the restarted lease + grace.
    let other = open_session(&r.client, &new_url, 10_000).await;
    let deadline = Instant::now() + PATIENCE;
    let second = loop {
        let (st, body) = acquire(&r.client, &new_url, "payout:1", &other, 10_000).await;
        if st == 200 {
            break body["token"].as_u64().unwrap();
        }
        // Refused, never granted early: held, or (on a loaded machine, whose
        // 1 s leader lease can lapse) no replica serving for a moment.
        assert!(
            body["code"] == "LOCK_HELD" || body["code"] == "NOT_LEADER",
            "{body}"
        );
        assert!(Instant::now() < deadline, "never reassigned: {body}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let waited = failed_at.elapsed();
    // A lower bound only (a slow machine makes it later, never earlier): the
    // takeover came at least a leader lease after the last renewal (at most a
    // renew period, lease × 0.7 / 3, before the fault), and the grant then
    // ran its whole lease + grace again.
    let floor = LEADER_LEASE.mul_f64(1.0 - 0.7 / 3.0) + Duration::from_millis(lease_ms) + GRACE;
    assert!(
        waited >= floor,
        "reassigned {waited:?} after the fault, before the restarted lease + grace ({floor:?})"
    );
    assert!(second > first, "token {second} after {first}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kill9_of_the_leader_elects_a_new_one_that_keeps_the_grant_until_lease_plus_grace() {
    failover_keeps_the_grant_then_reassigns_it("kill9").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigstop_past_the_leader_lease_elects_a_new_one_and_the_thawed_leader_answers_no_2xx() {
    failover_keeps_the_grant_then_reassigns_it("sigstop").await;
}

/// A worker's view of the replicas: the one it talks to, following
/// `NOT_LEADER`'s `leader` or moving to the next replica.
struct Follower {
    urls: Vec<String>,
    at: usize,
}

impl Follower {
    fn base(&self) -> &str {
        &self.urls[self.at]
    }

    /// Moves on after a refusal or a failed exchange.
    fn follow(&mut self, body: Option<&Value>) {
        if let Some(leader) = body.and_then(|b| b["leader"].as_str())
            && let Some(i) = self.urls.iter().position(|u| u == leader)
        {
            self.at = i;
            return;
        }
        self.at = (self.at + 1) % self.urls.len();
    }
}

/// One grant as the worker used it: from the reply's receipt to the release's
/// send (or the client deadline, if earlier).
#[derive(Clone, Copy, Debug)]
struct Held {
    worker: usize,
    token: u64,
    from: Instant,
    to: Instant,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn contention_across_a_forced_failover_never_overlaps() {
    let Some(url) = StoreKind::Postgres.fresh_url().await else {
        return;
    };
    let mut r = Replicas::start(&url);
    let leader = r.await_one_leader(&[0, 1, 2]).await;
    let urls = r.urls();
    let lease_ms = 1_000u64;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let workers: Vec<_> = (0..6)
        .map(|w| {
            let (urls, stop) = (urls.clone(), stop.clone());
            tokio::spawn(async move {
                let c = reqwest::Client::builder()
                    .timeout(Duration::from_millis(1500))
                    .build()
                    .unwrap();
                let mut f = Follower { urls, at: leader };
                let mut held = Vec::new();
                let mut sid: Option<String> = None;
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let Some(s) = sid.clone() else {
                        match post(
                            &c,
                            format!("{}/v1/sessions", f.base()),
                            json!({"owner_id": format!("w{w}"), "ttl_ms": 2_000}),
                        )
                        .await
                        {
                            Ok((201, b)) => sid = b["session_id"].as_str().map(String::from),
                            Ok((_, b)) => f.follow(Some(&b)),
                            Err(_) => f.follow(None),
                        }
                        continue;
                    };
                    match post(
                        &c,
                        format!("{}/v1/sessions/{s}/heartbeat", f.base()),
                        json!({}),
                    )
                    .await
                    {
                        Ok((200, _)) => {}
                        Ok((404 | 410, _)) => {
                            sid = None;
                            continue;
                        }
                        Ok((_, b)) => {
                            f.follow(Some(&b));
                            continue;
                        }
                        Err(_) => {
                            f.follow(None);
                            continue;
                        }
                    }
                    let send = Instant::now();
                    let got = post(
                        &c,
                        format!("{}/v1/locks/hot/acquire", f.base()),
                        json!({"session_id": s, "ttl_ms": lease_ms}),
                    )
                    .await;
                    let received = Instant::now();
                    match got {
                        Ok((200, b)) => {
                            let token = b["token"].as_u64().unwrap();
                            let granted = Duration::from_millis(b["lease_ms"].as_u64().unwrap());
                            // The SDK's rule: usable until send + lease × (1 − 0.3).
                            let deadline = send + granted.mul_f64(0.7);
                            tokio::task::yield_now().await;
                            let release_sent = Instant::now();
                            if received < deadline {
                                held.push(Held {
                                    worker: w,
                                    token,
                                    from: received,
                                    to: release_sent.min(deadline),
                                });
                            }
                            match post(
                                &c,
                                format!("{}/v1/locks/hot/release", f.base()),
                                json!({"session_id": s, "token": token}),
                            )
                            .await
                            {
                                Ok((204, _)) | Ok((409, _)) => {}
                                Ok((_, b)) => f.follow(Some(&b)),
                                Err(_) => f.follow(None),
                            }
                        }
                        Ok((409, _)) => {
                            tokio::time::sleep(Duration::from_millis(2 + w as u64)).await
                        }
                        Ok((404 | 410, _)) => sid = None,
                        Ok((_, b)) => f.follow(Some(&b)),
                        Err(_) => f.follow(None),
                    }
                }
                held
            })
        })
        .collect();
    // Let grants flow, then freeze the leader past its lease and thaw it.
    let count_grants = |r: &Replicas, i: usize| {
        let url = format!("{}/metrics", r.nodes[i].url());
        let c = r.client.clone();
        async move {
            let text = c.get(url).send().await.ok()?.text().await.ok()?;
            text.lines()
                .find_map(|l| l.strip_prefix("lock_grants_total "))
                .and_then(|v| v.trim().parse::<u64>().ok())
        }
    };
    let deadline = Instant::now() + PATIENCE;
    while count_grants(&r, leader).await.unwrap_or(0) < 30 {
        assert!(
            Instant::now() < deadline,
            "no grants before the failover\n{}",
            r.logs()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    r.nodes[leader].pause().expect("SIGSTOP");
    let new = r.await_one_leader(&others(&[0, 1, 2], leader)).await;
    r.nodes[leader].resume().expect("SIGCONT");
    let deadline = Instant::now() + PATIENCE;
    while count_grants(&r, new).await.unwrap_or(0) < 30 {
        assert!(
            Instant::now() < deadline,
            "no grants after the failover\n{}",
            r.logs()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut all: Vec<Held> = Vec::new();
    for w in workers {
        all.extend(w.await.expect("worker"));
    }
    assert!(all.len() >= 60, "only {} grants used", all.len());
    all.sort_by_key(|h| h.from);
    for pair in all.windows(2) {
        let (a, b) = (pair[0], pair[1]);
        assert!(
            b.from >= a.to,
            "overlap: token {} used until {:?}, token {} from {:?}",
            a.token,
            a.to,
            b.token,
            b.from
        );
        // A holder whose release went unanswered re-acquires its own grant
        // (C1 §7): the same token, the same worker. Anyone else: higher.
        assert!(
            b.token > a.token || (b.token == a.token && b.worker == a.worker),
            "token {} (worker {}) after {} (worker {})",
            b.token,
            b.worker,
            a.token,
            a.worker
        );
    }
}

/// The fence itself, two stores on one schema: once another replica took the
/// leader row, every write of the deposed epoch fails and persists nothing,
/// and a standby's writes fail without a query; the takeover waited for the
/// old lease plus grace, and a live leader's row is not taken.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deposed_epoch_cannot_write_and_a_live_leader_row_is_not_taken() {
    use lock_server::store::{self, Fence, LeaderBid, SessionRecord, StoreError, Write};
    let Some(url) = StoreKind::Postgres.fresh_url().await else {
        return;
    };
    let (a, b) = (
        store::open(&url).await.unwrap(),
        store::open(&url).await.unwrap(),
    );
    let bid = |node: &str, renew: Option<u64>| LeaderBid {
        node: node.into(),
        advertise: Some(format!("http://{node}")),
        lease: Duration::from_millis(300),
        grace: Duration::from_millis(100),
        renew,
    };
    let won = a.claim_leadership(&bid("a", None)).await.unwrap();
    assert!(won.ours, "{won:?}");
    let fence_a = |epoch| Fence::Leader {
        epoch,
        idle_limit: Duration::from_secs(1),
    };
    a.set_fence(fence_a(won.epoch));
    let sess = |id: &str| SessionRecord {
        id: id.into(),
        owner_id: "o".into(),
        ttl_ms: 1_000,
        principal: None,
    };
    a.create_session(&sess("s1")).await.unwrap();
    assert_eq!(a.grant("k", "s1", 1_000).await.unwrap(), 1);
    // While a's lease is live, b cannot take the row and names a.
    let seen = b.claim_leadership(&bid("b", None)).await.unwrap();
    assert!(!seen.ours, "{seen:?}");
    assert_eq!(seen.leader.as_deref(), Some("http://a"));
    b.set_fence(Fence::Standby);
    assert!(matches!(
        b.grant("k", "s1", 1_000).await,
        Err(StoreError::Fenced(_))
    ));
    // After lease + grace (database clock), b takes it with a higher epoch.
    let started = Instant::now();
    let taken = loop {
        let row = b.claim_leadership(&bid("b", None)).await.unwrap();
        if row.ours {
            break row;
        }
        assert!(started.elapsed() < PATIENCE, "never taken: {row:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(taken.epoch > won.epoch, "{taken:?} after {won:?}");
    // a's renewal fails; each of a's writes fails and persists nothing.
    let renewed = a
        .claim_leadership(&bid("a", Some(won.epoch)))
        .await
        .unwrap();
    assert!(!renewed.ours, "{renewed:?}");
    assert_eq!(renewed.leader.as_deref(), Some("http://b"));
    let before = a.load().await.unwrap();
    for r in [
        a.grant("k", "s1", 1_000).await.map(|_| ()),
        a.create_session(&sess("s2")).await,
        a.set_lease("k", 1, 5_000).await,
        a.clear_grant("k", 1).await,
        a.delete_session("s1").await,
        // A batch of several statements: the fence is pipelined with them.
        a.commit(&[
            Write::Grant {
                key: "k2".into(),
                session_id: "s1".into(),
                lease_ms: 1_000,
            },
            Write::ClearGrants(vec![("k".into(), 1)]),
            Write::CreateSession(sess("s3")),
        ])
        .await
        .map(|_| ()),
    ] {
        assert!(matches!(r, Err(StoreError::Fenced(_))), "{r:?}");
    }
    assert_eq!(a.load().await.unwrap(), before, "a fenced write persisted");
    // b, fenced with its own epoch, writes; the token keeps rising.
    b.set_fence(fence_a(taken.epoch));
    assert_eq!(b.grant("k", "s1", 1_000).await.unwrap(), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_stopped_cleanly_hands_over_without_waiting_out_its_lease() {
    let Some(url) = StoreKind::Postgres.fresh_url().await else {
        return;
    };
    let bin = fencepost_harness::binary("lock-server", "lock-server").expect("lock-server binary");
    let start = |lease: &'static str, tag: &str| {
        let log = temp_dir(tag).join("stderr.log");
        ChildService::start(
            &bin,
            ["--store", url.as_str(), "--leader-lease", lease],
            &log,
        )
        .expect("replica starts")
    };
    // A long leader lease: a standby would wait a minute for a dead leader.
    let mut first = start("60s", "resign-a");
    let second = start("60s", "resign-b");
    let c = reqwest::Client::new();
    let ready = |u: String| {
        let c = c.clone();
        async move {
            c.get(format!("{u}/readyz"))
                .send()
                .await
                .is_ok_and(|r| r.status() == 200)
        }
    };
    assert!(ready(first.url()).await, "{}", first.stderr_tail(10));
    assert!(
        first.terminate(Duration::from_secs(10)).is_some(),
        "SIGTERM"
    );
    let deadline = Instant::now() + Duration::from_secs(30);
    while !ready(second.url()).await {
        assert!(
            Instant::now() < deadline,
            "the standby did not take over a resigned row within 30 s (lease 60 s)\n{}",
            second.stderr_tail(10)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
