//! What the SDK's measurements read out as: the client's counters
//! ([`ClientStats`]), the outcome of one heartbeat exchange ([`Outcome`]),
//! the exchange a deadline was computed for ([`DeadlineKind`]) and the
//! margins applied ([`MarginSummary`], [`MarginStats`]). Plain values.

use crate::lease::PPM;

/// The outcome of one heartbeat exchange (L2 or L5).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The server answered (any status): the RTT is a sample.
    Reply,
    /// No answer within the timeout: a right-censored sample at the give-up time.
    Timeout,
    /// The request failed before any answer (refused, reset): no sample.
    Error,
}

/// How one renewal (L5) ended, as `lock_renewals_total{outcome}` counts it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RenewOutcome {
    /// 200 with a grant the client applied: the handle's deadline moved.
    Ok,
    /// `LOCK_LOST`: the server no longer holds the lease for this token.
    Refused,
    /// No answer within the timeout (a censored "≥" RTT sample).
    Timeout,
    /// Anything else: a transport failure (no sample), another error status,
    /// or a grant the client refused to apply (another token, a reply out of range).
    Error,
}

impl RenewOutcome {
    /// Every outcome, in label order.
    pub const ALL: [RenewOutcome; 4] = [
        RenewOutcome::Ok,
        RenewOutcome::Refused,
        RenewOutcome::Timeout,
        RenewOutcome::Error,
    ];

    /// The `outcome` label of `lock_renewals_total`.
    pub fn label(self) -> &'static str {
        match self {
            RenewOutcome::Ok => "ok",
            RenewOutcome::Refused => "refused",
            RenewOutcome::Timeout => "timeout",
            RenewOutcome::Error => "error",
        }
    }
}

/// A point-in-time copy of the client's counters.
///
/// Every heartbeat exchange (L2) has exactly one outcome:
/// `hb_attempts == hb_replies + hb_timeouts + hb_errors`; every renewal
/// (L5) too: `renew_attempts == renewals + renew_refusals + renew_timeouts
/// + renew_errors`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ClientStats {
    /// L2 heartbeats answered 200.
    pub heartbeats: u64,
    /// L5 renewals answered 200 and applied (`lock_renewals_total{outcome="ok"}`).
    pub renewals: u64,
    /// L5 renewals sent (every outcome).
    pub renew_attempts: u64,
    /// Of those, refused with `LOCK_LOST`.
    pub renew_refusals: u64,
    /// Of those, given up at their timeout (each a censored "≥" renewal RTT sample).
    pub renew_timeouts: u64,
    /// Of those, ended any other way (transport failure, another error, a
    /// reply not applied).
    pub renew_errors: u64,
    /// Heartbeat exchanges (L2) sent.
    pub hb_attempts: u64,
    /// Of those, answered by the server (any status; each is an RTT sample).
    pub hb_replies: u64,
    /// Of those, given up at their timeout (each is a censored "≥" RTT sample).
    pub hb_timeouts: u64,
    /// Of those, failed in transport before any answer (no RTT sample).
    pub hb_errors: u64,
    /// Scheduled heartbeat ticks that came due (fixed rate: one per period).
    pub hb_ticks: u64,
    /// Scheduled ticks that sent no L2 of their own: served late by one
    /// exchange with later ticks, muted by a fault, or due when the session
    /// was already lost.
    pub hb_ticks_missed: u64,
    /// Sessions lost because the server said 410 (`reason="expired"`).
    pub sessions_lost_expired: u64,
    /// Sessions lost because the server said 404 (`reason="unknown"`).
    pub sessions_lost_unknown: u64,
    /// Sessions lost because the client deadline passed (`reason="deadline"`),
    /// including a session that lapsed between payouts with no handle.
    pub sessions_lost_deadline: u64,
    /// Heartbeat gaps longer than the window they were exposed to (see
    /// [`Metrics::gap_snapshot`](crate::Metrics::gap_snapshot)): one per
    /// session lost at its deadline, so over a client this equals
    /// `sessions_lost_deadline`.
    pub hb_gaps_over_window: u64,
    /// Handles reported lost to listeners (every reason, incl. session loss).
    pub handles_lost: u64,
    /// `ensure_time_for` refusals (`lock.lease.abandoned`).
    pub leases_abandoned: u64,
    /// [`Session::acquire`](crate::Session::acquire) calls that returned a
    /// handle (`lock_acquires_total{outcome="granted"}`).
    pub acquires_granted: u64,
    /// `Session::acquire` calls that ended any other way: busy past the
    /// budget, a timeout, an error, a lost session
    /// (`lock_acquires_total{outcome="failed"}`).
    pub acquires_failed: u64,
}

