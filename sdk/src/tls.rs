//! The SDK's TLS configuration: one rustls `ClientConfig` per
//! [`LockClient`](crate::LockClient), built from [`TlsSettings`] by
//! [`client_config`] when the client is created (so a missing or unusable
//! file is an error of `LockClient::new`, not of the first request), on the
//! `ring` provider installed explicitly (never a process default).
//!
//! Trust is the CA bundle given, else the system's roots read with
//! `rustls-native-certs`; a client certificate and key, when given, are
//! offered to a server that asks for one (mutual TLS).

use std::path::Path;
use std::sync::Arc;

use rustls::{ClientConfig, RootCertStore};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};

use crate::config::{ConfigError, KEY_TLS_CA, KEY_TLS_CERT, KEY_TLS_KEY, TlsSettings};

fn refused(key: &'static str, path: &Path, reason: impl Into<String>) -> ConfigError {
    ConfigError::Tls {
        key,
        path: path.display().to_string(),
        reason: reason.into(),
    }
}

/// Every certificate in the PEM file at `path` (at least one).
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

/// The trust anchors: the bundle at `ca`, else the system's roots.
fn roots(ca: Option<&Path>) -> Result<RootCertStore, ConfigError> {
    let mut roots = RootCertStore::empty();
    match ca {
        Some(path) => {
            for c in read_certs(KEY_TLS_CA, path)? {
                roots
                    .add(c)
                    .map_err(|e| refused(KEY_TLS_CA, path, format!("not a CA certificate: {e}")))?;
            }
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            let (added, _ignored) = roots.add_parsable_certificates(found.certs);
            if added == 0 {
                let why = match found.errors.first() {
                    Some(e) => format!("no system CA root could be loaded ({e})"),
                    None => "no system CA root was found".to_string(),
                };
                return Err(ConfigError::Tls {
                    key: KEY_TLS_CA,
                    path: String::new(),
                    reason: format!("{why}; name a CA bundle (PEM) with {KEY_TLS_CA}"),
                });
            }
        }
    }
    Ok(roots)
}

/// Builds the client's rustls configuration from `settings` (read now).
/// Errors name the key and the file.
pub fn client_config(settings: &TlsSettings) -> Result<Arc<ClientConfig>, ConfigError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| ConfigError::Tls {
            key: KEY_TLS_CA,
            path: String::new(),
            reason: e.to_string(),
        })?
        .with_root_certificates(roots(settings.ca_file.as_deref())?);
    let mut config = match (&settings.client_cert, &settings.client_key) {
        (Some(cert), Some(key)) => {
            let chain = read_certs(KEY_TLS_CERT, cert)?;
            let bytes = std::fs::read(key)
                .map_err(|e| refused(KEY_TLS_KEY, key, format!("cannot read: {e}")))?;
            let der = PrivateKeyDer::from_pem_slice(&bytes)
                .map_err(|e| refused(KEY_TLS_KEY, key, format!("no PEM private key: {e}")))?;
            builder.with_client_auth_cert(chain, der).map_err(|e| {
                refused(
                    KEY_TLS_KEY,
                    key,
                    format!("unusable with {}: {e}", cert.display()),
                )
            })?
        }
        _ => builder.with_no_client_auth(),
    };
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}
