//! The `bench` binary: parse, dispatch, map errors to exit codes (C4).

use bench_core::error::Chain;
use clap::Parser;

use bench::cli::{Cli, Command};

fn main() {
    let cli = Cli::parse();
    bench::cli::init_tracing();
    let code = match cli.command {
        Command::Run(args) => run(&args, false),
        Command::Sweep(args) => run(&args, true),
        Command::Report { dir } => match bench_report::report::write_report(&dir) {
            Ok(path) => {
                println!("report: {}", path.display());
                0
            }
            Err(e) => {
                eprintln!("bench report: {}", Chain(&e));
                2
            }
        },
        Command::Replay { dir, out } => match bench::drive::replay_plan(&dir, out) {
            Ok(plan) => {
                eprintln!(
                    "bench replay: {} cell(s) of {} with seed {}",
                    plan.cells.len() * plan.config.backends.len(),
                    dir.display(),
                    plan.config.seed
                );
                block_on(bench::drive::execute(plan), "bench replay")
            }
            Err(e) => {
                eprintln!("bench replay: {e}");
                2
            }
        },
        Command::Peer(args) => match bench::peer_sessions::resolve(&args) {
            Ok(plan) if plan.sessions.is_some() => {
                block_on(bench::peer_sessions::execute(plan), "bench peer")
            }
            Ok(plan) => block_on(bench::peer::execute(plan), "bench peer"),
            Err(e) => {
                eprintln!("bench peer: {e}");
                2
            }
        },
        Command::Adr(args) => match &args.rtt_from {
            Some(src) => {
                match bench::rtt_from::fetch_into(src, &args.window, &args.selector, &args.out) {
                    Ok(()) => bench::adr::main(&args),
                    Err(e) => {
                        eprintln!("bench adr: {}", Chain(&e));
                        2
                    }
                }
            }
            None => bench::adr::main(&args),
        },
        Command::Triggers(args) => triggers(&args),
        Command::Docs(args) => match bench::docs::run(&args) {
            Ok(code) => code,
            Err(e) => {
                eprintln!("bench docs: {}", Chain(&e));
                2
            }
        },
        Command::Rules(args) => match bench::prometheus::run_rules(&args) {
            Ok(()) => 0,
            Err(e) => {
                eprintln!("bench rules: {}", Chain(&e));
                2
            }
        },
    };
    std::process::exit(code);
}

fn triggers(args: &bench::cli::TriggersArgs) -> i32 {
    let result = match (&args.prometheus, &args.dir) {
        (Some(url), _) => {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("tokio runtime");
            rt.block_on(bench::prometheus::run_live(
                url,
                &args.checks,
                args.out.as_deref(),
            ))
            .map_err(anyhow::Error::from)
        }
        (None, Some(dir)) => {
            bench_analysis::triggers::run_triggers_command(dir).map_err(anyhow::Error::from)
        }
        (None, None) => Err(anyhow::anyhow!("needs DIR or --prometheus URL")),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("bench triggers: {e:#}");
            2
        }
    }
}

fn run(args: &bench::cli::RunArgs, sweep: bool) -> i32 {
    let plan = match bench::drive::resolve(args, sweep) {
        Ok(p) => p,
        Err(e) => {
            eprintln!("bench: {e}");
            return 2;
        }
    };
    block_on(bench::drive::execute(plan), "bench")
}

/// Runs `work` on a multi-thread runtime: its exit code, or 1 after printing the error.
fn block_on<E: Into<anyhow::Error>>(
    work: impl std::future::Future<Output = Result<i32, E>>,
    name: &str,
) -> i32 {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    match rt.block_on(work) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("{name}: {:#}", e.into());
            1
        }
    }
}
