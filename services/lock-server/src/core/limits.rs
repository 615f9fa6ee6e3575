//! What bounds a lock table: the TTL clamps and grace a server is configured
//! with ([`Limits`], the C4 `lock.*` keys) and the caps on what it keeps in
//! memory besides what expiry bounds by time ([`Caps`]).

use std::time::Duration;

use fencepost_api::grace::GracePolicy;

/// The server's TTL limits and grace (C4 `lock.*`).
#[derive(Clone, Debug, PartialEq)]
pub struct Limits {
    /// `lock.default.ttl`: the lease when L4/L5 give no `ttl_ms`.
    pub default_ttl: Duration,
    /// `lock.session.ttl`: the session TTL when L1 gives no `ttl_ms`.
    pub session_ttl: Duration,
    /// `lock.ttl.min`: requests below are clamped up.
    pub ttl_min: Duration,
    /// `lock.ttl.max`: requests above are clamped down.
    pub ttl_max: Duration,
    /// How grace is sized.
    pub grace: GracePolicy,
    /// TEST (`--sabotage`): a known way to break safety, for checkers to
    /// show they catch it. Never set in production.
    pub sabotage: Option<Sabotage>,
}

/// `lock-server --sabotage`: a known way to break safety, on purpose.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Sabotage {
    /// Every grant ends on the server at half the lease it was answered
    /// with: the lease a client is promised is cut short, so a successor is
    /// granted while the holder still (rightly, by its conservative
    /// deadline) believes it holds.
    EarlyExpiry,
    /// A replica that takes over writes without the epoch fence
    /// (PostgreSQL): a deposed leader's in-flight writes commit after a
    /// successor took over.
    SkipEpochFence,
}

impl Sabotage {
    /// As the flag spells it.
    pub fn as_str(self) -> &'static str {
        match self {
            Sabotage::EarlyExpiry => "early-expiry",
            Sabotage::SkipEpochFence => "skip-epoch-fence",
        }
    }
}

impl Default for Limits {
    /// The C4 defaults.
    fn default() -> Self {
        Limits {
            default_ttl: Duration::from_secs(30),
            session_ttl: Duration::from_secs(15),
            ttl_min: Duration::from_millis(100),
            ttl_max: Duration::from_secs(600),
            grace: GracePolicy::default(),
            sabotage: None,
        }
    }
}

impl Limits {
    /// The TTL granted for a request of `requested_ms` (absent: `default`),
    /// clamped to `[ttl_min, ttl_max]`. Clamping is never an error (C1).
    pub fn clamp(&self, requested_ms: Option<u64>, default: Duration) -> Duration {
        let asked = requested_ms.map(Duration::from_millis).unwrap_or(default);
        asked.clamp(self.ttl_min, self.ttl_max)
    }
}

/// Bounds on what the table keeps beyond what expiry bounds by time.
#[derive(Clone, Debug, PartialEq)]
pub struct Caps {
    /// The most sessions (live, or lapsed and not yet expired) held at once; an
    /// L1 beyond it is `503 UNAVAILABLE` and creates nothing.
    pub max_sessions: usize,
    /// The most expired-session ids remembered (so L2 answers 410, not 404);
    /// the oldest is forgotten first.
    pub max_tombstones: usize,
    /// How long an expired session id is remembered at most.
    pub tombstone_keep: Duration,
    /// About the most sessions plus grants one sweep retires; the rest wait for
    /// the next sweep. A session goes with all its grants, so the last session
    /// of a batch may take it past this by the keys it held.
    pub sweep_batch: usize,
}

impl Default for Caps {
    /// A million sessions, 100,000 tombstones kept up to an hour, 4,096 per sweep.
    fn default() -> Self {
        Caps {
            max_sessions: 1_000_000,
            max_tombstones: 100_000,
            tombstone_keep: Duration::from_secs(3600),
            sweep_batch: 4096,
        }
    }
}
