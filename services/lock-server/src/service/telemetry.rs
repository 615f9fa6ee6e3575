//! The lock service's side of `/metrics` and of `/v1/config`'s clock: the
//! families it encodes at each scrape ([`Families`]), the grant histogram it
//! records into, and the clock discipline it reads and logs. The registry
//! and the encoding helpers are in `metrics.rs`.

use std::fmt;
use std::sync::atomic::Ordering;
use std::time::Duration;

use fencepost_api::clock::MonoTime;
use fencepost_api::clock_discipline::{self, ClockDiscipline, ClockDisciplineError};
use fencepost_api::grace::GracePolicy;
use fencepost_api::lock::ServerClockView;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;

use super::lock_service::LockService;
use super::metrics::{Families, counter, gauge, histogram};

impl Families for LockService {
    fn encode_families(&self, encoder: &mut DescriptorEncoder) -> fmt::Result {
        LockService::encode_families(self, encoder)
    }
}

impl LockService {
    /// Prometheus text for `/metrics` (C5 names, dots as underscores).
    pub fn metrics_text(&self) -> String {
        let mut out = String::with_capacity(8192);
        if let Err(e) =
            prometheus_client::encoding::prometheus_text::encode(&mut out, &self.metrics.registry)
        {
            tracing::error!(error = %e, "could not encode /metrics");
        }
        out
    }

    /// Records an L4 answered with a new grant, `elapsed` from the request's
    /// receipt to its answer (`lock_grant_duration_seconds`).
    pub fn observe_grant(&self, elapsed: Duration) {
        self.metrics.grant_duration.observe(elapsed.as_secs_f64());
    }

    /// `lock.clock.offset-max` (θ_max) with a derived grace; `None` with a
    /// fixed one, which configures no offset bound.
    pub fn offset_max(&self) -> Option<Duration> {
        match &self.table().limits().grace {
            GracePolicy::Derived(p) => Some(p.offset_max),
            GracePolicy::Fixed(_) => None,
        }
    }

    /// The kernel's clock discipline now. The first failure to read it is
    /// logged at WARN (`clock_discipline_unreadable`); later ones silently.
    pub fn clock_discipline(&self) -> Result<ClockDiscipline, ClockDisciplineError> {
        let reading = clock_discipline::read();
        if let Err(e) = &reading
            && !self.metrics.clock_warned.swap(true, Ordering::Relaxed)
        {
            tracing::warn!(
                event = "clock_discipline_unreadable",
                error = %e,
                "cannot read the kernel's clock discipline; lock_clock_* metrics are absent and /v1/config's clock says why"
            );
        }
        reading
    }

    /// `/v1/config`'s `clock`: the reading now beside the configured bound.
    pub fn clock_view(&self) -> ServerClockView {
        let offset_max = self.offset_max();
        let ms = |d: Duration| d.as_secs_f64() * 1e3;
        let mut view = ServerClockView {
            offset_max_ms: offset_max.map(ms),
            ..ServerClockView::default()
        };
        match self.clock_discipline() {
            Ok(d) => {
                view.maxerror_ms = Some(ms(d.max_error));
                view.esterror_ms = Some(ms(d.est_error));
                view.synchronised = Some(d.synchronised);
                view.within_offset_max = offset_max.map(|o| d.within(o));
            }
            Err(e) => view.error = Some(e.to_string()),
        }
        view
    }

    /// Logs the clock discipline once, at start: INFO (`clock_discipline`)
    /// when the host vouches for `lock.clock.offset-max`, WARN when the clock
    /// is unsynchronised or its maximum error is over the bound.
    pub fn log_clock_discipline(&self) {
        let Ok(d) = self.clock_discipline() else {
            return; // Logged at WARN by clock_discipline.
        };
        let offset_max = self.offset_max();
        let maxerror_ms = d.max_error.as_secs_f64() * 1e3;
        let esterror_ms = d.est_error.as_secs_f64() * 1e3;
        let offset_max_ms = offset_max.map(|o| o.as_secs_f64() * 1e3);
        let over = offset_max.is_some_and(|o| d.max_error > o);
        if !d.synchronised || over {
            let bound =
                offset_max_ms.map_or("none (fixed grace)".to_string(), |o| format!("{o} ms"));
            let message = if d.synchronised {
                format!(
                    "the host clock's maximum error {maxerror_ms} ms is over lock.clock.offset-max {bound}"
                )
            } else {
                format!(
                    "the kernel flags the host clock unsynchronised (maximum error {maxerror_ms} ms bounds nothing); \
                     it cannot vouch for lock.clock.offset-max {bound}"
                )
            };
            tracing::warn!(
                event = "clock_discipline",
                maxerror_ms,
                esterror_ms,
                synchronised = d.synchronised,
                offset_max_ms,
                "{message}"
            );
        } else {
            tracing::info!(
                event = "clock_discipline",
                maxerror_ms,
                esterror_ms,
                synchronised = d.synchronised,
                offset_max_ms,
                "the host clock is synchronised; its maximum error is within lock.clock.offset-max"
            );
        }
    }

