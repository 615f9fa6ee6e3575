//! What one cell is ([`CellPlan`]): its identity, its numbers after the time
//! base's scaling, its load, its seed and the faults it injects
//! ([`Conditions`]), and what follows from them (the workers' environment,
//! the services' spec, the default warm-up).

use std::time::Duration;

use bench_core::grid::{PauseSpec, PolicySpec};
use bench_core::timebase::{PRODUCTION_RAIL_READ_TIMEOUT, TimeBase};
use fencepost_api::latency::LatencySpec;
use fencepost_sdk::MarginPolicy;
use fencepost_sdk::lease::{HEARTBEAT_DIVISOR, RttSummary, heartbeat_period, ppm_nearest};

use crate::cell::faults::Fault;
use crate::cell::stack::{Runtime, Stack, StackSpec};
use crate::worker::{ClaimHook, WorkerEnv};

/// The default warm-up, in heartbeat periods of the cell (connection set-up,
/// the first heartbeats and renewals): [`default_warmup`].
pub const WARMUP_PERIODS: u32 = 3;

/// [`WARMUP_PERIODS`] heartbeat periods of a cell with this session TTL,
/// lease and margin (the SDK's `heartbeat_period`, the margin in ppm by the
/// SDK's own `ppm_nearest`) at the default divisor: one usable window,
/// whatever the cell's divisor, so cells that differ only in their divisor
/// exclude the same warm-up.
pub fn default_warmup(session_ttl: Duration, lease: Duration, margin: f64) -> Duration {
    let ms = |d: Duration| u64::try_from(d.as_millis()).unwrap_or(u64::MAX);
    let ppm = ppm_nearest(margin);
    heartbeat_period(ms(session_ttl), Some(ms(lease)), ppm, HEARTBEAT_DIVISOR) * WARMUP_PERIODS
}

/// What a cell is made from ([`CellPlan::new`]): its identity, its lease,
/// session and margin, the time base, the production numbers the time base
/// scales, and its load. Everything else of a plan has a default that the
/// caller changes after construction where it needs another.
#[derive(Clone, Debug)]
pub struct PlanInputs {
    /// The cell id.
    pub id: String,
    /// The lease every acquire asks for.
    pub lease: Duration,
    /// The session TTL (already resolved: scaled, or on etcd whole seconds).
    pub session_ttl: Duration,
    /// The margin (for adaptive: its ceiling).
    pub margin: f64,
    /// Fixed or adaptive margin.
    pub policy: PolicySpec,
    /// The time base the production numbers below are scaled with.
    pub time_base: TimeBase,
    /// The rail's latency in production time.
    pub rail_latency: LatencySpec,
    /// `rail.read.timeout` in production time.
    pub rail_read_timeout: Duration,
    /// Concurrent workers.
    pub workers: u32,
    /// How long the steady load runs.
    pub duration: Duration,
    /// How many payouts the backlog holds.
    pub payouts: u64,
    /// R7's id prefix of the backlog.
    pub payout_prefix: String,
    /// The cell's seed.
    pub seed: u64,
}

impl PlanInputs {
    /// Inputs with production's rail read timeout and this rail latency,
    /// fixed margin, the scaled time base of `lease`.
    pub fn new(id: impl Into<String>, lease: Duration, session_ttl: Duration, margin: f64) -> Self {
        PlanInputs {
            id: id.into(),
            lease,
            session_ttl,
            margin,
            policy: PolicySpec::Fixed,
            time_base: TimeBase::for_lease(lease, true),
            rail_latency: LatencySpec::Fixed(Duration::ZERO),
            rail_read_timeout: PRODUCTION_RAIL_READ_TIMEOUT,
            workers: 1,
            duration: Duration::ZERO,
            payouts: 0,
            payout_prefix: String::new(),
            seed: 0,
        }
    }
}

/// How long past its grace the driver waits for the last ledger read to matter:
/// the workers finish the payout in hand within one acquire and one rail hop.
const JOIN_SLACK: Duration = Duration::from_secs(5);

/// Faults, delays and the transport of a cell (configuration, recorded in its row).
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Conditions {
    /// Extra round-trip delay between workers and lock-server (the delay proxy).
    pub net_delay: Option<LatencySpec>,
    /// SIGSTOP/SIGCONT the lock-server on this schedule.
    pub server_pause: Option<PauseSpec>,
    /// Workers reach the lock-server over TLS (`bench run --tls`): the
    /// stack makes a CA and a server certificate for the cell.
    pub tls: bool,
}

impl Conditions {
    /// The fault schedules the stack runs for these conditions.
    pub fn faults(&self) -> Vec<Fault> {
        self.server_pause
            .map(Fault::ServerPause)
            .into_iter()
            .collect()
    }
}

