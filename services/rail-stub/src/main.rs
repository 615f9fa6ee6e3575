//! The `rail-stub` binary: parse the command line and read the token file (a
//! refused flag, variable or file exits 2 naming its flag, before anything is
//! logged or bound), set up JSON logs on stderr, bind, hand over to
//! [`rail_stub::run`] until SIGTERM or Ctrl-C, and log `rail_stub_stopped`.

use std::sync::OnceLock;

use clap::Parser;
use rail_stub::Cli;
use tokio::signal::unix::{Signal, SignalKind, signal};
use tracing_subscriber::EnvFilter;

/// Exit code of a refused flag, environment variable or input file.
const EXIT_REFUSED: i32 = 2;
/// Exit code of a start or serve that failed on a checked configuration
/// (the port is taken, the ledger cannot be opened).
const EXIT_FAILED: i32 = 1;

#[tokio::main]
async fn main() {
    let cli = Cli::parse();
    let (addr, config) = cli.into_config();
    let auth = rail_stub::load_auth(&config).unwrap_or_else(|e| {
        exit(
            EXIT_REFUSED,
            &format!("--auth-tokens (RAIL_AUTH_TOKENS): {e}"),
        )
    });
    init_logging();
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .unwrap_or_else(|e| {
            exit(
                EXIT_FAILED,
                &format!("cannot listen on {addr} (--listen, RAIL_LISTEN): {e}"),
            )
        });
    if let Err(e) = rail_stub::run(listener, config, auth, shutdown_signal()).await {
        exit(EXIT_FAILED, &e.to_string());
    }
    tracing::info!(
        reason = STOP_REASON.get().copied().unwrap_or("unknown"),
        "rail_stub_stopped"
    );
}

/// Prints `rail-stub: {message}` on stderr and exits with `code`.
fn exit(code: i32, message: &str) -> ! {
    eprintln!("rail-stub: {message}");
    std::process::exit(code)
}

/// JSON lines on stderr, one flat object a line (`timestamp`, `level`,
/// `message`, the event's fields, `target`), filtered by `RUST_LOG`.
fn init_logging() {
    tracing_subscriber::fmt()
        .json()
        .flatten_event(true)
        .with_writer(std::io::stderr)
        .with_env_filter(
            EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info")),
        )
        .init();
}

/// The signal that ended the server (`SIGTERM`, `SIGINT`), for `rail_stub_stopped`.
static STOP_REASON: OnceLock<&'static str> = OnceLock::new();

/// Installs the SIGTERM and SIGINT handlers now and returns a future that
/// completes on the first of them, recording which in [`STOP_REASON`]. Made
/// before `listening on` is printed, so a stop asked for as soon as the line
/// appears is a graceful one.
fn shutdown_signal() -> impl std::future::Future<Output = ()> + Send + 'static {
    let mut term = signal(SignalKind::terminate()).ok();
    let mut int = signal(SignalKind::interrupt()).ok();
    async move {
        let reason = tokio::select! {
            () = recv(&mut term) => "SIGTERM",
            () = recv(&mut int) => "SIGINT",
        };
        let _ = STOP_REASON.set(reason);
        tracing::info!(signal = reason, "shutdown_requested");
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
