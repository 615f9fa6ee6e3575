//! An in-process TCP delay proxy: it sits between the workers and the
//! lock-server and delays every byte travelling client → server by a latency
//! drawn from a seeded [`LatencySpec`], keeping order. So `--net-delay
//! fixed:20ms` adds 20 ms to every round trip (the reply leg is not delayed:
//! the spec is the added round-trip time). No root, no `tc`: it works on any
//! laptop, and only ever connects to the loopback upstream it is given.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fencepost_api::latency::LatencySpec;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// A running delay proxy; dropping it stops accepting (open connections end
/// when either side closes).
pub struct DelayProxy {
    /// The address workers connect to.
    addr: SocketAddr,
    /// The accept loop.
    task: JoinHandle<()>,
}

impl DelayProxy {
    /// Listens on 127.0.0.1:0 and forwards to `upstream`, delaying the
    /// request leg by samples of `spec` from a ChaCha8 RNG seeded with `seed`.
    pub async fn start(
        upstream: SocketAddr,
        spec: LatencySpec,
        seed: u64,
    ) -> std::io::Result<Self> {
        let listener = TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        // One RNG for the proxy: samples are drawn in arrival order.
        let rng = Arc::new(Mutex::new(ChaCha8Rng::seed_from_u64(seed)));
        let task = tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let rng = rng.clone();
                tokio::spawn(async move {
                    if let Ok(server) = TcpStream::connect(upstream).await {
                        let _ = client.set_nodelay(true);
                        let _ = server.set_nodelay(true);
                        pipe(client, server, spec, rng).await;
                    }
                });
            }
        });
        Ok(DelayProxy { addr, task })
    }

    /// The proxy's address.
    pub fn addr(&self) -> SocketAddr {
        self.addr
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

/// Forwards one connection: client → server delayed, server → client as is.
async fn pipe(
    client: TcpStream,
    server: TcpStream,
    spec: LatencySpec,
    rng: Arc<Mutex<ChaCha8Rng>>,
) {
    let (mut c_read, mut c_write) = client.into_split();
    let (mut s_read, mut s_write) = server.into_split();
    // Chunks with their due time; the writer waits until each is due.
    let (tx, mut rx) = mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
    let reader = async move {
        let mut buf = vec![0u8; 16 * 1024];
        let mut last_due = Instant::now();
        loop {
            let n = match c_read.read(&mut buf).await {
                Ok(0) | Err(_) => break,
                Ok(n) => n,
            };
            let delay: Duration = {
                let mut r = rng.lock().unwrap_or_else(|e| e.into_inner());
                spec.sample(&mut *r)
            };
            // Order is kept: a chunk is never due before the one ahead of it.
            let due = (Instant::now() + delay).max(last_due);
            last_due = due;
            if tx.send((due, buf[..n].to_vec())).is_err() {
                break;
            }
        }
    };
    let writer = async move {
        while let Some((due, bytes)) = rx.recv().await {
            tokio::time::sleep_until(due).await;
            if s_write.write_all(&bytes).await.is_err() {
                break;
            }
        }
        let _ = s_write.shutdown().await;
    };
    let back = async move {
        let _ = tokio::io::copy(&mut s_read, &mut c_write).await;
        let _ = c_write.shutdown().await;
    };
    tokio::join!(reader, writer, back);
}
