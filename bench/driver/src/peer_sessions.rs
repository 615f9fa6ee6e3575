//! `bench peer --sessions`: N live sessions (fencepost) or N leases (etcd)
//! kept alive on the SDK's schedule, open loop, over a bounded set of
//! connections, and every tick of the schedule counted.
//!
//! **Schedule.** Session `i` of `n` heartbeats at `t0 + phase(i) + k ×
//! period` ([`bench_core::peer_sessions`]): its tick 0 opens it (L1, or
//! LeaseGrant with the TTL rounded up to whole seconds), so the n opens are
//! spread over the first period and bounded by the number of lanes; every
//! later tick sends one heartbeat (L2, or one LeaseKeepAlive). The intended
//! send time is fixed by the schedule, never by the previous reply.
//!
//! **Lanes.** The sessions are dealt round-robin to K lanes, each one task
//! on one connection (fencepost: the SDK's HTTP/1.1 client, one keep-alive
//! connection; etcd: one gRPC channel with one keep-alive stream that
//! carries every lease of the lane). A lane visits its sessions in phase
//! order, sleeping until each tick, one exchange at a time. A real fleet has
//! one connection per client process; 10⁵ sockets from one driver would
//! hit its descriptors and memory before the server's, so K is bounded and
//! recorded.
//!
//! **Accounting** (docs/measurement.md). When a lane reaches a session, the
//! ticks of that session that have fallen due since its last heartbeat are
//! all served by one exchange, sent for the latest of them (no catch-up
//! burst: a late client sends one heartbeat, not its backlog); the earlier
//! ones are *missed* (the driver fell more than a period behind that
//! session). Every tick that falls due in the window is one of ok, error,
//! timeout or missed. The raw histogram records send → reply of every
//! answered exchange and the timeout of every timed-out one; the corrected
//! histogram records, for every answered, timed-out or missed tick, its
//! scheduled send → the reply (or the give-up). Errors add no sample. An
//! exchange times out after one period.
//!
//! **Window.** It opens once every lane has opened all its sessions plus one
//! period, and no earlier than the warm-up (at least two periods), so
//! neither the opens nor the first heartbeats are measured; it lasts
//! `duration`, or longer when needed for `min_heartbeats` scheduled
//! heartbeats. A tick belongs to the window by its scheduled time.
//!
//! After the window each lane closes its sessions (L3) or revokes its leases,
//! unless the caller stops the server anyway ([`SessionsSpec::close`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

use bench_core::peer_sessions::{SessionsSample, phase};
use tokio::sync::Notify;
use tokio::time::Instant;

use crate::peer::{Target, WindowProbe};
use crate::peer_sessions_conn::{Conn, ConnError, Handle};

/// How long one open (L1, LeaseGrant) may take before it counts as failed.
const OPEN_TIMEOUT: Duration = Duration::from_secs(30);

