//! The fault schedules of `experiments chaos`: pure values drawn from a
//! run's seed ([`draw`]), recorded in `chaos.json` so any run replays alone.
//! A schedule is a list of [`PlannedFault`]s on the run's clock (ms from the
//! window's opening); faults whose intervals intersect are the overlaps.
//! Worker freezes are the exception: a worker process freezes *itself* at
//! the N-th time it reaches a step ([`FreezePoint`]), so it is frozen at
//! exactly the point of its payout the fault names, whenever that comes.

pub use bench_driver::worker_process::{FreezePoint, FreezeStep, Freezes};
use rand::{Rng as _, SeedableRng as _};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

/// One kind of fault.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    /// A worker process SIGSTOPs itself after its client check passed,
    /// before the submit (inside the critical section), for longer than its lease.
    WorkerFreezeInCs,
    /// A worker process SIGSTOPs itself between payouts, holding no lock.
    WorkerFreezeOutsideCs,
    /// `--long-holds`: a worker process SIGSTOPs itself after a leg of a
    /// multi-step payout was paid, before the next leg's claim, for longer
    /// than its lease: its claim after the thaw meets a successor's (fence 1).
    WorkerFreezeBetweenLegs,
    /// The driver SIGSTOPs a worker process at an arbitrary instant.
    WorkerSigstop,
    /// kill -9 of a worker process; a new one takes its place.
    WorkerKill9,
    /// SIGSTOP of the lock-server.
    LockServerSigstop,
    /// kill -9 of the lock-server and a restart on the same durable store.
    LockServerRestart,
    /// The proxy's delay jumps for every lock exchange.
    DelaySpike,
    /// The proxy loses a fraction of the lock requests.
    LossSpike,
    /// Replicas: kill -9 of the replica that leads; after `for_ms` it is
    /// restarted in its place and rejoins as a standby.
    LeaderKill9,
    /// Replicas: SIGSTOP of the replica that leads for longer than the
    /// leader lease (another takes over), then SIGCONT: it must not serve.
    LeaderSigstop,
    /// Replicas: kill -9 of a standby, restarted after `for_ms`.
    StandbyKill9,
    /// Replicas: PostgreSQL restarted in immediate mode (a crash: no
    /// checkpoint, every connection cut), with `--pg-dir`.
    PostgresRestart,
    /// Replicas: the leader cut off from PostgreSQL (its relay holds every
    /// byte) while its clients still reach it, for longer than the leader
    /// lease; healed, what it had sent arrives late.
    LeaderDbCut,
    /// Replicas: every exchange on the leader's PostgreSQL connections
    /// delayed by `delay_ms` (a round trip), up to 3 leader leases.
    LeaderDbDelay,
}

impl FaultKind {
    /// Every kind the process runtime can inject.
    pub const PROCESS: [FaultKind; 8] = [
        FaultKind::WorkerFreezeInCs,
        FaultKind::WorkerFreezeOutsideCs,
        FaultKind::WorkerSigstop,
        FaultKind::WorkerKill9,
        FaultKind::LockServerSigstop,
        FaultKind::LockServerRestart,
        FaultKind::DelaySpike,
        FaultKind::LossSpike,
    ];

    /// Every kind a replicated run (`--replicas N` on PostgreSQL) draws
    /// from: the worker faults and the replicas' own; no proxy, so no delay
    /// or loss spikes (the proxy fronts one lock-server).
    pub const REPLICATED: [FaultKind; 10] = [
        FaultKind::WorkerFreezeInCs,
        FaultKind::WorkerFreezeOutsideCs,
        FaultKind::WorkerSigstop,
        FaultKind::WorkerKill9,
        FaultKind::LeaderKill9,
        FaultKind::LeaderSigstop,
        FaultKind::StandbyKill9,
        FaultKind::PostgresRestart,
        FaultKind::LeaderDbCut,
        FaultKind::LeaderDbDelay,
    ];

