//! The `experiments` binary: parse, dispatch, map outcomes to exit codes.

use clap::Parser;

use experiments::cli::{Cli, Command};

fn main() {
    let cli = Cli::parse();
    bench_core::logging::init_tracing();
    let code = match cli.command {
        Command::Worker(args) => bench_driver::worker_process::child::main(args.spec),
        Command::Pause(args) => experiments::pause::main(&args.to_run()),
        Command::Clock(args) => experiments::clock::main(&args.to_run()),
        Command::Throttle(args) => experiments::throttle::main(&args.to_inputs()),
        Command::Failover(args) => experiments::failover::main(&args.to_inputs()),
        Command::Chaos(args) => experiments::chaos::main(&args.to_inputs()),
    };
    std::process::exit(code);
}