/// Why a sessions measurement could not be made (a lane's task panicked,
/// or histograms would not merge); every failed exchange is counted instead.
#[derive(Debug, thiserror::Error)]
pub enum SessionsError {
    /// A lane's task panicked: a bug; report it.
    #[error(transparent)]
    Task(#[from] tokio::task::JoinError),
    /// Two lanes' histograms would not merge: a bug; report it.
    #[error(transparent)]
    Histogram(#[from] hdrhistogram::AdditionError),
}

/// One measurement of the live-sessions dimension.
#[derive(Clone, Copy, Debug)]
pub struct SessionsSpec {
    /// Live sessions (leases).
    pub n: usize,
    /// Their TTL.
    pub ttl: Duration,
    /// The heartbeat period.
    pub period: Duration,
    /// Lanes: connections (fencepost) / keep-alive streams (etcd).
    pub connections: usize,
    /// The least warm-up (raised to two periods).
    pub warmup: Duration,
    /// The least window.
    pub duration: Duration,
    /// The window is long enough for at least this many scheduled heartbeats.
    pub min_heartbeats: u64,
    /// Close every session (L3) / revoke every lease after the window; a
    /// caller that stops the server right after may skip it.
    pub close: bool,
}

impl SessionsSpec {
    /// The warm-up: the one asked for, and at least two periods.
    pub fn warmup(&self) -> Duration {
        self.warmup.max(self.period * 2)
    }

    /// The window: the one asked for, and at least long enough for
    /// `min_heartbeats` scheduled heartbeats at `n ÷ period` per second.
    pub fn window(&self) -> Duration {
        let per_s = self.n as f64 / self.period.as_secs_f64().max(1e-9);
        let needed = if per_s > 0.0 {
            Duration::from_secs_f64(self.min_heartbeats as f64 / per_s)
        } else {
            Duration::ZERO
        };
        self.duration.max(needed)
    }

    /// Lanes actually used: `connections`, and no more than `n`.
    pub fn lanes(&self) -> usize {
        self.connections.clamp(1, self.n.max(1))
    }
}

/// The schedule every session follows, fixed at `t0`.
#[derive(Clone, Copy, Debug)]
pub struct Schedule {
    /// Tick 0 of phase 0.
    pub t0: Instant,
    /// The heartbeat period.
    pub period: Duration,
    /// Sessions.
    pub n: usize,
}

impl Schedule {
    /// When tick `k` of session `i` is due.
    pub fn due(&self, i: usize, k: u64) -> Instant {
        self.t0 + phase(i, self.n, self.period) + self.period * k as u32
    }

    /// The latest tick of session `i` due at `now`, and at least `k`.
    pub fn latest_due(&self, i: usize, k: u64, now: Instant) -> u64 {
        let start = self.t0 + phase(i, self.n, self.period);
        let since = now.saturating_duration_since(start);
        let latest = (since.as_nanos() / self.period.as_nanos().max(1)) as u64;
        latest.max(k)
    }
}

/// The measured window, known once every session is open; until then no
/// tick belongs to it (any tick that will is due after it is set).
#[derive(Debug, Default)]
pub struct Window {
    /// Start, ns after `t0`; `u64::MAX` until set.
    start_ns: AtomicU64,
    /// Length, ns.
    len_ns: AtomicU64,
}

impl Window {
    /// A window not yet set.
    pub fn unset() -> Self {
        Window {
            start_ns: AtomicU64::new(u64::MAX),
            len_ns: AtomicU64::new(0),
        }
    }

    /// Sets it: from `start` for `len`, both after `t0`.
    pub fn set(&self, t0: Instant, start: Instant, len: Duration) {
        self.len_ns.store(len.as_nanos() as u64, Ordering::SeqCst);
        let ns = start.saturating_duration_since(t0).as_nanos() as u64;
        self.start_ns.store(ns, Ordering::SeqCst);
    }

    /// Its (start, end), once set.
    pub fn bounds(&self, t0: Instant) -> Option<(Instant, Instant)> {
        let s = self.start_ns.load(Ordering::SeqCst);
        (s != u64::MAX).then(|| {
            let start = t0 + Duration::from_nanos(s);
            (
                start,
                start + Duration::from_nanos(self.len_ns.load(Ordering::SeqCst)),
            )
        })
    }

    /// Whether a tick due at `due` belongs to it.
    pub fn holds(&self, t0: Instant, due: Instant) -> bool {
        self.bounds(t0).is_some_and(|(s, e)| due >= s && due < e)
    }
}

/// How one exchange ended.
#[derive(Debug)]
pub enum Outcome {
    /// Answered with success.
    Ok,
    /// Given up at the timeout.
    Timeout,
    /// Failed (a refusal, a transport error): its text.
    Error(String),
}

/// Counts one visit of session `i`: ticks `first..=last` fell due, one
/// exchange was sent at `sent` for tick `last` and ended at `done` with
/// `outcome`. Ticks outside `in_window` are not counted (warm-up).
#[allow(clippy::too_many_arguments)]
pub fn account(
    s: &mut SessionsSample,
    schedule: &Schedule,
    in_window: impl Fn(Instant) -> bool,
    i: usize,
    first: u64,
    last: u64,
    sent: Instant,
    done: Instant,
    timeout: Duration,
    outcome: &Outcome,
) {
    let us = |d: Duration| u64::try_from(d.as_micros()).unwrap_or(u64::MAX).max(1);
    for k in first..=last {
        let due = schedule.due(i, k);
        if !in_window(due) {
            continue;
        }
        s.scheduled += 1;
        let late = done.saturating_duration_since(due);
        if k < last {
            s.missed += 1;
            s.corrected.saturating_record(us(late));
            continue;
        }
        match outcome {
            Outcome::Ok => {
                s.ok += 1;
                s.raw.saturating_record(us(done - sent));
                s.corrected.saturating_record(us(late));
            }
            Outcome::Timeout => {
                s.timeouts += 1;
                s.raw.saturating_record(us(timeout));
                s.corrected.saturating_record(us(late));
            }
            Outcome::Error(_) => s.errors += 1,
        }
    }
}

/// Raises this process's file-descriptor soft limit to its hard limit and
/// returns the soft limit in force afterwards (what a row records); 0 when
/// it cannot be read.
pub fn raise_fd_limit() -> u64 {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit/setrlimit read and write the one struct passed.
    unsafe {
        if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
            return 0;
        }
        if lim.rlim_cur < lim.rlim_max {
            let raised = libc::rlimit {
                rlim_cur: lim.rlim_max,
                rlim_max: lim.rlim_max,
            };
            if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                lim = raised;
            }
        }
    }
    // rlim_t is u64 on Linux, but not on every target.
    #[allow(clippy::unnecessary_cast)]
    let soft = lim.rlim_cur as u64;
    soft
}

