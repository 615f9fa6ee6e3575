//! The `experiments` command line: `pause`, `clock`, `throttle`, and the
//! hidden `worker` the first and last start as child processes. Every value is
//! parsed by clap with the typed parsers below ([`ArgError`]), so a bad value
//! exits with code 2 and names its flag.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use fencepost_api::latency::LatencySpec;

use crate::cgroup::{QuotaError, QuotaSpec};
use bench_driver::worker_process::WorkerSpec;

use crate::chaos::ChaosInputs;
pub use crate::chaos::{ChaosRuntime, SabotageMode};
use crate::clock::{ClockRun, SimParams};
use crate::failover::FailoverInputs;
use crate::pause::{PauseInputs, PauseRun};
use crate::throttle::ThrottleInputs;

/// experiments — fencepost's fault experiments: show that ADR-006's fences hold
/// "even if the client's clock is nonsense", and where the client check and the
/// server's grace stop covering the fault.
///
/// Every run prints its seed, records it in manifest.json and writes under
/// --out (default data/runs/<timestamp>-<experiment>/): the experiment's JSON,
/// plots as SVG and PNG, and a report.md section.
///
/// Examples:
///   experiments pause --ttl 1s --pauses 5 --seed 3
///       a worker process is SIGSTOPped in its critical section 5 times; the
///       client check makes it abandon: fenced_out = 0
///   experiments pause --ttl 1s --pauses 5 --seed 3 --disable-client-check
///       UC-03: the resumed worker submits with its stale token and fence 2
///       refuses it: fenced_out = 5, paid_twice = stale_paid = 0
///   experiments pause --backend etcd --ttl 1s --pauses 5 --seed 3
///       the same on etcd (its lock, fencepost's client arithmetic and fences)
///   experiments pause --backend redlock --ttl 1s --pauses 5 --seed 3 --disable-client-check
///       the same on Redlock (3 redis-servers, no fencing token, the rail's
///       fences off): the resumed worker pays a second time, paid_twice = 5
///   experiments clock --cases 1000 --seed 1
///       simulated client/server clocks (offset, drift, quantisation, steps);
///       violation rate against grace / (θ + 2ρD + q), no real sleeps
///   experiments clock --margin 0.3
///       the same with ADR-006's client margin: it adds 0.3 × lease of slack
///   experiments throttle --quota 10% --ttl 1s --duration 10s
///       worker processes in a cgroup limited to 10 % of a core vs none
///   experiments failover --seed 1 --pg-url postgres://postgres@127.0.0.1:5432/fencepost
///       3 lock-server replicas on PostgreSQL: kill -9 the leader, SIGSTOP the
///       next one, restart PostgreSQL (--pg-dir); time to a new leader, dip
///   experiments chaos --runs 20 --seed 1
///       20 seeded fault schedules over live cells, every operation recorded
///       and checked (paid twice, stale paid, token regressions, overlaps)
///   experiments chaos --runs 3 --seed 1 --sabotage no-fences
///       the same against a rail-stub with its fences off: must exit 1
///   experiments chaos --backend redis --redis-persistence none --runs 50 --seed 1
///       the same over one redis-server (counter tokens), SIGSTOPped and
///       kill -9'd + restarted with nothing on disk: its tokens regress
///
/// Exit codes: 0 ok, 1 the experiment failed (a service, an expectation, the
/// ledger invariant), 2 bad input, 4 (throttle) cgroups cannot be written.
#[derive(Debug, Parser)]
#[command(name = "experiments", version, verbatim_doc_comment)]
pub struct Cli {
    /// Which experiment.
    #[command(subcommand)]
    pub command: Command,
}

/// The experiments.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// SIGSTOP a worker process in its critical section beyond its lease, N times (T-042, UC-03).
    Pause(PauseArgs),
    /// Simulate client and server clocks against the server's grace; no real sleeps (T-043).
    Clock(ClockArgs),
    /// Worker processes under a cgroup CPU quota vs unthrottled (ADR-006's Autopilot case).
    Throttle(ThrottleArgs),
    /// Three lock-server replicas on PostgreSQL through kill -9, SIGSTOP and a database restart.
    Failover(FailoverArgs),
    /// Seeded fault schedules over live cells; every operation recorded and checked.
    Chaos(ChaosArgs),
    /// (internal) One SDK payout worker as its own OS process, driven over stdin.
    #[command(hide = true)]
    Worker(WorkerArgs),
}

