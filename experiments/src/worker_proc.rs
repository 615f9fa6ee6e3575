//! `experiments worker` (hidden): one `bench_driver::worker::Worker` — the payout
//! worker, not a copy of it, on the SDK or on etcd (`--backend`) — running in its own OS process, so the pause
//! experiment can freeze a whole process (its heartbeat task included) and the
//! throttle experiment can put it in a cgroup.
//!
//! It talks JSON lines on stdout ([`WorkerLine`]). In round mode (no
//! `--first`) it reads `round FIRST COUNT PAUSE_AT` lines on stdin and works
//! that backlog; on its `PAUSE_AT`-th successful claim of the round the
//! `on_claimed` hook prints `pausing` and raises SIGSTOP on the process — inside
//! the critical section, after fence 1 and before the D4 check. The driver
//! SIGCONTs it. In continuous mode (`--first/--count`) it works that backlog
//! until the driver writes `stop` (or closes stdin), then prints `done` with
//! its counts, its SDK heartbeat counters, its histograms (raw and corrected
//! RTT, tick lag, rail latency) and the CPU seconds it used; a `reset` line
//! (the cell's warm-up ended) zeroes all of that first. The parent side is
//! [`crate::proc`]; [`crate::proc::worker_args`] writes the arguments
//! [`env_of`] reads back.

use std::io::Write as _;
use std::num::ParseIntError;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bench_core::cpu::cpu_seconds;
use bench_core::error::Chain;
use bench_core::grid::{FlagError, parse_policy};
use bench_core::hist::{EncodeError, encode};
use bench_driver::cell::HeartbeatCounts;
use bench_driver::worker::{
    BuildError, ClaimHook, Step, StepCtx, StepHook, Tally, TallySnapshot, WorkQueue, WorkerEnv,
    build_worker,
};
use bench_history::{OpKind, Outcome, Recorder};
use nix::sys::signal::{Signal, raise};
use serde::{Deserialize, Serialize};
use tokio::io::AsyncBufReadExt as _;
use tokio::sync::watch;

use crate::chaos::schedule::{FreezeStep, Freezes};
use crate::cli::WorkerArgs;

