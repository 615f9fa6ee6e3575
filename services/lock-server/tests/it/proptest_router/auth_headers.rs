//! The hostile-input property extended to `Authorization` headers:
//! on a server with API tokens, random sequences of requests to every
//! endpoint carry a random header — none, random bytes, a random or
//! truncated bearer token, another scheme, a token hash, or a real token of
//! one of four principals — and name their own, another principal's or an
//! unknown session, and keys in and out of scope. No reply is a 5xx; every
//! refusal has the C1 body and leaves memory and store as they were; a
//! request without a token in force is 401 with `WWW-Authenticate: Bearer`
//! on every path but the probes; and a session id that is not the caller's
//! never gets a 2xx.

use std::sync::atomic::{AtomicU64, Ordering};

use axum::http::{HeaderValue, Method, StatusCode, header};
use proptest::collection::vec;
use proptest::prelude::*;
use proptest::test_runner::TestCaseError;
use serde_json::{Value, json};

use crate::auth::AuthServer;

/// Sequences run, each on a fresh server.
const CASES: u32 = 48;
/// Requests per sequence.
const MAX_STEPS: usize = 60;
/// The default seed; `FP_PROPTEST_SEED` overrides it.
const DEFAULT_SEED: u64 = 0x2828_a07e_5eed_0028;

/// Who a request claims to be.
#[derive(Clone, Debug)]
enum Auth {
    None,
    /// These bytes as the header value (skipped when not a valid value).
    Raw(Vec<u8>),
    /// `Bearer` and random visible ASCII.
    RandomBearer(String),
    /// A real token of principal `i`, cut to `cut` bytes when shorter.
    Cut(usize, usize),
    /// A real token of principal `i` in another scheme.
    Basic(usize),
    /// The hash of principal `i`'s token, as if it were a token.
    Hash(usize),
    /// A real token of principal `i` (0 alice, 1 bob, 2 ops, 3 mon).
    Real(usize),
}

/// Which session id a request names.
#[derive(Clone, Copy, Debug)]
enum Sid {
    /// Principal `i`'s session (alice's, bob's, ops's).
    Of(usize),
    Unknown,
}

#[derive(Clone, Debug)]
struct Step {
    auth: Auth,
    endpoint: usize,
    sid: Sid,
    key: usize,
    token: u64,
}

const KEYS: [&str; 4] = ["payout:1", "payout:2", "refund:1", "other"];

fn auth() -> impl Strategy<Value = Auth> {
    prop_oneof![
        Just(Auth::None),
        vec(any::<u8>(), 0..120).prop_map(Auth::Raw),
        "[ -~]{0,80}".prop_map(Auth::RandomBearer),
        (0..4usize, 0..72usize).prop_map(|(i, c)| Auth::Cut(i, c)),
        (0..4usize).prop_map(Auth::Basic),
        (0..4usize).prop_map(Auth::Hash),
        (0..4usize).prop_map(Auth::Real),
        (0..4usize).prop_map(Auth::Real),
    ]
}

fn step() -> impl Strategy<Value = Step> {
    (
        auth(),
        0..11usize,
        prop_oneof![(0..3usize).prop_map(Sid::Of), Just(Sid::Unknown)],
        0..KEYS.len(),
        0..4u64,
    )
        .prop_map(|(auth, endpoint, sid, key, token)| Step {
            auth,
            endpoint,
            sid,
            key,
            token,
        })
}

/// The request of `endpoint` for session `sid`, key `key`, token `token`.
fn request(endpoint: usize, sid: &str, key: &str, token: u64) -> (Method, String, Option<Value>) {
    match endpoint {
        0 => (
            Method::POST,
            "/v1/sessions".into(),
            Some(json!({"owner_id": "p", "ttl_ms": 60_000})),
        ),
        1 => (Method::POST, format!("/v1/sessions/{sid}/heartbeat"), None),
        2 => (Method::DELETE, format!("/v1/sessions/{sid}"), None),
        3 => (
            Method::POST,
            format!("/v1/locks/{key}/acquire"),
            Some(json!({"session_id": sid, "ttl_ms": 30_000})),
        ),
        4 => (
            Method::POST,
            format!("/v1/locks/{key}/renew"),
            Some(json!({"session_id": sid, "token": token})),
        ),
        5 => (
            Method::POST,
            format!("/v1/locks/{key}/release"),
            Some(json!({"session_id": sid, "token": token})),
        ),
        6 => (
            Method::POST,
            format!("/v1/locks/{key}/revoke"),
            Some(json!({"reason": "r"})),
        ),
        7 => (Method::GET, format!("/v1/locks/{key}"), None),
        8 => (Method::GET, "/v1/config".into(), None),
        9 => (Method::GET, "/metrics".into(), None),
        _ => (Method::GET, "/healthz".into(), None),
    }
}

/// Replies seen over the whole run: 2xx, 401, 403 (the property must reach each).
static SEEN: [AtomicU64; 3] = [AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)];

