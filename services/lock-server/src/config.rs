//! The lock-server's command line and environment (C4). Every key can be set
//! by its environment variable or its flag (the flag wins); bad values are
//! refused at start with a message naming the key and the accepted range.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::{Parser, Subcommand};
use fencepost_api::duration::{format_duration, parse_duration};
use fencepost_api::grace::{GraceParams, GracePolicy};

use crate::core::Limits;
pub use crate::core::Sabotage;

/// lock-server: sessions, leases and fencing tokens over SQLite or PostgreSQL (fencepost C1).
///
/// Durations take a unit: 250ms, 15s, 2m. Every option can also be set by the
/// environment variable shown.
///
/// The default store is one stable SQLite file, so tokens keep rising across
/// restarts (C1 §1): $XDG_STATE_HOME/fencepost/lock.sqlite, else
/// $HOME/.local/state/fencepost/lock.sqlite, else ./fencepost-lock.sqlite.
/// memory: is for tests only: its tokens start again at 1 after a restart.
///
/// Replicas (C1 §6): several lock-servers on one postgres:// store elect one
/// leader through a leader row in the database (epoch + leader lease on the
/// database's clock). Only the leader serves; the others answer every request
/// 503 NOT_LEADER naming the leader's --advertise URL, and take over once its
/// leader lease plus grace has passed. memory: and sqlite: are single-node:
/// one server per store, nothing is elected (/v1/config says "single-node").
///
/// Examples:
///   lock-server                                  # the default SQLite file, 127.0.0.1:7070
///   lock-server --store sqlite:/var/lib/fp/lock.sqlite --listen 0.0.0.0:7070
///   lock-server --store postgres://fencepost@127.0.0.1:5432/fencepost
///   lock-server --listen 127.0.0.1:0 --store memory: --default-ttl 1s --session-ttl 1s
///   lock-server --grace 200ms                    # fixed grace instead of the derived one
///   lock-server --store postgres://fp@db:5432/fp --listen 0.0.0.0:7070 \
///       --advertise http://lock-1:7070 --leader-lease 5s   # one of several replicas
///   lock-server --listen 0.0.0.0:7443 --tls-cert lock.crt --tls-key lock.key \
///       --tls-client-ca clients-ca.crt                     # mutual TLS
///
/// API tokens (docs/security.md): without --auth-tokens any client that
/// reaches the port may revoke any grant (the server says so at start and
/// /v1/config says "auth": "none"). To turn them on:
///   lock-server token new --name alice --role client --prefix payout: > alice.token 2>> tokens
///   lock-server token new --name ops --role admin > ops.token 2>> tokens
///   lock-server --auth-tokens tokens             # kill -HUP re-reads the file
/// Clients send Authorization: Bearer TOKEN (the SDK reads FENCEPOST_TOKEN or
/// FENCEPOST_TOKEN_FILE).
///
/// TLS: with --tls-cert and --tls-key the server speaks only HTTPS
/// and prints `listening on https://IP:PORT`; the pair is reloaded on SIGHUP
/// and when either file changes. --tls-client-ca also requires every client
/// to present a certificate signed by that CA (mutual TLS).
///
/// Logs: JSON lines on stderr, one flat object a line (RUST_LOG filters
/// them); `stopped` is the last, once SIGTERM or Ctrl-C has been served.
/// Exit codes: 0 stopped by a signal; 2 a refused flag, environment variable,
/// token file or TLS file (the message names the flag and what is accepted);
/// 1 a start or serve that failed (the port is taken, the store cannot be
/// opened).
#[derive(Debug, Parser)]
#[command(name = "lock-server", version, verbatim_doc_comment)]
pub struct Args {
    /// Instead of serving: issue an API token (`token new`).
    #[command(subcommand)]
    pub command: Option<Command>,

    /// lock.listen: the address to serve on; port 0 picks a free port. Prints
    /// `listening on http://IP:PORT` (`https://` with TLS) once ready.
    #[arg(long, env = "LOCK_LISTEN", default_value = "127.0.0.1:7070", value_parser = parse_listen, allow_hyphen_values = true)]
    pub listen: SocketAddr,

    /// lock.store: sqlite:PATH (sqlite: alone = the default file), postgres://USER[:PASS]@HOST:PORT/DB,
    /// or memory: (NOT durable: tokens start again at 1 after a restart; tests only).
    #[arg(long, env = "LOCK_STORE", default_value_t = crate::store::default_store_url(), allow_hyphen_values = true)]
    pub store: String,

