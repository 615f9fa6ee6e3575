//! `bench run|sweep`'s flags become a checked [`Plan`]: every bad value is an
//! exit-2 error naming its flag, before anything starts.

use std::path::PathBuf;

use fencepost_api::latency::LatencySpec;

use crate::cli::{RunArgs, SweepOnly};
use crate::runner::{RunConfig, Runtime};
use bench_core::grid::{self, Cell, FlagError};
use bench_driver::backend::BackendKind;
use bench_driver::cell::Sampling;

/// A checked `run`/`sweep`.
#[derive(Debug)]
pub struct Plan {
    /// `run` or `sweep`.
    pub command: &'static str,
    /// The configuration every cell shares.
    pub config: RunConfig,
    /// The cells, in order.
    pub cells: Vec<Cell>,
    /// The results directory.
    pub out: PathBuf,
    /// Skip cells already in `out`.
    pub resume: bool,
    /// Whether `--seed` was given (a resume refuses a different one).
    pub seed_given: bool,
    /// The command line to record (`manifest.json` `argv`).
    pub argv: Vec<String>,
    /// The grid's flags as resolved, recorded so `--resume` can name a changed one.
    pub grid_flags: serde_json::Value,
    /// The results directory this plan replays, if it is a `bench replay`.
    pub replay_of: Option<PathBuf>,
    /// `--metrics-listen`: where to serve the cells' metrics, if anywhere.
    pub metrics_listen: Option<std::net::SocketAddr>,
}

fn flag(flag: &'static str, value: &str, why: impl Into<String>) -> FlagError {
    FlagError {
        flag,
        value: value.to_string(),
        why: why.into(),
    }
}

fn latency(f: &'static str, text: &str) -> Result<LatencySpec, FlagError> {
    text.parse::<LatencySpec>()
        .map_err(|e| flag(f, text, e.to_string()))
}

/// Checks every flag of `run` (one cell; `sweep` is `None`) or `sweep`
/// (the grid, with its repeats and resume), in named steps: the grid, the
/// projection, the load, the runtime, the backends, TLS and the directory.
pub fn resolve(args: &RunArgs, sweep: Option<SweepOnly>) -> Result<Plan, FlagError> {
    let command = if sweep.is_some() { "sweep" } else { "run" };
    let SweepOnly { repeat, resume } = sweep.unwrap_or_default();
    let g = grid_flags(args, sweep.is_some(), repeat)?;
    let projection = projection(args)?;
    let load = load(args)?;
    let runtime = runtime(args, g.server_pause.is_some())?;
    check_replicas(args)?;
    let (backends, etcd_url) = resolve_backends(args, &runtime)?;
    let redis = super::redis_flags::resolve_redis(args, &backends)?;
    if let Some(other) = backends.iter().find(|b| **b != BackendKind::Fencepost)
        && load.sampling.sessions > 0
    {
        return Err(flag(
            "--sessions",
            &load.sampling.sessions.to_string(),
            format!("idle sessions are fencepost SDK sessions; drop --backend {other}"),
        ));
    }
    check_tls(args, &runtime, &backends)?;
    let out = out_dir(args, resume, command)?;
    let axes = grid::Axes {
        divisors: g.divisors.clone(),
        pause: g.server_pause.clone(),
    };
    Ok(Plan {
        command,
        cells: grid::cells_with(&g.ttls, &g.margins, &g.policies, g.repeat, &axes),
        grid_flags: serde_json::json!({
            "--margin": g.margins,
            "--ttl": g.ttls.iter().map(|t| fencepost_api::format_duration(*t)).collect::<Vec<_>>(),
            "--margin-policy": g.policies.iter().map(|p| p.to_string()).collect::<Vec<_>>(),
            "--repeat": g.repeat,
        }),
        config: RunConfig {
            runtime,
            workers: args.workers,
            duration: load.duration,
            payouts: args.payouts,
            policies: g.policies,
            repeat: g.repeat,
            projection,
            session_ttl: load.session_ttl,
            rail_latency: load.rail_latency,
            rail_read_timeout: load.rail_read_timeout,
            time_scale: !args.no_time_scale,
            net_delay: load.net_delay,
            server_pause: g.server_pause,
            heartbeat_divisors: g.divisors,
            seed: args.seed.unwrap_or_else(rand::random),
            client_check: !args.disable_client_check,
            warmup: load.warmup,
            backends,
            etcd_url,
            redis_urls: redis.urls,
            redis_persistence: redis.persistence,
            redlock_instances: 3,
            sampling: load.sampling,
            tls: args.tls,
            hold: load.hold,
            steps: args.steps,
        },
        out,
        resume,
        seed_given: args.seed.is_some(),
        argv: crate::runner::recorded_argv(),
        replay_of: None,
        metrics_listen: args.metrics_listen,
    })
}

