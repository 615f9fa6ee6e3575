//! The HTTP client `bench peer` drives the lock-server with. By default it is
//! the SDK's own ([`fencepost_sdk::http::HttpClient`]), so a figure is what an
//! SDK user gets; `--http-client hyper-legacy` puts hyper's general pooled
//! client (`hyper_util::client::legacy::Client`, which has no redirect or
//! proxy layers) in its place, and `--http-client sdk,hyper-legacy` measures
//! both in one interleaved run. That is how the SDK's hand-written pool is
//! weighed against the one it would otherwise use: heartbeats per client
//! CPU-second, each client task holding one keep-alive connection with
//! `TCP_NODELAY` in both cases.

use std::time::Duration;

use bench_core::error::Chain;
pub use bench_core::peer::PeerHttpClient;
use bytes::Bytes;
use fencepost_sdk::http::{HttpClient, HttpError, HttpMethod};
use http_body_util::{BodyExt as _, Full};
use hyper_util::client::legacy::Client as LegacyClient;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

/// A status and a whole body, whichever client fetched it.
#[derive(Clone, Debug)]
pub struct Reply {
    /// The HTTP status code.
    pub status: u16,
    /// The whole body.
    pub body: Bytes,
}

/// Why one exchange failed. Each message carries its whole cause, so none
/// is also a `source()` (a `{:#}` chain would print it twice).
#[derive(Debug, thiserror::Error)]
pub enum PeerHttpError {
    /// The SDK's client failed; its message names the URL and the cause.
    #[error("{0}")]
    Sdk(HttpError),
    /// The request could not be built (a URL hyper does not accept).
    #[error("building the request: {0}")]
    Request(hyper::http::Error),
    /// hyper's client could not connect, send or read the head of the reply.
    #[error("hyper's pooled client: {}", Chain(.0))]
    Hyper(hyper_util::client::legacy::Error),
    /// The reply's body could not be read.
    #[error("reading the reply's body: {0}")]
    Body(hyper::Error),
}

/// One client task's HTTP client (one keep-alive connection).
pub enum PeerHttp {
    /// The SDK's client.
    Sdk(HttpClient),
    /// hyper's pooled client, at most one idle connection.
    HyperLegacy(Box<LegacyClient<HttpConnector, Full<Bytes>>>),
}

impl PeerHttp {
    /// A client of `kind` whose connect is bounded by `connect_timeout`.
    pub fn new(kind: PeerHttpClient, connect_timeout: Duration) -> Self {
        match kind {
            PeerHttpClient::Sdk => PeerHttp::Sdk(HttpClient::new(connect_timeout)),
            PeerHttpClient::HyperLegacy => {
                let mut connector = HttpConnector::new();
                connector.set_nodelay(true);
                connector.set_connect_timeout(Some(connect_timeout));
                let client = LegacyClient::builder(TokioExecutor::new())
                    .pool_max_idle_per_host(1)
                    .build(connector);
                PeerHttp::HyperLegacy(Box::new(client))
            }
        }
    }

