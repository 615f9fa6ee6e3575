//! What a chaos run is configured with ([`ChaosConfig`]) and what it found
//! ([`RunResult`] per run, [`ChaosResult`] in all: `chaos.json`).

use std::collections::BTreeMap;
use std::time::Duration;

use bench_driver::backend::BackendKind;
use bench_driver::backend::redis::RedisPersistence;
use bench_driver::cell::plan::PlanInputs;
use bench_driver::cell::{CellPlan, Runtime};
use bench_history::check::HistoryCheck;
use fencepost_api::latency::{LatencySpec, LatencySpecError};
use serde::{Deserialize, Serialize};

use crate::chaos::drive::Applied;
use crate::chaos::schedule::{FaultKind, RunSchedule, ScheduleParams};

/// The R7 prefix of every run's backlog.
pub const PAYOUT_PREFIX: &str = "chaos";
/// The rail's latency: short and bounded, below the scaled read timeout.
pub const RAIL_LATENCY: &str = "uniform:1ms..5ms";

/// `--long-holds`: every worker's lease (and session TTL). A replicated
/// takeover takes the leader lease (1 s) plus grace; a holder's client
/// deadline is between 0.35 and 0.7 leases ahead of it (the heartbeat
/// renews at 2.5 periods left), 1.4–2.8 s here, so it outlives a takeover.
pub const LONG_HOLDS_TTL: Duration = Duration::from_secs(4);
/// `--long-holds`: each payout's work under its lock, in production time
/// (× 4 s / 30 s: 3.2–5.3 s here, several renewals each).
pub const LONG_HOLDS_HOLD: &str = "uniform:24s..40s";
/// `--long-holds`: the legs of one payout.
pub const LONG_HOLDS_STEPS: u32 = 2;
/// `--long-holds`: the payouts of a run: few, so that the workers contend
/// for each (a held payout's key is asked for by the others while it is
/// held, and taken over when its holder freezes).
pub const LONG_HOLDS_PAYOUTS: u64 = 6;
/// `--long-holds`: worker processes: with one or two frozen in their
/// critical sections, others still hold (and renew) across a leader fault
/// and contend for the frozen ones' keys.
pub const LONG_HOLDS_WORKERS: u32 = 5;
/// `--long-holds`: each run's window unless `--duration` is given.
pub const LONG_HOLDS_WINDOW: Duration = Duration::from_secs(10);
/// `experiments chaos --runtime`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ChaosRuntime {
    /// Child processes, the lock-server on SQLite.
    Process,
    /// Containers on a private network, on PostgreSQL.
    Docker,
}

/// `experiments chaos --sabotage`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum SabotageMode {
    /// The rail-stub's fences off (`rail-stub --sabotage no-fences`).
    NoFences,
    /// Every grant ends on the lock-server at half the lease it answers
    /// (`lock-server --sabotage early-expiry`): the lock-level rule must fire.
    EarlyExpiry,
    /// Replicas write without the epoch fence after a takeover
    /// (`lock-server --sabotage skip-epoch-fence`; needs --replicas above 1).
    SkipEpochFence,
}

/// What `experiments chaos` is asked (the command line's flags; see
/// `crate::cli::ChaosArgs` for each one's meaning and default).
#[derive(Clone, Debug)]
pub struct ChaosInputs {
    /// How many runs.
    pub runs: u32,
    /// Base seed; random if absent.
    pub seed: Option<u64>,
    /// Replay one run alone.
    pub only_run: Option<u32>,
    /// Where the services run.
    pub runtime: ChaosRuntime,
    /// The lock-server image (docker).
    pub lock_image: String,
    /// The rail-stub image (docker).
    pub rail_image: String,
    /// The PostgreSQL image (docker, without `pg_url`).
    pub pg_image: String,
    /// Lock-server replicas.
    pub replicas: u32,
    /// The PostgreSQL replicated runs share.
    pub pg_url: Option<String>,
    /// That PostgreSQL's cluster directory (its crash restarts).
    pub pg_dir: Option<std::path::PathBuf>,
    /// The checker must then fail.
    pub sabotage: Option<SabotageMode>,
    /// Lease (and session TTL) of every worker.
    pub ttl: Duration,
    /// Each run's measured window; default 3 s, 6 s with replicas.
    pub duration: Option<Duration>,
    /// Worker processes per run.
    pub workers: u32,
    /// Payouts seeded per run.
    pub payouts: u64,
    /// The client margin.
    pub margin: f64,
    /// Results directory.
    pub out: Option<std::path::PathBuf>,
    /// A payout's work under its lock, in production time (`--hold`).
    pub hold: Option<LatencySpec>,
    /// The legs of one payout (`--steps`).
    pub steps: u32,
    /// `--long-holds`: the preset's lease, hold, steps and window (already
    /// in the fields above) and its freeze in the critical section.
    pub long_holds: bool,
    /// The lock service: fencepost's lock-server, or one redis-server.
    pub backend: BackendKind,
    /// `--redis-persistence`, when given (only with the redis backend).
    pub redis_persistence: Option<RedisPersistence>,
}