/// The grid's dimensions as the flags give them.
struct GridFlags {
    margins: Vec<f64>,
    ttls: Vec<std::time::Duration>,
    policies: Vec<grid::PolicySpec>,
    repeat: u32,
    divisors: Vec<u32>,
    server_pause: Option<grid::PauseAxis>,
}

/// The grid's flags (`--margin`, `--ttl`, `--margin-policy`, `--repeat`,
/// `--heartbeat-divisor`, `--server-pause`); `bench run` takes one value of each.
fn grid_flags(args: &RunArgs, sweep: bool, repeat: u32) -> Result<GridFlags, FlagError> {
    let one = "bench run takes one value; use bench sweep for a grid";
    let margins = grid::parse_margins(&args.margin)?;
    if !sweep && margins.len() > 1 {
        return Err(flag("--margin", &args.margin, one));
    }
    let ttls = grid::parse_ttls(&args.ttl)?;
    if !sweep && ttls.len() > 1 {
        return Err(flag("--ttl", &args.ttl, one));
    }
    let policies = grid::parse_policies(&args.margin_policy)?;
    let repeat = grid::parse_repeat(repeat)?;
    if !sweep && policies.len() > 1 {
        return Err(flag(
            "--margin-policy",
            &args.margin_policy,
            "bench run takes one policy; use bench sweep for a list",
        ));
    }
    let divisors = grid::parse_divisors(&args.heartbeat_divisor)?;
    if !sweep && divisors.len() > 1 {
        return Err(flag(
            "--heartbeat-divisor",
            &args.heartbeat_divisor,
            "bench run takes one value; use bench sweep for a list",
        ));
    }
    let server_pause = args
        .server_pause
        .as_deref()
        .map(grid::parse_pause_axis)
        .transpose()?;
    if let Some(p) = server_pause.as_ref().filter(|p| !sweep && p.fors.len() > 1) {
        return Err(flag(
            "--server-pause",
            &p.to_string(),
            "bench run takes one freeze length; use bench sweep for a list",
        ));
    }
    Ok(GridFlags {
        margins,
        ttls,
        policies,
        repeat,
        divisors,
        server_pause,
    })
}

/// `--projection-*`: the production configuration `projection.csv` projects onto.
fn projection(args: &RunArgs) -> Result<bench_analysis::projection::Production, FlagError> {
    let ttl = |f: &'static str, text: &str| {
        grid::parse_ttls(text)
            .map_err(|e| flag(f, text, e.why))
            .map(|v| v[0].as_millis() as u64)
    };
    Ok(bench_analysis::projection::Production {
        lease_ms: ttl("--projection-lease", &args.projection_lease)?,
        session_ttl_ms: ttl("--projection-session-ttl", &args.projection_session_ttl)?,
        read_timeout_ms: grid::parse_positive_duration(
            "--projection-read-timeout",
            &args.projection_read_timeout,
        )?
        .as_millis() as u64,
        margin: grid::parse_margin("--projection-margin", &args.projection_margin)?,
    })
}

/// The load and timing of every cell, checked.
struct Load {
    duration: std::time::Duration,
    sampling: Sampling,
    session_ttl: Option<std::time::Duration>,
    rail_latency: LatencySpec,
    rail_read_timeout: std::time::Duration,
    warmup: Option<std::time::Duration>,
    net_delay: Option<LatencySpec>,
    hold: Option<LatencySpec>,
}

/// `--duration`, `--payouts`, `--workers`, the sampling flags, the session
/// TTL, the rail's latency and timeout, `--warmup` and `--net-delay`.
fn load(args: &RunArgs) -> Result<Load, FlagError> {
    let duration = grid::parse_positive_duration("--duration", &args.duration)?;
    if !(1..=1_000_000).contains(&args.payouts) {
        return Err(flag(
            "--payouts",
            &args.payouts.to_string(),
            "must be 1..1000000",
        ));
    }
    if !(1..=1024).contains(&args.workers) {
        return Err(flag(
            "--workers",
            &args.workers.to_string(),
            "must be 1..1024",
        ));
    }
    let session_ttl = args
        .session_ttl
        .as_deref()
        .map(|s| {
            grid::parse_ttls(s)
                .map_err(|e| flag("--session-ttl", s, e.why))
                .map(|v| v[0])
        })
        .transpose()?;
    Ok(Load {
        duration,
        sampling: sampling(args, duration)?,
        session_ttl,
        rail_latency: latency("--rail-latency", &args.rail_latency)?,
        rail_read_timeout: grid::parse_positive_duration(
            "--rail-read-timeout",
            &args.rail_read_timeout,
        )?,
        warmup: args
            .warmup
            .as_deref()
            .map(|w| grid::parse_flag_duration("--warmup", w, w, "expected 0s or more, e.g. 500ms"))
            .transpose()?,
        net_delay: args
            .net_delay
            .as_deref()
            .map(|s| latency("--net-delay", s))
            .transpose()?,
        hold: args
            .hold
            .as_deref()
            .map(|s| latency("--hold", s))
            .transpose()?,
    })
}

