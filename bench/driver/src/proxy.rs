//! An in-process TCP delay proxy: it sits between the workers and the
//! lock-server and delays every *message* in both directions by a latency
//! drawn from a seeded [`LatencySpec`], keeping order. No root, no `tc`: it
//! works on any laptop, and only ever connects to the loopback upstream it is
//! given.
//!
//! The split rule (docs/measurement.md, "The delay proxy's own overhead"):
//! `--net-delay SPEC` stays the added *round-trip* time. One sample `d` is
//! drawn per exchange, when its request starts; the request is delayed by
//! `⌊d / 2⌋` and the reply that follows by `d − ⌊d / 2⌋`, so an exchange gains
//! exactly `d` and `fixed:20ms` adds 20 ms to every round trip.
//!
//! A *message* is every byte sent one way until the other way sends: HTTP/1.1
//! without pipelining (what reqwest and the lock-server speak) alternates
//! request and reply on a connection, so a direction switch delimits messages
//! without parsing HTTP. Every chunk of a message is delayed by that message's
//! sample (it arrives `delay` after it was read), never by a sample of its own:
//! a message split into several reads is not delayed several times.
//!
//! A running proxy can be steered through its [`ProxyControl`] (the chaos
//! experiment's faults): a delay *spike* replaces the configured
//! latency for the exchanges that start while it lasts, a *loss* rate drops
//! request chunks (one read from the client; a request is one chunk on
//! loopback in practice) and a lost one blackholes its connection: nothing
//! more is forwarded either way, so the client sees a timeout, as it would
//! from a packet that never arrives, and the upstream can be moved (a restarted
//! lock-server on a new port) for the connections opened afterwards. A *cut*
//! holds every chunk, both ways, on every connection, until it is lifted (a
//! partition that heals before TCP gives up: what was sent arrives late, in
//! order); new connections are accepted but carry nothing meanwhile. The
//! replicated chaos runs put one proxy in front of each replica's PostgreSQL
//! and cut or delay the leader's.
//!
//! [`measure_overhead`] is the zero-delay baseline: heartbeats sent directly
//! and through a zero-delay proxy, interleaved, so the proxy's own cost is
//! known (the bench runs it once per run with `--net-delay`).

use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use bench_core::overhead::{ProxyOverhead, overhead_of};
use fencepost_api::latency::LatencySpec;
use fencepost_api::lock::{CreateSessionRequest, SessionGranted};
use rand::{Rng as _, SeedableRng};
use rand_chacha::ChaCha8Rng;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::tcp::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;

use bench_core::hist;

/// A running delay proxy; dropping it stops accepting (open connections end
/// when either side closes).
pub struct DelayProxy {
    /// The address workers connect to.
    addr: SocketAddr,
    /// The address it forwards to.
    upstream: SocketAddr,
    /// The accept loop.
    task: JoinHandle<()>,
    /// The knobs of a running proxy (shared with the accept loop and every connection).
    control: Arc<ProxyControl>,
}

/// Loss rates are in parts per million.
const PPM: u32 = 1_000_000;

/// Steers a running [`DelayProxy`] (see the module doc).
#[derive(Debug)]
pub struct ProxyControl {
    /// Where new connections go.
    upstream: Mutex<SocketAddr>,
    /// A latency that replaces the configured one while set.
    spike: Mutex<Option<LatencySpec>>,
    /// The probability, in ppm, that a request message is lost.
    loss_ppm: AtomicU32,
    /// Draws the losses (seeded, apart from the latency samples).
    loss_rng: Mutex<ChaCha8Rng>,
    /// True while the proxy is cut; every writer waits for it to be false.
    cut: tokio::sync::watch::Sender<bool>,
}

impl ProxyControl {
    fn new(upstream: SocketAddr, seed: u64) -> Self {
        ProxyControl {
            upstream: Mutex::new(upstream),
            spike: Mutex::new(None),
            loss_ppm: AtomicU32::new(0),
            loss_rng: Mutex::new(ChaCha8Rng::seed_from_u64(seed ^ 0x1055)),
            cut: tokio::sync::watch::Sender::new(false),
        }
    }

    /// Cuts (`true`) or heals (`false`) every connection, both ways: while
    /// cut, nothing is forwarded; what was held goes on in order once healed.
    pub fn set_cut(&self, cut: bool) {
        self.cut.send_replace(cut);
    }

