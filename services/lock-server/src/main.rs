//! The `lock-server` binary: parse the C4 options, open the store, bind, print
//! `listening on http://IP:PORT`, serve until SIGTERM or Ctrl-C. With
//! `--auth-tokens` it reads the token file first (a bad file: exit 2) and
//! re-reads it on SIGHUP; `lock-server token new` issues a token instead.

use std::io::Write;
use std::sync::Arc;

use clap::Parser;
use fencepost_api::MonotonicClock;
use fencepost_api::auth::{Role, issue_token};
use lock_server::auth::Authenticator;
use lock_server::config::{Args, Command, TokenCommand};

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
    let view = service.config_view();
    tracing::info!(
        store = %view.store,
        store_path = view.store_path.as_deref().unwrap_or(""),
        durable = view.durable,
        role = view.role.as_deref().unwrap_or(""),
        advertise = service.leader_config().and_then(|c| c.advertise.as_deref()).unwrap_or(""),
        leader_lease_ms = view.leader_lease_ms.unwrap_or(0),
        auth = if auth.is_some() { "tokens" } else { "none" },
        %addr,
        "lock-server ready"
    );
    // The clock check of the lease-safety essay: does the kernel's estimate
    // of this host's clock error vouch for lock.clock.offset-max?
    service.log_clock_discipline();
    println!("listening on http://{addr}");
    let _ = std::io::stdout().flush();
    if let Some(a) = &auth {
        // Listening before the first request is served: from here on a
        // SIGHUP re-reads the file instead of ending the process.
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
    if let Err(e) = lock_server::run_with_auth(listener, service, auth, shutdown_signal()).await {
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
