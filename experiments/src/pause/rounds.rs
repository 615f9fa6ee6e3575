//! The pause experiment's load: its rounds, as the cell driver's
//! [`Schedule`]. The paused worker `w0` is a worker process
//! in round mode, owned here; the others are the driver's pool, spawned per
//! round once `w0` is frozen. Every wait has a deadline ([`WAIT_LIMIT`]).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bench_driver::cell::{CellError, CellRun, Ended, PoolError, Schedule};
use bench_driver::rail::RailError;
use bench_driver::worker::{ClaimHook, TallySnapshot};
use bench_driver::worker_process::{
    Counter, WorkerChild, WorkerLine, WorkerMode, WorkerProcError, WorkerSpec, wait_stopped,
};
use fencepost_api::rail::{PayoutState, PayoutView, Submission, SubmissionOutcome};
use rand::{Rng as _, SeedableRng as _};
use rand_chacha::ChaCha8Rng;
use tokio::time::Instant;

use crate::pause::model::{PAUSED_WORKER, PauseConfig, PauseRecord, WAIT_LIMIT};
use crate::timeline::{Event, EventKind};

/// Why a pause round failed: the cell's [`Schedule`] error, in
/// [`CellError::Schedule`] (the driver's own errors stay its variants).
#[derive(Debug, thiserror::Error)]
pub enum RoundError {
    /// The paused worker's process failed; [`WorkerProcError`] says what to do.
    #[error(transparent)]
    Worker(#[from] WorkerProcError),
    /// The cell driver failed (backlog, other workers); its doc says what to do.
    #[error(transparent)]
    Cell(#[from] CellError),
    /// The rail-stub did not answer R5; [`RailError`] says what to do.
    #[error(transparent)]
    Rail(#[from] RailError),
    /// The other workers could not be joined; [`PoolError`] says what to do.
    #[error(transparent)]
    Pool(#[from] PoolError),
    /// The worker process's first line was not `ready`: a worker of another
    /// build; rebuild.
    #[error("worker process said {line:?} before ready")]
    NotReady {
        /// The line it printed (boxed: the `done` line is large).
        line: Box<WorkerLine>,
    },
    /// The paused worker worked its backlog without the freeze it was told:
    /// its log says why its claims failed.
    #[error("round {round} ended without a pause")]
    NoPause {
        /// The round, from 1.
        round: u32,
    },
    /// The other workers did not pay the frozen payout in time: check the
    /// lock-server's and rail-stub's logs (or give the machine less load).
    #[error("round {round}: {payout} was not taken over within {within:?} of the freeze")]
    NotTakenOver {
        /// The round, from 1.
        round: u32,
        /// The frozen payout.
        payout: String,
        /// How long the takeover was awaited.
        within: Duration,
    },
    /// Some other workers did not finish the round's backlog in time: see
    /// the logs; the machine may be overloaded.
    #[error("{late} other worker(s) did not finish round {round}")]
    Late {
        /// How many.
        late: u32,
        /// The round, from 1.
        round: u32,
    },
}

impl From<RoundError> for CellError {
    fn from(e: RoundError) -> Self {
        match e {
            RoundError::Cell(e) => e,
            RoundError::Rail(e) => CellError::Rail(e),
            RoundError::Pool(e) => CellError::Pool(e),
            e => CellError::schedule(e),
        }
    }
}

/// The rounds of one pause run, and what they recorded.
pub(super) struct Rounds<'a> {
    /// The configuration.
    cfg: &'a PauseConfig,
    /// The run's clock: every event is seconds since this instant.
    t0: Instant,
    /// Draws each round's freeze point from the seed.
    rng: ChaCha8Rng,
    /// The timeline, shared with the other workers' claim hook.
    events: Arc<Mutex<Vec<Event>>>,
    /// One record per round.
    pub records: Vec<PauseRecord>,
    /// The paused worker's client-side counts, all rounds.
    pub paused_tally: TallySnapshot,
}

impl<'a> Rounds<'a> {
    /// Rounds for `cfg`, their clock starting now.
    pub(super) fn new(cfg: &'a PauseConfig) -> Self {
        Rounds {
            cfg,
            t0: Instant::now(),
            rng: ChaCha8Rng::seed_from_u64(cfg.seed),
            events: Arc::default(),
            records: Vec::new(),
            paused_tally: TallySnapshot::default(),
        }
    }

    /// The other workers' claim hook: a `claimed` event on the timeline.
    pub(super) fn claim_hook(&self) -> ClaimHook {
        let (events, t0) = (self.events.clone(), self.t0);
        ClaimHook(Arc::new(move |idx: u64, payout: &str, token: u64| {
            push(
                &events,
                Event {
                    t_s: t0.elapsed().as_secs_f64(),
                    worker: format!("w{idx}"),
                    kind: EventKind::Claimed,
                    payout: Some(payout.into()),
                    token: Some(token),
                },
            );
        }))
    }

    /// The timeline in time order (taken out).
    pub(super) fn take_events(&self) -> Vec<Event> {
        let mut events =
            std::mem::take(&mut *self.events.lock().unwrap_or_else(|e| e.into_inner()));
        events.sort_by(|a, b| a.t_s.total_cmp(&b.t_s));
        events
    }

    /// Places one of `w0`'s lines on the timeline, if it is an event.
    fn record(&self, t_s: f64, line: &WorkerLine) {
        if let Some(e) = event_of(t_s, PAUSED_WORKER, line) {
            push(&self.events, e);
        }
    }

    /// The next line of `w0`, recorded on the timeline.
    async fn next(&self, w0: &mut WorkerChild) -> Result<WorkerLine, WorkerProcError> {
        let (t, line) = w0.next(WAIT_LIMIT).await?;
        self.record(t, &line);
        Ok(line)
    }

    /// One round: freeze `w0` in its critical section, let the others take
    /// its payout over, resume it, and record what became of its stale token.
    async fn round(
        &mut self,
        run: &mut CellRun<'_>,
        w0: &mut WorkerChild,
        round: u32,
    ) -> Result<(), RoundError> {
        let cfg = self.cfg;
        let backlog = run.seed_backlog(cfg.payouts_per_pause).await?;
        let pause_at = self.rng.random_range(1..=cfg.payouts_per_pause.min(3));
        println!(
            "round {round}/{}: payouts {}..{} , freeze on claim {pause_at}",
            cfg.pauses,
            backlog.first,
            backlog.first + backlog.count - 1
        );
        w0.send(&format!(
            "round {} {} {pause_at}",
            backlog.first, backlog.count
        ))
        .await?;

        // 1–2: the worker announces the freeze; wait until the kernel says stopped.
        let (stale_payout, stale_token) = loop {
            match self.next(w0).await? {
                WorkerLine::Pausing { payout, token } => break (payout, token),
                WorkerLine::RoundDone { .. } => return Err(RoundError::NoPause { round }),
                _ => {}
            }
        };
        wait_stopped(w0.pid(), Duration::from_secs(10)).await?;
        let stopped = Instant::now();
        let stopped_at_s = (stopped - self.t0).as_secs_f64();

        // 3: the others work the same backlog while it is frozen.
        run.spawn_workers(backlog, 1..u64::from(cfg.workers) + 1)?;

        // 4: at least pause_factor × lease, and until another worker paid the payout.
        let taken = self
            .await_takeover(run, round, &stale_payout, stale_token, stopped)
            .await?;
        w0.resume()?;
        let resumed_at_s = self.t0.elapsed().as_secs_f64();
        let held = self.token_words(stale_token);
        println!(
            "  froze {stale_payout} under {held} for {:.0} ms; resumed",
            (resumed_at_s - stopped_at_s) * 1e3
        );

        // 5: the resumed worker finishes its round (abandon or fence, then ALREADY_PAID).
        let tally = loop {
            if let WorkerLine::RoundDone { tally } = self.next(w0).await? {
                break tally;
            }
        };
        self.paused_tally.add(&tally);
        run.pool.stop().await;
        let late = run.pool.join(WAIT_LIMIT).await?;
        if late > 0 {
            return Err(RoundError::Late { late, round });
        }

        let view = run.stack.rail().payout(&stale_payout).await?;
        let stale_submissions = self.stale_submissions(&view, stale_token, taken);
        let outcome = stale_fate(&stale_submissions);
        match view.paid_token {
            Some(t) if self.cfg.rail_fences => {
                println!("  {held}: {outcome}; paid under token {t}")
            }
            _ => println!("  {held}: {outcome}; paid {} time(s)", paid_times(&view)),
        }
        self.records.push(PauseRecord {
            round,
            payout: stale_payout,
            stale_token,
            paid_token: view.paid_token,
            stopped_at_s,
            resumed_at_s,
            stale_submissions,
            outcome: outcome.into(),
            takeover_after_s: None,
        });
        Ok(())
    }
}

impl Rounds<'_> {
    /// Waits, from the freeze at `stopped`, for at least `pause_factor` ×
    /// lease and until the frozen payout is PAID by another worker: under a
    /// token above `stale_token` — or, with the rail's fences off (no
    /// fencing token: every token is 0), PAID at all, which while `w0` is
    /// frozen only another worker can have done. Returns how many
    /// submissions the payout had then: every later one is `w0`'s.
    async fn await_takeover(
        &self,
        run: &CellRun<'_>,
        round: u32,
        stale_payout: &str,
        stale_token: u64,
        stopped: Instant,
    ) -> Result<usize, RoundError> {
        let min_pause = run.plan.lease.mul_f64(self.cfg.pause_factor);
        let deadline = stopped + min_pause + WAIT_LIMIT;
        loop {
            let view = run.stack.rail().payout(stale_payout).await?;
            let higher = view.paid_token.is_some_and(|p| p > stale_token);
            let taken_over = view.state == PayoutState::Paid && (higher || !self.cfg.rail_fences);
            if taken_over && stopped.elapsed() >= min_pause {
                return Ok(view.submissions.len());
            }
            if Instant::now() >= deadline {
                return Err(RoundError::NotTakenOver {
                    round,
                    payout: stale_payout.to_string(),
                    within: min_pause + WAIT_LIMIT,
                });
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    /// How the round's lines name a token: "token N", or "no token" when
    /// the lock has none (the rail's fences off).
    fn token_words(&self, token: u64) -> String {
        if self.cfg.rail_fences {
            format!("token {token}")
        } else {
            "no token".into()
        }
    }

    /// What the ledger recorded for `w0`'s stale submissions: those under
    /// `stale_token`; with the rail's fences off (every token 0) those
    /// after the first `taken` (the takeover's), which only `w0`, resumed,
    /// can have sent — the others find the payout PAID at their claim.
    fn stale_submissions(
        &self,
        view: &PayoutView,
        stale_token: u64,
        taken: usize,
    ) -> Vec<SubmissionOutcome> {
        let theirs: Vec<&Submission> = if self.cfg.rail_fences {
            view.submissions
                .iter()
                .filter(|s| s.token == stale_token)
                .collect()
        } else {
            view.submissions.iter().skip(taken).collect()
        };
        theirs.into_iter().map(|s| s.outcome).collect()
    }
}

impl Schedule for Rounds<'_> {
    async fn drive(&mut self, run: &mut CellRun<'_>) -> Result<Ended, CellError> {
        // The paused worker: its own process, round mode, the experiment's client check.
        let mut env = run.plan.worker_env(run.stack, None);
        env.client_check = self.cfg.client_check;
        let spec = WorkerSpec::new(0, &env, WorkerMode::Rounds);
        let log = run.stack.dir().join("worker-0.log");
        let mut w0 = WorkerChild::spawn(&spec, &log, self.t0).map_err(RoundError::from)?;
        match self.next(&mut w0).await.map_err(RoundError::from)? {
            WorkerLine::Ready { .. } => {}
            other => {
                let line = Box::new(other);
                return Err(RoundError::NotReady { line }.into());
            }
        }
        for round in 1..=self.cfg.pauses {
            self.round(run, &mut w0, round).await?;
        }
        w0.quit().await;
        Ok(Ended::Completed)
    }
}

/// What became of a stale token, from the ledger's submissions under it.
fn stale_fate(submissions: &[SubmissionOutcome]) -> &'static str {
    if submissions.is_empty() {
        "abandoned"
    } else if submissions.contains(&SubmissionOutcome::Paid) {
        "paid"
    } else if submissions.contains(&SubmissionOutcome::FencedOut) {
        "fenced_out"
    } else {
        "refused"
    }
}

/// How many submissions paid `view`'s payout.
fn paid_times(view: &PayoutView) -> usize {
    view.submissions
        .iter()
        .filter(|s| s.outcome == SubmissionOutcome::Paid)
        .count()
}

fn push(events: &Mutex<Vec<Event>>, e: Event) {
    events.lock().unwrap_or_else(|e| e.into_inner()).push(e);
}

/// Turns a worker line into a timeline event.
fn event_of(t_s: f64, worker: &str, line: &WorkerLine) -> Option<Event> {
    let ev = |kind, payout: Option<&String>, token: Option<u64>| Event {
        t_s,
        worker: worker.into(),
        kind,
        payout: payout.cloned(),
        token,
    };
    match line {
        WorkerLine::Claimed { payout, token } => {
            Some(ev(EventKind::Claimed, Some(payout), Some(*token)))
        }
        WorkerLine::Pausing { payout, token } => {
            Some(ev(EventKind::Pausing, Some(payout), Some(*token)))
        }
        WorkerLine::Resumed { payout, token } => {
            Some(ev(EventKind::Resumed, Some(payout), Some(*token)))
        }
        WorkerLine::Tally { field, .. } => match field {
            Counter::AbandonedLost | Counter::AbandonedInsufficientLease => {
                Some(ev(EventKind::Abandoned, None, None))
            }
            Counter::FencedReplies => Some(ev(EventKind::Fenced, None, None)),
            Counter::PaidReplies => Some(ev(EventKind::Paid, None, None)),
            Counter::AcquireFailed => None,
        },
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use bench_core::error::Chain;

    use super::*;

    #[test]
    fn a_round_failure_reaches_the_driver_with_its_message_and_its_causes() {
        let e = CellError::from(RoundError::Worker(WorkerProcError::Resume(
            nix::errno::Errno::ESRCH,
        )));
        assert!(matches!(e, CellError::Schedule(_)));
        assert_eq!(
            Chain(&e).to_string(),
            format!("SIGCONT: {}", nix::errno::Errno::ESRCH)
        );
        let late = CellError::from(RoundError::Late { late: 2, round: 3 });
        assert_eq!(
            Chain(&late).to_string(),
            "2 other worker(s) did not finish round 3"
        );
    }

    #[test]
    fn the_drivers_own_errors_go_back_as_what_they_were() {
        let e = CellError::from(RoundError::Cell(CellError::NoWindow {
            cell: "pause".into(),
        }));
        assert!(matches!(e, CellError::NoWindow { .. }), "{e:?}");
    }
}
