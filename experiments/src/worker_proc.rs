//! `experiments worker` (hidden): one `bench::worker::Worker` — the SDK payout
//! worker, not a copy of it — running in its own OS process, so the pause
//! experiment can freeze a whole process (its heartbeat task included) and the
//! throttle experiment can put it in a cgroup.
//!
//! It talks JSON lines on stdout ([`WorkerLine`]). In round mode (no
//! `--first`) it reads `round FIRST COUNT PAUSE_AT` lines on stdin and works
//! that backlog; on its `PAUSE_AT`-th successful claim of the round the
//! `on_claimed` hook prints `pausing` and raises SIGSTOP on the process — inside
//! the critical section, after fence 1 and before the D4 check. The driver
//! SIGCONTs it. In continuous mode (`--first/--count/--duration`) it works a
//! backlog for a while, saves its heartbeat RTT histogram and prints `done`.

use std::io::Write as _;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use bench::worker::{ClaimHook, Tally, WorkQueue, Worker, WorkerEnv};
use fencepost_sdk::MarginPolicy;
use nix::sys::signal::{Signal, raise};
use serde::{Deserialize, Serialize};
use tokio::io::AsyncBufReadExt as _;
use tokio::sync::watch;

use crate::cli::WorkerArgs;

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
    /// A client-side counter went up (see `bench::worker::Tally`).
    Tally {
        /// `abandoned_lost`, `abandoned_insufficient_lease`, `fenced_replies`, `paid_replies`, `acquire_failed`.
        field: String,
        /// Its new value (within the round).
        value: u64,
    },
    /// The round's backlog is done.
    RoundDone {
        /// The round's client-side counts.
        tally: TallySnapshot,
    },
    /// Continuous mode finished.
    Done {
        /// The client-side counts.
        tally: TallySnapshot,
        /// Renewals the SDK was granted.
        renewals: u64,
    },
}

/// A plain copy of `bench::worker::Tally`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TallySnapshot {
    /// Payout attempts started.
    pub attempts: u64,
    /// Submissions answered 200.
    pub paid_replies: u64,
    /// D4 refused: not enough lease for the rail hop.
    pub abandoned_insufficient_lease: u64,
    /// The lock was already lost at the check (no ledger call).
    pub abandoned_lost: u64,
    /// Acquires that gave up.
    pub acquire_failed: u64,
    /// Handles reported lost.
    pub lock_lost: u64,
    /// FENCED_OUT replies seen by the client.
    pub fenced_replies: u64,
    /// Rail transport errors.
    pub rail_transport_errors: u64,
    /// Mean usable lease fraction at grant.
    pub usable_lease_fraction: f64,
}

impl TallySnapshot {
    /// Copies `t`.
    pub fn of(t: &Tally) -> Self {
        let g = |a: &AtomicU64| a.load(Ordering::Relaxed);
        TallySnapshot {
            attempts: g(&t.attempts),
            paid_replies: g(&t.paid_replies),
            abandoned_insufficient_lease: g(&t.abandoned_insufficient_lease),
            abandoned_lost: g(&t.abandoned_lost),
            acquire_failed: g(&t.acquire_failed),
            lock_lost: g(&t.lock_lost),
            fenced_replies: g(&t.fenced_replies),
            rail_transport_errors: g(&t.rail_transport_errors),
            usable_lease_fraction: t.usable_lease_fraction(),
        }
    }

