//! [`LockClientConfig`]: the C4 keys the SDK reads (environment first, then
//! explicit values set on the config), and their validation. A bad value is
//! refused with an error naming the key and the accepted range; nothing
//! starts half-configured.

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use fencepost_api::duration::{DurationParseError, parse_duration};

use crate::clock::{BootTimeClock, Clock};
use crate::lease;

/// The C4 default of [`KEY_SESSION_TTL`].
pub(crate) const DEFAULT_SESSION_TTL: Duration = Duration::from_secs(15);
/// The C4 default of [`KEY_DEFAULT_TTL`].
pub(crate) const DEFAULT_TTL: Duration = Duration::from_secs(30);

/// C4 key of the safety margin.
pub const KEY_MARGIN: &str = "lock.client.safety-margin";
/// C4 key of the default lease TTL.
pub const KEY_DEFAULT_TTL: &str = "lock.default.ttl";
/// C4 key of the session TTL.
pub const KEY_SESSION_TTL: &str = "lock.session.ttl";
/// The SDK's name for the per-request timeout (not a C4 key; config only).
pub const KEY_REQUEST_TIMEOUT: &str = "lock.client.request-timeout";
/// The SDK's key of the heartbeat divisor k (period = usable window / k).
pub const KEY_HEARTBEAT_DIVISOR: &str = "lock.client.heartbeat-divisor";
/// The SDK's name for the lock-server base URL (not a C4 key).
pub const KEY_BASE_URL: &str = "lock.client.base-url";

/// The SDK's name for the list of replica URLs (not a C4 key).
pub const KEY_URLS: &str = "lock.client.urls";
/// Environment variable of [`KEY_URLS`]: comma-separated base URLs of the
/// lock-server replicas; when set it replaces the base URL given in code.
pub const ENV_URLS: &str = "LOCK_URLS";

/// The SDK's name for the API token (not a C4 key).
pub const KEY_TOKEN: &str = "lock.client.token";
/// Environment variable holding the API token itself (surrounding
/// whitespace trimmed). Takes precedence over [`ENV_TOKEN_FILE`].
pub const ENV_TOKEN: &str = "FENCEPOST_TOKEN";
/// Environment variable naming a file that holds the API token (surrounding
/// whitespace trimmed), e.g. a mounted Kubernetes Secret.
pub const ENV_TOKEN_FILE: &str = "FENCEPOST_TOKEN_FILE";
/// The SDK's key of the CA bundle it trusts for `https://` (PEM file;
/// default: the system's roots).
pub const KEY_TLS_CA: &str = "lock.client.tls.ca";
/// The SDK's key of its client certificate for mutual TLS (PEM file).
pub const KEY_TLS_CERT: &str = "lock.client.tls.cert";
/// The SDK's key of the client certificate's private key (PEM file).
pub const KEY_TLS_KEY: &str = "lock.client.tls.key";
/// Environment variable of [`KEY_TLS_CA`].
pub const ENV_TLS_CA: &str = "LOCK_CLIENT_TLS_CA";
/// Environment variable of [`KEY_TLS_CERT`].
pub const ENV_TLS_CERT: &str = "LOCK_CLIENT_TLS_CERT";
/// Environment variable of [`KEY_TLS_KEY`].
pub const ENV_TLS_KEY: &str = "LOCK_CLIENT_TLS_KEY";

/// Environment variable of [`KEY_MARGIN`].
pub const ENV_MARGIN: &str = "LOCK_CLIENT_SAFETY_MARGIN";
/// Environment variable of [`KEY_DEFAULT_TTL`].
pub const ENV_DEFAULT_TTL: &str = "LOCK_DEFAULT_TTL";
/// Environment variable of [`KEY_SESSION_TTL`].
pub const ENV_SESSION_TTL: &str = "LOCK_SESSION_TTL";
/// Environment variable of [`KEY_HEARTBEAT_DIVISOR`].
pub const ENV_HEARTBEAT_DIVISOR: &str = "LOCK_CLIENT_HEARTBEAT_DIVISOR";

