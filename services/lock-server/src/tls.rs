//! TLS on the C1 surface: the server's certificate and key, an
//! optional client CA (mutual TLS), their reload, and the accept loop that
//! serves the C1 router over `tokio-rustls`.
//!
//! rustls runs on the `ring` provider, installed explicitly in every config
//! built here (never a process default). The certificate and key are read
//! from PEM files at start; [`CertStore`] hands the current pair to every
//! handshake and is swapped in place by [`CertStore::reload`], which the
//! server calls on SIGHUP and when either file changes (inode, size or
//! modification time, polled every [`RELOAD_POLL`]). A new pair that does not load (unreadable,
//! not PEM, a key that does not match the certificate) is logged at ERROR and
//! the pair in use is kept. The client CA is read once, at start; changing it
//! needs a restart.
//!
//! [`serve`] accepts connections itself (axum's `serve` speaks only plain
//! TCP): accept, `TCP_NODELAY`, the TLS handshake bounded by
//! [`HANDSHAKE_TIMEOUT`] on the connection's own task (a client that opens a
//! socket and sends nothing holds no one else up and is dropped when the
//! timeout fires), then hyper's HTTP/1.1 connection on the same router as the
//! plain path. On shutdown it stops accepting, asks every connection to close
//! once its in-flight request is answered, and returns when all have.

use std::future::Future;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, SystemTime};

use axum::Router;
use hyper_util::rt::TokioIo;
use hyper_util::service::TowerToHyperService;
use rustls::crypto::CryptoProvider;
use rustls::server::{ClientHello, ResolvesServerCert, WebPkiClientVerifier};
use rustls::sign::CertifiedKey;
use rustls::{RootCertStore, ServerConfig};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use crate::config::{ConfigError, TlsFiles};

/// How long a client has to complete the TLS handshake after its TCP
/// connection is accepted.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// How often the certificate and key files' modification times are read.
pub const RELOAD_POLL: Duration = Duration::from_secs(2);

/// C4 key of the server certificate (PEM: the leaf first, then its chain).
pub const KEY_CERT: &str = "lock.tls.cert";
/// C4 key of the server's private key (PEM: PKCS#8, PKCS#1 or SEC1).
pub const KEY_KEY: &str = "lock.tls.key";
/// C4 key of the CA bundle client certificates must chain to (mutual TLS).
pub const KEY_CLIENT_CA: &str = "lock.tls.client-ca";

/// Which transport security the server runs, as `/v1/config` and the
/// start-up log name it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum TlsMode {
    /// Plain HTTP.
    #[default]
    None,
    /// TLS, any client.
    Tls,
    /// TLS with a client certificate required and verified.
    Mtls,
}

impl TlsMode {
    /// `none`, `tls` or `mtls`.
    pub fn as_str(self) -> &'static str {
        match self {
            TlsMode::None => "none",
            TlsMode::Tls => "tls",
            TlsMode::Mtls => "mtls",
        }
    }
}

/// The crypto provider every TLS config of the server is built on.
fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn refused(key: &'static str, path: &Path, why: impl Into<String>) -> ConfigError {
    ConfigError {
        key,
        value: path.display().to_string(),
        why: why.into(),
    }
}

/// Reads every certificate of the PEM file at `path` (at least one).
fn read_certs(key: &'static str, path: &Path) -> Result<Vec<CertificateDer<'static>>, ConfigError> {
    let bytes = std::fs::read(path).map_err(|e| refused(key, path, format!("cannot read: {e}")))?;
    let certs = CertificateDer::pem_slice_iter(&bytes)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| refused(key, path, format!("not a PEM certificate file: {e}")))?;
    if certs.is_empty() {
        return Err(refused(key, path, "holds no PEM CERTIFICATE block"));
    }
    Ok(certs)
}

/// Loads the certificate chain and key into a [`CertifiedKey`], checking
/// that the key is the certificate's.
fn load_pair(cert: &Path, key: &Path) -> Result<CertifiedKey, ConfigError> {
    let chain = read_certs(KEY_CERT, cert)?;
    let bytes =
        std::fs::read(key).map_err(|e| refused(KEY_KEY, key, format!("cannot read: {e}")))?;
    let der = PrivateKeyDer::from_pem_slice(&bytes)
        .map_err(|e| refused(KEY_KEY, key, format!("no PEM private key: {e}")))?;
    CertifiedKey::from_der(chain, der, &provider()).map_err(|e| {
        refused(
            KEY_KEY,
            key,
            format!("unusable with {}: {e}", cert.display()),
        )
    })
}