impl ClientStats {
    /// Sessions lost, every reason.
    pub fn sessions_lost(&self) -> u64 {
        self.sessions_lost_expired + self.sessions_lost_unknown + self.sessions_lost_deadline
    }
}

/// The exchange a client deadline was computed for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum DeadlineKind {
    /// L1, the session's first deadline.
    Open,
    /// L2, the session's deadline on every heartbeat.
    Heartbeat,
    /// L4, a new handle's deadline.
    Acquire,
    /// L5, a handle's deadline on every renewal.
    Renew,
    /// L7, the server-confirmed check shrinking a handle's deadline.
    Confirm,
}

impl DeadlineKind {
    /// Every kind, in wire order.
    pub const ALL: [DeadlineKind; 5] = [
        DeadlineKind::Open,
        DeadlineKind::Heartbeat,
        DeadlineKind::Acquire,
        DeadlineKind::Renew,
        DeadlineKind::Confirm,
    ];

    /// The C1 exchange id: `l1`, `l2`, `l4`, `l5`, `l7`.
    pub fn label(self) -> &'static str {
        match self {
            DeadlineKind::Open => "l1",
            DeadlineKind::Heartbeat => "l2",
            DeadlineKind::Acquire => "l4",
            DeadlineKind::Renew => "l5",
            DeadlineKind::Confirm => "l7",
        }
    }

    /// The `exchange` label of `lock_margin_effective`: `open`, `heartbeat`,
    /// `acquire`, `renew`, `confirm`.
    pub fn exchange(self) -> &'static str {
        match self {
            DeadlineKind::Open => "open",
            DeadlineKind::Heartbeat => "heartbeat",
            DeadlineKind::Acquire => "acquire",
            DeadlineKind::Renew => "renew",
            DeadlineKind::Confirm => "confirm",
        }
    }

    /// The kind's place in [`DeadlineKind::ALL`] (and in per-kind arrays).
    pub(super) fn index(self) -> usize {
        self as usize
    }
}

/// The margins applied to one kind of deadline computation (`margin_effective`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MarginSummary {
    /// Deadlines computed (and applied) with a margin.
    pub count: u64,
    /// The sum of their margins, in ppm (parts per million of the grant).
    pub sum_ppm: u64,
    /// The smallest margin applied, ppm (0 when `count` is 0).
    pub min_ppm: u64,
    /// The largest margin applied, ppm (0 when `count` is 0).
    pub max_ppm: u64,
}

impl MarginSummary {
    /// The mean margin applied, as a fraction (0.30), or `None` without samples.
    pub fn mean(&self) -> Option<f64> {
        (self.count > 0).then(|| self.sum_ppm as f64 / self.count as f64 / PPM as f64)
    }

    /// Both summaries together.
    pub fn merge(&self, other: &MarginSummary) -> MarginSummary {
        let pick = |a: u64, b: u64, f: fn(u64, u64) -> u64| match (self.count, other.count) {
            (0, _) => b,
            (_, 0) => a,
            _ => f(a, b),
        };
        MarginSummary {
            count: self.count + other.count,
            sum_ppm: self.sum_ppm + other.sum_ppm,
            min_ppm: pick(self.min_ppm, other.min_ppm, u64::min),
            max_ppm: pick(self.max_ppm, other.max_ppm, u64::max),
        }
    }
}

/// The margins the SDK actually applied, per exchange ([`DeadlineKind`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct MarginStats {
    /// Per kind, indexed in [`DeadlineKind::ALL`] order (use [`get`](Self::get)).
    pub(super) by_kind: [MarginSummary; 5],
}

impl MarginStats {
    /// The margins applied for one kind of exchange.
    pub fn get(&self, kind: DeadlineKind) -> MarginSummary {
        self.by_kind[kind.index()]
    }

    /// Every kind together.
    pub fn all(&self) -> MarginSummary {
        self.by_kind
            .iter()
            .fold(MarginSummary::default(), |acc, m| acc.merge(m))
    }

    /// The lease margins only (L4 and L5): what a handle's deadline used.
    pub fn leases(&self) -> MarginSummary {
        self.get(DeadlineKind::Acquire)
            .merge(&self.get(DeadlineKind::Renew))
    }
}