/// How the safety margin of ADR-006 D1 is chosen.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum MarginPolicy {
    /// The same margin for every grant: `0 ≤ m < 1`, default 0.30.
    Fixed(f64),
    /// ADR-006's deferred V2: `margin = clamp(k × p99_rtt / lease, floor, ceiling)`,
    /// with `p99_rtt` the 99th percentile of the client's observed L2/L5 RTTs
    /// (the histogram of [`LockClient::rtt_histogram`](crate::LockClient::rtt_histogram)).
    /// Warm-up: while fewer than
    /// [`ADAPTIVE_WARMUP_SAMPLES`](crate::lease::ADAPTIVE_WARMUP_SAMPLES) RTTs
    /// are recorded (also after [`reset_rtt`](crate::LockClient::reset_rtt)),
    /// the margin is `ceiling`.
    Adaptive {
        /// How many p99 RTTs of the lease to keep in reserve (> 0).
        k: f64,
        /// The smallest margin ever used, `0 ≤ floor ≤ ceiling`.
        floor: f64,
        /// The largest margin ever used, and the warm-up margin, `< 1`.
        ceiling: f64,
    },
}

impl Default for MarginPolicy {
    /// `Fixed(0.30)`, the C4 default.
    fn default() -> Self {
        MarginPolicy::Fixed(0.30)
    }
}

impl fmt::Display for MarginPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MarginPolicy::Fixed(m) => write!(f, "{m}"),
            MarginPolicy::Adaptive { k, floor, ceiling } => {
                write!(f, "adaptive:k={k},floor={floor},ceiling={ceiling}")
            }
        }
    }
}

impl FromStr for MarginPolicy {
    type Err = ConfigError;

    /// Parses `0.30` (fixed) or `adaptive:k=4,floor=0.05,ceiling=0.5`, and
    /// validates it. Errors name `lock.client.safety-margin`.
    fn from_str(text: &str) -> Result<Self, ConfigError> {
        let bad = |reason: &'static str| ConfigError::Invalid {
            key: KEY_MARGIN,
            value: text.to_string(),
            reason,
        };
        let t = text.trim();
        let policy = if let Some(rest) = t.strip_prefix("adaptive:") {
            let (mut k, mut floor, mut ceiling) = (None, None, None);
            for part in rest.split(',') {
                let (name, value) = part
                    .split_once('=')
                    .ok_or(bad("expected adaptive:k=K,floor=F,ceiling=C"))?;
                let v: f64 = value
                    .trim()
                    .parse()
                    .map_err(|_| bad("k, floor and ceiling must be numbers"))?;
                match name.trim() {
                    "k" => k = Some(v),
                    "floor" => floor = Some(v),
                    "ceiling" => ceiling = Some(v),
                    _ => return Err(bad("expected adaptive:k=K,floor=F,ceiling=C")),
                }
            }
            match (k, floor, ceiling) {
                (Some(k), Some(floor), Some(ceiling)) => {
                    MarginPolicy::Adaptive { k, floor, ceiling }
                }
                _ => return Err(bad("expected adaptive:k=K,floor=F,ceiling=C")),
            }
        } else {
            MarginPolicy::Fixed(
                t.parse()
                    .map_err(|_| bad("must be a number with 0 ≤ m < 1"))?,
            )
        };
        // Re-validate with the original text in any error.
        policy.validate().map_err(|e| match e {
            ConfigError::Invalid { key, reason, .. } => ConfigError::Invalid {
                key,
                value: text.to_string(),
                reason,
            },
            other => other,
        })?;
        Ok(policy)
    }
}