    /// Adds `o` into `self` (the lease fraction is averaged by attempts).
    pub fn add(&mut self, o: &TallySnapshot) {
        let total = self.attempts + o.attempts;
        if total > 0 {
            self.usable_lease_fraction = (self.usable_lease_fraction * self.attempts as f64
                + o.usable_lease_fraction * o.attempts as f64)
                / total as f64;
        }
        self.attempts = total;
        self.paid_replies += o.paid_replies;
        self.abandoned_insufficient_lease += o.abandoned_insufficient_lease;
        self.abandoned_lost += o.abandoned_lost;
        self.acquire_failed += o.acquire_failed;
        self.lock_lost += o.lock_lost;
        self.fenced_replies += o.fenced_replies;
        self.rail_transport_errors += o.rail_transport_errors;
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
            eprintln!("experiments worker: {e:#}");
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

async fn run(args: WorkerArgs) -> anyhow::Result<()> {
    let plan = Arc::new(PausePlan::default());
    let hook_plan = plan.clone();
    let hook = ClaimHook(Arc::new(move |payout: &str, token: u64| {
        emit(&WorkerLine::Claimed {
            payout: payout.to_string(),
            token,
        });
        let n = hook_plan.claims.fetch_add(1, Ordering::SeqCst) + 1;
        if n == hook_plan.pause_at.load(Ordering::SeqCst) {
            emit(&WorkerLine::Pausing {
                payout: payout.to_string(),
                token,
            });
            // The whole process stops here, heartbeat task and all, holding the
            // claim under `token`; the driver SIGCONTs it.
            let _ = raise(Signal::SIGSTOP);
            emit(&WorkerLine::Resumed {
                payout: payout.to_string(),
                token,
            });
        }
    }));
    let env = WorkerEnv {
        lock_url: args.lock_url.clone(),
        rail_url: args.rail_url.clone(),
        lease: args.lease,
        session_ttl: args.session_ttl,
        margin: MarginPolicy::Fixed(args.margin),
        rail_read_timeout: args.rail_read_timeout,
        worst_case_hop: args.worst_case_hop,
        client_check: !args.disable_client_check,
        acquire_budget: args.acquire_budget,
        payout_prefix: args.prefix.clone(),
        seed: args.seed,
        on_claimed: Some(hook),
    };
    let worker = Worker::new(args.idx, env)?;
    emit(&WorkerLine::Ready {
        pid: std::process::id(),
    });

    if let Some(first) = args.first {
        let tally = Arc::new(Tally::default());
        let queue = Arc::new(WorkQueue::new(first, args.count));
        let (stop_tx, stop_rx) = watch::channel(false);
        let duration = args.duration.unwrap_or(Duration::from_secs(10));
        let timer = tokio::spawn(async move {
            tokio::time::sleep(duration).await;
            let _ = stop_tx.send(true);
        });
        worker.run(queue, tally.clone(), stop_rx).await;
        timer.abort();
        if let Some(dir) = &args.hist_dir {
            bench::hist::save_histogram(
                dir,
                &format!("w{}", args.idx),
                &worker.client().rtt_histogram(),
            )?;
        }
        emit(&WorkerLine::Done {
            tally: TallySnapshot::of(&tally),
            renewals: worker.client().stats().renewals,
        });
        return Ok(());
    }

    let mut lines = tokio::io::BufReader::new(tokio::io::stdin()).lines();
    while let Some(line) = lines.next_line().await? {
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
            _ => anyhow::bail!("unknown command {line:?}"),
        }
    }
    Ok(())
}

/// Picks one counter out of a tally.
type Counter = fn(&Tally) -> &AtomicU64;

/// Prints a `tally` line whenever one of the watched counters goes up, so the
/// driver can place abandonments and fence refusals on the timeline.
async fn watch_tally(tally: Arc<Tally>, mut stop: watch::Receiver<bool>) {
    let fields: [(&str, Counter); 5] = [
        ("abandoned_lost", |t| &t.abandoned_lost),
        ("abandoned_insufficient_lease", |t| {
            &t.abandoned_insufficient_lease
        }),
        ("fenced_replies", |t| &t.fenced_replies),
        ("paid_replies", |t| &t.paid_replies),
        ("acquire_failed", |t| &t.acquire_failed),
    ];
    let mut seen = [0u64; 5];
    loop {
        for (i, (name, f)) in fields.iter().enumerate() {
            let v = f(&tally).load(Ordering::Relaxed);
            if v > seen[i] {
                seen[i] = v;
                emit(&WorkerLine::Tally {
                    field: (*name).to_string(),
                    value: v,
                });
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
