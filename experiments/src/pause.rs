//! `experiments pause` (T-042, UC-03): a payout worker in its own OS process
//! is frozen with SIGSTOP inside its critical section — after fence 1 accepted
//! its claim, before the D4 check and the submit — for longer than its lease,
//! while other workers take its payout over under a higher token; then it is
//! SIGCONTed. `--pauses N` rounds.
//!
//! One round, deterministically:
//! 1. R7 seeds `--payouts-per-pause` payouts; the worker process is told to
//!    work them and to freeze on its k-th successful claim (k from the seed);
//! 2. the driver sees the `pausing` line and waits until `/proc/PID/stat`
//!    says the process is stopped (`T`);
//! 3. the other workers (in-process `bench::worker::Worker`s, client check
//!    on) start on the same backlog; they re-acquire the frozen payout once the
//!    server says FREE (lease/session + grace) and pay it;
//! 4. after at least `--pause-factor × lease` *and* once R5 shows the payout
//!    PAID under a higher token, the driver SIGCONTs the process;
//! 5. with the client check on, the resumed worker's `check_still_held` fails
//!    and it abandons without touching the ledger; with `--disable-client-check`
//!    it submits under its stale token and fence 2 refuses it.
//!
//! Everything counted in `pause.json` (paid, fenced, duplicates, paid twice,
//! stale paid) comes from the rail's R6 ledger through
//! `fencepost_api::ledger_check::check_ledger`; the workers' own lines only place
//! events on the timeline.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::Context as _;
use bench::rail::RailClient;
use bench::runner::{D4_EXTRA, PRODUCTION_LEASE};
use bench::worker::{ClaimHook, Tally, WorkQueue, Worker, WorkerEnv};
use fencepost_api::ledger_check::{LedgerCheck, check_ledger};
use fencepost_api::rail::{PayoutState, PayoutView, SubmissionOutcome};
use fencepost_harness::ChildService;
use fencepost_sdk::MarginPolicy;
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use rand::{Rng as _, SeedableRng as _};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use tokio::io::{AsyncBufReadExt as _, AsyncWriteExt as _};
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

use crate::cli::PauseArgs;
use crate::output::RunDir;
use crate::worker_proc::{TallySnapshot, WorkerLine};

/// The R7 prefix of the pause backlog.
pub const PAYOUT_PREFIX: &str = "pause";
/// The rail's latency: short and bounded, far below the scaled read timeout,
/// so no submit ever times out and turns into an unplanned retry.
pub const RAIL_LATENCY: &str = "uniform:1ms..5ms";
/// Production `rail.read.timeout`, scaled like the bench (lease / 30 s).
pub const PRODUCTION_RAIL_READ_TIMEOUT: Duration = Duration::from_secs(5);
/// How long any single wait of the driver may take before the run fails.
pub(crate) const WAIT_LIMIT: Duration = Duration::from_secs(60);

/// The resolved configuration, recorded in the manifest and in `pause.json`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PauseConfig {
    /// Lease per acquire, ms.
    pub ttl_ms: u64,
    /// Session TTL, ms.
    pub session_ttl_ms: u64,
    /// Pauses (rounds).
    pub pauses: u32,
    /// Other workers.
    pub workers: u32,
    /// Payouts per round.
    pub payouts_per_pause: u64,
    /// Minimum pause as a multiple of the lease.
    pub pause_factor: f64,
    /// Client margin.
    pub margin: f64,
    /// Whether the paused worker runs the client check (the others always do).
    pub client_check: bool,
    /// The seed.
    pub seed: u64,
    /// The rail's latency spec.
    pub rail_latency: String,
    /// R3 read timeout, ms (5 s scaled).
    pub rail_read_timeout_ms: u64,
    /// What D4 requires before a submit, ms ((5 s + 2 s) scaled).
    pub worst_case_hop_ms: u64,
    /// Acquire budget, ms (lease / 4).
    pub acquire_budget_ms: u64,
}