/// What identifies one version of a file: its inode (a file renamed into
/// place, or a Kubernetes Secret's symlink swap, is a new one), size and
/// modification time. `None` for a file that cannot be read (a reload
/// attempt will say why).
type FileStamp = Option<(u64, u64, Option<SystemTime>)>;

/// The certificate's and the key's [`FileStamp`]s.
type Stamp = (FileStamp, FileStamp);

fn stamp(cert: &Path, key: &Path) -> Stamp {
    use std::os::unix::fs::MetadataExt;
    let one = |p: &Path| {
        std::fs::metadata(p)
            .ok()
            .map(|m| (m.ino(), m.len(), m.modified().ok()))
    };
    (one(cert), one(key))
}

/// The server's current certificate and key, swapped in place on reload.
#[derive(Debug)]
pub struct CertStore {
    cert: PathBuf,
    key: PathBuf,
    current: RwLock<Arc<CertifiedKey>>,
    /// The files' modification times at the last load attempt.
    seen: Mutex<Stamp>,
}

impl CertStore {
    /// Loads the pair at `cert` and `key`; the error names the key and the file.
    pub fn load(cert: &Path, key: &Path) -> Result<Self, ConfigError> {
        let seen = stamp(cert, key);
        let pair = load_pair(cert, key)?;
        Ok(CertStore {
            cert: cert.to_path_buf(),
            key: key.to_path_buf(),
            current: RwLock::new(Arc::new(pair)),
            seen: Mutex::new(seen),
        })
    }

    /// Reads both files again and, if they load, serves the new pair from
    /// the next handshake on. On failure the pair in use is kept and the
    /// error returned (the caller logs it).
    pub fn reload(&self) -> Result<(), ConfigError> {
        *self.seen.lock().unwrap_or_else(|e| e.into_inner()) = stamp(&self.cert, &self.key);
        let pair = load_pair(&self.cert, &self.key)?;
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(pair);
        Ok(())
    }

    /// Whether either file differs (inode, size or modification time) from
    /// the last load attempt.
    pub fn changed(&self) -> bool {
        *self.seen.lock().unwrap_or_else(|e| e.into_inner()) != stamp(&self.cert, &self.key)
    }

    /// Reloads, logging the outcome (`why`: what asked for it).
    pub fn reload_logged(&self, why: &'static str) {
        match self.reload() {
            Ok(()) => tracing::info!(
                event = "tls_reloaded",
                trigger = why,
                cert = %self.cert.display(),
                "TLS certificate and key reloaded"
            ),
            Err(e) => tracing::error!(
                event = "tls_reload_failed",
                trigger = why,
                error = %e,
                "TLS reload refused; the certificate in use is kept"
            ),
        }
    }

    /// The pair the next handshake is answered with.
    pub fn current(&self) -> Arc<CertifiedKey> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }
}

impl ResolvesServerCert for CertStore {
    fn resolve(&self, _hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}

/// The server's TLS settings, loaded: the acceptor every connection is
/// handshaken with, the reloadable certificate, and the mode.
#[derive(Clone)]
pub struct TlsServer {
    /// Handshakes accepted connections with the current certificate.
    pub acceptor: TlsAcceptor,
    /// The certificate and key in use (reloaded in place).
    pub certs: Arc<CertStore>,
    /// [`TlsMode::Tls`], or [`TlsMode::Mtls`] with a client CA.
    pub mode: TlsMode,
}

impl std::fmt::Debug for TlsServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsServer")
            .field("certs", &self.certs)
            .field("mode", &self.mode)
            .finish_non_exhaustive()
    }
}

