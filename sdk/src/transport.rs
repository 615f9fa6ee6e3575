//! The thin HTTP layer over C1 (L1–L7): builds each request, reads `send`
//! from the clock immediately before handing it to the connection (D2), and
//! maps status and `code` to [`LockError`]. It never touches a deadline; the
//! session does that with the `send` it returns.
//!
//! **Replicas (C1 §6).** With several base URLs, an exchange answered
//! `503 NOT_LEADER` (nothing changed on the server) or refused at connect is
//! sent again at once to the `leader` the reply named, else to the next URL,
//! within the same timeout: every hop gets only what is left of it, and the
//! `send` returned is the *first* attempt's, so the time spent finding the
//! leader counts against the lease and failover never extends a deadline.
//! The replica that served last is remembered for the next exchange.
//! A `leader` named `https://…` (a replica started with an https
//! `--advertise`) is followed over TLS with the client's one TLS
//! configuration; a TLS handshake that fails counts as a connection that
//! could not be opened (the server saw no request).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use fencepost_api::lock::{
    AcquireRequest, CreateSessionRequest, ErrorBody, HeartbeatReply, LeaseGranted, LockErrorCode,
    LockInfo, ReleaseRequest, RenewRequest, SessionGranted, encode_key,
};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::clock::{Clock, MonoTime};
use crate::error::{LockError, LockLost, LostReason, ReplyProblem};
use crate::http::{HttpClient, HttpMethod};
use crate::metrics::Outcome;

/// The result of one exchange, with the clock reading taken just before the
/// request was written.
pub(crate) struct Reply<T> {
    /// `clock.now()` immediately before the request went to the connection.
    pub send: MonoTime,
    /// `clock.now()` once the reply was read, or the exchange given up.
    pub received: MonoTime,
    /// The decoded reply or the failure.
    pub result: Result<T, LockError>,
}

impl<T> Reply<T> {
    /// The exchange's outcome: the server answered (any status: a round-trip
    /// time), the timeout fired (a censored one), or the transport failed
    /// before any answer (none).
    pub(crate) fn outcome(&self) -> Outcome {
        match self.result {
            Err(LockError::Timeout { .. }) => Outcome::Timeout,
            Err(LockError::Transport(_)) => Outcome::Error,
            _ => Outcome::Reply,
        }
    }

    /// `received − send`: the RTT of a reply, or the time given up on a timeout.
    pub(crate) fn elapsed(&self) -> Duration {
        self.received.saturating_duration_since(self.send)
    }
}

/// The grant a LOCK_LOST reply refers to (renew, release).
pub(crate) struct GrantRef<'a> {
    pub key: &'a Arc<str>,
    pub token: u64,
}

/// One request, serialised once and sent to whichever replica is current.
struct Call {
    method: HttpMethod,
    /// The path under the base URL (`/v1/...`).
    path: String,
    /// The JSON body, if any.
    body: Option<Bytes>,
    /// Why the body could not be serialised (then nothing is sent).
    unencodable: Option<String>,
}

impl Call {
    fn new(method: HttpMethod, path: String) -> Self {
        Call {
            method,
            path,
            body: None,
            unencodable: None,
        }
    }

    fn json(mut self, body: &impl Serialize) -> Self {
        match serde_json::to_vec(body) {
            Ok(b) => self.body = Some(Bytes::from(b)),
            Err(e) => self.unencodable = Some(e.to_string()),
        }
        self
    }
}

/// The lock-server replicas, reached through one pooled HTTP client.
pub(crate) struct Http {
    /// Connection pool shared by every session of the client.
    client: HttpClient,
    /// The configured base URLs, without trailing slashes (at least one).
    bases: Vec<String>,
    /// Where the next exchange goes: the replica that served last, or the
    /// leader a NOT_LEADER named.
    current: Mutex<String>,
}

