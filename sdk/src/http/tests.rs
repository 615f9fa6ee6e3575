//! Tests of the HTTP/1.1 client against a minimal scripted server on loopback.

use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

use super::*;

/// What the test server does with the n-th request (0-based, counted
/// over all connections).
#[derive(Clone, Copy)]
enum Act {
    /// 200 with a small body, connection kept.
    Answer,
    /// 200, then the server closes the connection.
    AnswerThenClose,
    /// Reads the request and closes without answering.
    Vanish,
    /// 200 with a body larger than [`MAX_REPLY_BYTES`].
    Huge,
}

struct Server {
    base: String,
    connections: Arc<AtomicUsize>,
    requests: Arc<AtomicUsize>,
}

/// A minimal HTTP/1.1 server on loopback that follows `script` (then
/// answers everything) and counts connections and requests.
async fn server(script: Vec<Act>) -> Server {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let authority = listener.local_addr().unwrap().to_string();
    let connections = Arc::new(AtomicUsize::new(0));
    let requests = Arc::new(AtomicUsize::new(0));
    let (c, r) = (connections.clone(), requests.clone());
    let script = Arc::new(script);
    tokio::spawn(async move {
        loop {
            let (mut sock, _) = listener.accept().await.unwrap();
            c.fetch_add(1, Ordering::SeqCst);
            let (r, script) = (r.clone(), script.clone());
            tokio::spawn(async move {
                let mut buf = Vec::new();
                loop {
                    // One request: the head, then Content-Length bytes.
                    let head_end = loop {
                        if let Some(i) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                            break i + 4;
                        }
                        let mut chunk = [0u8; 4096];
                        match sock.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    };
                    let head = String::from_utf8_lossy(&buf[..head_end]).to_lowercase();
                    let len: usize = head
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length:"))
                        .map_or(0, |v| v.trim().parse().unwrap());
                    while buf.len() < head_end + len {
                        let mut chunk = [0u8; 4096];
                        match sock.read(&mut chunk).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => buf.extend_from_slice(&chunk[..n]),
                        }
                    }
                    buf.drain(..head_end + len);
                    let n = r.fetch_add(1, Ordering::SeqCst);
                    let act = script.get(n).copied().unwrap_or(Act::Answer);
                    let body = match act {
                        Act::Vanish => return,
                        Act::Huge => vec![b'x'; MAX_REPLY_BYTES + 1],
                        _ => b"{}".to_vec(),
                    };
                    let reply =
                        format!("HTTP/1.1 200 OK\r\ncontent-length: {}\r\n\r\n", body.len());
                    if sock.write_all(reply.as_bytes()).await.is_err()
                        || sock.write_all(&body).await.is_err()
                    {
                        return;
                    }
                    if let Act::AnswerThenClose = act {
                        return;
                    }
                }
            });
        }
    });
    Server {
        base: format!("http://{authority}"),
        connections,
        requests,
    }
}

fn client() -> HttpClient {
    HttpClient::new(Duration::from_secs(5))
}

/// A GET that must get an answer; its status.
async fn get_status(c: &HttpClient, url: &str) -> u16 {
    c.send(HttpMethod::Get, url, None).await.unwrap().status
}

