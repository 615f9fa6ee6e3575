//! `--metrics-listen ADDR`: the bench as a Prometheus target, so that the
//! alert rules `bench rules` generates can be tried on a live run.
//!
//! [`Telemetry::serve`] binds ADDR and answers two paths:
//!
//! - `GET /metrics`: the SDK metrics of the cell that is running, every
//!   in-process worker's client recording into one shared set of families
//!   (classic text format 0.0.4). Each cell registers a fresh set, built for
//!   its lease, session TTL and margin (their trigger-1 budgets are bucket
//!   boundaries, `fencepost_api::buckets`), so between cells the counters
//!   restart from 0, as after a process restart, which `rate()` and
//!   `increase()` handle. Before the first cell it answers an empty exposition.
//!   A cell waits (at most [`SCRAPE_WAIT`]) for one scrape of its families at
//!   0 before its first heartbeat, and for one of its final counts after its
//!   load, so that a rate over the run counts every sample of it.
//! - `GET /sd`: Prometheus HTTP service discovery (`http_sd_configs`), the
//!   cell's own services as targets: its lock-server(s) under
//!   `job="lock-server"` and its rail-stub under `job="rail-stub"`, each with
//!   a `cell` label. A scrape config pointing at `/sd` follows the bench from
//!   cell to cell without knowing the ports it picked (free loopback ports).
//!
//! Workers in other processes (the experiments' worker processes) are not
//! covered: their clients are not in this process.

use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::response::IntoResponse;
use axum::routing::get;
use fencepost_sdk::prometheus_client::registry::Registry;
use serde::Serialize;
use tokio::sync::Notify;

/// The exposition's content type (the classic text format).
pub const CONTENT_TYPE_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// One target group of the HTTP service discovery answer.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TargetGroup {
    /// `host:port` of each target.
    pub targets: Vec<String>,
    /// Labels Prometheus attaches to every series scraped from them.
    pub labels: std::collections::BTreeMap<String, String>,
}

impl TargetGroup {
    /// The targets `urls` (`http://host:port`, or `host:port`) as `job`, in `cell`.
    pub fn new<S: AsRef<str>>(job: &str, cell: &str, urls: impl IntoIterator<Item = S>) -> Self {
        TargetGroup {
            targets: urls
                .into_iter()
                .map(|u| {
                    let u = u.as_ref();
                    u.strip_prefix("http://")
                        .unwrap_or(u)
                        .trim_end_matches('/')
                        .to_owned()
                })
                .collect(),
            labels: [("job", job), ("cell", cell)]
                .into_iter()
                .map(|(k, v)| (k.to_owned(), v.to_owned()))
                .collect(),
        }
    }
}

#[derive(Default)]
struct Current {
    registry: Option<Registry>,
    targets: Vec<TargetGroup>,
}

/// The bench's `/metrics` and `/sd`: see the module doc. Cheap to clone.
#[derive(Clone, Default)]
pub struct Telemetry {
    current: Arc<RwLock<Current>>,
    /// `/metrics` answers so far, and a wake-up for [`Telemetry::scraped`].
    scrapes: Arc<(AtomicU64, Notify)>,
}

/// How long a cell waits for a scrape at its start and its end (see
/// [`Telemetry::scraped`]): a few scrape intervals of a test's 1 s scrape.
pub const SCRAPE_WAIT: Duration = Duration::from_secs(3);

/// `--metrics-listen ADDR` could not bind its address.
#[derive(Debug, thiserror::Error)]
#[error("--metrics-listen {addr}: cannot listen: {source}")]
pub struct ListenError {
    /// The address asked for.
    pub addr: SocketAddr,
    /// Why the bind failed.
    pub source: std::io::Error,
}

impl Telemetry {
    /// `--metrics-listen`: `None` without an address; else serves at `addr`
    /// and says on stderr, as `program`, where the two paths are.
    pub async fn listen(
        addr: Option<SocketAddr>,
        program: &str,
    ) -> Result<Option<Telemetry>, ListenError> {
        let Some(addr) = addr else {
            return Ok(None);
        };
        let (t, bound) = Telemetry::serve(addr).await?;
        eprintln!(
            "{program}: metrics at http://{bound}/metrics, the cells' services at http://{bound}/sd"
        );
        Ok(Some(t))
    }

    /// Binds `addr` and serves `/metrics` and `/sd` until the process ends;
    /// returns the address bound (port 0 picks a free one).
    pub async fn serve(addr: SocketAddr) -> Result<(Telemetry, SocketAddr), ListenError> {
        let io = |source| ListenError { addr, source };
        let listener = tokio::net::TcpListener::bind(addr).await.map_err(io)?;
        let bound = listener.local_addr().map_err(io)?;
        let t = Telemetry::default();
        let app = Router::new()
            .route("/metrics", get(metrics))
            .route("/sd", get(sd))
            .with_state(t.clone());
        tokio::spawn(async move {
            if let Err(e) = axum::serve(listener, app).await {
                tracing::warn!(event = "metrics_listen_failed", error = %e);
            }
        });
        Ok((t, bound))
    }