impl PauseConfig {
    /// Resolves `args` with `seed`.
    pub fn resolve(args: &PauseArgs, seed: u64) -> Self {
        let scale = args.ttl.as_secs_f64() / PRODUCTION_LEASE.as_secs_f64();

        PauseConfig {
            ttl_ms: args.ttl.as_millis() as u64,
            session_ttl_ms: args.session_ttl.unwrap_or(args.ttl).as_millis() as u64,
            pauses: args.pauses,
            workers: args.workers,
            payouts_per_pause: args.payouts_per_pause,
            pause_factor: args.pause_factor,
            margin: args.margin,
            client_check: !args.disable_client_check,
            seed,
            rail_latency: RAIL_LATENCY.into(),
            rail_read_timeout_ms: PRODUCTION_RAIL_READ_TIMEOUT.mul_f64(scale).as_millis() as u64,
            worst_case_hop_ms: (PRODUCTION_RAIL_READ_TIMEOUT + D4_EXTRA)
                .mul_f64(scale)
                .as_millis() as u64,
            acquire_budget_ms: (args.ttl / 4).as_millis().max(1) as u64,
        }
    }

    fn lease(&self) -> Duration {
        Duration::from_millis(self.ttl_ms)
    }
}

/// What happened to one frozen holder.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PauseRecord {
    /// Round, from 1.
    pub round: u32,
    /// The payout it was frozen on.
    pub payout: String,
    /// The token it held while frozen (stale by the time it resumed).
    pub stale_token: u64,
    /// The token the payout was paid under, from R5 (the takeover).
    pub paid_token: Option<u64>,
    /// Seconds from the run's start when the process was seen stopped.
    pub stopped_at_s: f64,
    /// Seconds from the run's start when it was SIGCONTed.
    pub resumed_at_s: f64,
    /// What the ledger recorded for the stale token's submissions (empty: it never submitted).
    pub stale_submissions: Vec<SubmissionOutcome>,
    /// `abandoned` (no ledger call under the stale token) or `fenced_out` (fence 2 refused it) or `paid` (a violation).
    pub outcome: String,
}

/// A point on the timeline.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Event {
    /// Seconds since the run's start (driver's clock, at receipt of the line).
    pub t_s: f64,
    /// `w0` is the paused worker process; `w1..` the others.
    pub worker: String,
    /// `claimed`, `pausing`, `resumed`, `abandoned`, `fenced`, `paid`.
    pub kind: String,
    /// The payout, where known.
    pub payout: Option<String>,
    /// The token, where known.
    pub token: Option<u64>,
}

/// `pause.json`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct PauseResult {
    /// Whether the paused worker ran the client check.
    pub client_check: bool,
    /// Pauses performed.
    pub pauses: u32,
    /// Fence refusals, both fences, from the ledger's counters (`lock.fenced.out`).
    pub fenced_out: u64,
    /// Fence-1 refusals (claim/release).
    pub fenced_out_fence1: u64,
    /// Fence-2 refusals (submit).
    pub fenced_out_fence2: u64,
    /// Submissions on PAID payouts (`rail.duplicate.attempted`).
    pub duplicate_attempted: u64,
    /// Payouts PAID.
    pub paid: u64,
    /// Payouts in the ledger.
    pub payouts: u64,
    /// Payouts paid more than once (must be 0).
    pub paid_twice: u64,
    /// Payouts paid under a stale token (must be 0).
    pub stale_paid: u64,
    /// `check_ledger` found no violation.
    pub ledger_ok: bool,
    /// The experiment's expectation for this mode held.
    pub expectation_met: bool,
    /// The expectation, in words.
    pub expectation: String,
    /// Per pause.
    pub paused: Vec<PauseRecord>,
    /// The paused worker's client-side counts, all rounds.
    pub paused_worker: TallySnapshot,
    /// The other workers' client-side counts, all rounds.
    pub other_workers: TallySnapshot,
    /// The configuration.
    pub config: PauseConfig,
}

impl PauseResult {
    /// Checks the expectation from the ledger numbers.
    pub fn judge(check: &LedgerCheck, client_check: bool, pauses: u32) -> (bool, String) {
        let safe = check.paid_twice == 0
            && check.stale_paid == 0
            && check.duplicate_attempted == 0
            && check.holds();
        if client_check {
            (
                safe && check.fenced_out_total == 0,
                "client check on: the resumed worker abandons, fenced_out = 0; paid_twice = stale_paid = duplicate_attempted = 0".into(),
            )
        } else {
            (
                safe && check.fenced_out_total >= 1 && pauses >= 1,
                "client check off (UC-03): the stale submit reaches fence 2, fenced_out >= 1; paid_twice = stale_paid = duplicate_attempted = 0".into(),
            )
        }
    }
}

