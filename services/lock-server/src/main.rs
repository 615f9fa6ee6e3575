//! The `lock-server` binary: parse the C4 options, load the TLS files if any,
//! open the store, bind, print `listening on http://IP:PORT` (`https://` with
//! TLS), serve until SIGTERM or Ctrl-C.

use std::io::Write;
use std::sync::Arc;

use clap::Parser;
use fencepost_api::MonotonicClock;
use lock_server::config::Args;
use lock_server::tls::TlsMode;

#[tokio::main]
async fn main() {
    let args = Args::parse();
    tracing_subscriber::fmt()
        .json()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    let limits = match args.limits() {
        Ok(l) => l,
        Err(e) => {
            eprintln!("lock-server: {e}");
            std::process::exit(2);
        }
    };
    if let Some(s) = limits.sabotage {
        tracing::warn!(
            event = "sabotage",
            mode = s.as_str(),
            "SABOTAGE {}: safety is broken on purpose; NOT SAFE, for checkers only",
            s.as_str()
        );
    }
    // The TLS files are read before anything is bound or opened: a bad
    // certificate stops the start with the key and the file named.
    let tls = match args
        .tls_files()
        .and_then(|f| f.map(|f| lock_server::tls::TlsServer::load(&f)).transpose())
    {
        Ok(t) => t,
        Err(e) => {
            eprintln!("lock-server: {e}");
            std::process::exit(2);
        }
    };
    let listener = match lock_server::listen(args.listen) {
        Ok(l) => l,
        Err(e) => {
            eprintln!(
                "lock-server: cannot listen on {} (lock.listen): {e}",
                args.listen
            );
            std::process::exit(1);
        }
    };
    let addr = listener
        .local_addr()
        .expect("bound listener has an address");
    let leader = match args.leader(addr) {
        Ok(l) => l,
        Err(e) => {
            eprintln!("lock-server: {e}");
            std::process::exit(2);
        }
    };
    let service = match lock_server::start_replica_service(
        limits,
        &args.store,
        Arc::new(MonotonicClock::new()),
        leader,
    )
    .await
    {
        Ok(s) => s,
        Err(e) => {
            eprintln!("lock-server: cannot open the store: {e}");
            std::process::exit(1);
        }
    };
    // One election round before announcing: a replica on a free leader row
    // serves from its first request; otherwise it starts as a standby.
    service.elect_once().await;
    let mode = tls.as_ref().map_or(TlsMode::None, |t| t.mode);
    service.set_tls_mode(mode);
    if mode == TlsMode::None && !addr.ip().is_loopback() {
        tracing::warn!(
            event = "plaintext",
            %addr,
            "lock.tls.cert is not set: every request and reply crosses the network in plaintext; \
             set --tls-cert and --tls-key (docs/deployment.md, TLS)"
        );
    }
    let view = service.config_view();
    tracing::info!(
        store = %view.store,
        store_path = view.store_path.as_deref().unwrap_or(""),
        durable = view.durable,
        role = view.role.as_deref().unwrap_or(""),
        advertise = service.leader_config().and_then(|c| c.advertise.as_deref()).unwrap_or(""),
        leader_lease_ms = view.leader_lease_ms.unwrap_or(0),
        tls = mode.as_str(),
        %addr,
        "lock-server ready"
    );
    // The clock check of the lease-safety essay: does the kernel's estimate
    // of this host's clock error vouch for lock.clock.offset-max?
    service.log_clock_discipline();
    if tls.is_some() {
        // Installs the SIGHUP handler before the line is printed (tokio keeps
        // a handler installed for the process's life): a reload asked for as
        // soon as the line appears reloads instead of killing the server.
        let _ = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup());
    }
    let scheme = if tls.is_some() { "https" } else { "http" };
    println!("listening on {scheme}://{addr}");
    let _ = std::io::stdout().flush();
    let served = match tls {
        Some(tls) => lock_server::run_tls(listener, service, tls, shutdown_signal()).await,
        None => lock_server::run(listener, service, shutdown_signal()).await,
    };
    if let Err(e) = served {
        eprintln!("lock-server: {e}");
        std::process::exit(1);
    }
}

/// Resolves on SIGTERM or Ctrl-C (SIGINT).
async fn shutdown_signal() {
    let ctrl_c = async {
        let _ = tokio::signal::ctrl_c().await;
    };
    let term = async {
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate()) {
            Ok(mut s) => {
                s.recv().await;
            }
            Err(_) => std::future::pending::<()>().await,
        }
    };
    tokio::select! {
        _ = ctrl_c => {}
        _ = term => {}
    }
    tracing::info!("shutting down");
}