    /// The cell that starts now: its SDK registry and its services.
    pub fn start_cell(&self, registry: Registry, targets: Vec<TargetGroup>) {
        let mut c = self.current.write().unwrap_or_else(|e| e.into_inner());
        c.registry = Some(registry);
        c.targets = targets;
    }

    /// The cell's services are gone: discovery answers no targets (the
    /// registry stays, so a last scrape still sees the cell's final counts).
    pub fn end_cell(&self) {
        let mut c = self.current.write().unwrap_or_else(|e| e.into_inner());
        c.targets.clear();
    }

    /// Waits until `/metrics` has been scraped once more, at most `limit`;
    /// whether it was. A cell calls it after [`start_cell`](Self::start_cell),
    /// before its first heartbeat, so that Prometheus holds the families at 0
    /// and `increase()` counts every sample of the cell, and after its load,
    /// so that the last scrape holds the final counts. Without a scraper it
    /// costs `limit` per call.
    pub async fn scraped(&self, limit: Duration) -> bool {
        let (count, wake) = &*self.scrapes;
        let before = count.load(Ordering::SeqCst);
        tokio::time::timeout(limit, async {
            loop {
                let woken = wake.notified();
                if count.load(Ordering::SeqCst) > before {
                    return;
                }
                woken.await;
            }
        })
        .await
        .is_ok()
    }

    /// The exposition `/metrics` answers now.
    pub fn exposition(&self) -> String {
        let c = self.current.read().unwrap_or_else(|e| e.into_inner());
        let mut out = String::new();
        if let Some(r) = &c.registry {
            // Infallible: writing into a String.
            let _ =
                fencepost_sdk::prometheus_client::encoding::prometheus_text::encode(&mut out, r);
        }
        out
    }

    /// The discovery answer `/sd` gives now.
    pub fn targets(&self) -> Vec<TargetGroup> {
        let c = self.current.read().unwrap_or_else(|e| e.into_inner());
        c.targets.clone()
    }
}

async fn metrics(State(t): State<Telemetry>) -> impl IntoResponse {
    let body = t.exposition();
    let (count, wake) = &*t.scrapes;
    count.fetch_add(1, Ordering::SeqCst);
    wake.notify_waiters();
    ([(CONTENT_TYPE, CONTENT_TYPE_TEXT)], body)
}

async fn sd(State(t): State<Telemetry>) -> impl IntoResponse {
    axum::Json(t.targets())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn target_groups_are_host_port_with_job_and_cell_labels() {
        let g = TargetGroup::new(
            "lock-server",
            "ttl=1s_margin=0.30",
            ["http://127.0.0.1:4100/", "127.0.0.1:4101"],
        );
        assert_eq!(g.targets, ["127.0.0.1:4100", "127.0.0.1:4101"]);
        assert_eq!(g.labels["job"], "lock-server");
        assert_eq!(g.labels["cell"], "ttl=1s_margin=0.30");
        let json = serde_json::to_string(&[g]).unwrap();
        assert!(
            json.starts_with(r#"[{"targets":["127.0.0.1:4100""#),
            "{json}"
        );
    }

    #[tokio::test]
    async fn serves_the_current_cell_and_no_targets_after_it() {
        let (t, addr) = Telemetry::serve("127.0.0.1:0".parse().unwrap())
            .await
            .unwrap();
        let get = |path: &'static str| async move {
            reqwest::get(format!("http://{addr}{path}"))
                .await
                .unwrap()
                .text()
                .await
                .unwrap()
        };
        let waiting = tokio::spawn({
            let t = t.clone();
            async move { t.scraped(Duration::from_secs(10)).await }
        });
        tokio::task::yield_now().await;
        assert_eq!(get("/metrics").await, "", "no cell yet");
        assert!(waiting.await.unwrap(), "the scrape is seen");
        assert!(!t.scraped(Duration::from_millis(50)).await, "no scrape");
        let mut r = Registry::default();
        let c = fencepost_sdk::prometheus_client::metrics::counter::Counter::<u64>::default();
        r.register("lock_probe", "A probe.", c.clone());
        c.inc();
        t.start_cell(r, vec![TargetGroup::new("rail-stub", "c", ["127.0.0.1:1"])]);
        assert!(get("/metrics").await.contains("lock_probe_total 1"));
        assert!(get("/sd").await.contains("127.0.0.1:1"));
        t.end_cell();
        assert_eq!(get("/sd").await, "[]");
        assert!(get("/metrics").await.contains("lock_probe_total 1"));
    }
}
