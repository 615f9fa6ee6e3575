//! The `lock-server` binary: parse the C4 options and check every input (a
//! refused one exits 2 naming its flag, before anything is logged, bound or
//! opened: the TLS files and the token file are read here), set up the JSON
//! log, bind, open the store, print `listening on http://IP:PORT`
//! (`https://` with TLS), serve until SIGTERM or Ctrl-C and log `stopped`.
//! SIGHUP re-reads the token file and the TLS pair; `lock-server token new`
//! issues a token instead of serving.

use std::io::Write;
use std::net::SocketAddr;
use std::sync::{Arc, OnceLock};

use clap::Parser;
use fencepost_api::MonotonicClock;
use fencepost_api::auth::{Role, issue_token};
use lock_server::LockService;
use lock_server::auth::Authenticator;
use lock_server::config::{Args, Command, LeaderSettings, TokenCommand};
use lock_server::core::Limits;
use lock_server::tls::{TlsMode, TlsServer};
use tokio::signal::unix::{Signal, SignalKind, signal};

/// Exit code of a refused flag, environment variable or input file.
const EXIT_REFUSED: i32 = 2;
/// Exit code of a start or serve that failed on a checked configuration
/// (the port is taken, the store cannot be opened).
const EXIT_FAILED: i32 = 1;

#[tokio::main]
async fn main() {
    let args = Args::parse();
    if let Some(Command::Token(cmd)) = &args.command {
        token_command(cmd);
    }
    let inputs = check_inputs(&args).unwrap_or_else(|e| exit(EXIT_REFUSED, &e));
    init_logging();
    log_start_modes(&inputs);
    let listener = lock_server::listen(args.listen).unwrap_or_else(|e| {
        exit(
            EXIT_FAILED,
            &format!("cannot listen on {} (--listen): {e}", args.listen),
        )
    });
    let addr = listener
        .local_addr()
        .expect("bound listener has an address");
    let service = open_service(&args, &inputs, addr).await;
    announce(&service, &inputs, addr);
    watch_sighup(&inputs);
    // SIGTERM and SIGINT are caught from before the line is printed: a stop
    // asked for as soon as it appears is a graceful one.
    let shutdown = shutdown_signal();
    let scheme = if inputs.tls.is_some() {
        "https"
    } else {
        "http"
    };
    println!("listening on {scheme}://{addr}");
    let _ = std::io::stdout().flush();
    if let Err(e) = lock_server::serve(listener, service, inputs.auth, inputs.tls, shutdown).await {
        exit(EXIT_FAILED, &e.to_string());
    }
    tracing::info!(
        event = "stopped",
        reason = STOP_REASON.get().copied().unwrap_or("unknown"),
        "stopped"
    );
}

/// Prints `lock-server: {message}` on stderr and exits with `code`.
fn exit(code: i32, message: &str) -> ! {
    eprintln!("lock-server: {message}");
    std::process::exit(code)
}

/// `lock-server token new`: prints the secret on stdout and the token file's
/// line on stderr, then exits (2 when `--name` or `--prefix` is refused).
fn token_command(cmd: &TokenCommand) -> ! {
    let TokenCommand::New { name, role, prefix } = cmd;
    let role = Role::parse(role).expect("clap admits only the three roles");
    match issue_token(name, role, prefix.as_deref()) {
        Ok(t) => {
            println!("{}", t.secret);
            eprintln!("{}", t.line);
            std::process::exit(0)
        }
        Err(e) => exit(EXIT_REFUSED, &format!("token new: {e}")),
    }
}

/// Every input, checked before the first log line: limits, the store URL's
/// form, the election settings, the TLS files (read) and the token file (read).
struct Inputs {
    limits: Limits,
    leader: LeaderSettings,
    tls: Option<TlsServer>,
    auth: Option<Arc<Authenticator>>,
}

/// Checks every input; the message of a refusal names the flag.
fn check_inputs(args: &Args) -> Result<Inputs, String> {
    let limits = args.limits().map_err(|e| e.to_string())?;
    lock_server::config::check_store_url(&args.store).map_err(|e| e.to_string())?;
    let leader = args.leader_settings().map_err(|e| e.to_string())?;
    // The TLS files are read before anything is bound or opened: a bad
    // certificate stops the start with the flag and the file named.
    let tls = args
        .tls_files()
        .and_then(|f| f.map(|f| TlsServer::load(&f)).transpose())
        .map_err(|e| e.to_string())?;
    let auth = match &args.auth_tokens {
        Some(path) => Some(Arc::new(Authenticator::load(path).map_err(|e| {
            format!("--auth-tokens (lock.auth.tokens, LOCK_AUTH_TOKENS): {e}")
        })?)),
        None => None,
    };
    Ok(Inputs {
        limits,
        leader,
        tls,
        auth,
    })
}

