//! The SDK's HTTP/1.1 client: `http://` and `https://` (rustls), keep-alive
//! connections pooled per scheme and `host:port`, `TCP_NODELAY`, a bounded
//! connect (TCP and TLS handshake together) and a bounded reply.
//!
//! It is written on hyper's connection API rather than on a general client
//! because the heartbeat path is the product: every exchange here is a small
//! JSON request to one lock-server, and a general client's layers (redirect
//! policy, proxy lookup, URL re-parsing of each response) cost more CPU per
//! heartbeat than the lock-server spends answering it (docs/performance.md,
//! `bench peer`). Nothing here follows a redirect or reads a proxy variable.
//!
//! **TLS.** A client built with a rustls `ClientConfig`
//! ([`HttpClient::with_options`]; the SDK builds one per
//! [`LockClient`](crate::LockClient) from `LockClientConfig::tls`) wraps each
//! new `https://` connection in `tokio-rustls`, with the URL's host as the
//! server name (an IP literal is checked against the certificate's IP
//! addresses). The handshake happens once per connection, inside the connect
//! timeout; pooled connections reuse it, so a heartbeat on a warm connection
//! pays only the record layer. A handshake that fails (unknown CA, expired
//! certificate, wrong name) is an [`HttpError`] that says TLS and why; the
//! server saw no request. A client without a TLS configuration refuses
//! `https://` URLs.
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
//! With an API token ([`HttpClient::with_authorization`]) every
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
use rustls_pki_types::ServerName;
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tokio_rustls::TlsConnector;

use crate::clock::{Clock, MonoTime, MonotonicClock};

/// The largest reply body read (a C1 reply is a few hundred bytes).
pub const MAX_REPLY_BYTES: usize = 1 << 20;

/// Idle connections kept per scheme and `host:port`; more are closed when they come back.
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

/// The two schemes the client speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scheme {
    /// `http://`: plain HTTP/1.1 (default port 80).
    Http,
    /// `https://`: HTTP/1.1 over TLS (default port 443).
    Https,
}

impl Scheme {
    /// `http` or `https`.
    pub fn as_str(self) -> &'static str {
        match self {
            Scheme::Http => "http",
            Scheme::Https => "https",
        }
    }

    fn default_port(self) -> u16 {
        match self {
            Scheme::Http => 80,
            Scheme::Https => 443,
        }
    }
}

