//! `bench run|sweep`'s cells: a [`RunConfig`] (the flags every cell of a run
//! shares) turns into one [`CellPlan`] per grid cell, and [`run_cell`] runs
//! one — a fresh [`Stack`] in the cell's directory, the [`Steady`] load of
//! in-process SDK workers, and the cell driver's [`measure`] — into a results
//! row and its RTT histogram. Children are owned by the stack and stopped on
//! every exit path.
//!
//! Time base: production numbers (lease 30 s, `rail.read.timeout` 5 s, the
//! "+2 s" of D4, the rail's latency) are scaled by `lease / 30 s`
//! ([`bench_core::timebase`]), so `--ttl 1s` runs the ADR's arithmetic in seconds
//! and `--ttl 30s` in production time. The network (heartbeat RTT,
//! `--net-delay`) is never scaled: it is what is being measured.
//!
//! Warm-up: every cell runs `--warmup` (default [`bench_driver::cell::WARMUP_PERIODS`]
//! heartbeat periods of the cell) before its measured window opens; nothing
//! of it enters any figure. With `--net-delay`, the first cell a run measures
//! also measures the delay proxy's own overhead ([`bench_driver::proxy`]), outside
//! its window.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Duration;

use fencepost_api::latency::LatencySpec;
use serde::Serialize;
use tokio::sync::watch;

pub use bench_analysis::projection::Production;
use bench_analysis::results::CellRow;
use bench_core::blocks::Blocks;
use bench_core::grid::{Cell, PauseAxis, PolicySpec};
use bench_core::hist::Histograms;
use bench_core::overhead::ProxyOverhead;
use bench_core::timebase::TimeBase;
use bench_driver::backend::BackendKind;
use bench_driver::backend::etcd::session_ttl_on_etcd;
use bench_driver::backend::redis::RedisPersistence;
use bench_driver::cell::plan::PlanInputs;
use bench_driver::cell::{
    CellError, Conditions, Hooks, Sampling, Stack, StackError, Steady, WriteError, measure,
};
pub use bench_driver::cell::{CellPlan, Live, Runtime};
use bench_driver::proxy::{BASELINE_PAIRS, BaselineError};
use bench_driver::telemetry::Telemetry;

/// The R7 prefix of the seeded backlog.
pub const PAYOUT_PREFIX: &str = "bench";

/// One run's configuration (every cell of a sweep shares it).
#[derive(Clone, Debug, Serialize)]
pub struct RunConfig {
    /// Where the services come from.
    pub runtime: Runtime,
    /// Concurrent workers (one SDK client and session each).
    pub workers: u32,
    /// How long each cell runs.
    #[serde(serialize_with = "dur")]
    pub duration: Duration,
    /// How many payouts the backlog holds (R7).
    pub payouts: u64,
    /// The margin policies, a grid dimension (`--margin-policy`).
    #[serde(serialize_with = "display_list")]
    pub policies: Vec<PolicySpec>,
    /// Repetitions of every cell (`--repeat`); repeat `i` runs with seed `seed + i`.
    pub repeat: u32,
    /// The production configuration `projection.csv` projects the measured RTT onto.
    pub projection: Production,
    /// `--session-ttl`, if given (else production 15 s, scaled).
    #[serde(serialize_with = "dur_opt")]
    pub session_ttl: Option<Duration>,
    /// The rail's latency in production time (scaled per cell).
    #[serde(serialize_with = "display")]
    pub rail_latency: LatencySpec,
    /// `rail.read.timeout` in production time (scaled per cell).
    #[serde(serialize_with = "dur")]
    pub rail_read_timeout: Duration,
    /// Scale production numbers by `lease / 30 s` (default true).
    pub time_scale: bool,
    /// Extra round-trip delay between workers and lock-server.
    #[serde(serialize_with = "display_opt")]
    pub net_delay: Option<LatencySpec>,
    /// SIGSTOP/SIGCONT the lock-server on this schedule (`EVERY:FOR`; with
    /// several freeze lengths, `EVERY:FOR,FOR…`, one cell per length).
    #[serde(serialize_with = "display_opt")]
    pub server_pause: Option<PauseAxis>,
    /// `--heartbeat-divisor`: the divisors, a grid dimension (`[3]` by default).
    pub heartbeat_divisors: Vec<u32>,
    /// The run's seed: repeat `i` of every cell uses `seed + i`.
    pub seed: u64,
    /// Whether workers run `check_still_held` + `ensure_time_for` before submitting.
    pub client_check: bool,
    /// The lock services every cell runs on, in order (`--backend`).
    pub backends: Vec<BackendKind>,
    /// `--etcd-url`: an etcd to use instead of starting one.
    pub etcd_url: Option<String>,
    /// `--redis-url`: Redis instances to use instead of starting them (one
    /// for redis, N for redlock); empty starts them.
    pub redis_urls: Vec<String>,
    /// `--redis-persistence`: how the redis-servers the bench starts persist.
    #[serde(serialize_with = "display")]
    pub redis_persistence: RedisPersistence,
    /// How many redis-servers redlock runs on.
    pub redlock_instances: u32,
    /// `--warmup`: excluded from every figure; `None` = the default per cell
    /// ([`bench_driver::cell::WARMUP_PERIODS`] heartbeat periods).
    #[serde(serialize_with = "warmup")]
    pub warmup: Option<Duration>,
    /// `--sessions`, `--min-samples`, `--max-duration`.
    #[serde(serialize_with = "sampling")]
    pub sampling: Sampling,
    /// `--tls`: the lock-server serves HTTPS with a certificate made for
    /// the cell, and every SDK client trusts its CA.
    pub tls: bool,
    /// `--hold`: a payout's work under its lock, in production time (scaled per cell).
    #[serde(serialize_with = "display_opt")]
    pub hold: Option<LatencySpec>,
    /// `--steps`: the legs of one payout, all under one lock grant.
    pub steps: u32,
}

