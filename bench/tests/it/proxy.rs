//! The delay proxy on real sockets: both legs of an exchange are delayed,
//! each by its half of one round-trip sample (lower bounds only: the proxy
//! can only add, and speed is never asserted).

use std::time::Duration;

use bench_driver::proxy::DelayProxy;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::time::Instant;

/// An upstream that answers every 4-byte `ping` with `pong`, reporting when
/// it read each request and when it wrote each reply.
async fn pong_server() -> (
    std::net::SocketAddr,
    mpsc::UnboundedReceiver<(Instant, Instant)>,
) {
    let listener = TcpListener::bind(("127.0.0.1", 0)).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let (mut conn, _) = listener.accept().await.unwrap();
        let mut buf = [0u8; 4];
        while conn.read_exact(&mut buf).await.is_ok() {
            let read = Instant::now();
            let wrote = Instant::now();
            if conn.write_all(b"pong").await.is_err() {
                break;
            }
            let _ = tx.send((read, wrote));
        }
    });
    (addr, rx)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn both_legs_are_delayed_by_half_the_round_trip_each() {
    let (upstream, mut seen) = pong_server().await;
    let proxy = DelayProxy::start(upstream, "fixed:40ms".parse().unwrap(), 1)
        .await
        .unwrap();
    let mut client = TcpStream::connect(proxy.addr()).await.unwrap();
    client.set_nodelay(true).unwrap();
    for _ in 0..5 {
        let sent = Instant::now();
        // One request written in two pieces: one message, one delay.
        client.write_all(b"pi").await.unwrap();
        tokio::time::sleep(Duration::from_millis(5)).await;
        client.write_all(b"ng").await.unwrap();
        let mut buf = [0u8; 4];
        client.read_exact(&mut buf).await.unwrap();
        let got = Instant::now();
        assert_eq!(&buf, b"pong");
        let (read, wrote) = seen.recv().await.unwrap();
        let request_leg = read - sent;
        let reply_leg = got - wrote;
        assert!(
            request_leg >= Duration::from_millis(20),
            "request leg {request_leg:?}"
        );
        assert!(
            reply_leg >= Duration::from_millis(20),
            "reply leg {reply_leg:?}"
        );
        assert!(
            got - sent >= Duration::from_millis(40),
            "round trip {:?}",
            got - sent
        );
    }
}

/// One `ping` → `pong` exchange on `client`, or `None` when no reply came within `limit`.
async fn exchange(client: &mut TcpStream, limit: Duration) -> Option<Duration> {
    let sent = Instant::now();
    client.write_all(b"ping").await.ok()?;
    let mut buf = [0u8; 4];
    match tokio::time::timeout(limit, client.read_exact(&mut buf)).await {
        Ok(Ok(_)) => Some(sent.elapsed()),
        _ => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_spike_delays_exchanges_until_lifted_and_a_loss_blackholes_the_connection() {
    let (upstream, _seen) = pong_server().await;
    let proxy = DelayProxy::start(upstream, "fixed:0ms".parse().unwrap(), 1)
        .await
        .unwrap();
    let control = proxy.control();
    let mut client = TcpStream::connect(proxy.addr()).await.unwrap();
    client.set_nodelay(true).unwrap();
    control.set_spike(Some("fixed:60ms".parse().unwrap()));
    let spiked = exchange(&mut client, Duration::from_secs(10))
        .await
        .unwrap();
    assert!(spiked >= Duration::from_millis(60), "{spiked:?}");
    control.set_spike(None);
    assert!(
        exchange(&mut client, Duration::from_secs(10))
            .await
            .is_some()
    );
    // Every request lost: the exchange gets no answer, now or later.
    control.set_loss(1.0);
    assert_eq!(
        exchange(&mut client, Duration::from_millis(300)).await,
        None
    );
    control.set_loss(0.0);
    assert_eq!(
        exchange(&mut client, Duration::from_millis(300)).await,
        None,
        "a blackholed connection stays silent"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_holds_every_byte_until_it_heals_and_then_delivers_them_in_order() {
    let (upstream, mut seen) = pong_server().await;
    let proxy = DelayProxy::start(upstream, "fixed:0ms".parse().unwrap(), 1)
        .await
        .unwrap();
    let control = proxy.control();
    let mut client = TcpStream::connect(proxy.addr()).await.unwrap();
    client.set_nodelay(true).unwrap();
    assert!(
        exchange(&mut client, Duration::from_secs(10))
            .await
            .is_some()
    );
    let _ = seen.recv().await;
    control.set_cut(true);
    // Cut: the request never reaches the upstream, so no reply comes.
    client.write_all(b"ping").await.unwrap();
    let mut buf = [0u8; 4];
    let held = tokio::time::timeout(Duration::from_millis(300), client.read_exact(&mut buf)).await;
    assert!(held.is_err(), "a reply crossed the cut");
    assert!(
        seen.try_recv().is_err(),
        "the upstream read a request through the cut"
    );
    // Healed: the held request goes on, and its reply comes back.
    control.set_cut(false);
    tokio::time::timeout(Duration::from_secs(10), client.read_exact(&mut buf))
        .await
        .expect("the held exchange completes once healed")
        .unwrap();
    assert_eq!(&buf, b"pong");
    assert!(
        exchange(&mut client, Duration::from_secs(10))
            .await
            .is_some()
    );
}
