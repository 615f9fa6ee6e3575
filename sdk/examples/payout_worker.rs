//! A payout worker loop on the SDK, against a local lock-server and rail-stub.
//!
//! For each payout: open-session once → acquire `payout:<id>` → claim on the
//! rail with the fencing token (R2) → `ensure_time_for(rail read timeout + 2 s)`
//! (ADR-006 D4) before the irreversible submit (R3) → release. When the lease
//! left is too short, the worker abandons: it gives the claim back (R4) and
//! releases the lock, and a later worker retries under a higher token.
//!
//! ```text
//! cargo run -p fencepost-sdk --example payout_worker -- \
//!     --lock-url http://127.0.0.1:7070 --rail-url http://127.0.0.1:7080 --payouts 5
//! ```
//! Options (env in brackets): `--lock-url` [LOCK_URL], `--rail-url` [RAIL_URL],
//! `--payouts N` (creates `demo-1..N` with R1, idempotent), `--prefix P`,
//! `--owner NAME`, `--rail-read-timeout D` [RAIL_READ_TIMEOUT, default 5s],
//! `--metrics-listen ADDR` [METRICS_LISTEN, e.g. `127.0.0.1:9464`]: serve
//! `GET /metrics` (Prometheus text, `text/plain; version=0.0.4`) from a
//! registry the example owns, into which it registers the SDK's families and
//! one of its own (`payout_worker_payouts_total{outcome}`); it then keeps the
//! session and the endpoint up after the payouts until Ctrl-C. Without it the
//! example prints `client.metrics_text()` at the end.
//! The lock client reads LOCK_CLIENT_SAFETY_MARGIN, LOCK_DEFAULT_TTL and
//! LOCK_SESSION_TTL (C4); e.g. `LOCK_DEFAULT_TTL=5s` makes every payout
//! abandon (5 s × 0.7 < 5 s + 2 s).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::State;
use axum::http::header::CONTENT_TYPE;
use axum::routing::get;
use fencepost_api::duration::parse_duration;
use fencepost_api::rail::{CreatePayoutRequest, PayoutStatus, TokenRequest};
use fencepost_sdk::metrics::PrometheusMetrics;
use fencepost_sdk::prometheus_client::encoding::prometheus_text;
use fencepost_sdk::prometheus_client::metrics::counter::Counter;
use fencepost_sdk::prometheus_client::metrics::family::Family;
use fencepost_sdk::prometheus_client::registry::Registry;
use fencepost_sdk::{AcquireOptions, LockClient, LockClientConfig, LockError, LockHandle, Session};

/// Command-line options.
struct Args {
    lock_url: String,
    rail_url: String,
    payouts: u64,
    prefix: String,
    owner: String,
    rail_read_timeout: Duration,
    metrics_listen: Option<SocketAddr>,
}

fn parse_args() -> Result<Args, String> {
    let env = |k: &str, d: &str| std::env::var(k).unwrap_or_else(|_| d.to_string());
    let mut a = Args {
        lock_url: env("LOCK_URL", "http://127.0.0.1:7070"),
        rail_url: env("RAIL_URL", "http://127.0.0.1:7080"),
        payouts: 3,
        prefix: "demo".into(),
        owner: format!("payout-worker-{}", std::process::id()),
        rail_read_timeout: Duration::ZERO,
        metrics_listen: None,
    };
    let mut timeout = env("RAIL_READ_TIMEOUT", "5s");
    let mut listen = std::env::var("METRICS_LISTEN").ok();
    let mut it = std::env::args().skip(1);
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or(format!("{flag} needs a value"));
        match flag.as_str() {
            "--lock-url" => a.lock_url = value()?,
            "--rail-url" => a.rail_url = value()?,
            "--payouts" => a.payouts = value()?.parse().map_err(|e| format!("--payouts: {e}"))?,
            "--prefix" => a.prefix = value()?,
            "--owner" => a.owner = value()?,
            "--rail-read-timeout" => timeout = value()?,
            "--metrics-listen" => listen = Some(value()?),
            "-h" | "--help" => return Err("see the header of examples/payout_worker.rs".into()),
            other => return Err(format!("unknown option {other}")),
        }
    }
    a.rail_read_timeout =
        parse_duration(&timeout).map_err(|e| format!("rail.read.timeout={timeout}: {e}"))?;
    a.metrics_listen = listen
        .map(|l| l.parse().map_err(|e| format!("--metrics-listen {l}: {e}")))
        .transpose()?;
    Ok(a)
}