    /// One exchange: `method url` with a JSON `body`, the whole reply read.
    pub async fn send(
        &self,
        method: HttpMethod,
        url: &str,
        body: Option<Bytes>,
    ) -> Result<Reply, PeerHttpError> {
        match self {
            PeerHttp::Sdk(http) => {
                let r = http
                    .send(method, url, body)
                    .await
                    .map_err(PeerHttpError::Sdk)?;
                Ok(Reply {
                    status: r.status,
                    body: r.body,
                })
            }
            PeerHttp::HyperLegacy(client) => {
                let method = match method {
                    HttpMethod::Get => hyper::Method::GET,
                    HttpMethod::Post => hyper::Method::POST,
                    HttpMethod::Delete => hyper::Method::DELETE,
                };
                let mut request = hyper::Request::builder().method(method).uri(url);
                if body.is_some() {
                    request = request.header(hyper::header::CONTENT_TYPE, "application/json");
                }
                let request = request
                    .body(Full::new(body.unwrap_or_default()))
                    .map_err(PeerHttpError::Request)?;
                let response = client
                    .request(request)
                    .await
                    .map_err(PeerHttpError::Hyper)?;
                let status = response.status().as_u16();
                let body = response
                    .into_body()
                    .collect()
                    .await
                    .map_err(PeerHttpError::Body)?
                    .to_bytes();
                Ok(Reply { status, body })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

    use super::*;

    /// A keep-alive HTTP/1.1 server on loopback that answers every request
    /// `200 {"ok":true}` and counts the connections it accepted.
    async fn server() -> (String, Arc<AtomicUsize>) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let accepted = Arc::new(AtomicUsize::new(0));
        let count = accepted.clone();
        tokio::spawn(async move {
            while let Ok((mut conn, _)) = listener.accept().await {
                count.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(async move {
                    let mut buf = vec![0u8; 4096];
                    let mut seen = Vec::new();
                    loop {
                        let Ok(n) = conn.read(&mut buf).await else {
                            return;
                        };
                        if n == 0 {
                            return;
                        }
                        seen.extend_from_slice(&buf[..n]);
                        // One reply per complete request (head, then a body
                        // of the announced length).
                        while let Some(end) = seen.windows(4).position(|w| w == b"\r\n\r\n") {
                            let head = String::from_utf8_lossy(&seen[..end]).to_lowercase();
                            let len = head
                                .lines()
                                .find_map(|l| l.strip_prefix("content-length:"))
                                .and_then(|v| v.trim().parse::<usize>().ok())
                                .unwrap_or(0);
                            if seen.len() < end + 4 + len {
                                break;
                            }
                            seen.drain(..end + 4 + len);
                            let body = br#"{"ok":true}"#;
                            let reply = format!(
                                "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
                                body.len()
                            );
                            if conn.write_all(reply.as_bytes()).await.is_err()
                                || conn.write_all(body).await.is_err()
                            {
                                return;
                            }
                        }
                    }
                });
            }
        });
        (url, accepted)
    }

    /// Both clients read the whole reply and keep one connection across
    /// sequential exchanges: the comparison is between two pools of the same
    /// shape, one keep-alive connection per client task.
    #[tokio::test]
    async fn both_clients_answer_over_one_kept_alive_connection() {
        for kind in PeerHttpClient::ALL {
            let (url, accepted) = server().await;
            let http = PeerHttp::new(kind, Duration::from_secs(5));
            for _ in 0..3 {
                let r = http
                    .send(
                        HttpMethod::Post,
                        &format!("{url}/x"),
                        Some(Bytes::from_static(b"{}")),
                    )
                    .await
                    .unwrap_or_else(|e| panic!("{}: {e}", kind.as_str()));
                assert_eq!((r.status, &r.body[..]), (200, &br#"{"ok":true}"#[..]));
            }
            assert_eq!(
                accepted.load(Ordering::SeqCst),
                1,
                "{}: one connection",
                kind.as_str()
            );
        }
    }

    /// A refused connect is an error naming what failed, from either client.
    #[tokio::test]
    async fn a_refused_connect_is_an_error() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/x", listener.local_addr().unwrap());
        drop(listener);
        for kind in PeerHttpClient::ALL {
            let e = PeerHttp::new(kind, Duration::from_secs(5))
                .send(HttpMethod::Get, &url, None)
                .await
                .err()
                .unwrap_or_else(|| panic!("{}: a refused connect answered", kind.as_str()));
            assert!(!e.to_string().is_empty());
        }
    }

    #[test]
    fn the_flag_values_round_trip() {
        for c in PeerHttpClient::ALL {
            assert_eq!(c.as_str().parse::<PeerHttpClient>(), Ok(c));
        }
        assert!(
            "reqwest"
                .parse::<PeerHttpClient>()
                .unwrap_err()
                .contains("reqwest")
        );
    }
}
