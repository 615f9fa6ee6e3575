//! TLS on the C1 surface, in process: `run_tls` on a loopback
//! port with certificates made at test time (`fencepost_harness::pki`, none
//! committed), and a raw `tokio-rustls` client. A wrong CA, an expired
//! certificate and a missing or foreign client certificate are refused with
//! nothing reaching the service; the certificate reloads in place; a client
//! that stalls its handshake holds no one else up; `/v1/config` names the
//! mode; shutdown drains.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use fencepost_api::MonotonicClock;
use fencepost_harness::pki::{Ca, Issued, Usage, Validity};
use lock_server::config::TlsFiles;
use lock_server::tls::TlsServer;
use lock_server::{Limits, LockService};
use rustls::RootCertStore;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::sync::oneshot;
use tokio::task::JoinHandle;

/// How long any awaited condition may take.
const PATIENCE: Duration = Duration::from_secs(20);

fn dir(test: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("fencepost-ls-tls-{}-{test}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A lock service on `memory:`, served on 127.0.0.1 over TLS with `files`
/// (or plain HTTP without), stopped by the sender.
struct Served {
    addr: SocketAddr,
    service: Arc<LockService>,
    stop: Option<oneshot::Sender<()>>,
    task: JoinHandle<std::io::Result<()>>,
}

async fn serve(files: Option<&TlsFiles>) -> Served {
    let service = lock_server::start_service(
        Limits::default(),
        "memory:",
        Arc::new(MonotonicClock::new()),
    )
    .await
    .unwrap();
    let listener = lock_server::listen("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = oneshot::channel::<()>();
    let stop = async move {
        let _ = rx.await;
    };
    let task = match files {
        Some(f) => {
            let tls = TlsServer::load(f).expect("TLS files load");
            tokio::spawn(lock_server::run_tls(listener, service.clone(), tls, stop))
        }
        None => tokio::spawn(lock_server::run(listener, service.clone(), stop)),
    };
    Served {
        addr,
        service,
        stop: Some(tx),
        task,
    }
}

impl Served {
    /// Stops the server; it must return (drained) within [`PATIENCE`].
    async fn shut(mut self) {
        let _ = self.stop.take().unwrap().send(());
        tokio::time::timeout(PATIENCE, self.task)
            .await
            .expect("the server drains and returns")
            .unwrap()
            .unwrap();
    }
}

fn certs(path: &Path) -> Vec<CertificateDer<'static>> {
    CertificateDer::pem_file_iter(path)
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

/// A client config trusting `ca`, presenting `identity` if given.
fn client(ca: &Path, identity: Option<&Issued>) -> Arc<rustls::ClientConfig> {
    let mut roots = RootCertStore::empty();
    for c in certs(ca) {
        roots.add(c).unwrap();
    }
    let b = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots);
    Arc::new(match identity {
        Some(id) => b
            .with_client_auth_cert(
                certs(&id.cert),
                PrivateKeyDer::from_pem_file(&id.key).unwrap(),
            )
            .unwrap(),
        None => b.with_no_client_auth(),
    })
}

/// One request over a fresh TLS connection (`Connection: close`): the
/// status and body, or the error (handshake, or the TLS layer at the first
/// read) as text.
async fn call(
    addr: SocketAddr,
    config: Arc<rustls::ClientConfig>,
    method: &str,
    path: &str,
    body: &str,
) -> Result<(u16, String), String> {
    let tcp = TcpStream::connect(addr).await.map_err(|e| e.to_string())?;
    let name = ServerName::IpAddress(addr.ip().into());
    let mut tls = tokio_rustls::TlsConnector::from(config)
        .connect(name, tcp)
        .await
        .map_err(|e| format!("handshake: {e}"))?;
    let request = format!(
        "{method} {path} HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\n\
         content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    tls.write_all(request.as_bytes())
        .await
        .map_err(|e| format!("write: {e}"))?;
    let mut reply = Vec::new();
    let read = tls.read_to_end(&mut reply).await;
    let text = String::from_utf8_lossy(&reply).into_owned();
    let Some((head, body)) = text.split_once("\r\n\r\n") else {
        return Err(format!("read: {read:?}, {text:?}"));
    };
    let status = head
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("no status in {head:?}"))?;
    Ok((status, body.to_string()))
}

/// A CA and a loopback server certificate it signed, as `TlsFiles`.
fn server_pki(dir: &Path, client_ca: Option<&Ca>) -> (Ca, TlsFiles) {
    let ca = Ca::new(dir, "server").unwrap();
    let leaf = ca.loopback_server("lock").unwrap();
    let files = TlsFiles {
        cert: leaf.cert,
        key: leaf.key,
        client_ca: client_ca.map(|c| c.cert().to_path_buf()),
    };
    (ca, files)
}

#[tokio::test]
async fn v1_config_names_the_mode_plain_tls_and_mtls() {
    let d = dir("mode");
    let plain = serve(None).await;
    let body = reqwest::get(format!("http://{}/v1/config", plain.addr))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(body.contains(r#""tls":"none""#), "{body}");
    plain.shut().await;

    let (ca, files) = server_pki(&d, None);
    let s = serve(Some(&files)).await;
    let (status, body) = call(s.addr, client(ca.cert(), None), "GET", "/v1/config", "")
        .await
        .unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(r#""tls":"tls""#), "{body}");
    s.shut().await;

    let clients = Ca::new(&d, "clients").unwrap();
    let id = clients
        .issue("worker", &["worker"], Usage::Client, Validity::Current)
        .unwrap();
    let (ca, files) = server_pki(&d, Some(&clients));
    let s = serve(Some(&files)).await;
    let (status, body) = call(
        s.addr,
        client(ca.cert(), Some(&id)),
        "GET",
        "/v1/config",
        "",
    )
    .await
    .unwrap();
    assert_eq!(status, 200, "{body}");
    assert!(body.contains(r#""tls":"mtls""#), "{body}");
    s.shut().await;
}

#[tokio::test]
async fn a_client_trusting_another_ca_fails_the_handshake_and_nothing_reaches_the_service() {
    let d = dir("wrong-ca");
    let (_ca, files) = server_pki(&d, None);
    let other = Ca::new(&d, "other").unwrap();
    let s = serve(Some(&files)).await;
    let before = s.service.state_digest().await;
    let e = call(
        s.addr,
        client(other.cert(), None),
        "POST",
        "/v1/sessions",
        r#"{"owner_id":"mallory","ttl_ms":60000}"#,
    )
    .await
    .unwrap_err();
    assert!(
        e.starts_with("handshake:") && e.contains("UnknownIssuer"),
        "{e}"
    );
    assert_eq!(
        s.service.state_digest().await,
        before,
        "a session was opened"
    );
    s.shut().await;
}

#[tokio::test]
async fn an_expired_server_certificate_is_refused() {
    let d = dir("expired");
    let ca = Ca::new(&d, "server").unwrap();
    let old = ca
        .issue("lock", &["127.0.0.1"], Usage::Server, Validity::Expired)
        .unwrap();
    let files = TlsFiles {
        cert: old.cert,
        key: old.key,
        client_ca: None,
    };
    let s = serve(Some(&files)).await;
    let e = call(s.addr, client(ca.cert(), None), "GET", "/v1/config", "")
        .await
        .unwrap_err();
    assert!(e.starts_with("handshake:") && e.contains("expired"), "{e}");
    s.shut().await;
}

#[tokio::test]
async fn mtls_refuses_no_certificate_and_a_foreign_one_and_serves_its_own() {
    let d = dir("mtls");
    let clients = Ca::new(&d, "clients").unwrap();
    let foreign = Ca::new(&d, "foreign").unwrap();
    let (ca, files) = server_pki(&d, Some(&clients));
    let s = serve(Some(&files)).await;
    let before = s.service.state_digest().await;
    let open = r#"{"owner_id":"w","ttl_ms":60000}"#;
    // Under TLS 1.3 the client finishes its half of the handshake before the
    // server checks the certificate: the refusal arrives at the first read.
    let e = call(
        s.addr,
        client(ca.cert(), None),
        "POST",
        "/v1/sessions",
        open,
    )
    .await
    .unwrap_err();
    assert!(
        e.contains("CertificateRequired") || e.contains("handshake"),
        "{e}"
    );
    let stranger = foreign
        .issue("stranger", &["stranger"], Usage::Client, Validity::Current)
        .unwrap();
    let e = call(
        s.addr,
        client(ca.cert(), Some(&stranger)),
        "POST",
        "/v1/sessions",
        open,
    )
    .await
    .unwrap_err();
    assert!(
        e.contains("UnknownCA") || e.contains("BadCertificate"),
        "{e}"
    );
    assert_eq!(
        s.service.state_digest().await,
        before,
        "a refused client opened a session"
    );
    let worker = clients
        .issue("worker", &["worker"], Usage::Client, Validity::Current)
        .unwrap();
    let (status, body) = call(
        s.addr,
        client(ca.cert(), Some(&worker)),
        "POST",
        "/v1/sessions",
        open,
    )
    .await
    .unwrap();
    assert_eq!(status, 201, "{body}");
    s.shut().await;
}

#[tokio::test]
async fn reload_serves_the_new_certificate_and_keeps_the_old_one_when_the_new_is_bad() {
    let d = dir("reload");
    let (old_ca, files) = server_pki(&d, None);
    let tls = TlsServer::load(&files).unwrap();
    let certs = tls.certs.clone();
    let service = lock_server::start_service(
        Limits::default(),
        "memory:",
        Arc::new(MonotonicClock::new()),
    )
    .await
    .unwrap();
    let listener = lock_server::listen("127.0.0.1:0".parse().unwrap()).unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = oneshot::channel::<()>();
    let task = tokio::spawn(lock_server::run_tls(listener, service, tls, async move {
        let _ = rx.await;
    }));
    assert_eq!(
        call(addr, client(old_ca.cert(), None), "GET", "/healthz", "")
            .await
            .unwrap()
            .0,
        200
    );

    // A key that is not the certificate's: refused, the old pair still served.
    let new_dir = d.join("new");
    let new_ca = Ca::new(&new_dir, "rotated").unwrap();
    let new_leaf = new_ca.loopback_server("lock").unwrap();
    std::fs::copy(&new_leaf.cert, &files.cert).unwrap();
    let e = certs.reload().unwrap_err();
    assert!(e.to_string().starts_with("--tls-key \""), "{e}");
    assert_eq!(
        call(addr, client(old_ca.cert(), None), "GET", "/healthz", "")
            .await
            .unwrap()
            .0,
        200
    );

    // The matching key: the next handshake is the new CA's.
    std::fs::copy(&new_leaf.key, &files.key).unwrap();
    certs.reload().unwrap();
    assert_eq!(
        call(addr, client(new_ca.cert(), None), "GET", "/healthz", "")
            .await
            .unwrap()
            .0,
        200
    );
    let e = call(addr, client(old_ca.cert(), None), "GET", "/healthz", "")
        .await
        .unwrap_err();
    assert!(e.contains("UnknownIssuer"), "{e}");
    let _ = tx.send(());
    tokio::time::timeout(PATIENCE, task)
        .await
        .unwrap()
        .unwrap()
        .unwrap();
}

#[tokio::test]
async fn the_watcher_reloads_when_the_files_change() {
    let d = dir("watch");
    let (_old, files) = server_pki(&d, None);
    let s = serve(Some(&files)).await;
    let new_ca = Ca::new(&d.join("new"), "rotated").unwrap();
    let leaf = new_ca.loopback_server("lock").unwrap();
    // Both files replaced (a rename, as a Secret update does); the poll
    // (every 2 s) picks them up.
    std::fs::rename(&leaf.key, &files.key).unwrap();
    std::fs::rename(&leaf.cert, &files.cert).unwrap();
    let deadline = Instant::now() + PATIENCE;
    loop {
        match call(s.addr, client(new_ca.cert(), None), "GET", "/healthz", "").await {
            Ok((200, _)) => break,
            other => assert!(Instant::now() < deadline, "never reloaded: {other:?}"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    s.shut().await;
}

#[tokio::test]
async fn a_stalled_handshake_does_not_stop_other_clients() {
    let d = dir("stall");
    let (ca, files) = server_pki(&d, None);
    let s = serve(Some(&files)).await;
    // Connected, silent: its handshake waits on its own task.
    let mut stalled = Vec::new();
    for _ in 0..8 {
        stalled.push(TcpStream::connect(s.addr).await.unwrap());
    }
    let cfg = client(ca.cert(), None);
    for _ in 0..5 {
        let r = tokio::time::timeout(
            Duration::from_secs(5),
            call(s.addr, cfg.clone(), "GET", "/healthz", ""),
        )
        .await
        .expect("served while others stall their handshake");
        assert_eq!(r.unwrap().0, 200);
    }
    drop(stalled);
    s.shut().await;
}

#[tokio::test]
async fn shutdown_closes_idle_connections_and_returns() {
    let d = dir("drain");
    let (ca, files) = server_pki(&d, None);
    let s = serve(Some(&files)).await;
    // A kept-alive connection, idle after one exchange.
    let tcp = TcpStream::connect(s.addr).await.unwrap();
    let mut tls = tokio_rustls::TlsConnector::from(client(ca.cert(), None))
        .connect(ServerName::IpAddress(s.addr.ip().into()), tcp)
        .await
        .unwrap();
    tls.write_all(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
        .await
        .unwrap();
    let mut buf = [0u8; 512];
    let n = tls.read(&mut buf).await.unwrap();
    assert!(buf[..n].starts_with(b"HTTP/1.1 200"));
    s.shut().await;
    // The server closed it.
    let mut rest = Vec::new();
    let closed = tokio::time::timeout(PATIENCE, tls.read_to_end(&mut rest)).await;
    assert!(closed.is_ok(), "the idle connection was left open");
}

#[test]
fn unusable_files_are_refused_naming_the_key_and_the_file() {
    let d = dir("bad-files");
    let (_ca, files) = server_pki(&d, None);
    let missing = TlsFiles {
        cert: d.join("nope.pem"),
        ..files.clone()
    };
    let e = TlsServer::load(&missing).unwrap_err().to_string();
    assert!(
        e.starts_with("--tls-cert \"") && e.contains("nope.pem"),
        "{e}"
    );
    let garbage = d.join("garbage.pem");
    std::fs::write(&garbage, "not pem at all").unwrap();
    let e = TlsServer::load(&TlsFiles {
        key: garbage.clone(),
        ..files.clone()
    })
    .unwrap_err()
    .to_string();
    assert!(
        e.starts_with("--tls-key \"") && e.contains("garbage.pem"),
        "{e}"
    );
    let e = TlsServer::load(&TlsFiles {
        client_ca: Some(garbage),
        ..files.clone()
    })
    .unwrap_err()
    .to_string();
    assert!(e.starts_with("--tls-client-ca \""), "{e}");
}
