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

use fencepost_api::clock::MonotonicClock;

pub use config::{Cli, Config, Sabotage};
pub use error::RailError;
pub use http::app;
pub use state::AppState;
pub use store::{LedgerSpec, StoreError};

/// Why the server could not start or stopped with an error.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// The ledger store could not be opened or reloaded; fix `--ledger`.
    #[error("cannot open the ledger: {0}")]
    Store(#[from] StoreError),
    /// The listener failed (its address, or serving).
    #[error("listener: {0}")]
    Io(#[from] std::io::Error),
}

/// Opens the state from `config`, prints `listening on http://IP:PORT` on
/// stdout once ready, and serves until `shutdown` completes.
pub async fn run(
    listener: tokio::net::TcpListener,
    config: Config,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> Result<(), RunError> {
    let state = AppState::open(config, Arc::new(MonotonicClock::new()))?;
    let addr = listener.local_addr()?;
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
    serve(listener, state, shutdown).await?;
    tracing::info!("rail_stub_stopped");
    Ok(())
}

/// Serves [`app`] over `state` on `listener` until `shutdown` completes, then
/// finishes the requests in flight.
pub async fn serve(
    listener: tokio::net::TcpListener,
    state: Arc<AppState>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    axum::serve(listener, app(state))
        .with_graceful_shutdown(shutdown)
        .await
}
