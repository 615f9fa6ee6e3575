//! The time base. ADR-006 states its numbers for production: a 30 s lease, a
//! 15 s session, a 5 s `rail.read.timeout`, D4's "+2 s", and the rail's own
//! latency. A cell with a shorter lease runs the same arithmetic faster:
//! every production duration is multiplied by `lease / 30 s`, so `--ttl 1s`
//! runs the ADR in seconds and `--ttl 30s` in production time. The network
//! (heartbeat RTT, `--net-delay`) is never scaled: it is what is measured.
//!
//! The bench and every experiment size a cell through [`TimeBase`], so the
//! rule lives here once.

use std::time::Duration;

use fencepost_api::latency::LatencySpec;

/// The production lease the ADR's numbers are stated for.
pub const PRODUCTION_LEASE: Duration = Duration::from_secs(30);
/// The production session TTL (C4 `lock.session.ttl`).
pub const PRODUCTION_SESSION_TTL: Duration = Duration::from_secs(15);
/// The production `rail.read.timeout` (C4).
pub const PRODUCTION_RAIL_READ_TIMEOUT: Duration = Duration::from_secs(5);
/// The production rail latency (C4 `rail.latency`).
pub const PRODUCTION_RAIL_LATENCY: &str = "lognormal:p50=40ms,p99=400ms";
/// D4's fixed addition to the rail read timeout.
pub const D4_EXTRA: Duration = Duration::from_secs(2);
/// The shortest session TTL a scaled cell gets (the server's `lock.ttl.min`).
pub const MIN_SESSION_TTL: Duration = Duration::from_millis(100);

/// The factor a cell's production numbers are multiplied by.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct TimeBase {
    /// `lease / 30 s`, or 1 when scaling is off.
    pub scale: f64,
}

impl TimeBase {
    /// The time base of a cell with `lease`: `lease / 30 s`, or 1 when `scaled` is false.
    pub fn for_lease(lease: Duration, scaled: bool) -> Self {
        let scale = if scaled {
            lease.as_secs_f64() / PRODUCTION_LEASE.as_secs_f64()
        } else {
            1.0
        };
        TimeBase { scale }
    }

    /// `production` in this time base.
    pub fn scale(&self, production: Duration) -> Duration {
        production.mul_f64(self.scale)
    }

    /// A latency distribution in this time base.
    pub fn latency(&self, production: LatencySpec) -> LatencySpec {
        scale_latency(production, self.scale)
    }

    /// The production session TTL in this time base, at least [`MIN_SESSION_TTL`].
    pub fn session_ttl(&self) -> Duration {
        self.scale(PRODUCTION_SESSION_TTL).max(MIN_SESSION_TTL)
    }

    /// What D4 requires before a submit: `(read timeout + 2 s)` in this time base.
    pub fn worst_case_hop(&self, production_read_timeout: Duration) -> Duration {
        self.scale(production_read_timeout + D4_EXTRA)
    }
}

/// Multiplies every delay of a latency spec by `k`.
pub fn scale_latency(spec: LatencySpec, k: f64) -> LatencySpec {
    let m = |d: Duration| d.mul_f64(k);
    match spec {
        LatencySpec::Fixed(d) => LatencySpec::Fixed(m(d)),
        LatencySpec::Uniform { min, max } => LatencySpec::Uniform {
            min: m(min),
            max: m(max),
        },
        LatencySpec::LogNormal { p50, p99 } => LatencySpec::LogNormal {
            p50: m(p50),
            p99: m(p99),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_one_second_lease_runs_the_adr_thirty_times_faster() {
        let tb = TimeBase::for_lease(Duration::from_secs(1), true);
        assert_eq!(tb.session_ttl(), Duration::from_millis(500));
        assert_eq!(
            tb.worst_case_hop(PRODUCTION_RAIL_READ_TIMEOUT).as_millis(),
            233
        );
        let unscaled = TimeBase::for_lease(Duration::from_secs(1), false);
        assert_eq!(unscaled.session_ttl(), PRODUCTION_SESSION_TTL);
        assert_eq!(
            TimeBase::for_lease(Duration::from_millis(150), true).session_ttl(),
            MIN_SESSION_TTL
        );
    }
}
