//! The SDK over `https://` against a real `lock-server` process started with
//! `--tls-cert/--tls-key` (and `--tls-client-ca` for mutual TLS), with
//! certificates made at test time (`fencepost_harness::pki`; none is
//! committed): a session's whole life over TLS; a wrong CA is a TLS error
//! that names the cause; mutual TLS with and without the client's
//! certificate; SIGHUP reloads a rotated certificate; a `NOT_LEADER` naming
//! an `https://` leader is followed over TLS; and two PostgreSQL replicas
//! advertising https (needs `FENCEPOST_TEST_PG_URL`, fails under `CI=true`
//! without it). Every wait is for a condition with a deadline.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use fencepost_harness::ChildService;
use fencepost_harness::pki::{Ca, Issued, Usage, Validity};
use fencepost_sdk::http::{HttpClient, HttpMethod};
use fencepost_sdk::{AcquireOptions, LockClient, LockClientConfig, LockError, MonotonicClock};

/// How long any awaited condition may take.
const PATIENCE: Duration = Duration::from_secs(30);

fn dir(test: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("fencepost-sdk-tls-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A lock-server on `memory:` (1 s TTLs) serving TLS with `leaf`, and
/// requiring client certificates of `client_ca` if given; `extra` is added
/// (a `--store` there replaces `memory:`).
async fn start(d: &Path, leaf: &Issued, client_ca: Option<&Path>, extra: &[&str]) -> ChildService {
    let store = if extra.contains(&"--store") {
        Vec::new()
    } else {
        vec!["--store".to_string(), "memory:".to_string()]
    };
    let mut args: Vec<String> = ["--session-ttl", "1s", "--default-ttl", "1s"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    args.extend(store);
    args.push("--tls-cert".into());
    args.push(leaf.cert.display().to_string());
    args.push("--tls-key".into());
    args.push(leaf.key.display().to_string());
    if let Some(ca) = client_ca {
        args.push("--tls-client-ca".into());
        args.push(ca.display().to_string());
    }
    args.extend(extra.iter().map(|s| s.to_string()));
    let stderr = d.join("lock-server.log");
    tokio::task::spawn_blocking(move || {
        let bin =
            fencepost_harness::binary("lock-server", "lock-server").expect("lock-server binary");
        ChildService::start(&bin, &args, &stderr).expect("lock-server starts")
    })
    .await
    .unwrap()
}

fn config(url: &str, ca: &Path) -> LockClientConfig {
    LockClientConfig::new(url)
        .with_tls_ca(ca)
        .with_clock(Arc::new(MonotonicClock::new()))
        .with_session_ttl(Duration::from_secs(1))
        .with_default_ttl(Duration::from_secs(1))
        .with_request_timeout(Duration::from_millis(800))
}

/// `GET path` with the SDK's public [`HttpClient`] over TLS trusting `ca`
/// (a fresh connection each time): status and body.
async fn get(url: &str, ca: &Path, path: &str) -> Result<(u16, String), String> {
    use fencepost_sdk::rustls;
    use rustls_pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for c in rustls_pki_types::CertificateDer::pem_file_iter(ca).unwrap() {
        roots.add(c.unwrap()).unwrap();
    }
    let tls = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let c = HttpClient::with_options(PATIENCE, Duration::ZERO, Some(Arc::new(tls)));
    c.send(HttpMethod::Get, &format!("{url}{path}"), None)
        .await
        .map(|r| (r.status, String::from_utf8_lossy(&r.body).into_owned()))
        .map_err(|e| e.to_string())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_lives_over_tls_open_acquire_heartbeat_release() {
    let d = dir("life");
    let ca = Ca::new(&d, "server").unwrap();
    let server = start(&d, &ca.loopback_server("lock").unwrap(), None, &[]).await;
    assert!(
        server.url().starts_with("https://127.0.0.1:"),
        "{}",
        server.url()
    );
    let client = LockClient::new(config(&server.url(), ca.cert())).unwrap();
    let session = client
        .open_session("tls-worker")
        .await
        .expect("L1 over TLS");
    let lock = session
        .acquire("payout:tls", AcquireOptions::default())
        .await
        .expect("L4 over TLS");
    assert!(lock.token() >= 1);
    // Heartbeats (every ~1/3 s for a 1 s session) keep it alive for 3 TTLs.
    let deadline = Instant::now() + PATIENCE;
    while client.stats().heartbeats < 6 {
        assert!(Instant::now() < deadline, "{:?}", client.stats());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    session
        .check_still_held(&lock)
        .expect("still held after heartbeats over TLS");
    assert!(client.rtt_histogram().len() >= 6);
    session.release(lock).await.expect("L6 over TLS");
    session.close().await;
    let (status, body) = get(&server.url(), ca.cert(), "/v1/config").await.unwrap();
    assert_eq!(status, 200);
    assert!(body.contains(r#""tls":"tls""#), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_ca_is_a_tls_transport_error_naming_the_cause() {
    let d = dir("wrong-ca");
    let ca = Ca::new(&d, "server").unwrap();
    let server = start(&d, &ca.loopback_server("lock").unwrap(), None, &[]).await;
    let other = Ca::new(&d, "other").unwrap();
    let client = LockClient::new(config(&server.url(), other.cert())).unwrap();
    let Err(e) = client.open_session("w").await else {
        panic!("a client trusting another CA opened a session");
    };
    let text = e.to_string();
    assert!(matches!(e, LockError::Transport(_)), "{e:?}");
    assert!(
        text.contains("TLS") && text.contains("not signed by a trusted CA"),
        "{text}"
    );
    // Nothing reached the handler: no session exists.
    let (_, metrics) = get(&server.url(), ca.cert(), "/metrics").await.unwrap();
    let line = metrics
        .lines()
        .find(|l| l.starts_with("lock_sessions_live "))
        .expect("lock_sessions_live is exported");
    assert!(line.ends_with(" 0"), "{line}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mutual_tls_needs_the_client_certificate_the_sdk_presents() {
    let d = dir("mtls");
    let ca = Ca::new(&d, "server").unwrap();
    let clients = Ca::new(&d, "clients").unwrap();
    let server = start(
        &d,
        &ca.loopback_server("lock").unwrap(),
        Some(clients.cert()),
        &[],
    )
    .await;
    let anonymous = LockClient::new(config(&server.url(), ca.cert())).unwrap();
    let Err(e) = anonymous.open_session("w").await else {
        panic!("a client without a certificate opened a session under mutual TLS");
    };
    assert!(e.to_string().contains("TLS"), "{e}");
    let id = clients
        .issue("worker", &["worker"], Usage::Client, Validity::Current)
        .unwrap();
    let known =
        LockClient::new(config(&server.url(), ca.cert()).with_tls_client_cert(&id.cert, &id.key))
            .unwrap();
    let s = known
        .open_session("w")
        .await
        .expect("L1 with the client certificate");
    s.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_reloads_a_rotated_certificate_in_the_running_server() {
    let d = dir("sighup");
    let old = Ca::new(&d, "old").unwrap();
    let leaf = old.loopback_server("lock").unwrap();
    let mut server = start(&d, &leaf, None, &[]).await;
    let url = server.url();
    assert_eq!(get(&url, old.cert(), "/healthz").await.unwrap().0, 200);
    // The files are rewritten in place (same names), then SIGHUP.
    let new = Ca::new(&d.join("new"), "new").unwrap();
    let rotated = new.loopback_server("lock").unwrap();
    std::fs::copy(&rotated.key, &leaf.key).unwrap();
    std::fs::copy(&rotated.cert, &leaf.cert).unwrap();
    server
        .signal(nix::sys::signal::Signal::SIGHUP)
        .expect("SIGHUP sent");
    let deadline = Instant::now() + PATIENCE;
    loop {
        match get(&url, new.cert(), "/healthz").await {
            Ok((200, _)) => break,
            other => assert!(Instant::now() < deadline, "not reloaded: {other:?}"),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(server.is_running(), "SIGHUP stopped the server");
    let client = LockClient::new(config(&url, new.cert())).unwrap();
    client
        .open_session("w")
        .await
        .expect("L1 trusting only the new CA")
        .close()
        .await;
    let e = get(&url, old.cert(), "/healthz").await.unwrap_err();
    assert!(e.contains("TLS"), "{e}");
    assert!(
        server.stderr_tail(200).contains("tls_reloaded"),
        "{}",
        server.stderr_tail(20)
    );
}

/// A plain-HTTP stand-in for a standby: every request is answered 503
/// NOT_LEADER naming `leader`.
async fn standby(leader: String) -> String {
    use axum::Json;
    use axum::http::StatusCode;
    let app = axum::Router::new().fallback(move || {
        let leader = leader.clone();
        async move {
            (
                StatusCode::SERVICE_UNAVAILABLE,
                Json(serde_json::json!({
                    "code": "NOT_LEADER",
                    "message": "not the leader",
                    "leader": leader,
                })),
            )
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_not_leader_naming_an_https_leader_is_followed_over_tls() {
    let d = dir("follow");
    let ca = Ca::new(&d, "server").unwrap();
    let server = start(&d, &ca.loopback_server("lock").unwrap(), None, &[]).await;
    let stand_in = standby(server.url()).await;
    let client = LockClient::new(config(&stand_in, ca.cert())).unwrap();
    let s = client
        .open_session("w")
        .await
        .expect("L1 followed to the https leader");
    let lock = s
        .acquire("k", AcquireOptions::default())
        .await
        .expect("L4 on the https leader");
    s.release(lock).await.unwrap();
    s.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_replicas_advertising_https_are_followed_and_fail_over() {
    let Some(pg) = crate::replicas::fresh_pg_url().await else {
        return;
    };
    let d = dir("replicas");
    let ca = Ca::new(&d, "server").unwrap();
    let leaf = ca.loopback_server("lock").unwrap();
    let lease = [
        "--store",
        pg.as_str(),
        "--leader-lease",
        "1s",
        "--grace",
        "100ms",
    ];
    let mut nodes = Vec::new();
    for i in 0..2 {
        let sub = d.join(format!("node{i}"));
        std::fs::create_dir_all(&sub).unwrap();
        nodes.push(start(&sub, &leaf, None, &lease).await);
    }
    // Which one leads: /readyz is 200 on the leader only.
    let leader = {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let mut ready = Vec::new();
            for (i, n) in nodes.iter().enumerate() {
                if matches!(get(&n.url(), ca.cert(), "/readyz").await, Ok((200, _))) {
                    ready.push(i);
                }
            }
            if let [one] = ready[..] {
                break one;
            }
            assert!(Instant::now() < deadline, "no single leader: {ready:?}");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    let other = 1 - leader;
    let (_, view) = get(&nodes[other].url(), ca.cert(), "/v1/config")
        .await
        .unwrap();
    assert!(
        view.contains(&format!(r#""leader":"{}""#, nodes[leader].url())),
        "the standby names the leader's https URL: {view}"
    );
    // The standby first: the first exchange follows NOT_LEADER over TLS.
    let client = LockClient::new(
        config(&nodes[other].url(), ca.cert())
            .with_urls([nodes[other].url(), nodes[leader].url()])
            .with_session_ttl(Duration::from_secs(10))
            .with_default_ttl(Duration::from_secs(10)),
    )
    .unwrap();
    let s = client.open_session("w").await.expect("L1 via the standby");
    let lock = s.acquire("k", AcquireOptions::default()).await.expect("L4");
    let first = lock.token();
    s.release(lock).await.unwrap();
    // The leader dies; the other takes over and the SDK moves to it over TLS.
    nodes[leader].kill9();
    let deadline = Instant::now() + PATIENCE;
    let token = loop {
        match s.acquire("k", AcquireOptions::default()).await {
            Ok(l) => break l.token(),
            Err(e) => assert!(Instant::now() < deadline, "no failover: {e}"),
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(token > first, "{token} after {first}");
}
