//! `rail-stub` stands in for everything a payout worker touches after it holds
//! the lock (C2): the payout ledger with fence 1 (claim/release), the simulated
//! payment rail with fence 2 (submit) and its seeded latency, and the
//! must-be-zero counters (`lock.fenced.out`, `rail.duplicate.attempted`).
//!
//! Layout: [`ledger`] is the pure state machine; [`state`] orders decide →
//! persist → apply under one mutex; [`store`] persists (memory or SQLite);
//! [`http`] maps C2's routes onto the state; [`metrics`] renders Prometheus
//! text; [`config`] is the command line. [`run`] serves on a listener the
//! caller bound, until the caller's shutdown future completes.

pub mod config;
pub mod error;
pub mod http;
pub mod ledger;
pub mod metrics;
pub mod state;
pub mod store;

use std::future::Future;
use std::io::Write;
use std::sync::Arc;

use fencepost_api::auth::{TokenFile, TokenFileError};
use fencepost_api::clock::MonotonicClock;

pub use config::{Cli, Config, Fences, Sabotage};
pub use error::RailError;
pub use http::{app, app_with_auth};
pub use state::AppState;
pub use store::{LedgerSpec, StoreError};

/// Why the server could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The ledger store could not be opened or reloaded; fix `--ledger`.
    #[error("cannot open the ledger {ledger} (--ledger): {source}")]
    Store {
        /// The `--ledger` value.
        ledger: LedgerSpec,
        /// Why it could not be opened.
        #[source]
        source: StoreError,
    },
    /// The listener failed (its address, or serving).
    #[error("listener: {0}")]
    Io(#[from] std::io::Error),
}

/// Reads the API token file `config` names (`--auth-tokens`), if any. Done
/// before anything is logged or bound, so a bad file is refused first.
pub fn load_auth(config: &Config) -> Result<Option<Arc<TokenFile>>, TokenFileError> {
    config
        .auth_tokens
        .as_ref()
        .map(|path| TokenFile::load(path).map(Arc::new))
        .transpose()
}

/// Opens the state from `config`, prints `listening on http://IP:PORT` on
/// stdout once ready, and serves until `shutdown` completes; writes are
/// checked against `auth` ([`load_auth`]) when given.
pub async fn run(
    listener: tokio::net::TcpListener,
    config: Config,
    auth: Option<Arc<TokenFile>>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), RunError> {
    let ledger = config.ledger.clone();
    let state = AppState::open(config, Arc::new(MonotonicClock::new()))
        .map_err(|source| RunError::Store { ledger, source })?;
    let addr = listener.local_addr()?;
    match &auth {
        Some(a) => {
            tracing::info!(auth = "tokens", file = %a.path().display(), tokens = a.len(),
                "rail_auth: writes need a client or admin token; SIGHUP re-reads the file");
            // Listening before the first request: a SIGHUP re-reads the file.
            let hup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())?;
            tokio::spawn(reload_on_sighup(a.clone(), hup));
        }
        None => tracing::warn!(
            auth = "none",
            "rail_auth: none — any client that reaches the port can create, claim, submit and release payouts; start with --auth-tokens FILE"
        ),
    }
    let c = state.config();
    if !c.ledger.is_durable() {
        tracing::warn!(
            ledger = %c.ledger,
            "rail_ledger_not_durable: --ledger memory forgets every payout, PAID state and fence on restart"
        );
    }
    if let Some(sabotage) = c.sabotage {
        // Loud on purpose: a sabotaged rail must never pass for a real one.
        eprintln!(
            "rail-stub: --sabotage {} — FENCES ARE OFF; stale holders will be paid; TEST USE ONLY",
            sabotage.as_str()
        );
        tracing::error!(
            sabotage = sabotage.as_str(),
            "rail_sabotage_enabled: both fences are off, stale and repeated submissions pay (test use only)"
        );
    }
    if c.fences == Fences::Off {
        tracing::warn!(
            fences = c.fences.as_str(),
            "rail_fences_off: --fences off compares no token; a stale lock holder pays"
        );
    }
    tracing::info!(
        seed = c.seed,
        latency = %c.latency,
        ledger = %c.ledger,
        %addr,
        payouts = state.payout_count(),
        "rail_stub_started"
    );
    {
        let mut out = std::io::stdout().lock();
        writeln!(out, "listening on http://{addr}")?;
        out.flush()?;
    }
    serve_with_auth(listener, state, auth, shutdown).await?;
    Ok(())
}

/// Re-reads the token file on every SIGHUP; a bad file is logged at ERROR
/// and the set in force kept.
async fn reload_on_sighup(auth: Arc<TokenFile>, mut hup: tokio::signal::unix::Signal) {
    while hup.recv().await.is_some() {
        match auth.reload() {
            Ok(n) => tracing::info!(tokens = n, "rail_auth_reloaded"),
            Err(e) => tracing::error!(error = %e, tokens = auth.len(),
                "rail_auth_reload_refused: the tokens read before stay in force"),
        }
    }
}

/// Serves [`app`] over `state` on `listener` until `shutdown` completes, then
/// finishes the requests in flight.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: Arc<AppState>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    serve_with_auth(listener, state, None, shutdown).await
}

/// [`serve`], with writes checked against `auth`'s tokens when given.
pub async fn serve_with_auth(
    listener: tokio::net::TcpListener,
    state: Arc<AppState>,
    auth: Option<Arc<TokenFile>>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, app_with_auth(state, auth))
        .with_graceful_shutdown(shutdown)
        .await
}