fn sampling<S: serde::Serializer>(v: &Sampling, s: S) -> Result<S::Ok, S::Error> {
    serde::Serialize::serialize(
        &serde_json::json!({
            "sessions": v.sessions,
            "min_samples": v.min_samples,
            "max_duration": v.max_duration.map(fencepost_api::format_duration),
        }),
        s,
    )
}

fn warmup<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_str(&fencepost_api::format_duration(*d)),
        None => s.serialize_str(&format!(
            "default ({} heartbeat periods)",
            bench_driver::cell::WARMUP_PERIODS
        )),
    }
}

fn display<T: std::fmt::Display, S: serde::Serializer>(v: &T, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&v.to_string())
}

fn display_list<T: std::fmt::Display, S: serde::Serializer>(
    v: &[T],
    s: S,
) -> Result<S::Ok, S::Error> {
    s.collect_seq(v.iter().map(|x| x.to_string()))
}

fn dur<S: serde::Serializer>(d: &Duration, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&fencepost_api::format_duration(*d))
}

fn dur_opt<S: serde::Serializer>(d: &Option<Duration>, s: S) -> Result<S::Ok, S::Error> {
    match d {
        Some(d) => s.serialize_str(&fencepost_api::format_duration(*d)),
        None => s.serialize_str("default"),
    }
}

fn display_opt<T: std::fmt::Display, S: serde::Serializer>(
    v: &Option<T>,
    s: S,
) -> Result<S::Ok, S::Error> {
    match v {
        Some(v) => s.serialize_str(&v.to_string()),
        None => s.serialize_str("none"),
    }
}

impl RunConfig {
    /// This configuration with its cells run on `backend`: for etcd the
    /// runtime becomes [`Runtime::Etcd`] (etcd as a child, or `--etcd-url`),
    /// for redis and redlock [`Runtime::Redis`] (redis-server children, or
    /// `--redis-url`).
    pub fn on_backend(&self, backend: BackendKind) -> RunConfig {
        let mut cfg = self.clone();
        let redis = |instances: u32, redlock: bool| Runtime::Redis {
            urls: self.redis_urls.clone(),
            instances,
            persistence: self.redis_persistence,
            redlock,
        };
        match backend {
            BackendKind::Fencepost => {}
            BackendKind::Etcd => {
                cfg.runtime = Runtime::Etcd {
                    etcd_url: self.etcd_url.clone(),
                }
            }
            BackendKind::Redis => cfg.runtime = redis(1, false),
            BackendKind::Redlock => cfg.runtime = redis(self.redlock_instances, true),
        }
        cfg.backends = vec![backend];
        cfg
    }

