//! `bench peer --sessions LIST`: how cost grows with the number
//! of live sessions, fencepost's against etcd's leases.
//!
//! For each repeat and each count N (in the order given), every system is
//! started fresh (a lock-server per store on a new SQLite file or a new
//! PostgreSQL schema, and a new etcd: so no measurement inherits another's
//! sessions, leases or heap) and measured in a seeded order by
//! [`bench_driver::peer_sessions::measure`]: N sessions / leases opened
//! and kept alive on the SDK's schedule, every tick counted. Each row
//! records the window's heartbeat latencies (raw and corrected), the CPU
//! seconds of the server, of its PostgreSQL backends and of this driver,
//! the server's resident set before the sessions were opened and at the
//! window's end (and its peak), the driver's file-descriptor limit (raised
//! to the hard limit at start), and what bounded the row where the box could
//! not reach N on schedule ([`bench_analysis::peer_sessions::bound_by`]).
//!
//! Output: `peer_sessions.csv` (written after each measurement),
//! `manifest.json`, `report.md` and `peer_sessions.svg|png`
//! ([`bench_report::peer_sessions`]), and the servers' logs under
//! `servers/` (their data files are removed after each group).

use std::time::Duration;

use bench_analysis::manifest::Manifest;
use bench_analysis::peer::{PeerPlan, fmt_opt};
use bench_analysis::peer_plan::SessionsPlan;
use bench_analysis::peer_sessions::{SessionRow, bound_by, write_csv};
use bench_core::cpu;
use bench_core::error::Chain;
use bench_core::grid::{self, FlagError};
use bench_core::peer_sessions::heartbeat_period;
use bench_driver::peer::WindowProbe;
use bench_driver::peer_sessions::{self as load, SessionsError, SessionsSpec, raise_fd_limit};
use bench_report::peer_sessions as report;
use rand::SeedableRng as _;
use rand::seq::SliceRandom as _;
use rand_chacha::ChaCha8Rng;

use crate::cli::PeerArgs;
use crate::peer::{CpuProbe, PeerRunError, System, start_systems, written};

/// Why `bench peer --sessions` stopped (exit 1).
#[derive(Debug, thiserror::Error)]
pub enum SessionsRunError {
    /// What `bench peer` itself reports: a file, a server that did not start.
    #[error(transparent)]
    Peer(#[from] PeerRunError),
    /// A measurement could not be made (a lane panicked): a bug; report it.
    #[error("{label} at {sessions} sessions")]
    Measure {
        /// `system/store`.
        label: String,
        /// N.
        sessions: usize,
        /// Why.
        #[source]
        source: SessionsError,
    },
}

/// The largest count `--sessions` takes.
const MAX_SESSIONS: usize = 1_000_000;

/// [`crate::peer::resolve`], then `--sessions` and its flags into the plan.
pub fn resolve(args: &PeerArgs) -> Result<PeerPlan, FlagError> {
    let mut plan = crate::peer::resolve(args)?;
    plan.sessions = sessions_plan(args)?;
    Ok(plan)
}

/// The sessions plan of `--sessions` (none without it).
pub fn sessions_plan(args: &PeerArgs) -> Result<Option<SessionsPlan>, FlagError> {
    let Some(list) = &args.sessions else {
        return Ok(None);
    };
    let bad = |flag: &'static str, value: &str, why: &str| FlagError {
        flag,
        value: value.to_string(),
        why: why.to_string(),
    };
    let mut counts = Vec::new();
    for part in list.split(',') {
        let n = part
            .trim()
            .replace('_', "")
            .parse::<usize>()
            .ok()
            .filter(|n| (1..=MAX_SESSIONS).contains(n))
            .ok_or_else(|| {
                bad(
                    "--sessions",
                    part.trim(),
                    "each count must be a whole number 1..1000000 (a list: 100,1000,10000)",
                )
            })?;
        counts.push(n);
    }
    let ttl = grid::parse_positive_duration("--session-ttl", &args.session_ttl)?;
    let margin: f64 = args
        .margin
        .trim()
        .parse()
        .ok()
        .filter(|m| (0.0..1.0).contains(m))
        .ok_or_else(|| bad("--margin", &args.margin, "a number 0 <= m < 1"))?;
    if !(1..=4096).contains(&args.connections) {
        return Err(bad(
            "--connections",
            &args.connections.to_string(),
            "must be 1..4096",
        ));
    }
    Ok(Some(SessionsPlan {
        counts,
        ttl_s: ttl.as_secs_f64(),
        margin,
        period_s: heartbeat_period(ttl, margin).as_secs_f64(),
        connections: args.connections,
        min_heartbeats: args.min_heartbeats,
    }))
}

/// The CPU probe of `bench peer` and the server's resident set at the
/// window's end (current and peak).
struct Probe<'a> {
    /// CPU seconds of the server, its PostgreSQL backends and this driver.
    cpu: CpuProbe<'a>,
    /// (VmRSS, VmHWM) at the window's end, KiB.
    rss_end: (Option<u64>, Option<u64>),
}