/// `experiments pause`.
#[derive(Debug, Args, Clone)]
pub struct PauseArgs {
    /// Lease TTL of every acquire (lock.default.ttl); rail timeouts scale with it (lease / 30 s).
    #[arg(long, default_value = "1s", value_parser = parse_positive_duration)]
    pub ttl: Duration,

    /// Session TTL; default: the same as --ttl.
    #[arg(long, value_parser = parse_positive_duration)]
    pub session_ttl: Option<Duration>,

    /// How many times the worker process is frozen in its critical section.
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub pauses: u32,

    /// Other workers (in-process SDK workers, client check always on) that take the paused payout over.
    #[arg(long, default_value_t = 2, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub workers: u32,

    /// Payouts seeded per pause; the paused worker and the others all work this backlog.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub payouts_per_pause: u64,

    /// How long each pause lasts at least, as a multiple of the lease (the takeover is also awaited).
    #[arg(long, default_value_t = 2.0, value_parser = parse_factor)]
    pub pause_factor: f64,

    /// lock.client.safety-margin of every worker, 0 <= m < 1.
    #[arg(long, default_value_t = 0.3, value_parser = parse_margin)]
    pub margin: f64,

    /// UC-03: the paused worker skips check_still_held/ensure_time_for, so its stale submit reaches fence 2.
    #[arg(long)]
    pub disable_client_check: bool,

    /// The lock service: fencepost (the lock-server) or etcd (started from
    /// `etcd` on PATH; the session TTL is rounded up to whole seconds; no grace).
    #[arg(long, default_value = "fencepost")]
    pub backend: bench_driver::backend::BackendKind,

    /// Seed for the pause points, the workers' jitter and the rail's latency; random if absent (printed and recorded).
    #[arg(long)]
    pub seed: Option<u64>,

    /// Results directory; default data/runs/<timestamp>-pause/.
    #[arg(long)]
    pub out: Option<PathBuf>,

    /// Serve Prometheus metrics during the rounds at ADDR, as `bench run
    /// --metrics-listen` does: /metrics the workers' SDK metrics, /sd the
    /// lock-server and rail-stub as discovery targets (the rail-stub's
    /// lock_fenced_out_total is what the fenced-out alert watches).
    #[arg(long, value_name = "ADDR")]
    pub metrics_listen: Option<std::net::SocketAddr>,
}

impl PauseArgs {
    /// The run these flags ask for.
    pub fn to_run(&self) -> PauseRun {
        PauseRun {
            inputs: PauseInputs {
                ttl: self.ttl,
                session_ttl: self.session_ttl,
                pauses: self.pauses,
                workers: self.workers,
                payouts_per_pause: self.payouts_per_pause,
                pause_factor: self.pause_factor,
                margin: self.margin,
                client_check: !self.disable_client_check,
                backend: self.backend,
            },
            seed: self.seed,
            out: self.out.clone(),
            metrics_listen: self.metrics_listen,
        }
    }
}

/// `experiments clock`.
#[derive(Debug, Args, Clone)]
pub struct ClockArgs {
    /// Seeded cases per (scenario, grace fraction); at least 1.
    #[arg(long, default_value_t = 1000, value_parser = clap::value_parser!(u64).range(1..=10_000_000))]
    pub cases: u64,

    /// Seed of the cases; random if absent (printed and recorded).
    #[arg(long)]
    pub seed: Option<u64>,

    /// The lease D every case grants.
    #[arg(long, default_value = "10s", value_parser = parse_positive_duration)]
    pub lease: Duration,

    /// θ_max: the largest offset (start-instant) error between client and server.
    #[arg(long, default_value = "50ms", value_parser = parse_duration_flag)]
    pub theta: Duration,

    /// ρ: the drift-rate bound per clock, in ppm.
    #[arg(long, default_value_t = 100, value_parser = clap::value_parser!(u64).range(0..=100_000))]
    pub drift_ppm: u64,

    /// q: the combined quantisation of both clocks (each clock ticks in q/2).
    #[arg(long, default_value = "1ms", value_parser = parse_duration_flag)]
    pub quantum: Duration,

    /// Size of the clock step in the step scenarios.
    #[arg(long, default_value = "25ms", value_parser = parse_duration_flag)]
    pub step: Duration,

    /// Largest one-way network delay of the acquire and its reply.
    #[arg(long, default_value = "5ms", value_parser = parse_duration_flag)]
    pub max_delay: Duration,