/// Runs the experiment; returns the result and the output directory.
pub async fn run(args: &PauseArgs) -> anyhow::Result<(PauseResult, PathBuf)> {
    let seed = args.seed.unwrap_or_else(rand::random);
    let cfg = PauseConfig::resolve(args, seed);
    let run_dir = RunDir::create("pause", args.out.as_deref(), seed, &cfg)?;
    let result = run_in(&cfg, &run_dir.dir).await?;
    run_dir.write_json("pause.json", &result)?;
    let section = report_section(&result);
    let dir = run_dir.finish(&section)?;
    Ok((result, dir))
}

/// The services of a run, stopped on drop.
struct Services {
    /// The lock-server child.
    _lock: ChildService,
    /// The rail-stub child.
    _rail: ChildService,
    /// Its URL.
    lock_url: String,
    /// Its URL.
    rail_url: String,
}

fn start_child(package: &str, args: Vec<String>, log: PathBuf) -> anyhow::Result<ChildService> {
    let bin = fencepost_harness::binary(package, package)?;
    Ok(ChildService::start(&bin, args, &log)?)
}

/// Starts a lock-server (SQLite in `dir`) and a rail-stub as child processes, as the bench's process runtime does.
pub(crate) async fn start_services(
    dir: &Path,
    lease: Duration,
    session_ttl: Duration,
    rail_latency: &str,
    seed: u64,
) -> anyhow::Result<(ChildService, ChildService)> {
    let lock_args = vec![
        "--store".into(),
        format!("sqlite:{}", dir.join("lock.sqlite").display()),
        "--default-ttl".into(),
        fencepost_api::format_duration(lease),
        "--session-ttl".into(),
        fencepost_api::format_duration(session_ttl),
    ];
    let rail_args = vec![
        "--latency".into(),
        rail_latency.to_string(),
        "--seed".into(),
        seed.to_string(),
    ];
    let (la, ra) = (dir.join("lock-server.log"), dir.join("rail-stub.log"));
    // Started on this (the caller's) thread, not a blocking-pool thread: the
    // harness sets PR_SET_PDEATHSIG, which fires when the *thread* that forked
    // the child exits, and tokio retires idle blocking threads after 10 s.
    let lock = start_child("lock-server", lock_args, la)?;
    let rail = start_child("rail-stub", rail_args, ra)?;
    Ok((lock, rail))
}

/// A worker child process (`experiments worker`), killed on drop.
pub(crate) struct WorkerChild {
    /// The process.
    pub child: tokio::process::Child,
    /// Its pid.
    pub pid: i32,
    /// Its stdin (round commands), for round mode.
    pub stdin: Option<tokio::process::ChildStdin>,
    /// Its stdout lines, stamped with seconds since `t0`.
    pub lines: mpsc::UnboundedReceiver<(f64, WorkerLine)>,
}