impl TlsServer {
    /// Loads the certificate, the key and, if given, the client CA. Errors
    /// name the C4 key and the file.
    pub fn load(files: &TlsFiles) -> Result<Self, ConfigError> {
        let certs = Arc::new(CertStore::load(&files.cert, &files.key)?);
        let builder = ServerConfig::builder_with_provider(provider())
            .with_safe_default_protocol_versions()
            .map_err(|e| refused(KEY_CERT, &files.cert, e.to_string()))?;
        let (builder, mode) = match &files.client_ca {
            None => (builder.with_no_client_auth(), TlsMode::Tls),
            Some(ca) => {
                let mut roots = RootCertStore::empty();
                for c in read_certs(KEY_CLIENT_CA, ca)? {
                    roots.add(c).map_err(|e| {
                        refused(KEY_CLIENT_CA, ca, format!("not a CA certificate: {e}"))
                    })?;
                }
                let verifier =
                    WebPkiClientVerifier::builder_with_provider(roots.into(), provider())
                        .build()
                        .map_err(|e| refused(KEY_CLIENT_CA, ca, e.to_string()))?;
                (builder.with_client_cert_verifier(verifier), TlsMode::Mtls)
            }
        };
        let mut config = builder.with_cert_resolver(certs.clone());
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        Ok(TlsServer {
            acceptor: TlsAcceptor::from(Arc::new(config)),
            certs,
            mode,
        })
    }
}

/// Reloads `certs` on SIGHUP and whenever the files change, until `stop` resolves.
pub async fn watch(certs: Arc<CertStore>, stop: impl Future<Output = ()>) {
    let mut hup = match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) {
        Ok(s) => Some(s),
        Err(e) => {
            tracing::warn!(error = %e, "no SIGHUP handler: TLS reloads on file changes only");
            None
        }
    };
    let mut tick = tokio::time::interval(RELOAD_POLL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    tokio::pin!(stop);
    loop {
        let sighup = async {
            match hup.as_mut() {
                Some(s) => {
                    s.recv().await;
                }
                None => std::future::pending::<()>().await,
            }
        };
        tokio::select! {
            _ = &mut stop => return,
            _ = sighup => certs.reload_logged("sighup"),
            _ = tick.tick() => {
                if certs.changed() {
                    certs.reload_logged("file_changed");
                }
            }
        }
    }
}

/// Serves `app` over TLS on `listener` until `shutdown` resolves, then
/// drains: no new connection is accepted (nor a pending handshake
/// finished), every open connection closes once its in-flight request is
/// answered, and this returns when the last one has.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    tls: TlsServer,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    // `stop_tx` tells every connection to finish; the server waits on
    // `done_tx.closed()`, which resolves once every connection's `done_rx`
    // clone has been dropped.
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    let (done_tx, done_rx) = tokio::sync::watch::channel(());
    let watcher = {
        let mut stop = stop_rx.clone();
        tokio::spawn(watch(tls.certs.clone(), async move {
            let _ = stop.changed().await;
        }))
    };
    tokio::pin!(shutdown);
    loop {
        let (tcp, _peer) = tokio::select! {
            _ = &mut shutdown => break,
            accepted = listener.accept() => match accepted {
                Ok(a) => a,
                Err(e) => {
                    // Out of descriptors or a connection reset before it was
                    // accepted: keep serving those already open.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let _ = tcp.set_nodelay(true);
        let acceptor = tls.acceptor.clone();
        let app = app.clone();
        let mut stop = stop_rx.clone();
        let done = done_rx.clone();
        tokio::spawn(async move {
            let handshake = tokio::time::timeout(HANDSHAKE_TIMEOUT, acceptor.accept(tcp));
            let stream = tokio::select! {
                r = handshake => match r {
                    Ok(Ok(s)) => s,
                    Ok(Err(e)) => {
                        tracing::debug!(error = %e, "TLS handshake failed");
                        return;
                    }
                    Err(_) => {
                        tracing::debug!("TLS handshake not completed within {HANDSHAKE_TIMEOUT:?}");
                        return;
                    }
                },
                _ = stop.changed() => return,
            };
            let conn = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(stream), TowerToHyperService::new(app));
            tokio::pin!(conn);
            tokio::select! {
                _ = conn.as_mut() => {}
                _ = stop.changed() => {
                    conn.as_mut().graceful_shutdown();
                    let _ = conn.as_mut().await;
                }
            }
            drop(done);
        });
    }
    drop(listener);
    drop(done_rx);
    let _ = stop_tx.send(true);
    done_tx.closed().await;
    let _ = watcher.await;
    Ok(())
}