    /// Client safety margin (ADR-006 D1); 0 is the essay's setting.
    #[arg(long, default_value_t = 0.0, value_parser = parse_margin)]
    pub margin: f64,

    /// Grace as fractions of the bound θ + 2ρD + q, comma separated.
    #[arg(long, default_value = "0,0.25,0.5,0.75,0.9,0.99,1,1.1,1.5,2", value_parser = parse_fractions)]
    pub fractions: Fractions,

    /// Results directory; default data/runs/<timestamp>-clock/.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

impl ClockArgs {
    /// The run these flags ask for: the simulation's inputs in ns.
    pub fn to_run(&self) -> ClockRun {
        let ns = |d: Duration| d.as_nanos() as u64;
        ClockRun {
            params: SimParams {
                lease_ns: ns(self.lease),
                theta_ns: ns(self.theta),
                drift_ppm: self.drift_ppm,
                quantum_ns: ns(self.quantum),
                step_ns: ns(self.step),
                max_delay_ns: ns(self.max_delay),
                margin: self.margin,
            },
            cases: self.cases,
            fractions: self.fractions.0.clone(),
            seed: self.seed,
            out: self.out.clone(),
        }
    }
}

/// A list of grace fractions (non-negative, finite).
#[derive(Clone, Debug, PartialEq)]
pub struct Fractions(pub Vec<f64>);

/// `experiments throttle`.
#[derive(Debug, Args, Clone)]
pub struct ThrottleArgs {
    /// CPU quota for the worker processes: `10%` (of one core), `0.1`, or `QUOTA/PERIOD` like `10ms/100ms`.
    #[arg(long, default_value = "10%", value_parser = parse_quota)]
    pub quota: QuotaSpec,

    /// Lease TTL of every acquire; rail timeouts scale with it.
    #[arg(long, default_value = "1s", value_parser = parse_positive_duration)]
    pub ttl: Duration,

    /// How long each of the two runs (throttled, unthrottled) lasts.
    #[arg(long, default_value = "10s", value_parser = parse_positive_duration)]
    pub duration: Duration,

    /// Worker processes (each one SDK worker).
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub workers: u32,

    /// lock.client.safety-margin of every worker, 0 <= m < 1.
    #[arg(long, default_value_t = 0.3, value_parser = parse_margin)]
    pub margin: f64,

    /// Seed; random if absent (printed and recorded).
    #[arg(long)]
    pub seed: Option<u64>,

    /// Results directory; default data/runs/<timestamp>-throttle/.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

impl ThrottleArgs {
    /// The inputs these flags give the experiment.
    pub fn to_inputs(&self) -> ThrottleInputs {
        ThrottleInputs {
            quota: self.quota,
            ttl: self.ttl,
            duration: self.duration,
            workers: self.workers,
            margin: self.margin,
            seed: self.seed,
            out: self.out.clone(),
        }
    }
}

/// `experiments failover`.
#[derive(Debug, Args, Clone)]
pub struct FailoverArgs {
    /// The PostgreSQL the replicas share (a fresh schema is created in it).
    #[arg(long, env = "FENCEPOST_TEST_PG_URL")]
    pub pg_url: String,

    /// The data directory's parent of that PostgreSQL (scripts/pg-test-cluster.sh's
    /// FENCEPOST_PG_DIR), to restart it with pg_ctl; without it that fault is skipped and says so.
    #[arg(long, env = "FENCEPOST_PG_DIR")]
    pub pg_dir: Option<PathBuf>,

    /// Every replica's --leader-lease.
    #[arg(long, default_value = "1s", value_parser = parse_positive_duration)]
    pub leader_lease: Duration,

    /// Lease TTL of every acquire; the session TTL and rail timeouts scale with it.
    #[arg(long, default_value = "2s", value_parser = parse_positive_duration)]
    pub ttl: Duration,

    /// In-process SDK payout workers, each given all three replica URLs.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub workers: u32,

    /// lock.client.safety-margin of every worker, 0 <= m < 1.
    #[arg(long, default_value_t = 0.3, value_parser = parse_margin)]
    pub margin: f64,

    /// Steady running before, between and after the faults.
    #[arg(long, default_value = "4s", value_parser = parse_positive_duration)]
    pub phase: Duration,

    /// Seed of the workers' jitter and the rail's latency; random if absent (printed and recorded).
    #[arg(long)]
    pub seed: Option<u64>,

