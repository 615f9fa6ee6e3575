//! One connection of `bench peer --sessions` ([`crate::peer_sessions`]):
//! what a lane opens, keeps alive and closes its sessions through.
//!
//! - fencepost: the SDK's own HTTP/1.1 client ([`crate::peer_http`], one
//!   keep-alive connection, since a lane sends one exchange at a time): L1
//!   to open, L2 to heartbeat, L3 to close.
//! - etcd: one gRPC channel (one HTTP/2 connection) carrying LeaseGrant,
//!   LeaseRevoke and one LeaseKeepAlive stream on which every lease of the
//!   lane is kept alive (one request per lease id, its answer matched by
//!   id). `etcd-client`'s keeper is bound to one lease id per stream, so
//!   these three calls are made with tonic directly, on etcd's own messages
//!   (etcdserverpb, the fields this driver reads).

use std::time::Duration;

use bytes::Bytes;
use fencepost_sdk::http::HttpMethod;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::codegen::http::uri::PathAndQuery;
use tonic::transport::Channel;

use crate::peer_http::{PeerHttp, PeerHttpClient};

/// Why a session could not be opened, or a heartbeat failed.
#[derive(Debug, thiserror::Error)]
pub enum ConnError {
    /// The HTTP exchange failed (the SDK's message names the URL and cause).
    #[error("{0}")]
    Http(crate::peer_http::PeerHttpError),
    /// `bench peer --sessions` does not measure this system (Redis): leave
    /// it out of the sessions run.
    #[error("bench peer --sessions does not measure {0}")]
    NotMeasured(&'static str),
    /// The lock-server refused: its status and body.
    #[error("{call}: {status} {body}")]
    Refused {
        /// `L1`, `L2`.
        call: &'static str,
        /// The HTTP status.
        status: u16,
        /// The body, as text.
        body: String,
    },
    /// L1 answered without a session id: a lock-server of another version.
    #[error("L1: no session_id in {0}")]
    NoSession(String),
    /// The etcd URL is not a URI tonic accepts; pass `http://HOST:PORT`.
    #[error("bad etcd URL {url}")]
    BadUrl {
        /// The URL.
        url: String,
        /// Why.
        #[source]
        source: tonic::codegen::http::uri::InvalidUri,
    },
    /// etcd could not be reached (the channel did not connect).
    #[error("connecting to etcd")]
    Connect(#[source] tonic::transport::Error),
    /// etcd refused a call: its gRPC status.
    #[error("{call}: {status}")]
    Grpc {
        /// `LeaseGrant`, `LeaseKeepAlive`, `LeaseRevoke`.
        call: &'static str,
        /// The status.
        #[source]
        status: tonic::Status,
    },
    /// LeaseGrant answered an error in its body.
    #[error("LeaseGrant: {0}")]
    GrantRefused(String),
    /// The keep-alive stream ended (etcd closed it).
    #[error("the keep-alive stream ended")]
    StreamEnded,
    /// A keep-alive answered TTL 0: the lease had expired.
    #[error("keep-alive: lease {0} not found (expired)")]
    LeaseGone(i64),
}

impl ConnError {
    /// Whether the process ran out of file descriptors (EMFILE) on it.
    pub fn is_fd_exhausted(&self) -> bool {
        let text = bench_core::error::Chain(self).to_string();
        text.contains("Too many open files") || text.contains("os error 24")
    }
}

/// etcdserverpb.LeaseGrantRequest.
#[derive(Clone, PartialEq, prost::Message)]
struct LeaseGrantRequest {
    /// TTL, s.
    #[prost(int64, tag = "1")]
    ttl: i64,
    /// 0: etcd picks the id.
    #[prost(int64, tag = "2")]
    id: i64,
}

/// etcdserverpb.LeaseGrantResponse (the fields read here).
#[derive(Clone, PartialEq, prost::Message)]
struct LeaseGrantResponse {
    /// The lease id.
    #[prost(int64, tag = "2")]
    id: i64,
    /// The granted TTL, s.
    #[prost(int64, tag = "3")]
    ttl: i64,
    /// An error, if the grant failed.
    #[prost(string, tag = "4")]
    error: String,
}

/// etcdserverpb.LeaseRevokeRequest.
#[derive(Clone, PartialEq, prost::Message)]
struct LeaseRevokeRequest {
    /// The lease id.
    #[prost(int64, tag = "1")]
    id: i64,
}

/// etcdserverpb.LeaseRevokeResponse (its header is not read).
#[derive(Clone, PartialEq, prost::Message)]
struct LeaseRevokeResponse {}

/// etcdserverpb.LeaseKeepAliveRequest.
#[derive(Clone, PartialEq, prost::Message)]
struct LeaseKeepAliveRequest {
    /// The lease id.
    #[prost(int64, tag = "1")]
    id: i64,
}

/// etcdserverpb.LeaseKeepAliveResponse (the fields read here).
#[derive(Clone, PartialEq, prost::Message)]
struct LeaseKeepAliveResponse {
    /// The lease id the answer is for.
    #[prost(int64, tag = "2")]
    id: i64,
    /// The new TTL, s; 0 when the lease was not found.
    #[prost(int64, tag = "3")]
    ttl: i64,
}

/// A lane's open keep-alive stream: where requests go, where answers come from.
pub struct KeepAliveStream {
    /// Requests.
    tx: mpsc::Sender<LeaseKeepAliveRequest>,
    /// Answers.
    rx: tonic::codec::Streaming<LeaseKeepAliveResponse>,
}

/// One lane's connection.
pub enum Conn {
    /// A lock-server at `base` through the SDK's client.
    Fencepost {
        /// One keep-alive connection (the lane sends one exchange at a time).
        http: PeerHttp,
        /// `http://IP:PORT`.
        base: String,
    },
    /// etcd through one gRPC channel and one keep-alive stream.
    Etcd {
        /// The channel (one HTTP/2 connection).
        grpc: Box<tonic::client::Grpc<Channel>>,
        /// The keep-alive stream, opened at the first keep-alive and again
        /// after a failure.
        stream: Option<Box<KeepAliveStream>>,
    },
}

/// A session's handle: its L2 URL and L3 URL, or its lease id.
#[derive(Clone, Debug)]
pub enum Handle {
    /// A fencepost session: its heartbeat URL (L2) and its URL (L3).
    Session {
        /// `.../v1/sessions/ID/heartbeat`.
        heartbeat: String,
        /// `.../v1/sessions/ID`.
        close: String,
    },
    /// An etcd lease id.
    Lease(i64),
}

const GRANT: &str = "/etcdserverpb.Lease/LeaseGrant";
const REVOKE: &str = "/etcdserverpb.Lease/LeaseRevoke";
const KEEP_ALIVE: &str = "/etcdserverpb.Lease/LeaseKeepAlive";

impl Conn {
    /// A lock-server connection (connects at its first exchange).
    pub fn fencepost(base: &str, connect_timeout: Duration) -> Conn {
        Conn::Fencepost {
            http: PeerHttp::new(PeerHttpClient::Sdk, connect_timeout),
            base: base.to_string(),
        }
    }

    /// An etcd connection to `url` (`http://IP:PORT`).
    pub async fn etcd(url: &str, connect_timeout: Duration) -> Result<Conn, ConnError> {
        let channel = Channel::from_shared(url.to_string())
            .map_err(|source| ConnError::BadUrl {
                url: url.to_string(),
                source,
            })?
            .connect_timeout(connect_timeout)
            .tcp_nodelay(true)
            .connect()
            .await
            .map_err(ConnError::Connect)?;
        Ok(Conn::Etcd {
            grpc: Box::new(tonic::client::Grpc::new(channel)),
            stream: None,
        })
    }

    /// Opens session / grants lease `i` with `ttl`.
    pub async fn open(&mut self, i: usize, ttl: Duration) -> Result<Handle, ConnError> {
        match self {
            Conn::Fencepost { http, base } => {
                let body =
                    json!({"owner_id": format!("sessions-{i}"), "ttl_ms": ttl.as_millis() as u64});
                let url = format!("{base}/v1/sessions");
                let r = http
                    .send(HttpMethod::Post, &url, Some(Bytes::from(body.to_string())))
                    .await
                    .map_err(ConnError::Http)?;
                if r.status != 201 {
                    return Err(ConnError::Refused {
                        call: "L1",
                        status: r.status,
                        body: String::from_utf8_lossy(&r.body).into_owned(),
                    });
                }
                let v: Value = serde_json::from_slice(&r.body).unwrap_or(Value::Null);
                let Some(id) = v["session_id"].as_str() else {
                    return Err(ConnError::NoSession(
                        String::from_utf8_lossy(&r.body).into_owned(),
                    ));
                };
                Ok(Handle::Session {
                    heartbeat: format!("{base}/v1/sessions/{id}/heartbeat"),
                    close: format!("{base}/v1/sessions/{id}"),
                })
            }
            Conn::Etcd { grpc, .. } => {
                let req = LeaseGrantRequest {
                    ttl: lease_ttl_s(ttl),
                    id: 0,
                };
                let r: LeaseGrantResponse = unary(grpc, "LeaseGrant", GRANT, req).await?;
                if !r.error.is_empty() || r.ttl <= 0 {
                    return Err(ConnError::GrantRefused(r.error));
                }
                Ok(Handle::Lease(r.id))
            }
        }
    }

    /// One heartbeat (L2) / keep-alive of `handle`, its answer read.
    pub async fn beat(&mut self, handle: &Handle) -> Result<(), ConnError> {
        match (self, handle) {
            (Conn::Fencepost { http, .. }, Handle::Session { heartbeat, .. }) => {
                let r = http
                    // No body, as the SDK sends it.
                    .send(HttpMethod::Post, heartbeat, None)
                    .await
                    .map_err(ConnError::Http)?;
                if r.status != 200 {
                    return Err(ConnError::Refused {
                        call: "L2",
                        status: r.status,
                        body: String::from_utf8_lossy(&r.body).into_owned(),
                    });
                }
                Ok(())
            }
            (Conn::Etcd { grpc, stream }, Handle::Lease(id)) => {
                let result = keep_alive(grpc, stream, *id).await;
                if result.is_err() {
                    // A failed stream is opened again at the next keep-alive.
                    *stream = None;
                }
                result
            }
            _ => Err(ConnError::StreamEnded),
        }
    }

    /// Forgets the keep-alive stream (after a timed-out keep-alive, whose
    /// answer may still arrive): the next keep-alive opens a new one.
    pub fn reset(&mut self) {
        if let Conn::Etcd { stream, .. } = self {
            *stream = None;
        }
    }

    /// Closes the session (L3) / revokes the lease (best effort).
    pub async fn close(&mut self, handle: &Handle) {
        match (self, handle) {
            (Conn::Fencepost { http, .. }, Handle::Session { close, .. }) => {
                let _ = http.send(HttpMethod::Delete, close, None).await;
            }
            (Conn::Etcd { grpc, .. }, Handle::Lease(id)) => {
                let req = LeaseRevokeRequest { id: *id };
                let _: Result<LeaseRevokeResponse, _> =
                    unary(grpc, "LeaseRevoke", REVOKE, req).await;
            }
            _ => {}
        }
    }
}

/// etcd's lease TTL for a session TTL: whole seconds, rounded up.
pub fn lease_ttl_s(ttl: Duration) -> i64 {
    i64::try_from(ttl.as_millis().div_ceil(1000)).unwrap_or(i64::MAX)
}

/// One unary etcd call.
async fn unary<Q, R>(
    grpc: &mut tonic::client::Grpc<Channel>,
    call: &'static str,
    path: &'static str,
    req: Q,
) -> Result<R, ConnError>
where
    Q: prost::Message + Send + Sync + 'static,
    R: prost::Message + Default + Send + Sync + 'static,
{
    grpc.ready().await.map_err(|e| ConnError::Grpc {
        call,
        status: tonic::Status::unknown(format!("not ready: {e}")),
    })?;
    let codec = tonic_prost::ProstCodec::<Q, R>::default();
    grpc.unary(
        tonic::Request::new(req),
        PathAndQuery::from_static(path),
        codec,
    )
    .await
    .map(tonic::Response::into_inner)
    .map_err(|status| ConnError::Grpc { call, status })
}

/// One keep-alive of lease `id` on the lane's stream (opened if need be):
/// the request is sent, then answers are read until the one for `id` (an
/// earlier timed-out request's late answer is skipped).
async fn keep_alive(
    grpc: &mut tonic::client::Grpc<Channel>,
    stream: &mut Option<Box<KeepAliveStream>>,
    id: i64,
) -> Result<(), ConnError> {
    let grpc_err = |status| ConnError::Grpc {
        call: "LeaseKeepAlive",
        status,
    };
    let req = LeaseKeepAliveRequest { id };
    match stream {
        Some(s) => s.tx.send(req).await.map_err(|_| ConnError::StreamEnded)?,
        None => {
            // etcd sends the stream's headers with its first answer, so the
            // first request goes in before the call is made.
            let (tx, rx) = mpsc::channel(4);
            tx.send(req).await.map_err(|_| ConnError::StreamEnded)?;
            grpc.ready()
                .await
                .map_err(|e| grpc_err(tonic::Status::unknown(format!("not ready: {e}"))))?;
            let codec =
                tonic_prost::ProstCodec::<LeaseKeepAliveRequest, LeaseKeepAliveResponse>::default();
            let rx_stream = grpc
                .streaming(
                    tonic::Request::new(ReceiverStream::new(rx)),
                    PathAndQuery::from_static(KEEP_ALIVE),
                    codec,
                )
                .await
                .map_err(grpc_err)?
                .into_inner();
            *stream = Some(Box::new(KeepAliveStream { tx, rx: rx_stream }));
        }
    }
    let s = stream.as_mut().ok_or(ConnError::StreamEnded)?;
    loop {
        let answer =
            s.rx.message()
                .await
                .map_err(grpc_err)?
                .ok_or(ConnError::StreamEnded)?;
        if answer.id != id {
            continue;
        }
        if answer.ttl <= 0 {
            return Err(ConnError::LeaseGone(id));
        }
        return Ok(());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_lease_ttl_is_the_session_ttl_rounded_up_to_whole_seconds() {
        assert_eq!(lease_ttl_s(Duration::from_secs(15)), 15);
        assert_eq!(lease_ttl_s(Duration::from_millis(15_001)), 16);
        assert_eq!(lease_ttl_s(Duration::from_millis(500)), 1);
    }
}