    /// lock.session.ttl: the session TTL when L1 asks for none.
    #[arg(
        long,
        env = "LOCK_SESSION_TTL",
        default_value = "15s",
        allow_hyphen_values = true
    )]
    pub session_ttl: String,

    /// lock.default.ttl: the lease when L4/L5 ask for none.
    #[arg(
        long,
        env = "LOCK_DEFAULT_TTL",
        default_value = "30s",
        allow_hyphen_values = true
    )]
    pub default_ttl: String,

    /// lock.ttl.min: requested TTLs below are clamped up to this.
    #[arg(
        long,
        env = "LOCK_TTL_MIN",
        default_value = "100ms",
        allow_hyphen_values = true
    )]
    pub ttl_min: String,

    /// lock.ttl.max: requested TTLs above are clamped down to this.
    #[arg(
        long,
        env = "LOCK_TTL_MAX",
        default_value = "10m",
        allow_hyphen_values = true
    )]
    pub ttl_max: String,

    /// TEST ONLY: break safety on purpose, so a checker can show it catches
    /// it. early-expiry ends every grant at half the lease it answers;
    /// skip-epoch-fence writes without the epoch fence after a takeover.
    #[arg(long, value_enum)]
    pub sabotage: Option<Sabotage>,

    /// lock.server.grace: a fixed grace for every grant. Without it grace is
    /// derived per grant: offset-max + 2 * drift-ppm * 1e-6 * lease + quantum.
    #[arg(
        long,
        env = "LOCK_SERVER_GRACE",
        conflicts_with_all = ["clock_offset_max", "clock_drift_ppm", "clock_quantum"],
        allow_hyphen_values = true
    )]
    pub grace: Option<String>,

    /// lock.clock.offset-max: the largest clock offset error (derived grace).
    #[arg(long, env = "LOCK_CLOCK_OFFSET_MAX", default_value_t = format_duration(GraceParams::default().offset_max), allow_hyphen_values = true)]
    pub clock_offset_max: String,

    /// lock.clock.drift-ppm: the drift-rate bound per clock, ppm (derived grace).
    #[arg(long, env = "LOCK_CLOCK_DRIFT_PPM", default_value_t = GraceParams::default().drift_ppm.to_string(), allow_hyphen_values = true)]
    pub clock_drift_ppm: String,

    /// lock.clock.quantum: clock and timer quantisation (derived grace).
    #[arg(long, env = "LOCK_CLOCK_QUANTUM", default_value_t = format_duration(GraceParams::default().quantum), allow_hyphen_values = true)]
    pub clock_quantum: String,

    /// lock.advertise: the base URL other replicas name in NOT_LEADER's
    /// `leader` when this one leads (postgres:// only). Default: http:// (https://
    /// with TLS) and the bound address, unless that is 0.0.0.0 or [::] (then
    /// none is named).
    #[arg(long, env = "LOCK_ADVERTISE", allow_hyphen_values = true)]
    pub advertise: Option<String>,

    /// lock.leader.lease: the leader lease in the database (postgres:// only).
    /// The leader serves for lease x 0.7 after each renewal's send and renews
    /// every lease x 0.7 / 3; a standby takes over lease + grace after the
    /// last renewal. Ignored (single-node) on memory: and sqlite:.
    #[arg(
        long,
        env = "LOCK_LEADER_LEASE",
        default_value = "5s",
        allow_hyphen_values = true
    )]
    pub leader_lease: String,

    /// lock.auth.tokens: the API token file (one `NAME ROLE sha256:HEX
    /// [PREFIX]` a line; `lock-server token new` prints one). Every request
    /// but /healthz and /readyz then needs `Authorization: Bearer TOKEN`;
    /// SIGHUP re-reads the file (a bad file is logged and the old set kept).
    /// Without it: no auth, loudly (any client that reaches the port may
    /// revoke any grant).
    #[arg(
        long,
        env = "LOCK_AUTH_TOKENS",
        value_name = "FILE",
        allow_hyphen_values = true
    )]
    pub auth_tokens: Option<PathBuf>,

    /// lock.tls.cert: the server certificate, PEM (the leaf first, then any
    /// intermediates). With --tls-key, the server speaks only HTTPS. Reloaded
    /// on SIGHUP and when the file changes.
    #[arg(
        long,
        env = "LOCK_TLS_CERT",
        value_name = "FILE",
        allow_hyphen_values = true
    )]
    pub tls_cert: Option<PathBuf>,

    /// lock.tls.key: the private key of --tls-cert, PEM (PKCS#8, PKCS#1 or SEC1).
    #[arg(
        long,
        env = "LOCK_TLS_KEY",
        value_name = "FILE",
        allow_hyphen_values = true
    )]
    pub tls_key: Option<PathBuf>,

    /// lock.tls.client-ca: require a client certificate signed by a CA in
    /// this PEM bundle (mutual TLS). Read once, at start.
    #[arg(
        long,
        env = "LOCK_TLS_CLIENT_CA",
        value_name = "FILE",
        allow_hyphen_values = true
    )]
    pub tls_client_ca: Option<PathBuf>,
}