/// Why `experiments worker` stopped with exit code 1. It prints the error
/// on its stderr, which the parent keeps as the worker's log.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
    /// `--margin-policy` is not a policy: the parent wrote it, so the two
    /// are of different builds; rebuild.
    #[error(transparent)]
    Policy(#[from] FlagError),
    /// The `--history` file could not be created: check its directory.
    #[error("{error}")]
    History {
        /// The history file.
        path: PathBuf,
        /// The OS error (in the message, so not also a `source()`).
        error: std::io::Error,
    },
    /// The payout worker could not be built; [`BuildError`] says what to do.
    #[error(transparent)]
    Build(#[from] BuildError),
    /// A histogram of the `done` line could not be encoded: a bug, report it.
    #[error(transparent)]
    Encode(#[from] EncodeError),
    /// Stdin could not be read: the parent went away; nothing to do.
    #[error(transparent)]
    Stdin(std::io::Error),
    /// A `round` command's numbers are not integers: the parent and the
    /// worker are of different builds; rebuild.
    #[error(transparent)]
    Round(#[from] ParseIntError),
    /// A command the worker does not know: the parent and the worker are of
    /// different builds; rebuild.
    #[error("unknown command {line:?}")]
    UnknownCommand {
        /// The line read.
        line: String,
    },
}

/// One stdout line of a worker process.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "ev", rename_all = "snake_case")]
pub enum WorkerLine {
    /// Started; ready for rounds.
    Ready {
        /// Its pid.
        pid: u32,
    },
    /// A successful claim (fence 1 accepted `token`).
    Claimed {
        /// The payout.
        payout: String,
        /// The fencing token.
        token: u64,
    },
    /// About to SIGSTOP itself while holding `token` on `payout`.
    Pausing {
        /// The payout.
        payout: String,
        /// The fencing token it holds (soon stale).
        token: u64,
    },
    /// Running again after the SIGCONT.
    Resumed {
        /// The payout.
        payout: String,
        /// The token it held.
        token: u64,
    },
    /// A client-side counter went up (see `bench_driver::worker::Tally`).
    Tally {
        /// Which counter.
        field: Counter,
        /// Its new value (within the round).
        value: u64,
    },
    /// A belief, streamed as it forms (chaos workers): the client check
    /// passed for `token` on `payout` and the submit comes next. The `done`
    /// line carries them all; these survive a kill.
    Believed {
        /// The payout.
        payout: String,
        /// The token the client believes it holds.
        token: u64,
    },
    /// The round's backlog is done.
    RoundDone {
        /// The round's client-side counts.
        tally: TallySnapshot,
    },
    /// Continuous mode finished.
    Done {
        /// The client-side counts (with the beliefs of trigger 4).
        tally: TallySnapshot,
        /// Renewals the SDK was granted.
        renewals: u64,
        /// The SDK's heartbeat counters (boxed to keep the enum small).
        #[serde(default)]
        heartbeat: Box<HeartbeatCounts>,
        /// The raw heartbeat RTT histogram, `bench_core::hist::encode`d.
        rtt_hdr: String,
        /// The corrected heartbeat RTT histogram, encoded.
        #[serde(default)]
        corrected_hdr: String,
        /// The tick-lag histogram, encoded.
        #[serde(default)]
        tick_lag_hdr: String,
        /// The rail submit latency histogram, encoded.
        #[serde(default)]
        rail_hdr: String,
        /// The heartbeat gap histogram, encoded.
        #[serde(default)]
        gap_hdr: String,
        /// CPU seconds this process used since its start or its last `reset`.
        #[serde(default)]
        cpu_s: Option<f64>,
        /// The margins the SDK applied to lease deadlines (L4, L5) since the
        /// last `reset`: `[count, sum, min, max]` in ppm (`margin_effective`);
        /// boxed to keep the enum small.
        #[serde(default)]
        margins_ppm: Box<[u64; 4]>,
    },
}

/// The counters a worker process reports as they rise (its timeline events).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Counter {
    /// `Tally::abandoned_lost`.
    AbandonedLost,
    /// `Tally::abandoned_insufficient_lease`.
    AbandonedInsufficientLease,
    /// `Tally::fenced_replies`.
    FencedReplies,
    /// `Tally::paid_replies`.
    PaidReplies,
    /// `Tally::acquire_failed`.
    AcquireFailed,
}

impl Counter {
    /// Every counter, in report order.
    pub const ALL: [Counter; 5] = [
        Counter::AbandonedLost,
        Counter::AbandonedInsufficientLease,
        Counter::FencedReplies,
        Counter::PaidReplies,
        Counter::AcquireFailed,
    ];

    /// Its value in `t`.
    pub fn read(self, t: &Tally) -> u64 {
        let a = match self {
            Counter::AbandonedLost => &t.abandoned_lost,
            Counter::AbandonedInsufficientLease => &t.abandoned_insufficient_lease,
            Counter::FencedReplies => &t.fenced_replies,
            Counter::PaidReplies => &t.paid_replies,
            Counter::AcquireFailed => &t.acquire_failed,
        };
        a.load(Ordering::Relaxed)
    }
}

/// Prints one line and flushes (the driver timestamps lines as they arrive).
fn emit(line: &WorkerLine) {
    let mut out = std::io::stdout().lock();
    let _ = serde_json::to_writer(&mut out, line);
    let _ = out.write_all(b"\n");
    let _ = out.flush();
}

/// The hidden subcommand's entry point; returns the exit code.
pub fn main(args: WorkerArgs) -> i32 {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    match rt.block_on(run(args)) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("experiments worker: {}", Chain(&e));
            1
        }
    }
}

/// Where the pause hook stands in the current round.
#[derive(Default)]
struct PausePlan {
    /// Successful claims so far in this round.
    claims: AtomicU64,
    /// The claim (1-based) to freeze on; 0 = none.
    pause_at: AtomicU64,
}

/// The worker's configuration from its arguments (the inverse of
/// [`crate::proc::worker_args`]), with the claim `hook`.
pub fn env_of(args: &WorkerArgs, hook: Option<ClaimHook>) -> Result<WorkerEnv, FlagError> {
    let policy = parse_policy(&args.margin_policy)?;
    Ok(WorkerEnv {
        backend: args.backend,
        lock_url: args.lock_url.clone(),
        tls_ca: None,
        rail_url: args.rail_url.clone(),
        lease: args.lease,
        session_ttl: args.session_ttl,
        heartbeat_divisor: args.heartbeat_divisor,
        margin: policy.margin_policy(args.margin),
        rail_read_timeout: args.rail_read_timeout,
        worst_case_hop: args.worst_case_hop,
        client_check: !args.disable_client_check,
        acquire_budget: args.acquire_budget,
        payout_prefix: args.prefix.clone(),
        seed: args.seed,
        on_claimed: hook,
        on_step: None,
        history: None,
        prometheus: None,
    })
}

