//! Injected heartbeat faults ([`HeartbeatFault`]), for tests and the fault
//! experiments: a muted task (ticks, watches deadlines, sends nothing) and a
//! stalled task (does nothing at all for a while, like a paused process).
//! Production code has no reason to inject one.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

/// A fault the heartbeat task can be told to simulate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HeartbeatFault {
    /// Normal operation (clears [`Mute`](Self::Mute)).
    None,
    /// The task keeps ticking and watching deadlines but sends nothing (no
    /// L2, no L5), as if every heartbeat were dropped: "heartbeat stopped".
    /// Muted ticks count as missed (`hb_ticks_missed`) and add no sample.
    Mute,
    /// The task does nothing at all for this long, starting now (a stalled or
    /// paused task), then runs its overdue tick at once. The schedule keeps
    /// its fixed rate: the ticks that fell in the stall are served by that one
    /// late exchange (no catch-up burst), each with its corrected sample.
    Stall(Duration),
}

/// The faults in force, read by the heartbeat task.
#[derive(Default)]
pub(crate) struct FaultState {
    /// [`HeartbeatFault::Mute`] in force.
    mute: AtomicBool,
    /// A pending [`HeartbeatFault::Stall`], ns (0 = none).
    stall_nanos: AtomicU64,
}

impl FaultState {
    /// Puts `fault` in force (the caller then wakes the task).
    pub(crate) fn inject(&self, fault: HeartbeatFault) {
        match fault {
            HeartbeatFault::None => self.mute.store(false, Ordering::Release),
            HeartbeatFault::Mute => self.mute.store(true, Ordering::Release),
            HeartbeatFault::Stall(d) => {
                let n = u64::try_from(d.as_nanos()).unwrap_or(u64::MAX).max(1);
                self.stall_nanos.store(n, Ordering::Release);
            }
        }
    }

    /// Whether the task must send nothing.
    pub(crate) fn muted(&self) -> bool {
        self.mute.load(Ordering::Acquire)
    }

    /// Takes a pending stall, if any.
    pub(crate) fn take_stall(&self) -> Option<Duration> {
        match self.stall_nanos.swap(0, Ordering::AcqRel) {
            0 => None,
            n => Some(Duration::from_nanos(n)),
        }
    }
}