impl WindowProbe for Probe<'_> {
    async fn opened(&mut self) {
        self.cpu.opened().await;
    }

    async fn closed(&mut self) {
        self.cpu.closed().await;
        if let Some(pid) = self.cpu.system.pid {
            self.rss_end = (cpu::rss_kb(pid), cpu::peak_rss_kb(pid));
        }
    }
}

/// Runs the plan's sessions dimension. Returns the exit code: for each
/// repeat and count a group on fresh servers ([`measure_group`]), then the
/// report ([`finish`]).
pub async fn execute(plan: PeerPlan) -> Result<i32, SessionsRunError> {
    let Some(sp) = plan.sessions.clone() else {
        return Ok(crate::peer::execute(plan).await?);
    };
    written(&plan.out, std::fs::create_dir_all(&plan.out))?;
    if plan.out.join("peer_sessions.csv").exists() {
        eprintln!(
            "bench peer: --out {} already holds a sessions run; pass a new --out",
            plan.out.display()
        );
        return Ok(2);
    }
    let fd_limit = raise_fd_limit();
    let config = serde_json::to_value(&plan).map_err(PeerRunError::Plan)?;
    let mut manifest = Manifest::new("bench peer", plan.seed, config);
    manifest.write(&plan.out).map_err(PeerRunError::Manifest)?;
    eprintln!(
        "bench peer --sessions: seed {}, period {:.2} s, {} connections, fd limit {fd_limit}, results in {}",
        plan.seed,
        sp.period_s,
        sp.connections,
        plan.out.display()
    );
    for s in &plan.skipped {
        eprintln!("bench peer: skipped {s}");
    }
    let mut rng = ChaCha8Rng::seed_from_u64(plan.seed);
    let mut rows: Vec<SessionRow> = Vec::new();
    let mut group = 0u64;
    for repeat in 1..=plan.repeats {
        for &n in &sp.counts {
            group += 1;
            let at = Group {
                repeat,
                n,
                seed: plan.seed.wrapping_add(group),
                fd_limit,
            };
            measure_group(&plan, &sp, &at, &mut rng, &mut rows).await?;
        }
    }
    finish(&plan, &rows, &mut manifest)
}

/// Where in the plan a group of measurements is.
struct Group {
    /// The repeat, from 1.
    repeat: u32,
    /// The live sessions (leases) per system.
    n: usize,
    /// The group's seed (names its PostgreSQL schema).
    seed: u64,
    /// The driver's file-descriptor limit.
    fd_limit: u64,
}

/// One (repeat, count): fresh servers for the group, in their own directory
/// and, on PostgreSQL, their own schema; every system measured in a seeded
/// order, each row printed and `peer_sessions.csv` rewritten after it; the
/// servers stopped and their data removed after.
async fn measure_group(
    plan: &PeerPlan,
    sp: &SessionsPlan,
    at: &Group,
    rng: &mut ChaCha8Rng,
    rows: &mut Vec<SessionRow>,
) -> Result<(), SessionsRunError> {
    let mut gp = plan.clone();
    gp.out = plan
        .out
        .join("servers")
        .join(format!("r{}-n{}", at.repeat, at.n));
    gp.seed = at.seed;
    gp.http_clients = vec![bench_core::peer::PeerHttpClient::Sdk];
    // Live sessions are measured on fencepost and etcd only.
    (gp.redis_stores, gp.redis_url) = (Vec::new(), None);
    let systems = start_systems(&gp).await?;
    let mut order: Vec<&System> = systems.iter().collect();
    order.shuffle(rng);
    for (position, sys) in order.into_iter().enumerate() {
        let row = measure_system(plan, sp, at, sys, position as u32).await?;
        print_row(rows.len() + 1, at, sys, &row);
        rows.push(row);
        written(
            &plan.out.join("peer_sessions.csv"),
            write_csv(&plan.out, rows),
        )?;
    }
    drop(systems);
    bench_core::peer::remove_server_data(&gp.out);
    Ok(())
}

