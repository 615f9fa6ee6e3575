//! Telemetry, SDK part: the Prometheus exposition built with
//! `prometheus-client` (classic text encoder). Every family of the shared
//! spec is there with every counter and label value at 0 before any event;
//! the heartbeat histograms' `le` labels are the configured boundaries, the
//! trigger-1 budget among them; `_count`/`_sum` agree with the HDR
//! histograms; promtool accepts the text; clients sharing one
//! `PrometheusMetrics` add up, and an application's own registry shows the
//! same families.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::Duration;

use fencepost_api::buckets::{budget_le, le_label};
use fencepost_api::clock_discipline;
use fencepost_sdk::metrics::{PrometheusMetrics, margin_bounds};
use fencepost_sdk::prometheus_client::registry::Registry;
use fencepost_sdk::{
    AcquireOptions, Clock, DeadlineKind, Histogram, LockClient, LockClientConfig, MarginPolicy,
    TokioClock,
};

use crate::client;
use crate::mock::{Ep, Mock, Scripted};

/// One sample line of the exposition.
#[derive(Debug, Clone)]
struct Sample {
    name: String,
    labels: Vec<(String, String)>,
    value: f64,
}

impl Sample {
    fn label(&self, key: &str) -> Option<&str> {
        self.labels
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }
}

/// The sample lines of a classic text exposition (our label values hold no
/// commas, quotes or spaces).
fn samples(text: &str) -> Vec<Sample> {
    text.lines()
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| {
            let (series, value) = l.rsplit_once(' ').expect("series value");
            let (name, labels) = match series.split_once('{') {
                Some((n, rest)) => {
                    let body = rest.strip_suffix('}').expect("closing brace");
                    let labels = body
                        .split(',')
                        .filter(|p| !p.is_empty())
                        .map(|p| {
                            let (k, v) = p.split_once('=').expect("k=v");
                            (k.to_string(), v.trim_matches('"').to_string())
                        })
                        .collect();
                    (n.to_string(), labels)
                }
                None => (series.to_string(), Vec::new()),
            };
            Sample {
                name,
                labels,
                value: value.parse().expect("a number"),
            }
        })
        .collect()
}

/// The value of the one sample `name{key="value"}` (or unlabelled when `label` is `None`).
fn value(s: &[Sample], name: &str, label: Option<(&str, &str)>) -> f64 {
    let found: Vec<&Sample> = s
        .iter()
        .filter(|x| x.name == name)
        .filter(|x| match label {
            Some((k, v)) => x.label(k) == Some(v),
            None => x.labels.is_empty(),
        })
        .collect();
    assert_eq!(found.len(), 1, "{name} {label:?}: {found:?}");
    found[0].value
}

/// The `le` values of `name`'s buckets (for `label`), in exposition order.
fn les(s: &[Sample], name: &str, label: Option<(&str, &str)>) -> Vec<String> {
    s.iter()
        .filter(|x| x.name == format!("{name}_bucket"))
        .filter(|x| label.is_none_or(|(k, v)| x.label(k) == Some(v)))
        .map(|x| x.label("le").expect("le").to_string())
        .collect()
}

/// The `# TYPE` of every family in the text.
fn types(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|l| l.strip_prefix("# TYPE "))
        .map(|l| {
            let (n, t) = l.split_once(' ').expect("name type");
            (n.to_string(), t.to_string())
        })
        .collect()
}

/// The SDK families of the shared spec and their types (the clock gauges apart).
const FAMILIES: [(&str, &str); 11] = [
    ("lock_heartbeat_rtt_seconds", "histogram"),
    ("lock_heartbeat_rtt_corrected_seconds", "histogram"),
    ("lock_heartbeat_tick_lag_seconds", "histogram"),
    ("lock_heartbeat_outcomes_total", "counter"),
    ("lock_heartbeat_ticks_total", "counter"),
    ("lock_heartbeat_ticks_missed_total", "counter"),
    ("lock_session_lost_total", "counter"),
    ("lock_handles_lost_total", "counter"),
    ("lock_lease_abandoned_total", "counter"),
    ("lock_acquires_total", "counter"),
    ("lock_margin_effective", "histogram"),
];
const CLOCK_GAUGES: [&str; 3] = [
    "lock_clock_maxerror_seconds",
    "lock_clock_esterror_seconds",
    "lock_clock_synchronised",
];
const HEARTBEAT_HISTOGRAMS: [&str; 3] = [
    "lock_heartbeat_rtt_seconds",
    "lock_heartbeat_rtt_corrected_seconds",
    "lock_heartbeat_tick_lag_seconds",
];

