//! What a worker process prints: one JSON object per stdout line
//! ([`WorkerLine`]); its last one in continuous mode is `done`
//! ([`WorkerLine::Done`]), which the parent turns into the pool's
//! [`WorkerReport`](crate::cell::WorkerReport).

use std::io::Write as _;
use std::sync::atomic::Ordering;

use bench_core::tally::TallySnapshot;
use serde::{Deserialize, Serialize};

use crate::cell::pool::HeartbeatCounts;
use crate::worker::tally::Tally;
use crate::worker_process::spec::AppliedMargins;

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
    /// A client-side counter went up (see [`Tally`]).
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
    /// Continuous mode finished: the worker's final line.
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
        /// The raw renewal (L5) RTT histogram and the one from the scheduled
        /// tick, encoded (empty: none recorded); boxed to keep the enum small.
        #[serde(default)]
        renew_hdr: Box<(String, String)>,
        /// CPU seconds this process used since its start or its last `reset`.
        #[serde(default)]
        cpu_s: Option<f64>,
        /// The margins the SDK applied to lease deadlines (L4, L5) since the
        /// last `reset` (`margin_effective`), the SDK's own summary; boxed
        /// to keep the enum small.
        #[serde(default)]
        margins: Box<AppliedMargins>,
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

/// Prints one line and flushes (the parent timestamps lines as they arrive).
pub fn emit(line: &WorkerLine) {
    let mut out = std::io::stdout().lock();
    let _ = serde_json::to_writer(&mut out, line);
    let _ = out.write_all(b"\n");
    let _ = out.flush();
}