async fn run(steps: &[Step]) -> Result<(), TestCaseError> {
    let s = AuthServer::new().await;
    let tokens = [&s.alice, &s.bob, &s.ops, &s.mon];
    // One session each for alice, bob and ops (mon may not open one).
    let mut sessions = Vec::new();
    for (i, t) in tokens.iter().take(3).enumerate() {
        sessions.push(s.open(t, &format!("p{i}")).await);
    }
    s.grant(&s.alice, "payout:1", &sessions[0]).await;
    s.grant(&s.bob, "refund:1", &sessions[1]).await;
    for (n, st) in steps.iter().enumerate() {
        let value: Option<Vec<u8>> = match &st.auth {
            Auth::None => None,
            Auth::Raw(b) => Some(b.clone()),
            Auth::RandomBearer(t) => Some(format!("Bearer {t}").into_bytes()),
            Auth::Cut(i, c) => {
                let secret = &tokens[*i].secret;
                Some(format!("Bearer {}", &secret[..(*c).min(secret.len())]).into_bytes())
            }
            Auth::Basic(i) => Some(format!("Basic {}", tokens[*i].secret).into_bytes()),
            Auth::Hash(i) => {
                let hash = tokens[*i]
                    .line
                    .split_whitespace()
                    .nth(2)
                    .unwrap()
                    .to_string();
                Some(format!("Bearer {hash}").into_bytes())
            }
            Auth::Real(i) => Some(format!("Bearer {}", tokens[*i].secret).into_bytes()),
        };
        // Bytes no HTTP client could send are not sent (no header at all).
        let value = value.filter(|v| HeaderValue::from_bytes(v).is_ok());
        let header_text = value
            .as_ref()
            .map(|v| String::from_utf8_lossy(v).into_owned());
        let who = match (&st.auth, &value) {
            (Auth::Real(i), Some(_)) => Some(*i),
            // Cut at or past its end: the whole token.
            (Auth::Cut(i, c), Some(_)) if *c >= tokens[*i].secret.len() => Some(*i),
            _ => None,
        };
        let sid = match st.sid {
            Sid::Of(i) => sessions[i].clone(),
            Sid::Unknown => "0123456789abcdef0123456789abcdef".to_string(),
        };
        let key = KEYS[st.key];
        let (m, uri, body) = request(st.endpoint, &sid, key, st.token);
        let before = s.digest().await;
        let r = s
            .call_with(header_text.as_deref(), m.clone(), &uri, body)
            .await;
        let changed = s.digest().await != before;
        let ctx = format!(
            "step #{n}: {m} {uri} with {:?} -> {} {}",
            header_text, r.status, r.body
        );
        prop_assert!(r.status.as_u16() < 500, "5xx: {}", ctx);
        let seen = match r.status.as_u16() {
            200..=299 => Some(0),
            401 => Some(1),
            403 => Some(2),
            _ => None,
        };
        if let Some(i) = seen {
            SEEN[i].fetch_add(1, Ordering::Relaxed);
        }
        if r.status.as_u16() >= 400 {
            prop_assert!(!changed, "a refusal changed state: {}", ctx);
            prop_assert!(r.body["code"].is_string(), "no code: {}", ctx);
            prop_assert!(r.body["message"].is_string(), "no message: {}", ctx);
        }
        let probe = uri == "/healthz";
        if who.is_none() && !probe {
            // A real token cut or mangled is no token; a raw value might be
            // a real token only by a 2^-256 chance.
            prop_assert_eq!(r.status, StatusCode::UNAUTHORIZED, "{}", ctx);
            prop_assert_eq!(&r.body["code"], "UNAUTHENTICATED", "{}", ctx);
            prop_assert_eq!(
                r.headers
                    .get(header::WWW_AUTHENTICATE)
                    .map(|v| v.as_bytes().to_vec()),
                Some(b"Bearer".to_vec()),
                "{}",
                ctx
            );
        }
        if probe {
            prop_assert_eq!(r.status, StatusCode::OK, "{}", ctx);
        }
        // A session id that is not the caller's never gets a 2xx.
        let names_session = (1..=5).contains(&st.endpoint);
        let own = matches!((st.sid, who), (Sid::Of(a), Some(b)) if a == b);
        if names_session && !own {
            prop_assert!(!r.status.is_success(), "used a foreign session: {}", ctx);
            if who.is_some_and(|w| w != 3) && r.status == StatusCode::FORBIDDEN {
                // Session refusals all read the same, whoever's the id is.
                let msg = r.body["message"].as_str().unwrap_or("");
                prop_assert!(
                    msg.contains("not yours or does not exist") || msg.contains("scope"),
                    "{}",
                    ctx
                );
            }
        }
    }
    Ok(())
}

#[test]
fn random_authorization_headers_never_5xx_and_refusals_change_nothing() {
    let seed = crate::support::proptest_seed(DEFAULT_SEED);
    eprintln!("proptest_router auth headers: seed {seed} (FP_PROPTEST_SEED replays another)");
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let mut runner = crate::support::seeded_runner(CASES, 1_000, seed);
    let result = runner.run(&vec(step(), 1..=MAX_STEPS), |steps| {
        rt.block_on(run(&steps))
    });
    if let Err(e) = result {
        panic!("seed {seed}: {e}");
    }
    let seen: Vec<u64> = SEEN.iter().map(|n| n.load(Ordering::Relaxed)).collect();
    eprintln!(
        "proptest_router auth headers: 2xx {}, 401 {}, 403 {}",
        seen[0], seen[1], seen[2]
    );
    assert!(
        seen.iter().all(|n| *n >= 50),
        "the strategy went shallow: 2xx/401/403 = {seen:?}"
    );
}
