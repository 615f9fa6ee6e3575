//! `/metrics` on `prometheus-client`: one [`Registry`] per service, encoded
//! with the classic Prometheus text encoder (format 0.0.4; promtool accepts
//! it, unlike the OpenMetrics encoder's output).
//!
//! The registry holds one [`Collector`], [`ServiceCollector`], which reads the
//! service at scrape time: the [`Counters`](super::Counters) the operations
//! bump (as `ConstCounter`s, so the hot path keeps its relaxed atomics), the
//! store's [`CommitStats`](crate::store::CommitStats), the gauges computed
//! from the table and the election's view, the kernel's clock discipline and
//! the two latency histograms (real `Histogram` instruments: the grant's,
//! observed at the HTTP edge, and the store's commit, observed by the group
//! committer). One collector keeps the families in a fixed order and lets a
//! family be absent: the store's on `memory:`, the clock's when adjtimex
//! cannot be read, `lock_clock_offset_max_seconds` under a fixed grace.
//!
//! Counters are named without `_total` (the encoder appends it) and every
//! counter and label value is present, at 0, from the start.

use std::fmt;
use std::sync::Weak;
use std::sync::atomic::AtomicBool;

use fencepost_api::buckets::server_bounds;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeGaugeValue, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

/// The `content-type` of `/metrics`: the Prometheus text format 0.0.4.
pub const CONTENT_TYPE: &str = prometheus_client::encoding::prometheus_text::CONTENT_TYPE;

/// A service's registry and the instruments it observes into.
pub struct Metrics {
    /// Holds the [`ServiceCollector`].
    pub(super) registry: Registry,
    /// `lock_grant_duration_seconds`.
    pub(super) grant_duration: Histogram,
    /// `lock_store_commit_duration_seconds`: the store's own histogram (durable stores).
    pub(super) commit_duration: Option<Histogram>,
    /// Set once an unreadable clock discipline has been logged.
    pub(super) clock_warned: AtomicBool,
}

impl Metrics {
    /// The metrics of the service `service` points to (built with
    /// `Arc::new_cyclic`, so the registry does not keep its service alive),
    /// over its store's `commit_duration` histogram, if the store keeps one.
    pub(super) fn new(service: Weak<dyn Families>, commit_duration: Option<Histogram>) -> Self {
        let mut registry = Registry::default();
        registry.register_collector(Box::new(ServiceCollector { service }));
        Metrics {
            registry,
            grant_duration: Histogram::new(server_bounds()),
            commit_duration,
            clock_warned: AtomicBool::new(false),
        }
    }
}

/// Reads the service at every scrape. Holds it weakly: the service owns the
/// registry that owns this collector.
struct ServiceCollector {
    service: Weak<dyn Families>,
}

/// What the collector reads at each scrape: the service's families
/// (implemented by the lock service in `telemetry.rs`, so that this module
/// does not depend on the service).
pub(super) trait Families: Send + Sync {
    /// Encodes every family of the service's state now.
    fn encode_families(&self, encoder: &mut DescriptorEncoder) -> fmt::Result;
}

impl fmt::Debug for ServiceCollector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("ServiceCollector")
    }
}

impl Collector for ServiceCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> fmt::Result {
        match self.service.upgrade() {
            Some(service) => service.encode_families(&mut encoder),
            None => Ok(()),
        }
    }
}

/// One unlabelled counter family (`name` without `_total`).
pub(super) fn counter(
    e: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    value: u64,
) -> fmt::Result {
    let c = ConstCounter::new(value);
    c.encode(e.encode_descriptor(name, help, None, c.metric_type())?)
}

/// One unlabelled gauge family.
pub(super) fn gauge<N: EncodeGaugeValue>(
    e: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    value: N,
) -> fmt::Result {
    let g = ConstGauge::new(value);
    g.encode(e.encode_descriptor(name, help, None, g.metric_type())?)
}

/// One histogram family.
pub(super) fn histogram(
    e: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    h: &Histogram,
) -> fmt::Result {
    h.encode(e.encode_descriptor(name, help, None, h.metric_type())?)
}