/// What went wrong in an exchange.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// The URL is not `http(s)://host[:port][/path]`.
    Url,
    /// The TCP connection could not be opened (refused, unreachable, DNS).
    Connect,
    /// The TCP connection and TLS handshake did not complete within the
    /// connect timeout.
    ConnectTimeout,
    /// The TLS handshake failed (or the URL is `https://` and the client has
    /// no TLS configuration): no request was written.
    Tls,
    /// The TLS layer failed after the handshake, while the request was
    /// written or the reply read (a server refusing the client certificate
    /// under TLS 1.3 says so here, at the first read).
    TlsExchange,
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
    /// not within the connect timeout, or its TLS handshake failed): the
    /// server saw no request.
    pub fn is_connect(&self) -> bool {
        matches!(self.kind, Kind::Connect | Kind::ConnectTimeout | Kind::Tls)
    }

    /// TLS failed: the handshake (unknown CA, expired or misnamed
    /// certificate, no TLS configured), or the TLS layer later in the
    /// exchange (a refused client certificate).
    pub fn is_tls(&self) -> bool {
        matches!(self.kind, Kind::Tls | Kind::TlsExchange)
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
            Kind::Url => write!(f, "{t:?} is not an http:// or https://host:port URL"),
            Kind::Connect => write!(f, "cannot connect to {t}"),
            Kind::ConnectTimeout => write!(f, "no connection to {t} within the connect timeout"),
            Kind::Tls => write!(f, "TLS handshake with {t} failed"),
            Kind::TlsExchange => write!(f, "TLS failed during the exchange with {t}"),
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

/// Splits `http://authority/path` or `https://authority/path` into the
/// scheme, the authority (`host:port`) and the origin-form path (`/` when
/// there is none). `None` for anything else.
pub fn split_url(url: &str) -> Option<(Scheme, &str, &str)> {
    let (scheme, rest) = match url.strip_prefix("https://") {
        Some(rest) => (Scheme::Https, rest),
        None => (Scheme::Http, url.strip_prefix("http://")?),
    };
    let (authority, path) = match rest.find(['/', '?']) {
        Some(i) if rest[i..].starts_with('?') => return None,
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    if authority.is_empty() || authority.contains(['@', ' ']) {
        return None;
    }
    Some((scheme, authority, path))
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
    /// Handshakes `https://` connections; `None`: https is refused.
    tls: Option<TlsConnector>,
    /// Reads when a connection went idle (connection hygiene, no lease).
    clock: MonotonicClock,
    /// Idle connections by origin (`scheme://host:port`), oldest first; the
    /// most recently used is taken first.
    idle: Mutex<HashMap<String, Vec<Idle>>>,
}

/// How long a failed exchange on a TLS connection waits for the
/// connection's task to report the TLS alert that ended it.
const TLS_CAUSE_WAIT: Duration = Duration::from_millis(100);

/// One HTTP/1.1 connection: its request half, and for TLS what its
/// connection task reports if it ends on a TLS error (under TLS 1.3 a
/// refused client certificate is an alert read after the handshake, and
/// hyper hands the request back only as "canceled").
struct Conn {
    send: SendRequest<Full<Bytes>>,
    tls_end: Option<oneshot::Receiver<String>>,
}

impl Conn {
    /// The TLS error that ended this connection, if it ended on one.
    async fn tls_end(&mut self) -> Option<String> {
        let rx = self.tls_end.as_mut()?;
        tokio::time::timeout(TLS_CAUSE_WAIT, rx).await.ok()?.ok()
    }
}

/// A pooled connection and when it was put back.
struct Idle {
    conn: Conn,
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
            .field("tls", &self.inner.tls.is_some())
            .finish_non_exhaustive()
    }
}

impl HttpClient {
    /// A plain-HTTP client whose new connections must open within
    /// `connect_timeout`, and which closes connections idle for
    /// [`DEFAULT_IDLE_TIMEOUT`]. It refuses `https://` URLs.
    pub fn new(connect_timeout: Duration) -> Self {
        Self::with_idle_timeout(connect_timeout, DEFAULT_IDLE_TIMEOUT)
    }

    /// As [`HttpClient::new`], closing connections idle for `idle_timeout`
    /// (zero: every exchange opens a new connection).
    pub fn with_idle_timeout(connect_timeout: Duration, idle_timeout: Duration) -> Self {
        Self::with_options(connect_timeout, idle_timeout, None)
    }

    /// As [`HttpClient::with_idle_timeout`], speaking `https://` with `tls`
    /// as well (built once, shared by every connection; its crypto provider
    /// is the caller's choice: the SDK's is `ring`). `None`: plain HTTP only.
    pub fn with_options(
        connect_timeout: Duration,
        idle_timeout: Duration,
        tls: Option<Arc<rustls::ClientConfig>>,
    ) -> Self {
        HttpClient {
            inner: Arc::new(Pool {
                connect_timeout,
                idle_timeout,
                tls: tls.map(TlsConnector::from),
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
        let (scheme, authority, path) =
            split_url(url).ok_or_else(|| HttpError::new(Kind::Url, url, None))?;
        // `scheme://authority`: the pool's key.
        let origin = &url[..scheme.as_str().len() + 3 + authority.len()];
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
            let (mut conn, reused) = match self.take_idle(origin).await {
                Some(c) => (c, true),
                None => (self.connect(scheme, authority).await?, false),
            };
            match conn.send.try_send_request(request).await {
                Ok(reply) => {
                    let status = reply.status().as_u16();
                    let body = match Limited::new(reply.into_body(), MAX_REPLY_BYTES)
                        .collect()
                        .await
                    {
                        Ok(b) => b.to_bytes(),
                        Err(e) if e.is::<http_body_util::LengthLimitError>() => {
                            return Err(HttpError::new(Kind::TooLarge, url, Some(e)));
                        }
                        Err(e) => return Err(exchange_failed(&mut conn, url, e).await),
                    };
                    self.put_idle(origin, conn);
                    return Ok(HttpReply { status, body });
                }
                Err(mut e) => match e.take_message() {
                    // Never written: the pooled connection had closed. Again
                    // on the next pooled connection or a new one; a new
                    // connection's failure ends the exchange.
                    Some(unsent) if reused => request = unsent,
                    _ => {
                        let e = Box::new(e.into_error());
                        return Err(exchange_failed(&mut conn, url, e).await);
                    }
                },
            }
        }
    }

    /// An idle connection to `origin` that is still open, not idle too
    /// long, and ready.
    async fn take_idle(&self, origin: &str) -> Option<Conn> {
        loop {
            let mut conn = {
                let now = self.inner.clock.now();
                let mut idle = self.inner.idle.lock().unwrap_or_else(|e| e.into_inner());
                let list = idle.get_mut(origin)?;
                loop {
                    let c = list.pop()?;
                    if now.saturating_duration_since(c.since) >= self.inner.idle_timeout {
                        // Every one below went idle earlier still.
                        list.clear();
                        return None;
                    }
                    if !c.conn.send.is_closed() {
                        break c.conn;
                    }
                }
            };
            // Ready at once unless the previous reply's end is still being
            // processed by the connection task; an error means it closed.
            if conn.send.ready().await.is_ok() {
                return Some(conn);
            }
        }
    }

    fn put_idle(&self, origin: &str, conn: Conn) {
        if conn.send.is_closed() {
            return;
        }
        let since = self.inner.clock.now();
        let mut idle = self.inner.idle.lock().unwrap_or_else(|e| e.into_inner());
        let list = idle.entry(origin.to_string()).or_default();
        if list.len() < MAX_IDLE_PER_HOST {
            list.push(Idle { conn, since });
        }
    }

    /// Opens a connection to `authority` (port 80 or 443 if none is given),
    /// TLS-handshaken for `https`; all of it within the connect timeout.
    async fn connect(&self, scheme: Scheme, authority: &str) -> Result<Conn, HttpError> {
        let addr = if has_port(authority) {
            authority.to_string()
        } else {
            format!("{authority}:{}", scheme.default_port())
        };
        let tls = match scheme {
            Scheme::Http => None,
            Scheme::Https => {
                let Some(connector) = self.inner.tls.clone() else {
                    return Err(HttpError::new(
                        Kind::Tls,
                        &addr,
                        Some("this client has no TLS configuration".into()),
                    ));
                };
                let name = server_name(authority)
                    .ok_or_else(|| HttpError::new(Kind::Url, authority, None))?;
                Some((connector, name))
            }
        };
        let opened = async {
            let stream = TcpStream::connect(&addr)
                .await
                .map_err(|e| HttpError::new(Kind::Connect, &addr, Some(Box::new(e))))?;
            stream
                .set_nodelay(true)
                .map_err(|e| HttpError::new(Kind::Connect, &addr, Some(Box::new(e))))?;
            match tls {
                None => handshake(TokioIo::new(stream), &addr, None).await,
                Some((connector, name)) => {
                    let stream = connector
                        .connect(name, stream)
                        .await
                        .map_err(|e| HttpError::new(Kind::Tls, &addr, Some(describe_tls(e))))?;
                    let (tx, rx) = oneshot::channel();
                    let mut conn = handshake(TokioIo::new(stream), &addr, Some(tx)).await?;
                    conn.tls_end = Some(rx);
                    Ok(conn)
                }
            }
        };
        tokio::time::timeout(self.inner.connect_timeout, opened)
            .await
            .map_err(|_| HttpError::new(Kind::ConnectTimeout, &addr, None))?
    }
}

/// HTTP/1.1 over an open `io`; the connection runs on its own task, which
/// sends the TLS error it ends on (if any) to `tls_end`.
async fn handshake<T>(
    io: TokioIo<T>,
    addr: &str,
    tls_end: Option<oneshot::Sender<String>>,
) -> Result<Conn, HttpError>
where
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin + Send + 'static,
{
    let (send, connection) = http1::handshake(io)
        .await
        .map_err(|e| HttpError::new(Kind::Connect, addr, Some(Box::new(e))))?;
    // The connection task ends when the server closes or the last
    // sender is dropped; its error is the exchange's to report.
    tokio::spawn(async move {
        if let Err(e) = connection.await
            && let (Some(tx), Some(t)) = (tls_end, tls_cause(&e))
        {
            let _ = tx.send(plain_tls(t));
        }
    });
    Ok(Conn {
        send,
        tls_end: None,
    })
}

/// The error of an exchange that failed on `conn`: a TLS one if the TLS
/// layer says why (in `e`'s chain, or reported by the connection's task).
async fn exchange_failed(
    conn: &mut Conn,
    url: &str,
    e: Box<dyn std::error::Error + Send + Sync>,
) -> HttpError {
    if let Some(t) = tls_cause(&*e) {
        return HttpError::new(Kind::TlsExchange, url, Some(plain_tls(t).into()));
    }
    match conn.tls_end().await {
        Some(why) => HttpError::new(Kind::TlsExchange, url, Some(why.into())),
        None => HttpError::new(Kind::Exchange, url, Some(e)),
    }
}

/// The TLS server name of `authority`: its host without the port, an IP
/// literal (`[v6]` unbracketed) as an IP address.
fn server_name(authority: &str) -> Option<ServerName<'static>> {
    let host = if let Some(rest) = authority.strip_prefix('[') {
        &rest[..rest.find(']')?]
    } else if has_port(authority) {
        &authority[..authority.rfind(':')?]
    } else {
        authority
    };
    ServerName::try_from(host.to_string()).ok()
}

/// The rustls error somewhere in `e`'s source chain, if any.
fn tls_cause<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a rustls::Error> {
    let mut cur = Some(e);
    while let Some(err) = cur {
        if let Some(t) = err.downcast_ref::<rustls::Error>() {
            return Some(t);
        }
        if let Some(io) = err.downcast_ref::<std::io::Error>()
            && let Some(t) = io.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>())
        {
            return Some(t);
        }
        cur = err.source();
    }
    None
}

/// A handshake failure in words ([`plain_tls`]), or the I/O error itself.
fn describe_tls(e: std::io::Error) -> Box<dyn std::error::Error + Send + Sync> {
    match tls_cause(&e) {
        Some(t) => plain_tls(t).into(),
        None => Box::new(e),
    }
}

/// A TLS error in words: the certificate problems a user meets (unknown CA,
/// expired, wrong name) and a server's refusal named plainly, with rustls's
/// own text.
fn plain_tls(t: &rustls::Error) -> String {
    use rustls::CertificateError as C;
    let plain = match t {
        rustls::Error::InvalidCertificate(c) => match c {
            C::UnknownIssuer => "the server's certificate is not signed by a trusted CA",
            C::Expired | C::ExpiredContext { .. } => "the server's certificate has expired",
            C::NotValidYet | C::NotValidYetContext { .. } => {
                "the server's certificate is not valid yet"
            }
            C::NotValidForName | C::NotValidForNameContext { .. } => {
                "the server's certificate is not valid for this host name"
            }
            _ => "the server's certificate was refused",
        },
        rustls::Error::AlertReceived(_) => {
            "the server refused the TLS session (a client certificate it does not accept, or none)"
        }
        _ => "",
    };
    if plain.is_empty() {
        t.to_string()
    } else {
        format!("{plain} ({t})")
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
    /// Pooled connections to `origin` (`scheme://host:port`) not yet seen closed.
    fn idle_open(&self, origin: &str) -> usize {
        let idle = self.inner.idle.lock().unwrap_or_else(|e| e.into_inner());
        idle.get(origin)
            .map_or(0, |l| l.iter().filter(|c| !c.conn.send.is_closed()).count())
    }
}

#[cfg(test)]
mod tests;
