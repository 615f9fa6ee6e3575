//! Certificates made at run time, never committed: a throw-away
//! CA and the server and client certificates it signs, written as PEM files
//! into a directory the caller owns. The TLS tests make theirs per test;
//! `bench run --tls` makes one set per cell.
//!
//! Keys are ECDSA P-256 (rcgen on `ring`). A certificate is valid from 1975
//! to 4096 (rcgen's default) unless [`Validity::Expired`] asks for one that
//! ended in 2001: fixed dates, so nothing here reads the wall clock.

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};

use crate::HarnessError as PkiError;

/// Whether a certificate is valid now or long expired.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Validity {
    /// 1975 to 4096.
    Current,
    /// 2000 to 2001.
    Expired,
}

/// What a leaf certificate is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Usage {
    /// A TLS server (`serverAuth`).
    Server,
    /// A TLS client, for mutual TLS (`clientAuth`).
    Client,
}

/// A certificate and its key, as PEM files.
#[derive(Clone, Debug)]
pub struct Issued {
    /// The certificate (PEM).
    pub cert: PathBuf,
    /// Its private key (PEM, PKCS#8).
    pub key: PathBuf,
}

/// A CA that signs leaf certificates; its own certificate is at [`Ca::cert`].
pub struct Ca {
    name: String,
    dir: PathBuf,
    issuer: Issuer<'static, KeyPair>,
    cert: PathBuf,
}

impl std::fmt::Debug for Ca {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Ca")
            .field("name", &self.name)
            .field("cert", &self.cert)
            .finish_non_exhaustive()
    }
}

fn generate(name: &str, e: rcgen::Error) -> PkiError {
    PkiError::Certificate {
        what: name.to_string(),
        detail: e.to_string(),
    }
}

fn write(path: PathBuf, text: &str) -> Result<PathBuf, PkiError> {
    std::fs::write(&path, text).map_err(|e| PkiError::Certificate {
        what: path.display().to_string(),
        detail: format!("cannot write: {e}"),
    })?;
    Ok(path)
}

impl Ca {
    /// A new self-signed CA called `name`, its certificate written to
    /// `dir/NAME-ca.pem` (`dir` is created if missing).
    pub fn new(dir: &Path, name: &str) -> Result<Ca, PkiError> {
        std::fs::create_dir_all(dir).map_err(|e| PkiError::Certificate {
            what: dir.display().to_string(),
            detail: format!("cannot create the directory: {e}"),
        })?;
        let mut params =
            CertificateParams::new(Vec::<String>::new()).map_err(|e| generate(name, e))?;
        params
            .distinguished_name
            .push(DnType::CommonName, format!("fencepost {name} CA"));
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let key = KeyPair::generate().map_err(|e| generate(name, e))?;
        let cert = params.self_signed(&key).map_err(|e| generate(name, e))?;
        let path = write(dir.join(format!("{name}-ca.pem")), &cert.pem())?;
        Ok(Ca {
            name: name.to_string(),
            dir: dir.to_path_buf(),
            issuer: Issuer::new(params, key),
            cert: path,
        })
    }

    /// The CA's certificate (PEM): what a client or server trusts.
    pub fn cert(&self) -> &Path {
        &self.cert
    }

    /// A leaf certificate for `names` (DNS names or IP literals), signed by
    /// this CA, written to `dir/NAME-LEAF.pem` and `dir/NAME-LEAF.key`.
    pub fn issue(
        &self,
        leaf: &str,
        names: &[&str],
        usage: Usage,
        validity: Validity,
    ) -> Result<Issued, PkiError> {
        let label = format!("{}-{leaf}", self.name);
        let sans: Vec<String> = names.iter().map(|n| n.to_string()).collect();
        let mut params = CertificateParams::new(sans).map_err(|e| generate(&label, e))?;
        params.distinguished_name.push(DnType::CommonName, leaf);
        params.extended_key_usages = vec![match usage {
            Usage::Server => ExtendedKeyUsagePurpose::ServerAuth,
            Usage::Client => ExtendedKeyUsagePurpose::ClientAuth,
        }];
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.use_authority_key_identifier_extension = true;
        if validity == Validity::Expired {
            params.not_before = rcgen::date_time_ymd(2000, 1, 1);
            params.not_after = rcgen::date_time_ymd(2001, 1, 1);
        }
        let key = KeyPair::generate().map_err(|e| generate(&label, e))?;
        let cert = params
            .signed_by(&key, &self.issuer)
            .map_err(|e| generate(&label, e))?;
        Ok(Issued {
            cert: write(self.dir.join(format!("{label}.pem")), &cert.pem())?,
            key: write(self.dir.join(format!("{label}.key")), &key.serialize_pem())?,
        })
    }

    /// A server certificate for loopback: `localhost`, `127.0.0.1` and `::1`.
    pub fn loopback_server(&self, leaf: &str) -> Result<Issued, PkiError> {
        self.issue(
            leaf,
            &["localhost", "127.0.0.1", "::1"],
            Usage::Server,
            Validity::Current,
        )
    }
}