impl MarginPolicy {
    /// Refuses margins outside `[0, 1)`, NaN, a non-positive `k`, or `floor > ceiling`.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let bad = |reason: &'static str| ConfigError::Invalid {
            key: KEY_MARGIN,
            value: self.to_string(),
            reason,
        };
        let in_range = |m: f64| m.is_finite() && (0.0..1.0).contains(&m);
        match *self {
            MarginPolicy::Fixed(m) if !in_range(m) => Err(bad("must be 0 ≤ m < 1")),
            MarginPolicy::Fixed(_) => Ok(()),
            MarginPolicy::Adaptive { k, floor, ceiling } => {
                if !(k.is_finite() && k > 0.0) {
                    Err(bad("adaptive k must be a finite number > 0"))
                } else if !in_range(floor) || !in_range(ceiling) {
                    Err(bad("adaptive floor and ceiling must be 0 ≤ m < 1"))
                } else if floor > ceiling {
                    Err(bad("adaptive floor must not exceed ceiling"))
                } else {
                    Ok(())
                }
            }
        }
    }

    /// The margin, in ppm, for a grant of `lease`, given the RTTs seen so far.
    pub fn margin_ppm(&self, lease: Duration, rtt: lease::RttSummary) -> u64 {
        match *self {
            MarginPolicy::Fixed(m) => lease::ppm_nearest(m),
            MarginPolicy::Adaptive { k, floor, ceiling } => {
                lease::ppm_ceil(lease::adaptive_margin(k, floor, ceiling, lease, rtt))
            }
        }
    }

    /// Whether the margin depends on observed RTTs.
    pub fn is_adaptive(&self) -> bool {
        matches!(self, MarginPolicy::Adaptive { .. })
    }
}

/// Why a configuration was refused. Every message names the key.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// A value outside its accepted range.
    #[error("{key}={value}: {reason}")]
    Invalid {
        /// The C4 key (or the SDK's own key name).
        key: &'static str,
        /// The value as given.
        value: String,
        /// The accepted range or form.
        reason: &'static str,
    },
    /// The token file named by `FENCEPOST_TOKEN_FILE` could not be read.
    #[error("{key}: cannot read the token file {path}: {source}")]
    TokenFile {
        /// [`KEY_TOKEN`].
        key: &'static str,
        /// The file.
        path: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A TLS file that cannot be used: unreadable, not PEM, no certificate
    /// or key in it, or (for the default trust) no system root found.
    #[error("{key}={path}: {reason}")]
    Tls {
        /// The SDK's key (`lock.client.tls.*`).
        key: &'static str,
        /// The file as given (empty for the system roots).
        path: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A duration that does not parse (`250ms`, `15s`, `2m` are the forms).
    #[error("{key}={value}: {source}")]
    Duration {
        /// The C4 key.
        key: &'static str,
        /// The text as given.
        value: String,
        /// What the parser said.
        #[source]
        source: DurationParseError,
    },
}

/// An API token: the secret a lock-server started with
/// `--auth-tokens` expects as `Authorization: Bearer TOKEN`. Its `Debug`
/// never shows the secret, and the header built from it is marked sensitive
/// (built once, shared by every request of the client).
#[derive(Clone)]
pub struct ApiToken {
    secret: Arc<str>,
    header: hyper::header::HeaderValue,
}

impl ApiToken {
    /// A token from its secret, surrounding whitespace trimmed. Refused when
    /// empty or not visible ASCII (no header could carry it).
    pub fn new(secret: &str) -> Result<Self, ConfigError> {
        let secret = secret.trim();
        let bad = ConfigError::Invalid {
            key: KEY_TOKEN,
            value: "<redacted>".into(),
            reason: "must be a non-empty token of visible ASCII characters (lock-server token new prints one)",
        };
        if secret.is_empty() || !secret.bytes().all(|b| b.is_ascii_graphic()) {
            return Err(bad);
        }
        let mut header =
            hyper::header::HeaderValue::from_str(&format!("Bearer {secret}")).map_err(|_| bad)?;
        header.set_sensitive(true);
        Ok(ApiToken {
            secret: Arc::from(secret),
            header,
        })
    }

    /// The secret (for a caller that needs to pass it on; never log it).
    pub fn secret(&self) -> &str {
        &self.secret
    }

    /// The `Authorization` header value, `Bearer TOKEN`, marked sensitive.
    pub fn header_value(&self) -> &hyper::header::HeaderValue {
        &self.header
    }
}

impl fmt::Debug for ApiToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ApiToken(<redacted>)")
    }
}