    /// The name in `chaos.json` and the tables.
    pub fn as_str(self) -> &'static str {
        match self {
            FaultKind::WorkerFreezeInCs => "worker_freeze_in_cs",
            FaultKind::WorkerFreezeOutsideCs => "worker_freeze_outside_cs",
            FaultKind::WorkerFreezeBetweenLegs => "worker_freeze_between_legs",
            FaultKind::WorkerSigstop => "worker_sigstop",
            FaultKind::WorkerKill9 => "worker_kill9",
            FaultKind::LockServerSigstop => "lock_server_sigstop",
            FaultKind::LockServerRestart => "lock_server_kill9_restart",
            FaultKind::DelaySpike => "delay_spike",
            FaultKind::LossSpike => "loss_spike",
            FaultKind::LeaderKill9 => "leader_kill9",
            FaultKind::LeaderSigstop => "leader_sigstop",
            FaultKind::StandbyKill9 => "standby_kill9",
            FaultKind::PostgresRestart => "postgres_restart",
            FaultKind::LeaderDbCut => "leader_db_cut",
            FaultKind::LeaderDbDelay => "leader_db_delay",
        }
    }

    /// A self-freeze of a worker process (timed by its own steps).
    pub fn is_freeze(self) -> bool {
        matches!(
            self,
            FaultKind::WorkerFreezeInCs
                | FaultKind::WorkerFreezeOutsideCs
                | FaultKind::WorkerFreezeBetweenLegs
        )
    }
}

/// One fault of a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PlannedFault {
    /// What.
    pub kind: FaultKind,
    /// When it starts, ms from the window's opening (freezes: not before).
    pub at_ms: u64,
    /// How long it lasts, ms (0: an instant, kill -9).
    pub for_ms: u64,
    /// The worker it targets (worker faults); for a standby kill, which
    /// standby (0-based, in replica order, the leader skipped).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub worker: Option<u64>,
    /// Freezes: at the N-th time the worker reaches the step.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nth: Option<u64>,
    /// Delay spikes: the added round trip, ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delay_ms: Option<u64>,
    /// Loss spikes: the fraction of requests lost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub loss: Option<f64>,
}

impl PlannedFault {
    /// Whether it overlaps `o` in time (freezes count from their `at_ms`).
    pub fn overlaps(&self, o: &PlannedFault) -> bool {
        let end = |f: &PlannedFault| f.at_ms + f.for_ms.max(1);
        self.at_ms < end(o) && o.at_ms < end(self)
    }
}

/// One run's schedule.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunSchedule {
    /// The run's index (`--only-run`).
    pub run: u32,
    /// Its seed: `--seed` + index.
    pub seed: u64,
    /// Its faults, by start.
    pub faults: Vec<PlannedFault>,
}

impl RunSchedule {
    /// Pairs of faults that overlap in time.
    pub fn overlaps(&self) -> u64 {
        let f = &self.faults;
        let mut n = 0;
        for (i, a) in f.iter().enumerate() {
            n += f[i + 1..].iter().filter(|b| a.overlaps(b)).count() as u64;
        }
        n
    }

    /// The self-freezes of worker `idx` (its spec's `freezes`).
    pub fn freezes_of(&self, idx: u64) -> Freezes {
        Freezes(
            self.faults
                .iter()
                .filter(|f| f.kind.is_freeze() && f.worker == Some(idx))
                .map(|f| FreezePoint {
                    step: match f.kind {
                        FaultKind::WorkerFreezeInCs => FreezeStep::Checked,
                        FaultKind::WorkerFreezeBetweenLegs => FreezeStep::LegPaid,
                        _ => FreezeStep::Idle,
                    },
                    nth: f.nth.unwrap_or(1),
                    for_ms: f.for_ms,
                })
                .collect(),
        )
    }
}

/// What a run's schedule is drawn within.
#[derive(Clone, Debug)]
pub struct ScheduleParams {
    /// The lease, ms: fault lengths are multiples of it.
    pub lease_ms: u64,
    /// The run's window, ms: every fault ends by 80 % of it.
    pub duration_ms: u64,
    /// Worker processes at the start.
    pub workers: u64,
    /// The kinds to draw from.
    pub kinds: Vec<FaultKind>,
    /// Faults drawn besides the one freeze in the critical section every run has.
    pub extra: std::ops::RangeInclusive<u64>,
    /// The replicas' leader lease, ms: a leader freeze outlasts it.
    pub leader_lease_ms: u64,
    /// Lock-server replicas (standby kills pick one of the others).
    pub replicas: u64,
    /// Long holds (`--long-holds`): the freeze in the critical section
    /// comes at the worker's first check, and a second worker freezes
    /// between two legs of a payout (after one was paid, before the next
    /// one's claim); each lasts 1.8–2.1 leases: past the moment its key is
    /// free again (the lease's server end, from a renewal just before the
    /// freeze, plus grace and the session's end: measured 1.5–1.8 leases
    /// after the freeze began under the contenders' load), yet short enough
    /// that the successor's claim often still stands, mid-hold, when the
    /// frozen holder's stale submit (fence 2) or stale claim (fence 1) arrives.
    pub long_holds: bool,
}

