//! The log set-up every measurement command shares (`bench`, `experiments`
//! and the worker processes they start): human-readable lines on stderr,
//! filtered by `RUST_LOG` (default `warn`), so stdout stays the command's own
//! output (tables, a worker's JSON lines).

/// Installs the global `tracing` subscriber; call once, first thing in `main`.
pub fn init_tracing() {
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
}
