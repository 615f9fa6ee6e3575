//! `bench run --tls`: the cell's own CA and a lock-server
//! certificate for loopback (`localhost`, `127.0.0.1`, `::1`), made at run
//! time into the cell's directory (`tls/`) with `fencepost_harness::pki`,
//! never committed. The lock-server gets the certificate and key; every SDK
//! client of the cell trusts the CA, and only it.

use std::path::{Path, PathBuf};

use fencepost_harness::pki::Ca;

use super::error::StackError;

/// The lock-server's TLS arguments and the CA the clients trust.
pub(super) struct CellTls {
    /// `--tls-cert FILE --tls-key FILE`.
    pub args: Vec<String>,
    /// The CA's certificate (PEM).
    pub ca: PathBuf,
}

/// Makes the cell's CA and server certificate under `dir/tls/`.
pub(super) fn make(dir: &Path) -> Result<CellTls, StackError> {
    let ca = Ca::new(&dir.join("tls"), "cell")?;
    let leaf = ca.loopback_server("lock-server")?;
    Ok(CellTls {
        args: vec![
            "--tls-cert".into(),
            leaf.cert.display().to_string(),
            "--tls-key".into(),
            leaf.key.display().to_string(),
        ],
        ca: ca.cert().to_path_buf(),
    })
}

/// The SDK's HTTP client for the stack's own probes (`/readyz`): TLS
/// trusting `ca` when given.
pub(super) fn probe_client(
    ca: Option<&Path>,
    timeout: std::time::Duration,
) -> Result<fencepost_sdk::http::HttpClient, StackError> {
    let tls = match ca {
        Some(ca) => Some(fencepost_sdk::tls::client_config(
            &fencepost_sdk::TlsSettings {
                ca_file: Some(ca.to_path_buf()),
                ..Default::default()
            },
        )?),
        None => None,
    };
    Ok(fencepost_sdk::http::HttpClient::with_options(
        timeout,
        fencepost_sdk::http::DEFAULT_IDLE_TIMEOUT,
        tls,
    ))
}