fn config(lease: Duration, ttl: Duration, margin: MarginPolicy) -> LockClientConfig {
    LockClientConfig::new("http://127.0.0.1:9")
        .with_default_ttl(lease)
        .with_session_ttl(ttl)
        .with_margin(margin)
}

/// Before any event: every family, every counter and label value at 0, the
/// configured boundaries as `le` labels, the trigger-1 budget among them.
#[test]
fn the_exposition_has_every_family_at_zero_and_the_configured_buckets() {
    let (lease, ttl) = (Duration::from_secs(5), Duration::from_secs(2));
    for margin in [
        MarginPolicy::Fixed(0.3),
        MarginPolicy::Adaptive {
            k: 4.0,
            floor: 0.05,
            ceiling: 0.5,
        },
    ] {
        let c = LockClient::new(config(lease, ttl, margin)).unwrap();
        let text = c.metrics_text();
        let t = types(&text);
        for (name, ty) in FAMILIES {
            assert!(
                t.contains(&(name.to_string(), ty.to_string())),
                "{name} {ty}:\n{text}"
            );
        }
        if clock_discipline::read().is_ok() {
            for name in CLOCK_GAUGES {
                assert!(t.contains(&(name.to_string(), "gauge".into())), "{text}");
            }
        }
        let s = samples(&text);
        for (name, label, values) in [
            (
                "lock_heartbeat_outcomes_total",
                "outcome",
                &["reply", "timeout", "error"][..],
            ),
            (
                "lock_session_lost_total",
                "reason",
                &["expired", "unknown", "deadline"],
            ),
            ("lock_acquires_total", "outcome", &["granted", "failed"]),
        ] {
            for v in values {
                assert_eq!(value(&s, name, Some((label, v))), 0.0, "{name} {v}");
            }
        }
        for name in [
            "lock_heartbeat_ticks_total",
            "lock_heartbeat_ticks_missed_total",
            "lock_handles_lost_total",
            "lock_lease_abandoned_total",
        ] {
            assert_eq!(value(&s, name, None), 0.0, "{name}");
        }
        let bounds = c.prometheus().heartbeat_bounds();
        let mut want: Vec<String> = bounds.iter().map(|&b| le_label(b)).collect();
        want.push("+Inf".into());
        for name in HEARTBEAT_HISTOGRAMS {
            assert_eq!(les(&s, name, None), want, "{name}");
            assert_eq!(value(&s, &format!("{name}_count"), None), 0.0);
            assert_eq!(value(&s, &format!("{name}_sum"), None), 0.0);
        }
        let margins: Vec<f64> = match margin {
            MarginPolicy::Fixed(m) => vec![m],
            MarginPolicy::Adaptive { floor, ceiling, .. } => vec![floor, ceiling],
        };
        for m in margins {
            let budget = budget_le(lease, ttl, m);
            assert!(want.contains(&budget), "budget {budget} not in {want:?}");
        }
        let mut margin_les: Vec<String> = margin_bounds().into_iter().map(le_label).collect();
        margin_les.push("+Inf".into());
        for kind in DeadlineKind::ALL {
            let l = Some(("exchange", kind.exchange()));
            assert_eq!(les(&s, "lock_margin_effective", l), margin_les);
            assert_eq!(value(&s, "lock_margin_effective_count", l), 0.0);
        }
        let exchanges: BTreeSet<&str> = s
            .iter()
            .filter(|x| x.name == "lock_margin_effective_count")
            .filter_map(|x| x.label("exchange"))
            .collect();
        assert_eq!(
            exchanges,
            BTreeSet::from(["open", "heartbeat", "acquire", "renew", "confirm"])
        );
    }
}

