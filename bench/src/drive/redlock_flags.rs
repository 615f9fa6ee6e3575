//! `--redlock-instances` and the flags `--backend redlock` cannot take:
//! checked into the number of redis-servers the run's Redlock cells use,
//! every bad value an exit-2 error naming its flag.

use crate::cli::RunArgs;
use crate::runner::Runtime;
use bench_core::grid::FlagError;
use bench_driver::backend::BackendKind;

/// How many instances Redlock runs on without `--redlock-instances` or `--redis-url`.
pub const DEFAULT_REDLOCK_INSTANCES: u32 = 3;

fn flag(flag: &'static str, value: &str, why: impl Into<String>) -> FlagError {
    FlagError {
        flag,
        value: value.to_string(),
        why: why.into(),
    }
}

/// The number of Redlock instances: `--redlock-instances`, else as many as
/// `--redis-url` names (`urls`), else 3. It must be odd and at least 3, and
/// match the URLs when both are given. Only with `--backend redlock`, on the
/// process runtime, without `--net-delay` (the delay proxy relays one
/// address, Redlock talks to N) and without `--sessions` (idle sessions are
/// fencepost SDK sessions).
pub fn resolve_redlock(
    args: &RunArgs,
    backends: &[BackendKind],
    runtime: &Runtime,
    urls: &[String],
) -> Result<u32, FlagError> {
    let given = args.redlock_instances;
    if !backends.contains(&BackendKind::Redlock) {
        return match given {
            Some(n) => Err(flag(
                "--redlock-instances",
                &n.to_string(),
                "needs --backend redlock",
            )),
            None => Ok(DEFAULT_REDLOCK_INSTANCES),
        };
    }
    check_redlock_companions(args, runtime)?;
    let n = given.unwrap_or(match urls.len() {
        0 => DEFAULT_REDLOCK_INSTANCES,
        k => u32::try_from(k).unwrap_or(u32::MAX),
    });
    let odd = "expected an odd number of instances, at least 3 (3 or 5): a majority of an even \
               number tolerates no more failures than the odd number below it";
    if n < 3 || n.is_multiple_of(2) {
        return Err(match given {
            Some(n) => flag("--redlock-instances", &n.to_string(), odd),
            None => flag("--redis-url", &urls.join(","), odd),
        });
    }
    if !urls.is_empty() && urls.len() != n as usize {
        return Err(flag(
            "--redis-url",
            &urls.join(","),
            format!(
                "names {} instances; --redlock-instances is {n}: give one URL per instance",
                urls.len()
            ),
        ));
    }
    Ok(n)
}

/// The flags Redlock cannot run with.
fn check_redlock_companions(args: &RunArgs, runtime: &Runtime) -> Result<(), FlagError> {
    if !matches!(runtime, Runtime::Process { .. }) {
        return Err(flag(
            "--backend",
            &args.backend,
            "redlock runs with --runtime process (redis-server children beside a rail-stub)",
        ));
    }
    if let Some(d) = &args.net_delay {
        return Err(flag(
            "--net-delay",
            d,
            "the delay proxy relays one lock-service address and redlock talks to several; \
             drop --net-delay or --backend redlock",
        ));
    }
    if args.sessions > 0 {
        return Err(flag(
            "--sessions",
            &args.sessions.to_string(),
            "idle sessions are fencepost SDK sessions; drop --backend redlock",
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use super::*;
    use crate::cli::{Cli, Command};

    fn run_args(argv: &[&str]) -> RunArgs {
        let cli = Cli::try_parse_from(["bench", "run"].iter().chain(argv)).unwrap();
        match cli.command {
            Command::Run(a) => a,
            _ => unreachable!("bench run parses as run"),
        }
    }

    fn process() -> Runtime {
        Runtime::Process {
            store: None,
            replicas: 1,
        }
    }

    fn resolve(argv: &[&str], urls: &[&str]) -> Result<u32, String> {
        let urls: Vec<String> = urls.iter().map(|u| u.to_string()).collect();
        let args = run_args(argv);
        resolve_redlock(&args, &[BackendKind::Redlock], &process(), &urls)
            .map_err(|e| e.to_string())
    }

    #[test]
    fn three_instances_by_default_five_on_request() {
        assert_eq!(resolve(&[], &[]), Ok(3));
        assert_eq!(resolve(&["--redlock-instances", "5"], &[]), Ok(5));
        let urls = [
            "redis://127.0.0.1:1",
            "redis://127.0.0.1:2",
            "redis://127.0.0.1:3",
        ];
        assert_eq!(resolve(&[], &urls), Ok(3), "as many as the URLs");
    }

    #[test]
    fn an_even_or_too_small_count_is_refused_naming_the_value() {
        for n in ["1", "2", "4"] {
            let e = resolve(&["--redlock-instances", n], &[]).unwrap_err();
            assert!(
                e.contains("--redlock-instances") && e.contains(n) && e.contains("odd"),
                "{e}"
            );
        }
        let e = resolve(&[], &["redis://127.0.0.1:1", "redis://127.0.0.1:2"]).unwrap_err();
        assert!(e.contains("--redis-url") && e.contains("odd"), "{e}");
    }

    #[test]
    fn the_urls_must_match_the_count() {
        let urls = [
            "redis://127.0.0.1:1",
            "redis://127.0.0.1:2",
            "redis://127.0.0.1:3",
        ];
        let e = resolve(&["--redlock-instances", "5"], &urls).unwrap_err();
        assert!(e.contains("names 3 instances") && e.contains("is 5"), "{e}");
    }

    #[test]
    fn redlock_flags_and_companions_are_checked() {
        let args = run_args(&["--redlock-instances", "3"]);
        let e = resolve_redlock(&args, &[BackendKind::Fencepost], &process(), &[]).unwrap_err();
        assert!(e.to_string().contains("needs --backend redlock"), "{e}");
        let e = resolve(&["--net-delay", "fixed:1ms"], &[]).unwrap_err();
        assert!(e.contains("--net-delay"), "{e}");
        let e = resolve(&["--sessions", "10"], &[]).unwrap_err();
        assert!(e.contains("--sessions"), "{e}");
        let args = run_args(&[]);
        let external = Runtime::External {
            lock_url: "http://127.0.0.1:1".into(),
            rail_url: "http://127.0.0.1:2".into(),
        };
        let e = resolve_redlock(&args, &[BackendKind::Redlock], &external, &[]).unwrap_err();
        assert!(e.to_string().contains("--runtime process"), "{e}");
    }
}
