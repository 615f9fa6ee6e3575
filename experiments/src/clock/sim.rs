//! The clock experiment's simulation: scenarios of drift and steps, each
//! case run on a fake clock against the lock table, swept over the offset
//! and summarised into findings ([`ClockResult`], `clock.json`'s type in
//! `bench_core::results::clock`, which the ADR evidence reads too).

use std::time::Duration;

use fencepost_api::clock::{Clock, FakeClock, MonoTime};
use fencepost_api::grace::GracePolicy;
use fencepost_api::lock::LockState;
use fencepost_sdk::lease;
use lock_server::core::{Limits, LockTable};
use rand::{Rng as _, SeedableRng as _};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

pub use bench_core::results::clock::{ClockResult, Findings, SimParams, SweepRow};

/// The simulated scenarios.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Scenario {
    /// Start-instant error ε ∈ [−θ, θ], drift, quantisation; no step.
    Offset,
    /// The SDK as built: the start reading is taken at the send (D2), ε = −d1.
    SdkD2,
    /// `Offset` plus a forward step of the server's clock during the lease.
    ServerStepForward,
    /// `Offset` plus a backward step of the server's clock during the lease.
    ServerStepBackward,
    /// `Offset` plus a forward step of the client's clock during the lease.
    ClientStepForward,
    /// `Offset` plus a backward step of the client's clock during the lease.
    ClientStepBackward,
}

impl Scenario {
    /// All scenarios, in report order.
    pub const ALL: [Scenario; 6] = [
        Scenario::Offset,
        Scenario::SdkD2,
        Scenario::ServerStepForward,
        Scenario::ServerStepBackward,
        Scenario::ClientStepForward,
        Scenario::ClientStepBackward,
    ];

    /// Its kebab-case name.
    pub fn name(self) -> &'static str {
        match self {
            Scenario::Offset => "offset",
            Scenario::SdkD2 => "sdk-d2",
            Scenario::ServerStepForward => "server-step-forward",
            Scenario::ServerStepBackward => "server-step-backward",
            Scenario::ClientStepForward => "client-step-forward",
            Scenario::ClientStepBackward => "client-step-backward",
        }
    }

    /// One sentence for the report.
    pub fn describe(self) -> &'static str {
        match self {
            Scenario::Offset => "client start reading at server receipt + ε, ε ∈ [−θ, θ]; drift; q",
            Scenario::SdkD2 => {
                "client start reading at its send (D2), i.e. d1 before the server's start; drift; q"
            }
            Scenario::ServerStepForward => {
                "offset + the server clock steps forward during the lease"
            }
            Scenario::ServerStepBackward => {
                "offset + the server clock steps backward during the lease"
            }
            Scenario::ClientStepForward => {
                "offset + the client clock steps forward during the lease"
            }
            Scenario::ClientStepBackward => {
                "offset + the client clock steps backward during the lease"
            }
        }
    }
}

/// One simulated clock: true time → reading.
#[derive(Clone, Copy, Debug)]
struct SimClock {
    /// Its origin, ns (keeps readings positive after a backward step).
    phase_ns: f64,
    /// Rate error (+ fast, − slow).
    rate: f64,
    /// Reading granularity, ns (≥ 1).
    tick_ns: u64,
    /// `(true instant, signed step ns)`.
    step: Option<(u64, i64)>,
}

impl SimClock {
    /// The reading at true time `t`.
    fn reading(&self, t: u64) -> MonoTime {
        let mut raw = self.phase_ns + t as f64 * (1.0 + self.rate);
        if let Some((at, by)) = self.step
            && t >= at
        {
            raw += by as f64;
        }
        let raw = raw.max(0.0).floor() as u64;
        MonoTime::from_nanos(raw / self.tick_ns * self.tick_ns)
    }

    /// Sets `fake` to the reading at `t`; the code under test reads it through `Clock::now`.
    fn drive(&self, fake: &FakeClock, t: u64) {
        fake.set(self.reading(t));
    }

    /// Where this clock's reading may jump (the true instants splitting it into monotone pieces).
    fn breaks(&self) -> Option<u64> {
        self.step.map(|(at, _)| at)
    }
}

/// One random case (the same case is evaluated at every grace fraction).
#[derive(Clone, Copy, Debug)]
struct Case {
    /// The server's clock.
    server: SimClock,
    /// The client's clock.
    client: SimClock,
    /// True instant of the server's receipt (lease start).
    t_recv: u64,
    /// True instant the reply reaches the client.
    t_reply: u64,
    /// True instant of the client's start reading.
    t_start: u64,
}