    /// Where new connections are forwarded to.
    pub fn upstream(&self) -> SocketAddr {
        *self.upstream.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Forwards connections opened from now on to `addr` (open ones stay).
    pub fn set_upstream(&self, addr: SocketAddr) {
        *self.upstream.lock().unwrap_or_else(|e| e.into_inner()) = addr;
    }

    /// Replaces the configured latency with `spike` (`None`: back to it).
    pub fn set_spike(&self, spike: Option<LatencySpec>) {
        *self.spike.lock().unwrap_or_else(|e| e.into_inner()) = spike;
    }

    /// Loses each request message with probability `fraction` (0 = none, clamped to 1).
    pub fn set_loss(&self, fraction: f64) {
        let ppm = (fraction.clamp(0.0, 1.0) * f64::from(PPM)).round() as u32;
        self.loss_ppm.store(ppm, Ordering::Relaxed);
    }

    fn spike(&self) -> Option<LatencySpec> {
        *self.spike.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether the request message starting now is lost.
    fn lose(&self) -> bool {
        let ppm = self.loss_ppm.load(Ordering::Relaxed);
        ppm > 0
            && self
                .loss_rng
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .random_range(0..PPM)
                < ppm
    }
}

impl DelayProxy {
    /// Listens on 127.0.0.1:0 and forwards to `upstream`, delaying every
    /// message by its share of a round-trip sample of `spec` (see the module
    /// doc), drawn from a ChaCha8 RNG seeded with `seed`.
    pub async fn start(
        upstream: SocketAddr,
        spec: LatencySpec,
        seed: u64,
    ) -> std::io::Result<Self> {
        Self::start_on(std::net::Ipv4Addr::LOCALHOST.into(), upstream, spec, seed).await
    }

    /// [`DelayProxy::start`] listening on `bind:0` (a docker network's
    /// gateway, for containers on it).
    pub async fn start_on(
        bind: std::net::IpAddr,
        upstream: SocketAddr,
        spec: LatencySpec,
        seed: u64,
    ) -> std::io::Result<Self> {
        let listener = TcpListener::bind((bind, 0)).await?;
        let addr = listener.local_addr()?;
        // One RNG for the proxy: samples are drawn in the order exchanges start.
        let rng = Arc::new(Mutex::new(ChaCha8Rng::seed_from_u64(seed)));
        let control = Arc::new(ProxyControl::new(upstream, seed));
        let ctl = control.clone();
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let (rng, ctl) = (rng.clone(), ctl.clone());
                tokio::spawn(async move {
                    if let Ok(server) = TcpStream::connect(ctl.upstream()).await {
                        let _ = client.set_nodelay(true);
                        let _ = server.set_nodelay(true);
                        let c = ctl.clone();
                        let sample = move || {
                            let spec = c.spike().unwrap_or(spec);
                            let mut r = rng.lock().unwrap_or_else(|e| e.into_inner());
                            spec.sample(&mut *r)
                        };
                        pipe(client, server, Exchanges::new(sample), ctl).await;
                    }
                });
            }
        });
        Ok(DelayProxy {
            addr,
            upstream,
            task,
            control,
        })
    }

    /// The proxy's knobs (spikes, loss, upstream).
    pub fn control(&self) -> Arc<ProxyControl> {
        self.control.clone()
    }

    /// The proxy's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The address it was started to forward to.
    pub fn upstream(&self) -> SocketAddr {
        self.upstream
    }

    /// The proxy's base URL.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

impl Drop for DelayProxy {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// The way bytes travel on a proxied connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Leg {
    /// Client → server (the request).
    Request,
    /// Server → client (the reply).
    Reply,
}

impl Leg {
    fn index(self) -> usize {
        match self {
            Leg::Request => 0,
            Leg::Reply => 1,
        }
    }
}

/// The delay schedule of one connection: which message a chunk belongs to,
/// that message's delay, and the due time of each chunk. Pure over the
/// instants it is given (the tests drive it with made-up ones).
pub struct Exchanges<S> {
    /// Draws one round-trip sample.
    sample: S,
    /// The leg of the last chunk seen; a chunk on the other leg starts a message.
    current: Option<Leg>,
    /// The delay of the message in progress on each leg.
    delay: [Duration; 2],
    /// The reply's share of the last request's sample, waiting for the reply.
    reply_share: Duration,
    /// The due time of the last chunk on each leg (order is kept per leg).
    last_due: [Option<Instant>; 2],
}

impl<S: FnMut() -> Duration> Exchanges<S> {
    /// A connection whose exchanges draw their round-trip delay from `sample`.
    pub fn new(sample: S) -> Self {
        Exchanges {
            sample,
            current: None,
            delay: [Duration::ZERO; 2],
            reply_share: Duration::ZERO,
            last_due: [None; 2],
        }
    }