/// How a cell gathers its heartbeat samples: idle sessions beside the
/// workers, and the sequential stop. The default is none of either: the
/// window runs its duration.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sampling {
    /// Idle heartbeating sessions beside the workers (`--sessions`,
    /// [`crate::cell::Pool::open_idle_sessions`]).
    pub sessions: u32,
    /// `--min-samples K`: after its duration, the window runs on until the
    /// corrected histogram holds K samples, up to [`Sampling::max_duration`].
    pub min_samples: Option<u64>,
    /// `--max-duration`: the longest a window with a `min_samples` runs.
    pub max_duration: Option<Duration>,
}

/// Why a cell's measured window ended (the `stopped_by` column).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum StoppedBy {
    /// It ran its duration (no `--min-samples`).
    #[default]
    Duration,
    /// Its corrected histogram reached `--min-samples`.
    MinSamples,
    /// `--max-duration` came first: the samples are fewer than asked.
    MaxDuration,
    /// The schedule ended it (an experiment's rounds).
    Schedule,
    /// SIGINT or SIGTERM closed it early: the row holds what was measured
    /// up to then, a partial cell (`--resume` measures it again).
    Interrupted,
}

impl std::fmt::Display for StoppedBy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            StoppedBy::Duration => "duration",
            StoppedBy::MinSamples => "min_samples",
            StoppedBy::MaxDuration => "max_duration",
            StoppedBy::Schedule => "schedule",
            StoppedBy::Interrupted => "interrupted",
        })
    }
}

/// Everything one cell is: its identity, the numbers after the time-base
/// scaling, its load and its seed. Every field of a results row that is
/// configuration comes from here.
#[derive(Clone, Debug)]
pub struct CellPlan {
    /// The cell id (file names, `--resume`), e.g. `ttl=1s_margin=0.30`.
    pub id: String,
    /// The run (sweep, experiment) the cell belongs to.
    pub run_id: String,
    /// The lease every acquire asks for.
    pub lease: Duration,
    /// The cell's margin (for adaptive: its ceiling, used until warmed up).
    pub margin: f64,
    /// Fixed or adaptive margin.
    pub policy: PolicySpec,
    /// The repetition index of the cell (0 outside `--repeat`; the `repeat` column).
    pub repeat: u32,
    /// The session TTL.
    pub session_ttl: Duration,
    /// The heartbeat divisor k of every session of the cell (workers' and
    /// idle ones): heartbeats every usable window / k.
    pub heartbeat_divisor: u32,
    /// The time base the numbers below were scaled with.
    pub time_base: TimeBase,
    /// The rail's latency (scaled).
    pub rail_latency: LatencySpec,
    /// `rail.read.timeout` (scaled).
    pub rail_read_timeout: Duration,
    /// `(rail.read.timeout + 2 s)` scaled: what D4 requires before submitting.
    pub worst_case_hop: Duration,
    /// How long one acquire may wait for a held key.
    pub acquire_budget: Duration,
    /// Whether workers run `check_still_held` + `ensure_time_for` before submitting.
    pub client_check: bool,
    /// Concurrent workers.
    pub workers: u32,
    /// How long the steady load runs.
    pub duration: Duration,
    /// How many payouts the steady load seeds (R7).
    pub payouts: u64,
    /// R7's id prefix of the backlog.
    pub payout_prefix: String,
    /// The cell's seed: rail latency, proxy, workers (`seed + idx`), schedules.
    pub seed: u64,
    /// Faults and delays injected.
    pub conditions: Conditions,
    /// Run before the measured window opens and excluded from every figure.
    pub warmup: Duration,
    /// The CPU quota the workers run under when the cell is one of a throttled
    /// vs unthrottled pair (the throttle experiment): `"none"` for the
    /// unthrottled run, the quota for the other; `None` outside a pair.
    pub cpu_quota: Option<String>,
    /// Idle sessions and the sequential stop ([`Sampling`]).
    pub sampling: Sampling,
    /// How long a payout's work holds the lock (scaled; `--hold`), drawn
    /// per attempt by each worker's seeded RNG; `None`: no work.
    pub hold: Option<LatencySpec>,
    /// The steps of one logical payout (`--steps`, ≥ 1): each a ledger
    /// payout of its own, all under one lock grant.
    pub steps: u32,
}