impl Http {
    /// A client for `base_urls` (the first is tried first) whose connections
    /// (TCP and, for `https://`, the TLS handshake with `tls`) time out
    /// after `connect_timeout`, sending `token` (if any) with every request.
    pub(crate) fn new(
        base_urls: &[String],
        connect_timeout: Duration,
        tls: Option<Arc<rustls::ClientConfig>>,
        token: Option<&crate::config::ApiToken>,
    ) -> Self {
        let client =
            HttpClient::with_options(connect_timeout, crate::http::DEFAULT_IDLE_TIMEOUT, tls)
                .with_authorization(token.map(|t| t.header_value().clone()));
        let bases: Vec<String> = base_urls
            .iter()
            .map(|b| b.trim_end_matches('/').to_string())
            .collect();
        let current = Mutex::new(bases.first().cloned().unwrap_or_default());
        Http {
            client,
            bases,
            current,
        }
    }

    /// The base URL the next exchange goes to.
    pub(crate) fn current(&self) -> String {
        self.current
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// After `from` refused (NOT_LEADER) or could not be reached: go to
    /// `leader` if named, else to the next configured URL. Another exchange
    /// may have moved on already; then its choice stands.
    fn follow(&self, from: &str, leader: Option<&str>) {
        let mut cur = self.current.lock().unwrap_or_else(|e| e.into_inner());
        if *cur != from {
            return;
        }
        *cur = match leader {
            Some(l) if l.trim_end_matches('/') != from => l.trim_end_matches('/').to_string(),
            _ => {
                let next = self
                    .bases
                    .iter()
                    .position(|b| b == from)
                    .map_or(0, |i| (i + 1) % self.bases.len());
                self.bases[next].clone()
            }
        };
    }

    /// L1 `POST /v1/sessions`.
    pub(crate) async fn create_session(
        &self,
        clock: &dyn Clock,
        owner_id: &str,
        ttl_ms: u64,
        timeout: Duration,
    ) -> Reply<SessionGranted> {
        let body = CreateSessionRequest {
            owner_id: owner_id.to_string(),
            ttl_ms: Some(ttl_ms),
        };
        let call = Call::new(HttpMethod::Post, "/v1/sessions".into()).json(&body);
        self.json(clock, &call, timeout, None).await
    }

    /// L2 `POST /v1/sessions/{id}/heartbeat`.
    pub(crate) async fn heartbeat(
        &self,
        clock: &dyn Clock,
        session_id: &str,
        timeout: Duration,
    ) -> Reply<HeartbeatReply> {
        let id = encode_key(session_id);
        // No body: C1 allows an empty one, and the server then neither
        // collects nor parses it (the heartbeat is the hot path).
        let call = Call::new(HttpMethod::Post, format!("/v1/sessions/{id}/heartbeat"));
        self.json(clock, &call, timeout, None).await
    }

    /// L3 `DELETE /v1/sessions/{id}`.
    pub(crate) async fn delete_session(
        &self,
        clock: &dyn Clock,
        session_id: &str,
        timeout: Duration,
    ) -> Reply<()> {
        let id = encode_key(session_id);
        let call = Call::new(HttpMethod::Delete, format!("/v1/sessions/{id}"));
        self.empty(clock, &call, timeout, None).await
    }

    /// L4 `POST /v1/locks/{key}/acquire`.
    pub(crate) async fn acquire(
        &self,
        clock: &dyn Clock,
        key: &str,
        session_id: &str,
        ttl_ms: u64,
        timeout: Duration,
    ) -> Reply<LeaseGranted> {
        let body = AcquireRequest {
            session_id: session_id.to_string(),
            ttl_ms: Some(ttl_ms),
        };
        let key = encode_key(key);
        let call = Call::new(HttpMethod::Post, format!("/v1/locks/{key}/acquire")).json(&body);
        self.json(clock, &call, timeout, None).await
    }

    /// L5 `POST /v1/locks/{key}/renew`.
    pub(crate) async fn renew(
        &self,
        clock: &dyn Clock,
        grant: GrantRef<'_>,
        session_id: &str,
        ttl_ms: u64,
        timeout: Duration,
    ) -> Reply<LeaseGranted> {
        let body = RenewRequest {
            session_id: session_id.to_string(),
            token: grant.token,
            ttl_ms: Some(ttl_ms),
        };
        let key = encode_key(grant.key);
        let call = Call::new(HttpMethod::Post, format!("/v1/locks/{key}/renew")).json(&body);
        self.json(clock, &call, timeout, Some(grant)).await
    }

    /// L6 `POST /v1/locks/{key}/release`.
    pub(crate) async fn release(
        &self,
        clock: &dyn Clock,
        grant: GrantRef<'_>,
        session_id: &str,
        timeout: Duration,
    ) -> Reply<()> {
        let body = ReleaseRequest {
            session_id: session_id.to_string(),
            token: grant.token,
        };
        let key = encode_key(grant.key);
        let call = Call::new(HttpMethod::Post, format!("/v1/locks/{key}/release")).json(&body);
        self.empty(clock, &call, timeout, Some(grant)).await
    }

    /// L7 `GET /v1/locks/{key}`.
    pub(crate) async fn info(
        &self,
        clock: &dyn Clock,
        key: &str,
        timeout: Duration,
    ) -> Reply<LockInfo> {
        let key = encode_key(key);
        let call = Call::new(HttpMethod::Get, format!("/v1/locks/{key}"));
        self.json(clock, &call, timeout, None).await
    }

    /// An exchange whose success carries a JSON body.
    async fn json<T: DeserializeOwned>(
        &self,
        clock: &dyn Clock,
        call: &Call,
        timeout: Duration,
        grant: Option<GrantRef<'_>>,
    ) -> Reply<T> {
        let (send, received, raw) = self.raw(clock, call, timeout).await;
        let result = raw.and_then(|(status, bytes)| {
            if (200..300).contains(&status) {
                serde_json::from_slice(&bytes).map_err(|e| LockError::UnexpectedReply {
                    status,
                    problem: ReplyProblem::SuccessBody(e),
                })
            } else {
                Err(error_from_reply(status, &bytes, grant))
            }
        });
        Reply {
            send,
            received,
            result,
        }
    }

    /// An exchange whose success has no body (204).
    async fn empty(
        &self,
        clock: &dyn Clock,
        call: &Call,
        timeout: Duration,
        grant: Option<GrantRef<'_>>,
    ) -> Reply<()> {
        let (send, received, raw) = self.raw(clock, call, timeout).await;
        let result = raw.and_then(|(status, bytes)| {
            if (200..300).contains(&status) {
                Ok(())
            } else {
                Err(error_from_reply(status, &bytes, grant))
            }
        });
        Reply {
            send,
            received,
            result,
        }
    }

    /// Builds the request, reads `send`, performs the exchange and reads the
    /// whole body (the timeout covers all of it). A NOT_LEADER reply or a
    /// refused connection is sent again to the leader it named or the next
    /// replica, at most once per replica plus one, each hop with what is left
    /// of `timeout` after the first attempt's `send`, which is the one returned.
    async fn raw(
        &self,
        clock: &dyn Clock,
        call: &Call,
        timeout: Duration,
    ) -> (MonoTime, MonoTime, Result<(u16, Bytes), LockError>) {
        if let Some(message) = &call.unencodable {
            let now = clock.now();
            let refused = LockError::BadRequest {
                message: format!("the request body cannot be encoded: {message}"),
                input: None,
            };
            return (now, now, Err(refused));
        }
        let hops = self.bases.len() + 1;
        let mut first: Option<MonoTime> = None;
        let mut hop = 0;
        loop {
            hop += 1;
            let base = self.current();
            let left = match first {
                None => timeout,
                Some(s) => timeout.saturating_sub(clock.now().saturating_duration_since(s)),
            };
            if left.is_zero() {
                let now = clock.now();
                let send = first.unwrap_or(now);
                return (send, now, Err(LockError::Timeout { after: timeout }));
            }
            // The request was serialised before the first hop, so `send` is
            // read as close as possible to the write.
            let url = format!("{base}{}", call.path);
            let send = clock.now();
            let send = *first.get_or_insert(send);
            let exchange = self.client.send(call.method, &url, call.body.clone());
            let result = match tokio::time::timeout(left, exchange).await {
                Ok(r) => r.map(|reply| (reply.status, reply.body)),
                Err(_) => {
                    return (
                        send,
                        clock.now(),
                        Err(LockError::Timeout { after: timeout }),
                    );
                }
            };
            let last = hop >= hops;
            match &result {
                Ok((503, bytes)) if !last => {
                    if let Ok(body) = serde_json::from_slice::<ErrorBody>(bytes)
                        && body.code == LockErrorCode::NotLeader.as_str()
                    {
                        self.follow(&base, body.leader.as_deref());
                        continue;
                    }
                }
                Err(e) if !last && e.is_connect() => {
                    self.follow(&base, None);
                    continue;
                }
                _ => {}
            }
            let result = result.map_err(|e| {
                if e.is_timeout() {
                    LockError::Timeout { after: timeout }
                } else {
                    LockError::Transport(e)
                }
            });
            return (send, clock.now(), result);
        }
    }
}

/// Maps a non-2xx reply to its [`LockError`].
fn error_from_reply(status: u16, bytes: &[u8], grant: Option<GrantRef<'_>>) -> LockError {
    let body: ErrorBody = match serde_json::from_slice(bytes) {
        Ok(b) => b,
        Err(_) => {
            let excerpt = String::from_utf8_lossy(bytes).chars().take(200).collect();
            return LockError::UnexpectedReply {
                status,
                problem: ReplyProblem::ErrorBodyNotJson { excerpt },
            };
        }
    };
    match LockErrorCode::parse(&body.code) {
        Some(LockErrorCode::BadRequest) => LockError::BadRequest {
            message: body.message,
            input: None,
        },
        Some(LockErrorCode::SessionUnknown) => LockError::SessionUnknown,
        Some(LockErrorCode::SessionExpired) => LockError::SessionExpired,
        Some(LockErrorCode::LockHeld) => LockError::LockHeld {
            key: String::new(),
            retry_after_ms: body.retry_after_ms,
            attempts: 1,
        },
        Some(LockErrorCode::LockLost) => match grant {
            Some(g) => LockError::LockLost(LockLost {
                key: g.key.clone(),
                token: g.token,
                reason: LostReason::LeaseLost,
            }),
            None => LockError::UnexpectedReply {
                status,
                problem: ReplyProblem::LockLostWithoutGrant,
            },
        },
        Some(LockErrorCode::LockUnknown) => LockError::LockUnknown,
        Some(LockErrorCode::NotLeader) => LockError::NotLeader {
            leader: body.leader,
        },
        Some(LockErrorCode::Unavailable) => LockError::Unavailable {
            message: body.message,
        },
        Some(LockErrorCode::PayloadTooLarge) => LockError::PayloadTooLarge,
        Some(LockErrorCode::Unauthenticated) => LockError::Unauthenticated {
            message: body.message,
        },
        Some(LockErrorCode::Forbidden) => LockError::Forbidden {
            message: body.message,
        },
        None if status == 503 => LockError::Unavailable {
            message: body.message,
        },
        None => LockError::UnexpectedReply {
            status,
            problem: ReplyProblem::UnknownCode {
                code: body.code,
                message: body.message,
            },
        },
    }
}

/// A duration as whole milliseconds for the wire, at least 1.
pub(crate) fn duration_ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX).max(1)
}