impl WorkerChild {
    /// Starts `experiments worker ARGS` (this same executable), stderr to `log`.
    pub fn spawn(args: &[String], log: &Path, t0: Instant) -> anyhow::Result<Self> {
        let exe = std::env::current_exe().context("locating the experiments binary")?;
        let stderr =
            std::fs::File::create(log).with_context(|| format!("creating {}", log.display()))?;
        let mut cmd = tokio::process::Command::new(exe);
        cmd.arg("worker")
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::from(stderr))
            .kill_on_drop(true);
        // SAFETY: prctl is async-signal-safe and touches no memory of the parent.
        unsafe {
            cmd.pre_exec(|| {
                nix::sys::prctl::set_pdeathsig(Signal::SIGKILL).map_err(std::io::Error::from)
            });
        }
        let mut child = cmd.spawn().context("starting the worker process")?;
        let pid = child.id().context("worker pid")? as i32;
        let stdout = child.stdout.take().context("worker stdout")?;
        let stdin = child.stdin.take();
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut lines = tokio::io::BufReader::new(stdout).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                match serde_json::from_str::<WorkerLine>(&line) {
                    Ok(w) => {
                        if tx.send((t0.elapsed().as_secs_f64(), w)).is_err() {
                            return;
                        }
                    }
                    Err(_) => tracing::warn!(%line, "unparsed worker line"),
                }
            }
        });
        Ok(WorkerChild {
            child,
            pid,
            stdin,
            lines: rx,
        })
    }

    /// The next line, within `limit`.
    pub async fn next(&mut self, limit: Duration) -> anyhow::Result<(f64, WorkerLine)> {
        match tokio::time::timeout(limit, self.lines.recv()).await {
            Ok(Some(l)) => Ok(l),
            Ok(None) => anyhow::bail!("the worker process closed its stdout (see its log)"),
            Err(_) => anyhow::bail!("no line from the worker process within {limit:?}"),
        }
    }

    /// Sends one command line.
    async fn send(&mut self, line: &str) -> anyhow::Result<()> {
        let stdin = self.stdin.as_mut().context("worker stdin closed")?;
        stdin.write_all(format!("{line}\n").as_bytes()).await?;
        stdin.flush().await?;
        Ok(())
    }
}

impl Drop for WorkerChild {
    fn drop(&mut self) {
        // A stopped process still dies of SIGKILL; SIGCONT first anyway so nothing lingers frozen.
        let _ = kill(Pid::from_raw(self.pid), Signal::SIGCONT);
    }
}

/// The scheduler state of `pid` from `/proc/PID/stat` (`R`, `S`, `T` = stopped, …).
pub fn proc_state(pid: i32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?.1.trim_start().chars().next()
}