    /// The lock service this configuration's cells run on.
    pub fn backend(&self) -> BackendKind {
        match self.runtime {
            Runtime::Etcd { .. } => BackendKind::Etcd,
            Runtime::Redis { redlock: false, .. } => BackendKind::Redis,
            Runtime::Redis { redlock: true, .. } => BackendKind::Redlock,
            _ => BackendKind::Fencepost,
        }
    }

    /// The plan of `cell`: the run's configuration with the time-base scaling
    /// applied. Its `run_id` is empty until [`CellPlan::in_run`] names the run.
    /// On etcd the cell id starts with `backend=etcd_` and the session TTL
    /// is the etcd lease's: min(lease, session TTL) rounded up to whole seconds.
    pub fn plan(&self, cell: Cell) -> CellPlan {
        let time_base = TimeBase::for_lease(cell.lease, self.time_scale);
        let session_ttl = self.session_ttl.unwrap_or_else(|| time_base.session_ttl());
        let (id, session_ttl) = match self.backend() {
            BackendKind::Fencepost => (cell.id(), session_ttl),
            BackendKind::Etcd => (
                format!("backend=etcd_{}", cell.id()),
                session_ttl_on_etcd(cell.lease, session_ttl),
            ),
            b @ (BackendKind::Redis | BackendKind::Redlock) => {
                (format!("backend={b}_{}", cell.id()), session_ttl)
            }
        };
        let mut plan = CellPlan::new(PlanInputs {
            id,
            lease: cell.lease,
            session_ttl,
            margin: cell.margin,
            policy: cell.policy,
            time_base,
            rail_latency: self.rail_latency,
            rail_read_timeout: self.rail_read_timeout,
            workers: self.workers,
            duration: self.duration,
            payouts: self.payouts,
            payout_prefix: PAYOUT_PREFIX.to_string(),
            seed: self.seed.wrapping_add(u64::from(cell.repeat)),
        });
        plan.repeat = cell.repeat;
        plan.heartbeat_divisor = cell.heartbeat_divisor;
        plan.client_check = self.client_check;
        plan.conditions = Conditions {
            net_delay: self.net_delay,
            // A grid cell carries its own; a cell made by hand
            // (`Cell::fixed`) takes the run's single schedule.
            server_pause: cell
                .server_pause
                .or_else(|| self.server_pause.as_ref().and_then(PauseAxis::single)),
            tls: self.tls,
        };
        if let Some(warmup) = self.warmup {
            plan.warmup = warmup;
        }
        plan.sampling = self.sampling;
        plan.with_hold(self.hold, self.steps)
    }
}