    /// Results directory; default data/runs/<timestamp>-failover/.
    #[arg(long)]
    pub out: Option<PathBuf>,
}

impl FailoverArgs {
    /// The inputs these flags give the experiment.
    pub fn to_inputs(&self) -> FailoverInputs {
        FailoverInputs {
            pg_url: self.pg_url.clone(),
            pg_dir: self.pg_dir.clone(),
            leader_lease: self.leader_lease,
            ttl: self.ttl,
            workers: self.workers,
            margin: self.margin,
            phase: self.phase,
            seed: self.seed,
            out: self.out.clone(),
        }
    }
}

/// `experiments chaos`.
///
/// Each run starts a fresh cell (lock-server on SQLite behind the delay
/// proxy, rail-stub, worker processes on one shared backlog), draws its fault
/// schedule from its seed (`--seed` + run index) — one worker frozen inside
/// its critical section, plus 1–3 of: a worker frozen outside it, SIGSTOP or
/// kill -9 of a worker, SIGSTOP or kill -9 + restart of the lock-server,
/// delay and loss spikes — and checks the recorded history and the final
/// ledger. Exit 1 on any violation. With `--backend redis` the lock-server
/// is one redis-server behind the same proxy, and its faults are the
/// redis-server's SIGSTOP and kill -9 + restart (`--redis-persistence`).
#[derive(Debug, Args, Clone)]
pub struct ChaosArgs {
    /// How many runs (each a few seconds).
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(1..=100_000))]
    pub runs: u32,

    /// Base seed: run I uses SEED + I; random if absent (printed and recorded).
    #[arg(long)]
    pub seed: Option<u64>,

    /// Replay one run alone (its index, 0-based, as chaos.json lists it).
    #[arg(long)]
    pub only_run: Option<u32>,

    /// Where the services run. process: child processes (one lock-server
    /// on SQLite, or replicas on --pg-url). docker: containers from
    /// scripts/build-images.sh on a private network per run, always on
    /// PostgreSQL — a container of the run's own (scripts/build-postgres-image.sh)
    /// unless --pg-url is given — where a SIGSTOP is `docker pause`, a kill
    /// -9 `docker kill` (then `docker start`), and a PostgreSQL restart a
    /// `docker kill` of its container.
    #[arg(long, value_enum, default_value = "process")]
    pub runtime: ChaosRuntime,

    /// The lock-server image for --runtime docker.
    #[arg(long, default_value = bench_driver::docker::DEFAULT_LOCK_IMAGE)]
    pub lock_image: String,

    /// The rail-stub image for --runtime docker.
    #[arg(long, default_value = bench_driver::docker::DEFAULT_RAIL_IMAGE)]
    pub rail_image: String,

    /// The PostgreSQL image for --runtime docker without --pg-url.
    #[arg(long, default_value = bench_driver::docker::DEFAULT_PG_IMAGE)]
    pub pg_image: String,

