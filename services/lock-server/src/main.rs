//! The `lock-server` binary: parse the C4 options, load the TLS files if any,
//! open the store, bind, print `listening on http://IP:PORT` (`https://` with
//! TLS), serve until SIGTERM or Ctrl-C. With `--auth-tokens` it reads the
//! token file first (a bad file: exit 2) and re-reads it on SIGHUP;
//! `lock-server token new` issues a token instead.

use std::io::Write;
use std::sync::Arc;

use clap::Parser;
use fencepost_api::MonotonicClock;
use fencepost_api::auth::{Role, issue_token};
use lock_server::auth::Authenticator;
use lock_server::config::{Args, Command, TokenCommand};
use lock_server::tls::TlsMode;

#[tokio::main]
async fn main() {
    let args = Args::parse();
    if let Some(Command::Token(TokenCommand::New { name, role, prefix })) = &args.command {
        let role = Role::parse(role).expect("clap admits only the three roles");
        match issue_token(name, role, prefix.as_deref()) {
            Ok(t) => {
                println!("{}", t.secret);
                eprintln!("{}", t.line);
                return;
            }
            Err(e) => {
                eprintln!("lock-server token new: {e}");
                std::process::exit(2);
            }
        }
    }
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
    let auth = match &args.auth_tokens {
        Some(path) => match Authenticator::load(path) {
            Ok(a) => Some(Arc::new(a)),
            Err(e) => {
                eprintln!("lock-server: lock.auth.tokens: {e}");
                std::process::exit(2);
            }
        },
        None => None,
    };
    match &auth {
        Some(a) => tracing::info!(
            event = "auth",
            auth = "tokens",
            file = %a.path().display(),
            tokens = a.len(),
            "auth: tokens ({} in force); SIGHUP re-reads the file",
            a.len()
        ),
        None => tracing::warn!(
            event = "auth",
            auth = "none",
            "auth: none — any client that reaches the port can revoke any grant; \
             start with --auth-tokens FILE (docs/security.md)"
        ),
    }
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
        auth = if auth.is_some() { "tokens" } else { "none" },
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
    if let Some(a) = &auth {
        // Before the line is printed, for the same reason: from here on a
        // SIGHUP re-reads the token file instead of ending the process.
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) {
            Ok(hup) => {
                tokio::spawn(reload_on_sighup(a.clone(), hup));
            }
            Err(e) => tracing::error!(
                error = %e,
                "auth: cannot listen for SIGHUP; the token file is read only at start"
            ),
        }
    }
    if tls.is_none() && auth.is_none() {
        // Nothing to reload, but a SIGHUP (a closed terminal, a reload sent
        // to every service) must not end the server by its default action,
        // as it does not with TLS or a token file: logged, and ignored.
        match tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup()) {
            Ok(hup) => {
                tokio::spawn(ignore_sighup(hup));
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for SIGHUP; a SIGHUP ends the server")
            }
        }
    }
    let scheme = if tls.is_some() { "https" } else { "http" };
    println!("listening on {scheme}://{addr}");
    let _ = std::io::stdout().flush();
    if let Err(e) = lock_server::serve(listener, service, auth, tls, shutdown_signal()).await {
        eprintln!("lock-server: {e}");
        std::process::exit(1);
    }
}

/// Re-reads the token file on every SIGHUP: a good file is in force for
/// every request from then on; a bad one is logged at ERROR and the set in
/// force kept.
async fn reload_on_sighup(auth: Arc<Authenticator>, mut hup: tokio::signal::unix::Signal) {
    while hup.recv().await.is_some() {
        match auth.reload() {
            Ok(n) => tracing::info!(
                event = "auth_reload",
                tokens = n,
                "auth: token file re-read; {n} tokens in force"
            ),
            Err(e) => tracing::error!(
                event = "auth_reload",
                error = %e,
                tokens = auth.len(),
                "auth: the token file was refused; the {} tokens read before stay in force",
                auth.len()
            ),
        }
    }
}

/// Logs every SIGHUP of a server with neither TLS nor a token file, and
/// keeps serving.
async fn ignore_sighup(mut hup: tokio::signal::unix::Signal) {
    while hup.recv().await.is_some() {
        tracing::info!(
            event = "sighup",
            "SIGHUP: nothing to reload (no TLS, no token file); still serving"
        );
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
