//! The child side of a worker process: one [`crate::worker::Worker`] — the
//! payout worker, not a copy of it, on the SDK or on etcd — running in its
//! own OS process, so an experiment can freeze a whole process (its
//! heartbeat task included) or put it in a cgroup. The executable that hosts
//! it has a hidden `worker --spec JSON` subcommand that calls [`main`].
//!
//! It talks JSON lines on stdout ([`WorkerLine`]). In round mode
//! ([`WorkerMode::Rounds`]) it reads `round FIRST COUNT PAUSE_AT` lines on
//! stdin and works that backlog; on its `PAUSE_AT`-th successful claim of the
//! round the `on_claimed` hook prints `pausing` and raises SIGSTOP on the
//! process — inside the critical section, after fence 1 and before the D4
//! check. The parent SIGCONTs it. In continuous mode it works its backlog
//! until the parent writes `stop` (or closes stdin), then prints `done` with
//! its counts, its SDK heartbeat counters, its histograms (raw and corrected
//! RTT, tick lag, rail latency) and the CPU seconds it used; a `reset` line
//! (the cell's warm-up ended) zeroes all of that first. The parent side is
//! [`crate::worker_process::parent`].

use std::num::ParseIntError;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bench_core::cpu::cpu_seconds;
use bench_core::error::Chain;
use bench_core::hist::{EncodeError, encode};
use bench_history::{OpKind, Outcome, Recorder};
use nix::sys::signal::{Signal, raise};
use tokio::io::AsyncBufReadExt as _;
use tokio::sync::watch;

use crate::cell::pool::HeartbeatCounts;
use crate::worker::env::{ClaimHook, Step, StepCtx, StepHook};
use crate::worker::payout::{BuildError, RunWorker, build_worker};
use crate::worker::tally::{Tally, WorkQueue};
use crate::worker_process::line::{Counter, WorkerLine, emit};
use crate::worker_process::spec::{AppliedMargins, FreezeStep, Freezes, WorkerMode, WorkerSpec};

/// Why a worker process stopped with exit code 1. It prints the error on
/// its stderr, which the parent keeps as the worker's log.
#[derive(Debug, thiserror::Error)]
pub enum WorkerError {
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

/// The hidden `worker` subcommand's entry point; returns the exit code.
pub fn main(spec: WorkerSpec) -> i32 {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime");
    match rt.block_on(run(spec)) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("worker process: {}", Chain(&e));
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
    let seen = Arc::new([AtomicU64::new(0), AtomicU64::new(0), AtomicU64::new(0)]);
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
            Step::LegPaid => (2, FreezeStep::LegPaid),
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
                eprintln!("worker process: cannot start the SIGCONT helper; not freezing");
                continue;
            };
            let payout = ctx.payout_id.to_string();
            emit(&WorkerLine::Pausing {
                payout: payout.clone(),
                token: ctx.token,
            });
            // The step is in the session's name: the freeze op of a leg
            // boundary holds a payout too, like the one after a check.
            let session = match step {
                FreezeStep::LegPaid => format!("freeze-leg/{}", p.for_ms),
                _ => format!("freeze/{}", p.for_ms),
            };
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

async fn run(spec: WorkerSpec) -> Result<(), WorkerError> {
    let plan = Arc::new(PausePlan::default());
    let worker = start(&spec, &plan)?;
    emit(&WorkerLine::Ready {
        pid: std::process::id(),
    });
    let lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    match spec.mode {
        WorkerMode::Continuous { first, count } => {
            let queue = match spec.shuffle_block {
                Some(block) => {
                    WorkQueue::block_shuffled(first, count, block, spec.seed.wrapping_add(spec.idx))
                }
                None => WorkQueue::new(first, count),
            };
            run_continuous(worker.as_ref(), queue, lines).await
        }
        WorkerMode::Rounds => run_rounds(worker.as_ref(), &plan, lines).await,
    }
}

/// The worker of `spec`, with its hooks: round mode reports claims (and
/// freezes on one), continuous mode stays quiet; a history or self-freezes
/// add the step hook.
fn start(spec: &WorkerSpec, plan: &Arc<PausePlan>) -> Result<Arc<dyn RunWorker>, WorkerError> {
    let hook = (spec.mode == WorkerMode::Rounds).then(|| pause_hook(plan.clone()));
    let mut env = spec.env(hook);
    if let Some(h) = &spec.history {
        let recorder =
            Recorder::create(&h.path, &h.proc_name).map_err(|error| WorkerError::History {
                path: h.path.clone(),
                error,
            })?;
        env.history = Some(Arc::new(recorder));
    }
    if !spec.freezes.0.is_empty() || spec.history.is_some() {
        env.on_step = Some(freeze_hook(spec.freezes.clone(), env.history.clone()));
    }
    Ok(build_worker(spec.idx, env)?)
}

/// Stdin lines of the parent.
type Lines = tokio::io::Lines<tokio::io::BufReader<tokio::io::Stdin>>;

/// Continuous mode: works `queue` until the parent's `stop` (or its
/// closing stdin) — one clock, the parent's; its `reset` ends the warm-up —
/// then prints the final `done` line.
async fn run_continuous(
    worker: &dyn RunWorker,
    queue: WorkQueue,
    mut lines: Lines,
) -> Result<(), WorkerError> {
    let tally = Arc::new(Tally::default());
    let (stop_tx, stop_rx) = watch::channel(false);
    let mut cpu_from = cpu_seconds(None);
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
    tokio::join!(control, worker.run(Arc::new(queue), tally.clone(), stop_rx));
    emit(&done_line(worker, &tally, cpu_from)?);
    Ok(())
}

/// The final line of a continuous-mode worker: its counts, the SDK's
/// counters, histograms and applied margins, the CPU it used since `cpu_from`.
fn done_line(
    worker: &dyn RunWorker,
    tally: &Tally,
    cpu_from: Option<f64>,
) -> Result<WorkerLine, WorkerError> {
    let client = worker.client();
    let stats = client.stats();
    Ok(WorkerLine::Done {
        tally: tally.snapshot(),
        renewals: stats.renewals,
        heartbeat: Box::new(HeartbeatCounts::from(stats)),
        rtt_hdr: encode(&client.rtt_histogram())?,
        corrected_hdr: encode(&client.corrected_rtt_histogram())?,
        tick_lag_hdr: encode(&client.tick_lag_histogram())?,
        rail_hdr: encode(&worker.rail_histogram())?,
        gap_hdr: encode(&client.gap_histogram())?,
        renew_hdr: Box::new((
            encode(&client.renew_rtt_histogram())?,
            encode(&client.renew_corrected_histogram())?,
        )),
        cpu_s: cpu_seconds(None)
            .zip(cpu_from)
            .map(|(now, from)| (now - from).max(0.0)),
        margins: Box::new(AppliedMargins(client.margin_stats().leases())),
    })
}

/// Round mode: `round FIRST COUNT PAUSE_AT` works that backlog (freezing
/// on the `PAUSE_AT`-th claim) and prints `round_done`; `quit` ends.
async fn run_rounds(
    worker: &dyn RunWorker,
    plan: &PausePlan,
    mut lines: Lines,
) -> Result<(), WorkerError> {
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
                    tally: tally.snapshot(),
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
