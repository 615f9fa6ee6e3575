//! `bench run` and `bench sweep`: turn the flags into a checked plan (every
//! bad value is an exit-2 error naming its flag), then run the cells in order
//! with a progress bar, writing results, histograms and the manifest after
//! every cell so nothing finished is lost on Ctrl-C or a crash, and finish
//! with the report, the triggers and a summary naming a margin per TTL.

use std::fmt::Write as _;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use fencepost_api::latency::LatencySpec;
use indicatif::{ProgressBar, ProgressStyle};
use tokio::sync::watch;

use crate::cli::RunArgs;
use crate::runner::{self, Live, RunConfig, Runtime};
use bench_analysis::manifest::Manifest;
use bench_analysis::results;
use bench_core::grid::{self, Cell, FlagError};
use bench_driver::backend::BackendKind;
use bench_report::report;
use clap::Parser as _;

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

/// Checks every flag of `run` (one cell) or `sweep` (the grid).
pub fn resolve(args: &RunArgs, sweep: bool) -> Result<Plan, FlagError> {
    let command = if sweep { "sweep" } else { "run" };
    let margins = grid::parse_margins(&args.margin)?;
    let ttls = grid::parse_ttls(&args.ttl)?;
    if !sweep && (margins.len() > 1 || ttls.len() > 1) {
        let (f, v) = if margins.len() > 1 {
            ("--margin", &args.margin)
        } else {
            ("--ttl", &args.ttl)
        };
        return Err(flag(
            f,
            v,
            "bench run takes one value; use bench sweep for a grid",
        ));
    }
    let policies = grid::parse_policies(&args.margin_policy)?;
    let repeat = grid::parse_repeat(args.repeat)?;
    if !sweep && policies.len() > 1 {
        return Err(flag(
            "--margin-policy",
            &args.margin_policy,
            "bench run takes one policy; use bench sweep for a list",
        ));
    }
    let projection = bench_analysis::projection::Production {
        lease_ms: grid::parse_ttls(&args.projection_lease)
            .map_err(|e| flag("--projection-lease", &args.projection_lease, e.why))?[0]
            .as_millis() as u64,
        session_ttl_ms: grid::parse_ttls(&args.projection_session_ttl).map_err(|e| {
            flag(
                "--projection-session-ttl",
                &args.projection_session_ttl,
                e.why,
            )
        })?[0]
            .as_millis() as u64,
        read_timeout_ms: grid::parse_positive_duration(
            "--projection-read-timeout",
            &args.projection_read_timeout,
        )?
        .as_millis() as u64,
        margin: grid::parse_margin("--projection-margin", &args.projection_margin)?,
    };
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
    let rail_latency = latency("--rail-latency", &args.rail_latency)?;
    let rail_read_timeout =
        grid::parse_positive_duration("--rail-read-timeout", &args.rail_read_timeout)?;
    let warmup = args
        .warmup
        .as_deref()
        .map(|w| fencepost_api::parse_duration(w).map_err(|e| flag("--warmup", w, e.to_string())))
        .transpose()?;
    let net_delay = args
        .net_delay
        .as_deref()
        .map(|s| latency("--net-delay", s))
        .transpose()?;
    let server_pause = args
        .server_pause
        .as_deref()
        .map(grid::parse_pause)
        .transpose()?;
    let runtime = match args.runtime.as_str() {
        "process" => Runtime::Process {
            store: args.store.clone(),
            replicas: args.replicas,
        },
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
            if server_pause.is_some() {
                return Err(flag(
                    "--server-pause",
                    args.server_pause.as_deref().unwrap_or(""),
                    "needs --runtime process (it signals the lock-server process)",
                ));
            }
            Runtime::External {
                lock_url: need("--lock-url", &args.lock_url)?,
                rail_url: need("--rail-url", &args.rail_url)?,
            }
        }
        "docker" => {
            if let Some(p) = &args.server_pause {
                return Err(flag(
                    "--server-pause",
                    p,
                    "needs --runtime process (it signals the lock-server process)",
                ));
            }
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
            Runtime::Docker {
                pg_url,
                lock_image: args.lock_image.clone(),
                rail_image: args.rail_image.clone(),
            }
        }
        other => {
            return Err(flag(
                "--runtime",
                other,
                "expected process, docker or external",
            ));
        }
    };
    if args.replicas > 1 {
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
    }
    let (backends, etcd_url) = resolve_backends(args, &runtime)?;
    let seed = args.seed.unwrap_or_else(rand::random);
    let out = match &args.out {
        Some(p) => p.clone(),
        None if args.resume => {
            return Err(flag(
                "--resume",
                "",
                "needs --out DIR naming the sweep to continue",
            ));
        }
        None => PathBuf::from("data/runs").join(format!(
            "{}-{command}",
            bench_analysis::manifest::now_rfc3339().replace(':', "")
        )),
    };
    Ok(Plan {
        command,
        config: RunConfig {
            runtime,
            workers: args.workers,
            duration,
            payouts: args.payouts,
            policies: policies.clone(),
            repeat,
            projection,
            session_ttl,
            rail_latency,
            rail_read_timeout,
            time_scale: !args.no_time_scale,
            net_delay,
            server_pause,
            seed,
            client_check: !args.disable_client_check,
            warmup,
            backends,
            etcd_url,
        },
        cells: grid::cells(&ttls, &margins, &policies, repeat),
        out,
        resume: args.resume,
        seed_given: args.seed.is_some(),
        argv: std::env::args().collect(),
        grid_flags: serde_json::json!({
            "--margin": margins,
            "--ttl": ttls.iter().map(|t| fencepost_api::format_duration(*t)).collect::<Vec<_>>(),
            "--margin-policy": policies.iter().map(|p| p.to_string()).collect::<Vec<_>>(),
            "--repeat": repeat,
        }),
        replay_of: None,
    })
}