/// `--runtime` and the flags each runtime needs or refuses.
fn runtime(args: &RunArgs, server_pause: bool) -> Result<Runtime, FlagError> {
    let pause_needs_process = || {
        flag(
            "--server-pause",
            args.server_pause.as_deref().unwrap_or(""),
            "needs --runtime process (it signals the lock-server process)",
        )
    };
    match args.runtime.as_str() {
        "process" => Ok(Runtime::Process {
            store: args.store.clone(),
            replicas: args.replicas,
        }),
        "external" if server_pause => Err(pause_needs_process()),
        "external" => {
            let need = |f: &'static str, v: &Option<String>| {
                v.clone()
                    .filter(|u| u.starts_with("http://"))
                    .ok_or_else(|| {
                        flag(
                            f,
                            v.as_deref().unwrap_or(""),
                            "--runtime external needs an http:// URL",
                        )
                    })
            };
            Ok(Runtime::External {
                lock_url: need("--lock-url", &args.lock_url)?,
                rail_url: need("--rail-url", &args.rail_url)?,
            })
        }
        "docker" if server_pause => Err(pause_needs_process()),
        "docker" => docker_runtime(args),
        other => Err(flag(
            "--runtime",
            other,
            "expected process, docker or external",
        )),
    }
}

/// `--runtime docker`: its PostgreSQL and images; `--store` is refused.
fn docker_runtime(args: &RunArgs) -> Result<Runtime, FlagError> {
    if let Some(s) = &args.store {
        return Err(flag(
            "--store",
            s,
            "is for --runtime process; the docker runtime's lock-server uses --pg-url",
        ));
    }
    let pg_url = args
        .pg_url
        .clone()
        .or_else(|| std::env::var("FENCEPOST_TEST_PG_URL").ok())
        .filter(|u| !u.is_empty())
        .ok_or_else(|| flag("--pg-url", "", "--runtime docker needs a PostgreSQL: --pg-url postgres://USER@HOST:PORT/DB (or eval \"$(scripts/pg-test-cluster.sh start)\")"))?;
    if !(pg_url.starts_with("postgres://") || pg_url.starts_with("postgresql://")) {
        return Err(flag(
            "--pg-url",
            &pg_url,
            "expected postgres://USER[:PASS]@HOST[:PORT]/DB",
        ));
    }
    Ok(Runtime::Docker {
        pg_url: Some(pg_url),
        lock_image: args.lock_image.clone(),
        rail_image: args.rail_image.clone(),
        pg_image: bench_driver::docker::DEFAULT_PG_IMAGE.into(),
        replicas: 1,
    })
}

/// `--replicas N > 1`: the process runtime on a PostgreSQL store, no delay proxy.
fn check_replicas(args: &RunArgs) -> Result<(), FlagError> {
    if args.replicas <= 1 {
        return Ok(());
    }
    let pg = args
        .store
        .as_deref()
        .is_some_and(|s| s.starts_with("postgres://") || s.starts_with("postgresql://"));
    if args.runtime != "process" || !pg {
        return Err(flag(
            "--replicas",
            &args.replicas.to_string(),
            "more than one lock-server needs --runtime process and a --store postgres://… (memory: and sqlite: are single-node)",
        ));
    }
    if let Some(d) = &args.net_delay {
        return Err(flag(
            "--net-delay",
            d,
            "the delay proxy fronts one lock-server; it needs --replicas 1",
        ));
    }
    Ok(())
}

/// `--tls`: the process runtime, the fencepost backend, no delay proxy.
fn check_tls(args: &RunArgs, runtime: &Runtime, backends: &[BackendKind]) -> Result<(), FlagError> {
    if !args.tls {
        return Ok(());
    }
    let why = if !matches!(runtime, Runtime::Process { .. }) {
        Some("needs --runtime process (the cell makes the lock-server's certificate)")
    } else if backends.iter().any(|b| *b != BackendKind::Fencepost) {
        Some("serves the fencepost lock-server over TLS; drop every other --backend")
    } else if args.net_delay.is_some() {
        Some("does not go through the --net-delay proxy yet; drop one of the two")
    } else {
        None
    };
    match why {
        Some(why) => Err(flag("--tls", "", why)),
        None => Ok(()),
    }
}