/// The claim hook of a round-mode worker: report every claim, and freeze the
/// whole process (heartbeat task and all) on the round's `pause_at`-th one.
fn pause_hook(plan: Arc<PausePlan>) -> ClaimHook {
    ClaimHook(Arc::new(move |_idx: u64, payout: &str, token: u64| {
        emit(&WorkerLine::Claimed {
            payout: payout.to_string(),
            token,
        });
        let n = plan.claims.fetch_add(1, Ordering::SeqCst) + 1;
        if n == plan.pause_at.load(Ordering::SeqCst) {
            emit(&WorkerLine::Pausing {
                payout: payout.to_string(),
                token,
            });
            // The whole process stops here, holding the claim under `token`;
            // the driver SIGCONTs it.
            let _ = raise(Signal::SIGSTOP);
            emit(&WorkerLine::Resumed {
                payout: payout.to_string(),
                token,
            });
        }
    }))
}

/// The step hook of a chaos worker: every belief is streamed at once
/// ([`WorkerLine::Believed`], before anything else can happen to the
/// process); at the N-th time it reaches a step of its `--freeze` list the
/// whole process stops (SIGSTOP) for that long — a helper process it starts
/// first sends the SIGCONT, so the freeze ends on time whatever the driver
/// does. The freeze is recorded in the history.
fn freeze_hook(freezes: Freezes, history: Option<Arc<Recorder>>) -> StepHook {
    let seen = Arc::new([AtomicU64::new(0), AtomicU64::new(0)]);
    StepHook(Arc::new(move |ctx: StepCtx<'_>| {
        if ctx.step == Step::Checked {
            emit(&WorkerLine::Believed {
                payout: ctx.payout_id.to_string(),
                token: ctx.token,
            });
        }
        let (slot, step) = match ctx.step {
            Step::Checked => (0, FreezeStep::Checked),
            Step::Idle => (1, FreezeStep::Idle),
            Step::Acquired => return Box::pin(std::future::ready(())),
        };
        let n = seen[slot].fetch_add(1, Ordering::SeqCst) + 1;
        for p in freezes.0.iter().filter(|p| p.step == step && p.nth == n) {
            let pid = std::process::id();
            // Only its own parent, still alive: a worker killed while frozen
            // leaves the helper behind (reparented), and its pid may belong
            // to another process by then (pid_max is 32768 here).
            let waker = std::process::Command::new("sh")
                .arg("-c")
                .arg(format!(
                    "sleep {:.3}; read -r _ _ _ ppid _ < /proc/$$/stat; \
                     [ \"$ppid\" = {pid} ] && kill -CONT {pid}",
                    p.for_ms as f64 / 1e3
                ))
                .spawn();
            let Ok(mut waker) = waker else {
                eprintln!("experiments worker: cannot start the SIGCONT helper; not freezing");
                continue;
            };
            let payout = ctx.payout_id.to_string();
            emit(&WorkerLine::Pausing {
                payout: payout.clone(),
                token: ctx.token,
            });
            let session = format!("freeze/{}", p.for_ms);
            let rec = history.as_ref().map(|r| {
                let token = (ctx.token > 0).then_some(ctx.token);
                let payout = (!payout.is_empty()).then_some(payout.as_str());
                (r, r.invoke(OpKind::Freeze, &session, payout, token))
            });
            let _ = raise(Signal::SIGSTOP);
            if let Some((r, pending)) = rec {
                r.complete(pending, Outcome::Ok, None, None);
            }
            emit(&WorkerLine::Resumed {
                payout,
                token: ctx.token,
            });
            std::thread::spawn(move || waker.wait());
        }
        Box::pin(std::future::ready(()))
    }))
}