/// Why a cell of `bench run|sweep` could not be measured; each variant is
/// the driver's own error, printed as it is.
#[derive(Debug, thiserror::Error)]
pub enum CellRunError {
    /// The cell's services did not start; their logs are under `cells/<id>/`.
    #[error(transparent)]
    Stack(#[from] StackError),
    /// The delay proxy's zero-delay baseline could not be measured.
    #[error(transparent)]
    Baseline(#[from] BaselineError),
    /// The measured window failed (rail, pool, schedule).
    #[error(transparent)]
    Cell(#[from] CellError),
    /// The cell's `ledger-check.json` could not be written.
    #[error(transparent)]
    Write(#[from] WriteError),
}

/// What a finished cell produced.
pub struct CellResult {
    /// Its results row.
    pub row: CellRow,
    /// Its merged histograms (µs): raw and corrected RTT, tick lag, rail latency.
    pub histograms: Histograms,
    /// Its corrected histogram in time blocks (`None` if it could not be cut).
    pub blocks: Option<Blocks>,
    /// The delay proxy's own overhead, when the cell was asked to measure it.
    pub proxy_overhead: Option<ProxyOverhead>,
}

/// Runs one cell in `out_dir/cells/<id>/` on fresh services; `live` is called
/// about twice a second. With `baseline` and a delay proxy, the proxy's own
/// overhead is measured first, before the load starts. When `stop` turns
/// true the window closes early and the cell is a partial one (`stopped_by`
/// `interrupted`); `Ok(None)` if it turned true before the window opened
/// (nothing was measured).
pub async fn run_cell(
    cfg: &RunConfig,
    plan: &CellPlan,
    out_dir: &Path,
    stop: watch::Receiver<bool>,
    live: &(dyn Fn(&Live) + Sync),
    baseline: bool,
    telemetry: Option<&Telemetry>,
) -> Result<Option<CellResult>, CellRunError> {
    let cell_dir = out_dir.join("cells").join(&plan.id);
    let mut stack = Stack::start(&plan.stack_spec(&cfg.runtime), &cell_dir).await?;
    let proxy_overhead = if baseline {
        match stack.proxy_overhead(BASELINE_PAIRS).await {
            Some(Ok(o)) => Some(o),
            Some(Err(e)) => {
                stack.stop().await;
                return Err(e.into());
            }
            None => None,
        }
    } else {
        None
    };
    let hooks = Hooks {
        live: Some(live),
        interrupt: Some(stop),
        keep_partial: true,
        telemetry: telemetry.cloned(),
        ..Hooks::default()
    };
    let measured = measure(&mut stack, plan, &mut Steady, hooks).await;
    stack.stop().await;
    let Some(m) = measured? else {
        return Ok(None);
    };
    m.write_ledger_check(&cell_dir)?;
    Ok(Some(CellResult {
        row: bench_driver::row::cell_row(&m),
        blocks: m.blocks,
        histograms: m.workers.hists,
        proxy_overhead,
    }))
}

/// A binary's path without the machine's part: its last three components
/// (`target/release/lock-server`), which say which build ran. A results
/// directory is committed and read elsewhere; an absolute path of the
/// machine that wrote it means nothing there.
pub fn machine_free(path: &Path) -> String {
    let parts: Vec<_> = path.components().collect();
    let tail = &parts[parts.len().saturating_sub(3)..];
    tail.iter()
        .map(|c| c.as_os_str().to_string_lossy())
        .collect::<Vec<_>>()
        .join("/")
}

/// The command line as it is recorded (`manifest.json` `argv`): the
/// program by its file name, then its arguments as given.
pub fn recorded_argv() -> Vec<String> {
    let mut args: Vec<String> = std::env::args().collect();
    if let Some(first) = args.first_mut() {
        *first = Path::new(first.as_str())
            .file_name()
            .map_or_else(|| first.clone(), |n| n.to_string_lossy().into_owned());
    }
    args
}

/// `lock-server --version` and `rail-stub --version` with their paths, for
/// the runtimes that start them as processes; empty otherwise.
pub fn binary_versions(runtime: &Runtime) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let local = matches!(runtime, Runtime::Process { .. } | Runtime::Etcd { .. });
    if !local {
        return out;
    }
    for name in ["lock-server", "rail-stub"] {
        let v = match fencepost_harness::binary(name, name) {
            Ok(path) => {
                let version =
                    bench_analysis::manifest::first_line(&path.to_string_lossy(), &["--version"])
                        .unwrap_or_else(|| "unknown".into());
                format!("{version} ({})", machine_free(&path))
            }
            Err(e) => format!("not found: {e}"),
        };
        out.insert(name.to_owned(), v);
    }
    out.insert(
        "bench".to_owned(),
        format!("bench {}", env!("CARGO_PKG_VERSION")),
    );
    out
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;

    use super::*;

    /// A committed manifest names a build, never the machine that made it.
    #[test]
    fn a_recorded_binary_path_keeps_only_its_build_part() {
        // An absolute path built from parts (no machine path in the source).
        let abs: PathBuf = [
            std::path::MAIN_SEPARATOR_STR,
            "srv",
            "ci",
            "target",
            "release",
        ]
        .iter()
        .collect::<PathBuf>()
        .join("lock-server");
        assert_eq!(machine_free(&abs), "target/release/lock-server");
        assert_eq!(machine_free(Path::new("lock-server")), "lock-server");
        assert!(!recorded_argv()[0].contains('/'));
    }
}
