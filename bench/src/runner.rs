//! Runs one grid cell: start (or reach) the services, seed a payout backlog,
//! run the workers for the cell's duration, then read everything that counts
//! from the rail's ledger and the SDK's RTT histograms, and check the ledger
//! invariant. Children are owned by guards and stopped on every exit path.
//!
//! Time base: production numbers (lease 30 s, `rail.read.timeout` 5 s, the
//! "+2 s" of D4, the rail's latency) are scaled by `lease / 30 s`, so
//! `--ttl 1s` runs the ADR's arithmetic in seconds and `--ttl 30s` in
//! production time. The network (heartbeat RTT, `--net-delay`) is never
//! scaled: it is what is being measured.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fencepost_api::latency::LatencySpec;
use fencepost_api::ledger_check::check_ledger;
use fencepost_harness::ChildService;
use fencepost_sdk::{Histogram, MarginPolicy};
use serde::Serialize;
use tokio::sync::watch;
use tokio::time::Instant;

use crate::grid::{Cell, PauseSpec, PolicySpec};
use crate::hist;
use crate::proxy::DelayProxy;
use crate::rail::RailClient;
use crate::results::CellRow;
use crate::worker::{Tally, WorkQueue, Worker, WorkerEnv};

/// The production lease the ADR's numbers are stated for.
pub const PRODUCTION_LEASE: Duration = Duration::from_secs(30);
/// The production session TTL (C4 `lock.session.ttl`).
pub const PRODUCTION_SESSION_TTL: Duration = Duration::from_secs(15);
/// D4's fixed addition to the rail read timeout.
pub const D4_EXTRA: Duration = Duration::from_secs(2);
/// The R7 prefix of the seeded backlog.
pub const PAYOUT_PREFIX: &str = "bench";

/// Where the services come from.
#[derive(Clone, Debug, Serialize)]
#[serde(tag = "runtime", rename_all = "lowercase")]
pub enum Runtime {
    /// Child processes on free loopback ports, one fresh pair per cell.
    Process {
        /// `--store` for the lock-server; `None` = SQLite in the cell's directory.
        store: Option<String>,
    },
    /// Containers (testcontainers) on a private network, one fresh pair per
    /// cell, the lock-server on PostgreSQL ([`crate::docker`]).
    Docker {
        /// The PostgreSQL the lock-server uses, as the bench reaches it (relayed into the network).
        pg_url: String,
        /// The lock-server image.
        lock_image: String,
        /// The rail-stub image.
        rail_image: String,
    },
    /// Services the user runs; counters are read as before/after deltas.
    External {
        /// The lock-server's base URL.
        lock_url: String,
        /// The rail-stub's base URL.
        rail_url: String,
    },
}

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
    /// Fixed or adaptive margin.
    #[serde(serialize_with = "display")]
    pub policy: PolicySpec,
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
    /// SIGSTOP/SIGCONT the lock-server on this schedule.
    #[serde(serialize_with = "display_opt")]
    pub server_pause: Option<PauseSpec>,
    /// The run's seed (every cell uses it).
    pub seed: u64,
    /// Whether workers run `check_still_held` + `ensure_time_for` before submitting.
    pub client_check: bool,
}

