//! What recording one heartbeat exchange costs the SDK: the whole
//! `Metrics::record_exchange` (raw and corrected RTT into the HDR
//! histograms *and* the Prometheus histograms, the outcome counters), beside
//! its parts measured in the same run: one HDR record and one
//! `prometheus_client` histogram observe on the SDK's heartbeat boundaries.
//! A ratio of these, not an absolute time, is the result (shared machines).
//!
//! Run: `cargo bench -p fencepost-sdk --bench record -- --warm-up-time 1 --measurement-time 3`

use std::hint::black_box;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use fencepost_sdk::metrics::{Metrics, Outcome};
use fencepost_sdk::prometheus_client::metrics::histogram::Histogram as PromHistogram;
use fencepost_sdk::{MarginPolicy, PrometheusMetrics};

fn bench(c: &mut Criterion) {
    let lease = Duration::from_secs(30);
    let session = Duration::from_secs(15);
    let prom = PrometheusMetrics::new(lease, session, &MarginPolicy::Fixed(0.3));
    let metrics = Metrics::with_prometheus(false, prom.clone());
    let bounds = prom.heartbeat_bounds().to_vec();
    let observe = PromHistogram::new(bounds.iter().copied());
    let mut hdr = hdrhistogram::Histogram::<u64>::new_with_bounds(1, 3_600_000_000, 3).unwrap();
    // A spread of RTTs (1.2 ms … 45 ms), cycled so no branch is always the same.
    let rtts: Vec<Duration> = (0..64u64)
        .map(|i| Duration::from_micros(1_200 + i * i * 11))
        .collect();
    let mut g = c.benchmark_group("heartbeat_record");
    let mut i = 0usize;
    g.bench_function("record_exchange (HDR + Prometheus, raw + corrected)", |b| {
        b.iter(|| {
            i = (i + 1) % rtts.len();
            let rtt = rtts[i];
            metrics.record_exchange(Outcome::Reply, black_box(rtt), [rtt]);
        })
    });
    g.bench_function("hdr record (one)", |b| {
        b.iter(|| {
            i = (i + 1) % rtts.len();
            let _ = hdr.record(black_box(rtts[i].as_micros() as u64));
        })
    });
    g.bench_function("prometheus observe (one)", |b| {
        b.iter(|| {
            i = (i + 1) % rtts.len();
            observe.observe(black_box(rtts[i].as_secs_f64()));
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
