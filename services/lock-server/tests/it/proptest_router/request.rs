//! From a symbolic call to bytes on the wire: the [`Planned`] request (its
//! method, URI and body, and what is known about it in advance), the body
//! builders (shapes, padding to the limit), and sending it through the
//! router.

use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use fencepost_api::lock::MAX_BODY_BYTES;
use http_body_util::BodyExt;
use tower::ServiceExt;

use super::model::Model;
use super::vocabulary::{
    Call, JUNK_METHODS, JUNK_PATHS, KeyCase, KeyClass, LooseBody, NOT_OBJECT, OPS_PATHS, Shape,
    TTL_RAW, Ttl, owner_raw, reason_raw,
};
use crate::support::TestServer;

/// A `ttl_ms` field, or none.
pub(super) fn ttl_field(t: &Ttl) -> Option<(&'static str, String)> {
    match t {
        Ttl::Absent => None,
        Ttl::Ms(ms) => Some(("ttl_ms", ms.to_string())),
        Ttl::Raw(i) => Some(("ttl_ms", TTL_RAW[*i].to_string())),
    }
}

/// A JSON object of exactly `MAX_BODY_BYTES` (+1 when `over`), `fields` first.
pub(super) fn padded_object(fields: &[String], over: bool) -> Vec<u8> {
    let mut head = String::from("{");
    for f in fields {
        head.push_str(f);
        head.push(',');
    }
    head.push_str("\"pad\":\"");
    let tail = "\"}";
    let target = MAX_BODY_BYTES + usize::from(over);
    let pad = target - head.len() - tail.len();
    let mut s = head;
    s.push_str(&"x".repeat(pad));
    s.push_str(tail);
    assert_eq!(s.len(), target);
    s.into_bytes()
}

/// How a body compares with the limit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Size {
    Within,
    /// Exactly at the limit: must not be refused as too large.
    AtLimit,
    /// Over the limit: must be 413 wherever the endpoint reads a body.
    Over,
}

pub(super) fn size_of(body: &[u8]) -> Size {
    match body.len() {
        n if n > MAX_BODY_BYTES => Size::Over,
        n if n == MAX_BODY_BYTES => Size::AtLimit,
        _ => Size::Within,
    }
}

