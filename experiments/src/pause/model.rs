//! What the pause experiment is configured with and what it found: the
//! types of `pause.json` are `bench_core::results::pause` ([`PauseConfig`],
//! one [`PauseRecord`] per frozen holder, [`PauseResult`] in all), which the
//! ADR evidence reads too; here are what the experiment derives from them —
//! its configuration from its inputs ([`resolve`]), its services
//! ([`runtime`]), its cell ([`plan`]) and a record's freeze on the timeline.

use std::time::Duration;

use bench_core::backend::BackendKind;
use bench_driver::backend::etcd::session_ttl_on_etcd;
use bench_driver::cell::plan::PlanInputs;
use bench_driver::cell::{CellPlan, Runtime};
use fencepost_api::latency::LatencySpecError;

pub use bench_core::results::pause::{PauseConfig, PauseRecord, PauseResult};

use crate::timeline::Freeze;

/// The R7 prefix of the pause backlog.
pub const PAYOUT_PREFIX: &str = "pause";
/// The rail's latency: short and bounded, far below the scaled read timeout,
/// so no submit ever times out and turns into an unplanned retry.
pub const RAIL_LATENCY: &str = "uniform:1ms..5ms";
/// How long any single wait of the driver may take before the run fails.
pub(crate) const WAIT_LIMIT: Duration = Duration::from_secs(60);

/// What `experiments pause` is asked (the command line's flags, resolved).
#[derive(Clone, Debug)]
pub struct PauseInputs {
    /// Lease TTL of every acquire.
    pub ttl: Duration,
    /// Session TTL; `None`: the same as `ttl`.
    pub session_ttl: Option<Duration>,
    /// Rounds.
    pub pauses: u32,
    /// Other workers.
    pub workers: u32,
    /// Payouts per round.
    pub payouts_per_pause: u64,
    /// Minimum pause as a multiple of the lease.
    pub pause_factor: f64,
    /// Client margin.
    pub margin: f64,
    /// Whether the paused worker runs the client check.
    pub client_check: bool,
    /// The lock service.
    pub backend: BackendKind,
}

/// The cell of `lease`, `session_ttl` and `margin` with everything the pause
/// experiment runs differently: its rail timings in whole ms (as
/// `pause.json` records them), its own short rail latency, no warm-up.
fn base_plan(lease: Duration, session_ttl: Duration, margin: f64) -> CellPlan {
    CellPlan::new(PlanInputs::new("pause", lease, session_ttl, margin)).whole_ms_timings()
}

/// The configuration `pause.json` records, from `inputs` and `seed`.
pub fn resolve(inputs: &PauseInputs, seed: u64) -> PauseConfig {
    let session_ttl = inputs.session_ttl.unwrap_or(inputs.ttl);
    // On etcd the session is the etcd lease every key shares: whole seconds.
    let session_ttl = match inputs.backend {
        BackendKind::Etcd => session_ttl_on_etcd(inputs.ttl, session_ttl),
        BackendKind::Fencepost | BackendKind::Redis | BackendKind::Redlock => session_ttl,
    };
    let timings = base_plan(inputs.ttl, session_ttl, inputs.margin);
    let ms = |d: Duration| d.as_millis() as u64;
    PauseConfig {
        ttl_ms: ms(inputs.ttl),
        session_ttl_ms: ms(session_ttl),
        pauses: inputs.pauses,
        workers: inputs.workers,
        payouts_per_pause: inputs.payouts_per_pause,
        pause_factor: inputs.pause_factor,
        margin: inputs.margin,
        client_check: inputs.client_check,
        seed,
        rail_latency: RAIL_LATENCY.into(),
        rail_read_timeout_ms: ms(timings.rail_read_timeout),
        worst_case_hop_ms: ms(timings.worst_case_hop),
        acquire_budget_ms: ms(timings.acquire_budget),
        backend: inputs.backend,
    }
}

/// Where the services come from: the lock-server, or etcd, beside a rail-stub child.
pub fn runtime(cfg: &PauseConfig) -> Runtime {
    match cfg.backend {
        BackendKind::Fencepost => Runtime::Process {
            store: None,
            replicas: 1,
        },
        BackendKind::Etcd => Runtime::Etcd { etcd_url: None },
        BackendKind::Redis | BackendKind::Redlock => Runtime::Redis {
            urls: Vec::new(),
            instances: if cfg.backend == BackendKind::Redlock {
                3
            } else {
                1
            },
            persistence: Default::default(),
            redlock: cfg.backend == BackendKind::Redlock,
        },
    }
}

/// The cell of the other workers: the driver's plan (client check on).
pub fn plan(cfg: &PauseConfig) -> Result<CellPlan, LatencySpecError> {
    let lease = Duration::from_millis(cfg.ttl_ms);
    let mut plan = base_plan(lease, Duration::from_millis(cfg.session_ttl_ms), cfg.margin);
    plan.rail_latency = cfg.rail_latency.parse()?;
    plan.workers = cfg.workers;
    // The rounds decide when the window closes.
    plan.duration = Duration::ZERO;
    plan.payouts = cfg.payouts_per_pause;
    plan.payout_prefix = PAYOUT_PREFIX.into();
    plan.seed = cfg.seed;
    // The rounds are the experiment: every one of their events counts.
    plan.warmup = Duration::ZERO;
    Ok(plan.in_run(&format!("pause-{}", cfg.seed)))
}

impl From<&PauseRecord> for Freeze {
    /// The freeze a record describes, on the paused worker's timeline row.
    fn from(r: &PauseRecord) -> Self {
        Freeze {
            worker: PAUSED_WORKER.into(),
            payout: r.payout.clone(),
            stale_token: r.stale_token,
            from_s: r.stopped_at_s,
            to_s: r.resumed_at_s,
        }
    }
}

/// The timeline row name of the paused worker process (the others are `w1..`).
pub const PAUSED_WORKER: &str = "w0";
