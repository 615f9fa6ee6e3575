//! Faults a [`super::Stack`] injects into its own services while a cell's load
//! runs. A fault is a value ([`Fault`]); the stack starts one task per fault
//! when the measured window opens and stops it — leaving every service running
//! again — before the workers are joined. Today there is one kind, the
//! lock-server pause of `--server-pause`. The chaos experiment
//! draws schedules that change per run and mix worker and service faults, so
//! it applies them from its own cell [`super::Schedule`] through the stack's
//! handles instead (`Stack::lock_child`, `Stack::restart_lock`,
//! `Stack::proxy_control`).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use fencepost_harness::ChildService;
use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use bench_core::grid::PauseSpec;

/// One fault schedule over the services of a stack.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Fault {
    /// SIGSTOP the lock-server for `pause_for` every `every` (needs a process runtime).
    ServerPause(PauseSpec),
}

impl Fault {
    /// Why this fault cannot run on `targets`, if it cannot.
    pub fn unsupported(&self, targets: &FaultTargets) -> Option<&'static str> {
        match self {
            Fault::ServerPause(_) if targets.lock.is_none() => {
                Some("--server-pause needs --runtime process (it signals the lock-server process)")
            }
            Fault::ServerPause(_) => None,
        }
    }
}

/// What a fault may act on.
#[derive(Clone, Default)]
pub struct FaultTargets {
    /// The lock-server child, when the stack started one (shared with the stack, which kills it last).
    pub lock: Option<Arc<Mutex<ChildService>>>,
}

/// The running faults of a stack: their tasks and the signal that stops them.
pub(super) struct FaultTasks {
    /// Turns true to stop every fault task.
    stop: watch::Sender<bool>,
    /// One task per fault, with the fault; each leaves its target running
    /// when it returns, and returns how many times it was applied.
    tasks: Vec<(Fault, JoinHandle<u32>)>,
    /// When the schedules started: a fault is due once its first
    /// application time has passed.
    started: Instant,
}

impl FaultTasks {
    /// Starts one task per fault.
    pub(super) fn start(faults: &[Fault], targets: &FaultTargets) -> Self {
        let (stop, rx) = watch::channel(false);
        let started = Instant::now();
        let tasks = faults
            .iter()
            .filter_map(|f| match *f {
                Fault::ServerPause(p) => targets
                    .lock
                    .clone()
                    .map(|lock| (*f, tokio::spawn(pause_loop(p, lock, started, rx.clone())))),
            })
            .collect();
        FaultTasks {
            stop,
            tasks,
            started,
        }
    }

    /// Stops every fault task and waits for it to put its target back;
    /// returns how many times the faults were applied (the lock-server's
    /// SIGSTOPs) since [`FaultTasks::start`].
    ///
    /// A fault that fell due (its first application time passed) and was
    /// never applied is an error: the cell's row would name a condition it
    /// did not measure. It is logged at ERROR (`event="fault_not_applied"`)
    /// and returned, after every target is running again.
    pub(super) async fn stop(self) -> Result<u64, FaultNotApplied> {
        let ran = self.started.elapsed();
        let _ = self.stop.send(true);
        let mut missed = None;
        let mut total = 0;
        for (fault, t) in self.tasks {
            let applied = t.await.unwrap_or(0);
            total += u64::from(applied);
            if applied == 0 && ran > fault.first_due() {
                let e = FaultNotApplied {
                    fault,
                    ran_ms: ran.as_millis() as u64,
                };
                tracing::error!(event = "fault_not_applied", fault = ?fault, ran_ms = e.ran_ms, "{e}");
                missed.get_or_insert(e);
            }
        }
        missed.map_or(Ok(total), Err)
    }
}

impl Fault {
    /// How long after the window opens the schedule first applies the fault.
    fn first_due(&self) -> Duration {
        match self {
            Fault::ServerPause(p) => p.every - p.pause_for,
        }
    }
}

/// A fault schedule fell due during a cell's window and was never applied
/// (every signal failed, or its task never ran): the cell measured nothing
/// of it.
#[derive(Debug, thiserror::Error)]
#[error(
    "{fault} fell due in the cell's {ran_ms} ms window and was never applied \
     (the server_pause_failed lines above say why): the cell did not measure it; rerun it"
)]
pub struct FaultNotApplied {
    /// The fault.
    pub fault: Fault,
    /// How long its schedule ran, ms.
    pub ran_ms: u64,
}