/// Checks `--backend` (a list: `fencepost`, `etcd`, `fencepost,etcd`) and
/// `--etcd-url` against the runtime: etcd runs beside the process runtime's
/// rail-stub, so it needs `--runtime process`; `--etcd-url` cannot be paused.
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
    if etcd && !matches!(runtime, Runtime::Process { .. }) {
        return Err(flag(
            "--backend",
            &args.backend,
            "etcd runs with --runtime process (a rail-stub child beside etcd)",
        ));
    }
    if backends == [BackendKind::Etcd]
        && let Some(s) = &args.store
    {
        return Err(flag(
            "--store",
            s,
            "is the fencepost lock-server's store; --backend etcd has none",
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

/// Runs the plan; returns the process exit code.
pub async fn execute(plan: Plan) -> anyhow::Result<i32> {
    let Plan {
        command,
        mut config,
        cells,
        out,
        resume,
        seed_given,
        argv,
        grid_flags,
        replay_of,
    } = plan;
    std::fs::create_dir_all(&out)?;
    let mut rows = Vec::new();
    let mut manifest = if resume {
        let old = Manifest::read(&out).map_err(|e| {
            anyhow::anyhow!("--resume: cannot read {}/manifest.json: {e}", out.display())
        })?;
        if seed_given && config.seed != old.seed {
            eprintln!(
                "bench: --resume: --seed {} differs from the run's seed {} in {}/manifest.json; \
                 drop --seed to continue it",
                config.seed,
                old.seed,
                out.display()
            );
            return Ok(2);
        }
        // The earlier run's seed wins, so resumed cells replay the same way.
        config.seed = old.seed;
        let now = serde_json::to_value(&config)?;
        let grid_now = grid_of(&config, &cells);
        let changed = changed_flags(&old, &now, &grid_flags, &grid_now);
        if !changed.is_empty() {
            eprintln!(
                "bench: --resume refuses a changed configuration: {} differ(s) from {}/manifest.json \
                 (start a new --out, or rerun with the recorded flags: {})",
                changed.join(", "),
                out.display(),
                if old.argv.is_empty() {
                    "not recorded".to_owned()
                } else {
                    old.argv.join(" ")
                }
            );
            return Ok(2);
        }
        if out.join("results.parquet").exists() || out.join("results.csv").exists() {
            rows = results::read_results(&out)?;
        }
        old
    } else {
        if out.join("manifest.json").exists() {
            eprintln!(
                "bench: {} already holds a run; pass --resume to continue it, or a new --out",
                out.display()
            );
            return Ok(2);
        }
        let mut m = Manifest::new(
            &format!("bench {command}"),
            config.seed,
            serde_json::to_value(&config)?,
        );
        m.argv = argv;
        m.grid = grid_of(&config, &cells);
        m.grid_flags = Some(grid_flags);
        m.binaries = crate::runner::binary_versions(&config.runtime);
        m.replay_of = replay_of.map(|p| p.display().to_string());
        m
    };
    manifest.finished_at = None;
    manifest.write(&out)?;
    let run_id = out
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    // Every grid cell on every backend, interleaved (A B A B …), so a
    // comparison of backends is taken within one run.
    let units: Vec<(Cell, RunConfig)> = cells
        .iter()
        .flat_map(|c| config.backends.iter().map(|&b| (*c, config.on_backend(b))))
        .collect();
    eprintln!(
        "bench {command}: seed {} (rerun with --seed {}), {} cell(s), results in {}",
        config.seed,
        config.seed,
        units.len(),
        out.display()
    );

    // The docker runtime: whatever a cell's guard left behind is removed when the run ends, on every path.
    let _docker_cleanup = matches!(config.runtime, Runtime::Docker { .. })
        .then_some(bench_driver::docker::RunCleanup);
    let (stop_tx, stop_rx) = watch::channel(false);
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            eprintln!("\nbench: interrupted; stopping the current cell (finished cells are kept)");
            let _ = stop_tx.send(true);
        }
    });

    let tty = std::io::stderr().is_terminal();
    let bar = ProgressBar::new(units.len() as u64);
    if tty {
        bar.set_style(
            ProgressStyle::with_template(
                "{bar:30} {pos}/{len} cells  elapsed {elapsed}  ETA {eta}  {msg}",
            )
            .expect("valid template"),
        );
    } else {
        bar.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    let mut failed = false;
    for (i, (cell, cell_config)) in units.iter().enumerate() {
        let plan = cell_config.plan(*cell).in_run(&run_id);
        let id = plan.id.clone();
        if rows.iter().any(|r: &results::CellRow| r.cell == id) {
            bar.inc(1);
            continue;
        }
        let label = id.clone();
        let b = bar.clone();
        let live = move |l: &Live| {
            b.set_message(format!(
                "{label}: {:.1}s paid {} abandoned {} lost {}",
                l.elapsed_s, l.paid, l.abandoned, l.lock_lost
            ))
        };
        // With a delay proxy, its own overhead is measured once per run (on a
        // lock-server: the baseline sends L2 heartbeats).
        let baseline = cell_config.net_delay.is_some()
            && cell_config.backend() == bench_driver::backend::BackendKind::Fencepost
            && manifest.proxy_overhead.is_none();
        let result =
            runner::run_cell(cell_config, &plan, &out, stop_rx.clone(), &live, baseline).await?;
        let Some(result) = result else {
            bar.abandon_with_message("interrupted");
            manifest.write(&out)?;
            eprintln!(
                "bench: interrupted after {} finished cell(s); continue with --resume --out {}",
                manifest.cells_done.len(),
                out.display()
            );
            return Ok(130);
        };
        if let Some(o) = &result.proxy_overhead {
            let line = format!("delay proxy baseline (zero delay): {o}");
            bar.println(&line);
            if !tty {
                eprintln!("{line}");
            }
            manifest.proxy_overhead = Some(o.clone());
        }
        let r = &result.row;
        let line = format!(
            "cell {}/{} {id}: paid {} ({:.1}/s), abandoned {}, lock_lost {}, sessions lost {}, fenced_out {} (fence 1 {}, fence 2 {}, believed held {}), duplicates {}, hb {} attempts {} timeouts, raw p99 {:.2} ms, corrected p99 {:.2} ms, ledger {}",
            i + 1,
            units.len(),
            r.payouts_paid,
            r.throughput_per_s,
            r.abandoned_insufficient_lease,
            r.lock_lost,
            r.session_lost,
            r.fenced_out,
            r.fenced_out_fence1,
            r.fenced_out_fence2,
            r.fenced_out_believed_held,
            r.duplicate_attempted,
            r.hb_attempts,
            r.hb_timeouts,
            r.hb_rtt_p99_us as f64 / 1e3,
            r.hb_rtt_corrected_p99_us as f64 / 1e3,
            if r.ledger_ok { "ok" } else { "VIOLATED" },
        );
        bar.println(&line);
        if !tty {
            eprintln!("{line}");
        }
        let ledger_ok = r.ledger_ok;
        result.histograms.save(&out, &id)?;
        rows.push(result.row);
        results::write_results(&out, &rows)?;
        manifest.cells_done.push(id.clone());
        manifest.write(&out)?;
        bar.inc(1);
        if !ledger_ok {
            eprintln!(
                "bench: the ledger invariant failed in cell {id}; see {}/cells/{id}/ledger-check.json",
                out.display()
            );
            failed = true;
            break;
        }
    }
    bar.finish_and_clear();
    manifest.finished_at = Some(bench_analysis::manifest::now_rfc3339());
    manifest.write(&out)?;
    report::write_report(&out)?;
    print!("{}", summary_text(&out, &rows));
    eprintln!(
        "bench: summary.csv, projection.csv and report.md in {}; replay with: bench replay {}",
        out.display(),
        out.display()
    );
    Ok(if failed { 1 } else { 0 })
}

/// The table printed at the end of a run or sweep: a line per cell, the
/// recommendation per TTL, where the report is.
pub fn summary_text(out: &Path, rows: &[results::CellRow]) -> String {
    let mut t = String::new();
    let w = rows.iter().map(|r| r.cell.len()).max().unwrap_or(0).max(24);
    let _ = writeln!(
        t,
        "\n{:<w$} {:>9} {:>9} {:>9} {:>6} {:>6} {:>7} {:>5} {:>9} {:>10} {:>11}",
        "cell",
        "paid",
        "per_s",
        "abandon",
        "lost",
        "s_lost",
        "fenced",
        "dups",
        "hb_tmout",
        "hb_p99_ms",
        "corr_p99_ms"
    );
    for r in rows {
        let _ = writeln!(
            t,
            "{:<w$} {:>9} {:>9.1} {:>9} {:>6} {:>6} {:>7} {:>5} {:>9} {:>10.2} {:>11.2}",
            r.cell,
            r.payouts_paid,
            r.throughput_per_s,
            r.abandoned_insufficient_lease,
            r.lock_lost,
            r.session_lost,
            r.fenced_out,
            r.duplicate_attempted,
            r.hb_timeouts,
            r.hb_rtt_p99_us as f64 / 1e3,
            r.hb_rtt_corrected_p99_us as f64 / 1e3,
        );
    }
    t.push('\n');
    let summary = bench_analysis::summary::build(rows, &|cell| {
        bench_analysis::summary::load_cell_hists(out, cell)
    });
    if summary.rows.len() < rows.len() {
        let _ = writeln!(
            t,
            "{:<52} {:>3} {:>9} {:>19} {:>10} {:>17}",
            "point (over repeats)", "n", "median/s", "95 % (t)", "used m", "m_min [95 %]"
        );
        for s in &summary.rows {
            let _ = writeln!(
                t,
                "{:<52} {:>3} {:>9.2} {:>19} {:>10.3} {:>17}",
                s.group,
                s.n_repeats,
                s.throughput_median,
                if s.throughput_ci95_lo.is_nan() {
                    "—".to_owned()
                } else {
                    format!("[{:.2}, {:.2}]", s.throughput_ci95_lo, s.throughput_ci95_hi)
                },
                s.margin_effective_mean,
                format!(
                    "{:.3} [{:.3}, {:.3}]",
                    s.m_min, s.m_min_ci95_lo, s.m_min_ci95_hi
                ),
            );
        }
        t.push('\n');
    }
    for rec in bench_analysis::recommend::recommendations_from(&summary) {
        let _ = writeln!(t, "{rec}");
    }
    let _ = writeln!(t, "\nreport: {}", out.join("report.md").display());
    t
}

/// The expanded grid of a run as `manifest.json` records it: every cell on
/// every backend, in run order, with its seed.
pub fn grid_of(config: &RunConfig, cells: &[Cell]) -> Vec<bench_analysis::manifest::GridCell> {
    cells
        .iter()
        .flat_map(|c| {
            config.backends.iter().map(move |&b| {
                let plan = config.on_backend(b).plan(*c);
                bench_analysis::manifest::GridCell {
                    cell: plan.id,
                    backend: b.to_string(),
                    policy: c.policy.to_string(),
                    lease_ms: c.lease.as_millis() as u64,
                    margin: c.margin,
                    repeat: c.repeat,
                    seed: plan.seed,
                }
            })
        })
        .collect()
}

/// The flag a key of the recorded configuration comes from.
fn flag_of_config_key(key: &str) -> String {
    match key {
        "runtime" => {
            "--runtime/--store/--pg-url/--lock-url/--rail-url/--lock-image/--rail-image".into()
        }
        "policies" => "--margin-policy".into(),
        "time_scale" => "--no-time-scale".into(),
        "client_check" => "--disable-client-check".into(),
        "backends" => "--backend".into(),
        "projection" => "--projection-*".into(),
        other => format!("--{}", other.replace('_', "-")),
    }
}

/// The flags whose values differ between a recorded run and a resumed one:
/// every configuration key, the grid flags (`--margin`, `--ttl`,
/// `--margin-policy`, `--repeat`), and, should those agree, the expanded
/// grid itself. Empty when the resume may go on.
pub fn changed_flags(
    old: &Manifest,
    config_now: &serde_json::Value,
    grid_flags_now: &serde_json::Value,
    grid_now: &[bench_analysis::manifest::GridCell],
) -> Vec<String> {
    let mut out = Vec::new();
    let (was, now) = (old.config.as_object(), config_now.as_object());
    if let (Some(was), Some(now)) = (was, now) {
        let mut keys: Vec<&String> = was.keys().chain(now.keys()).collect();
        keys.sort();
        keys.dedup();
        for k in keys {
            if k != "seed" && was.get(k) != now.get(k) {
                out.push(flag_of_config_key(k));
            }
        }
    } else if old.config != *config_now {
        out.push("the configuration".into());
    }
    match (&old.grid_flags, grid_flags_now.as_object()) {
        (Some(was), Some(now)) => {
            for (k, v) in now {
                if was.get(k) != Some(v) {
                    out.push(k.clone());
                }
            }
        }
        _ => out.push("--margin/--ttl (the manifest records no grid)".into()),
    }
    if out.is_empty() && !old.grid.is_empty() && old.grid != grid_now {
        out.push("the expanded grid (--margin/--ttl/--margin-policy/--repeat)".into());
    }
    out.dedup();
    out
}

/// Why `bench replay` cannot re-run a directory.
#[derive(Debug, thiserror::Error)]
pub enum ReplayError {
    /// The manifest is missing or unreadable; the path names it.
    #[error("cannot read {0}/manifest.json: {1}")]
    Manifest(PathBuf, String),
    /// The manifest predates issue 13 (no argv/grid): it cannot be replayed exactly.
    #[error("{0}/manifest.json records no argv or grid (written before `bench replay` existed)")]
    NotRecorded(PathBuf),
    /// The recorded command line does not parse or resolve with this build.
    #[error("the recorded argv no longer resolves: {0}")]
    Argv(String),
    /// This build expands the recorded command line into other cells, seeds or configuration.
    #[error("this build would not run the recorded (cell, seed) pairs: {0}")]
    Differs(String),
}

/// Drops `--out`, `--resume` and `--seed` (both `--flag V` and `--flag=V` forms) from `argv`.
fn strip_flags(argv: &[String]) -> Vec<String> {
    let mut out = Vec::new();
    let mut skip = false;
    for a in argv {
        if skip {
            skip = false;
            continue;
        }
        match a.as_str() {
            "--out" | "--seed" => skip = true,
            "--resume" => {}
            s if s.starts_with("--out=") || s.starts_with("--seed=") => {}
            _ => out.push(a.clone()),
        }
    }
    out
}

/// `bench replay DIR [--out NEW]`: the plan that re-runs exactly the (cell,
/// seed) pairs `DIR/manifest.json` records — its argv with the recorded
/// seed and the new `--out` — checked against the recorded grid and
/// configuration before anything runs.
pub fn replay_plan(dir: &Path, out: Option<PathBuf>) -> Result<Plan, ReplayError> {
    let old =
        Manifest::read(dir).map_err(|e| ReplayError::Manifest(dir.to_owned(), format!("{e:#}")))?;
    if old.argv.len() < 2 || old.grid.is_empty() {
        return Err(ReplayError::NotRecorded(dir.to_owned()));
    }
    let out = out.unwrap_or_else(|| {
        let name = dir
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "run".into());
        dir.with_file_name(format!("{name}-replay"))
    });
    let mut argv = strip_flags(&old.argv);
    argv.extend([
        "--seed".to_string(),
        old.seed.to_string(),
        "--out".to_string(),
        out.display().to_string(),
    ]);
    let cli =
        crate::cli::Cli::try_parse_from(&argv).map_err(|e| ReplayError::Argv(e.to_string()))?;
    let (args, sweep) = match cli.command {
        crate::cli::Command::Run(a) => (a, false),
        crate::cli::Command::Sweep(a) => (a, true),
        _ => {
            return Err(ReplayError::Argv(format!(
                "{:?} is not bench run or sweep",
                argv.get(1)
            )));
        }
    };
    let mut plan = resolve(&args, sweep).map_err(|e| ReplayError::Argv(e.to_string()))?;
    let grid = grid_of(&plan.config, &plan.cells);
    if grid != old.grid {
        let first = grid
            .iter()
            .zip(&old.grid)
            .find(|(a, b)| a != b)
            .map(|(a, b)| {
                format!(
                    "now {} seed {}, recorded {} seed {}",
                    a.cell, a.seed, b.cell, b.seed
                )
            })
            .unwrap_or_else(|| format!("now {} cells, recorded {}", grid.len(), old.grid.len()));
        return Err(ReplayError::Differs(first));
    }
    let config =
        serde_json::to_value(&plan.config).map_err(|e| ReplayError::Differs(e.to_string()))?;
    if config != old.config {
        let changed = changed_flags(&old, &config, &plan.grid_flags, &grid);
        return Err(ReplayError::Differs(format!(
            "configuration: {} (an environment variable such as LOCK_CLIENT_SAFETY_MARGIN or RAIL_LATENCY may differ)",
            changed.join(", ")
        )));
    }
    plan.argv = argv;
    plan.replay_of = Some(dir.to_owned());
    Ok(plan)
}
