//! The SDK's HTTP/1.1 client: plain `http://`, keep-alive connections pooled
//! per `host:port`, `TCP_NODELAY`, a bounded connect and a bounded reply.
//!
//! It is written on hyper's connection API rather than on a general client
//! because the heartbeat path is the product: every exchange here is a small
//! JSON request to one lock-server, and a general client's layers (redirect
//! policy, proxy lookup, URL re-parsing of each response) cost more CPU per
//! heartbeat than the lock-server spends answering it (docs/performance.md,
//! `bench peer`). Nothing here follows a redirect, reads a
//! proxy variable or speaks TLS.
//!
//! One exchange takes an idle connection of the pool (or opens one), writes
//! the request, reads the whole reply and puts the connection back. A pooled
//! connection the server closed while it was idle is detected before the
//! request is written (hyper hands an unwritten request back), and only then
//! is the request sent again on a new connection: a request that may have
//! reached the server is never repeated here. The caller bounds the whole
//! exchange with its own timeout; dropping the future closes that
//! connection, so a late reply can never be read as the answer to the next
//! request.
//!
//! [`HttpClient`] is public so that a load driver measures exactly the client
//! an SDK user gets (`bench peer` does).
//!
//! With an API token ([`HttpClient::with_authorization`], issue 28) every
//! request carries `Authorization: Bearer TOKEN`: one header value built
//! once and marked sensitive, each request taking a reference-counted copy.

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::client::conn::http1::{self, SendRequest};
use hyper::header::HeaderValue;
use hyper::{Request, header};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use crate::clock::{Clock, MonoTime, MonotonicClock};

/// The largest reply body read (a C1 reply is a few hundred bytes).
pub const MAX_REPLY_BYTES: usize = 1 << 20;

/// Idle connections kept per `host:port`; more are closed when they come back.
pub const MAX_IDLE_PER_HOST: usize = 256;

/// How long a connection may sit idle in the pool before it is closed instead
/// of reused ([`HttpClient::new`]). A middlebox (NAT, load balancer) may drop
/// an idle connection silently; a request written into one is lost until its
/// timeout, so a connection idle this long is not trusted with one.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(60);

/// The request methods C1 uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HttpMethod {
    /// `GET`.
    Get,
    /// `POST`.
    Post,
    /// `DELETE`.
    Delete,
}

impl HttpMethod {
    fn as_hyper(self) -> hyper::Method {
        match self {
            HttpMethod::Get => hyper::Method::GET,
            HttpMethod::Post => hyper::Method::POST,
            HttpMethod::Delete => hyper::Method::DELETE,
        }
    }
}

/// A reply read to its end.
#[derive(Clone, Debug)]
pub struct HttpReply {
    /// The HTTP status code.
    pub status: u16,
    /// The whole body.
    pub body: Bytes,
}

/// What went wrong in an exchange.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// The URL is not `http://host[:port][/path]`.
    Url,
    /// The TCP connection could not be opened (refused, unreachable, DNS).
    Connect,
    /// The TCP connection did not open within the connect timeout.
    ConnectTimeout,
    /// The connection failed while the request was written or the reply read.
    Exchange,
    /// The reply body is larger than [`MAX_REPLY_BYTES`].
    TooLarge,
}

/// A transport failure: the request could not be sent or its reply not read.
/// The outcome on the server is unknown unless [`HttpError::is_connect`] says
/// the connection was never opened.
#[derive(Debug)]
pub struct HttpError {
    kind: Kind,
    /// The URL of the exchange (or the `host:port` connected to).
    target: String,
    source: Option<Box<dyn std::error::Error + Send + Sync>>,
}

impl HttpError {
    fn new(
        kind: Kind,
        target: &str,
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        HttpError {
            kind,
            target: target.to_string(),
            source,
        }
    }

    /// The connection was never opened (refused, unreachable, not resolved,
    /// or not within the connect timeout): the server saw nothing.
    pub fn is_connect(&self) -> bool {
        matches!(self.kind, Kind::Connect | Kind::ConnectTimeout)
    }

    /// The connect timeout fired.
    pub fn is_timeout(&self) -> bool {
        self.kind == Kind::ConnectTimeout
    }
}