impl PartialEq for ApiToken {
    fn eq(&self, other: &Self) -> bool {
        self.secret == other.secret
    }
}

/// TLS settings for `https://` replicas. Files are read once, by
/// [`LockClient::new`](crate::LockClient::new), which builds one rustls
/// configuration (`ring` provider) shared by every connection of the client.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TlsSettings {
    /// `lock.client.tls.ca`: a PEM bundle of the CAs trusted to sign the
    /// lock-server's certificate. `None`: the system's roots
    /// (`rustls-native-certs`); if none can be loaded, `LockClient::new`
    /// fails and says so.
    pub ca_file: Option<PathBuf>,
    /// `lock.client.tls.cert`: this client's certificate chain (PEM), sent
    /// when the server asks for one (mutual TLS). Needs `client_key`.
    pub client_cert: Option<PathBuf>,
    /// `lock.client.tls.key`: the private key of `client_cert` (PEM).
    pub client_key: Option<PathBuf>,
}

/// Everything a [`LockClient`](crate::LockClient) needs. Build it with
/// [`LockClientConfig::new`] (defaults) or [`LockClientConfig::from_env`]
/// (C4 environment variables), then override fields with the `with_*`
/// methods; [`LockClient::new`](crate::LockClient::new) validates it.
#[derive(Clone)]
pub struct LockClientConfig {
    /// The lock-server's base URL, `http://HOST:PORT` or `https://HOST:PORT`
    /// (no trailing path): the first replica tried.
    pub base_url: String,
    /// Further replicas' base URLs (C1 §6), tried after `base_url` when a
    /// replica answers `503 NOT_LEADER` without naming the leader or cannot be
    /// reached. Empty for a single server.
    pub replica_urls: Vec<String>,
    /// `lock.client.safety-margin`: fixed 0.30 by default.
    pub margin: MarginPolicy,
    /// `lock.session.ttl`: the TTL asked for in L1 (the server may clamp it). Default 15 s.
    pub session_ttl: Duration,
    /// `lock.default.ttl`: the lease asked for in L4/L5 when the caller gives
    /// none. Default 30 s.
    pub default_ttl: Duration,
    /// `lock.client.heartbeat-divisor`: the heartbeat period is
    /// `min(session_ttl, shortest live lease) × (1 − margin) / k`. Default
    /// [`HEARTBEAT_DIVISOR`](crate::lease::HEARTBEAT_DIVISOR) (3, ADR-006);
    /// accepted [`HEARTBEAT_DIVISORS`](crate::lease::HEARTBEAT_DIVISORS) (2..=10).
    pub heartbeat_divisor: u32,
    /// Per-request timeout of every L1–L7 exchange (heartbeats use the smaller
    /// of this and the time left before the deadline they protect). Default 2 s.
    pub request_timeout: Duration,
    /// When true, [`Session::check_still_held_confirmed`](crate::Session::check_still_held_confirmed)
    /// does one L7 hop; when false (default) it is the local check.
    pub confirm_with_server: bool,
    /// Seed of the backoff jitter RNG (ChaCha8; session `n` uses stream `n`).
    /// Default 0: runs replay exactly; give each process its own seed in production.
    pub seed: u64,
    /// The monotonic clock every deadline is read from. Default
    /// [`BootTimeClock`] (`CLOCK_BOOTTIME`: keeps counting while the host is
    /// suspended, so it errs safe); [`MonotonicClock`](crate::MonotonicClock)
    /// and fakes can be set with [`with_clock`](Self::with_clock).
    pub clock: Arc<dyn Clock>,
    /// The API token sent as `Authorization: Bearer` on every request, for a
    /// lock-server with `--auth-tokens`. Default none; read from
    /// `FENCEPOST_TOKEN` or `FENCEPOST_TOKEN_FILE` by [`from_env`](Self::from_env)
    /// and [`token_from_env`](Self::token_from_env). Never printed.
    pub token: Option<ApiToken>,
    /// The trust and the client certificate for `https://` URLs. Used (and
    /// its files read) when a URL is `https://` or a field is set.
    pub tls: TlsSettings,
}