/// The resolved configuration (manifest, `chaos.json`).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ChaosConfig {
    /// Runs.
    pub runs: u32,
    /// The base seed; run `i` uses `seed + i`.
    pub seed: u64,
    /// Only this run, if given.
    pub only_run: Option<u32>,
    /// `process` or `docker`.
    pub runtime: String,
    /// Docker runtime: the lock-server, rail-stub and (without `--pg-url`)
    /// PostgreSQL images.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub images: Option<Images>,
    /// Lock-server replicas (more than 1: on PostgreSQL).
    pub replicas: u32,
    /// Replicated runs: the replicas' leader lease, ms.
    #[serde(default)]
    pub leader_lease_ms: u64,
    /// Whether PostgreSQL restarts are drawn: replicated runs with
    /// `--pg-dir`, and docker runs on a PostgreSQL container of their own.
    #[serde(default)]
    pub pg_restart: bool,
    /// Lease per acquire, ms (the session TTL too).
    pub ttl_ms: u64,
    /// Each run's window, ms.
    pub duration_ms: u64,
    /// Worker processes per run.
    pub workers: u32,
    /// Payouts seeded per run.
    pub payouts: u64,
    /// The client margin.
    pub margin: f64,
    /// The rail's latency.
    pub rail_latency: String,
    /// R3 read timeout, ms (5 s scaled).
    pub rail_read_timeout_ms: u64,
    /// What D4 requires before a submit, ms.
    pub worst_case_hop_ms: u64,
    /// The acquire budget, ms (lease / 4).
    pub acquire_budget_ms: u64,
    /// `no-fences` when the rail-stub is sabotaged.
    pub sabotage: Option<String>,
    /// Faults drawn per run besides the freeze inside the critical section.
    pub extra_faults: (u64, u64),
    /// A payout's work under its lock, in production time (`--hold`); absent: none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold: Option<String>,
    /// The legs of one payout (`--steps`); 1 in a file from before it.
    #[serde(default = "one_step")]
    pub steps: u32,
    /// `--long-holds`: the freeze in the critical section comes at a
    /// worker's first check, a second one between two legs, each for
    /// 1.8–2.1 leases.
    #[serde(default)]
    pub long_holds: bool,
    /// The lock service: `fencepost` (its lock-server) or `redis` (one
    /// redis-server, a per-key counter as the fencing token, the rail's
    /// fences on); absent in a file from before it: fencepost.
    #[serde(default)]
    pub backend: BackendKind,
    /// The redis-server's persistence (`none`, `everysec`, `always`) on the
    /// redis backend; absent on fencepost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub redis_persistence: Option<RedisPersistence>,
}

/// A `chaos.json` written before multi-step payouts: one step.
fn one_step() -> u32 {
    1
}

/// The images of a docker-runtime chaos.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Images {
    /// The lock-server image.
    pub lock: String,
    /// The rail-stub image.
    pub rail: String,
    /// The PostgreSQL image (each run its own container), when no `--pg-url` was given.
    pub postgres: Option<String>,
}