impl fmt::Display for HttpError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let t = &self.target;
        match self.kind {
            Kind::Url => write!(f, "{t:?} is not an http://host:port URL"),
            Kind::Connect => write!(f, "cannot connect to {t}"),
            Kind::ConnectTimeout => write!(f, "no connection to {t} within the connect timeout"),
            Kind::Exchange => write!(f, "the connection failed during the exchange with {t}"),
            Kind::TooLarge => write!(f, "the reply of {t} exceeds {MAX_REPLY_BYTES} bytes"),
        }?;
        if let Some(s) = &self.source {
            write!(f, ": {s}")?;
        }
        Ok(())
    }
}

impl std::error::Error for HttpError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source
            .as_deref()
            .map(|s| s as &(dyn std::error::Error + 'static))
    }
}

/// Splits `http://authority/path` into the authority (`host:port`) and the
/// origin-form path (`/` when there is none). `None` for anything else,
/// `https://` included (the SDK speaks no TLS).
pub fn split_url(url: &str) -> Option<(&str, &str)> {
    let rest = url.strip_prefix("http://")?;
    let (authority, path) = match rest.find(['/', '?']) {
        Some(i) if rest[i..].starts_with('?') => return None,
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    if authority.is_empty() || authority.contains(['@', ' ']) {
        return None;
    }
    Some((authority, path))
}

/// The pooled HTTP/1.1 client (cheap to clone; clones share the pool).
#[derive(Clone)]
pub struct HttpClient {
    inner: Arc<Pool>,
    /// `Bearer TOKEN`, sent with every request when set (sensitive).
    authorization: Option<HeaderValue>,
}

struct Pool {
    connect_timeout: Duration,
    idle_timeout: Duration,
    /// Reads when a connection went idle (connection hygiene, no lease).
    clock: MonotonicClock,
    /// Idle connections by authority, oldest first; the most recently used
    /// is taken first.
    idle: Mutex<HashMap<String, Vec<Idle>>>,
}

/// A pooled connection and when it was put back.
struct Idle {
    conn: SendRequest<Full<Bytes>>,
    since: MonoTime,
}

impl fmt::Debug for HttpClient {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("HttpClient")
            .field("connect_timeout", &self.inner.connect_timeout)
            .field("idle_timeout", &self.inner.idle_timeout)
            .field(
                "authorization",
                &self.authorization.as_ref().map(|_| "<redacted>"),
            )
            .finish_non_exhaustive()
    }
}

impl HttpClient {
    /// A client whose new connections must open within `connect_timeout`,
    /// and which closes connections idle for [`DEFAULT_IDLE_TIMEOUT`].
    pub fn new(connect_timeout: Duration) -> Self {
        Self::with_idle_timeout(connect_timeout, DEFAULT_IDLE_TIMEOUT)
    }

    /// As [`HttpClient::new`], closing connections idle for `idle_timeout`
    /// (zero: every exchange opens a new connection).
    pub fn with_idle_timeout(connect_timeout: Duration, idle_timeout: Duration) -> Self {
        HttpClient {
            inner: Arc::new(Pool {
                connect_timeout,
                idle_timeout,
                clock: MonotonicClock::new(),
                idle: Mutex::new(HashMap::new()),
            }),
            authorization: None,
        }
    }

    /// This client (sharing its pool) sending `value` as the
    /// `Authorization` header of every request (an API token's
    /// [`header_value`](crate::ApiToken::header_value)); `None` sends none.
    pub fn with_authorization(mut self, value: Option<HeaderValue>) -> Self {
        self.authorization = value;
        self
    }