impl fmt::Debug for LockClientConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LockClientConfig")
            .field("base_url", &self.base_url)
            .field("replica_urls", &self.replica_urls)
            .field("margin", &self.margin)
            .field("session_ttl", &self.session_ttl)
            .field("default_ttl", &self.default_ttl)
            .field("heartbeat_divisor", &self.heartbeat_divisor)
            .field("request_timeout", &self.request_timeout)
            .field("confirm_with_server", &self.confirm_with_server)
            .field("seed", &self.seed)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("tls", &self.tls)
            .finish_non_exhaustive()
    }
}

impl LockClientConfig {
    /// The defaults of C4 for a server at `base_url`.
    pub fn new(base_url: impl Into<String>) -> Self {
        LockClientConfig {
            base_url: base_url.into(),
            replica_urls: Vec::new(),
            margin: MarginPolicy::default(),
            session_ttl: DEFAULT_SESSION_TTL,
            default_ttl: DEFAULT_TTL,
            heartbeat_divisor: lease::HEARTBEAT_DIVISOR,
            request_timeout: Duration::from_secs(2),
            confirm_with_server: false,
            seed: 0,
            clock: Arc::new(BootTimeClock::new()),
            token: None,
            tls: TlsSettings::default(),
        }
    }

    /// The defaults overridden by `LOCK_URLS` (comma-separated replica URLs,
    /// replacing `base_url`), `LOCK_CLIENT_SAFETY_MARGIN`, `LOCK_DEFAULT_TTL`,
    /// `LOCK_SESSION_TTL`, `LOCK_CLIENT_HEARTBEAT_DIVISOR`, the TLS files `LOCK_CLIENT_TLS_CA`,
    /// `LOCK_CLIENT_TLS_CERT`, `LOCK_CLIENT_TLS_KEY` and the API token
    /// (`FENCEPOST_TOKEN` or `FENCEPOST_TOKEN_FILE`, see
    /// [`token_from_env`](Self::token_from_env)) when set; refuses bad values
    /// naming the key.
    pub fn from_env(base_url: impl Into<String>) -> Result<Self, ConfigError> {
        Self::from_lookup(base_url, |name| std::env::var(name).ok())
    }

    /// Like [`from_env`](Self::from_env), reading variables through `lookup`
    /// (tests pass a map instead of mutating the process environment).
    pub fn from_lookup(
        base_url: impl Into<String>,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        let mut cfg = Self::new(base_url);
        if let Some(v) = lookup(ENV_URLS) {
            let urls: Vec<String> = v
                .split(',')
                .map(str::trim)
                .filter(|u| !u.is_empty())
                .map(String::from)
                .collect();
            if urls.is_empty() {
                return Err(ConfigError::Invalid {
                    key: KEY_URLS,
                    value: v,
                    reason: "must list at least one http:// or https:// URL, comma-separated",
                });
            }
            cfg = cfg.with_urls(urls);
        }
        if let Some(v) = lookup(ENV_MARGIN) {
            cfg.margin = v.parse()?;
        }
        if let Some(v) = lookup(ENV_DEFAULT_TTL) {
            cfg.default_ttl = parse_ttl(KEY_DEFAULT_TTL, &v)?;
        }
        if let Some(v) = lookup(ENV_SESSION_TTL) {
            cfg.session_ttl = parse_ttl(KEY_SESSION_TTL, &v)?;
        }
        if let Some(v) = lookup(ENV_HEARTBEAT_DIVISOR) {
            cfg.heartbeat_divisor = v.trim().parse().map_err(|_| ConfigError::Invalid {
                key: KEY_HEARTBEAT_DIVISOR,
                value: v.clone(),
                reason: DIVISOR_RANGE,
            })?;
        }
        let file = |name: &str| lookup(name).filter(|v| !v.is_empty()).map(PathBuf::from);
        if let Some(ca) = file(ENV_TLS_CA) {
            cfg.tls.ca_file = Some(ca);
        }
        if let Some(cert) = file(ENV_TLS_CERT) {
            cfg.tls.client_cert = Some(cert);
        }
        if let Some(key) = file(ENV_TLS_KEY) {
            cfg.tls.client_key = Some(key);
        }
        cfg.token_from_lookup(lookup)
    }