impl ChaosInputs {
    /// With `on`, the `--long-holds` preset: its lease, hold and steps, and
    /// its window unless one was given.
    pub fn with_long_holds(mut self, on: bool) -> Self {
        if on {
            self.long_holds = true;
            self.ttl = LONG_HOLDS_TTL;
            self.hold = LONG_HOLDS_HOLD.parse().ok();
            self.steps = LONG_HOLDS_STEPS;
            self.payouts = LONG_HOLDS_PAYOUTS;
            self.workers = LONG_HOLDS_WORKERS;
            self.duration = self.duration.or(Some(LONG_HOLDS_WINDOW));
        }
        self
    }
}

impl ChaosConfig {
    /// Resolves `args` with `seed`.
    pub fn resolve(args: &ChaosInputs, seed: u64) -> Self {
        let t = timings(args.ttl, args.margin);
        ChaosConfig {
            runs: args.runs,
            seed,
            only_run: args.only_run,
            runtime: match args.runtime {
                ChaosRuntime::Process => "process".into(),
                ChaosRuntime::Docker => "docker".into(),
            },
            images: (args.runtime == ChaosRuntime::Docker).then(|| Images {
                lock: args.lock_image.clone(),
                rail: args.rail_image.clone(),
                postgres: args.pg_url.is_none().then(|| args.pg_image.clone()),
            }),
            replicas: args.replicas,
            leader_lease_ms: bench_driver::cell::stack::REPLICA_LEADER_LEASE.as_millis() as u64,
            pg_restart: match args.runtime {
                ChaosRuntime::Process => args.replicas > 1 && args.pg_dir.is_some(),
                ChaosRuntime::Docker => args.pg_url.is_none() || args.pg_dir.is_some(),
            },
            ttl_ms: args.ttl.as_millis() as u64,
            duration_ms: args
                .duration
                .unwrap_or(Duration::from_secs(if args.replicas > 1 { 6 } else { 3 }))
                .as_millis() as u64,
            workers: args.workers,
            payouts: args.payouts,
            margin: args.margin,
            rail_latency: RAIL_LATENCY.into(),
            rail_read_timeout_ms: t.rail_read_timeout.as_millis() as u64,
            worst_case_hop_ms: t.worst_case_hop.as_millis() as u64,
            acquire_budget_ms: t.acquire_budget.as_millis() as u64,
            sabotage: args.sabotage.map(|s| s.as_str().to_string()),
            extra_faults: (1, 3),
            hold: args.hold.map(|h| h.to_string()),
            steps: args.steps.max(1),
            long_holds: args.long_holds,
            backend: args.backend,
            redis_persistence: (args.backend == BackendKind::Redis)
                .then(|| args.redis_persistence.unwrap_or_default()),
        }
    }

    /// Where a run's services come from, given its lock store (a PostgreSQL
    /// schema) `store`: one redis-server (restarted on the same port
    /// and directory), containers, or child processes.
    pub fn runtime(&self, store: Option<String>) -> Runtime {
        if let Some(persistence) = self.redis_persistence {
            return Runtime::Redis {
                urls: Vec::new(),
                instances: 1,
                persistence,
                redlock: false,
            };
        }
        match &self.images {
            Some(images) => Runtime::Docker {
                pg_url: store,
                lock_image: images.lock.clone(),
                rail_image: images.rail.clone(),
                pg_image: images.postgres.clone().unwrap_or_default(),
                replicas: self.replicas,
            },
            None => Runtime::Process {
                store,
                replicas: self.replicas,
            },
        }
    }

    fn lease(&self) -> Duration {
        Duration::from_millis(self.ttl_ms)
    }

    /// Whether the runs are replicated (PostgreSQL, no proxy).
    pub fn replicated(&self) -> bool {
        self.replicas > 1
    }

    /// Whether the lock-servers store in PostgreSQL (replicas, or containers).
    pub fn on_postgres(&self) -> bool {
        self.replicated() || self.runtime == "docker"
    }

    /// The fault kinds the runs draw from.
    pub fn kinds(&self) -> Vec<FaultKind> {
        if !self.replicated() {
            let mut kinds = FaultKind::PROCESS.to_vec();
            if self.pg_restart {
                // One lock-server on a PostgreSQL container of the run's own.
                kinds.push(FaultKind::PostgresRestart);
            }
            return kinds;
        }
        FaultKind::REPLICATED
            .into_iter()
            .filter(|k| *k != FaultKind::PostgresRestart || self.pg_restart)
            .collect()
    }

