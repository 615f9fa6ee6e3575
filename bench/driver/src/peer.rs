//! The one closed-loop driver of `bench peer`: N client tasks, each with its
//! own connection and its own session (fencepost) or lease (etcd), loop one
//! operation for a warm-up and then a measured window. Every attempt in the
//! window is counted: a success is a latency sample (send → reply, µs, HDR),
//! a failure or timeout is an error. Closed loop: each task sends its next
//! request when the previous one is answered, so there is no schedule to
//! fall behind (no coordinated omission to correct); throughput is what the
//! server sustains at that concurrency.
//!
//! Each system is driven through its native client: fencepost over HTTP/1.1
//! keep-alive with the SDK's own client (`fencepost_sdk::http`, one
//! connection per task), etcd over gRPC (`etcd-client`, one channel per task),
//! Redis with the `redis` crate (one connection per task, [`crate::peer_redis`]).
//! - heartbeat: fencepost L2 on the task's session; etcd one LeaseKeepAlive
//!   on the task's stream (sent, then its answer read); Redis the renew
//!   script (compare-owner `PEXPIRE`) of the task's key.
//! - grant: fencepost L4 on the task's own key, then L6 with the token;
//!   etcd `txn(create_revision(key) == 0 → put(key, lease))`, then
//!   `txn(create_revision(key) == token → delete(key))`; Redis the acquire
//!   script (`SET NX PX` + the fencing counter's `INCR`), then the
//!   compare-owner `DEL`: two writes on every side.

use std::time::Duration;

use bytes::Bytes;
use etcd_client::{
    Compare, CompareOp, GetOptions, LeaseKeepAliveStream, LeaseKeeper, PutOptions, Txn, TxnOp,
};
use fencepost_sdk::Histogram;
use fencepost_sdk::http::HttpMethod;
use serde_json::{Value, json};
use tokio::time::Instant;

use bench_core::error::Chain;
use bench_core::hist;
use bench_core::peer::{PeerOp, Sample};

use crate::peer_http::{PeerHttp, PeerHttpClient, PeerHttpError, Reply};
use crate::peer_redis::{RedisPeer, RedisPeerError};

/// How long one operation may take before it counts as an error.
const OP_TIMEOUT: Duration = Duration::from_secs(10);
/// The session TTL / lease TTL of the peer clients: far longer than a run,
/// so nothing expires under the load.
const CLIENT_TTL_S: i64 = 60;