    /// Sets the API token from the environment: `FENCEPOST_TOKEN` (the
    /// token), else `FENCEPOST_TOKEN_FILE` (a file holding it, such as a
    /// mounted Secret); surrounding whitespace is trimmed. With neither set
    /// the token is left as it is. An unreadable file or an empty token is
    /// refused.
    pub fn token_from_env(self) -> Result<Self, ConfigError> {
        self.token_from_lookup(|name| std::env::var(name).ok())
    }

    /// [`token_from_env`](Self::token_from_env) reading variables through `lookup`.
    pub fn token_from_lookup(
        mut self,
        lookup: impl Fn(&str) -> Option<String>,
    ) -> Result<Self, ConfigError> {
        if let Some(secret) = lookup(ENV_TOKEN).filter(|v| !v.trim().is_empty()) {
            self.token = Some(ApiToken::new(&secret)?);
        } else if let Some(path) = lookup(ENV_TOKEN_FILE).filter(|v| !v.is_empty()) {
            let text = std::fs::read_to_string(&path).map_err(|source| ConfigError::TokenFile {
                key: KEY_TOKEN,
                path: path.clone(),
                source,
            })?;
            self.token = Some(ApiToken::new(&text)?);
        }
        Ok(self)
    }

    /// Sets the API token.
    pub fn with_token(mut self, token: ApiToken) -> Self {
        self.token = Some(token);
        self
    }

    /// Several replicas (C1 §6): the first URL becomes `base_url`, the rest
    /// `replica_urls`. An empty list changes nothing.
    pub fn with_urls<S: Into<String>>(mut self, urls: impl IntoIterator<Item = S>) -> Self {
        let mut urls = urls.into_iter().map(Into::into);
        if let Some(first) = urls.next() {
            self.base_url = first;
            self.replica_urls = urls.collect();
        }
        self
    }

    /// Every replica URL, `base_url` first.
    pub fn urls(&self) -> Vec<String> {
        std::iter::once(self.base_url.clone())
            .chain(self.replica_urls.iter().cloned())
            .collect()
    }

    /// Sets the margin policy.
    pub fn with_margin(mut self, margin: MarginPolicy) -> Self {
        self.margin = margin;
        self
    }

    /// Sets the session TTL asked for in L1.
    pub fn with_session_ttl(mut self, ttl: Duration) -> Self {
        self.session_ttl = ttl;
        self
    }

    /// Sets the default lease asked for in L4/L5.
    pub fn with_default_ttl(mut self, ttl: Duration) -> Self {
        self.default_ttl = ttl;
        self
    }

    /// Sets the heartbeat divisor k (period = usable window / k; 2..=10).
    pub fn with_heartbeat_divisor(mut self, k: u32) -> Self {
        self.heartbeat_divisor = k;
        self
    }

    /// Sets the per-request timeout.
    pub fn with_request_timeout(mut self, timeout: Duration) -> Self {
        self.request_timeout = timeout;
        self
    }