/// One session of a lane.
struct Slot {
    /// Its index in the fleet (its phase).
    i: usize,
    /// Its next tick.
    next: u64,
    /// Its handle once open.
    handle: Option<Handle>,
    /// Its ticks are over (past the window, or it never opened).
    done: bool,
}

/// What the lanes share.
struct Shared {
    schedule: Schedule,
    window: Window,
    /// Lanes that have opened (or failed to open) all their sessions.
    opened: AtomicUsize,
    /// Told when the last lane has.
    all_opened: Notify,
    ttl: Duration,
    lanes: usize,
}

/// One lane: opens its sessions at their tick 0, then keeps them alive
/// until every one's next tick is past the window. Returns what it counted
/// and its connection and handles, for the close after the window.
async fn lane(
    shared: Arc<Shared>,
    mut conn: Result<Conn, ConnError>,
    mut slots: Vec<Slot>,
) -> (SessionsSample, Option<Conn>, Vec<Handle>) {
    let sch = shared.schedule;
    let timeout = sch.period;
    let mut s = SessionsSample::empty();
    let mut to_open = slots.len();
    let mut finished = 0;
    if let Err(e) = &conn {
        s.open_failed = slots.len() as u64;
        s.fd_exhausted = e.is_fd_exhausted();
        s.first_error = Some(bench_core::error::Chain(e).to_string());
        finished = slots.len();
        to_open = 0;
    }
    if to_open == 0 && shared.opened.fetch_add(1, Ordering::SeqCst) + 1 == shared.lanes {
        shared.all_opened.notify_one();
    }
    let (mut idx, count) = (0, slots.len());
    while finished < count {
        let Ok(c) = conn.as_mut() else { break };
        let slot = &mut slots[idx];
        idx = (idx + 1) % count;
        if slot.done {
            continue;
        }
        let due = sch.due(slot.i, slot.next);
        if let Some((_, end)) = shared.window.bounds(sch.t0)
            && due >= end
        {
            slot.done = true;
            finished += 1;
            continue;
        }
        tokio::time::sleep_until(due).await;
        if slot.handle.is_none() {
            match tokio::time::timeout(OPEN_TIMEOUT, c.open(slot.i, shared.ttl)).await {
                Ok(Ok(h)) => {
                    slot.handle = Some(h);
                    slot.next = 1;
                }
                failed => {
                    s.open_failed += 1;
                    let e = match failed {
                        Ok(Err(e)) => {
                            s.fd_exhausted |= e.is_fd_exhausted();
                            bench_core::error::Chain(&e).to_string()
                        }
                        _ => format!("open: no answer within {OPEN_TIMEOUT:?}"),
                    };
                    s.first_error.get_or_insert(e);
                    slot.done = true;
                    finished += 1;
                }
            }
            to_open -= 1;
            if to_open == 0 && shared.opened.fetch_add(1, Ordering::SeqCst) + 1 == shared.lanes {
                shared.all_opened.notify_one();
            }
            continue;
        }
        let Some(handle) = slot.handle.as_ref() else {
            continue;
        };
        let sent = Instant::now();
        let last = sch.latest_due(slot.i, slot.next, sent);
        let outcome = match tokio::time::timeout(timeout, c.beat(handle)).await {
            Ok(Ok(())) => Outcome::Ok,
            Ok(Err(e)) => Outcome::Error(bench_core::error::Chain(&e).to_string()),
            Err(_) => {
                c.reset();
                Outcome::Timeout
            }
        };
        let done = Instant::now();
        if let Outcome::Error(e) = &outcome {
            s.first_error.get_or_insert_with(|| e.clone());
        }
        account(
            &mut s,
            &sch,
            |d| shared.window.holds(sch.t0, d),
            slot.i,
            slot.next,
            last,
            sent,
            done,
            timeout,
            &outcome,
        );
        slot.next = last + 1;
    }
    let handles = slots.into_iter().filter_map(|s| s.handle).collect();
    (s, conn.ok(), handles)
}