    /// One exchange: `method url`, with `json` as an `application/json` body
    /// if given, the reply read to its end. Not bounded in time except for
    /// the connect: wrap it in the caller's timeout.
    pub async fn send(
        &self,
        method: HttpMethod,
        url: &str,
        json: Option<Bytes>,
    ) -> Result<HttpReply, HttpError> {
        let (authority, path) =
            split_url(url).ok_or_else(|| HttpError::new(Kind::Url, url, None))?;
        let mut request = Request::builder()
            .method(method.as_hyper())
            .uri(path)
            .header(header::HOST, authority);
        if json.is_some() {
            request = request.header(header::CONTENT_TYPE, "application/json");
        }
        if let Some(auth) = &self.authorization {
            request = request.header(header::AUTHORIZATION, auth.clone());
        }
        let mut request = request
            .body(Full::new(json.unwrap_or_default()))
            .map_err(|e| HttpError::new(Kind::Url, url, Some(Box::new(e))))?;
        loop {
            let (mut conn, reused) = match self.take_idle(authority).await {
                Some(c) => (c, true),
                None => (self.connect(authority).await?, false),
            };
            match conn.try_send_request(request).await {
                Ok(reply) => {
                    let status = reply.status().as_u16();
                    let body = Limited::new(reply.into_body(), MAX_REPLY_BYTES)
                        .collect()
                        .await
                        .map_err(|e| {
                            let kind = if e.is::<http_body_util::LengthLimitError>() {
                                Kind::TooLarge
                            } else {
                                Kind::Exchange
                            };
                            HttpError::new(kind, url, Some(e))
                        })?
                        .to_bytes();
                    self.put_idle(authority, conn);
                    return Ok(HttpReply { status, body });
                }
                Err(mut e) => match e.take_message() {
                    // Never written: the pooled connection had closed. Again
                    // on the next pooled connection or a new one; a new
                    // connection's failure ends the exchange.
                    Some(unsent) if reused => request = unsent,
                    _ => {
                        return Err(HttpError::new(
                            Kind::Exchange,
                            url,
                            Some(Box::new(e.into_error())),
                        ));
                    }
                },
            }
        }
    }

    /// An idle connection to `authority` that is still open, not idle too
    /// long, and ready.
    async fn take_idle(&self, authority: &str) -> Option<SendRequest<Full<Bytes>>> {
        loop {
            let mut conn = {
                let now = self.inner.clock.now();
                let mut idle = self.inner.idle.lock().unwrap_or_else(|e| e.into_inner());
                let list = idle.get_mut(authority)?;
                loop {
                    let c = list.pop()?;
                    if now.saturating_duration_since(c.since) >= self.inner.idle_timeout {
                        // Every one below went idle earlier still.
                        list.clear();
                        return None;
                    }
                    if !c.conn.is_closed() {
                        break c.conn;
                    }
                }
            };
            // Ready at once unless the previous reply's end is still being
            // processed by the connection task; an error means it closed.
            if conn.ready().await.is_ok() {
                return Some(conn);
            }
        }
    }

    fn put_idle(&self, authority: &str, conn: SendRequest<Full<Bytes>>) {
        if conn.is_closed() {
            return;
        }
        let since = self.inner.clock.now();
        let mut idle = self.inner.idle.lock().unwrap_or_else(|e| e.into_inner());
        let list = idle.entry(authority.to_string()).or_default();
        if list.len() < MAX_IDLE_PER_HOST {
            list.push(Idle { conn, since });
        }
    }

    /// Opens a connection to `authority` (port 80 if none is given).
    async fn connect(&self, authority: &str) -> Result<SendRequest<Full<Bytes>>, HttpError> {
        let addr = if has_port(authority) {
            authority.to_string()
        } else {
            format!("{authority}:80")
        };
        let stream = tokio::time::timeout(self.inner.connect_timeout, TcpStream::connect(&addr))
            .await
            .map_err(|_| HttpError::new(Kind::ConnectTimeout, &addr, None))?
            .map_err(|e| HttpError::new(Kind::Connect, &addr, Some(Box::new(e))))?;
        stream
            .set_nodelay(true)
            .map_err(|e| HttpError::new(Kind::Connect, &addr, Some(Box::new(e))))?;
        let (sender, connection) = http1::handshake(TokioIo::new(stream))
            .await
            .map_err(|e| HttpError::new(Kind::Connect, &addr, Some(Box::new(e))))?;
        // The connection task ends when the server closes or the last
        // sender is dropped; its error is the exchange's to report.
        tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(sender)
    }
}

/// Whether `authority` names a port (`host:port`, `[v6]:port`).
fn has_port(authority: &str) -> bool {
    match authority.rfind(':') {
        Some(i) => !authority[i..].contains(']'),
        None => false,
    }
}