    /// Turns the server-confirmed check on or off.
    pub fn with_confirm_with_server(mut self, on: bool) -> Self {
        self.confirm_with_server = on;
        self
    }

    /// Sets the jitter seed.
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Sets the clock.
    pub fn with_clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Trusts the CAs in the PEM bundle at `path` (instead of the system's
    /// roots) for `https://` replicas.
    pub fn with_tls_ca(mut self, path: impl Into<PathBuf>) -> Self {
        self.tls.ca_file = Some(path.into());
        self
    }

    /// Presents the certificate chain at `cert` (key at `key`, both PEM)
    /// when a server asks for one (mutual TLS).
    pub fn with_tls_client_cert(
        mut self,
        cert: impl Into<PathBuf>,
        key: impl Into<PathBuf>,
    ) -> Self {
        self.tls.client_cert = Some(cert.into());
        self.tls.client_key = Some(key.into());
        self
    }

    /// Whether the client needs a TLS configuration: a URL is `https://` or
    /// a TLS setting is given.
    pub fn uses_tls(&self) -> bool {
        self.tls != TlsSettings::default()
            || self.urls().iter().any(|u| {
                matches!(
                    crate::http::split_url(u),
                    Some((crate::http::Scheme::Https, _, _))
                )
            })
    }

    /// Checks every value; the error names the key and the accepted range.
    pub fn validate(&self) -> Result<(), ConfigError> {
        self.margin.validate()?;
        if !lease::HEARTBEAT_DIVISORS.contains(&self.heartbeat_divisor) {
            return Err(ConfigError::Invalid {
                key: KEY_HEARTBEAT_DIVISOR,
                value: self.heartbeat_divisor.to_string(),
                reason: DIVISOR_RANGE,
            });
        }
        for (key, d) in [
            (KEY_SESSION_TTL, self.session_ttl),
            (KEY_DEFAULT_TTL, self.default_ttl),
            (KEY_REQUEST_TIMEOUT, self.request_timeout),
        ] {
            if d.is_zero() {
                return Err(ConfigError::Invalid {
                    key,
                    value: fencepost_api::format_duration(d),
                    reason: "must be greater than zero",
                });
            }
        }
        for (key, url) in std::iter::once((KEY_BASE_URL, &self.base_url))
            .chain(self.replica_urls.iter().map(|u| (KEY_URLS, u)))
        {
            if crate::http::split_url(url).is_none() {
                return Err(ConfigError::Invalid {
                    key,
                    value: url.clone(),
                    reason: "must be an http:// or https:// URL such as http://127.0.0.1:7070",
                });
            }
        }
        let shown = |p: &Option<PathBuf>| p.as_ref().map(|p| p.display().to_string());
        match (&self.tls.client_cert, &self.tls.client_key) {
            (Some(_), None) => {
                return Err(ConfigError::Invalid {
                    key: KEY_TLS_KEY,
                    value: String::new(),
                    reason: "must be set with lock.client.tls.cert",
                });
            }
            (None, Some(_)) => {
                return Err(ConfigError::Invalid {
                    key: KEY_TLS_CERT,
                    value: shown(&self.tls.client_key).unwrap_or_default(),
                    reason: "must be set with lock.client.tls.key (the key alone names no certificate)",
                });
            }
            _ => {}
        }
        Ok(())
    }
}

/// The accepted heartbeat divisors, as an error's reason.
const DIVISOR_RANGE: &str = "must be a whole number 2 ≤ k ≤ 10";

/// Parses a TTL for `key`: a C4 duration, greater than zero.
fn parse_ttl(key: &'static str, text: &str) -> Result<Duration, ConfigError> {
    let d = parse_duration(text).map_err(|source| ConfigError::Duration {
        key,
        value: text.to_string(),
        source,
    })?;
    if d.is_zero() {
        return Err(ConfigError::Invalid {
            key,
            value: text.to_string(),
            reason: "must be greater than zero",
        });
    }
    Ok(d)
}
