//! API tokens in the SDK: read from `FENCEPOST_TOKEN` or the file
//! `FENCEPOST_TOKEN_FILE` names (trimmed), sent as `Authorization: Bearer`
//! on every request, never shown by `Debug`; and a heartbeat refused with
//! 403 or 401 loses the session (listeners fire), while a 403 elsewhere
//! (a key outside the token's scope) loses nothing.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use fencepost_sdk::{
    AcquireOptions, ApiToken, Clock, LockClientConfig, LockError, LostReason, TokioClock,
};

use crate::mock::{Ep, Mock, Scripted};
use crate::{client, count_losses};

const SECRET: &str = "fpt_0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef";

fn from(vars: &[(&str, &str)]) -> Result<LockClientConfig, fencepost_sdk::ConfigError> {
    let map: HashMap<String, String> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    LockClientConfig::new("http://127.0.0.1:7070").token_from_lookup(|k| map.get(k).cloned())
}

#[test]
fn the_token_comes_from_the_environment_or_a_file_trimmed() {
    assert!(from(&[]).unwrap().token.is_none());
    let c = from(&[("FENCEPOST_TOKEN", &format!("  {SECRET}\n"))]).unwrap();
    assert_eq!(c.token.unwrap().secret(), SECRET);
    let dir = std::env::temp_dir().join(format!("fp-sdk-token-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("token");
    std::fs::write(&file, format!("{SECRET}\n")).unwrap();
    let path = file.display().to_string();
    let c = from(&[("FENCEPOST_TOKEN_FILE", &path)]).unwrap();
    assert_eq!(c.token.unwrap().secret(), SECRET);
    // FENCEPOST_TOKEN wins over the file.
    let c = from(&[
        ("FENCEPOST_TOKEN", "fpt_other"),
        ("FENCEPOST_TOKEN_FILE", &path),
    ])
    .unwrap();
    assert_eq!(c.token.unwrap().secret(), "fpt_other");
    let e = from(&[("FENCEPOST_TOKEN_FILE", "/nonexistent/fp-token")]).unwrap_err();
    assert!(
        e.to_string().starts_with("lock.client.token: cannot read"),
        "{e}"
    );
    std::fs::write(&file, "  \n").unwrap();
    let e = from(&[("FENCEPOST_TOKEN_FILE", &path)]).unwrap_err();
    assert!(e.to_string().starts_with("lock.client.token="), "{e}");
    assert!(ApiToken::new("two words").is_err());
    // from_env reads it too (through from_lookup).
    let map: HashMap<&str, &str> = [("FENCEPOST_TOKEN", SECRET)].into();
    let c = LockClientConfig::from_lookup("http://127.0.0.1:7070", |k| {
        map.get(k).map(|v| v.to_string())
    })
    .unwrap();
    assert!(c.token.is_some());
}

#[test]
fn the_token_never_appears_in_debug_output() {
    let cfg =
        LockClientConfig::new("http://127.0.0.1:7070").with_token(ApiToken::new(SECRET).unwrap());
    let shown = format!("{cfg:?} {:?} {:?}", cfg.token, cfg.clone());
    assert!(!shown.contains(SECRET), "{shown}");
    assert!(!shown.contains("0123456789abcdef"), "{shown}");
    assert!(shown.contains("<redacted>"), "{shown}");
    let http = fencepost_sdk::http::HttpClient::new(Duration::from_secs(1))
        .with_authorization(Some(ApiToken::new(SECRET).unwrap().header_value().clone()));
    assert!(!format!("{http:?}").contains(SECRET));
    assert!(ApiToken::new(SECRET).unwrap().header_value().is_sensitive());
}

#[tokio::test(start_paused = true)]
async fn every_request_carries_the_bearer_token() {
    let clock: Arc<dyn Clock> = Arc::new(TokioClock::new());
    let mock = Mock::start(clock.clone()).await;
    let c = client(&mock.url, clock.clone(), |c| {
        c.with_session_ttl(Duration::from_secs(3))
            .with_token(ApiToken::new(SECRET).unwrap())
    });
    let session = c.open_session("t").await.unwrap();
    let h = session
        .acquire("k", AcquireOptions::default().ttl(Duration::from_secs(3)))
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    session.release(h).await.unwrap();
    session.close().await;
    let seen = mock.authorizations();
    assert!(seen.len() >= 4, "{seen:?}");
    assert!(mock.count(Ep::Heartbeat) >= 1);
    let want = format!("Bearer {SECRET}");
    assert!(
        seen.iter().all(|a| a.as_deref() == Some(want.as_str())),
        "{seen:?}"
    );
    // Without a token, no header at all.
    let bare = client(&mock.url, clock.clone(), |c| c);
    let before = mock.authorizations().len();
    let s = bare.open_session("bare").await.unwrap();
    s.close().await;
    assert!(mock.authorizations()[before..].iter().all(Option::is_none));
}

#[tokio::test(start_paused = true)]
async fn a_heartbeat_refused_with_403_or_401_loses_the_session_and_listeners_fire() {
    for (status, code) in [(403, "FORBIDDEN"), (401, "UNAUTHENTICATED")] {
        let clock: Arc<dyn Clock> = Arc::new(TokioClock::new());
        let mock = Mock::start(clock.clone()).await;
        let c = client(&mock.url, clock.clone(), |c| {
            c.with_session_ttl(Duration::from_secs(3))
        });
        let session = c.open_session("hb").await.unwrap();
        let a = session
            .acquire("a", AcquireOptions::default().ttl(Duration::from_secs(3)))
            .await
            .unwrap();
        let fired = count_losses(&session);
        mock.script(Ep::Heartbeat, [Scripted::err(status, code)]);
        tokio::time::sleep(Duration::from_millis(800)).await;
        assert_eq!(fired.load(Ordering::SeqCst), 1, "{code}");
        assert_eq!(
            session.lost_reason(),
            Some(LostReason::SessionUnknown),
            "{code}"
        );
        assert_eq!(
            session.check_still_held(&a).unwrap_err().reason,
            LostReason::SessionUnknown
        );
        let acquires = mock.count(Ep::Acquire);
        assert!(matches!(
            session.acquire("b", AcquireOptions::default()).await,
            Err(LockError::SessionLost { .. })
        ));
        assert_eq!(mock.count(Ep::Acquire), acquires, "no round trip");
    }
}

#[tokio::test(start_paused = true)]
async fn a_403_on_acquire_is_returned_and_loses_nothing() {
    let clock: Arc<dyn Clock> = Arc::new(TokioClock::new());
    let mock = Mock::start(clock.clone()).await;
    let c = client(&mock.url, clock.clone(), |c| {
        c.with_session_ttl(Duration::from_secs(3))
    });
    let session = c.open_session("scope").await.unwrap();
    mock.script(Ep::Acquire, [Scripted::err(403, "FORBIDDEN")]);
    let e = session
        .acquire("refund:1", AcquireOptions::default())
        .await
        .unwrap_err();
    assert!(matches!(e, LockError::Forbidden { .. }), "{e:?}");
    assert!(!e.is_transient());
    assert_eq!(session.lost_reason(), None);
    session
        .acquire("payout:1", AcquireOptions::default())
        .await
        .unwrap();
}

/// Against a real lock-server with `--auth-tokens`: the SDK's token opens a
/// session, its heartbeats are accepted (counted until three, with a
/// deadline), it acquires and releases in its scope; out of scope is
/// `Forbidden` and loses nothing; a client without a token is `Unauthenticated`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_real_server_with_tokens_accepts_the_sdks_token_and_refuses_none() {
    use fencepost_api::auth::{Role, issue_token};
    let dir = std::env::temp_dir().join(format!(
        "fp-sdk-auth-{}-{}",
        std::process::id(),
        rand::random::<u32>()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let alice = issue_token("alice", Role::Client, Some("payout:")).unwrap();
    let tokens = dir.join("tokens");
    std::fs::write(&tokens, format!("{}\n", alice.line)).unwrap();
    let log = dir.join("stderr.log");
    let server = tokio::task::spawn_blocking(move || {
        let bin =
            fencepost_harness::binary("lock-server", "lock-server").expect("lock-server binary");
        let tokens = tokens.display().to_string();
        fencepost_harness::ChildService::start(
            &bin,
            ["--store", "memory:", "--auth-tokens", tokens.as_str()],
            &log,
        )
        .expect("lock-server starts")
    })
    .await
    .unwrap();
    let clock: Arc<dyn Clock> = Arc::new(fencepost_sdk::MonotonicClock::new());
    let c = fencepost_sdk::LockClient::new(
        LockClientConfig::new(server.url())
            .with_clock(clock.clone())
            .with_session_ttl(Duration::from_millis(600))
            .with_token(ApiToken::new(&alice.secret).unwrap()),
    )
    .unwrap();
    let session = c.open_session("alice").await.unwrap();
    let h = session
        .acquire("payout:1", AcquireOptions::default())
        .await
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while c.stats().heartbeats < 3 {
        assert!(std::time::Instant::now() < deadline, "{:?}", c.stats());
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(session.lost_reason(), None);
    session.check_still_held(&h).unwrap();
    let e = session
        .acquire("refund:1", AcquireOptions::default())
        .await
        .unwrap_err();
    assert!(matches!(e, LockError::Forbidden { .. }), "{e:?}");
    assert_eq!(session.lost_reason(), None);
    session.release(h).await.unwrap();
    session.close().await;

    let anon =
        fencepost_sdk::LockClient::new(LockClientConfig::new(server.url()).with_clock(clock))
            .unwrap();
    let e = anon.open_session("anon").await.unwrap_err();
    assert!(matches!(e, LockError::Unauthenticated { .. }), "{e:?}");
}