/// Why a peer measurement failed (setting up a client, or joining a task),
/// and why an etcd operation failed (counted as an error, its text the
/// sample's `first_error`).
#[derive(Debug, thiserror::Error)]
pub enum PeerError {
    /// L1 could not be sent or answered (the server is down or overloaded):
    /// check that it serves, then rerun.
    #[error("L1")]
    L1Exchange(#[source] ExchangeError),
    /// L1's reply is not JSON: the URL names something other than a lock-server.
    #[error(transparent)]
    L1Body(#[from] serde_json::Error),
    /// L1 was refused: the status and body say why (a full server, a bad TTL).
    #[error("L1: {status} {body}")]
    L1Refused {
        /// The HTTP status.
        status: u16,
        /// The reply body.
        body: Value,
    },
    /// L1's reply has no session id: a lock-server of another version; rebuild it.
    #[error("L1: no session_id in {body}")]
    L1NoSession {
        /// The reply body.
        body: Value,
    },
    /// etcd refused or could not be reached: check that it serves, then rerun.
    #[error(transparent)]
    Etcd(#[from] etcd_client::Error),
    /// The lease's keep-alive stream ended (etcd closed it): the server restarted or failed.
    #[error("the keep-alive stream ended")]
    KeepAliveEnded,
    /// A keep-alive answered TTL 0: the lease expired under the load (a
    /// stalled server); rerun with a lighter load.
    #[error("keep-alive: lease {lease} not found")]
    LeaseNotFound {
        /// The lease id.
        lease: i64,
    },
    /// The acquire txn found the client's own key held: a key left over from
    /// an earlier run under the same tag; wait out its lease.
    #[error("acquire txn: {key} is held")]
    Held {
        /// The key.
        key: String,
    },
    /// The acquire txn's reply has no header: an etcd of another version; report it.
    #[error("acquire txn: no header")]
    NoHeader,
    /// The release txn found the key under another revision: someone else
    /// wrote the client's key; run peers with distinct tags.
    #[error("release txn: {key} is not ours")]
    NotOurs {
        /// The key.
        key: String,
    },
    /// A Redis client could not connect or open its key, or a Redis
    /// operation failed (its text the sample's `first_error`).
    #[error(transparent)]
    Redis(#[from] RedisPeerError),
    /// A histogram could not be merged (bounds differ): a bug; report it.
    #[error(transparent)]
    Histogram(#[from] hdrhistogram::errors::AdditionError),
    /// A client task panicked: a bug; report it.
    #[error(transparent)]
    Task(#[from] tokio::task::JoinError),
}

/// Why one HTTP exchange of a peer client failed.
#[derive(Debug, thiserror::Error)]
pub enum ExchangeError {
    /// The request could not be sent or its reply not read: the SDK's error,
    /// whose message already ends with its cause (so it is not chained again).
    #[error("{0}")]
    Http(PeerHttpError),
    /// No reply within the operation timeout: the server is stalled or overloaded.
    #[error("no reply within {OP_TIMEOUT:?}")]
    Timeout,
}

/// Which server a measurement drives.
#[derive(Clone, Debug)]
pub enum Target {
    /// A fencepost lock-server at this base URL, driven with this HTTP client.
    Fencepost {
        /// `http://IP:PORT`.
        base: String,
        /// The SDK's client, or hyper's pooled one.
        client: PeerHttpClient,
    },
    /// etcd at this client URL.
    Etcd(String),
    /// A redis-server at this URL (`redis://127.0.0.1:PORT`).
    Redis(String),
}

/// A fencepost client's request URLs, built once at set-up so the timed
/// loop spends nothing on them (the driver shares the cores it measures).
struct FencepostUrls {
    /// L2 of the session.
    heartbeat: String,
    /// L4 of the client's key.
    acquire: String,
    /// L6 of the client's key.
    release: String,
    /// L3 of the session.
    close: String,
    /// The liveness probe: the floor.
    healthz: String,
}

/// One client task's connection and session.
enum Client {
    /// The SDK's HTTP client (one keep-alive connection) and a lock-server session.
    Fencepost {
        http: PeerHttp,
        urls: Box<FencepostUrls>,
        session: String,
    },
    /// An etcd client (one gRPC channel), a lease and its keep-alive stream.
    Etcd {
        client: Box<etcd_client::Client>,
        lease: i64,
        stream: Box<(LeaseKeeper, LeaseKeepAliveStream)>,
        key: String,
    },
    /// A Redis connection and the task's key.
    Redis(Box<RedisPeer>),
}

impl Client {
    /// Connects client `i` and opens its session / lease / key for `op` (not timed).
    async fn open(target: &Target, i: usize, op: PeerOp) -> Result<Client, PeerError> {
        let key = format!("peer:{}:{i}", op.as_str());
        match target {
            Target::Fencepost { base, client } => {
                let http = PeerHttp::new(*client, OP_TIMEOUT);
                let open = json!({"owner_id": format!("peer-{i}"), "ttl_ms": CLIENT_TTL_S * 1000});
                let resp = timed(http.send(
                    HttpMethod::Post,
                    &format!("{base}/v1/sessions"),
                    Some(Bytes::from(open.to_string())),
                ))
                .await
                .map_err(PeerError::L1Exchange)?;
                let body: Value = serde_json::from_slice(&resp.body)?;
                if resp.status != 201 {
                    return Err(PeerError::L1Refused {
                        status: resp.status,
                        body,
                    });
                }
                let Some(session) = body["session_id"].as_str().map(str::to_string) else {
                    return Err(PeerError::L1NoSession { body });
                };
                let urls = Box::new(FencepostUrls {
                    heartbeat: format!("{base}/v1/sessions/{session}/heartbeat"),
                    acquire: format!("{base}/v1/locks/{key}/acquire"),
                    release: format!("{base}/v1/locks/{key}/release"),
                    close: format!("{base}/v1/sessions/{session}"),
                    healthz: format!("{base}/healthz"),
                });
                Ok(Client::Fencepost {
                    http,
                    urls,
                    session,
                })
            }
            Target::Etcd(url) => {
                let mut client = etcd_client::Client::connect([url.as_str()], None).await?;
                let lease = client.lease_grant(CLIENT_TTL_S, None).await?.id();
                let stream = Box::new(client.lease_keep_alive(lease).await?);
                Ok(Client::Etcd {
                    client: Box::new(client),
                    lease,
                    stream,
                    key,
                })
            }
            Target::Redis(url) => {
                let lease_ms = CLIENT_TTL_S as u64 * 1000;
                let peer = RedisPeer::open(url, &key, i, op, lease_ms, OP_TIMEOUT).await?;
                Ok(Client::Redis(Box::new(peer)))
            }
        }
    }

    /// One operation; `Ok` only when every request in it succeeded.
    async fn op(&mut self, op: PeerOp) -> Result<(), String> {
        if op == PeerOp::Fsync {
            // bench peer measures it on the store's directory (bench_core::fsync).
            return Err("fsync is measured on a store's directory, not sent as a request".into());
        }
        match self {
            Client::Fencepost {
                http,
                urls,
                session,
            } => fencepost_op(http, urls, session, op).await,
            Client::Etcd {
                client,
                lease,
                stream,
                key,
            } => etcd_op(client, *lease, stream, key, op)
                .await
                .map_err(|e| Chain(&e).to_string()),
            Client::Redis(peer) => peer.op(op).await.map_err(|e| Chain(&e).to_string()),
        }
    }

    /// Ends the session / revokes the lease (best effort).
    async fn close(self) {
        match self {
            Client::Fencepost { http, urls, .. } => {
                let _ = timed(http.send(HttpMethod::Delete, &urls.close, None)).await;
            }
            Client::Etcd {
                mut client, lease, ..
            } => {
                let _ = client.lease_revoke(lease).await;
            }
            Client::Redis(peer) => peer.close().await,
        }
    }
}

/// `exchange` bounded by [`OP_TIMEOUT`].
async fn timed(
    exchange: impl std::future::Future<Output = Result<Reply, PeerHttpError>>,
) -> Result<Reply, ExchangeError> {
    match tokio::time::timeout(OP_TIMEOUT, exchange).await {
        Ok(r) => r.map_err(ExchangeError::Http),
        Err(_) => Err(ExchangeError::Timeout),
    }
}

/// L2, or L4 then L6.
async fn fencepost_op(
    http: &PeerHttp,
    urls: &FencepostUrls,
    session: &str,
    op: PeerOp,
) -> Result<(), String> {
    match op {
        PeerOp::Heartbeat => {
            // No body, as the SDK sends it (C1 allows an empty one).
            let resp = timed(http.send(HttpMethod::Post, &urls.heartbeat, None))
                .await
                .map_err(|e| format!("L2: {e}"))?;
            if resp.status != 200 {
                let body = String::from_utf8_lossy(&resp.body);
                return Err(format!("L2: {} {body}", resp.status));
            }
        }
        // Refused by Client::op before it gets here.
        PeerOp::Fsync => {}
        PeerOp::Floor => {
            let resp = timed(http.send(HttpMethod::Get, &urls.healthz, None))
                .await
                .map_err(|e| format!("healthz: {e}"))?;
            if resp.status != 200 {
                let body = String::from_utf8_lossy(&resp.body);
                return Err(format!("healthz: {} {body}", resp.status));
            }
        }
        PeerOp::Grant => {
            let acquire = json!({"session_id": session}).to_string();
            let resp =
                timed(http.send(HttpMethod::Post, &urls.acquire, Some(Bytes::from(acquire))))
                    .await
                    .map_err(|e| format!("L4: {e}"))?;
            let body: Value =
                serde_json::from_slice(&resp.body).map_err(|e| format!("L4 body: {e}"))?;
            let token = match (resp.status, body["token"].as_u64()) {
                (200, Some(t)) => t,
                (status, _) => return Err(format!("L4: {status} {body}")),
            };
            let release = json!({"session_id": session, "token": token}).to_string();
            let resp =
                timed(http.send(HttpMethod::Post, &urls.release, Some(Bytes::from(release))))
                    .await
                    .map_err(|e| format!("L6: {e}"))?;
            if resp.status != 204 {
                let body = String::from_utf8_lossy(&resp.body);
                return Err(format!("L6: {} {body}", resp.status));
            }
        }
    }
    Ok(())
}

/// One LeaseKeepAlive, or the acquire txn then the guarded delete.
async fn etcd_op(
    client: &mut etcd_client::Client,
    lease: i64,
    stream: &mut (LeaseKeeper, LeaseKeepAliveStream),
    key: &str,
    op: PeerOp,
) -> Result<(), PeerError> {
    match op {
        PeerOp::Heartbeat => {
            let (keeper, replies) = stream;
            keeper.keep_alive().await?;
            let r = replies.message().await?.ok_or(PeerError::KeepAliveEnded)?;
            if r.ttl() <= 0 {
                return Err(PeerError::LeaseNotFound { lease });
            }
        }
        // Refused by Client::op before it gets here.
        PeerOp::Fsync => {}
        PeerOp::Floor => {
            // The cheapest unary read: served by the member it reaches, no
            // Raft round (serializable), of a key that is never written.
            let missing = format!("{key}:floor");
            client
                .get(missing, Some(GetOptions::new().with_serializable()))
                .await?;
        }
        PeerOp::Grant => {
            let acquire = Txn::new()
                .when([Compare::create_revision(key, CompareOp::Equal, 0)])
                .and_then([TxnOp::put(
                    key,
                    "peer",
                    Some(PutOptions::new().with_lease(lease)),
                )]);
            let r = client.txn(acquire).await?;
            if !r.succeeded() {
                return Err(PeerError::Held { key: key.into() });
            }
            let token = r
                .header()
                .map(|h| h.revision())
                .ok_or(PeerError::NoHeader)?;
            let release = Txn::new()
                .when([Compare::create_revision(key, CompareOp::Equal, token)])
                .and_then([TxnOp::delete(key, None)]);
            let r = client.txn(release).await?;
            if !r.succeeded() {
                return Err(PeerError::NotOurs { key: key.into() });
            }
        }
    }
    Ok(())
}

/// What one client task measured.
struct TaskResult {
    /// Successful operations in the window.
    ops: u64,
    /// Failed operations in the window.
    errors: u64,
    /// Their latencies, µs.
    latency: Histogram<u64>,
    /// The first error (warm-up included).
    first_error: Option<String>,
    /// When its last operation of the window ended.
    ended: Instant,
}

/// Told when a measured window opens and when its last operation has ended
/// (the caller reads CPU counters there).
pub trait WindowProbe {
    /// The window opens (the warm-up is over).
    fn opened(&mut self) -> impl std::future::Future<Output = ()>;
    /// Every task's last operation of the window has ended.
    fn closed(&mut self) -> impl std::future::Future<Output = ()>;
}

/// Measures `op` at `concurrency` on `target`: set-up (not timed), `warmup`
/// (not counted), then `duration`, with `probe` told when the window opens
/// and closes.
pub async fn measure(
    target: &Target,
    op: PeerOp,
    concurrency: usize,
    warmup: Duration,
    duration: Duration,
    probe: &mut impl WindowProbe,
) -> Result<Sample, PeerError> {
    let mut clients = Vec::with_capacity(concurrency);
    for i in 0..concurrency {
        clients.push(Client::open(target, i, op).await?);
    }
    let start = Instant::now() + warmup;
    let end = start + duration;
    let mut tasks = Vec::with_capacity(concurrency);
    for mut client in clients {
        tasks.push(tokio::spawn(async move {
            let mut r = TaskResult {
                ops: 0,
                errors: 0,
                latency: hist::new_histogram(),
                first_error: None,
                ended: start,
            };
            loop {
                let sent = Instant::now();
                if sent >= end {
                    break;
                }
                let done = match tokio::time::timeout(OP_TIMEOUT, client.op(op)).await {
                    Ok(d) => d,
                    Err(_) => Err(ExchangeError::Timeout.to_string()),
                };
                let now = Instant::now();
                if let Err(e) = &done {
                    r.first_error.get_or_insert_with(|| e.clone());
                }
                if sent < start {
                    continue;
                }
                r.ended = now;
                match done {
                    Ok(()) => {
                        r.ops += 1;
                        let us = u64::try_from((now - sent).as_micros()).unwrap_or(u64::MAX);
                        r.latency.saturating_record(us.max(1));
                    }
                    Err(_) => r.errors += 1,
                }
            }
            (r, client)
        }));
    }
    tokio::time::sleep_until(start).await;
    probe.opened().await;
    let mut sample = Sample {
        ops: 0,
        errors: 0,
        seconds: 0.0,
        latency: hist::new_histogram(),
        first_error: None,
    };
    let mut last = end;
    let mut done_clients = Vec::with_capacity(concurrency);
    for t in tasks {
        let (r, client) = t.await?;
        sample.ops += r.ops;
        sample.errors += r.errors;
        sample.latency.add(&r.latency)?;
        if sample.first_error.is_none() {
            sample.first_error = r.first_error;
        }
        last = last.max(r.ended);
        done_clients.push(client);
    }
    probe.closed().await;
    sample.seconds = (last - start).as_secs_f64();
    for c in done_clients {
        c.close().await;
    }
    Ok(sample)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_l1_failure_reads_as_before_the_call_then_its_reason() {
        let e = PeerError::L1Exchange(ExchangeError::Timeout);
        assert_eq!(Chain(&e).to_string(), "L1: no reply within 10s");
        let e = PeerError::L1Refused {
            status: 503,
            body: json!({"code": "UNAVAILABLE"}),
        };
        assert_eq!(Chain(&e).to_string(), r#"L1: 503 {"code":"UNAVAILABLE"}"#);
    }
}