    /// Lock-server replicas. 1: one lock-server on SQLite behind the delay
    /// proxy. 2 or more: replicas on PostgreSQL (--pg-url, a fresh schema per
    /// run) with a leader lease of 1 s, under leader kill -9 and SIGSTOP,
    /// standby kill -9 and (with --pg-dir) PostgreSQL crash restarts, beside
    /// the worker faults; no proxy, so no delay or loss spikes.
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=9))]
    pub replicas: u32,

    /// The PostgreSQL replicated runs share (scripts/pg-test-cluster.sh
    /// start prints it); with --runtime docker, optional (default: a
    /// PostgreSQL container per run).
    #[arg(long, env = "FENCEPOST_TEST_PG_URL")]
    pub pg_url: Option<String>,

    /// That PostgreSQL's cluster directory (scripts/pg-test-cluster.sh's
    /// FENCEPOST_PG_DIR): with it, replicated runs also restart PostgreSQL
    /// in immediate mode; without it that fault is not drawn (and chaos.json says so).
    #[arg(long, env = "FENCEPOST_PG_DIR")]
    pub pg_dir: Option<PathBuf>,

    /// TEST: `no-fences` starts every rail-stub with both fences off,
    /// `early-expiry` every lock-server cutting its leases in half,
    /// `skip-epoch-fence` every replica writing without the epoch fence; the checker must then fail.
    #[arg(long, value_enum)]
    pub sabotage: Option<SabotageMode>,

    /// Lease (and session TTL) of every worker; rail timeouts scale with it (lease / 30 s).
    #[arg(long, default_value = "500ms", value_parser = parse_positive_duration)]
    pub ttl: Duration,

    /// Each run's measured window; default 3s, 6s with --replicas above 1
    /// (a leader failover takes about 1 s of it).
    #[arg(long, value_parser = parse_positive_duration)]
    pub duration: Option<Duration>,

    /// Worker processes per run.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(2..=16))]
    pub workers: u32,

    /// Payouts seeded per run (every worker works all of them).
    #[arg(long, default_value_t = 1500, value_parser = clap::value_parser!(u64).range(1..=100_000))]
    pub payouts: u64,

    /// lock.client.safety-margin of every worker, 0 <= m < 1.
    #[arg(long, default_value_t = 0.3, value_parser = parse_margin)]
    pub margin: f64,

    /// Results directory; default data/runs/<timestamp>-chaos/.
    #[arg(long)]
    pub out: Option<PathBuf>,

    /// The work each payout does while it holds its lock, in production
    /// time (scaled by --ttl / 30 s like the rail's timings): fixed:20s,
    /// uniform:5s..40s, lognormal:p50=20s,p99=60s (against a 30 s production
    /// lease, a share of payouts then outlive the lease and need renewals)
    /// [default: none].
    #[arg(long, value_name = "SPEC", value_parser = parse_latency)]
    pub hold: Option<LatencySpec>,

    /// Steps of one payout, 1..=100: K ledger payouts paid under one lock
    /// grant, each claimed, worked (hold / K), checked (D4) and submitted in
    /// turn, e.g. 3 [default: 1].
    #[arg(long, default_value_t = 1, value_name = "K", value_parser = clap::value_parser!(u32).range(1..=100))]
    pub steps: u32,

    /// Long holds, a preset: a 4 s lease (longer than a replicated
    /// takeover, leader lease 1 s plus grace), each payout holding its lock
    /// for uniform:24s..40s of production time (3.2–5.3 s here, renewed by
    /// the heartbeat) in 2 steps, 6 payouts for 5 worker processes (they
    /// contend for each), a 10 s window (--duration overrides it), the
    /// freeze in the critical section at a worker's first check and another
    /// worker's freeze between two legs, each for 1.8–2.1 leases: holders
    /// keep their grants across leader faults, the frozen holder's stale
    /// submit can land while its successor's claim stands (fence 2), and a
    /// stale claim of the next leg after the successor's (fence 1). Not with --ttl, --hold, --steps, --payouts or --workers.
    /// E.g. --replicas 3 --long-holds [default: off].
    #[arg(long, conflicts_with_all = ["ttl", "hold", "steps", "payouts", "workers"])]
    pub long_holds: bool,

    /// The lock service: fencepost (the lock-server) or redis (one
    /// redis-server from PATH behind the delay proxy, `SET NX PX` with a
    /// per-key counter as the fencing token, the rail's fences on). On
    /// redis the lock-server faults are redis-server's: SIGSTOP, and kill -9
    /// with a restart on the same port and directory; not with --replicas,
    /// --runtime docker or a lock-server --sabotage.
    #[arg(long, default_value = "fencepost")]
    pub backend: bench_driver::backend::BackendKind,

    /// With --backend redis: what the redis-server keeps on disk across its
    /// kill -9 and restart. none: nothing (the restart forgets every lock
    /// key and fencing counter); everysec: an append-only file fsynced once
    /// a second; always: fsynced before every reply [default: everysec].
    #[arg(long, value_name = "MODE")]
    pub redis_persistence: Option<bench_driver::backend::redis::RedisPersistence>,
}

/// A latency spec (`--hold`): fixed:…, uniform:…..…, lognormal:p50=…,p99=….
fn parse_latency(text: &str) -> Result<LatencySpec, String> {
    text.parse::<LatencySpec>().map_err(|e| e.to_string())
}

impl ChaosArgs {
    /// The inputs these flags give the experiment.
    pub fn to_inputs(&self) -> ChaosInputs {
        ChaosInputs {
            runs: self.runs,
            seed: self.seed,
            only_run: self.only_run,
            runtime: self.runtime,
            lock_image: self.lock_image.clone(),
            rail_image: self.rail_image.clone(),
            pg_image: self.pg_image.clone(),
            replicas: self.replicas,
            pg_url: self.pg_url.clone(),
            pg_dir: self.pg_dir.clone(),
            sabotage: self.sabotage,
            ttl: self.ttl,
            duration: self.duration,
            workers: self.workers,
            payouts: self.payouts,
            margin: self.margin,
            out: self.out.clone(),
            hold: self.hold,
            steps: self.steps,
            long_holds: self.long_holds,
            backend: self.backend,
            redis_persistence: self.redis_persistence,
        }
        .with_long_holds(self.long_holds)
    }
}