/// Draws run `run`'s schedule from `seed`: one worker frozen inside its
/// critical section (the fault the fences exist for), over replicas one
/// leader kill -9 or freeze (the fault the epoch exists for), plus `extra` faults
/// of kinds drawn uniformly, at uniform times in the first 60 % of the
/// window, lasting 0.5–3 leases; every fault ends within 80 % of it.
pub fn draw(run: u32, seed: u64, p: &ScheduleParams) -> RunSchedule {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let lease = p.lease_ms.max(1);
    let horizon = p.duration_ms * 8 / 10;
    let mut faults = Vec::new();
    let extra = rng.random_range(p.extra.clone());
    let mut kinds = vec![FaultKind::WorkerFreezeInCs];
    if p.replicas > 1 {
        // Steered: every replicated run changes leader at least once, so the
        // situations a leader change creates (a regrant across it, a deposed
        // leader's refused write) occur in most runs, not by luck.
        // Half the time the leader's database is cut while its clients
        // still reach it: its writes in flight are held past the takeover
        // and refused by the epoch fence when they land (the deposed
        // leader's write); else a kill -9 or a SIGSTOP.
        kinds.push(match rng.random_range(0..4u8) {
            0 => FaultKind::LeaderKill9,
            1 => FaultKind::LeaderSigstop,
            _ => FaultKind::LeaderDbCut,
        });
    }
    for _ in 0..extra {
        if p.kinds.is_empty() {
            break;
        }
        kinds.push(p.kinds[rng.random_range(0..p.kinds.len())]);
    }
    if p.long_holds {
        // Drawn last, so the faults before it are those of a run without it.
        kinds.push(FaultKind::WorkerFreezeBetweenLegs);
    }
    for kind in kinds {
        let at_ms = rng.random_range(p.duration_ms / 10..=p.duration_ms * 6 / 10);
        let span = |rng: &mut ChaCha8Rng, lo: f64, hi: f64| {
            (lease as f64 * rng.random_range(lo..=hi)).round() as u64
        };
        let mut f = PlannedFault {
            kind,
            at_ms,
            for_ms: 0,
            worker: None,
            nth: None,
            delay_ms: None,
            loss: None,
        };
        match kind {
            FaultKind::WorkerFreezeInCs | FaultKind::WorkerFreezeBetweenLegs if p.long_holds => {
                f.for_ms = span(&mut rng, 1.8, 2.1);
                f.worker = Some(rng.random_range(0..p.workers.max(1)));
                f.nth = Some(1);
                f.at_ms = 0;
            }
            FaultKind::WorkerFreezeInCs
            | FaultKind::WorkerFreezeOutsideCs
            | FaultKind::WorkerFreezeBetweenLegs => {
                // Long enough for the lease to lapse and another worker to take over.
                f.for_ms = span(&mut rng, 2.0, 3.0);
                f.worker = Some(rng.random_range(0..p.workers.max(1)));
                f.nth = Some(rng.random_range(1..=4));
                f.at_ms = 0;
            }
            FaultKind::WorkerSigstop => {
                f.for_ms = span(&mut rng, 0.5, 3.0);
                f.worker = Some(rng.random_range(0..p.workers.max(1)));
            }
            FaultKind::WorkerKill9 => f.worker = Some(rng.random_range(0..p.workers.max(1))),
            FaultKind::LockServerSigstop => f.for_ms = span(&mut rng, 0.3, 2.0),
            FaultKind::LockServerRestart => {}
            FaultKind::DelaySpike => {
                f.for_ms = span(&mut rng, 0.5, 2.0);
                f.delay_ms = Some(span(&mut rng, 0.05, 0.6));
            }
            FaultKind::LossSpike => {
                f.for_ms = span(&mut rng, 0.5, 2.0);
                f.loss = Some((rng.random_range(0.1..=0.6f64) * 100.0).round() / 100.0);
            }
            FaultKind::LeaderKill9 => f.for_ms = span(&mut rng, 1.0, 3.0),
            FaultKind::LeaderSigstop => {}
            FaultKind::StandbyKill9 => {
                f.for_ms = span(&mut rng, 1.0, 4.0);
                f.worker = Some(rng.random_range(0..p.replicas.saturating_sub(1).max(1)));
            }
            FaultKind::PostgresRestart | FaultKind::LeaderDbCut => {}
            FaultKind::LeaderDbDelay => {
                let lease = p.leader_lease_ms as f64;
                f.for_ms = (lease * rng.random_range(1.0..=2.0f64)).round() as u64;
                f.delay_ms = Some((lease * rng.random_range(0.1..=3.0f64)).round() as u64);
            }
        }
        f.for_ms = f.for_ms.min(horizon.saturating_sub(f.at_ms));
        if matches!(kind, FaultKind::LeaderSigstop | FaultKind::LeaderDbCut) {
            // Longer than the leader lease, whatever the window: a standby
            // must take over while this one is frozen.
            let lease = p.leader_lease_ms as f64;
            f.for_ms = (lease * rng.random_range(1.3..=2.2f64)).round() as u64;
        }
        faults.push(f);
    }
    faults.sort_by_key(|f| (f.at_ms, f.kind));
    RunSchedule { run, seed, faults }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> ScheduleParams {
        ScheduleParams {
            lease_ms: 500,
            duration_ms: 4000,
            workers: 3,
            kinds: FaultKind::PROCESS.to_vec(),
            extra: 1..=3,
            leader_lease_ms: 1000,
            replicas: 1,
            long_holds: false,
        }
    }

    #[test]
    fn long_holds_freeze_at_the_first_check_and_between_legs_past_the_lease() {
        let p = ScheduleParams {
            long_holds: true,
            ..params()
        };
        let between_legs = |faults: &[PlannedFault]| {
            faults
                .iter()
                .filter(|f| f.kind == FaultKind::WorkerFreezeBetweenLegs)
                .count()
        };
        for i in 0..50 {
            let run = draw(i, u64::from(i), &p);
            assert_eq!(between_legs(&run.faults), 1, "{run:?}");
            for f in run.faults {
                if matches!(
                    f.kind,
                    FaultKind::WorkerFreezeInCs | FaultKind::WorkerFreezeBetweenLegs
                ) {
                    assert_eq!(f.nth, Some(1), "{f:?}");
                    assert!((900..=1050).contains(&f.for_ms), "{f:?}");
                }
            }
            // Drawn last: the run's other faults are those of a run without it.
            let plain = draw(i, u64::from(i), &params());
            assert_eq!(between_legs(&plain.faults), 0, "{plain:?}");
        }
    }

    #[test]
    fn a_freeze_between_legs_is_the_workers_leg_step() {
        let run = RunSchedule {
            run: 0,
            seed: 0,
            faults: vec![PlannedFault {
                kind: FaultKind::WorkerFreezeBetweenLegs,
                at_ms: 0,
                for_ms: 7000,
                worker: Some(2),
                nth: Some(1),
                delay_ms: None,
                loss: None,
            }],
        };
        assert_eq!(run.freezes_of(2).to_string(), "leg@1:7000");
        assert!(run.freezes_of(1).0.is_empty());
    }

    #[test]
    fn a_schedule_replays_from_its_seed_and_ends_inside_the_window() {
        let a = draw(3, 42, &params());
        assert_eq!(a, draw(3, 42, &params()));
        assert_ne!(a, draw(3, 43, &params()));
        assert!(
            a.faults
                .iter()
                .any(|f| f.kind == FaultKind::WorkerFreezeInCs)
        );
        for f in &a.faults {
            assert!(f.at_ms + f.for_ms <= 3200, "{f:?}");
        }
    }

    #[test]
    fn many_runs_draw_every_kind() {
        let mut seen = std::collections::BTreeSet::new();
        for i in 0..200 {
            seen.extend(
                draw(i, 1 + u64::from(i), &params())
                    .faults
                    .iter()
                    .map(|f| f.kind),
            );
        }
        assert_eq!(seen.len(), FaultKind::PROCESS.len());
    }

    #[test]
    fn replicated_runs_draw_every_replica_kind_and_freeze_leaders_past_their_lease() {
        let p = ScheduleParams {
            kinds: FaultKind::REPLICATED.to_vec(),
            replicas: 3,
            ..params()
        };
        let mut seen = std::collections::BTreeMap::new();
        for i in 0..200 {
            for f in draw(i, 1 + u64::from(i), &p).faults {
                *seen.entry(f.kind).or_insert(0u32) += 1;
                match f.kind {
                    FaultKind::LeaderSigstop | FaultKind::LeaderDbCut => {
                        assert!(f.for_ms > p.leader_lease_ms, "{f:?}")
                    }
                    FaultKind::LeaderDbDelay => assert!(f.delay_ms.is_some(), "{f:?}"),
                    FaultKind::StandbyKill9 => assert!(f.worker.is_some_and(|w| w < 2), "{f:?}"),
                    FaultKind::DelaySpike | FaultKind::LossSpike => panic!("no proxy: {f:?}"),
                    _ => {}
                }
            }
        }
        for k in FaultKind::REPLICATED {
            // 200 runs of 1-3 extra faults over 10 kinds: each about 40 times.
            assert!(seen.get(&k).copied().unwrap_or(0) >= 20, "{k:?}: {seen:?}");
        }
    }
}