/// `--out`, or a new directory under data/runs/ named by the time; `--resume`
/// needs `--out`.
fn out_dir(args: &RunArgs, resume: bool, command: &str) -> Result<PathBuf, FlagError> {
    match &args.out {
        Some(p) => Ok(p.clone()),
        None if resume => Err(flag(
            "--resume",
            "",
            "needs --out DIR naming the sweep to continue",
        )),
        None => Ok(PathBuf::from("data/runs").join(format!(
            "{}-{command}",
            bench_analysis::manifest::now_rfc3339().replace(':', "")
        ))),
    }
}

/// The longest `--max-duration` takes by default.
pub const DEFAULT_MAX_DURATION: std::time::Duration = std::time::Duration::from_secs(600);

/// Checks `--sessions`, `--min-samples` and `--max-duration`.
fn sampling(args: &RunArgs, duration: std::time::Duration) -> Result<Sampling, FlagError> {
    if args.sessions > 100_000 {
        return Err(flag(
            "--sessions",
            &args.sessions.to_string(),
            "must be 0..100000",
        ));
    }
    if let Some(k) = args.min_samples
        && k == 0
    {
        return Err(flag("--min-samples", "0", "must be at least 1"));
    }
    let max_duration = match (&args.max_duration, args.min_samples) {
        (Some(m), None) => {
            return Err(flag(
                "--max-duration",
                m,
                "bounds --min-samples; give it too",
            ));
        }
        (Some(m), Some(_)) => {
            let d = grid::parse_positive_duration("--max-duration", m)?;
            if d < duration {
                return Err(flag(
                    "--max-duration",
                    m,
                    format!(
                        "is shorter than --duration ({}), which a cell runs at least",
                        fencepost_api::format_duration(duration)
                    ),
                ));
            }
            Some(d)
        }
        (None, Some(_)) => Some(DEFAULT_MAX_DURATION.max(duration)),
        (None, None) => None,
    };
    Ok(Sampling {
        sessions: args.sessions,
        min_samples: args.min_samples,
        max_duration,
    })
}

/// Checks `--backend` (a list: `fencepost`, `etcd`, `fencepost,etcd,redis`)
/// and `--etcd-url` against the runtime: etcd and Redis run beside the
/// process runtime's rail-stub, so they need `--runtime process`;
/// `--etcd-url` cannot be paused.
fn resolve_backends(
    args: &RunArgs,
    runtime: &Runtime,
) -> Result<(Vec<BackendKind>, Option<String>), FlagError> {
    let mut backends = Vec::new();
    for part in args.backend.split(',') {
        let b: BackendKind = part
            .parse()
            .map_err(|why: String| flag("--backend", &args.backend, why))?;
        if backends.contains(&b) {
            return Err(flag("--backend", &args.backend, "names a backend twice"));
        }
        backends.push(b);
    }
    let etcd = backends.contains(&BackendKind::Etcd);
    if let Some(other) = backends.iter().find(|b| **b != BackendKind::Fencepost)
        && !matches!(runtime, Runtime::Process { .. })
    {
        return Err(flag(
            "--backend",
            &args.backend,
            format!("{other} runs with --runtime process (a rail-stub child beside {other})"),
        ));
    }
    if !backends.contains(&BackendKind::Fencepost)
        && let Some(s) = &args.store
    {
        return Err(flag(
            "--store",
            s,
            format!(
                "is the fencepost lock-server's store; --backend {} has none",
                args.backend
            ),
        ));
    }
    let etcd_url = match &args.etcd_url {
        None => None,
        Some(_) if !etcd => {
            return Err(flag(
                "--etcd-url",
                args.etcd_url.as_deref().unwrap_or(""),
                "needs --backend etcd",
            ));
        }
        Some(u) if !u.starts_with("http://") => {
            return Err(flag("--etcd-url", u, "expected http://HOST:PORT"));
        }
        Some(u) if args.server_pause.is_some() => {
            return Err(flag(
                "--etcd-url",
                u,
                "--server-pause signals a server the bench started; drop --etcd-url",
            ));
        }
        Some(u) => Some(u.trim_end_matches('/').to_string()),
    };
    Ok((backends, etcd_url))
}