/// JSON lines on stderr, one flat object a line (`timestamp`, `level`,
/// `message`, the event's fields, `target`), filtered by `RUST_LOG`.
fn init_logging() {
    tracing_subscriber::fmt()
        .json()
        .flatten_event(true)
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
}

/// The modes an operator must see at start: API tokens or none, sabotage.
fn log_start_modes(inputs: &Inputs) {
    match &inputs.auth {
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
    if let Some(s) = inputs.limits.sabotage {
        tracing::warn!(
            event = "sabotage",
            mode = s.as_str(),
            "SABOTAGE {}: safety is broken on purpose; NOT SAFE, for checkers only",
            s.as_str()
        );
    }
}

/// Opens the store and starts the service (a replica on PostgreSQL); a store
/// that cannot be opened exits 1.
async fn open_service(args: &Args, inputs: &Inputs, addr: SocketAddr) -> Arc<LockService> {
    let service = lock_server::start_replica_service(
        inputs.limits.clone(),
        &args.store,
        Arc::new(MonotonicClock::new()),
        inputs.leader.for_bound(addr),
    )
    .await
    .unwrap_or_else(|e| {
        exit(
            EXIT_FAILED,
            &format!("cannot open the store {} (--store): {e}", args.store),
        )
    });
    // One election round before announcing: a replica on a free leader row
    // serves from its first request; otherwise it starts as a standby.
    service.elect_once().await;
    service
}

/// The transport mode, the `plaintext` warning, the `lock-server ready`
/// line and the clock check, in that order.
fn announce(service: &LockService, inputs: &Inputs, addr: SocketAddr) {
    let mode = inputs.tls.as_ref().map_or(TlsMode::None, |t| t.mode);
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
        auth = if inputs.auth.is_some() { "tokens" } else { "none" },
        tls = mode.as_str(),
        %addr,
        "lock-server ready"
    );
    // The clock check of the lease-safety essay: does the kernel's estimate
    // of this host's clock error vouch for lock.clock.offset-max?
    service.log_clock_discipline();
}

/// Installs the SIGHUP handling before `listening on` is printed (tokio
/// keeps a handler installed for the process's life), so a SIGHUP sent as
/// soon as the line appears never ends the server by its default action:
/// with a token file it re-reads it, with TLS the TLS reloader (already
/// watching) re-reads the pair, with neither it is logged and ignored.
fn watch_sighup(inputs: &Inputs) {
    if inputs.tls.is_some() {
        let _ = signal(SignalKind::hangup());
    }
    if let Some(a) = &inputs.auth {
        match signal(SignalKind::hangup()) {
            Ok(hup) => {
                tokio::spawn(reload_on_sighup(a.clone(), hup));
            }
            Err(e) => tracing::error!(
                error = %e,
                "auth: cannot listen for SIGHUP; the token file is read only at start"
            ),
        }
    }
    if inputs.tls.is_none() && inputs.auth.is_none() {
        match signal(SignalKind::hangup()) {
            Ok(hup) => {
                tokio::spawn(ignore_sighup(hup));
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot listen for SIGHUP; a SIGHUP ends the server")
            }
        }
    }
}

/// Re-reads the token file on every SIGHUP: a good file is in force for
/// every request from then on; a bad one is logged at ERROR and the set in
/// force kept.
async fn reload_on_sighup(auth: Arc<Authenticator>, mut hup: Signal) {
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
async fn ignore_sighup(mut hup: Signal) {
    while hup.recv().await.is_some() {
        tracing::info!(
            event = "sighup",
            "SIGHUP: nothing to reload (no TLS, no token file); still serving"
        );
    }
}

/// The signal that ended the server (`SIGTERM`, `SIGINT`), for `stopped`.
static STOP_REASON: OnceLock<&'static str> = OnceLock::new();

/// Installs the SIGTERM and SIGINT handlers now and returns a future that
/// resolves on the first of them, recording which in [`STOP_REASON`].
fn shutdown_signal() -> impl std::future::Future<Output = ()> + Send + 'static {
    let mut term = signal(SignalKind::terminate()).ok();
    let mut int = signal(SignalKind::interrupt()).ok();
    async move {
        let reason = tokio::select! {
            _ = recv(&mut term) => "SIGTERM",
            _ = recv(&mut int) => "SIGINT",
        };
        let _ = STOP_REASON.set(reason);
        tracing::info!(
            event = "shutting_down",
            signal = reason,
            "shutting down: finishing the requests in flight"
        );
    }
}

/// The next delivery of `s`; never, when its handler could not be installed.
async fn recv(s: &mut Option<Signal>) {
    match s {
        Some(s) => {
            s.recv().await;
        }
        None => std::future::pending::<()>().await,
    }
}