#[cfg(test)]
impl HttpClient {
    /// Pooled connections to `authority` not yet seen closed.
    fn idle_open(&self, authority: &str) -> usize {
        let idle = self.inner.idle.lock().unwrap_or_else(|e| e.into_inner());
        idle.get(authority)
            .map_or(0, |l| l.iter().filter(|c| !c.conn.is_closed()).count())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    use tokio::net::TcpListener;

    use super::*;

    /// What the test server does with the n-th request (0-based, counted
    /// over all connections).
    #[derive(Clone, Copy)]
    enum Act {
        /// 200 with a small body, connection kept.
        Answer,
        /// 200, then the server closes the connection.
        AnswerThenClose,
        /// Reads the request and closes without answering.
        Vanish,
        /// 200 with a body larger than [`MAX_REPLY_BYTES`].
        Huge,
    }

    struct Server {
        base: String,
        authority: String,
        connections: Arc<AtomicUsize>,
        requests: Arc<AtomicUsize>,
    }

    /// A minimal HTTP/1.1 server on loopback that follows `script` (then
    /// answers everything) and counts connections and requests.
    async fn server(script: Vec<Act>) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let authority = listener.local_addr().unwrap().to_string();
        let connections = Arc::new(AtomicUsize::new(0));
        let requests = Arc::new(AtomicUsize::new(0));
        let (c, r) = (connections.clone(), requests.clone());
        let script = Arc::new(script);
        tokio::spawn(async move {
            loop {
                let (mut sock, _) = listener.accept().await.unwrap();
                c.fetch_add(1, Ordering::SeqCst);
                let (r, script) = (r.clone(), script.clone());
                tokio::spawn(async move {
                    let mut buf = Vec::new();
                    loop {
                        // One request: the head, then Content-Length bytes.
                        let head_end = loop {
                            if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                                break i + 4;
                            }
                            let mut chunk = [0u8; 4096];
                            match sock.read(&mut chunk).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                            }
                        };
                        let head = String::from_utf8_lossy(&buf[..head_end]).to_lowercase();
                        let len: usize = head
                            .lines()
                            .find_map(|l| l.strip_prefix("content-length:"))
                            .map_or(0, |v| v.trim().parse().unwrap());
                        while buf.len() < head_end + len {
                            let mut chunk = [0u8; 4096];
                            match sock.read(&mut chunk).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                            }
                        }
                        buf.drain(..head_end + len);
                        let n = r.fetch_add(1, Ordering::SeqCst);
                        let act = script.get(n).copied().unwrap_or(Act::Answer);
                        let body = match act {
                            Act::Vanish => return,
                            Act::Huge => vec![b'x'; MAX_REPLY_BYTES + 1],
                            _ => b"{}".to_vec(),
                        };
                        let reply =
                            format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n", body.len());
                        if sock.write_all(reply.as_bytes()).await.is_err()
                            || sock.write_all(&body).await.is_err()
                        {
                            return;
                        }
                        if let Act::AnswerThenClose = act {
                            return;
                        }
                    }
                });
            }
        });
        Server {
            base: format!("http://{authority}"),
            authority,
            connections,
            requests,
        }
    }

    fn client() -> HttpClient {
        HttpClient::new(Duration::from_secs(5))
    }

    /// A GET that must get an answer; its status.
    async fn get_status(c: &HttpClient, url: &str) -> u16 {
        c.send(HttpMethod::Get, url, None).await.unwrap().status
    }

    #[tokio::test]
    async fn sequential_exchanges_share_one_connection() {
        let s = server(vec![]).await;
        let c = client();
        for i in 0..5 {
            let r = c
                .send(
                    HttpMethod::Post,
                    &format!("{}/v1/x/{i}", s.base),
                    Some(Bytes::from_static(b"{}")),
                )
                .await
                .unwrap();
            assert_eq!((r.status, &r.body[..]), (200, &b"{}"[..]));
        }
        assert_eq!(s.requests.load(Ordering::SeqCst), 5);
        assert_eq!(s.connections.load(Ordering::SeqCst), 1);
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn concurrent_exchanges_open_at_most_one_connection_each_and_keep_them() {
        let s = server(vec![]).await;
        let c = client();
        let url = format!("{}/v1/x", s.base);
        for _round in 0..4 {
            let all = (0..8).map(|_| {
                let (c, url) = (c.clone(), url.clone());
                tokio::spawn(async move { c.send(HttpMethod::Get, &url, None).await })
            });
            for r in join_all(all).await {
                assert_eq!(r.unwrap().status, 200);
            }
        }
        assert_eq!(s.requests.load(Ordering::SeqCst), 32);
        let opened = s.connections.load(Ordering::SeqCst);
        assert!(
            (1..=8).contains(&opened),
            "{opened} connections for 8 at a time"
        );
    }

    async fn join_all<T>(handles: impl Iterator<Item = tokio::task::JoinHandle<T>>) -> Vec<T> {
        let mut out = Vec::new();
        for h in handles.collect::<Vec<_>>() {
            out.push(h.await.unwrap());
        }
        out
    }

    #[tokio::test]
    async fn a_connection_idle_past_the_idle_timeout_is_not_reused() {
        let s = server(vec![]).await;
        let c = HttpClient::with_idle_timeout(Duration::from_secs(5), Duration::ZERO);
        let url = format!("{}/a", s.base);
        for _ in 0..3 {
            assert_eq!(get_status(&c, &url).await, 200);
        }
        assert_eq!(s.connections.load(Ordering::SeqCst), 3);
        assert_eq!(s.requests.load(Ordering::SeqCst), 3);
    }

    #[tokio::test]
    async fn a_connection_the_server_closed_is_replaced_not_failed() {
        let s = server(vec![Act::AnswerThenClose]).await;
        let c = client();
        let url = format!("{}/a", s.base);
        assert_eq!(get_status(&c, &url).await, 200);
        // Wait (with a deadline) until the client has seen the close.
        tokio::time::timeout(Duration::from_secs(10), async {
            while c.idle_open(&s.authority) > 0 {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        })
        .await
        .expect("the client never saw the server close the connection");
        assert_eq!(get_status(&c, &url).await, 200);
        assert_eq!(s.connections.load(Ordering::SeqCst), 2);
        assert_eq!(s.requests.load(Ordering::SeqCst), 2);
    }

    #[tokio::test]
    async fn a_request_that_may_have_arrived_is_never_sent_again() {
        // The second request goes out on the reused connection and gets no
        // answer: an error, and the server saw it exactly once.
        let s = server(vec![Act::Answer, Act::Vanish]).await;
        let c = client();
        let url = format!("{}/v1/locks/k/acquire", s.base);
        let body = || Some(Bytes::from_static(b"{}"));
        c.send(HttpMethod::Post, &url, body()).await.unwrap();
        let e = c.send(HttpMethod::Post, &url, body()).await.unwrap_err();
        assert!(!e.is_connect(), "{e}");
        assert_eq!(s.requests.load(Ordering::SeqCst), 2);
        assert_eq!(s.connections.load(Ordering::SeqCst), 1);
    }

    #[tokio::test]
    async fn a_refused_connection_is_a_connect_error() {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = l.local_addr().unwrap();
        drop(l);
        let e = client()
            .send(HttpMethod::Get, &format!("http://{addr}/"), None)
            .await
            .unwrap_err();
        assert!(e.is_connect() && !e.is_timeout(), "{e}");
        assert!(e.to_string().contains(&addr.to_string()), "{e}");
    }

    #[tokio::test]
    async fn an_oversized_reply_is_refused() {
        let s = server(vec![Act::Huge]).await;
        let e = client()
            .send(HttpMethod::Get, &format!("{}/", s.base), None)
            .await
            .unwrap_err();
        assert!(e.to_string().contains("exceeds"), "{e}");
    }

    #[tokio::test]
    async fn a_bad_url_names_itself() {
        let e = client()
            .send(HttpMethod::Get, "https://127.0.0.1:1/", None)
            .await
            .unwrap_err();
        assert!(e.to_string().contains("https://127.0.0.1:1/"), "{e}");
    }

    #[test]
    fn split_url_takes_http_urls_and_nothing_else() {
        assert_eq!(
            split_url("http://127.0.0.1:7070/v1/sessions"),
            Some(("127.0.0.1:7070", "/v1/sessions"))
        );
        assert_eq!(split_url("http://lock:7070"), Some(("lock:7070", "/")));
        assert_eq!(split_url("http://[::1]:7070/x"), Some(("[::1]:7070", "/x")));
        assert_eq!(split_url("http://h/p?q=1"), Some(("h", "/p?q=1")));
        for bad in [
            "https://h:1/",
            "ftp://h/",
            "h:7070",
            "http://",
            "http:///x",
            "http://u@h/",
            "http://h?x",
        ] {
            assert_eq!(split_url(bad), None, "{bad}");
        }
    }

    #[test]
    fn has_port_reads_v4_v6_and_names() {
        assert!(has_port("127.0.0.1:7070"));
        assert!(has_port("[::1]:7070"));
        assert!(has_port("lock:1"));
        assert!(!has_port("lock"));
        assert!(!has_port("[::1]"));
    }
}