/// Waits until `pid` is stopped (`T`), within `limit`.
async fn wait_stopped(pid: i32, limit: Duration) -> anyhow::Result<()> {
    let deadline = Instant::now() + limit;
    loop {
        match proc_state(pid) {
            Some('T') | Some('t') => return Ok(()),
            None => anyhow::bail!("worker process {pid} is gone"),
            _ => {}
        }
        anyhow::ensure!(
            Instant::now() < deadline,
            "worker process {pid} did not stop within {limit:?}"
        );
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// R5 for one payout.
async fn payout(http: &reqwest::Client, rail_url: &str, id: &str) -> anyhow::Result<PayoutView> {
    let r = http
        .get(format!("{rail_url}/v1/payouts/{id}"))
        .timeout(Duration::from_secs(5))
        .send()
        .await?;
    anyhow::ensure!(r.status().is_success(), "R5 {id}: {}", r.status());
    Ok(r.json().await?)
}

/// Turns a worker line into a timeline event.
fn event_of(t_s: f64, worker: &str, line: &WorkerLine) -> Option<Event> {
    let ev = |kind: &str, payout: Option<&String>, token: Option<u64>| Event {
        t_s,
        worker: worker.into(),
        kind: kind.into(),
        payout: payout.cloned(),
        token,
    };
    match line {
        WorkerLine::Claimed { payout, token } => Some(ev("claimed", Some(payout), Some(*token))),
        WorkerLine::Pausing { payout, token } => Some(ev("pausing", Some(payout), Some(*token))),
        WorkerLine::Resumed { payout, token } => Some(ev("resumed", Some(payout), Some(*token))),
        WorkerLine::Tally { field, .. } => match field.as_str() {
            "abandoned_lost" | "abandoned_insufficient_lease" => Some(ev("abandoned", None, None)),
            "fenced_replies" => Some(ev("fenced", None, None)),
            "paid_replies" => Some(ev("paid", None, None)),
            _ => None,
        },
        _ => None,
    }
}

async fn run_in(cfg: &PauseConfig, dir: &Path) -> anyhow::Result<PauseResult> {
    let lease = cfg.lease();
    let session_ttl = Duration::from_millis(cfg.session_ttl_ms);
    let (lock, rail_child) =
        start_services(dir, lease, session_ttl, &cfg.rail_latency, cfg.seed).await?;
    let services = Services {
        lock_url: lock.url(),
        rail_url: rail_child.url(),
        _lock: lock,
        _rail: rail_child,
    };
    let rail_read_timeout = Duration::from_millis(cfg.rail_read_timeout_ms);
    let rail = RailClient::new(&services.rail_url, rail_read_timeout);
    let http = reqwest::Client::new();
    let t0 = Instant::now();
    let mut rng = ChaCha8Rng::seed_from_u64(cfg.seed);

    // The worker process: round mode.
    let worker_args = vec![
        "--lock-url".into(),
        services.lock_url.clone(),
        "--rail-url".into(),
        services.rail_url.clone(),
        "--idx".into(),
        "0".into(),
        "--lease".into(),
        fencepost_api::format_duration(lease),
        "--session-ttl".into(),
        fencepost_api::format_duration(session_ttl),
        "--margin".into(),
        cfg.margin.to_string(),
        "--rail-read-timeout".into(),
        format!("{}ms", cfg.rail_read_timeout_ms),
        "--worst-case-hop".into(),
        format!("{}ms", cfg.worst_case_hop_ms),
        "--acquire-budget".into(),
        format!("{}ms", cfg.acquire_budget_ms),
        "--prefix".into(),
        PAYOUT_PREFIX.into(),
        "--seed".into(),
        cfg.seed.to_string(),
    ];
    let mut worker_args = worker_args;
    if !cfg.client_check {
        worker_args.push("--disable-client-check".into());
    }
    let mut proc = WorkerChild::spawn(&worker_args, &dir.join("worker-0.log"), t0)?;
    let events: Arc<Mutex<Vec<Event>>> = Arc::default();
    let record = |t: f64, line: &WorkerLine| {
        if let Some(e) = event_of(t, "w0", line) {
            events.lock().unwrap_or_else(|e| e.into_inner()).push(e);
        }
    };
    match proc.next(WAIT_LIMIT).await? {
        (_, WorkerLine::Ready { .. }) => {}
        (_, other) => anyhow::bail!("worker process said {other:?} before ready"),
    }

    // The other workers: in-process SDK workers on the same backlog, client check on.
    let helper_env = WorkerEnv {
        lock_url: services.lock_url.clone(),
        rail_url: services.rail_url.clone(),
        lease,
        session_ttl,
        margin: MarginPolicy::Fixed(cfg.margin),
        rail_read_timeout,
        worst_case_hop: Duration::from_millis(cfg.worst_case_hop_ms),
        client_check: true,
        acquire_budget: Duration::from_millis(cfg.acquire_budget_ms),
        payout_prefix: PAYOUT_PREFIX.into(),
        seed: cfg.seed,
        on_claimed: None,
    };
    let helpers: Vec<Arc<Worker>> = (1..=u64::from(cfg.workers))
        .map(|i| {
            let ev = events.clone();
            let name = format!("w{i}");
            let mut env = helper_env.clone();
            env.on_claimed = Some(ClaimHook(Arc::new(move |payout: &str, token: u64| {
                ev.lock().unwrap_or_else(|e| e.into_inner()).push(Event {
                    t_s: t0.elapsed().as_secs_f64(),
                    worker: name.clone(),
                    kind: "claimed".into(),
                    payout: Some(payout.into()),
                    token: Some(token),
                });
            })));
            Worker::new(i, env).map(Arc::new)
        })
        .collect::<anyhow::Result<_>>()?;
    let helper_tally = Arc::new(Tally::default());
    let mut paused_tally = TallySnapshot::default();
    let mut records = Vec::new();

    for round in 1..=cfg.pauses {
        let created = rail
            .seed_backlog(cfg.payouts_per_pause, PAYOUT_PREFIX)
            .await?;
        let first: u64 = created.first_number(PAYOUT_PREFIX)?;
        let pause_at = rng.random_range(1..=cfg.payouts_per_pause.min(3));
        println!(
            "round {round}/{}: payouts {first}..{} , freeze on claim {pause_at}",
            cfg.pauses,
            first + cfg.payouts_per_pause - 1
        );
        proc.send(&format!(
            "round {first} {} {pause_at}",
            cfg.payouts_per_pause
        ))
        .await?;

        // 1–2: the worker announces the freeze; wait until the kernel says stopped.
        let (stale_payout, stale_token) = loop {
            let (t, line) = proc.next(WAIT_LIMIT).await?;
            record(t, &line);
            match line {
                WorkerLine::Pausing { payout, token } => break (payout, token),
                WorkerLine::RoundDone { .. } => {
                    anyhow::bail!("round {round} ended without a pause")
                }
                _ => {}
            }
        };
        wait_stopped(proc.pid, Duration::from_secs(10)).await?;
        let stopped = Instant::now();
        let stopped_at_s = (stopped - t0).as_secs_f64();

        // 3: the others work the same backlog while it is frozen.
        let queue = Arc::new(WorkQueue::new(first, cfg.payouts_per_pause));
        let (stop_tx, stop_rx) = watch::channel(false);
        let tasks: Vec<_> = helpers
            .iter()
            .map(|w| {
                let (w, q, t, s) = (
                    w.clone(),
                    queue.clone(),
                    helper_tally.clone(),
                    stop_rx.clone(),
                );
                tokio::spawn(async move { w.run(q, t, s).await })
            })
            .collect();

        // 4: at least pause_factor × lease, and until the payout is paid under a higher token.
        let min_pause = lease.mul_f64(cfg.pause_factor);
        let deadline = stopped + min_pause + WAIT_LIMIT;
        loop {
            let view = payout(&http, &services.rail_url, &stale_payout).await?;
            let taken_over =
                view.state == PayoutState::Paid && view.paid_token.is_some_and(|p| p > stale_token);
            if taken_over && stopped.elapsed() >= min_pause {
                break;
            }
            anyhow::ensure!(
                Instant::now() < deadline,
                "round {round}: {stale_payout} was not taken over within {:?} of the freeze",
                min_pause + WAIT_LIMIT
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        kill(Pid::from_raw(proc.pid), Signal::SIGCONT).context("SIGCONT")?;
        let resumed_at_s = t0.elapsed().as_secs_f64();
        println!(
            "  froze {stale_payout} under token {stale_token} for {:.0} ms; resumed",
            (resumed_at_s - stopped_at_s) * 1e3
        );

        // 5: the resumed worker finishes its round (abandon or fence, then ALREADY_PAID).
        let tally = loop {
            let (t, line) = proc.next(WAIT_LIMIT).await?;
            record(t, &line);
            if let WorkerLine::RoundDone { tally } = line {
                break tally;
            }
        };
        paused_tally.add(&tally);
        let _ = stop_tx.send(true);
        for t in tasks {
            tokio::time::timeout(WAIT_LIMIT, t)
                .await
                .context("another worker did not finish its round")??;
        }
        let view = payout(&http, &services.rail_url, &stale_payout).await?;
        let stale_submissions: Vec<SubmissionOutcome> = view
            .submissions
            .iter()
            .filter(|s| s.token == stale_token)
            .map(|s| s.outcome)
            .collect();
        let outcome = if stale_submissions.is_empty() {
            "abandoned"
        } else if stale_submissions.contains(&SubmissionOutcome::Paid) {
            "paid"
        } else if stale_submissions.contains(&SubmissionOutcome::FencedOut) {
            "fenced_out"
        } else {
            "refused"
        };
        println!(
            "  stale token {stale_token}: {outcome}; paid under {:?}",
            view.paid_token
        );
        records.push(PauseRecord {
            round,
            payout: stale_payout,
            stale_token,
            paid_token: view.paid_token,
            stopped_at_s,
            resumed_at_s,
            stale_submissions,
            outcome: outcome.into(),
        });
    }
    let _ = proc.send("quit").await;
    proc.stdin.take();
    let _ = tokio::time::timeout(Duration::from_secs(10), proc.child.wait()).await;

    // Everything that counts comes from the ledger.
    let ledger = rail.ledger().await?;
    let check = check_ledger(&ledger);
    std::fs::write(
        dir.join("ledger-check.json"),
        serde_json::to_vec_pretty(&check)?,
    )?;
    let (expectation_met, expectation) = PauseResult::judge(&check, cfg.client_check, cfg.pauses);
    let mut events = std::mem::take(&mut *events.lock().unwrap_or_else(|e| e.into_inner()));
    events.sort_by(|a, b| a.t_s.total_cmp(&b.t_s));
    std::fs::write(dir.join("events.json"), serde_json::to_vec_pretty(&events)?)?;
    let result = PauseResult {
        client_check: cfg.client_check,
        pauses: records.len() as u32,
        fenced_out: check.fenced_out_total,
        fenced_out_fence1: check.fenced_out_fence1,
        fenced_out_fence2: check.fenced_out_fence2,
        duplicate_attempted: check.duplicate_attempted,
        paid: check.paid,
        payouts: check.payouts,
        paid_twice: check.paid_twice,
        stale_paid: check.stale_paid,
        ledger_ok: check.holds(),
        expectation_met,
        expectation,
        paused: records,
        paused_worker: paused_tally,
        other_workers: TallySnapshot::of(&helper_tally),
        config: cfg.clone(),
    };
    crate::plots::timeline(dir, &result, &events, cfg.workers)?;
    drop(services);
    Ok(result)
}

/// The `report.md` section.
pub fn report_section(r: &PauseResult) -> String {
    let mut s = String::new();
    let check = if r.client_check { "on" } else { "off (UC-03)" };
    s.push_str(&format!(
        "## Pause experiment (T-042): client check {check}\n\n\
         A worker in its own process was SIGSTOPped {} times inside its critical section \
         (after fence 1, before the D4 check) for at least {} × its {} ms lease, while {} other \
         workers took its payout over. Counts from the rail's ledger (`check_ledger`):\n\n\
         | client_check | pauses | fenced_out | fence 1 | fence 2 | duplicate_attempted | paid | paid_twice | stale_paid | ledger ok |\n\
         |---|---|---|---|---|---|---|---|---|---|\n\
         | {} | {} | {} | {} | {} | {} | {}/{} | {} | {} | {} |\n\n",
        r.pauses,
        r.config.pause_factor,
        r.config.ttl_ms,
        r.config.workers,
        r.client_check,
        r.pauses,
        r.fenced_out,
        r.fenced_out_fence1,
        r.fenced_out_fence2,
        r.duplicate_attempted,
        r.paid,
        r.payouts,
        r.paid_twice,
        r.stale_paid,
        r.ledger_ok,
    ));
    s.push_str(&format!(
        "Expectation: {} — **{}**.\n\n| round | payout | stale token | paid under | frozen ms | stale token's fate |\n|---|---|---|---|---|---|\n",
        r.expectation,
        if r.expectation_met { "met" } else { "NOT met" }
    ));
    for p in &r.paused {
        s.push_str(&format!(
            "| {} | {} | {} | {} | {:.0} | {} |\n",
            p.round,
            p.payout,
            p.stale_token,
            p.paid_token
                .map(|t| t.to_string())
                .unwrap_or_else(|| "-".into()),
            (p.resumed_at_s - p.stopped_at_s) * 1e3,
            p.outcome
        ));
    }
    s.push_str("\n![timeline](timeline.svg)\n\nSeed ");
    s.push_str(&format!(
        "{} (manifest.json); data: pause.json, events.json, ledger-check.json.\n",
        r.config.seed
    ));
    s
}

/// `experiments pause`: runs, prints the summary, returns the exit code
/// (0 expectation met, 1 failed or not met).
pub fn main(args: &PauseArgs) -> i32 {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    match rt.block_on(run(args)) {
        Ok((r, dir)) => {
            println!(
                "pause.json: client_check={} pauses={} fenced_out={} duplicate_attempted={} paid={} paid_twice={} stale_paid={}",
                r.client_check,
                r.pauses,
                r.fenced_out,
                r.duplicate_attempted,
                r.paid,
                r.paid_twice,
                r.stale_paid
            );
            println!(
                "expectation {}: {}",
                if r.expectation_met { "met" } else { "NOT met" },
                r.expectation
            );
            println!("results: {}", dir.display());
            if r.expectation_met { 0 } else { 1 }
        }
        Err(e) => {
            eprintln!("experiments pause: {e:#}");
            1
        }
    }
}