    /// The schedule parameters of every run.
    pub fn params(&self) -> ScheduleParams {
        ScheduleParams {
            lease_ms: self.ttl_ms,
            duration_ms: self.duration_ms,
            workers: u64::from(self.workers),
            kinds: self.kinds(),
            extra: self.extra_faults.0..=self.extra_faults.1,
            leader_lease_ms: self.leader_lease_ms,
            replicas: u64::from(self.replicas),
            long_holds: self.long_holds,
        }
    }

    /// The cell of run `run` with seed `seed`: the driver's plan, its rail
    /// timings in whole ms (as `chaos.json` records them), the rail's own
    /// short latency, no warm-up.
    pub fn plan(&self, run: u32, seed: u64) -> Result<CellPlan, LatencySpecError> {
        let lease = self.lease();
        let mut plan = timings(lease, self.margin);
        plan.id = format!("chaos-run-{run}");
        plan.rail_latency = self.rail_latency.parse()?;
        plan.workers = self.workers;
        plan.duration = Duration::from_millis(self.duration_ms);
        plan.payouts = self.payouts;
        plan.payout_prefix = PAYOUT_PREFIX.into();
        plan.seed = seed;
        // One lock-server: a zero-delay proxy (the delay and loss spikes,
        // and the restart's new port). Replicas: none (the workers get
        // every URL, and a replica restarts on its own port).
        plan.conditions.net_delay =
            (!self.replicated()).then_some(LatencySpec::Fixed(Duration::ZERO));
        // Every operation of the run is checked, from the first one.
        plan.warmup = Duration::ZERO;
        let hold = self.hold.as_deref().map(str::parse).transpose()?;
        let plan = plan.with_hold(hold, self.steps);
        Ok(plan.in_run(&format!("chaos-{}", self.seed)))
    }
}

/// The driver's plan of a chaos cell at `lease` (the session TTL too) and
/// `margin`, its rail timings and acquire budget in whole ms.
fn timings(lease: Duration, margin: f64) -> CellPlan {
    CellPlan::new(PlanInputs::new("chaos", lease, lease, margin)).whole_ms_timings()
}

/// One run, in `chaos.json`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunResult {
    /// Its index.
    pub run: u32,
    /// Its seed.
    pub seed: u64,
    /// The drawn schedule (replays with `--only-run`).
    pub schedule: RunSchedule,
    /// The faults as applied (freezes: as the workers recorded them).
    pub applied: Vec<Applied>,
    /// Pairs of applied faults that overlapped in time.
    pub overlaps: u64,
    /// Payouts paid (ledger).
    pub paid: u64,
    /// Fence refusals (ledger counters, both fences).
    pub fenced_out: u64,
    /// Worker processes that did not report (killed, or late).
    pub workers_unreported: u32,
    /// The checker's counts and violations.
    pub check: HistoryCheck,
    /// How often each guarded situation occurred ([`super::coverage`]).
    #[serde(default)]
    pub coverage: super::coverage::Coverage,
    /// Epochs two replicas both took, from their logs. Must be empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub epoch_conflicts: Vec<String>,
    /// Write transactions a deposed leader committed after another replica
    /// took over, from the store's epoch breach audit (`fp_epoch_breaches`). Must be empty.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub epoch_breaches: Vec<String>,
    /// Seconds the run took (start of the stack to its stop).
    pub elapsed_s: f64,
}

/// One guarded situation over all runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SituationCount {
    /// Runs in which it occurred at least once.
    pub runs: u32,
    /// Times it occurred, all runs.
    pub occurrences: u64,
}

