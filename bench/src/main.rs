//! The `bench` binary: parse, dispatch, map errors to exit codes (C4).

use std::path::Path;

use bench_core::error::Chain;

use bench::cli::{Command, SweepOnly};

fn main() {
    let cli = bench::cli::parse();
    bench_core::logging::init_tracing();
    let code = match cli.command {
        Command::Run(args) => run(&args, None),
        Command::Sweep(args) => run(&args.run, Some(args.grid)),
        Command::Report { dir } => report(&dir),
        Command::Replay { dir, out } => match bench::drive::replay_plan(&dir, out) {
            Ok(plan) => {
                eprintln!(
                    "bench replay: {} cell(s) of {} with seed {}",
                    plan.cells.len() * plan.config.backends.len(),
                    dir.display(),
                    plan.config.seed
                );
                run_plan(plan, "bench replay")
            }
            Err(e) => {
                eprintln!("bench replay: {e}");
                2
            }
        },
        Command::Peer(args) => match bench::peer_sessions::resolve(&args) {
            Ok(plan) => match out_refused("bench peer", &plan.out) {
                Some(code) => code,
                None if plan.sessions.is_some() => {
                    block_on(bench::peer_sessions::execute(plan), "bench peer")
                }
                None => block_on(bench::peer::execute(plan), "bench peer"),
            },
            Err(e) => {
                eprintln!("bench peer: {e}");
                2
            }
        },
        Command::Adr(args) => adr(&args),
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

/// `Some(2)` (printed) when `--out` cannot be created or written to.
fn out_refused(name: &str, out: &Path) -> Option<i32> {
    let e = bench::drive::prepare_out(out).err()?;
    eprintln!("{name}: {}", Chain(&e));
    Some(2)
}

/// `bench report DIR`: the report, then a line per partial cell.
fn report(dir: &Path) -> i32 {
    match bench_report::report::write_report(dir) {
        Ok(path) => {
            println!("report: {}", path.display());
            if let Ok(rows) = bench_analysis::results::read_results(dir)
                && let Some(note) = bench::drive::partial_note(&rows)
            {
                println!("{note}");
            }
            0
        }
        Err(e) => {
            eprintln!("bench report: {}", Chain(&e));
            2
        }
    }
}

fn adr(args: &bench::adr::AdrArgs) -> i32 {
    // --render-only reads an existing pack (and says so when it is not one).
    if !args.render_only
        && let Some(code) = out_refused("bench adr", &args.out)
    {
        return code;
    }
    if let Some(src) = &args.rtt_from
        && let Err(e) = bench::rtt_from::fetch_into(src, &args.window, &args.selector, &args.out)
    {
        eprintln!("bench adr: {}", Chain(&e));
        return 2;
    }
    bench::adr::main(args)
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
            let write_to = if args.write {
                Some(dir.as_path())
            } else {
                args.out.as_deref()
            };
            bench_analysis::triggers::run_triggers_command(dir, write_to)
                .map_err(anyhow::Error::from)
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

fn run(args: &bench::cli::RunArgs, sweep: Option<SweepOnly>) -> i32 {
    match bench::drive::resolve(args, sweep) {
        Ok(plan) => run_plan(plan, "bench"),
        Err(e) => {
            eprintln!("bench: {e}");
            2
        }
    }
}

/// Runs a `run`/`sweep`/`replay` plan: its exit code, or the error's
/// (2 for a refused `--out`, else 1) after printing it.
fn run_plan(plan: bench::drive::Plan, name: &str) -> i32 {
    let rt = runtime();
    match rt.block_on(bench::drive::execute(plan)) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("{name}: {}", Chain(&e));
            e.exit_code()
        }
    }
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// Runs `work` on a multi-thread runtime: its exit code, or 1 after printing the error.
fn block_on<E: Into<anyhow::Error>>(
    work: impl std::future::Future<Output = Result<i32, E>>,
    name: &str,
) -> i32 {
    match runtime().block_on(work) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("{name}: {:#}", e.into());
            1
        }
    }
}