fn sample_case(p: &SimParams, scenario: Scenario, rng: &mut ChaCha8Rng) -> Case {
    let rho = p.drift_ppm as f64 * 1e-6;
    let tick = (p.quantum_ns / 2).max(1);
    let mut server = SimClock {
        phase_ns: rng.random_range(1e9..1e12),
        rate: rng.random_range(0.0..=rho),
        tick_ns: tick,
        step: None,
    };
    let mut client = SimClock {
        phase_ns: rng.random_range(1e9..1e12),
        rate: -rng.random_range(0.0..=rho),
        tick_ns: tick,
        step: None,
    };
    let t_send = rng.random_range(1_000_000_000..2_000_000_000u64);
    let d1 = rng.random_range(0..=p.max_delay_ns);
    let d2 = rng.random_range(0..=p.max_delay_ns);
    let t_recv = t_send + d1;
    let t_reply = t_recv + d2;
    let theta = p.theta_ns as i64;
    let eps = rng.random_range(-theta..=theta);
    let t_start = match scenario {
        Scenario::SdkD2 => t_send,
        _ => t_recv.saturating_add_signed(eps),
    };
    let at = |from: u64, rng: &mut ChaCha8Rng| from + rng.random_range(0..p.lease_ns.max(1));
    let s = p.step_ns as i64;
    match scenario {
        Scenario::ServerStepForward => server.step = Some((at(t_recv, rng), s)),
        Scenario::ServerStepBackward => server.step = Some((at(t_recv, rng), -s)),
        Scenario::ClientStepForward => client.step = Some((at(t_start, rng), s)),
        Scenario::ClientStepBackward => client.step = Some((at(t_start, rng), -s)),
        Scenario::Offset | Scenario::SdkD2 => {}
    }
    Case {
        server,
        client,
        t_recv,
        t_reply,
        t_start,
    }
}

/// The outcome of one case at one grace.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CaseOutcome {
    /// True instant the server reassigned the key.
    pub t_free: u64,
    /// Last true instant the client believed it held the grant (None: never, e.g. the reply came too late).
    pub t_last_belief: Option<u64>,
}

impl CaseOutcome {
    /// How long the client still believed after the reassignment (0: no violation).
    pub fn overrun_ns(&self) -> u64 {
        match self.t_last_belief {
            Some(last) if last >= self.t_free => last - self.t_free + 1,
            _ => 0,
        }
    }
}

/// The smallest `t` in `[lo, hi]` with `pred(t)`, for `pred` false-then-true on the range (`pred(hi)` must hold).
fn first_true(mut lo: u64, mut hi: u64, pred: &mut impl FnMut(u64) -> bool) -> u64 {
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if pred(mid) { hi = mid } else { lo = mid + 1 }
    }
    hi
}

/// Monotone pieces `[a, b]` of `[from, to]`, split just before `brk`.
fn pieces(from: u64, to: u64, brk: Option<u64>) -> Vec<(u64, u64)> {
    match brk {
        Some(b) if b > from && b <= to => vec![(from, b - 1), (b, to)],
        _ => vec![(from, to)],
    }
}

/// Runs one case against the real server table and the SDK's arithmetic.
fn run_case(p: &SimParams, c: &Case, grace: Duration) -> CaseOutcome {
    let lease_d = Duration::from_nanos(p.lease_ns);
    let limits = Limits {
        default_ttl: lease_d,
        session_ttl: lease_d * 100,
        ttl_min: Duration::from_millis(1),
        ttl_max: Duration::from_secs(86_400),
        grace: GracePolicy::Fixed(grace),
        sabotage: None,
    };
    // ---- server: the lock table on its own fake clock --------------------
    let server_clock = FakeClock::new(MonoTime::ZERO);
    let mut table = LockTable::new(limits);
    c.server.drive(&server_clock, c.t_recv);
    let now = server_clock.now();
    let long = lease_d * 100;
    table.insert_session("holder".into(), "client".into(), None, long, now);
    table.insert_session("next".into(), "other".into(), None, long, now);
    let lease_ms = (p.lease_ns / 1_000_000).max(1);
    let plan = table
        .begin_acquire("k", "holder", Some(lease_ms), now)
        .expect("a fresh key is granted");
    table
        .finish_acquire("k", "holder", 1, &plan, now)
        .expect("the holder's session is live");
    let granted_ms = plan.lease.as_millis() as u64;

    let mut free = |t: u64| {
        c.server.drive(&server_clock, t);
        table
            .info("k", server_clock.now())
            .map(|i| i.state == LockState::Free)
            .unwrap_or(false)
    };
    // Long enough for any grace, step and drift considered here.
    let horizon = c.t_recv
        + 4 * (p.lease_ns + grace.as_nanos() as u64 + p.step_ns + p.theta_ns)
        + 1_000_000_000;
    assert!(free(horizon), "the server never frees the key");
    let t_free = pieces(c.t_recv, horizon, c.server.breaks())
        .into_iter()
        .find(|&(_, b)| free(b))
        .map(|(a, b)| first_true(a, b, &mut free))
        .expect("free at the horizon");
    // The server reassigns at that instant: the other session's acquire succeeds.
    c.server.drive(&server_clock, t_free);
    let at = server_clock.now();
    let plan2 = table
        .begin_acquire("k", "next", Some(lease_ms), at)
        .expect("the server's own logic said FREE, so it reassigns");
    table
        .finish_acquire("k", "next", 2, &plan2, at)
        .expect("live");

    // ---- client: the SDK's deadline arithmetic on its own fake clock -----
    let client_clock = FakeClock::new(MonoTime::ZERO);
    c.client.drive(&client_clock, c.t_start);
    let deadline =
        lease::client_deadline(client_clock.now(), granted_ms, lease::ppm_nearest(p.margin));
    let believes = |t: u64| {
        c.client.drive(&client_clock, t);
        !lease::remaining(client_clock.now(), deadline).is_zero()
    };
    // Belief can only start once the reply is in hand.
    let mut last: Option<u64> = None;
    for (a, b) in pieces(c.t_reply, horizon, c.client.breaks()) {
        if a > b || !believes(a) {
            continue;
        }
        // believes: true then false on [a, b]; find the last true.
        let end = if believes(b) {
            b
        } else {
            first_true(a, b, &mut |t| !believes(t)) - 1
        };
        last = Some(last.map_or(end, |l: u64| l.max(end)));
    }
    CaseOutcome {
        t_free,
        t_last_belief: last,
    }
}