/// `experiments worker` (internal): one payout worker in this process
/// (`bench_driver::worker_process::child`).
#[derive(Debug, Args, Clone)]
pub struct WorkerArgs {
    /// Everything the worker is given, as one line of JSON (written by the
    /// parent, `bench_driver::worker_process::WorkerSpec`).
    #[arg(long, value_parser = parse_spec)]
    pub spec: WorkerSpec,
}

/// A refused flag value; clap prints it after the flag's name and exits 2.
#[derive(Debug, thiserror::Error)]
pub enum ArgError {
    /// Not a duration with a unit.
    #[error(transparent)]
    Duration(#[from] fencepost_api::duration::DurationParseError),
    /// A duration of zero where a positive one is needed.
    #[error("must be greater than zero")]
    Zero,
    /// Not a number.
    #[error("{0:?} is not a number")]
    NotANumber(String),
    /// A number outside its range; the text says which range.
    #[error("{0}")]
    OutOfRange(&'static str),
    /// One element of a list is outside its range.
    #[error("{0:?} must be between 0 and 100")]
    FractionOutOfRange(String),
    /// An empty list.
    #[error("give at least one fraction")]
    Empty,
    /// A bad CPU quota.
    #[error(transparent)]
    Quota(#[from] QuotaError),
    /// A worker spec that does not parse: the parent and the worker are of
    /// different builds; rebuild.
    #[error(transparent)]
    Spec(#[from] serde_json::Error),
}

/// A worker's `--spec`.
pub fn parse_spec(text: &str) -> Result<WorkerSpec, ArgError> {
    Ok(text.parse()?)
}

/// A duration like `1s`, `250ms`.
pub fn parse_duration_flag(text: &str) -> Result<Duration, ArgError> {
    Ok(fencepost_api::parse_duration(text)?)
}

/// A duration above zero.
pub fn parse_positive_duration(text: &str) -> Result<Duration, ArgError> {
    let d = parse_duration_flag(text)?;
    if d.is_zero() {
        return Err(ArgError::Zero);
    }
    Ok(d)
}

fn number(text: &str) -> Result<f64, ArgError> {
    text.trim()
        .parse()
        .map_err(|_| ArgError::NotANumber(text.to_string()))
}

/// A margin in `[0, 1)`.
pub fn parse_margin(text: &str) -> Result<f64, ArgError> {
    let m = number(text)?;
    if !(0.0..1.0).contains(&m) {
        return Err(ArgError::OutOfRange("must satisfy 0 <= margin < 1"));
    }
    Ok(m)
}

/// A factor `>= 1` (a pause must outlast the lease).
pub fn parse_factor(text: &str) -> Result<f64, ArgError> {
    let f = number(text)?;
    if !f.is_finite() || !(1.0..=100.0).contains(&f) {
        return Err(ArgError::OutOfRange(
            "must be between 1 and 100 (a pause must outlast the lease)",
        ));
    }
    Ok(f)
}

/// `0,0.5,1` → the fractions, each finite and `>= 0`; at least one.
pub fn parse_fractions(text: &str) -> Result<Fractions, ArgError> {
    let mut out = Vec::new();
    for part in text.split(',') {
        let f = number(part)?;
        if !f.is_finite() || !(0.0..=100.0).contains(&f) {
            return Err(ArgError::FractionOutOfRange(part.to_string()));
        }
        out.push(f);
    }
    if out.is_empty() {
        return Err(ArgError::Empty);
    }
    Ok(Fractions(out))
}

/// A CPU quota (see [`QuotaSpec::parse`]).
pub fn parse_quota(text: &str) -> Result<QuotaSpec, ArgError> {
    Ok(QuotaSpec::parse(text)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn margins_outside_zero_one_are_refused() {
        assert!(parse_margin("0.3").is_ok());
        assert!(parse_margin("1").is_err());
        assert!(parse_margin("-0.1").is_err());
        assert!(parse_margin("abc").is_err());
    }

    #[test]
    fn fractions_parse_and_reject_negatives() {
        assert_eq!(
            parse_fractions("0, 1.5").unwrap(),
            Fractions(vec![0.0, 1.5])
        );
        assert!(parse_fractions("-1").is_err());
        assert!(parse_fractions("x").is_err());
    }
}
