//! `healthcheck URL [TIMEOUT_MS]`: the Docker healthcheck of fencepost's
//! `FROM scratch` images, which have no shell or curl. It sends one
//! `GET` over plain HTTP/1.0 to an `http://IP:PORT/PATH` URL (an IP, so no
//! name resolution is involved) and exits 0 on a 2xx status, 1 otherwise,
//! printing one line saying what it saw.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::process::ExitCode;
use std::time::Duration;

/// Splits `http://IP:PORT/PATH` into the socket address and the path.
fn parse(url: &str) -> Result<(SocketAddr, String), String> {
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| format!("{url}: only http:// URLs are supported"))?;
    let (hostport, path) = match rest.find('/') {
        Some(i) => (&rest[..i], rest[i..].to_string()),
        None => (rest, "/".to_string()),
    };
    let addr = hostport
        .parse::<SocketAddr>()
        .map_err(|e| format!("{url}: expected IP:PORT ({e})"))?;
    Ok((addr, path))
}

/// One GET; `Ok(status line)` on 2xx.
fn probe(url: &str, timeout: Duration) -> Result<String, String> {
    let (addr, path) = parse(url)?;
    let mut stream = TcpStream::connect_timeout(&addr, timeout).map_err(|e| format!("connect {addr}: {e}"))?;
    stream.set_read_timeout(Some(timeout)).map_err(|e| e.to_string())?;
    stream.set_write_timeout(Some(timeout)).map_err(|e| e.to_string())?;
    let request = format!("GET {path} HTTP/1.0\r\nHost: {addr}\r\nConnection: close\r\n\r\n");
    stream.write_all(request.as_bytes()).map_err(|e| format!("send: {e}"))?;
    let mut head = [0u8; 256];
    let n = stream.read(&mut head).map_err(|e| format!("read: {e}"))?;
    let text = String::from_utf8_lossy(&head[..n]);
    let status_line = text.lines().next().unwrap_or("").to_string();
    let code = status_line.split_whitespace().nth(1).unwrap_or("");
    if code.starts_with('2') && code.len() == 3 {
        Ok(status_line)
    } else {
        Err(format!("{url}: {status_line:?}"))
    }
}

fn main() -> ExitCode {
    let mut args = std::env::args().skip(1);
    let Some(url) = args.next() else {
        eprintln!("usage: healthcheck http://IP:PORT/PATH [TIMEOUT_MS]");
        return ExitCode::from(2);
    };
    let timeout_ms = args.next().and_then(|t| t.parse::<u64>().ok()).unwrap_or(2000);
    match probe(&url, Duration::from_millis(timeout_ms)) {
        Ok(line) => {
            println!("healthy: {url}: {line}");
            ExitCode::SUCCESS
        }
        Err(why) => {
            println!("unhealthy: {why}");
            ExitCode::FAILURE
        }
    }
}