/// The TLS files named by `lock.tls.*` (not yet read: see `crate::tls`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsFiles {
    /// `lock.tls.cert`.
    pub cert: PathBuf,
    /// `lock.tls.key`.
    pub key: PathBuf,
    /// `lock.tls.client-ca`: mutual TLS when set.
    pub client_ca: Option<PathBuf>,
}

/// The checked election settings, before the listener is bound.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaderSettings {
    /// `lock.leader.lease`.
    pub lease: Duration,
    /// An explicit `lock.advertise`, without a trailing `/`.
    pub advertise: Option<String>,
    /// TLS is on: the default advertise URL is `https://`.
    pub https: bool,
}

impl LeaderSettings {
    /// The election settings of a server bound to `bound`: the explicit
    /// advertise URL, else `http://` (`https://` with TLS) and the bound
    /// address, unless that is 0.0.0.0 or [::] (then none is named).
    pub fn for_bound(&self, bound: SocketAddr) -> crate::leader::LeaderConfig {
        let advertise = match &self.advertise {
            Some(url) => Some(url.clone()),
            None if bound.ip().is_unspecified() => None,
            None if self.https => Some(format!("https://{bound}")),
            None => Some(format!("http://{bound}")),
        };
        crate::leader::LeaderConfig::new(advertise, self.lease)
    }
}

/// What `lock-server` does instead of serving.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// API tokens (docs/security.md).
    #[command(subcommand)]
    Token(TokenCommand),
}

/// `lock-server token ...`.
#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Issues a new token: prints the secret ONCE on stdout (give it to the
    /// client: FENCEPOST_TOKEN or FENCEPOST_TOKEN_FILE) and the line to
    /// append to the --auth-tokens file on stderr (it holds only the
    /// secret's SHA-256). To rotate, issue a new token with the same --name,
    /// append its line, SIGHUP the server, move the clients over, delete the
    /// old line and SIGHUP again.
    ///
    /// Example:
    ///   lock-server token new --name alice --role client --prefix payout: \
    ///       > alice.token 2>> /etc/fencepost/tokens
    #[command(verbatim_doc_comment)]
    New {
        /// The principal: 1-64 characters of [A-Za-z0-9._-]. Sessions are
        /// bound to it; several tokens may share it (rotation).
        #[arg(long, allow_hyphen_values = true)]
        name: String,
        /// client (sessions and grants on its keys), admin (everything: L8
        /// revoke, any key, /metrics, /v1/config) or monitor (only /metrics
        /// and /v1/config).
        #[arg(long, value_parser = ["client", "admin", "monitor"])]
        role: String,
        /// For a client: the key prefix it may act on (e.g. payout:); the
        /// default is every key. Ignored by admin and monitor.
        #[arg(long, allow_hyphen_values = true)]
        prefix: Option<String>,
    },
}

/// A configuration value that was refused; the message names the flag, the
/// C4 key and the environment variable, then what is accepted.
#[derive(Debug, thiserror::Error)]
#[error("{}", describe(.key, .value, .why))]
pub struct ConfigError {
    /// The C4 key, e.g. `lock.session.ttl`.
    pub key: &'static str,
    /// The value given.
    pub value: String,
    /// What is accepted.
    pub why: String,
}