/// `_count` equals the HDR histogram's length, `_sum` its total (within the
/// HDR's 3 significant digits), and the counters equal `stats()`.
fn assert_agrees(c: &LockClient, text: &str) {
    let s = samples(text);
    for (name, h) in [
        ("lock_heartbeat_rtt_seconds", c.rtt_histogram()),
        (
            "lock_heartbeat_rtt_corrected_seconds",
            c.corrected_rtt_histogram(),
        ),
        ("lock_heartbeat_tick_lag_seconds", c.tick_lag_histogram()),
    ] {
        let count = value(&s, &format!("{name}_count"), None);
        assert_eq!(count, h.len() as f64, "{name}_count");
        let inf = value(&s, &format!("{name}_bucket"), Some(("le", "+Inf")));
        assert_eq!(inf, count, "{name} +Inf bucket");
        let sum = value(&s, &format!("{name}_sum"), None);
        let hdr_sum = hdr_total_secs(&h);
        assert!(
            (sum - hdr_sum).abs() <= hdr_sum * 1e-3 + 1e-6,
            "{name}_sum {sum} vs HDR {hdr_sum}"
        );
    }
    let st = c.stats();
    for (outcome, n) in [
        ("reply", st.hb_replies),
        ("timeout", st.hb_timeouts),
        ("error", st.hb_errors),
    ] {
        let l = Some(("outcome", outcome));
        assert_eq!(value(&s, "lock_heartbeat_outcomes_total", l), n as f64);
    }
    assert_eq!(
        value(&s, "lock_heartbeat_ticks_total", None),
        st.hb_ticks as f64
    );
    assert_eq!(
        value(&s, "lock_heartbeat_ticks_missed_total", None),
        st.hb_ticks_missed as f64
    );
    for (outcome, n) in [
        ("granted", st.acquires_granted),
        ("failed", st.acquires_failed),
    ] {
        let l = Some(("outcome", outcome));
        assert_eq!(value(&s, "lock_acquires_total", l), n as f64);
    }
    let m = c.margin_stats();
    for kind in DeadlineKind::ALL {
        let l = Some(("exchange", kind.exchange()));
        let got = value(&s, "lock_margin_effective_count", l);
        assert_eq!(got, m.get(kind).count as f64, "{kind:?}");
        let sum = value(&s, "lock_margin_effective_sum", l);
        assert!((sum - m.get(kind).sum_ppm as f64 * 1e-6).abs() < 1e-9);
    }
}

/// The HDR histogram's total, seconds (each value at its bucket's equivalent).
fn hdr_total_secs(h: &Histogram<u64>) -> f64 {
    h.iter_recorded()
        .map(|v| v.value_iterated_to() as f64 * v.count_at_value() as f64)
        .sum::<f64>()
        * 1e-6
}

/// Heartbeats with replies, a timeout and a hang-up; acquires granted and
/// failed; then the exposition agrees with the HDR histograms and `stats()`.
#[tokio::test(start_paused = true)]
async fn counts_and_sums_agree_with_the_hdr_histograms_and_the_stats() {
    let clock: Arc<dyn Clock> = Arc::new(TokioClock::new());
    let mock = Mock::start(clock.clone()).await;
    mock.set_default(Ep::Heartbeat, Scripted::ok_after(Duration::from_millis(3)));
    mock.script(
        Ep::Heartbeat,
        [
            Scripted::ok(),
            Scripted::ok_after(Duration::from_secs(30)),
            Scripted::ok(),
            Scripted::hang_up(),
        ],
    );
    let c = client(&mock.url, clock.clone(), |c| {
        c.with_session_ttl(Duration::from_secs(10))
            .with_request_timeout(Duration::from_millis(400))
    });
    let session = c.open_session("prom").await.unwrap();
    let h = session
        .acquire("a", AcquireOptions::default())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(12)).await;
    mock.script(Ep::Acquire, [Scripted::held(None)]);
    assert!(
        session
            .acquire("b", AcquireOptions::default())
            .await
            .is_err()
    );
    let st = c.stats();
    assert_eq!((st.acquires_granted, st.acquires_failed), (1, 1));
    assert!(st.hb_timeouts >= 1 && st.hb_errors >= 1, "{st:?}");
    assert!(c.rtt_histogram().len() >= 3);
    assert_agrees(&c, &c.metrics_text());

    // reset_measurements leaves the Prometheus instruments alone.
    let before = samples(&c.metrics_text());
    c.reset_measurements();
    let after = samples(&c.metrics_text());
    for name in [
        "lock_heartbeat_rtt_seconds_count",
        "lock_heartbeat_ticks_total",
    ] {
        assert_eq!(value(&before, name, None), value(&after, name, None));
        assert!(value(&after, name, None) > 0.0);
    }
    session.release(h).await.unwrap();
    session.close().await;
}

