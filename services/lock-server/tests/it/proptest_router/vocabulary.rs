//! The vocabulary of a request, symbolically: keys (valid, refused, not
//! routed), session and token references resolved at run time, TTLs, body
//! shapes and loose bodies, the calls L1–L8 plus operational and junk
//! requests, and the clock advances between them. The values that are
//! garbage on purpose (odd session ids, wrong JSON types, out-of-range
//! numbers) are listed here.

/// Lock keys as path segments: `(segment, decoded key if valid, class)`.
/// The first four are the "hot" keys most requests use.
pub(super) fn key_pool() -> Vec<KeyCase> {
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
pub(super) const HOT_KEYS: usize = 4;

#[derive(Clone, Debug)]
pub(super) struct KeyCase {
    /// The path segment, already percent-encoded as a client would send it.
    pub(super) seg: String,
    /// The key the server should see, when it is a valid C1 key.
    pub(super) key: Option<String>,
    pub(super) class: KeyClass,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum KeyClass {
    /// A valid key: the route matches and the key is accepted.
    Valid,
    /// The route matches but the key is refused: 400 BAD_REQUEST before anything else.
    Bad,
    /// The path does not reach a key route at all (404 or 405, no assertion on which).
    Unrouted,
}

/// Session ids that are not ours: `(path segment, JSON value, path reaches the handler)`.
pub(super) const ODD_SESSIONS: &[(&str, &str, bool)] = &[
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
pub(super) const WRONG_TYPE: &[&str] = &["5", "null", "true", r#"["x"]"#, "{}", "-1.5"];

/// `ttl_ms` values that are not a plain in-range integer.
pub(super) const TTL_RAW: &[&str] = &[
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
pub(super) const TOKEN_RAW: &[&str] = &[
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
pub(super) enum LooseBody {
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

pub(super) const LOOSE_TEXT: &[&str] = &[
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
///
/// [`Model`]: super::model::Model
#[derive(Clone, Debug)]
pub(super) enum Sess {
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
pub(super) enum Tok {
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
pub(super) enum Ttl {
    Absent,
    Ms(u64),
    Raw(usize),
}

/// How a body with fields is put on the wire.
#[derive(Clone, Debug)]
pub(super) enum Shape {
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
    ///
    /// [`MAX_BODY_BYTES`]: fencepost_api::lock::MAX_BODY_BYTES
    Padded {
        over: bool,
    },
    /// Random bytes.
    Garbage(Vec<u8>),
}

pub(super) const NOT_OBJECT: &[&str] = &["null", "[]", r#""str""#, "42", "true", "[{}]"];

/// One request, symbolically.
#[derive(Clone, Debug)]
pub(super) enum Call {
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

pub(super) const OPS_PATHS: &[&str] = &["/healthz", "/readyz", "/metrics", "/v1/config"];

pub(super) const JUNK_METHODS: &[&str] =
    &["GET", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "HEAD"];

/// `{S}` is replaced by the latest session id.
pub(super) const JUNK_PATHS: &[&str] = &[
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
pub(super) fn owner_raw(i: usize) -> String {
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
pub(super) fn reason_raw(i: usize) -> String {
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
pub(super) enum Advance {
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
pub(super) struct Step {
    pub(super) advance: Advance,
    /// Whether to send a (truthful) `content-length` header with the body.
    pub(super) content_length: bool,
    pub(super) call: Call,
}