    /// A chunk read on `leg` at `now`: when to forward it. A chunk on the
    /// other leg than the previous one starts a message: a request draws the
    /// exchange's sample and keeps the reply's share; a reply takes it.
    pub fn due(&mut self, leg: Leg, now: Instant) -> Instant {
        let i = leg.index();
        if self.current != Some(leg) {
            self.current = Some(leg);
            self.delay[i] = match leg {
                Leg::Request => {
                    let round_trip = (self.sample)();
                    let request = round_trip / 2;
                    self.reply_share = round_trip - request;
                    request
                }
                Leg::Reply => std::mem::take(&mut self.reply_share),
            };
        }
        // Order is kept: a chunk is never due before the one ahead of it.
        let due =
            self.last_due[i].map_or(now + self.delay[i], |last| (now + self.delay[i]).max(last));
        self.last_due[i] = Some(due);
        due
    }
}

/// Forwards one connection both ways, each chunk at the due time its
/// connection's [`Exchanges`] gives it.
async fn pipe<S>(
    client: TcpStream,
    server: TcpStream,
    exchanges: Exchanges<S>,
    control: Arc<ProxyControl>,
) where
    S: FnMut() -> Duration + Send + 'static,
{
    let (c_read, c_write) = client.into_split();
    let (s_read, s_write) = server.into_split();
    // Both readers consult one schedule: the direction switch delimits messages.
    let schedule = Arc::new(Mutex::new(exchanges));
    // Set once a request is lost: the connection forwards nothing more.
    let lost = Arc::new(AtomicBool::new(false));
    let cut = control.cut.subscribe();
    let request = Link {
        control: Some(control),
        lost: lost.clone(),
        cut: cut.clone(),
    };
    let reply = Link {
        control: None,
        lost,
        cut,
    };
    tokio::join!(
        one_way(c_read, s_write, Leg::Request, schedule.clone(), request),
        one_way(s_read, c_write, Leg::Reply, schedule, reply),
    );
}

/// What one direction of a connection shares with the proxy's control.
struct Link {
    /// Draws losses (the request leg only).
    control: Option<Arc<ProxyControl>>,
    /// The connection's blackhole flag.
    lost: Arc<AtomicBool>,
    /// The proxy's cut ([`ProxyControl::set_cut`]).
    cut: tokio::sync::watch::Receiver<bool>,
}

/// Reads `from`, stamps each chunk with its due time, writes it to `to` when due.
async fn one_way<S>(
    mut from: OwnedReadHalf,
    mut to: OwnedWriteHalf,
    leg: Leg,
    schedule: Arc<Mutex<Exchanges<S>>>,
    link: Link,
) where
    S: FnMut() -> Duration,
{
    // Chunks with their due time; the writer waits until each is due.
    let (tx, mut rx) = mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
    let mut cut = link.cut.clone();
    let reader = async move {
        let mut buf = vec![0u8; 16 * 1024];
        loop {
            let n = match from.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            if link.control.as_ref().is_some_and(|c| c.lose()) {
                link.lost.store(true, Ordering::Relaxed);
            }
            if link.lost.load(Ordering::Relaxed) {
                // Blackholed: read and drop, so the peer sees silence, not a reset.
                continue;
            }
            let due = schedule
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .due(leg, Instant::now());
            if tx.send((due, buf[..n].to_vec())).is_err() {
                break;
            }
        }
    };
    let writer = async move {
        while let Some((due, bytes)) = rx.recv().await {
            // A chunk already due goes at once: a timer, even for a past
            // deadline, fires on the next tick of tokio's 1 ms wheel, which
            // alone cost the zero-delay proxy ~1 ms per leg.
            if due > Instant::now() {
                tokio::time::sleep_until(due).await;
            }
            // Held while the proxy is cut (a closed sender: never cut again).
            let _ = cut.wait_for(|c| !*c).await;
            if to.write_all(&bytes).await.is_err() {
                break;
            }
        }
        let _ = to.shutdown().await;
    };
    tokio::join!(reader, writer);
}

/// Heartbeat pairs [`measure_overhead`] sends by default (one direct, one proxied each).
pub const BASELINE_PAIRS: usize = 200;

/// Why the baseline could not be measured.
#[derive(Debug, thiserror::Error)]
pub enum BaselineError {
    /// The zero-delay proxy could not listen.
    #[error("the zero-delay proxy could not start: {0}")]
    Proxy(std::io::Error),
    /// The lock-server did not answer L1/L2 as C1 says; check its log.
    #[error("lock-server (baseline heartbeats): {0}")]
    Http(reqwest::Error),
}

// Not `#[from]`: each cause is in its variant's message, so it is not also a
// `source()` (a `{:#}` chain would print it twice).
impl From<std::io::Error> for BaselineError {
    fn from(e: std::io::Error) -> Self {
        BaselineError::Proxy(e)
    }
}

impl From<reqwest::Error> for BaselineError {
    fn from(e: reqwest::Error) -> Self {
        BaselineError::Http(e)
    }
}