#[tokio::test]
async fn sequential_exchanges_share_one_connection() {
    let s = server(vec![]).await;
    let c = client();
    for i in 0..5 {
        let r = c
            .send(
                HttpMethod::Post,
                &format!("{}/v1/x/{i}", s.base),
                Some(Bytes::from_static(b"{}")),
            )
            .await
            .unwrap();
        assert_eq!((r.status, &r.body[..]), (200, &b"{}"[..]));
    }
    assert_eq!(s.requests.load(Ordering::SeqCst), 5);
    assert_eq!(s.connections.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_exchanges_open_at_most_one_connection_each_and_keep_them() {
    let s = server(vec![]).await;
    let c = client();
    let url = format!("{}/v1/x", s.base);
    for _round in 0..4 {
        let all = (0..8).map(|_| {
            let (c, url) = (c.clone(), url.clone());
            tokio::spawn(async move { c.send(HttpMethod::Get, &url, None).await })
        });
        for r in join_all(all).await {
            assert_eq!(r.unwrap().status, 200);
        }
    }
    assert_eq!(s.requests.load(Ordering::SeqCst), 32);
    let opened = s.connections.load(Ordering::SeqCst);
    assert!(
        (1..=8).contains(&opened),
        "{opened} connections for 8 at a time"
    );
}

async fn join_all<T>(handles: impl Iterator<Item = tokio::task::JoinHandle<T>>) -> Vec<T> {
    let mut out = Vec::new();
    for h in handles.collect::<Vec<_>>() {
        out.push(h.await.unwrap());
    }
    out
}

#[tokio::test]
async fn a_connection_idle_past_the_idle_timeout_is_not_reused() {
    let s = server(vec![]).await;
    let c = HttpClient::with_idle_timeout(Duration::from_secs(5), Duration::ZERO);
    let url = format!("{}/a", s.base);
    for _ in 0..3 {
        assert_eq!(get_status(&c, &url).await, 200);
    }
    assert_eq!(s.connections.load(Ordering::SeqCst), 3);
    assert_eq!(s.requests.load(Ordering::SeqCst), 3);
}

#[tokio::test]
async fn a_connection_the_server_closed_is_replaced_not_failed() {
    let s = server(vec![Act::AnswerThenClose]).await;
    let c = client();
    let url = format!("{}/a", s.base);
    assert_eq!(get_status(&c, &url).await, 200);
    // Wait (with a deadline) until the client has seen the close.
    tokio::time::timeout(Duration::from_secs(10), async {
        while c.idle_open(&s.base) > 0 {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await
    .expect("the client never saw the server close the connection");
    assert_eq!(get_status(&c, &url).await, 200);
    assert_eq!(s.connections.load(Ordering::SeqCst), 2);
    assert_eq!(s.requests.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn a_request_that_may_have_arrived_is_never_sent_again() {
    // The second request goes out on the reused connection and gets no
    // answer: an error, and the server saw it exactly once.
    let s = server(vec![Act::Answer, Act::Vanish]).await;
    let c = client();
    let url = format!("{}/v1/locks/k/acquire", s.base);
    let body = || Some(Bytes::from_static(b"{}"));
    c.send(HttpMethod::Post, &url, body()).await.unwrap();
    let e = c.send(HttpMethod::Post, &url, body()).await.unwrap_err();
    assert!(!e.is_connect(), "{e}");
    assert_eq!(s.requests.load(Ordering::SeqCst), 2);
    assert_eq!(s.connections.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_refused_connection_is_a_connect_error() {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap();
    drop(l);
    let e = client()
        .send(HttpMethod::Get, &format!("http://{addr}/"), None)
        .await
        .unwrap_err();
    assert!(e.is_connect() && !e.is_timeout(), "{e}");
    assert!(e.to_string().contains(&addr.to_string()), "{e}");
}

#[tokio::test]
async fn an_oversized_reply_is_refused() {
    let s = server(vec![Act::Huge]).await;
    let e = client()
        .send(HttpMethod::Get, &format!("{}/", s.base), None)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("exceeds"), "{e}");
}

#[tokio::test]
async fn a_bad_url_names_itself() {
    let e = client()
        .send(HttpMethod::Get, "ftp://127.0.0.1:1/", None)
        .await
        .unwrap_err();
    assert!(e.to_string().contains("ftp://127.0.0.1:1/"), "{e}");
}

#[tokio::test]
async fn https_without_a_tls_configuration_is_a_tls_error_before_any_connect() {
    let e = client()
        .send(HttpMethod::Get, "https://127.0.0.1:1/", None)
        .await
        .unwrap_err();
    assert!(e.is_tls() && e.is_connect(), "{e}");
    assert!(e.to_string().contains("no TLS configuration"), "{e}");
}

#[test]
fn split_url_takes_http_and_https_urls_and_nothing_else() {
    use Scheme::{Http, Https};
    assert_eq!(
        split_url("http://127.0.0.1:7070/v1/sessions"),
        Some((Http, "127.0.0.1:7070", "/v1/sessions"))
    );
    assert_eq!(
        split_url("http://lock:7070"),
        Some((Http, "lock:7070", "/"))
    );
    assert_eq!(
        split_url("http://[::1]:7070/x"),
        Some((Http, "[::1]:7070", "/x"))
    );
    assert_eq!(split_url("http://h/p?q=1"), Some((Http, "h", "/p?q=1")));
    assert_eq!(
        split_url("https://lock-1:7443/v1/x"),
        Some((Https, "lock-1:7443", "/v1/x"))
    );
    for bad in [
        "https://",
        "https://u@h/",
        "ftp://h/",
        "h:7070",
        "http://",
        "http:///x",
        "http://u@h/",
        "http://h?x",
    ] {
        assert_eq!(split_url(bad), None, "{bad}");
    }
}

#[test]
fn server_name_is_the_host_and_an_ip_literal_is_an_address() {
    use rustls_pki_types::ServerName;
    assert!(matches!(
        server_name("127.0.0.1:7443"),
        Some(ServerName::IpAddress(_))
    ));
    assert!(matches!(
        server_name("[::1]:7443"),
        Some(ServerName::IpAddress(_))
    ));
    match server_name("lock-1.example:7443") {
        Some(ServerName::DnsName(n)) => assert_eq!(n.as_ref(), "lock-1.example"),
        other => panic!("{other:?}"),
    }
    assert!(matches!(server_name("lock"), Some(ServerName::DnsName(_))));
}

#[test]
fn has_port_reads_v4_v6_and_names() {
    assert!(has_port("127.0.0.1:7070"));
    assert!(has_port("[::1]:7070"));
    assert!(has_port("lock:1"));
    assert!(!has_port("lock"));
    assert!(!has_port("[::1]"));
}