impl CellPlan {
    /// The one constructor of a plan: the time base's scaled timings are
    /// derived here, once — the rail's latency and read timeout, D4's worst
    /// hop, the acquire budget (lease / 4) — and the default warm-up
    /// ([`default_warmup`]). The defaults: run id empty ([`CellPlan::in_run`]),
    /// repeat 0, the SDK's default heartbeat divisor, client check on, no
    /// faults, no CPU quota, no sampling.
    pub fn new(i: PlanInputs) -> Self {
        let tb = i.time_base;
        CellPlan {
            id: i.id,
            run_id: String::new(),
            lease: i.lease,
            margin: i.margin,
            policy: i.policy,
            repeat: 0,
            session_ttl: i.session_ttl,
            heartbeat_divisor: HEARTBEAT_DIVISOR,
            time_base: tb,
            rail_latency: tb.latency(i.rail_latency),
            rail_read_timeout: tb.scale(i.rail_read_timeout),
            worst_case_hop: tb.worst_case_hop(i.rail_read_timeout),
            acquire_budget: i.lease / 4,
            client_check: true,
            workers: i.workers,
            duration: i.duration,
            payouts: i.payouts,
            payout_prefix: i.payout_prefix,
            seed: i.seed,
            conditions: Conditions::default(),
            warmup: default_warmup(i.session_ttl, i.lease, i.margin),
            cpu_quota: None,
            sampling: Sampling::default(),
            hold: None,
            steps: 1,
        }
    }

    /// The plan with payouts that do `hold` of work (production time, scaled
    /// here by the plan's time base like the rail's latency) in `steps` legs.
    pub fn with_hold(mut self, hold: Option<LatencySpec>, steps: u32) -> Self {
        self.hold = hold.map(|h| self.time_base.latency(h));
        self.steps = steps.max(1);
        self
    }

    /// The rail timings and the acquire budget cut to whole milliseconds:
    /// the pause and chaos experiments record them in ms in their result
    /// files and run exactly what they record.
    pub fn whole_ms_timings(mut self) -> Self {
        let ms = |d: Duration| Duration::from_millis(d.as_millis() as u64);
        self.rail_read_timeout = ms(self.rail_read_timeout);
        self.worst_case_hop = ms(self.worst_case_hop);
        self.acquire_budget = ms(self.acquire_budget).max(Duration::from_millis(1));
        self
    }

    /// The plan as a cell of run `run_id` (the results directory's name).
    pub fn in_run(mut self, run_id: &str) -> Self {
        self.run_id = run_id.to_string();
        self
    }

    /// The SDK margin policy of the cell's workers.
    pub fn margin_policy(&self) -> MarginPolicy {
        self.policy.margin_policy(self.margin)
    }

    /// What a worker of this cell needs, against `stack`'s services.
    pub fn worker_env(&self, stack: &Stack, on_claimed: Option<ClaimHook>) -> WorkerEnv {
        WorkerEnv {
            backend: stack.backend(),
            lock_url: stack.lock_url().to_string(),
            tls_ca: stack.tls_ca().map(Into::into),
            rail_url: stack.rail_url().to_string(),
            lease: self.lease,
            session_ttl: self.session_ttl,
            heartbeat_divisor: self.heartbeat_divisor,
            margin: self.margin_policy(),
            rail_read_timeout: self.rail_read_timeout,
            worst_case_hop: self.worst_case_hop,
            client_check: self.client_check,
            acquire_budget: self.acquire_budget,
            payout_prefix: self.payout_prefix.clone(),
            seed: self.seed,
            hold: self.hold,
            steps: self.steps,
            on_claimed,
            on_step: None,
            history: None,
            prometheus: None,
        }
    }

    /// One heartbeat period of a session of this cell that holds no lock
    /// (an idle session's): the SDK's period of the session TTL alone, at
    /// the cell's divisor, with the margin the SDK's own policy gives before
    /// it has seen any RTT ([`MarginPolicy::margin_ppm`]): a fixed policy's
    /// margin, or an adaptive policy's ceiling (its warm-up margin, which an
    /// idle session, renewing no lease, keeps until RTTs are recorded).
    pub fn session_heartbeat_period(&self) -> Duration {
        let ms = u64::try_from(self.session_ttl.as_millis()).unwrap_or(u64::MAX);
        let ppm = self
            .margin_policy()
            .margin_ppm(self.session_ttl, RttSummary::default());
        heartbeat_period(ms, None, ppm, self.heartbeat_divisor)
    }

    /// How long a worker may take to stop: one acquire and one rail hop per
    /// step, twice the hold's p99, plus slack.
    pub fn join_grace(&self) -> Duration {
        let hold = self.hold.map_or(Duration::ZERO, |h| h.p99() * 2);
        self.lease + self.rail_read_timeout * self.steps.max(1) + hold + JOIN_SLACK
    }

    /// The services this cell needs, from `runtime`.
    pub fn stack_spec(&self, runtime: &Runtime) -> StackSpec {
        StackSpec {
            runtime: runtime.clone(),
            lease: self.lease,
            session_ttl: self.session_ttl,
            rail_latency: self.rail_latency,
            seed: self.seed,
            net_delay: self.conditions.net_delay,
            faults: self.conditions.faults(),
            rail_args: Vec::new(),
            lock_args: Vec::new(),
            db_relays: false,
            tls: self.conditions.tls,
        }
    }
}