/// `chaos.json`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ChaosResult {
    /// Runs done.
    pub runs: u32,
    /// Faults applied, per kind.
    pub faults: BTreeMap<String, u64>,
    /// Fault kinds exercised at least once.
    pub fault_kinds_exercised: u32,
    /// Pairs of faults that overlapped in time, all runs.
    pub overlaps: u64,
    /// Operations in the histories.
    pub operations_checked: u64,
    /// Operations without a completion (killed workers).
    pub indeterminate: u64,
    /// Payouts paid more than once. Must be 0.
    pub paid_twice: u64,
    /// Payouts paid by a stale token. Must be 0.
    pub stale_paid: u64,
    /// Grants whose token did not rise. Must be 0.
    pub token_regressions: u64,
    /// Belief overlaps, unreported trigger-4 fence-outs, overlapping
    /// grants, late, shortening and early-refused renewals (rules 4–9). Must be 0.
    pub history_violations: u64,
    /// Epochs two replicas both took (their logs' `leader_takeover`). Must be 0.
    #[serde(default)]
    pub epoch_conflicts: u64,
    /// Committed writes of a deposed epoch (the store's breach audit), all runs.
    #[serde(default)]
    pub epoch_breaches: u64,
    /// Per guarded situation ([`super::coverage::Situation`]): in how many
    /// runs it occurred, and how often in all.
    #[serde(default)]
    pub coverage: BTreeMap<String, SituationCount>,
    /// Of those, grants the lock service acknowledged while a lower token's
    /// grant was live (rule 6, lock-level). Must be 0.
    #[serde(default)]
    pub grant_overlaps: u64,
    /// Of those, renewals acknowledged after a higher token's grant of the
    /// key (rule 7). Must be 0.
    #[serde(default)]
    pub late_renewals: u64,
    /// Of those, acknowledged renewals that shortened a promised end (rule 8). Must be 0.
    #[serde(default)]
    pub shortened_renewals: u64,
    /// Of those, renewals refused while their grant was live in its belief (rule 9). Must be 0.
    #[serde(default)]
    pub early_refusals: u64,
    /// Renewals acknowledged, all runs (the workers record each L5).
    #[serde(default)]
    pub renewals_acknowledged: u64,
    /// Fence-outs of submits the client believed held (trigger-4 events; not violations).
    pub trigger4_events: u64,
    /// Payouts paid, all runs.
    pub paid: u64,
    /// Fence refusals, all runs.
    pub fenced_out: u64,
    /// Wall seconds of the whole command.
    pub elapsed_s: f64,
    /// The configuration.
    pub config: ChaosConfig,
    /// Per run.
    pub per_run: Vec<RunResult>,
}

impl ChaosResult {
    /// Every violation count summed.
    pub fn violations(&self) -> u64 {
        self.paid_twice
            + self.stale_paid
            + self.token_regressions
            + self.history_violations
            + self.epoch_conflicts
            + self.epoch_breaches
    }

    pub(crate) fn add(&mut self, r: RunResult) {
        for a in &r.applied {
            *self.faults.entry(a.kind.as_str().to_string()).or_default() += 1;
        }
        self.fault_kinds_exercised = self.faults.values().filter(|n| **n > 0).count() as u32;
        self.overlaps += r.overlaps;
        let c = &r.check;
        self.operations_checked += c.operations_checked;
        self.indeterminate += c.indeterminate;
        self.paid_twice += c.paid_twice;
        self.stale_paid += c.stale_paid;
        self.token_regressions += c.token_regressions;
        self.history_violations += c.history_violations();
        self.grant_overlaps += c.grant_overlaps;
        self.late_renewals += c.late_renewals;
        self.shortened_renewals += c.shortened_renewals;
        self.early_refusals += c.early_refusals;
        self.renewals_acknowledged += c.renewals_acknowledged;
        self.epoch_conflicts += r.epoch_conflicts.len() as u64;
        self.epoch_breaches += r.epoch_breaches.len() as u64;
        for s in super::coverage::Situation::ALL {
            let n = r.coverage.get(s.as_str()).copied().unwrap_or(0);
            let e = self.coverage.entry(s.as_str().to_string()).or_default();
            e.occurrences += n;
            e.runs += u32::from(n > 0);
        }
        self.trigger4_events += c.believed_fence_outs;
        self.paid += r.paid;
        self.fenced_out += r.fenced_out;
        self.runs += 1;
        self.per_run.push(r);
    }
}