/// The flag and environment variable of each C4 key the lock-server reads.
const KEYS: &[(&str, &str, &str)] = &[
    ("lock.listen", "--listen", "LOCK_LISTEN"),
    ("lock.store", "--store", "LOCK_STORE"),
    ("lock.session.ttl", "--session-ttl", "LOCK_SESSION_TTL"),
    ("lock.default.ttl", "--default-ttl", "LOCK_DEFAULT_TTL"),
    ("lock.ttl.min", "--ttl-min", "LOCK_TTL_MIN"),
    ("lock.ttl.max", "--ttl-max", "LOCK_TTL_MAX"),
    ("lock.server.grace", "--grace", "LOCK_SERVER_GRACE"),
    (
        "lock.clock.offset-max",
        "--clock-offset-max",
        "LOCK_CLOCK_OFFSET_MAX",
    ),
    (
        "lock.clock.drift-ppm",
        "--clock-drift-ppm",
        "LOCK_CLOCK_DRIFT_PPM",
    ),
    (
        "lock.clock.quantum",
        "--clock-quantum",
        "LOCK_CLOCK_QUANTUM",
    ),
    ("lock.advertise", "--advertise", "LOCK_ADVERTISE"),
    ("lock.leader.lease", "--leader-lease", "LOCK_LEADER_LEASE"),
    ("lock.auth.tokens", "--auth-tokens", "LOCK_AUTH_TOKENS"),
    ("lock.tls.cert", "--tls-cert", "LOCK_TLS_CERT"),
    ("lock.tls.key", "--tls-key", "LOCK_TLS_KEY"),
    (
        "lock.tls.client-ca",
        "--tls-client-ca",
        "LOCK_TLS_CLIENT_CA",
    ),
];

/// `--session-ttl "-1s" (lock.session.ttl, LOCK_SESSION_TTL): why`.
fn describe(key: &str, value: &str, why: &str) -> String {
    let (flag, env) = KEYS
        .iter()
        .find(|(k, _, _)| *k == key)
        .map_or((key, ""), |(_, f, e)| (*f, *e));
    let value = if value.is_empty() {
        String::new()
    } else {
        format!(" {value:?}")
    };
    let source = if env.is_empty() {
        key.to_owned()
    } else {
        format!("{key}, {env}")
    };
    format!("{flag}{value} ({source}): {why}")
}

/// Parses `--listen`: an IP address and a port.
fn parse_listen(text: &str) -> Result<SocketAddr, String> {
    text.trim().parse().map_err(|_| {
        format!(
            "{text:?} is not an address to listen on; expected IP:PORT such as \
             127.0.0.1:7070 or [::1]:7070 (port 0 picks a free one)"
        )
    })
}

/// What `--store` accepts, for the refusal of anything else.
const STORE_FORMS: &str = "must be sqlite:PATH (sqlite: alone = the default file), \
     postgres://USER[:PASS]@HOST:PORT/DB or memory:";

/// Checks the form of a `lock.store` URL without opening anything: a
/// misspelt scheme or a PostgreSQL URL that does not parse is refused at
/// start (exit 2), before any store is touched.
pub fn check_store_url(url: &str) -> Result<(), ConfigError> {
    let refused = |why: String| ConfigError {
        key: "lock.store",
        value: url.to_owned(),
        why,
    };
    if url == "memory:" || url.starts_with("sqlite:") {
        return Ok(());
    }
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        return url
            .parse::<tokio_postgres::Config>()
            .map(|_| ())
            .map_err(|e| refused(format!("not a PostgreSQL URL ({e}); {STORE_FORMS}")));
    }
    Err(refused(STORE_FORMS.to_owned()))
}

fn duration(key: &'static str, value: &str) -> Result<Duration, ConfigError> {
    let refused = |why: String| ConfigError {
        key,
        value: value.to_string(),
        why,
    };
    if value.trim_start().starts_with('-') {
        return Err(refused(
            "must not be negative; a duration takes a unit: 250ms, 15s, 2m".into(),
        ));
    }
    parse_duration(value).map_err(|e| refused(e.to_string()))
}

/// The largest TTL a grant may have: bounded so every instant stays representable.
const TTL_CEILING: Duration = Duration::from_secs(7 * 24 * 3600);

impl Args {
    /// The election settings for a server bound to `bound` (a fresh node id).
    pub fn leader(&self, bound: SocketAddr) -> Result<crate::leader::LeaderConfig, ConfigError> {
        Ok(self.leader_settings()?.for_bound(bound))
    }