/// Measures the proxy's own overhead against `upstream` (the lock-server):
/// opens one session and sends `pairs` L2 heartbeats directly and `pairs`
/// through a fresh zero-delay [`DelayProxy`], alternating, each over its own
/// kept-alive connection.
pub async fn measure_overhead(
    upstream: SocketAddr,
    pairs: usize,
) -> Result<ProxyOverhead, BaselineError> {
    let proxy = DelayProxy::start(upstream, LatencySpec::Fixed(Duration::ZERO), 0).await?;
    let direct_url = format!("http://{upstream}");
    let client = || {
        reqwest::Client::builder()
            .pool_max_idle_per_host(1)
            .timeout(Duration::from_secs(10))
            .build()
    };
    let (direct, proxied) = (client()?, client()?);
    let granted: SessionGranted = direct
        .post(format!("{direct_url}/v1/sessions"))
        .json(&CreateSessionRequest {
            owner_id: "bench-proxy-baseline".into(),
            ttl_ms: Some(60_000),
        })
        .send()
        .await?
        .error_for_status()?
        .json()
        .await?;
    let path = format!("/v1/sessions/{}/heartbeat", granted.session_id);
    let mut h = [hist::new_histogram(), hist::new_histogram()];
    for i in 0..pairs * 2 {
        // A B A B …, and B A on odd pairs, so neither path always goes first.
        let via_proxy = (i % 2 == 0) == ((i / 2) % 2 == 1);
        let (http, base) = if via_proxy {
            (&proxied, proxy.url())
        } else {
            (&direct, direct_url.clone())
        };
        let sent = Instant::now();
        http.post(format!("{base}{path}"))
            .send()
            .await?
            .error_for_status()?
            .bytes()
            .await?;
        let _ = h[usize::from(via_proxy)].record(sent.elapsed().as_micros() as u64);
    }
    let _ = direct
        .delete(format!("{direct_url}/v1/sessions/{}", granted.session_id))
        .send()
        .await;
    Ok(overhead_of(&h[0], &h[1]))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    /// The split rule, on made-up instants: one sample per exchange, half on
    /// the request, the rest on the reply, every chunk of a message delayed by
    /// that message's share, and a later chunk never overtakes an earlier one.
    #[test]
    fn one_sample_per_exchange_split_over_both_legs() {
        let drawn = std::cell::Cell::new(0u32);
        let samples = [ms(22), ms(40)];
        let mut x = Exchanges::new(|| {
            let s = samples[drawn.get() as usize];
            drawn.set(drawn.get() + 1);
            s
        });
        let t0 = Instant::now();
        // A request in three chunks: one sample, each chunk 11 ms after its read.
        assert_eq!(x.due(Leg::Request, t0), t0 + ms(11));
        assert_eq!(x.due(Leg::Request, t0 + ms(2)), t0 + ms(13));
        assert_eq!(x.due(Leg::Request, t0 + ms(3)), t0 + ms(14));
        assert_eq!(drawn.get(), 1, "a message split into reads is one message");
        // Its reply, in two chunks: the other 11 ms of the 22 ms sample.
        assert_eq!(x.due(Leg::Reply, t0 + ms(20)), t0 + ms(31));
        assert_eq!(x.due(Leg::Reply, t0 + ms(21)), t0 + ms(32));
        assert_eq!(drawn.get(), 1, "the reply draws nothing");
        // The next exchange draws its own sample: 20 ms each way.
        assert_eq!(x.due(Leg::Request, t0 + ms(40)), t0 + ms(60));
        assert_eq!(x.due(Leg::Reply, t0 + ms(61)), t0 + ms(81));
        assert_eq!(drawn.get(), 2);
    }

    #[test]
    fn a_chunk_is_never_due_before_the_one_ahead_of_it() {
        let mut seq = [ms(100), ms(2)].into_iter();
        let mut x = Exchanges::new(move || seq.next().unwrap_or_default());
        let t0 = Instant::now();
        let first = x.due(Leg::Request, t0);
        assert_eq!(first, t0 + ms(50));
        x.due(Leg::Reply, t0 + ms(60));
        // A fast exchange right behind a slow one on the same leg waits for it.
        let second = x.due(Leg::Request, t0 + ms(1));
        assert!(second >= first, "{second:?} < {first:?}");
    }

    #[test]
    fn overhead_is_proxied_minus_direct() {
        let mut d = hist::new_histogram();
        let mut p = hist::new_histogram();
        for v in [100, 110, 120, 130] {
            d.record(v).unwrap();
            p.record(v + 50).unwrap();
        }
        let o = overhead_of(&d, &p);
        assert_eq!(o.samples, 4);
        assert_eq!(o.overhead_p50_us, 50);
        assert!(o.to_string().contains("overhead p50 +0.050 ms"), "{o}");
    }
}
