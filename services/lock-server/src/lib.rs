//! `lock-server`: fencepost's lock service (C1). Sessions, leases, strictly
//! increasing fencing tokens and grace, with the tokens, holders and sessions
//! persisted in a [`store::LockStore`] (SQLite embedded, or PostgreSQL) and the
//! leases and session liveness kept in memory and decided on a monotonic
//! [`fencepost_api::Clock`].
//!
//! Layout: [`core`] is the pure state machine, [`service`] wires it to a store
//! and a clock, [`http`] is the C1 surface, [`auth`] its API tokens, [`config`]
//! the C4 keys, [`tls`] the HTTPS transport, and [`run`] (plain HTTP, auth off)
//! or [`serve`] (API tokens and TLS as configured) serves a bound listener
//! until a shutdown future resolves.

pub mod auth;
pub mod config;
pub mod core;
pub mod http;
pub mod leader;
pub mod service;
pub mod store;
pub mod tls;

use std::future::Future;
use std::sync::Arc;

use fencepost_api::Clock;

pub use crate::core::Limits;
pub use crate::service::LockService;

/// Serves `service` over plain HTTP on `listener` until `shutdown`
/// resolves, running the sweeper beside it. In-flight requests finish before
/// this returns.
pub async fn run(
    listener: tokio::net::TcpListener,
    service: Arc<LockService>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    serve(listener, service, None, None, shutdown).await
}

/// [`run`], with API tokens when `auth` is given.
pub async fn run_with_auth(
    listener: tokio::net::TcpListener,
    service: Arc<LockService>,
    auth: Option<Arc<auth::Authenticator>>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    serve(listener, service, auth, None, shutdown).await
}

/// As [`run`], over TLS ([`tls::serve`]): every connection is handshaken
/// with `tls` (mutual TLS when it holds a client CA), whose certificate is
/// reloaded on SIGHUP and when its files change. `/v1/config` names the mode.
pub async fn run_tls(
    listener: tokio::net::TcpListener,
    service: Arc<LockService>,
    tls: tls::TlsServer,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    serve(listener, service, None, Some(tls), shutdown).await
}

/// Serves `service` on `listener` until `shutdown` resolves: API tokens
/// when `auth` is given, HTTPS when `tls` is. The sequence every transport
/// shares: sweeper and elector beside the server, then (once every request
/// is answered) resign.
pub async fn serve(
    listener: tokio::net::TcpListener,
    service: Arc<LockService>,
    auth: Option<Arc<auth::Authenticator>>,
    tls: Option<tls::TlsServer>,
    shutdown: impl Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let (stop_tx, mut stop_rx) = tokio::sync::watch::channel(false);
    // The sweeper retires expired sessions and grants; it stops with the server.
    let sweeper = {
        let service = service.clone();
        let mut stop = stop_tx.subscribe();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(service::SWEEP_EVERY);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = tick.tick() => service.sweep().await,
                    _ = stop.changed() => break,
                }
            }
        })
    };
    // The election (replicas on PostgreSQL only): renew or take the leader row.
    let elector = service.leader_config().map(|cfg| {
        let service = service.clone();
        let period = cfg.period();
        let mut stop = stop_tx.subscribe();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(period);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = tick.tick() => service.elect_once().await,
                    _ = stop.changed() => break,
                }
            }
        })
    });
    let stop = async move {
        tokio::select! {
            _ = shutdown => {}
            _ = stop_rx.changed() => {}
        }
    };
    let served = match tls {
        None => {
            axum::serve(listener, http::app_with_auth(service.clone(), auth))
                .with_graceful_shutdown(stop)
                .await
        }
        Some(tls) => {
            service.set_tls_mode(tls.mode);
            let app = http::app_with_auth(service.clone(), auth);
            tls::serve(listener, app, tls, stop).await
        }
    };
    let _ = stop_tx.send(true);
    let _ = sweeper.await;
    if let Some(elector) = elector {
        let _ = elector.await;
    }
    // Every request has been answered: hand leadership back at once.
    service.resign().await;
    served
}

/// Opens the store named by `url` and starts a service on `clock`.
pub async fn start_service(
    limits: Limits,
    store_url: &str,
    clock: Arc<dyn Clock>,
) -> Result<Arc<LockService>, store::StoreError> {
    let store = store::open(store_url).await?;
    LockService::start(limits, store, clock).await
}

/// Opens the store named by `url` and starts a replica: on PostgreSQL it
/// takes part in the leader election with `leader` ([`leader`], C1 §6); on
/// `memory:` and `sqlite:` it is a single node, as [`start_service`].
pub async fn start_replica_service(
    limits: Limits,
    store_url: &str,
    clock: Arc<dyn Clock>,
    leader: leader::LeaderConfig,
) -> Result<Arc<LockService>, store::StoreError> {
    let store = store::open(store_url).await?;
    LockService::start_replica(limits, core::Caps::default(), store, clock, leader).await
}

/// The accept queue the lock-server asks the kernel for (capped by
/// `net.core.somaxconn`). A paused or busy server accepts nothing while its
/// fleet's heartbeats keep arriving: each client whose exchange times out
/// closes its connection and opens another, and every one of those sits in
/// the queue until accepted. With tokio's default of 1,024, a 400 ms pause
/// under 800 heartbeating sessions overflowed it (`TcpExtListenOverflows`
/// rose by exactly the sessions lost), the dropped handshakes were retried
/// after TCP's 1 s initial retransmission timeout, and the sessions' client
/// deadlines passed first.
pub const LISTEN_BACKLOG: u32 = 4096;

/// Binds `addr` with [`LISTEN_BACKLOG`] (and `SO_REUSEADDR`, as the standard
/// library's bind does).
pub fn listen(addr: std::net::SocketAddr) -> std::io::Result<tokio::net::TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(LISTEN_BACKLOG)
}