/// What happened to one payout.
enum Outcome {
    Paid {
        token: u64,
    },
    Busy,
    Refused {
        step: &'static str,
        status: u16,
        body: String,
    },
    Abandoned {
        reason: String,
    },
}

impl Outcome {
    /// The `outcome` label of `payout_worker_payouts_total`.
    fn label(&self) -> &'static str {
        match self {
            Outcome::Paid { .. } => "paid",
            Outcome::Busy => "busy",
            Outcome::Refused { .. } => "refused",
            Outcome::Abandoned { .. } => "abandoned",
        }
    }
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Outcome::Paid { token } => write!(f, "PAID under token {token}"),
            Outcome::Busy => write!(f, "busy (another worker holds the lock); skipped"),
            Outcome::Refused { step, status, body } => {
                write!(f, "{step} refused ({status}): {body}")
            }
            Outcome::Abandoned { reason } => write!(f, "abandoned before submit: {reason}"),
        }
    }
}

/// A rail call (R2/R3/R4) carrying the token; `Ok` with the 2xx body, else status and body.
async fn rail(
    http: &reqwest::Client,
    url: String,
    token: u64,
    timeout: Duration,
) -> Result<Result<PayoutStatus, (u16, String)>, reqwest::Error> {
    let resp = http
        .post(url)
        .json(&TokenRequest { token })
        .timeout(timeout)
        .send()
        .await?;
    let status = resp.status().as_u16();
    let body = resp.text().await?;
    Ok(match serde_json::from_str::<PayoutStatus>(&body) {
        Ok(p) if status < 300 => Ok(p),
        _ => Err((status, body)),
    })
}

/// One payout, start to finish. The token goes downstream in every rail body.
async fn work_one(
    args: &Args,
    http: &reqwest::Client,
    session: &Session,
    id: &str,
) -> Result<Outcome, Box<dyn std::error::Error>> {
    let key = format!("payout:{id}");
    let opts = AcquireOptions::default().wait_up_to(Duration::from_secs(5));
    let lock: LockHandle = match session.acquire(&key, opts).await {
        Ok(h) => h,
        Err(LockError::LockHeld { .. }) => return Ok(Outcome::Busy),
        Err(e) => return Err(e.into()),
    };
    let token = lock.token();
    let base = format!("{}/v1/payouts/{id}", args.rail_url.trim_end_matches('/'));

    // R2: claim (fence 1 checks the token).
    session.check_still_held(&lock)?;
    if let Err((status, body)) =
        rail(http, format!("{base}/claim"), token, args.rail_read_timeout).await?
    {
        let _ = session.release(lock).await;
        return Ok(Outcome::Refused {
            step: "claim",
            status,
            body,
        });
    }

    // D4: do not start what you cannot finish. Worst case of R3 = read timeout + 2 s.
    let worst = args.rail_read_timeout + Duration::from_secs(2);
    if let Err(e) = session.ensure_time_for(&lock, worst) {
        // Abandon: cheap and always allowed (D6). Give the claim back, then the lock.
        let _ = rail(
            http,
            format!("{base}/release"),
            token,
            args.rail_read_timeout,
        )
        .await;
        let _ = session.release(lock).await;
        return Ok(Outcome::Abandoned {
            reason: e.to_string(),
        });
    }

    // R3: the irreversible step (fence 2 checks the token again).
    let paid = rail(
        http,
        format!("{base}/submit"),
        token,
        args.rail_read_timeout,
    )
    .await?;
    // The lock may have lapsed meanwhile; the fences kept the rail safe either way.
    let _ = session.release(lock).await;
    Ok(match paid {
        Ok(_) => Outcome::Paid { token },
        Err((status, body)) => Outcome::Refused {
            step: "submit",
            status,
            body,
        },
    })
}