impl std::fmt::Display for Fault {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Fault::ServerPause(p) => write!(f, "--server-pause {p}"),
        }
    }
}

/// Pauses the lock-server for `p.pause_for` every `p.every`, the first time
/// `every - pause_for` after `started`, until `stop`; it always resumes the
/// server before returning, and returns the pauses applied (a signal that
/// failed is logged and not counted).
///
/// Deadlines are absolute and checked before `stop`: once a pause is due it
/// is applied even when the stop arrives in the same instant, so a schedule
/// that [`FaultTasks::stop`] finds due has had its chance to run.
async fn pause_loop(
    p: PauseSpec,
    lock: Arc<Mutex<ChildService>>,
    started: Instant,
    mut stop: watch::Receiver<bool>,
) -> u32 {
    let mut applied = 0;
    let mut next = started + (p.every - p.pause_for);
    loop {
        tokio::select! {
            biased;
            _ = tokio::time::sleep_until(next) => {}
            _ = stop.changed() => return applied,
        }
        match lock.lock().unwrap_or_else(|e| e.into_inner()).pause() {
            Ok(()) => applied += 1,
            Err(e) => {
                tracing::error!(event = "server_pause_failed", error = %e, "--server-pause: SIGSTOP failed")
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(p.pause_for) => {}
            _ = stop.changed() => {}
        }
        if let Err(e) = lock.lock().unwrap_or_else(|e| e.into_inner()).resume() {
            tracing::error!(event = "server_resume_failed", error = %e, "--server-pause: SIGCONT failed");
        }
        if *stop.borrow() {
            return applied;
        }
        next += p.every;
    }
}

#[cfg(test)]
mod tests {
    use std::path::Path;

    use super::*;

    /// A `sleep 30` child standing in for the lock-server (killed on drop).
    fn sleeper(test: &str) -> Arc<Mutex<ChildService>> {
        let stderr =
            std::env::temp_dir().join(format!("fencepost-faults-{}-{test}", std::process::id()));
        let child = ChildService::spawn_unready(
            Path::new("sleep"),
            ["30"],
            &stderr,
            "127.0.0.1:9".parse().unwrap(),
        )
        .expect("sleep starts");
        Arc::new(Mutex::new(child))
    }

    fn pause(every_ms: u64, for_ms: u64) -> Fault {
        Fault::ServerPause(PauseSpec {
            every: Duration::from_millis(every_ms),
            pause_for: Duration::from_millis(for_ms),
        })
    }

    #[tokio::test]
    async fn a_due_pause_is_applied_and_the_stop_is_ok() {
        let lock = sleeper("applied");
        let targets = FaultTargets {
            lock: Some(lock.clone()),
        };
        let tasks = FaultTasks::start(&[pause(60, 20)], &targets);
        tokio::time::sleep(Duration::from_millis(100)).await;
        let applied = tasks
            .stop()
            .await
            .expect("the pause fell due and was applied");
        assert!(applied >= 1, "the pause due at 40 ms: {applied}");
    }

    /// The check that must fire: a server that cannot be signalled (here,
    /// already killed and reaped) leaves the cell without its fault.
    #[tokio::test]
    async fn a_due_pause_never_applied_is_an_error_naming_the_fault() {
        let lock = sleeper("never");
        lock.lock().unwrap().kill9();
        let targets = FaultTargets { lock: Some(lock) };
        let tasks = FaultTasks::start(&[pause(60, 20)], &targets);
        tokio::time::sleep(Duration::from_millis(100)).await;
        let e = tasks
            .stop()
            .await
            .expect_err("no SIGSTOP reached a process");
        assert_eq!(e.fault, pause(60, 20));
        assert!(e.to_string().contains("--server-pause 60ms:20ms"), "{e}");
    }

    #[tokio::test]
    async fn a_window_closed_before_the_first_pause_is_not_an_error() {
        let lock = sleeper("early");
        lock.lock().unwrap().kill9();
        let targets = FaultTargets { lock: Some(lock) };
        let tasks = FaultTasks::start(&[pause(60_000, 1_000)], &targets);
        assert_eq!(tasks.stop().await.expect("nothing fell due"), 0);
    }
}
