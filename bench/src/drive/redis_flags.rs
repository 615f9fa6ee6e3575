//! `--redis-url` and `--redis-persistence` against `--backend`: checked
//! into the run's configuration, every bad value an exit-2 error naming its
//! flag.

use bench_core::grid::FlagError;
use bench_driver::backend::BackendKind;
use bench_driver::backend::redis::RedisPersistence;

use crate::cli::RunArgs;

/// The Redis side of a run: the instances to use (empty: start them) and
/// how started ones persist.
#[derive(Debug, Default, PartialEq)]
pub struct RedisFlags {
    /// `--redis-url`, split on commas (one for redis, N for redlock).
    pub urls: Vec<String>,
    /// `--redis-persistence`.
    pub persistence: RedisPersistence,
}

fn flag(flag: &'static str, value: &str, why: impl Into<String>) -> FlagError {
    FlagError {
        flag,
        value: value.to_string(),
        why: why.into(),
    }
}

/// Checks the Redis flags against `backends`: they need a Redis backend;
/// every URL is `redis://HOST:PORT`; the single-instance backend takes one;
/// `--server-pause` signals a server the bench started, so it refuses
/// `--redis-url`.
pub fn resolve_redis(args: &RunArgs, backends: &[BackendKind]) -> Result<RedisFlags, FlagError> {
    let on_redis = backends
        .iter()
        .any(|b| matches!(b, BackendKind::Redis | BackendKind::Redlock));
    let persistence = match &args.redis_persistence {
        None => RedisPersistence::default(),
        Some(p) if !on_redis => {
            return Err(flag(
                "--redis-persistence",
                p,
                "needs --backend redis or redlock",
            ));
        }
        Some(p) => p
            .parse()
            .map_err(|why: String| flag("--redis-persistence", p, why))?,
    };
    let Some(given) = &args.redis_url else {
        return Ok(RedisFlags {
            urls: Vec::new(),
            persistence,
        });
    };
    let bad = |why: &str| Err(flag("--redis-url", given, why));
    if !on_redis {
        return bad("needs --backend redis or redlock");
    }
    if args.server_pause.is_some() {
        return bad("--server-pause signals a server the bench started; drop --redis-url");
    }
    let urls: Vec<String> = given
        .split(',')
        .map(|u| u.trim().trim_end_matches('/').to_string())
        .collect();
    if urls
        .iter()
        .any(|u| !u.starts_with("redis://") || u.len() <= "redis://".len())
    {
        return bad("expected redis://HOST:PORT (comma-separated for redlock)");
    }
    if backends.contains(&BackendKind::Redis) && urls.len() > 1 {
        return bad("--backend redis runs on one Redis; several URLs are for redlock");
    }
    Ok(RedisFlags { urls, persistence })
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

    fn resolve(argv: &[&str], backends: &[BackendKind]) -> Result<RedisFlags, String> {
        resolve_redis(&run_args(argv), backends).map_err(|e| e.to_string())
    }

    #[test]
    fn persistence_defaults_to_everysec_and_parses_from_its_flag() {
        let redis = [BackendKind::Redis];
        assert_eq!(
            resolve(&[], &redis).unwrap().persistence,
            RedisPersistence::EverySec
        );
        let f = resolve(&["--redis-persistence", "none"], &redis).unwrap();
        assert_eq!(f.persistence, RedisPersistence::None);
        let e = resolve(&["--redis-persistence", "never"], &redis).unwrap_err();
        assert!(
            e.contains("--redis-persistence") && e.contains("never"),
            "{e}"
        );
    }

    #[test]
    fn redis_flags_need_a_redis_backend() {
        let fp = [BackendKind::Fencepost];
        for argv in [
            &["--redis-url", "redis://127.0.0.1:6379"][..],
            &["--redis-persistence", "always"][..],
        ] {
            let e = resolve(argv, &fp).unwrap_err();
            assert!(e.contains("needs --backend redis or redlock"), "{e}");
        }
    }

    #[test]
    fn a_redis_url_is_checked_and_refused_beside_a_server_pause() {
        let redis = [BackendKind::Redis];
        let ok = resolve(&["--redis-url", "redis://127.0.0.1:6379/"], &redis).unwrap();
        assert_eq!(ok.urls, ["redis://127.0.0.1:6379"]);
        let e = resolve(&["--redis-url", "http://127.0.0.1:6379"], &redis).unwrap_err();
        assert!(e.contains("expected redis://HOST:PORT"), "{e}");
        let two = "redis://127.0.0.1:1,redis://127.0.0.1:2";
        let e = resolve(&["--redis-url", two], &redis).unwrap_err();
        assert!(e.contains("several URLs are for redlock"), "{e}");
        let f = resolve(&["--redis-url", two], &[BackendKind::Redlock]).unwrap();
        assert_eq!(f.urls.len(), 2);
        let argv = [
            "--redis-url",
            "redis://127.0.0.1:1",
            "--server-pause",
            "2s:300ms",
        ];
        let e = resolve(&argv, &redis).unwrap_err();
        assert!(e.contains("drop --redis-url"), "{e}");
    }
}