fn display<T: std::fmt::Display, S: serde::Serializer>(v: &T, s: S) -> Result<S::Ok, S::Error> {
    s.serialize_str(&v.to_string())
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

/// A cell's numbers after the time-base scaling.
#[derive(Clone, Debug)]
pub struct CellPlan {
    /// The cell.
    pub cell: Cell,
    /// `lease / 30 s`, or 1 without scaling.
    pub scale: f64,
    /// The session TTL.
    pub session_ttl: Duration,
    /// The rail's latency, scaled.
    pub rail_latency: LatencySpec,
    /// `rail.read.timeout`, scaled.
    pub rail_read_timeout: Duration,
    /// `(rail.read.timeout + 2 s)`, scaled: what D4 requires before submitting.
    pub worst_case_hop: Duration,
}

/// Multiplies every delay of a latency spec by `k`.
pub fn scale_latency(spec: LatencySpec, k: f64) -> LatencySpec {
    let m = |d: Duration| d.mul_f64(k);
    match spec {
        LatencySpec::Fixed(d) => LatencySpec::Fixed(m(d)),
        LatencySpec::Uniform { min, max } => LatencySpec::Uniform {
            min: m(min),
            max: m(max),
        },
        LatencySpec::LogNormal { p50, p99 } => LatencySpec::LogNormal {
            p50: m(p50),
            p99: m(p99),
        },
    }
}

impl RunConfig {
    /// The scaled numbers of `cell`.
    pub fn plan(&self, cell: Cell) -> CellPlan {
        let scale = if self.time_scale {
            cell.lease.as_secs_f64() / PRODUCTION_LEASE.as_secs_f64()
        } else {
            1.0
        };
        let rail_read_timeout = self.rail_read_timeout.mul_f64(scale);
        CellPlan {
            cell,
            scale,
            session_ttl: self.session_ttl.unwrap_or_else(|| {
                PRODUCTION_SESSION_TTL
                    .mul_f64(scale)
                    .max(Duration::from_millis(100))
            }),
            rail_latency: scale_latency(self.rail_latency, scale),
            rail_read_timeout,
            worst_case_hop: (self.rail_read_timeout + D4_EXTRA).mul_f64(scale),
        }
    }

    fn margin_policy(&self, cell: &Cell) -> MarginPolicy {
        match self.policy {
            PolicySpec::Fixed => MarginPolicy::Fixed(cell.margin),
            PolicySpec::Adaptive { k, floor, ceiling } => {
                MarginPolicy::Adaptive { k, floor, ceiling }
            }
        }
    }
}

/// A live view of a running cell, for the progress line.
#[derive(Clone, Debug, Default)]
pub struct Live {
    /// Seconds run so far.
    pub elapsed_s: f64,
    /// Submissions the rail answered 200 so far (client side).
    pub paid: u64,
    /// Abandoned for insufficient lease so far.
    pub abandoned: u64,
    /// Handles lost so far.
    pub lock_lost: u64,
}

/// The services of one cell, stopped when dropped.
struct Services {
    /// The lock-server child (shared with the pause task).
    lock: Option<Arc<Mutex<ChildService>>>,
    /// The rail-stub child.
    _rail: Option<ChildService>,
    /// The containers of the docker runtime (removed on drop, after the proxy).
    _docker: Option<crate::docker::DockerServices>,
    /// The delay proxy, if any.
    proxy: Option<DelayProxy>,
    /// Where workers send lock traffic.
    lock_url: String,
    /// Where workers send rail traffic.
    rail_url: String,
}

fn start_child(package: &str, args: Vec<String>, log: PathBuf) -> anyhow::Result<ChildService> {
    let bin = fencepost_harness::binary(package, package)?;
    Ok(ChildService::start(&bin, args, &log)?)
}

async fn start_services(
    cfg: &RunConfig,
    plan: &CellPlan,
    cell_dir: &Path,
) -> anyhow::Result<Services> {
    let mut docker = None;
    let (lock, rail, lock_url, rail_url) = match &cfg.runtime {
        Runtime::Process { store } => {
            let store = store
                .clone()
                .unwrap_or_else(|| format!("sqlite:{}", cell_dir.join("lock.sqlite").display()));
            let lease = fencepost_api::format_duration(plan.cell.lease);
            let session = fencepost_api::format_duration(plan.session_ttl);
            let lock_args = vec![
                "--store".into(),
                store,
                "--default-ttl".into(),
                lease,
                "--session-ttl".into(),
                session,
            ];
            let rail_args = vec![
                "--latency".into(),
                plan.rail_latency.to_string(),
                "--seed".into(),
                cfg.seed.to_string(),
            ];
            let (la, ra) = (
                cell_dir.join("lock-server.log"),
                cell_dir.join("rail-stub.log"),
            );
            let lock =
                tokio::task::spawn_blocking(move || start_child("lock-server", lock_args, la))
                    .await??;
            let rail = tokio::task::spawn_blocking(move || start_child("rail-stub", rail_args, ra))
                .await??;
            let (lu, ru) = (lock.url(), rail.url());
            (Some(lock), Some(rail), lu, ru)
        }
        Runtime::Docker {
            pg_url,
            lock_image,
            rail_image,
        } => {
            let spec = crate::docker::DockerSpec {
                lock_image: lock_image.clone(),
                rail_image: rail_image.clone(),
                pg_url: pg_url.clone(),
                lock_args: vec![
                    "--default-ttl".into(),
                    fencepost_api::format_duration(plan.cell.lease),
                    "--session-ttl".into(),
                    fencepost_api::format_duration(plan.session_ttl),
                ],
                rail_args: vec![
                    "--latency".into(),
                    plan.rail_latency.to_string(),
                    "--seed".into(),
                    cfg.seed.to_string(),
                ],
                log_dir: cell_dir.to_path_buf(),
            };
            let d = crate::docker::start(&spec).await?;
            let urls = (d.lock_url.clone(), d.rail_url.clone());
            docker = Some(d);
            (None, None, urls.0, urls.1)
        }
        Runtime::External { lock_url, rail_url } => {
            (None, None, lock_url.clone(), rail_url.clone())
        }
    };
    let proxy = match cfg.net_delay {
        Some(spec) => {
            let upstream = lock_addr(&lock_url)?;
            Some(DelayProxy::start(upstream, spec, cfg.seed).await?)
        }
        None => None,
    };
    let worker_lock_url = proxy
        .as_ref()
        .map(DelayProxy::url)
        .unwrap_or_else(|| lock_url.clone());
    Ok(Services {
        lock: lock.map(|l| Arc::new(Mutex::new(l))),
        _rail: rail,
        _docker: docker,
        proxy,
        lock_url: worker_lock_url,
        rail_url,
    })
}

/// The socket address of an `http://IP:PORT` URL (the proxy only forwards to loopback IPs we started or were given).
fn lock_addr(url: &str) -> anyhow::Result<std::net::SocketAddr> {
    let hostport = url.trim_start_matches("http://").trim_end_matches('/');
    use std::net::ToSocketAddrs;
    hostport
        .to_socket_addrs()?
        .next()
        .ok_or_else(|| anyhow::anyhow!("cannot resolve {url}"))
}

/// What a finished cell produced.
pub struct CellResult {
    /// Its results row.
    pub row: CellRow,
    /// Its merged heartbeat RTT histogram (µs).
    pub histogram: Histogram<u64>,
}

/// Runs one cell; `live` is called about twice a second. Returns `Ok(None)`
/// if `stop` turned true before the cell finished (the partial cell is discarded).
pub async fn run_cell(
    cfg: &RunConfig,
    plan: &CellPlan,
    out_dir: &Path,
    mut stop: watch::Receiver<bool>,
    live: &(dyn Fn(&Live) + Sync),
) -> anyhow::Result<Option<CellResult>> {
    let cell_dir = out_dir.join("cells").join(plan.cell.id());
    std::fs::create_dir_all(&cell_dir)?;
    let services = start_services(cfg, plan, &cell_dir).await?;
    let rail = RailClient::new(&services.rail_url, plan.rail_read_timeout);
    let before = rail.ledger().await.map(|l| check_ledger(&l))?;
    let created = rail.seed_backlog(cfg.payouts, PAYOUT_PREFIX).await?;
    // R7 numbers a backlog after any earlier one under the same prefix (external runtime).
    let first = created.first_number(PAYOUT_PREFIX)?;

    let env = WorkerEnv {
        lock_url: services.lock_url.clone(),
        rail_url: services.rail_url.clone(),
        lease: plan.cell.lease,
        session_ttl: plan.session_ttl,
        margin: cfg.margin_policy(&plan.cell),
        rail_read_timeout: plan.rail_read_timeout,
        worst_case_hop: plan.worst_case_hop,
        client_check: cfg.client_check,
        acquire_budget: plan.cell.lease / 4,
        payout_prefix: PAYOUT_PREFIX.to_string(),
        seed: cfg.seed,
        on_claimed: None,
    };
    let workers: Vec<Arc<Worker>> = (0..cfg.workers as u64)
        .map(|i| Worker::new(i, env.clone()).map(Arc::new))
        .collect::<anyhow::Result<_>>()?;
    let queue = Arc::new(WorkQueue::new(first, cfg.payouts));
    let tally = Arc::new(Tally::default());
    let (work_stop_tx, work_stop_rx) = watch::channel(false);
    let started = Instant::now();
    let tasks: Vec<_> = workers
        .iter()
        .map(|w| {
            let (w, q, t, s) = (
                w.clone(),
                queue.clone(),
                tally.clone(),
                work_stop_rx.clone(),
            );
            tokio::spawn(async move { w.run(q, t, s).await })
        })
        .collect();
    // SIGSTOP/SIGCONT the lock-server on schedule; it is always resumed before the guard drops.
    let pauser = match (cfg.server_pause, &services.lock) {
        (Some(p), Some(lock)) => Some(tokio::spawn(pause_loop(
            p,
            lock.clone(),
            work_stop_rx.clone(),
        ))),
        _ => None,
    };

    let deadline = started + cfg.duration;
    let mut tick = tokio::time::interval(Duration::from_millis(500));
    let interrupted = loop {
        tokio::select! {
            _ = tokio::time::sleep_until(deadline) => break false,
            _ = stop.changed() => if *stop.borrow() { break true },
            _ = tick.tick() => live(&Live {
                elapsed_s: started.elapsed().as_secs_f64(),
                paid: tally.paid_replies.load(Ordering::Relaxed),
                abandoned: tally.abandoned_insufficient_lease.load(Ordering::Relaxed),
                lock_lost: tally.lock_lost.load(Ordering::Relaxed),
            }),
        }
    };
    let _ = work_stop_tx.send(true);
    if let Some(p) = pauser {
        let _ = p.await;
    }
    // Workers finish the payout in hand; bounded by one acquire and one rail hop.
    let grace = plan.cell.lease + plan.rail_read_timeout + Duration::from_secs(5);
    for t in tasks {
        if tokio::time::timeout(grace, t).await.is_err() {
            tracing::warn!("a worker did not stop in time");
        }
    }
    let elapsed = started.elapsed();
    if interrupted {
        return Ok(None);
    }

    // Everything that counts comes from the ledger and its counters.
    let ledger = rail.ledger().await?;
    let after = check_ledger(&ledger);
    std::fs::write(
        cell_dir.join("ledger-check.json"),
        serde_json::to_vec_pretty(&after)?,
    )?;
    let mut histogram = hist::new_histogram();
    let mut renewals = 0;
    for w in &workers {
        histogram.add(w.client().rtt_histogram())?;
        renewals += w.client().stats().renewals;
    }
    let rtt = hist::summarize(&histogram);
    let margin_effective = match cfg.margin_policy(&plan.cell) {
        MarginPolicy::Fixed(m) => m,
        MarginPolicy::Adaptive { k, floor, ceiling } => fencepost_sdk::lease::adaptive_margin(
            k,
            floor,
            ceiling,
            plan.cell.lease,
            fencepost_sdk::lease::RttSummary {
                samples: rtt.count,
                p99_us: rtt.p99,
            },
        ),
    };
    let paid = after.paid - before.paid;
    let get = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
    let row = CellRow {
        run_id: String::new(),
        margin: plan.cell.margin,
        margin_policy: cfg.policy.to_string(),
        lease_ms: plan.cell.lease.as_millis() as u64,
        session_ttl_ms: plan.session_ttl.as_millis() as u64,
        workers: cfg.workers,
        duration_s: elapsed.as_secs_f64(),
        rail_p50_ms: plan.rail_latency.p50().as_secs_f64() * 1e3,
        rail_p99_ms: plan.rail_latency.p99().as_secs_f64() * 1e3,
        hb_count: rtt.count,
        hb_rtt_p50_us: rtt.p50,
        hb_rtt_p90_us: rtt.p90,
        hb_rtt_p99_us: rtt.p99,
        hb_rtt_p999_us: rtt.p999,
        hb_rtt_max_us: rtt.max,
        payouts_paid: paid,
        throughput_per_s: paid as f64 / elapsed.as_secs_f64(),
        abandoned_insufficient_lease: get(&tally.abandoned_insufficient_lease),
        lock_lost: get(&tally.lock_lost),
        renewals,
        fenced_out: after.fenced_out_total - before.fenced_out_total,
        duplicate_attempted: after.duplicate_attempted - before.duplicate_attempted,
        usable_lease_fraction: tally.usable_lease_fraction(),
        cell: plan.cell.id(),
        seed: cfg.seed,
        net_delay: cfg
            .net_delay
            .map(|d| d.to_string())
            .unwrap_or_else(|| "none".into()),
        server_pause: cfg
            .server_pause
            .map(|p| p.to_string())
            .unwrap_or_else(|| "none".into()),
        rail_latency: plan.rail_latency.to_string(),
        rail_read_timeout_ms: plan.rail_read_timeout.as_millis() as u64,
        worst_case_hop_ms: plan.worst_case_hop.as_millis() as u64,
        client_check: cfg.client_check,
        acquire_failed: get(&tally.acquire_failed),
        abandoned_lost: get(&tally.abandoned_lost),
        attempts: get(&tally.attempts),
        paid_twice: after.paid_twice,
        stale_paid: after.stale_paid,
        ledger_ok: after.holds(),
        margin_effective,
        hb_rtt_mean_us: rtt.mean,
    };
    drop(services);
    Ok(Some(CellResult { row, histogram }))
}

/// Pauses the lock-server for `p.pause_for` every `p.every` until `stop`.
async fn pause_loop(p: PauseSpec, lock: Arc<Mutex<ChildService>>, mut stop: watch::Receiver<bool>) {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(p.every - p.pause_for) => {}
            _ = stop.changed() => return,
        }
        let _ = lock.lock().unwrap_or_else(|e| e.into_inner()).pause();
        tokio::select! {
            _ = tokio::time::sleep(p.pause_for) => {}
            _ = stop.changed() => {}
        }
        let _ = lock.lock().unwrap_or_else(|e| e.into_inner()).resume();
        if *stop.borrow() {
            return;
        }
    }
}

impl Drop for Services {
    fn drop(&mut self) {
        self.proxy.take();
        if let Some(lock) = self.lock.take() {
            // Resume a paused server so it can be killed and reaped cleanly.
            let mut l = lock.lock().unwrap_or_else(|e| e.into_inner());
            let _ = l.resume();
            l.kill9();
        }
    }
}