/// The application's own metric, next to the SDK's in its registry.
type Payouts = Family<[(&'static str, &'static str); 1], Counter>;

/// `GET /metrics`: the application's registry, classic text format.
async fn metrics(State(registry): State<Arc<Registry>>) -> impl axum::response::IntoResponse {
    let mut body = String::new();
    if let Err(e) = prometheus_text::encode(&mut body, &registry) {
        eprintln!("encoding /metrics failed: {e}");
    }
    ([(CONTENT_TYPE, fencepost_sdk::metrics::CONTENT_TYPE)], body)
}

/// Serves `registry` on `GET /metrics` at `addr`, in the background.
async fn serve_metrics(addr: SocketAddr, registry: Registry) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr).await?;
    println!("serving GET http://{}/metrics", listener.local_addr()?);
    let app = Router::new()
        .route("/metrics", get(metrics))
        .with_state(Arc::new(registry));
    tokio::spawn(async move {
        if let Err(e) = axum::serve(listener, app).await {
            eprintln!("/metrics server stopped: {e}");
        }
    });
    Ok(())
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = match parse_args() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("payout_worker: {e}");
            std::process::exit(2);
        }
    };
    let http = reqwest::Client::builder().no_proxy().build()?;
    let config = LockClientConfig::from_env(args.lock_url.clone())?;
    let payouts = Payouts::default();
    let mut shared = None;
    if let Some(addr) = args.metrics_listen {
        // The embedding-application path: the SDK records into instruments
        // built for this configuration, registered once in our registry.
        let sdk_metrics = PrometheusMetrics::for_config(&config);
        shared = Some(sdk_metrics.clone());
        let mut registry = Registry::default();
        sdk_metrics.register(&mut registry);
        registry.register(
            "payout_worker_payouts",
            "Payouts this worker handled, by outcome",
            payouts.clone(),
        );
        for outcome in ["paid", "busy", "refused", "abandoned"] {
            drop(payouts.get_or_create(&[("outcome", outcome)]));
        }
        serve_metrics(addr, registry).await?;
    }
    let client = match shared {
        Some(m) => LockClient::with_prometheus(config, m)?,
        None => LockClient::new(config)?,
    };
    let session = client.open_session(&args.owner).await?;
    println!(
        "session {} (ttl {} ms, heartbeat every {:?}); rail {}",
        session.id(),
        session.ttl_ms(),
        session.heartbeat_period(),
        args.rail_url
    );
    session.on_lock_lost(|e: &fencepost_sdk::LockLostEvent| {
        eprintln!("lock lost: {} token {} ({})", e.key, e.token, e.reason);
    });

    for n in 1..=args.payouts {
        let id = format!("{}-{n}", args.prefix);
        // R1, idempotent: 201 new, 200 the same payout again.
        let create = CreatePayoutRequest {
            payout_id: id.clone(),
            amount_minor: 1_000 * n as i64,
            currency: "EUR".into(),
        };
        let url = format!("{}/v1/payouts", args.rail_url.trim_end_matches('/'));
        let status = http.post(url).json(&create).send().await?.status();
        if !status.is_success() {
            eprintln!("{id}: create refused ({status})");
            continue;
        }
        match work_one(&args, &http, &session, &id).await {
            Ok(outcome) => {
                payouts.get_or_create(&[("outcome", outcome.label())]).inc();
                println!("{id}: {outcome}");
            }
            Err(e) => eprintln!("{id}: error: {e}"),
        }
    }
    if args.metrics_listen.is_some() {
        println!("done; /metrics stays up (and the session heartbeating) until Ctrl-C");
        tokio::signal::ctrl_c().await?;
    } else {
        print!("{}", client.metrics_text());
    }
    session.close().await;
    Ok(())
}
