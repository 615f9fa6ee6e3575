//! The `experiments` binary: parse, dispatch, map outcomes to exit codes.

use clap::Parser;

use experiments::cli::{Cli, Command};

fn main() {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .init();
    let code = match cli.command {
        Command::Worker(args) => experiments::worker_proc::main(args),
        Command::Pause(args) => experiments::pause::main(&args),
        Command::Clock(args) => experiments::clock::main(&args),
        Command::Throttle(args) => experiments::throttle::main(&args),
    };
    std::process::exit(code);
}