/// Puts `fields` (`"name": raw JSON`) on the wire in `shape`.
pub(super) fn build_body(fields: &[(&str, String)], shape: &Shape) -> Vec<u8> {
    let mut parts: Vec<String> = fields.iter().map(|(k, v)| format!("\"{k}\":{v}")).collect();
    let object = |parts: &[String]| format!("{{{}}}", parts.join(",")).into_bytes();
    match shape {
        Shape::Valid => object(&parts),
        Shape::Extra => {
            parts.push(r#""unknown_field":{"nested":[1,2.5,"x",null]}"#.into());
            parts.insert(0, r#""zz":18446744073709551616"#.into());
            object(&parts)
        }
        Shape::Drop(i) => {
            if !parts.is_empty() {
                let n = parts.len();
                parts.remove(i % n);
            }
            object(&parts)
        }
        Shape::Dup => {
            if let Some(first) = parts.first().cloned() {
                parts.push(first);
            }
            object(&parts)
        }
        Shape::Truncate(n) => {
            let mut b = object(&parts);
            let cut = n % b.len();
            b.truncate(cut);
            b
        }
        Shape::NotObject(i) => NOT_OBJECT[*i].as_bytes().to_vec(),
        Shape::Empty => Vec::new(),
        Shape::Deep => format!("{}{}", "[".repeat(300), "]".repeat(300)).into_bytes(),
        Shape::Padded { over } => padded_object(&parts, *over),
        Shape::Garbage(bytes) => bytes.clone(),
    }
}

pub(super) fn loose_bytes(b: &LooseBody) -> Vec<u8> {
    match b {
        LooseBody::Empty => Vec::new(),
        LooseBody::Text(t) => t.as_bytes().to_vec(),
        LooseBody::Padded { over } => padded_object(&[], *over),
        LooseBody::Huge => padded_object(&[], true)
            .into_iter()
            .chain(std::iter::repeat_n(b' ', 40_000))
            .collect(),
        LooseBody::Bytes(b) => b.clone(),
    }
}

/// Which endpoint a request is, for the per-endpoint checks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Kind {
    L1,
    L2,
    L3,
    L4,
    L5,
    L6,
    L7,
    L8,
    Ops,
    Junk,
}

/// A concrete request and what is known about it in advance.
pub(super) struct Planned {
    pub(super) kind: Kind,
    pub(super) method: Method,
    pub(super) uri: String,
    pub(super) body: Vec<u8>,
    /// The endpoint reads a body and the path reaches it: size rules apply.
    pub(super) reads_body: bool,
    /// The key route matched with a key C1 refuses: must be 400.
    pub(super) bad_key: bool,
    /// The valid key named, if any.
    pub(super) key: Option<String>,
    /// The session id named (path or body), when it is a plain string.
    pub(super) session: Option<String>,
    /// The u64 token sent, if any.
    pub(super) token: Option<u64>,
}

pub(super) fn plan(m: &Model, call: &Call) -> Planned {
    let mut p = Planned {
        kind: Kind::Junk,
        method: Method::POST,
        uri: String::new(),
        body: Vec::new(),
        reads_body: false,
        bad_key: false,
        key: None,
        session: None,
        token: None,
    };
    let key_case = |i: usize| m.keys[i].clone();
    match call {
        Call::Open { owner, ttl, shape } => {
            let mut f = vec![("owner_id", owner_raw(*owner))];
            f.extend(ttl_field(ttl));
            p.kind = Kind::L1;
            p.uri = "/v1/sessions".into();
            p.body = build_body(&f, shape);
            p.reads_body = true;
        }
        Call::Heartbeat { sess, body } => {
            let (seg, _, ok) = m.session(sess, None);
            p.kind = Kind::L2;
            p.uri = format!("/v1/sessions/{seg}/heartbeat");
            p.body = loose_bytes(body);
            p.reads_body = ok;
        }
        Call::Delete { sess } => {
            let (seg, _, _) = m.session(sess, None);
            p.kind = Kind::L3;
            p.method = Method::DELETE;
            p.uri = format!("/v1/sessions/{seg}");
            p.session = Some(seg);
        }
        Call::Acquire {
            key,
            sess,
            ttl,
            shape,
        } => {
            let k = key_case(*key);
            let (_, s, _) = m.session(sess, k.key.as_deref());
            let mut f = vec![("session_id", s)];
            f.extend(ttl_field(ttl));
            p.kind = Kind::L4;
            p.uri = format!("/v1/locks/{}/acquire", k.seg);
            p.body = build_body(&f, shape);
            keyed(&mut p, &k);
        }
        Call::Renew {
            key,
            sess,
            tok,
            ttl,
            shape,
        } => {
            let k = key_case(*key);
            let (_, s, _) = m.session(sess, k.key.as_deref());
            let (t, tv) = m.token(tok, k.key.as_deref());
            let mut f = vec![("session_id", s), ("token", t)];
            f.extend(ttl_field(ttl));
            p.kind = Kind::L5;
            p.uri = format!("/v1/locks/{}/renew", k.seg);
            p.body = build_body(&f, shape);
            p.token = tv;
            keyed(&mut p, &k);
        }
        Call::Release {
            key,
            sess,
            tok,
            shape,
        } => {
            let k = key_case(*key);
            let (_, s, _) = m.session(sess, k.key.as_deref());
            let (t, tv) = m.token(tok, k.key.as_deref());
            p.kind = Kind::L6;
            p.uri = format!("/v1/locks/{}/release", k.seg);
            p.body = build_body(&[("session_id", s), ("token", t)], shape);
            p.token = tv;
            keyed(&mut p, &k);
        }
        Call::Info { key } => {
            let k = key_case(*key);
            p.kind = Kind::L7;
            p.method = Method::GET;
            p.uri = format!("/v1/locks/{}", k.seg);
            keyed(&mut p, &k);
            p.reads_body = false;
        }
        Call::Revoke { key, reason, shape } => {
            let k = key_case(*key);
            p.kind = Kind::L8;
            p.uri = format!("/v1/locks/{}/revoke", k.seg);
            p.body = build_body(&[("reason", reason_raw(*reason))], shape);
            keyed(&mut p, &k);
        }
        Call::Ops { path } => {
            p.kind = Kind::Ops;
            p.method = Method::GET;
            p.uri = OPS_PATHS[*path].into();
        }
        Call::Junk { method, path, body } => {
            let latest = m
                .sessions
                .last()
                .cloned()
                .unwrap_or_else(|| "nosession".into());
            p.method = Method::from_bytes(JUNK_METHODS[*method].as_bytes()).expect("method");
            p.uri = JUNK_PATHS[*path].replace("{S}", &latest);
            p.body = loose_bytes(body);
        }
    }
    p
}

/// Sets the key facts of a request on a key route.
pub(super) fn keyed(p: &mut Planned, k: &KeyCase) {
    p.key = k.key.clone();
    p.bad_key = k.class == KeyClass::Bad;
    p.reads_body = k.class == KeyClass::Valid;
}

/// Sends one request through the router; returns the status and the raw body.
pub(super) async fn send(
    srv: &TestServer,
    p: &Planned,
    content_length: bool,
) -> (StatusCode, Vec<u8>) {
    let mut req = Request::builder()
        .method(p.method.clone())
        .uri(&p.uri)
        .header(header::CONTENT_TYPE, "application/json");
    if content_length {
        req = req.header(header::CONTENT_LENGTH, p.body.len());
    }
    let req = req.body(Body::from(p.body.clone())).unwrap_or_else(|e| {
        panic!(
            "test bug: request {} {} does not build: {e}",
            p.method, p.uri
        )
    });
    let resp = srv.app.clone().oneshot(req).await.expect("router answers");
    let status = resp.status();
    let bytes = resp.into_body().collect().await.expect("body").to_bytes();
    (status, bytes.to_vec())
}