/// One system of a group: N sessions (leases) kept alive over the window,
/// with the server's CPU and resident set around it, as a row.
async fn measure_system(
    plan: &PeerPlan,
    sp: &SessionsPlan,
    at: &Group,
    sys: &System,
    position: u32,
) -> Result<SessionRow, SessionsRunError> {
    let rss_base = sys.pid.and_then(cpu::rss_kb);
    let mut probe = Probe {
        cpu: CpuProbe {
            system: sys,
            pg_pids: Vec::new(),
            start: (None, None, None),
            used: (None, None, None),
            store_start: (None, None),
            store_used: (None, None),
        },
        rss_end: (None, None),
    };
    let spec = SessionsSpec {
        n: at.n,
        ttl: Duration::from_secs_f64(sp.ttl_s),
        period: Duration::from_secs_f64(sp.period_s),
        connections: sp.connections,
        warmup: Duration::from_secs_f64(plan.warmup_s),
        duration: Duration::from_secs_f64(plan.duration_s),
        min_heartbeats: sp.min_heartbeats,
        // The group's servers are stopped and their data removed
        // right after: closing 10⁵ sessions one by one would
        // only add durable deletes nobody measures.
        close: false,
    };
    let sample = load::measure(&sys.target, &spec, &mut probe)
        .await
        .map_err(|source| SessionsRunError::Measure {
            label: sys.label(),
            sessions: at.n,
            source,
        })?;
    if let Some(e) = &sample.first_error {
        eprintln!("  {} at {}: first error: {e}", sys.label(), at.n);
    }
    let (cpu_server_s, cpu_store_s, cpu_bench_s) = probe.cpu.used;
    let n = at.n;
    Ok(SessionRow {
        system: sys.system.into(),
        store: sys.store.clone(),
        client: sys.client.into(),
        sessions: n,
        repeat: at.repeat,
        order: position,
        connections: spec.lanes(),
        period_ms: sp.period_s * 1e3,
        ttl_ms: (sp.ttl_s * 1e3).round() as u64,
        seconds: sample.seconds,
        scheduled: sample.scheduled,
        ok: sample.ok,
        errors: sample.errors,
        timeouts: sample.timeouts,
        missed: sample.missed,
        open_failed: sample.open_failed,
        hb_per_s: if sample.seconds > 0.0 {
            sample.ok as f64 / sample.seconds
        } else {
            0.0
        },
        scheduled_per_s: n as f64 / sp.period_s,
        p50_us: sample.raw.value_at_quantile(0.50),
        p99_us: sample.raw.value_at_quantile(0.99),
        p50_corrected_us: sample.corrected.value_at_quantile(0.50),
        p99_corrected_us: sample.corrected.value_at_quantile(0.99),
        samples: sample.corrected.len(),
        cpu_server_s,
        cpu_store_s,
        cpu_bench_s,
        rss_base_kb: rss_base,
        rss_end_kb: probe.rss_end.0,
        rss_peak_kb: probe.rss_end.1,
        fd_limit: at.fd_limit,
        bound_by: bound_by(&sample, cpu_bench_s).into(),
    })
}

/// The progress line of row `index`.
fn print_row(index: usize, at: &Group, sys: &System, row: &SessionRow) {
    eprintln!(
        "[{index}] repeat {} n={:<7} {:<18} {:>8.0}/{:.0} hb/s  p99 {:>7.2} ms (raw {:.2})  miss {} to {} err {} open-fail {}  cpu server {} bench {}  rss {} MiB  {}",
        at.repeat,
        at.n,
        sys.label(),
        row.hb_per_s,
        row.scheduled_per_s,
        row.p99_corrected_us as f64 / 1e3,
        row.p99_us as f64 / 1e3,
        row.missed,
        row.timeouts,
        row.errors,
        row.open_failed,
        fmt_opt(row.cpu_server_s, 2),
        fmt_opt(row.cpu_bench_s, 2),
        fmt_opt(row.rss_end_kb.map(|k| k as f64 / 1024.0), 0),
        if row.bound_by.is_empty() {
            "reached"
        } else {
            &row.bound_by
        },
    );
}

/// `report.md`, the plot, the manifest stamped finished, and the summary.
fn finish(
    plan: &PeerPlan,
    rows: &[SessionRow],
    manifest: &mut Manifest,
) -> Result<i32, SessionsRunError> {
    let text = report::render(plan, rows);
    let path = plan.out.join("report.md");
    written(&path, std::fs::write(&path, &text))?;
    if let Err(e) = report::plot(&plan.out, rows) {
        eprintln!("bench peer: plotting failed: {}", Chain(&e));
    }
    manifest.finish();
    manifest.write(&plan.out).map_err(PeerRunError::Manifest)?;
    print!("{}", report::summary(rows));
    println!("\nreport: {}", plan.out.join("report.md").display());
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser as _;

    fn args(extra: &[&str]) -> PeerArgs {
        let mut argv = vec!["bench", "peer"];
        argv.extend_from_slice(extra);
        match crate::cli::Cli::parse_from(argv).command {
            crate::cli::Command::Peer(a) => a,
            _ => unreachable!("a peer command"),
        }
    }

    #[test]
    fn the_sessions_flags_give_the_sdks_period_and_a_bad_count_is_named() {
        let p = sessions_plan(&args(&["--sessions", "100,1000,10_000"]))
            .unwrap()
            .unwrap();
        assert_eq!(p.counts, [100, 1000, 10_000]);
        assert!((p.period_s - 3.5).abs() < 1e-9, "{}", p.period_s);
        assert_eq!(p.connections, 64);
        let e = sessions_plan(&args(&["--sessions", "100,lots"])).unwrap_err();
        assert_eq!((e.flag, e.value.as_str()), ("--sessions", "lots"));
        let e = sessions_plan(&args(&["--sessions", "100", "--margin", "1.2"])).unwrap_err();
        assert_eq!(e.flag, "--margin");
        assert!(
            sessions_plan(&args(&[])).unwrap().is_none(),
            "no --sessions: the grid"
        );
    }
}