async fn run(args: WorkerArgs) -> Result<(), WorkerError> {
    let plan = Arc::new(PausePlan::default());
    // Only round mode reports claims (and freezes on one); continuous mode stays quiet.
    let hook = args.first.is_none().then(|| pause_hook(plan.clone()));
    let mut env = env_of(&args, hook)?;
    if let Some(path) = &args.history {
        let recorder =
            Recorder::create(path, &args.proc_name).map_err(|error| WorkerError::History {
                path: path.clone(),
                error,
            })?;
        env.history = Some(Arc::new(recorder));
    }
    if args.freeze.is_some() || args.history.is_some() {
        let freezes = args.freeze.clone().unwrap_or_default();
        env.on_step = Some(freeze_hook(freezes, env.history.clone()));
    }
    let worker = build_worker(args.idx, env)?;
    emit(&WorkerLine::Ready {
        pid: std::process::id(),
    });
    let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();

    if let Some(first) = args.first {
        let tally = Arc::new(Tally::default());
        let queue = Arc::new(match args.shuffle_block {
            Some(block) => WorkQueue::block_shuffled(
                first,
                args.count,
                block,
                args.seed.wrapping_add(args.idx),
            ),
            None => WorkQueue::new(first, args.count),
        });
        let (stop_tx, stop_rx) = watch::channel(false);
        let mut cpu_from = cpu_seconds(None);
        // The driver's `stop` (or its closing stdin) ends the run: one clock,
        // the driver's; its `reset` ends the warm-up.
        let control = async {
            while let Ok(Some(line)) = lines.next_line().await {
                match line.trim() {
                    "stop" => break,
                    "reset" => {
                        worker.reset_measurements();
                        tally.reset_counts();
                        cpu_from = cpu_seconds(None);
                    }
                    _ => {}
                }
            }
            let _ = stop_tx.send(true);
        };
        tokio::join!(control, worker.run(queue, tally.clone(), stop_rx));
        let client = worker.client();
        let stats = client.stats();
        emit(&WorkerLine::Done {
            tally: TallySnapshot::of(&tally),
            renewals: stats.renewals,
            heartbeat: Box::new(HeartbeatCounts::from(stats)),
            rtt_hdr: encode(&client.rtt_histogram())?,
            corrected_hdr: encode(&client.corrected_rtt_histogram())?,
            tick_lag_hdr: encode(&client.tick_lag_histogram())?,
            rail_hdr: encode(&worker.rail_histogram())?,
            gap_hdr: encode(&client.gap_histogram())?,
            cpu_s: cpu_seconds(None)
                .zip(cpu_from)
                .map(|(now, from)| (now - from).max(0.0)),
            margins_ppm: {
                let m = client.margin_stats().leases();
                Box::new([m.count, m.sum_ppm, m.min_ppm, m.max_ppm])
            },
        });
        return Ok(());
    }

    while let Some(line) = lines.next_line().await.map_err(WorkerError::Stdin)? {
        let parts: Vec<&str> = line.split_whitespace().collect();
        match parts.as_slice() {
            ["round", first, count, pause_at] => {
                let (first, count, pause_at): (u64, u64, u64) =
                    (first.parse()?, count.parse()?, pause_at.parse()?);
                plan.claims.store(0, Ordering::SeqCst);
                plan.pause_at.store(pause_at, Ordering::SeqCst);
                let tally = Arc::new(Tally::default());
                let (stop_tx, stop_rx) = watch::channel(false);
                let watcher = tokio::spawn(watch_tally(tally.clone(), stop_rx.clone()));
                worker
                    .run(
                        Arc::new(WorkQueue::new(first, count)),
                        tally.clone(),
                        stop_rx,
                    )
                    .await;
                let _ = stop_tx.send(true);
                let _ = watcher.await;
                emit(&WorkerLine::RoundDone {
                    tally: TallySnapshot::of(&tally),
                });
            }
            ["quit"] => break,
            [] => {}
            _ => return Err(WorkerError::UnknownCommand { line: line.clone() }),
        }
    }
    Ok(())
}

/// Prints a `tally` line whenever one of the [`Counter`]s goes up, so the
/// driver can place abandonments and fence refusals on the timeline.
async fn watch_tally(tally: Arc<Tally>, mut stop: watch::Receiver<bool>) {
    let mut seen = [0u64; Counter::ALL.len()];
    loop {
        for (i, field) in Counter::ALL.into_iter().enumerate() {
            let v = field.read(&tally);
            if v > seen[i] {
                seen[i] = v;
                emit(&WorkerLine::Tally { field, value: v });
            }
        }
        if *stop.borrow() {
            return;
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_millis(2)) => {}
            _ = stop.changed() => {}
        }
    }
}
