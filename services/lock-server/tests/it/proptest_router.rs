//! A property test of the C1 router: over ten thousand random requests, on the
//! memory store and the fake clock, no reply is a 5xx, every refusal (status
//! ≥ 400) leaves [`LockService::state_digest`] exactly as it was, every error
//! body is `{"code", "message"}`, and the fencing tokens seen on the wire obey
//! C1 (strictly increasing per key, unchanged by renew, reported by L7).
//!
//! The strategy is a sequence of [`Step`]s, each an optional clock advance and
//! one request. Requests name sessions, keys and tokens *symbolically*
//! ([`Sess`], a key index, [`Tok`]) and are resolved against a small [`Model`]
//! of what the run has seen (sessions opened, grants made), so most requests
//! hit real sessions, held keys and right tokens and the server reaches HELD,
//! GRACE and FREE, while the rest are garbage: bad keys, wrong types, malformed
//! or oversized bodies, unknown paths and wrong methods. Resolving at run time
//! keeps every sequence replayable and shrinkable.
//!
//! The seed is fixed (override with `FP_PROPTEST_SEED=<u64>`) and printed.
//!
//! [`LockService::state_digest`]: lock_server::LockService::state_digest

use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{Method, Request, StatusCode, header};
use fencepost_api::clock::{Clock, MonoTime};
use fencepost_api::lock::{LockErrorCode, MAX_BODY_BYTES};
use http_body_util::BodyExt;
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::test_runner::{TestCaseError, TestError};
use serde_json::Value;
use tower::ServiceExt;

use crate::support::TestServer;

/// Sequences run (each on a fresh server).
const CASES: u32 = 260;
/// Requests per sequence: 1..=100, mean ~50, so 260 cases give ~13,000.
const MAX_STEPS: usize = 100;
/// The least number of requests a full run must send.
const MIN_REQUESTS: u64 = 10_000;
/// The default seed; `FP_PROPTEST_SEED` overrides it.
const DEFAULT_SEED: u64 = 0x0f3c_e905_7c1a_2024;

// ----- the vocabulary of a request ------------------------------------------

/// Lock keys as path segments: `(segment, decoded key if valid, class)`.
/// The first four are the "hot" keys most requests use.
fn key_pool() -> Vec<KeyCase> {
    use KeyClass::*;
    let k = |seg: &str, key: Option<&str>, class| KeyCase {
        seg: seg.to_string(),
        key: key.map(str::to_string),
        class,
    };
    vec![
        k("k1", Some("k1"), Valid),
        k("k2", Some("k2"), Valid),
        k("a%2Fb", Some("a/b"), Valid),
        k("payout:42", Some("payout:42"), Valid),
        // Dot segments are refused (C1): a URL normaliser would send them elsewhere.
        k("..", None, Bad),
        k("%2E%2E", None, Bad),
        k("%2E", None, Bad),
        KeyCase {
            seg: "k".repeat(256),
            key: Some("k".repeat(256)),
            class: Valid,
        },
        KeyCase {
            seg: "k".repeat(257),
            key: None,
            class: Bad,
        },
        k("%00", None, Bad),
        k("a%20b", None, Bad),
        k("%C3%A9t%C3%A9", None, Bad),
        k("%FF", None, Bad),
        k("a+b", None, Bad),
        k("k1%2F", Some("k1/"), Valid),
        k("K1", Some("K1"), Valid),
        // An empty segment and an unencoded slash do not match the key routes.
        k("", None, Unrouted),
        k("a/b", None, Unrouted),
    ]
}

/// How many of [`key_pool`]'s keys are hot.
const HOT_KEYS: usize = 4;