    /// Every family, in the order of the reference (observability.md).
    fn encode_families(&self, e: &mut DescriptorEncoder) -> fmt::Result {
        let now = self.clock.now();
        self.encode_request_counters(e)?;
        self.encode_store_families(e)?;
        histogram(
            e,
            "lock_grant_duration_seconds",
            "L4 requests answered with a new grant: request received to answer ready, store commit included, seconds.",
            &self.metrics.grant_duration,
        )?;
        self.encode_expired(e)?;
        self.encode_table_and_leader_gauges(e, now)?;
        self.encode_clock_gauges(e)
    }

    /// What the requests did: grants, reacquires, renewals, releases, heartbeats.
    fn encode_request_counters(&self, e: &mut DescriptorEncoder) -> fmt::Result {
        let c = &self.counters;
        for (name, help, value) in [
            (
                "lock_grants",
                "Grants issued (L4 with a new token).",
                &c.grants,
            ),
            (
                "lock_reacquires",
                "L4 by the holding session, answered with its current grant.",
                &c.reacquires,
            ),
            ("lock_renewals", "Renewals accepted (L5).", &c.renewals),
            (
                "lock_releases",
                "Grants released (L6, L3, L8).",
                &c.releases,
            ),
            (
                "lock_heartbeats",
                "Heartbeats accepted (L2).",
                &c.heartbeats,
            ),
        ] {
            counter(e, name, help, value.load(Ordering::Relaxed))?;
        }
        Ok(())
    }

    /// The group committer's counters and commit durations (stores that batch).
    fn encode_store_families(&self, e: &mut DescriptorEncoder) -> fmt::Result {
        if let Some(st) = self.store.commit_stats() {
            counter(
                e,
                "lock_store_transactions",
                "Store transactions (one fsync each): group commits and their retries alone.",
                st.transactions,
            )?;
            counter(
                e,
                "lock_store_writes",
                "Requests' store writes answered by the group committer (batched or alone).",
                st.units,
            )?;
            counter(
                e,
                "lock_store_retried_alone",
                "Writes retried in a transaction of their own after their batch failed.",
                st.retried_alone,
            )?;
        }
        if let Some(h) = &self.metrics.commit_duration {
            histogram(
                e,
                "lock_store_commit_duration_seconds",
                "Duration of one store transaction (a group commit or a retry alone), seconds.",
                h,
            )?;
        }
        Ok(())
    }

    /// `lock_expired{kind}`: sessions and leases that ran out on the server.
    fn encode_expired(&self, e: &mut DescriptorEncoder) -> fmt::Result {
        let c = &self.counters;
        let mut family = e.encode_descriptor(
            "lock_expired",
            "Sessions and leases that ran out on the server.",
            None,
            MetricType::Counter,
        )?;
        for (kind, v) in [
            ("session", &c.expired_sessions),
            ("lease", &c.expired_leases),
        ] {
            let labels = [("kind", kind)];
            ConstCounter::new(v.load(Ordering::Relaxed)).encode(family.encode_family(&labels)?)?;
        }
        Ok(())
    }

    /// The lock table now (live sessions, held keys) and this replica's leadership.
    fn encode_table_and_leader_gauges(
        &self,
        e: &mut DescriptorEncoder,
        now: MonoTime,
    ) -> fmt::Result {
        let (live, held) = self.table().gauges(now);
        gauge(e, "lock_sessions_live", "Sessions not lapsed.", live)?;
        gauge(e, "lock_locks_held", "Keys HELD now.", held)?;
        let lead = self.leader_state();
        gauge(
            e,
            "lock_leader",
            "1 while this replica serves (the leader; a single node always), 0 on a standby.",
            i64::from(lead.serves(now)),
        )?;
        gauge(
            e,
            "lock_leader_epoch",
            "The leader epoch this replica serves or last saw (0 on a single node).",
            lead.epoch,
        )
    }

    /// θ_max as configured and the kernel's clock-discipline reading, if readable.
    fn encode_clock_gauges(&self, e: &mut DescriptorEncoder) -> fmt::Result {
        if let Some(o) = self.offset_max() {
            gauge(
                e,
                "lock_clock_offset_max_seconds",
                "The configured lock.clock.offset-max (theta_max), seconds.",
                o.as_secs_f64(),
            )?;
        }
        if let Ok(d) = self.clock_discipline() {
            gauge(
                e,
                "lock_clock_maxerror_seconds",
                "The kernel's maximum clock error bound (adjtimex maxerror), seconds.",
                d.max_error.as_secs_f64(),
            )?;
            gauge(
                e,
                "lock_clock_esterror_seconds",
                "The kernel's estimated clock error (adjtimex esterror), seconds.",
                d.est_error.as_secs_f64(),
            )?;
            gauge(
                e,
                "lock_clock_synchronised",
                "1 when the kernel says the clock is synchronised, 0 when not (STA_UNSYNC or TIME_ERROR).",
                i64::from(d.synchronised),
            )?;
        }
        Ok(())
    }
}