/// Measures `spec` on `target`: the lanes' connections are made, the
/// schedule starts, the window opens once every session is open (`probe`
/// told), closes after its length (`probe` told once every lane's last tick
/// of it has ended), then the sessions are closed (not timed).
pub async fn measure(
    target: &Target,
    spec: &SessionsSpec,
    probe: &mut impl WindowProbe,
) -> Result<SessionsSample, SessionsError> {
    let lanes = spec.lanes();
    let mut conns = Vec::with_capacity(lanes);
    for _ in 0..lanes {
        conns.push(match target {
            Target::Fencepost { base, .. } => Ok(Conn::fencepost(base, OPEN_TIMEOUT)),
            Target::Etcd(url) => Conn::etcd(url, OPEN_TIMEOUT).await,
            Target::Redis(_) => Err(ConnError::NotMeasured("redis")),
        });
    }
    // A short lead so the first tick is not already late when the lanes start.
    let t0 = Instant::now() + Duration::from_millis(50);
    let shared = Arc::new(Shared {
        schedule: Schedule {
            t0,
            period: spec.period,
            n: spec.n,
        },
        window: Window::unset(),
        opened: AtomicUsize::new(0),
        all_opened: Notify::new(),
        ttl: spec.ttl,
        lanes,
    });
    let mut tasks = Vec::with_capacity(lanes);
    for (l, conn) in conns.into_iter().enumerate() {
        let slots = (l..spec.n)
            .step_by(lanes)
            .map(|i| Slot {
                i,
                next: 0,
                handle: None,
                done: false,
            })
            .collect();
        tasks.push(tokio::spawn(lane(shared.clone(), conn, slots)));
    }
    shared.all_opened.notified().await;
    let start = (Instant::now() + spec.period).max(t0 + spec.warmup());
    let len = spec.window();
    shared.window.set(t0, start, len);
    tokio::time::sleep_until(start).await;
    probe.opened().await;
    let mut sample = SessionsSample::empty();
    let mut open = Vec::with_capacity(lanes);
    for t in tasks {
        let (s, conn, handles) = t.await?;
        sample.merge(&s)?;
        open.push((conn, handles));
    }
    // The span the CPU counters cover: from the window's opening to the
    // moment they are read, after every lane's last exchange. It is the
    // window itself unless the lanes overran it (a driver behind its
    // schedule), and dividing by the nominal window then overstated CPU.
    let closed_at = Instant::now();
    probe.closed().await;
    sample.seconds = closed_at
        .saturating_duration_since(start)
        .max(len)
        .as_secs_f64();
    let mut closes = Vec::with_capacity(open.len());
    for (conn, handles) in open.into_iter().filter(|_| spec.close) {
        if let Some(mut c) = conn {
            closes.push(tokio::spawn(async move {
                for h in &handles {
                    let _ = tokio::time::timeout(OPEN_TIMEOUT, c.close(h)).await;
                }
            }));
        }
    }
    for c in closes {
        c.await?;
    }
    Ok(sample)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn schedule() -> Schedule {
        Schedule {
            t0: Instant::now(),
            period: Duration::from_millis(3500),
            n: 4,
        }
    }

    #[test]
    fn the_fd_limit_is_raised_to_the_hard_limit() {
        let soft = raise_fd_limit();
        assert!(soft > 0);
        let mut lim = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: as above.
        assert_eq!(unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) }, 0);
        assert_eq!(lim.rlim_cur, lim.rlim_max);
        assert!(soft > 0 && lim.rlim_cur > 0);
    }

    #[test]
    fn each_session_ticks_on_its_own_phase_once_a_period() {
        let s = schedule();
        assert_eq!(s.due(0, 0), s.t0);
        assert_eq!(s.due(1, 0) - s.t0, Duration::from_millis(875));
        assert_eq!(s.due(1, 2) - s.t0, Duration::from_millis(875 + 7000));
        // Just before tick 2 of session 1 is due, tick 1 is the latest.
        let now = s.due(1, 2) - Duration::from_millis(1);
        assert_eq!(s.latest_due(1, 1, now), 1);
        assert_eq!(s.latest_due(1, 1, s.due(1, 2)), 2);
        // Never earlier than the tick the lane is on.
        assert_eq!(s.latest_due(1, 5, s.t0), 5);
    }

    #[test]
    fn a_timeout_counts_as_a_sample_of_its_timeout_and_a_missed_tick_counts_too() {
        let s = schedule();
        let every = |_| true;
        let mut a = SessionsSample::empty();
        // The lane reached session 2 when its ticks 1, 2 and 3 had fallen
        // due: one exchange for tick 3, which timed out after one period.
        let sent = s.due(2, 3) + Duration::from_millis(10);
        let done = sent + s.period;
        account(
            &mut a,
            &s,
            every,
            2,
            1,
            3,
            sent,
            done,
            s.period,
            &Outcome::Timeout,
        );
        assert_eq!((a.scheduled, a.missed, a.timeouts, a.ok), (3, 2, 1, 0));
        // Raw: the timeout, a lower bound. Corrected: each tick's lateness.
        assert_eq!(a.raw.len(), 1);
        assert!(a.raw.max() >= 3_499_000);
        assert_eq!(a.corrected.len(), 3);
        // Tick 1 was due two periods before tick 3, and the give-up came a
        // period and 10 ms after tick 3: ≥ 3 periods late.
        assert!(a.corrected.max() >= 3 * 3_500_000, "{}", a.corrected.max());

        // An answered tick on time: raw = send → reply, corrected from the schedule.
        let mut b = SessionsSample::empty();
        let due = s.due(0, 1);
        let (sent, done) = (
            due + Duration::from_millis(2),
            due + Duration::from_millis(3),
        );
        account(
            &mut b,
            &s,
            every,
            0,
            1,
            1,
            sent,
            done,
            s.period,
            &Outcome::Ok,
        );
        assert_eq!((b.scheduled, b.ok, b.missed), (1, 1, 0));
        assert!((900..=1_100).contains(&b.raw.max()), "{}", b.raw.max());
        assert!((2_900..=3_100).contains(&b.corrected.max()));

        // An error is counted and adds no sample.
        let mut c = SessionsSample::empty();
        account(
            &mut c,
            &s,
            every,
            0,
            1,
            1,
            sent,
            done,
            s.period,
            &Outcome::Error("404".into()),
        );
        assert_eq!(
            (c.scheduled, c.errors, c.raw.len(), c.corrected.len()),
            (1, 1, 0, 0)
        );
    }

    #[test]
    fn ticks_outside_the_window_are_not_counted_and_none_belongs_to_an_unset_one() {
        let s = schedule();
        let w = Window::unset();
        assert!(!w.holds(s.t0, s.due(0, 5)));
        w.set(s.t0, s.due(0, 2), s.period * 2);
        assert!(!w.holds(s.t0, s.due(3, 1)), "warm-up");
        assert!(w.holds(s.t0, s.due(0, 2)));
        assert!(w.holds(s.t0, s.due(3, 3)));
        assert!(!w.holds(s.t0, s.due(0, 4)), "the end is open");
        let mut a = SessionsSample::empty();
        let done = s.due(0, 3);
        account(
            &mut a,
            &s,
            |d| w.holds(s.t0, d),
            0,
            1,
            3,
            done,
            done,
            s.period,
            &Outcome::Ok,
        );
        // Tick 1 is in the warm-up; tick 2 missed and tick 3 answered, in the window.
        assert_eq!((a.scheduled, a.missed, a.ok), (2, 1, 1));
    }

    #[test]
    fn the_window_is_long_enough_for_a_p99_and_the_warm_up_two_periods() {
        let spec = SessionsSpec {
            n: 100,
            ttl: Duration::from_secs(15),
            period: Duration::from_millis(3500),
            connections: 64,
            warmup: Duration::from_secs(1),
            duration: Duration::from_secs(10),
            min_heartbeats: 1_000,
            close: true,
        };
        // 100 sessions heartbeat 28.6 times a second: 1,000 take 35 s.
        assert_eq!(spec.window(), Duration::from_secs(35));
        assert_eq!(spec.warmup(), Duration::from_secs(7));
        let big = SessionsSpec { n: 100_000, ..spec };
        assert_eq!(big.window(), Duration::from_secs(10));
        assert_eq!(big.lanes(), 64);
        assert_eq!(SessionsSpec { n: 10, ..spec }.lanes(), 10);
    }
}
