//! Faults a [`super::Stack`] injects into its own services while a cell's load
//! runs. A fault is a value ([`Fault`]); the stack starts one task per fault
//! when the measured window opens and stops it — leaving every service running
//! again — before the workers are joined. Today there is one kind, the
//! lock-server pause of `--server-pause`. The chaos experiment (issue 16)
//! draws schedules that change per run and mix worker and service faults, so
//! it applies them from its own cell [`super::Schedule`] through the stack's
//! handles instead (`Stack::lock_child`, `Stack::restart_lock`,
//! `Stack::proxy_control`).

use std::sync::{Arc, Mutex};

use fencepost_harness::ChildService;
use tokio::sync::watch;
use tokio::task::JoinHandle;

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
    /// One task per fault; each leaves its target running when it returns.
    tasks: Vec<JoinHandle<()>>,
}

impl FaultTasks {
    /// Starts one task per fault.
    pub(super) fn start(faults: &[Fault], targets: &FaultTargets) -> Self {
        let (stop, rx) = watch::channel(false);
        let tasks = faults
            .iter()
            .filter_map(|f| match *f {
                Fault::ServerPause(p) => targets
                    .lock
                    .clone()
                    .map(|lock| tokio::spawn(pause_loop(p, lock, rx.clone()))),
            })
            .collect();
        FaultTasks { stop, tasks }
    }

    /// Stops every fault task and waits for it to put its target back.
    pub(super) async fn stop(self) {
        let _ = self.stop.send(true);
        for t in self.tasks {
            let _ = t.await;
        }
    }
}

/// Pauses the lock-server for `p.pause_for` every `p.every` until `stop`;
/// it always resumes the server before returning.
async fn pause_loop(p: PauseSpec, lock: Arc<Mutex<ChildService>>, mut stop: watch::Receiver<bool>) {
    loop {
        tokio::select! {
            _ = tokio::time::sleep(p.every - p.pause_for) => {}
            _ = stop.changed() => return,
        }
        let _ = lock.lock().unwrap_or_else(|e| e.into_inner()).pause();
        tokio::select! {
            _ = tokio::time::sleep(p.pause_for) => {}
            _ = stop.changed() => {}
        }
        let _ = lock.lock().unwrap_or_else(|e| e.into_inner()).resume();
        if *stop.borrow() {
            return;
        }
    }
}
