//! Everything a worker is given: its [`WorkerEnv`] (services, lease, margin,
//! the run's seed) and the hooks a caller adds to it — a [`ClaimHook`] inside
//! the critical section, an awaited [`StepHook`] at the [`Step`]s of a payout.

use fencepost_sdk::PrometheusMetrics;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use bench_core::backend::BackendKind;
use bench_history::Recorder;
use fencepost_api::latency::LatencySpec;
use fencepost_sdk::MarginPolicy;

/// A boxed, sendable future (the object-safe form of an `async fn` in a trait).
pub type BoxFuture<'a, T> = Pin<Box<dyn Future<Output = T> + Send + 'a>>;

/// Everything one worker needs to know.
#[derive(Clone, Debug)]
pub struct WorkerEnv {
    /// The lock service `lock_url` points at.
    pub backend: BackendKind,
    /// The lock-server (or the delay proxy in front of it), or etcd's client URL.
    pub lock_url: String,
    /// The CA bundle the SDK trusts for an `https://` `lock_url` (`bench run
    /// --tls`: the cell's own CA); `None`: plain HTTP.
    pub tls_ca: Option<std::path::PathBuf>,
    /// The rail-stub.
    pub rail_url: String,
    /// The lease each acquire asks for.
    pub lease: Duration,
    /// The session TTL.
    pub session_ttl: Duration,
    /// The heartbeat divisor k (`lock.client.heartbeat-divisor`; etcd: the
    /// keep-alive schedule's).
    pub heartbeat_divisor: u32,
    /// The margin policy.
    pub margin: MarginPolicy,
    /// `rail.read.timeout` (scaled): R3's read timeout.
    pub rail_read_timeout: Duration,
    /// `rail.read.timeout + 2 s` (scaled): what `ensure_time_for` requires.
    pub worst_case_hop: Duration,
    /// When false, the worker skips `check_still_held`/`ensure_time_for` (UC-03).
    pub client_check: bool,
    /// How long one acquire may wait for a held key.
    pub acquire_budget: Duration,
    /// R7's id prefix of the backlog.
    pub payout_prefix: String,
    /// The run's seed; worker `i` seeds its SDK with `seed + i`.
    pub seed: u64,
    /// How long a payout's work holds the lock (already scaled to the cell's
    /// time base), drawn once per attempt from the worker's seeded RNG and
    /// split evenly over its [`WorkerEnv::steps`]; `None`: no work beyond the
    /// rail calls (the default).
    pub hold: Option<LatencySpec>,
    /// The steps ("legs") of one logical payout, each a ledger payout of its
    /// own paid under the one lock grant (≥ 1; 1: the default, one ledger
    /// payout per payout).
    pub steps: u32,
    /// Called after every successful claim, before the D4 check: the point in
    /// the critical section where the pause experiment freezes a worker.
    pub on_claimed: Option<ClaimHook>,
    /// Awaited at the [`Step`]s of every payout (tests' sabotage: a stall
    /// between the check and the submit, or before the claim).
    pub on_step: Option<StepHook>,
    /// Records every operation with its invocation and completion (issue
    /// 16's history, [`bench_history`]); `None` records nothing.
    pub history: Option<Arc<Recorder>>,
    /// The Prometheus instruments the cell's clients share (`--metrics-listen`);
    /// `None`: each client keeps its own, which nobody scrapes.
    pub prometheus: Option<PrometheusMetrics>,
}

/// Where in a payout a [`StepHook`] runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// The lock was granted; the claim (fence 1) comes next.
    Acquired,
    /// `check_still_held` and D4 passed (the belief is recorded); the submit
    /// (fence 2) comes next. Not reached with the client check off.
    Checked,
    /// Between payouts, no lock held (outside the critical section): the
    /// context's `payout_id` is empty and its `token` 0.
    Idle,
    /// A leg of a multi-step payout (`--steps`) was paid and another follows
    /// under the same grant: the next leg's claim (fence 1) comes next, with
    /// no check before it (a claim is undone by a rail release). The
    /// context's `payout_id` is the paid leg's.
    LegPaid,
}

/// What a [`StepHook`] is given.
pub struct StepCtx<'a> {
    /// Where the payout is.
    pub step: Step,
    /// The worker's SDK session, on the fencepost backend (a hook may inject
    /// a heartbeat fault into it); `None` on etcd.
    pub session: Option<&'a fencepost_sdk::Session>,
    /// The worker's index.
    pub worker: u64,
    /// The payout.
    pub payout_id: &'a str,
    /// The fencing token held.
    pub token: u64,
}

/// The signature of a [`StepHook`]: it may act on the session at once and
/// returns what the worker then awaits.
pub type StepFn = dyn for<'a> Fn(StepCtx<'a>) -> BoxFuture<'static, ()> + Send + Sync;

/// An awaited callback at the [`Step`]s of a payout (see [`WorkerEnv::on_step`]).
#[derive(Clone)]
pub struct StepHook(pub Arc<StepFn>);

impl std::fmt::Debug for StepHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StepHook")
    }
}

/// The signature of a [`ClaimHook`]: `(worker index, payout_id, token)`.
pub type ClaimFn = dyn Fn(u64, &str, u64) + Send + Sync;

/// A callback `(worker index, payout_id, token)` run inside the critical
/// section (see [`WorkerEnv::on_claimed`]).
#[derive(Clone)]
pub struct ClaimHook(pub Arc<ClaimFn>);

impl std::fmt::Debug for ClaimHook {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("ClaimHook")
    }
}