/// Two clients on one `PrometheusMetrics`: the families count both; the
/// application's registry (one registration) shows the same text.
#[tokio::test(start_paused = true)]
async fn two_clients_sharing_one_prometheus_metrics_add_up() {
    let clock: Arc<dyn Clock> = Arc::new(TokioClock::new());
    let mock = Mock::start(clock.clone()).await;
    let tweak = |c: LockClientConfig| c.with_session_ttl(Duration::from_secs(3));
    let shared = PrometheusMetrics::for_config(&tweak(LockClientConfig::new(&mock.url)));
    let on_shared = |clock: Arc<dyn Clock>| {
        let config = tweak(LockClientConfig::new(&mock.url).with_clock(clock));
        LockClient::with_prometheus(config, shared.clone()).expect("valid test config")
    };
    let a = on_shared(clock.clone());
    let b = on_shared(clock.clone());
    let sa = a.open_session("a").await.unwrap();
    let sb = b.open_session("b").await.unwrap();
    let _ha = sa.acquire("ka", AcquireOptions::default()).await.unwrap();
    let _hb = sb.acquire("kb", AcquireOptions::default()).await.unwrap();
    let _hb2 = sb.acquire("kb2", AcquireOptions::default()).await.unwrap();
    tokio::time::sleep(Duration::from_millis(5_500)).await;
    let (x, y) = (a.stats(), b.stats());
    assert!(x.hb_replies > 0 && y.hb_replies > 0);

    let mut registry = Registry::default();
    shared.register(&mut registry);
    let mut app = String::new();
    fencepost_sdk::prometheus_client::encoding::prometheus_text::encode(&mut app, &registry)
        .unwrap();
    let without_clock = |t: &str| -> String {
        t.lines()
            .filter(|l| !l.contains("lock_clock_"))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let text = a.metrics_text();
    assert_eq!(without_clock(&app), without_clock(&text));
    assert_eq!(without_clock(&text), without_clock(&b.metrics_text()));

    let s = samples(&text);
    let l = Some(("outcome", "granted"));
    assert_eq!(value(&s, "lock_acquires_total", l), 3.0);
    assert_eq!(
        value(
            &s,
            "lock_heartbeat_outcomes_total",
            Some(("outcome", "reply"))
        ),
        (x.hb_replies + y.hb_replies) as f64
    );
    assert_eq!(
        value(&s, "lock_heartbeat_ticks_total", None),
        (x.hb_ticks + y.hb_ticks) as f64
    );
    assert_eq!(
        value(&s, "lock_heartbeat_rtt_seconds_count", None),
        (a.rtt_histogram().len() + b.rtt_histogram().len()) as f64
    );
    let acq = Some(("exchange", "acquire"));
    assert_eq!(value(&s, "lock_margin_effective_count", acq), 3.0);
    assert!((value(&s, "lock_margin_effective_sum", acq) - 0.9).abs() < 1e-9);
}

/// `promtool check metrics` (Prometheus 2.42 here) accepts the exposition,
/// lint included. Skipped without promtool unless CI=true.
#[tokio::test(start_paused = true)]
async fn promtool_accepts_the_exposition() {
    let clock: Arc<dyn Clock> = Arc::new(TokioClock::new());
    let mock = Mock::start(clock.clone()).await;
    let c = client(&mock.url, clock.clone(), |c| {
        c.with_session_ttl(Duration::from_secs(3))
    });
    let session = c.open_session("promtool").await.unwrap();
    let _h = session
        .acquire("k", AcquireOptions::default())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_secs(4)).await;
    for text in [
        LockClient::new(config(
            Duration::from_secs(30),
            Duration::from_secs(15),
            MarginPolicy::default(),
        ))
        .unwrap()
        .metrics_text(),
        c.metrics_text(),
    ] {
        if !fencepost_harness::promtool_check_metrics(&text) {
            return;
        }
    }
}