#[derive(Clone, Debug)]
struct KeyCase {
    /// The path segment, already percent-encoded as a client would send it.
    seg: String,
    /// The key the server should see, when it is a valid C1 key.
    key: Option<String>,
    class: KeyClass,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum KeyClass {
    /// A valid key: the route matches and the key is accepted.
    Valid,
    /// The route matches but the key is refused: 400 BAD_REQUEST before anything else.
    Bad,
    /// The path does not reach a key route at all (404 or 405, no assertion on which).
    Unrouted,
}

/// Session ids that are not ours: `(path segment, JSON value, path reaches the handler)`.
const ODD_SESSIONS: &[(&str, &str, bool)] = &[
    ("%00", r#""\u0000""#, true),
    ("..", r#"".."#, true),
    ("%C3%A9", r#""é""#, true),
    ("%FF", r#""\udcff""#, false),
    ("", r#""""#, false),
    ("a%2Fb", r#""a/b""#, true),
    ("%20", r#"" ""#, true),
    ("not-a-session", r#""not-a-session""#, true),
];

/// `session_id` values of the wrong JSON type.
const WRONG_TYPE: &[&str] = &["5", "null", "true", r#"["x"]"#, "{}", "-1.5"];

/// `ttl_ms` values that are not a plain in-range integer.
const TTL_RAW: &[&str] = &[
    "-1",
    "1.5",
    r#""10""#,
    "null",
    "18446744073709551615",
    "18446744073709551616",
    "1e30",
    "0",
    "{}",
    "true",
    "-0",
];

/// `token` values that are not a u64.
const TOKEN_RAW: &[&str] = &[
    "-1",
    "1.5",
    r#""1""#,
    "null",
    "18446744073709551616",
    "1e3",
    "true",
    "[]",
    "-9223372036854775808",
];

/// Bodies for L2 (which takes an empty body or an object) and for junk requests.
#[derive(Clone, Debug)]
enum LooseBody {
    Empty,
    Text(&'static str),
    /// A valid JSON object of exactly 64 KiB (accepted) or one byte over (413).
    Padded {
        over: bool,
    },
    /// A valid JSON object well over the limit.
    Huge,
    Bytes(Vec<u8>),
}

const LOOSE_TEXT: &[&str] = &[
    "{}",
    "  \n",
    r#"{"x":1}"#,
    "null",
    "[]",
    "{",
    r#""s""#,
    "0",
    r#"{"ttl_ms":-1}"#,
    "\u{feff}{}",
];

/// A reference to a session, resolved against the [`Model`] when the step runs.
#[derive(Clone, Debug)]
enum Sess {
    /// One of the sessions opened so far (index modulo their number).
    Pool(usize),
    /// The session opened last.
    Latest,
    /// The session that got the key's latest grant (else `Latest`).
    Holder,
    /// A well-formed id nobody opened.
    Unknown(u128),
    /// An entry of [`ODD_SESSIONS`].
    Odd(usize),
    /// An entry of [`WRONG_TYPE`] in a body (`5` in a path).
    WrongType(usize),
}

/// A token, resolved against the key's latest grant.
#[derive(Clone, Debug)]
enum Tok {
    Right,
    Prev,
    Next,
    Zero,
    Max,
    Small(u64),
    Raw(usize),
}

/// A `ttl_ms` field.
#[derive(Clone, Debug)]
enum Ttl {
    Absent,
    Ms(u64),
    Raw(usize),
}

/// How a body with fields is put on the wire.
#[derive(Clone, Debug)]
enum Shape {
    Valid,
    /// Plus unknown fields (must be ignored).
    Extra,
    /// Without one of its fields.
    Drop(usize),
    /// With its first field twice.
    Dup,
    /// Cut after this many bytes (modulo the length): malformed.
    Truncate(usize),
    /// A JSON value that is not an object.
    NotObject(usize),
    Empty,
    /// Nested 300 arrays deep.
    Deep,
    /// Exactly [`MAX_BODY_BYTES`] (accepted) or one byte more (413), valid JSON.
    Padded {
        over: bool,
    },
    /// Random bytes.
    Garbage(Vec<u8>),
}

const NOT_OBJECT: &[&str] = &["null", "[]", r#""str""#, "42", "true", "[{}]"];

/// One request, symbolically.
#[derive(Clone, Debug)]
enum Call {
    /// L1.
    Open {
        owner: usize,
        ttl: Ttl,
        shape: Shape,
    },
    /// L2.
    Heartbeat { sess: Sess, body: LooseBody },
    /// L3.
    Delete { sess: Sess },
    /// L4.
    Acquire {
        key: usize,
        sess: Sess,
        ttl: Ttl,
        shape: Shape,
    },
    /// L5.
    Renew {
        key: usize,
        sess: Sess,
        tok: Tok,
        ttl: Ttl,
        shape: Shape,
    },
    /// L6.
    Release {
        key: usize,
        sess: Sess,
        tok: Tok,
        shape: Shape,
    },
    /// L7.
    Info { key: usize },
    /// L8.
    Revoke {
        key: usize,
        reason: usize,
        shape: Shape,
    },
    /// `GET` of an operational endpoint.
    Ops { path: usize },
    /// Any method on a path from [`JUNK_PATHS`], any body.
    Junk {
        method: usize,
        path: usize,
        body: LooseBody,
    },
}

const OPS_PATHS: &[&str] = &["/healthz", "/readyz", "/metrics", "/v1/config"];

const JUNK_METHODS: &[&str] = &["GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "HEAD"];

/// `{S}` is replaced by the latest session id.
const JUNK_PATHS: &[&str] = &[
    "/",
    "/v1",
    "/v1/",
    "/v1/sessions",
    "/v1/sessions/",
    "/v1/locks",
    "/v1/locks/k1",
    "/v1/locks/k1/acquire",
    "/v1/locks/k1/nope",
    "/v1/sessions/{S}/heartbeat",
    "/v1/sessions/{S}",
    "/v1/sessions/{S}/heartbeat/extra",
    "/V1/SESSIONS",
    "/v2/sessions",
    "/v1/locks/k1/acquire/",
    "/healthz/x",
    "/v1/config",
    "/v1/locks/k1?session_id=x",
    "/v1/locks/%2e%2e/release",
    "/v1/locks/k1/revoke",
];

/// An owner_id value (raw JSON), by index.
fn owner_raw(i: usize) -> String {
    match i % 11 {
        0 => r#""alice""#.into(),
        1 => r#""bob""#.into(),
        2 => r#""carol""#.into(),
        3 => r#""""#.into(),
        4 => format!("\"{}\"", "o".repeat(128)),
        5 => format!("\"{}\"", "o".repeat(129)),
        6 => r#""a\u0001b""#.into(),
        7 => format!("\"{}\"", "ü".repeat(128)),
        8 => "7".into(),
        9 => "null".into(),
        _ => r#"["a"]"#.into(),
    }
}

/// A revoke reason (raw JSON), by index.
fn reason_raw(i: usize) -> String {
    match i % 8 {
        0 | 1 => r#""ops: stuck holder""#.into(),
        2 => r#""""#.into(),
        3 => format!("\"{}\"", "r".repeat(1024)),
        4 => format!("\"{}\"", "r".repeat(1025)),
        5 => "5".into(),
        6 => "null".into(),
        _ => r#""é""#.into(),
    }
}

/// How a step moves the fake clock before its request (a move is not a request).
#[derive(Clone, Debug)]
enum Advance {
    None,
    /// By this many milliseconds.
    Ms(u64),
    /// To this many ms past the lease end of the key's latest grant, if that is
    /// ahead: aims at the short GRACE window (and at the exact boundary, 0).
    PastLease {
        key: usize,
        ms: u64,
    },
}

/// One step: maybe move the fake clock, then send one request.
#[derive(Clone, Debug)]
struct Step {
    advance: Advance,
    /// Whether to send a (truthful) `content-length` header with the body.
    content_length: bool,
    call: Call,
}

// ----- strategies -------------------------------------------------------------

fn key_idx() -> impl Strategy<Value = usize> {
    let n = key_pool().len();
    prop_oneof![8 => 0..HOT_KEYS, 2 => 0..n]
}

fn sess(holder: u32) -> impl Strategy<Value = Sess> {
    prop_oneof![
        6 => (0usize..8).prop_map(Sess::Pool),
        4 => Just(Sess::Latest),
        holder => Just(Sess::Holder),
        1 => any::<u128>().prop_map(Sess::Unknown),
        1 => (0..ODD_SESSIONS.len()).prop_map(Sess::Odd),
        1 => (0..WRONG_TYPE.len()).prop_map(Sess::WrongType),
    ]
}

fn tok() -> impl Strategy<Value = Tok> {
    prop_oneof![
        24 => Just(Tok::Right),
        1 => Just(Tok::Prev),
        1 => Just(Tok::Next),
        1 => Just(Tok::Zero),
        1 => Just(Tok::Max),
        1 => (0u64..6).prop_map(Tok::Small),
        2 => (0..TOKEN_RAW.len()).prop_map(Tok::Raw),
    ]
}

fn ttl() -> impl Strategy<Value = Ttl> {
    prop_oneof![
        3 => Just(Ttl::Absent),
        6 => (0u64..3_000).prop_map(Ttl::Ms),
        1 => (0u64..700_000).prop_map(Ttl::Ms),
        1 => (0..TTL_RAW.len()).prop_map(Ttl::Raw),
    ]
}

fn shape() -> impl Strategy<Value = Shape> {
    prop_oneof![
        60 => Just(Shape::Valid),
        3 => Just(Shape::Extra),
        2 => (0usize..3).prop_map(Shape::Drop),
        1 => Just(Shape::Dup),
        1 => any::<usize>().prop_map(Shape::Truncate),
        1 => (0..NOT_OBJECT.len()).prop_map(Shape::NotObject),
        1 => Just(Shape::Empty),
        1 => Just(Shape::Deep),
        1 => any::<bool>().prop_map(|over| Shape::Padded { over }),
        1 => vec(any::<u8>(), 0..40).prop_map(Shape::Garbage),
    ]
}

fn loose_body() -> impl Strategy<Value = LooseBody> {
    prop_oneof![
        6 => Just(LooseBody::Empty),
        4 => (0..LOOSE_TEXT.len()).prop_map(|i| LooseBody::Text(LOOSE_TEXT[i])),
        1 => any::<bool>().prop_map(|over| LooseBody::Padded { over }),
        1 => Just(LooseBody::Huge),
        1 => vec(any::<u8>(), 0..40).prop_map(LooseBody::Bytes),
    ]
}

fn call() -> impl Strategy<Value = Call> {
    prop_oneof![
        10 => (prop_oneof![8 => 0usize..3, 3 => 0usize..11], ttl(), shape())
            .prop_map(|(owner, ttl, shape)| Call::Open { owner, ttl, shape }),
        10 => (sess(1), loose_body()).prop_map(|(sess, body)| Call::Heartbeat { sess, body }),
        2 => sess(1).prop_map(|sess| Call::Delete { sess }),
        20 => (key_idx(), sess(1), ttl(), shape())
            .prop_map(|(key, sess, ttl, shape)| Call::Acquire { key, sess, ttl, shape }),
        14 => (key_idx(), sess(24), tok(), ttl(), shape()).prop_map(
            |(key, sess, tok, ttl, shape)| Call::Renew { key, sess, tok, ttl, shape }
        ),
        10 => (key_idx(), sess(24), tok(), shape())
            .prop_map(|(key, sess, tok, shape)| Call::Release { key, sess, tok, shape }),
        10 => key_idx().prop_map(|key| Call::Info { key }),
        3 => (key_idx(), 0usize..8, shape())
            .prop_map(|(key, reason, shape)| Call::Revoke { key, reason, shape }),
        2 => (0..OPS_PATHS.len()).prop_map(|path| Call::Ops { path }),
        5 => (0..JUNK_METHODS.len(), 0..JUNK_PATHS.len(), loose_body())
            .prop_map(|(method, path, body)| Call::Junk { method, path, body }),
    ]
}

fn step() -> impl Strategy<Value = Step> {
    let advance = prop_oneof![
        16 => Just(Advance::None),
        2 => (0u64..=300).prop_map(Advance::Ms),
        1 => (0u64..=20_000).prop_map(Advance::Ms),
        2 => (0..HOT_KEYS, 0u64..=60).prop_map(|(key, ms)| Advance::PastLease { key, ms }),
    ];
    (advance, any::<bool>(), call()).prop_map(|(advance, content_length, call)| Step {
        advance,
        content_length,
        call,
    })
}

// ----- running a sequence -------------------------------------------------------

/// A grant as the run saw it.
struct Held {
    session_id: String,
    token: u64,
    /// The fake clock at the L4/L5 that set the lease.
    started: MonoTime,
    lease_ms: u64,
}

/// What the run has seen, to resolve symbolic references and check tokens.
#[derive(Default)]
struct Model {
    keys: Vec<KeyCase>,
    /// Every session id L1 returned, in order (deleted ones stay: they are useful 404s).
    sessions: Vec<String>,
    /// Per key: the latest grant L4 returned, until released.
    holder: HashMap<String, Held>,
    /// Per key: the largest token seen on the wire.
    max_token: HashMap<String, u64>,
}

impl Model {
    /// Resolves a session reference to `(path segment, JSON value, path reaches the handler)`.
    fn session(&self, s: &Sess, key: Option<&str>) -> (String, String, bool) {
        let real = |id: &String| (id.clone(), format!("\"{id}\""), true);
        let unknown = || {
            let id = "0".repeat(32);
            (id.clone(), format!("\"{id}\""), true)
        };
        match s {
            Sess::Pool(i) if !self.sessions.is_empty() => {
                real(&self.sessions[i % self.sessions.len()])
            }
            Sess::Holder => match key.and_then(|k| self.holder.get(k)) {
                Some(h) => real(&h.session_id),
                None => self.session(&Sess::Latest, None),
            },
            Sess::Pool(_) | Sess::Latest => self.sessions.last().map(real).unwrap_or_else(unknown),
            Sess::Unknown(n) => {
                let id = format!("{n:032x}");
                (id.clone(), format!("\"{id}\""), true)
            }
            Sess::Odd(i) => {
                let (p, j, ok) = ODD_SESSIONS[*i];
                (p.to_string(), j.to_string(), ok)
            }
            Sess::WrongType(i) => ("5".into(), WRONG_TYPE[*i].to_string(), true),
        }
    }

    /// Resolves a token to its raw JSON and, when it is a u64, its value.
    fn token(&self, t: &Tok, key: Option<&str>) -> (String, Option<u64>) {
        let right = key
            .and_then(|k| {
                self.holder
                    .get(k)
                    .map(|h| h.token)
                    .or(self.max_token.get(k).copied())
            })
            .unwrap_or(1);
        let n = match t {
            Tok::Right => right,
            Tok::Prev => right.saturating_sub(1),
            Tok::Next => right.saturating_add(1),
            Tok::Zero => 0,
            Tok::Max => u64::MAX,
            Tok::Small(n) => *n,
            Tok::Raw(i) => return (TOKEN_RAW[*i].to_string(), None),
        };
        (n.to_string(), Some(n))
    }
}

/// A `ttl_ms` field, or none.
fn ttl_field(t: &Ttl) -> Option<(&'static str, String)> {
    match t {
        Ttl::Absent => None,
        Ttl::Ms(ms) => Some(("ttl_ms", ms.to_string())),
        Ttl::Raw(i) => Some(("ttl_ms", TTL_RAW[*i].to_string())),
    }
}

/// A JSON object of exactly `MAX_BODY_BYTES` (+1 when `over`), `fields` first.
fn padded_object(fields: &[String], over: bool) -> Vec<u8> {
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
enum Size {
    Within,
    /// Exactly at the limit: must not be refused as too large.
    AtLimit,
    /// Over the limit: must be 413 wherever the endpoint reads a body.
    Over,
}

fn size_of(body: &[u8]) -> Size {
    match body.len() {
        n if n > MAX_BODY_BYTES => Size::Over,
        n if n == MAX_BODY_BYTES => Size::AtLimit,
        _ => Size::Within,
    }
}

/// Puts `fields` (`"name": raw JSON`) on the wire in `shape`.
fn build_body(fields: &[(&str, String)], shape: &Shape) -> Vec<u8> {
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

fn loose_bytes(b: &LooseBody) -> Vec<u8> {
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
enum Kind {
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
struct Planned {
    kind: Kind,
    method: Method,
    uri: String,
    body: Vec<u8>,
    /// The endpoint reads a body and the path reaches it: size rules apply.
    reads_body: bool,
    /// The key route matched with a key C1 refuses: must be 400.
    bad_key: bool,
    /// The valid key named, if any.
    key: Option<String>,
    /// The session id named (path or body), when it is a plain string.
    session: Option<String>,
    /// The u64 token sent, if any.
    token: Option<u64>,
}

fn plan(m: &Model, call: &Call) -> Planned {
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
fn keyed(p: &mut Planned, k: &KeyCase) {
    p.key = k.key.clone();
    p.bad_key = k.class == KeyClass::Bad;
    p.reads_body = k.class == KeyClass::Valid;
}

/// Sends one request through the router; returns the status and the raw body.
async fn send(srv: &TestServer, p: &Planned, content_length: bool) -> (StatusCode, Vec<u8>) {
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

/// At most `n` characters of `s`, marking a cut.
fn clip(s: &str, n: usize) -> String {
    if s.chars().count() <= n {
        s.to_string()
    } else {
        format!(
            "{}…({} bytes in all)",
            s.chars().take(n).collect::<String>(),
            s.len()
        )
    }
}

/// The lines of two digests that differ, `-` before and `+` after.
fn digest_diff(before: &str, after: &str) -> String {
    let mut out = String::new();
    for (b, a) in before.lines().zip(after.lines()) {
        if a != b {
            out.push_str(&format!("  - {b}\n  + {a}\n"));
        }
    }
    out
}

/// Checks one reply against everything known in advance; updates the model.
fn check(
    m: &mut Model,
    p: &Planned,
    status: StatusCode,
    raw: &[u8],
    changed: bool,
    now: MonoTime,
) -> Result<(), String> {
    let code = status.as_u16();
    if status.is_server_error() {
        return Err("a 5xx".into());
    }
    if code >= 400 && changed {
        return Err("a refused request changed the state".into());
    }
    if matches!(p.method, Method::GET | Method::HEAD) && changed {
        return Err("a GET/HEAD changed the state".into());
    }
    // HEAD replies carry no body by definition.
    let json: Value = if p.method == Method::HEAD {
        Value::Null
    } else {
        serde_json::from_slice(raw).unwrap_or(Value::Null)
    };
    let err_code = json["code"].as_str().unwrap_or("");
    if code >= 400 && p.method != Method::HEAD {
        let message = json["message"].as_str().unwrap_or("");
        if !json.is_object() || err_code.is_empty() || message.trim().is_empty() {
            return Err("an error body that is not {\"code\", \"message\"}".into());
        }
        if let Some(c) = LockErrorCode::parse(err_code) {
            if c.status() != code {
                return Err(format!("code {err_code} travels with {}", c.status()));
            }
            if c == LockErrorCode::LockHeld && json["retry_after_ms"].as_u64().unwrap_or(0) == 0 {
                return Err("LOCK_HELD without a positive retry_after_ms".into());
            }
        }
    }
    let size = size_of(&p.body);
    if p.reads_body && p.method != Method::HEAD {
        if size == Size::Over && (code != 413 || err_code != "PAYLOAD_TOO_LARGE") {
            return Err("a body over 64 KiB was not refused with 413 PAYLOAD_TOO_LARGE".into());
        }
        if size != Size::Over && code == 413 {
            return Err("a body within 64 KiB was refused as too large".into());
        }
    }
    // A body declared over the limit may be refused with 413 before anything
    // else is looked at (the server checks content-length on every route).
    let oversize_refused = size == Size::Over && code == 413 && err_code == "PAYLOAD_TOO_LARGE";
    if p.bad_key && !oversize_refused && (code != 400 || err_code != "BAD_REQUEST") {
        return Err("an invalid key was not refused with 400 BAD_REQUEST".into());
    }
    if p.kind == Kind::Ops && !oversize_refused && code != 200 {
        return Err("an operational endpoint did not answer 200".into());
    }
    if code >= 400 || p.kind == Kind::Junk {
        // L7 404 on a valid key: LOCK_UNKNOWN, and only for a key never granted.
        if let Some(k) = p.key.as_ref().filter(|_| p.kind == Kind::L7 && code == 404)
            && (err_code != "LOCK_UNKNOWN" || m.max_token.contains_key(k))
        {
            return Err(format!(
                "L7 404 {err_code} on {k:?}; this run was granted it up to token {:?}",
                m.max_token.get(k)
            ));
        }
        return Ok(());
    }
    let want = match p.kind {
        Kind::L1 => 201,
        Kind::L3 | Kind::L6 => 204,
        _ => 200,
    };
    if code != want {
        return Err(format!("success status {code}, C1 says {want}"));
    }
    match p.kind {
        Kind::L1 => {
            let id = json["session_id"]
                .as_str()
                .ok_or("L1 reply without session_id")?;
            if id.len() < 32 {
                return Err(format!("session id {id:?} is too short to be unguessable"));
            }
            m.sessions.push(id.to_string());
        }
        Kind::L3 => {
            let id = p.session.clone().unwrap_or_default();
            m.holder.retain(|_, h| h.session_id != id);
        }
        Kind::L4 => {
            let key = p.key.clone().ok_or("L4 succeeded on a key C1 refuses")?;
            let token = json["token"].as_u64().ok_or("L4 reply without a token")?;
            if json["key"].as_str() != Some(key.as_str()) {
                return Err(format!("L4 reply names key {}", json["key"]));
            }
            let prev = m.max_token.get(&key).copied().unwrap_or(0);
            let session = serde_json::from_slice::<Value>(&p.body)
                .ok()
                .and_then(|b| b["session_id"].as_str().map(str::to_string))
                .unwrap_or_default();
            // The holder's re-acquire (C1 §7) answers its current grant, same token.
            let reacquired = m
                .holder
                .get(&key)
                .is_some_and(|h| h.token == token && h.session_id == session);
            if token <= prev && !reacquired {
                return Err(format!(
                    "token {token} for {key:?} is not above {prev}, seen before"
                ));
            }
            m.max_token.insert(key.clone(), token);
            m.holder.insert(
                key,
                Held {
                    session_id: session,
                    token,
                    started: now,
                    lease_ms: json["lease_ms"].as_u64().unwrap_or(0),
                },
            );
        }
        Kind::L5 => {
            let token = json["token"].as_u64();
            if token.is_none() || token != p.token {
                return Err(format!(
                    "renew answered token {token:?}, sent {:?}",
                    p.token
                ));
            }
            if let Some(h) = p.key.as_ref().and_then(|k| m.holder.get_mut(k))
                && Some(h.token) == token
            {
                h.started = now;
                h.lease_ms = json["lease_ms"].as_u64().unwrap_or(0);
            }
        }
        Kind::L6 => {
            if let Some(k) = &p.key {
                m.holder.remove(k);
            }
        }
        Kind::L7 => {
            let key = p.key.clone().ok_or("L7 succeeded on a key C1 refuses")?;
            let token = json["token"].as_u64();
            if token != m.max_token.get(&key).copied() {
                return Err(format!(
                    "L7 token {token:?} is not the last token issued, {:?}",
                    m.max_token.get(&key)
                ));
            }
            if !matches!(json["state"].as_str(), Some("HELD" | "GRACE" | "FREE")) {
                return Err(format!("L7 state {}", json["state"]));
            }
        }
        Kind::L8 => {
            if json["state"].as_str() != Some("FREE") {
                return Err(format!("after a revoke the key is {}", json["state"]));
            }
            if let Some(k) = &p.key {
                m.holder.remove(k);
            }
        }
        Kind::L2 | Kind::Ops | Kind::Junk => {}
    }
    Ok(())
}

/// Outcomes seen, `"L4 200"` or `"L5 409 LOCK_LOST"` or `"L7 200 GRACE"`, with counts:
/// the evidence that the strategy reaches deep states.
type Coverage = Mutex<BTreeMap<String, u64>>;

/// The outcome label [`Coverage`] counts.
fn outcome(p: &Planned, status: StatusCode, raw: &[u8]) -> String {
    let json: Value = serde_json::from_slice(raw).unwrap_or(Value::Null);
    let detail = match p.kind {
        Kind::L7 | Kind::L8 if status.is_success() => json["state"].as_str().unwrap_or(""),
        _ => json["code"].as_str().unwrap_or(""),
    };
    format!("{:?} {} {detail}", p.kind, status.as_u16())
        .trim_end()
        .to_string()
}

/// Outcomes a run must have reached, or the strategy has gone shallow.
const MUST_REACH: &[&str] = &[
    "L1 201",
    "L1 400 BAD_REQUEST",
    "L1 413 PAYLOAD_TOO_LARGE",
    "L2 200",
    "L2 404 SESSION_UNKNOWN",
    "L2 410 SESSION_EXPIRED",
    "L3 204",
    "L4 200",
    "L4 409 LOCK_HELD",
    "L4 410 SESSION_EXPIRED",
    "L5 200",
    "L5 409 LOCK_LOST",
    "L6 204",
    "L6 409 LOCK_LOST",
    "L7 200 HELD",
    "L7 200 GRACE",
    "L7 200 FREE",
    "L7 404 LOCK_UNKNOWN",
    "L8 200 FREE",
    "Junk 404 NOT_FOUND",
    "Junk 405 METHOD_NOT_ALLOWED",
];

/// Runs one sequence on a fresh server. Returns the number of requests sent;
/// with `transcript`, records one line per step.
async fn run_sequence(
    steps: &[Step],
    mut transcript: Option<&mut Vec<String>>,
    coverage: Option<&Coverage>,
) -> Result<u64, TestCaseError> {
    let srv = TestServer::memory().await;
    let mut m = Model {
        keys: key_pool(),
        ..Model::default()
    };
    let mut sent = 0u64;
    for (i, step) in steps.iter().enumerate() {
        let advanced = match &step.advance {
            Advance::None => Duration::ZERO,
            Advance::Ms(ms) => Duration::from_millis(*ms),
            Advance::PastLease { key, ms } => m.keys[*key]
                .key
                .as_ref()
                .and_then(|k| m.holder.get(k))
                .map(|h| {
                    h.started
                        .saturating_add(Duration::from_millis(h.lease_ms + ms))
                        .saturating_duration_since(srv.clock.now())
                })
                .unwrap_or_default(),
        };
        srv.clock.advance(advanced);
        let now = srv.clock.now();
        let clock_note = if advanced.is_zero() {
            String::new()
        } else {
            format!("[clock +{} ms] ", advanced.as_millis())
        };
        let p = plan(&m, &step.call);
        let before = srv.service.state_digest().await;
        let (status, raw) = send(&srv, &p, step.content_length).await;
        sent += 1;
        let after = srv.service.state_digest().await;
        if let Some(c) = coverage {
            let label = outcome(&p, status, &raw);
            *c.lock()
                .unwrap_or_else(|e| e.into_inner())
                .entry(label)
                .or_default() += 1;
        }
        let body_text = String::from_utf8_lossy(&p.body);
        let reply_text = String::from_utf8_lossy(&raw);
        if let Some(t) = transcript.as_deref_mut() {
            t.push(format!(
                "#{i} {clock_note}{} {} body={} -> {} {}",
                p.method,
                clip(&p.uri, 80),
                clip(&body_text, 120),
                status.as_u16(),
                clip(&reply_text, 200),
            ));
        }
        if let Err(why) = check(&mut m, &p, status, &raw, before != after, now) {
            return Err(TestCaseError::fail(format!(
                "step #{i}: {why}\n  request: {clock_note}{} {}\n  body ({} bytes): {}\n  \
                 reply: {} {}\n  state diff:\n{}  state before:\n{}",
                p.method,
                clip(&p.uri, 300),
                p.body.len(),
                clip(&body_text, 300),
                status.as_u16(),
                clip(&reply_text, 500),
                digest_diff(&before, &after),
                clip(&before, 3000),
            )));
        }
    }
    Ok(sent)
}

#[test]
fn random_requests_never_5xx_and_refusals_change_nothing() {
    let seed = crate::support::proptest_seed(DEFAULT_SEED);
    eprintln!("proptest_router: seed {seed} (set FP_PROPTEST_SEED to replay another)");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let mut runner = crate::support::seeded_runner(CASES, 4_000, seed);
    let requests = AtomicU64::new(0);
    let coverage = Coverage::default();
    let started = Instant::now();
    let result = runner.run(&vec(step(), 1..=MAX_STEPS), |steps| {
        let sent = rt.block_on(run_sequence(&steps, None, Some(&coverage)))?;
        requests.fetch_add(sent, Ordering::Relaxed);
        Ok(())
    });
    match result {
        Ok(()) => {}
        Err(TestError::Fail(why, minimal)) => {
            let mut transcript = Vec::new();
            let _ = rt.block_on(run_sequence(&minimal, Some(&mut transcript), None));
            panic!(
                "seed {seed}: {why}\n\nminimal failing sequence, replayed ({} steps):\n{}\n\n\
                 as generated:\n{minimal:#?}",
                minimal.len(),
                transcript.join("\n")
            );
        }
        Err(e) => panic!("seed {seed}: {e}"),
    }
    let requests = requests.into_inner();
    eprintln!(
        "proptest_router: {requests} requests in {CASES} sequences, {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let coverage = coverage.into_inner().unwrap_or_else(|e| e.into_inner());
    let table: Vec<String> = coverage.iter().map(|(k, n)| format!("{k}: {n}")).collect();
    eprintln!("proptest_router: outcomes\n  {}", table.join("\n  "));
    assert!(
        requests >= MIN_REQUESTS,
        "only {requests} requests were sent; the property needs at least {MIN_REQUESTS}"
    );
    let missed: Vec<&str> = MUST_REACH
        .iter()
        .copied()
        .filter(|o| !coverage.contains_key(*o))
        .collect();
    assert!(
        missed.is_empty(),
        "the strategy never reached {missed:?}; it has gone shallow"
    );
}