    /// The election settings, checked before anything is bound: the leader
    /// lease and an explicit `--advertise`.
    pub fn leader_settings(&self) -> Result<LeaderSettings, ConfigError> {
        let lease = duration("lock.leader.lease", &self.leader_lease)?;
        if lease < Duration::from_millis(100) || lease > Duration::from_secs(3600) {
            return Err(ConfigError {
                key: "lock.leader.lease",
                value: self.leader_lease.clone(),
                why: "must be between 100ms and 1h".into(),
            });
        }
        let advertise = match &self.advertise {
            Some(url) => {
                let url = url.trim_end_matches('/').to_string();
                if !(url.starts_with("http://") || url.starts_with("https://")) {
                    return Err(ConfigError {
                        key: "lock.advertise",
                        value: url,
                        why: "must be a base URL such as http://lock-1:7070".into(),
                    });
                }
                Some(url)
            }
            None => None,
        };
        Ok(LeaderSettings {
            lease,
            advertise,
            https: self.tls_cert.is_some(),
        })
    }

    /// The TLS files, or `None` for plain HTTP. A certificate without its
    /// key (or the reverse), or a client CA without both, is refused.
    pub fn tls_files(&self) -> Result<Option<TlsFiles>, ConfigError> {
        let shown = |p: &Option<PathBuf>| p.as_ref().map(|p| p.display().to_string());
        match (&self.tls_cert, &self.tls_key) {
            (Some(cert), Some(key)) => Ok(Some(TlsFiles {
                cert: cert.clone(),
                key: key.clone(),
                client_ca: self.tls_client_ca.clone(),
            })),
            (Some(cert), None) => Err(ConfigError {
                key: "lock.tls.key",
                value: String::new(),
                why: format!("must be set with --tls-cert ({})", cert.display()),
            }),
            (None, Some(key)) => Err(ConfigError {
                key: "lock.tls.cert",
                value: String::new(),
                why: format!("must be set with --tls-key ({})", key.display()),
            }),
            (None, None) => match shown(&self.tls_client_ca) {
                Some(ca) => Err(ConfigError {
                    key: "lock.tls.client-ca",
                    value: ca,
                    why: "needs --tls-cert and --tls-key (mutual TLS is TLS first)".into(),
                }),
                None => Ok(None),
            },
        }
    }

    /// Checks every value and builds the server's [`Limits`].
    pub fn limits(&self) -> Result<Limits, ConfigError> {
        let ttl_min = duration("lock.ttl.min", &self.ttl_min)?;
        let ttl_max = duration("lock.ttl.max", &self.ttl_max)?;
        if ttl_min.is_zero() {
            return Err(ConfigError {
                key: "lock.ttl.min",
                value: self.ttl_min.clone(),
                why: "must be greater than 0".into(),
            });
        }
        if ttl_max < ttl_min || ttl_max > TTL_CEILING {
            return Err(ConfigError {
                key: "lock.ttl.max",
                value: self.ttl_max.clone(),
                why: format!("must be between --ttl-min ({}) and 7 days", self.ttl_min),
            });
        }
        let in_range = |key: &'static str, value: &String| -> Result<Duration, ConfigError> {
            let d = duration(key, value)?;
            if d < ttl_min || d > ttl_max {
                return Err(ConfigError {
                    key,
                    value: value.clone(),
                    why: format!(
                        "must be within --ttl-min..--ttl-max ({}..{})",
                        self.ttl_min, self.ttl_max
                    ),
                });
            }
            Ok(d)
        };
        let session_ttl = in_range("lock.session.ttl", &self.session_ttl)?;
        let default_ttl = in_range("lock.default.ttl", &self.default_ttl)?;
        let grace = match &self.grace {
            Some(g) => GracePolicy::Fixed(duration("lock.server.grace", g)?),
            None => {
                let v = &self.clock_drift_ppm;
                GracePolicy::Derived(GraceParams {
                    offset_max: duration("lock.clock.offset-max", &self.clock_offset_max)?,
                    quantum: duration("lock.clock.quantum", &self.clock_quantum)?,
                    drift_ppm: v
                        .trim()
                        .parse::<u64>()
                        .ok()
                        .filter(|n| *n <= 1_000_000)
                        .ok_or_else(|| ConfigError {
                            key: "lock.clock.drift-ppm",
                            value: v.clone(),
                            why: "must be a whole number of ppm from 0 to 1000000".into(),
                        })?,
                })
            }
        };
        Ok(Limits {
            default_ttl,
            session_ttl,
            ttl_min,
            ttl_max,
            grace,
            sabotage: self.sabotage,
        })
    }
}

#[cfg(test)]
mod tests;
