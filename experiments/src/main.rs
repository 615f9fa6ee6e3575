//! The `experiments` binary: parse, dispatch, map outcomes to exit codes.

use clap::Parser;

use experiments::cli::{Cli, Command};

fn main() {
    let cli = Cli::parse();
    bench::cli::init_tracing();
    let code = match cli.command {
        Command::Worker(args) => experiments::worker_proc::main(args),
        Command::Pause(args) => experiments::pause::main(&args),
        Command::Clock(args) => experiments::clock::main(&args),
        Command::Throttle(args) => experiments::throttle::main(&args),
        Command::Failover(args) => experiments::failover::main(&args),
        Command::Chaos(args) => experiments::chaos::main(&args),
    };
    std::process::exit(code);
}
