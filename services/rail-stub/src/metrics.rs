//! `GET /metrics`: the Prometheus text exposition (format 0.0.4) on
//! `prometheus-client`, with its classic text encoder (C5 names, dots as
//! underscores; the encoder appends `_total` to counters).
//!
//! Every value comes from the ledger and the state (the counters survive a
//! restart on an SQLite ledger), so the registry holds one [`Collector`] over
//! a [`Scrape`]: the values taken at the scrape, encoded as `ConstCounter`s
//! and `ConstGauge`s. Every counter and label value is present from the start.
//!
//! The three must-watch series are `lock_fenced_out_total{fence="1"|"2"}` and
//! `rail_duplicate_attempted_total` (healthy value exactly 0) and
//! `payout_backlog_age_seconds` (healthy: bounded).

use std::fmt;

use fencepost_api::rail::LedgerCounters;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeGaugeValue, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Registry;

use crate::state::AppState;

/// The `content-type` of the text exposition format.
pub const CONTENT_TYPE: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

/// What one scrape reports, read from the state in one go.
#[derive(Clone, Copy, Debug)]
pub struct Scrape {
    /// The ledger's counters.
    pub counters: LedgerCounters,
    /// `payout_backlog_age_seconds`.
    pub backlog_age_s: f64,
    /// `rail_payouts`.
    pub payouts: u64,
    /// `rail_submissions_in_flight`.
    pub in_flight: u64,
}

impl Scrape {
    /// The values of `state` now.
    pub fn of(state: &AppState) -> Self {
        Scrape {
            counters: state.counters(),
            backlog_age_s: state.backlog_age().as_secs_f64(),
            payouts: state.payout_count() as u64,
            in_flight: state.submissions_in_flight(),
        }
    }
}

/// One unlabelled counter family (`name` without `_total`).
fn counter(e: &mut DescriptorEncoder, name: &str, help: &str, value: u64) -> fmt::Result {
    let c = ConstCounter::new(value);
    c.encode(e.encode_descriptor(name, help, None, c.metric_type())?)
}

/// One unlabelled gauge family.
fn gauge<N: EncodeGaugeValue>(
    e: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    value: N,
) -> fmt::Result {
    let g = ConstGauge::new(value);
    g.encode(e.encode_descriptor(name, help, None, g.metric_type())?)
}

impl Collector for Scrape {
    fn encode(&self, mut e: DescriptorEncoder) -> fmt::Result {
        let c = &self.counters;
        {
            let mut family = e.encode_descriptor(
                "lock_fenced_out",
                "Requests refused for a stale token: fence 1 = claim/release (R2/R4), fence 2 = submit (R3). Healthy value: 0.",
                None,
                MetricType::Counter,
            )?;
            for (fence, v) in [("1", c.fenced_out_fence1), ("2", c.fenced_out_fence2)] {
                let labels = [("fence", fence)];
                ConstCounter::new(v).encode(family.encode_family(&labels)?)?;
            }
        }
        counter(
            &mut e,
            "rail_duplicate_attempted",
            "Submissions (R3) for a payout already PAID; nothing was paid. Healthy value: 0.",
            c.duplicate_attempted,
        )?;
        gauge(
            &mut e,
            "payout_backlog_age_seconds",
            "Age of the oldest PENDING or CLAIMED payout; 0 when there is none.",
            self.backlog_age_s,
        )?;
        counter(&mut e, "rail_payouts_paid", "Payouts paid.", c.paid)?;
        counter(
            &mut e,
            "rail_submit_not_claimed",
            "Submissions refused because the token did not hold the claim (NOT_CLAIMED).",
            c.not_claimed,
        )?;
        counter(
            &mut e,
            "rail_already_paid",
            "Claims or releases refused because the payout was already PAID.",
            c.already_paid,
        )?;
        gauge(
            &mut e,
            "rail_payouts",
            "Payouts in the ledger, in any state.",
            self.payouts,
        )?;
        gauge(
            &mut e,
            "rail_submissions_in_flight",
            "Submissions waiting out their simulated rail latency.",
            self.in_flight,
        )
    }
}

/// Renders every metric the rail-stub exports: a registry over this scrape's
/// values, encoded as Prometheus text.
pub fn render(state: &AppState) -> String {
    let mut registry = Registry::default();
    registry.register_collector(Box::new(Scrape::of(state)));
    let mut out = String::with_capacity(2048);
    if let Err(e) = prometheus_client::encoding::prometheus_text::encode(&mut out, &registry) {
        tracing::error!(error = %e, "metrics_encode_failed");
    }
    out
}