/// Sweeps `scenarios` × `fractions` with `cases` cases each. Case `i` of a
/// scenario is the same at every fraction (seeded from `seed`, the scenario and `i`).
pub fn sweep(
    p: &SimParams,
    scenarios: &[Scenario],
    fractions: &[f64],
    cases: u64,
    seed: u64,
) -> Vec<SweepRow> {
    let bound = p.bound();
    let mut rows = Vec::new();
    for (si, &sc) in scenarios.iter().enumerate() {
        let mut rng = ChaCha8Rng::seed_from_u64(seed ^ ((si as u64 + 1) << 48));
        let all: Vec<Case> = (0..cases).map(|_| sample_case(p, sc, &mut rng)).collect();
        for &f in fractions {
            let grace = Duration::from_nanos((bound.as_nanos() as f64 * f).round() as u64);
            let mut violations = 0;
            let mut max_overrun = 0;
            for c in &all {
                let o = run_case(p, c, grace).overrun_ns();
                if o > 0 {
                    violations += 1;
                    max_overrun = max_overrun.max(o);
                }
            }
            rows.push(SweepRow {
                scenario: sc.name().into(),
                grace_fraction: f,
                grace_ms: grace.as_secs_f64() * 1e3,
                bound_ms: bound.as_secs_f64() * 1e3,
                cases,
                violations,
                violation_rate: violations as f64 / cases as f64,
                max_overrun_us: max_overrun as f64 / 1e3,
            });
        }
    }
    rows
}

pub(crate) fn at<'a>(rows: &'a [SweepRow], scenario: &str, f: f64) -> Option<&'a SweepRow> {
    rows.iter()
        .find(|r| r.scenario == scenario && (r.grace_fraction - f).abs() < 1e-9)
}

/// Reads the findings off the rows (fraction 1.0 must be among them for the step verdicts).
pub fn findings(rows: &[SweepRow]) -> Findings {
    let off: Vec<&SweepRow> = rows.iter().filter(|r| r.scenario == "offset").collect();
    let zero_at_or_above_bound = off
        .iter()
        .filter(|r| r.grace_fraction >= 1.0)
        .all(|r| r.violations == 0);
    let nonzero_below_bound = off
        .iter()
        .any(|r| r.grace_fraction < 1.0 && r.violations > 0);
    let v = |s: &str| at(rows, s, 1.0).map(|r| r.violations).unwrap_or(0);
    let dir = |fwd: u64, back: u64| match fwd.cmp(&back) {
        std::cmp::Ordering::Greater => "forward",
        std::cmp::Ordering::Less => "backward",
        std::cmp::Ordering::Equal => "neither",
    };
    let server = dir(v("server-step-forward"), v("server-step-backward"));
    let client = dir(v("client-step-forward"), v("client-step-backward"));
    let mut summary = vec![format!(
        "offset scenario: {} at grace >= bound, {} below it",
        if zero_at_or_above_bound {
            "zero violations"
        } else {
            "VIOLATIONS"
        },
        if nonzero_below_bound {
            "violations"
        } else {
            "no violations"
        }
    )];
    summary.push(format!(
        "at grace = bound, server step forward: {} violations, backward: {} — the hazardous server step is {server}: \
         a forward step makes the server's measured interval longer than real time, so it reassigns early; \
         a backward step makes it shorter, so it reassigns late (safe)",
        v("server-step-forward"),
        v("server-step-backward")
    ));
    summary.push(format!(
        "at grace = bound, client step forward: {} violations, backward: {} — the hazardous client step is {client}: \
         a backward step stretches the client's belief",
        v("client-step-forward"),
        v("client-step-backward")
    ));
    let agrees = server == "backward";
    summary.push(if agrees {
        "this agrees with the essay's sentence that a backward step is the dangerous direction for the server".into()
    } else {
        "this DISAGREES with the essay's sentence \"a step backwards is the dangerous direction\" for the server's \
         clock: with the real LockTable a backward server step only delays reassignment; a backward step is \
         dangerous on the client's clock, a forward step on the server's"
            .into()
    });
    Findings {
        zero_at_or_above_bound,
        nonzero_below_bound,
        server_hazardous_step: server.into(),
        client_hazardous_step: client.into(),
        agrees_with_essay_on_server_step: agrees,
        summary,
    }
}
